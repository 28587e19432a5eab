"""Compiling a tool's jitted functions side by side, before their first calls.

A tool's first call of each jitted function traces, lowers and compiles it, one after the
other: the viewer's reset, policy and game step took ~7.8 s in all on the 2-core CPU, the game
step ~5.6 s of it. XLA compiles outside the GIL, so the next function can be traced while the
previous one compiles, and the smaller compiles run beside the game step's. `compile_ahead` does
that; JAX keeps the executable of `f.lower(...).compile()` for the later calls of `f` with the
same argument types, which then run at once. Measured cold (compilation cache emptied before each
run), three interleaved pairs each: `watch_jax_agent.py` on a 30-step episode 7.8-8.3 -> 7.0-7.1
s, `play.py` to its first prompt 7.4-8.6 -> 6.4-6.6 s. The evaluator's `_start` beside its
`_advance` gained only 10.1-10.7 -> 9.6-10.1 s (both compiles are large, and share two cores),
so it compiles them in turn as before.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hackmatrix import gc_pause


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
