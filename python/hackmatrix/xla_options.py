"""XLA compile options for the jitted functions that contain the game step.

On XLA:CPU, compile time goes mostly into LLVM, once per kernel, and the game step has ~780
kernels. XLA's default backend optimisation level (3, LLVM's -O3 pipeline) unrolls their loops;
level 2 emits a third less optimised LLVM IR for the env benchmark's rollout (104.8k → 70.8k
instructions at 1024 envs), compiles it and the training chunk 0.6–1 s faster (interleaved
runs, specs/architecture.md) and steps as fast. Every jit that holds the game step uses it
(benchmarks, trainer, evaluator, viewer, play.py). Other backends keep XLA's defaults.
"""

from __future__ import annotations

import jax

_CPU_OPTIONS = {"xla_backend_optimization_level": 2}


def compiler_options() -> dict | None:
    """`compiler_options` for `jax.jit` on the default backend (initialises the backends)."""
    return dict(_CPU_OPTIONS) if jax.default_backend() == "cpu" else None
