"""XLA compile options for the jitted functions that contain the game step.

On XLA:CPU, compile time goes mostly into LLVM, once per kernel, and the game step has ~780
kernels. XLA's default backend optimisation level (3, LLVM's -O3 pipeline) unrolls their loops;
level 2 emits a third less optimised LLVM IR for the env benchmark's rollout (104.8k → 70.8k
instructions at 1024 envs), compiles it and the training chunk 0.6–1 s faster (interleaved
runs, specs/architecture.md) and steps as fast. Every jit that holds the game step uses it
(benchmarks, trainer, evaluator, viewer, play.py). Other backends keep XLA's defaults.

A program that runs once per process (the trainer's `init`: the first envs and the network's
initial parameters) compiles at level 0 instead: 2.3 → 1.5 s at 256 envs, for code that runs
once in 50 ms instead of 25 ms. It compiles beside the training chunk, so on a 2-core CPU a
shorter compile leaves the chunk's compile more of the machine (first `[train]` line ~1 s
sooner, specs/architecture.md). Its float results may differ from level 2 in the last bit
(LLVM's instruction selection), so it suits only programs whose output no other compile of
the same function must reproduce.
"""

from __future__ import annotations

import jax

_CPU_OPTIONS = {"xla_backend_optimization_level": 2}
_CPU_RUN_ONCE_OPTIONS = {"xla_backend_optimization_level": 0}


def compiler_options(run_once: bool = False) -> dict | None:
    """`compiler_options` for `jax.jit` on the default backend (initialises the backends);
    `run_once` for a program that runs once per process (see the module docstring)."""
    if jax.default_backend() != "cpu":
        return None
    return dict(_CPU_RUN_ONCE_OPTIONS if run_once else _CPU_OPTIONS)
