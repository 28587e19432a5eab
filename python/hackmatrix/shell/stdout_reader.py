"""A stdout whose reader may leave (`| head`, a pager quit early): instead of failing on
BrokenPipeError with the work half done, the trainer and the evaluator keep working and drop the
rest of their output (their product is a checkpoint or a --json report), and the viewer stops
and writes the GIF of the frames shown. `standard_streams()` is what every
CLI runs its work inside."""

from __future__ import annotations

import contextlib
import os
import sys


class _ReaderMayLeave:
    """sys.stdout that drops what it is given once the reader has gone."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            _discard(self.stream)
            return len(text)

    def flush(self) -> None:
        flush(self.stream)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def keep_working_if_stdout_closes() -> None:
    """From now on a closed stdout no longer ends the program; the caller restores sys.stdout
    when it is done."""
    if sys.stdout is not None and not isinstance(sys.stdout, _ReaderMayLeave):
        sys.stdout = _ReaderMayLeave(sys.stdout)


@contextlib.contextmanager
def standard_streams():
    """Inside the block a stdout or stdin that the program was started without (`>&-`, `<&-`:
    Python then sets it to None, which print() accepts but `isatty()` and `readline()` do not)
    is /dev/null, so output goes nowhere and reads see the end of input. Afterwards sys.stdout
    and sys.stdin are put back and stdout is flushed (`flush`), on every path."""
    stdout, stdin = sys.stdout, sys.stdin
    try:
        if sys.stdout is None:
            sys.stdout = open(os.devnull, "w", encoding="utf-8")
        if sys.stdin is None:
            sys.stdin = open(os.devnull, encoding="utf-8")
        yield
    finally:
        sys.stdout, sys.stdin = stdout, stdin
        flush(stdout)


def flush(stream) -> None:
    """Flushes `stream` (a stdout); if its reader has gone, discards stdout instead, so that the
    interpreter's last flush at exit cannot fail again (exit 120)."""
    if stream is None:
        return
    try:
        stream.flush()
    except BrokenPipeError:
        _discard(stream)


def _discard(stream) -> None:
    """Points the process's stdout at /dev/null once its reader has gone, so that later writes
    and the interpreter's last flush at exit succeed instead of failing again (exit 120)."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (e.g. a test's StringIO)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)
