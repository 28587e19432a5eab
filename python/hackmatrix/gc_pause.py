"""Python's cyclic garbage collector paused while JAX traces and lowers a large program.

Tracing the game step allocates millions of short-lived objects, so the collector runs hundreds
of times, and each full collection walks every object of the process (~275k after importing JAX,
flax and optax): 0.1-0.3 s each, two or three per trace of the env benchmark's rollout, 0.3-0.8 s
of its ~3 s of tracing and lowering (measured with `gc.callbacks`, specs/performance.md). The
objects tracing drops are freed by reference counting: a collection after the trace finds no
cyclic garbage, so pausing costs no memory. The collector is paused only around tracing and
lowering, never around a run.

The trainer and `benchmark.py` also freeze what their start-up imported (`freeze_imported`,
from `launch.load_main`): frozen objects are left out of every later collection, so the
collections that still run (the trainer's work between traces) skip them. Module-level objects
live as long as the process anyway. (Measured when the viewer froze its imports and traced
unpaused: 0.23-0.26 s -> 0.06-0.07 s of collector time in its first reset and step. The viewer
and `play.py` now trace inside `paused()` instead, `tools/compile_ahead.py`.)
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused():
    """No cyclic garbage collection inside the block (restored as it was, also on errors)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def freeze_imported() -> None:
    """Moves every object alive now (after a program's imports) out of the collector's reach."""
    gc.freeze()
