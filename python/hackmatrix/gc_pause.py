"""Python's cyclic garbage collector paused while JAX traces and lowers a large program.

Tracing the game step allocates millions of short-lived objects, so the collector runs hundreds
of times, and each full collection walks every object of the process (~275k after importing JAX,
flax and optax): 0.1-0.3 s each, two or three per trace of the env benchmark's rollout, 0.3-0.8 s
of its ~3 s of tracing and lowering (measured with `gc.callbacks`, specs/performance.md). The
objects tracing drops are freed by reference counting: a collection after the trace finds no
cyclic garbage, so pausing costs no memory. The collector is paused only around tracing and
lowering, never around a run.
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
