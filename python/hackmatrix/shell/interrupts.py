"""SIGINT and SIGTERM handlers that raise, made reliable.

Python runs a signal handler in the main thread between two bytecodes, wherever it is, and two
places there cannot take an exception:

- a callback whose exceptions Python ignores (JAX's garbage-collection callback runs at most
  collections; `__del__` methods and weakref callbacks are others): the exception is printed as
  "Exception ignored in ..." and lost, and the program carries on as if no signal had come;
- an import of JAX: its extension modules call back into Python while they load, and an
  exception there aborts the interpreter (`terminate called after throwing an instance of
  'nanobind::python_error'`).

`signals_raise()` installs handlers that raise `Interrupted` only outside imports (inside one
the signal is sent again a moment later), plus an unraisable hook that sends again the signal of
an `Interrupted` lost in a callback, so that the handler runs once more in the code the user is
waiting on. Signals are sent again from a helper thread: a handler that ran in the hook would be
lost the same way, so a signal that arrives while the hook still runs (a loaded machine can run
the helper thread's send before the hook returns) is sent again too. `held()` only records
signals, for the imports before any handler is ready.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Long enough for the ignoring callback to have returned, short enough to go unnoticed.
REDELIVERY_DELAY_SECONDS = 0.005
# How often a signal that came during an import is sent again until the import is done.
IMPORT_RETRY_SECONDS = 0.05


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. A KeyboardInterrupt, so that code which cleans up after Ctrl-C
    treats SIGTERM the same way."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


def raise_interrupted(signum, frame):
    """A signal handler: raises `Interrupted` for the signal."""
    raise Interrupted(signal.Signals(signum).name)


def _imports(frame) -> set[int]:
    """The ids of the frames in `frame`'s stack that run a module's top-level code for an
    import (not the script's own)."""
    found = set()
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") != "__main__":
            found.add(id(frame))
        frame = frame.f_back
    return found


def _runs(frame, code) -> bool:
    """Whether `code` runs in `frame`'s stack."""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def signals_raise(handler=raise_interrupted):
    """SIGINT and SIGTERM call `handler` (which raises `Interrupted` when it interrupts) inside
    the block, outside imports, and an `Interrupted` lost in a callback is delivered again. The
    previous handlers and unraisable hook come back afterwards (the tests run many CLIs in one
    process)."""
    active = threading.Event()
    active.set()
    previous_hook = sys.unraisablehook
    # A program started by an import (its main() called from a module's top level) is not
    # "importing" for the whole block: only imports begun inside it count.
    outer_imports = _imports(sys._getframe())

    def send_again(signum, delay):
        def send():
            if active.is_set():  # not once the block has ended: the handler is no longer ours
                os.kill(os.getpid(), signum)
        threading.Timer(delay, send).start()

    def guarded(signum, frame):
        if _imports(frame) - outer_imports:
            send_again(signum, IMPORT_RETRY_SECONDS)
        elif _runs(frame, hook.__code__):
            send_again(signum, REDELIVERY_DELAY_SECONDS)
        else:
            handler(signum, frame)

    def hook(unraisable):
        if isinstance(unraisable.exc_value, Interrupted) and active.is_set():
            send_again(signal.Signals[unraisable.exc_value.signal_name], REDELIVERY_DELAY_SECONDS)
        else:
            previous_hook(unraisable)

    previous = {signum: signal.signal(signum, guarded) for signum in SIGNALS}
    sys.unraisablehook = hook
    try:
        yield
    finally:
        active.clear()
        sys.unraisablehook = previous_hook
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def held():
    """Inside the block SIGINT and SIGTERM are only recorded, by name, in the list it yields;
    the caller acts on them afterwards. For imports that run before any handler is ready."""
    names: list[str] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: names.append(
        signal.Signals(signum).name)) for signum in SIGNALS}
    try:
        yield names
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
