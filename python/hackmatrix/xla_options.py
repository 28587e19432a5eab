"""How XLA compiles the jitted functions that contain the game step, on CPU.

Two settings, both measured on the 2-core CPU in specs/performance.md ("What bounds the step on
XLA:CPU"); other backends keep XLA's defaults.

**Process-wide: the CPU compile mode** (`configure_cpu_compiler`, which each command-line
program runs at its start, `launch.start_process`; importing the package sets nothing). XLA
reads `XLA_FLAGS` once, when JAX starts its backends, so this sets them before JAX is imported.
The default mode, `fast`, has XLA:CPU emit kernels with its older fusion emitters (which keep a
loop scalar when its output reuses its input's buffer) and without loop unrolling: kept because
most CPU runs are short (smoke tests, the quickstart, the viewer, evaluation, the test suite),
and the env benchmark's rollout at 256 envs compiles in 6.9-7.3 s of CPU instead of 10.3-11.5 s
for 4-9% more CPU per env step (`benchmark.py env --num-envs 256`, each mode).
Long CPU runs should set `HACKMATRIX_CPU_COMPILE=throughput`, which leaves XLA's defaults.
Nothing is changed when an accelerator plugin is installed (unless `JAX_PLATFORMS` is `cpu`),
when `XLA_FLAGS` already sets `xla_backend_extra_options`, or when JAX is already imported (its
backends may have read the flags).

**Per jit: `compiler_options`.** XLA's default backend optimisation level (3, LLVM's -O3
pipeline) unrolls the kernels' loops: level 2 emits a third less optimised LLVM IR, compiles
0.6-1 s faster and steps as fast. A program that runs once per process (the trainer's `init`)
compiles at level 0: 2.3 → 1.5 s at 256 envs, for code that runs once in 50 ms instead of
25 ms; its float results may differ from level 2 in the last bit (LLVM's instruction
selection), so it suits only programs whose output no other compile must reproduce.
Both skip XLA's HLO verifier, which re-checks the whole module after each HLO pass that changed
it (111 times in the env benchmark's rollout, 136 in the trainer's update chunk) on the one
thread that runs the HLO passes: ~0.3 s of the rollout's compile and ~0.6 s of the chunk's. It
only checks XLA's own work: the optimised HLO and the results are the same without it.
Both also skip XLA:CPU's tree reduction rewriter, which turns every reduction over more than 32
elements into a reduce-window (windows of 32) followed by a reduce, for the precision of long
float sums. The game reduces over its 36 cells and 36 list slots everywhere, and on CPU those
reduce-windows run as slow scalar loops: without them the env benchmark's rollout at 256 envs
steps 1.08x faster, with bit-identical results (integer and boolean reductions do not depend on
the order). The trainer's few rewritten float sums (such as the gradient norm's sums of squares)
then add up in one pass: after four updates at 64 envs its losses and metrics moved by at most
a relative 1.2e-6 and its parameters by 7e-7.
And both skip XLA's while-loop invariant code motion. It hoists what a loop body computes from
loop-invariant values out of the loop and carries the results through every iteration as extra
loop state. On CPU the game's loops then run slower, not faster: without it the env benchmark's
rollout at 256 envs has 569 kernels instead of 601 and steps 1.1x faster (1.13x in the
throughput mode), and the trainer's update chunk has 845 kernels instead of 930 and 6% less
kernel time per update, with bit-identical results in both (moving code out of a loop changes
no arithmetic).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable, MutableMapping

CPU_COMPILE_VARIABLE = "HACKMATRIX_CPU_COMPILE"
CPU_COMPILE_MODES = ("fast", "throughput")
FAST_COMPILE_XLA_FLAG = ("--xla_backend_extra_options="
                         "xla_cpu_disable_new_fusion_emitters,xla_cpu_disable_loop_unrolling")

_SKIPPED_HLO_PASSES = "hlo-verifier,tree_reduction_rewriter,while-loop-invariant-code-motion"
_CPU_OPTIONS = {"xla_backend_optimization_level": 2, "xla_disable_hlo_passes": _SKIPPED_HLO_PASSES}
_CPU_RUN_ONCE_OPTIONS = {**_CPU_OPTIONS, "xla_backend_optimization_level": 0}

_cpu_compile_mode: str | None = None  # None until `configure_cpu_compiler` runs


def compiler_options(run_once: bool = False) -> dict | None:
    """`compiler_options` for `jax.jit` on the default backend (initialises the backends);
    `run_once` for a program that runs once per process (see the module docstring)."""
    import jax
    if jax.default_backend() != "cpu":
        return None
    return dict(_CPU_RUN_ONCE_OPTIONS if run_once else _CPU_OPTIONS)


def cpu_compile_mode(backend: str = "cpu") -> str | None:
    """The CPU compile mode in effect in this process ("fast" or "throughput") for a run on
    `backend`; None off CPU, where it does not apply."""
    if backend != "cpu":
        return None
    return _cpu_compile_mode or ("fast" if _has_fast_flag(os.environ) else "throughput")


def cpu_compile_label(backend: str) -> str:
    """" cpu_compile=<mode>" for a log line about a run on `backend`; "" off CPU."""
    mode = cpu_compile_mode(backend)
    return f" cpu_compile={mode}" if mode else ""


def xla_flags_for_mode(environ: MutableMapping[str, str],
                       accelerator_installed: Callable[[], bool]) -> tuple[str | None, str]:
    """(the XLA_FLAGS to set, or None to leave them; the mode that results) for an environment
    whose backends have not started yet. `accelerator_installed` is asked only when the answer
    matters (scanning the installed packages costs ~40 ms of every import)."""
    requested = environ.get(CPU_COMPILE_VARIABLE, "fast") or "fast"
    if requested not in CPU_COMPILE_MODES:
        print(f"hackmatrix: warning: {CPU_COMPILE_VARIABLE}={requested!r} is not one of "
              f"{', '.join(CPU_COMPILE_MODES)}: using 'fast'", file=sys.stderr)
        requested = "fast"
    if _has_fast_flag(environ):
        return None, "fast"
    flags = environ.get("XLA_FLAGS", "")
    if requested != "fast" or "xla_backend_extra_options" in flags:
        return None, "throughput"
    platforms = {p.strip() for p in environ.get("JAX_PLATFORMS", "").split(",") if p.strip()}
    cpu_is_default = platforms == {"cpu"} if platforms else not accelerator_installed()
    if not cpu_is_default:
        return None, "throughput"
    return f"{flags} {FAST_COMPILE_XLA_FLAG}".strip(), "fast"


def configure_cpu_compiler(environ: MutableMapping[str, str] = os.environ) -> str:
    """Set this process's CPU compile mode (see the module docstring) and return it. Once JAX
    is imported the flags are left as they are, and the mode is the one they give."""
    global _cpu_compile_mode
    if "jax" in sys.modules:
        _cpu_compile_mode = "fast" if _has_fast_flag(environ) else "throughput"
        return _cpu_compile_mode
    flags, _cpu_compile_mode = xla_flags_for_mode(environ, _accelerator_plugin_installed)
    if flags is not None:
        environ["XLA_FLAGS"] = flags
    return _cpu_compile_mode


def _has_fast_flag(environ: MutableMapping[str, str]) -> bool:
    return FAST_COMPILE_XLA_FLAG in environ.get("XLA_FLAGS", "").split()


def _accelerator_plugin_installed() -> bool:
    """Whether JAX may find a GPU or TPU: a PJRT plugin or libtpu is installed."""
    if importlib.metadata.entry_points(group="jax_plugins"):
        return True
    return any(importlib.util.find_spec(name) is not None for name in ("libtpu", "jax_plugins"))
