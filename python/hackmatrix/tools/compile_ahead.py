"""Compiling a tool's jitted functions side by side, before their first calls.

A tool's first call of each jitted function traces, lowers and compiles it, one after the
other, and the game step's compile is most of a cold start. XLA compiles outside the GIL, so the
next function can be traced while the one before it compiles, and the smaller compiles run
beside the game step's. `compile_ahead` does that for the viewer and `play.py`; JAX keeps the
executable of `f.lower(...).compile()` for the later calls of `f` with the same argument types,
which then run at once. The evaluator compiles its two functions in turn: both compiles are
large, and side by side on a small CPU they gain little.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hackmatrix.shell import gc_pause


def compile_ahead(calls) -> None:
    """Compiles each `(jitted function, args)` pair for those arguments (arrays or
    `jax.ShapeDtypeStruct`s), in the order given (callers put the longest compile, the game
    step's, first): each is traced and lowered here, in order, and compiled in a worker thread
    as soon as it is lowered; returns once all are compiled. An exception here (an interrupt) is raised at once, without waiting for the
    compiles still running: the tools then end the process (`launch.exit_process`)."""
    pool = ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="compile")
    try:
        futures = []
        for function, args in calls:
            with gc_pause.paused():
                lowered = function.lower(*args)
            futures.append(pool.submit(lowered.compile))
        for future in futures:
            future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
