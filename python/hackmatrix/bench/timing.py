"""What the benchmarks share to time things: a jitted function's first call split into tracing
and lowering (Python, JAX) and XLA's compile, and the quartiles of per-round values."""

from __future__ import annotations

import statistics
import time

from hackmatrix.shell import gc_pause


def lower_and_compile(jitted, *args):
    """(compiled, seconds tracing and lowering, seconds in XLA's compile) of `jitted` for
    `args`; garbage collection paused while tracing, as the trainer traces."""
    start = time.perf_counter()
    with gc_pause.paused():
        lowered = jitted.lower(*args)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    return compiled, lowered_at - start, time.perf_counter() - lowered_at


def quartiles(values: list[float]) -> tuple[float, float]:
    """(25th, 75th) percentiles, linearly interpolated; both the value itself for one value."""
    if len(values) == 1:
        return values[0], values[0]
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, high
