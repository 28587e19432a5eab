"""What the three tool CLIs share: exit codes, one-line errors, an argument parser that exits 3.

Exit codes (also printed by --help):
  0  ok
  2  other failure
  3  bad arguments, or a malformed scenario file (invalid JSON or an invalid field)
  6  missing or incompatible checkpoint, run directory or input file
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK = 0
EXIT_FAILURE = 2
EXIT_BAD_ARGUMENTS = 3
EXIT_BAD_CHECKPOINT = 6

EXIT_CODES_HELP = """exit codes:
  0  ok
  2  other failure
  3  bad arguments
  6  missing or incompatible checkpoint, run directory or input file"""


class ToolError(Exception):
    """A failure the user can act on: reported as one line with its exit code, no traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE):
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentParser(argparse.ArgumentParser):
    """argparse with exit code 3 for bad arguments (argparse's own 2 means 'other failure' here)
    and the exit codes in the help text."""

    def __init__(self, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        super().__init__(**kwargs)

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_ARGUMENTS)


def run_main(prog: str, body) -> int:
    """Runs `body()` and turns every failure into a one-line message and an exit code."""
    try:
        body()
    except ToolError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        return EXIT_OK  # piped into `head`: the reader is gone, nothing is wrong
    except Exception as error:  # noqa: BLE001  (the contract is "never a traceback")
        detail = str(error).splitlines()[0] if str(error) else ""
        print(f"{prog}: error: {type(error).__name__}: {detail}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def load_scenario(path: str):
    """The game state of a scenario JSON file (rules Appendix A).

    An unreadable file raises ToolError with exit 6; a malformed one (invalid JSON or a field that
    `scenario.from_dict` rejects, named in the message) with exit 3.
    """
    import json

    from hackmatrix.game import scenario

    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        raise ToolError(f"{path}: cannot read: {error.strerror}", EXIT_BAD_CHECKPOINT) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ToolError(f"{path}: invalid JSON at line {error.lineno} column {error.colno}: "
                        f"{error.msg}", EXIT_BAD_ARGUMENTS) from None
    try:
        return scenario.from_dict(data)
    except ValueError as error:
        raise ToolError(f"{path}: {error}", EXIT_BAD_ARGUMENTS) from None
