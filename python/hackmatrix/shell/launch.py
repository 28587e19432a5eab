"""Starting and ending a command-line program: `run(module)` is the whole of one.

At its start (`start_process`) the program opts in to what it needs from the process, which
importing the package never changes: the CPU compile mode (`xla_options`). Importing its module
then imports JAX, which reads its environment variables (JAX_ENABLE_X64, JAX_NUM_CPU_DEVICES,
...) at import and raises on a bad value: that is bad input, so the program says so in one line
and exits 2, without a traceback. A SIGINT or SIGTERM during that import (a second or two) waits
for its end and exits 7: raised inside it, it could abort the interpreter or be lost
(hackmatrix/shell/interrupts.py). At its end (`exit_process`) they end the process at once with the
exit code already decided."""

from __future__ import annotations

import importlib
import os
import signal
import sys

from hackmatrix import xla_options
from hackmatrix.shell import interrupts, stdout_reader
from hackmatrix.shell.exit_codes import EXIT_FAILURE, EXIT_INTERRUPTED
from hackmatrix.messages import error_line


def run(module: str):
    """Runs the program whose `main()` is in `module`, from `start_process` to `exit_process`
    with the exit code `main` returns."""
    start_process()
    exit_process(load_main(module)())


def start_process() -> None:
    """What every program opts in to before it imports JAX: the CPU compile mode."""
    xla_options.configure_cpu_compiler()


def load_main(module: str):
    """`module.main`; exit 2 with one line if importing `module` fails, 7 if interrupted."""
    with interrupts.held() as signals:
        try:
            main = importlib.import_module(module).main
        except Exception as error:  # any import-time failure of JAX or its plugins
            print(f"error: cannot start: {error_line(error)}", file=sys.stderr)
            sys.exit(EXIT_FAILURE)
    if signals:
        print(f"interrupted by {signals[0]} while starting", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    return main


def exit_process(code: int):
    """Ends a CLI's process with `code`. From here on SIGINT and SIGTERM end it at once with that
    same code: the outcome is decided, and a signal during the interpreter's teardown (JAX's
    clean-up takes a moment) would otherwise print a traceback ("Exception ignored in atexit
    callback") or change the exit code. After an interrupt, without the teardown: an interrupt
    can cut short an XLA compile on the Python side only (JAX's compile call checks for signals
    while XLA works on in its threads), and tearing the interpreter down under that compile
    crashes it (SIGSEGV, exit 139 instead of 7; seen with evaluate.py)."""
    def end_now(signum=None, frame=None):
        try:
            for stream in (sys.stdout, sys.stderr):
                stdout_reader.flush(stream)
        finally:
            os._exit(code)

    for signum in interrupts.SIGNALS:
        signal.signal(signum, end_now)
    if code != EXIT_INTERRUPTED:
        sys.exit(code)
    end_now()
