"""Python's cyclic garbage collector paused while JAX traces and lowers a large program.

Tracing the game step allocates millions of short-lived objects, so the collector runs hundreds
of times, and each full collection walks every object of the process (~275k after importing JAX,
flax and optax). The objects tracing drops are freed by reference counting: a collection after
the trace finds no cyclic garbage, so pausing costs no memory. The collector is paused only
around tracing and lowering, never around a run, and is restored as it was.

Kept because the collector's CPU time while tracing and lowering the env benchmark's rollout at
256 envs (1.7 s in all) is 0.15-0.39 s running and 0.02 s paused (`benchmark.py env --num-envs
256`), and over a short training run 0.38-0.43 s running and 0.16-0.19 s paused. Freezing what a
program imported (`gc.freeze`) is not done: with tracing paused, that training run's collector
time was 0.20 s unfrozen against 0.16-0.19 s frozen.
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
