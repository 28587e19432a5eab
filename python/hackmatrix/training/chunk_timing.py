"""A dispatched chunk and the time its outputs became ready, measured apart from the main
thread's other work."""

from __future__ import annotations

import threading
import time
from typing import Callable, NamedTuple


class DispatchedChunk(NamedTuple):
    outputs: tuple       # (runner, metrics), still being computed when dispatched
    num_active: int      # the updates it runs
    start: float         # perf_counter at dispatch
    ready_at: Callable[[], float]  # perf_counter when its outputs were ready (waits for them)


def watch_readiness(outputs) -> Callable[[], float]:
    """ready_at: a thread waits for `outputs`, so that the time they became ready is known even
    while the main thread is busy with something else (wandb's start), which is then not counted
    as training time. A computation's error is left to the main thread, which meets it when it
    reads the outputs. Not a daemon thread: one blocked in XLA while the interpreter shuts down
    could abort it; at a normal exit the interpreter joins it (the chunk ends first), and an
    interrupted session ends with `os._exit` (`launch.exit_process`), which waits for nothing."""
    import jax
    ready = []

    def wait():
        try:
            jax.block_until_ready(outputs)
        except Exception:  # noqa: BLE001  (raised again where the outputs are read)
            pass
        ready.append(time.perf_counter())

    watcher = threading.Thread(target=wait, name="first-chunk")
    watcher.start()

    def ready_at() -> float:
        watcher.join()
        return ready[0]
    return ready_at
