"""How XLA compiles the jitted functions that contain the game step, on CPU; other backends
keep XLA's defaults. Each choice is one line here; its measurement is in specs/performance.md
("Levers in use"), from `benchmark.py env`, `train` and `ab`.

**Process-wide: the CPU compile mode** (`configure_cpu_compiler`, which each command-line
program runs at its start, `shell/launch.start_process`; importing the package sets nothing).
XLA reads `XLA_FLAGS` once, when JAX starts its backends, so this sets them before JAX is
imported. The default mode, `fast`, has XLA:CPU emit kernels with its older fusion emitters and
without loop unrolling: most CPU runs are short (smoke tests, the quickstart, the tools, the test
suite), and it compiles about a quarter faster for a slower step. Long CPU
runs set `HACKMATRIX_CPU_COMPILE=throughput`, which leaves XLA's defaults. Nothing is changed
when an accelerator plugin is installed (unless `JAX_PLATFORMS` is `cpu`), when `XLA_FLAGS`
already sets `xla_backend_extra_options`, or when JAX is already imported.

**Per jit: `compiler_options`.**
- LLVM level 2 instead of 3: compiles faster, steps as fast (level 3 only unrolls more loops).
- Level 0 for programs that run once per process (the trainer's `init`): faster to compile for
  code that runs once; float results may differ in the last bit, so only for programs whose
  output no other compile must reproduce.
- No HLO verifier: it re-checks XLA's own work after every changing pass, on the compile's one
  thread; the optimised HLO and the results are the same without it.
- No tree reduction rewriter: it turns reductions over more than 32 elements into
  reduce-windows, which XLA:CPU runs as scalar loops; the game reduces over 36 cells and slots
  everywhere. Integer and boolean results are bit-identical; the trainer's long float sums
  (the gradient norm's) add up in one pass, moving its metrics in the last bits.
- No while-loop invariant code motion: hoisted values carried through every iteration make the
  game's loops slower on CPU; moving code out of a loop changes no arithmetic.
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
