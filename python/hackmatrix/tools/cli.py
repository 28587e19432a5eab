"""What the tool CLIs share: exit codes, one-line errors, an argument parser that exits 3,
interrupts, the up-front check of output files and the persistent compilation cache.

Exit codes: 0 ok, 2 other failure, 3 bad arguments, 6 a missing or incompatible input, 7
interrupted (SIGINT, SIGTERM). Each tool's --help lists those that apply to it, saying what
counts as a bad argument and as a missing input for that tool (`exit_codes_help`).
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import sys
import tempfile

from hackmatrix.shell import compilation_cache, frame_stack, interrupts, jax_backend, stdout_reader
# The tools read the exit codes as cli.EXIT_...
from hackmatrix.shell.exit_codes import (  # noqa: F401
    EXIT_BAD_ARGUMENTS, EXIT_BAD_CHECKPOINT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK)
from hackmatrix.messages import error_line, name_shown, one_line
from hackmatrix.training.config import MAX_SEED


def exit_codes_help(bad_arguments: str = "bad arguments", missing_input: str | None = None,
                    ok: str = "ok") -> str:
    """The exit-code block of a tool's --help, in the tool's own words: what exit 3 covers for
    it and, for a tool that reads input files, what exit 6 means (None: the tool has no 6)."""
    lines = ["exit codes:", f"  0  {ok}", "  2  other failure", f"  3  {bad_arguments}"]
    if missing_input is not None:
        lines.append(f"  6  {missing_input}")
    lines.append("  7  interrupted (SIGINT or SIGTERM)")
    return "\n".join(lines)


# A GIF stores a frame's delay in hundredths of a second in 16 bits (at most 655.35 s); longer
# pauses are what the viewer's --step is for.
MAX_SECONDS = 600.0


class ToolError(Exception):
    """A failure the user can act on: reported as one line with its exit code, no traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE):
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentParser(argparse.ArgumentParser):
    """argparse with exit code 3 for bad arguments (argparse's own 2 means 'other failure' here)
    and the exit codes in the help text: by default those of a tool that reads no input file;
    a tool that does passes its own `exit_codes_help(...)` as the epilog."""

    def __init__(self, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("epilog", exit_codes_help())
        kwargs.setdefault("allow_abbrev", False)  # full flag names only, as --help shows them
        super().__init__(**kwargs)

    def error(self, message):
        print(f"{self.prog}: error: {one_line(message)}", file=sys.stderr)
        sys.exit(EXIT_BAD_ARGUMENTS)


# Sizes that would take the machine's memory or hours, refused before any work (exit 3), as
# --help states. Evaluation plays its episodes as one batch (the trainer's --eval-episodes has
# the same bound); an episode of the game rarely lasts 2,000 steps; a GIF frame takes ~0.8 MB.
MAX_BATCHED_EPISODES = 65_536
MAX_EPISODE_STEPS = 100_000
MAX_WATCHED_EPISODES = 10_000
MAX_GIF_FRAMES = 10_000


def require_at_most(parser: argparse.ArgumentParser, limits: dict[str, tuple[int, int]]) -> None:
    """Exit 3 naming the first flag of `limits` ({flag: (value, maximum)}) over its maximum."""
    for flag, (value, maximum) in limits.items():
        if value > maximum:
            parser.error(f"{flag} must be at most {maximum:,}, got {value}")


def require_at_least_one(parser: argparse.ArgumentParser, counts: dict[str, int]) -> None:
    """Exit 3 naming the first flag of `counts` ({flag: value}) whose value is below 1, and
    that value, as the trainer words it."""
    for flag, value in counts.items():
        if value < 1:
            parser.error(f"{flag} must be >= 1, got {value}")


def seconds(text: str) -> float:
    """argparse type of a pause: a finite number of seconds from 0 to MAX_SECONDS."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_SECONDS:g}, got {text!r}")
    return value


def seed(text: str) -> int:
    """argparse type of a random seed: an integer in [0, 2**32 - 1], as the trainer takes
    (JAX's PRNGKey holds 32 bits; a larger value would fail only after the tool's set-up)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in [0, {MAX_SEED}], got {value}")
    return value


def agent(text: str) -> int:
    """argparse type of `--agent`: an agent's number, an integer >= 0 (whether the file holds
    it is known once it is read)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


AGENT_HELP = ("which agent of a run trained with --num-seeds K to load, 0 to K-1 (default 0; a "
              "file of one agent holds agent 0 only)")


def input_path(text: str) -> str:
    """argparse type of a path the tool reads: not empty (most often an unset shell variable,
    which would otherwise read as the current directory)."""
    if not text:
        raise argparse.ArgumentTypeError("the path is empty")
    return text


def _is_training_output(name: str) -> bool:
    from hackmatrix.training import checkpoint, metrics
    return checkpoint.is_policy_file(name) or name in (metrics.METRICS_FILE, metrics.SUMMARY_FILE)


def check_output_file(path: str, flag: str, inputs=()) -> pathlib.Path:
    """Makes sure `path` can be written before any work starts, so a typo never costs a whole
    run: its directory must exist and accept a new file, and the path must be new or a regular
    file (the output replaces it: a device or a pipe must not become a file) that a training run
    did not write and that is not one of the files the command reads (`inputs`): a typo must
    not turn a checkpoint into a GIF. ToolError with exit 3 otherwise. Nothing is left behind
    (an existing file is untouched)."""
    if not path:
        raise ToolError(f"{flag}: the path is empty", EXIT_BAD_ARGUMENTS)
    try:
        return _checked_output_file(path, flag, inputs)
    except (OSError, ValueError) as error:  # a name too long, a NUL byte: no such file can be
        detail = error.strerror if isinstance(error, OSError) else error   # made
        raise ToolError(f"{flag} {path}: cannot be written ({detail})", EXIT_BAD_ARGUMENTS) from None


def _checked_output_file(path: str, flag: str, inputs) -> pathlib.Path:
    output = pathlib.Path(path)
    folder = output.parent
    if output.is_dir():
        raise ToolError(f"{flag} {path}: is a directory", EXIT_BAD_ARGUMENTS)
    if output.exists() and not output.is_file():
        raise ToolError(f"{flag} {path}: is not a regular file (a device, pipe or socket)",
                        EXIT_BAD_ARGUMENTS)
    # A new file with such a name is refused too: in a run directory it would pass for the
    # run's newest checkpoint or params file and break --resume and the tools' run-dir lookup.
    if _is_training_output(output.name):
        verb = "would replace" if output.is_file() else "would pose as"
        raise ToolError(f"{flag} {path}: {verb} a file of a training run (checkpoint, "
                        "params, metrics or summary): choose another name", EXIT_BAD_ARGUMENTS)
    read = [source for source in inputs if source and output.is_file()
            and os.path.isfile(source) and os.path.samefile(output, source)]
    if read:
        raise ToolError(f"{flag} {path}: is {read[0]}, which this command reads",
                        EXIT_BAD_ARGUMENTS)
    if not folder.is_dir():
        existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            raise ToolError(f"{flag} {path}: {existing} is not a directory", EXIT_BAD_ARGUMENTS)
        raise ToolError(f"{flag} {path}: directory {folder} does not exist", EXIT_BAD_ARGUMENTS)
    # A real probe rather than os.access: root passes every permission test, yet cannot create
    # files in /proc or on a read-only mount. The output is written the same way, as a temp file
    # in this directory renamed over the path (training.atomic_files.atomic_write), so only the
    # directory matters.
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{output.name}.", suffix=".probe"):
            pass
    except OSError as error:
        raise ToolError(f"{flag} {path}: cannot create a file in {folder} ({error.strerror})",
                        EXIT_BAD_ARGUMENTS) from None
    return output


def start_jax(prog: str) -> None:
    """The persistent compilation cache (`hackmatrix/shell/compilation_cache.py`), so that a tool's
    next start loads the game step instead of compiling it (a directory it cannot use is a
    warning on stderr), then JAX's backends (`jax_backend.start`: one that cannot start is an
    error that says why)."""
    compilation_cache.enable(lambda message: print(f"{prog}: warning: {message}",
                                                   file=sys.stderr))
    jax_backend.start()


def run_main(prog: str, body) -> int:
    """Runs `body()` and turns every failure into a one-line message and an exit code.

    SIGINT and SIGTERM raise `interrupts.Interrupted` in the main thread (exit 7; it is a
    KeyboardInterrupt, so the viewer writes its GIF on either). A closed stdout or stdin
    (`>&-`, `<&-`) reads as /dev/null. `body` runs with room on the frame stack for JAX's
    tracing (`frame_stack`)."""
    try:
        # The streams are put back and stdout flushed on every path, so that the exit code
        # stays the one returned.
        with stdout_reader.standard_streams(), interrupts.signals_raise():
            frame_stack.with_room(body)
    except ToolError as error:
        print(f"{prog}: error: {one_line(str(error))}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as interrupt:
        name = (interrupt.signal_name if isinstance(interrupt, interrupts.Interrupted)
                else "SIGINT")
        print(f"{prog}: interrupted by {name}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK  # piped into `head`: the reader is gone, nothing is wrong
    except Exception as error:  # noqa: BLE001  (the contract is "never a traceback")
        print(f"{prog}: error: {error_line(error)}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


class _DuplicateKey(ValueError):
    pass


def _object_without_duplicate_keys(pairs):
    # `json` keeps the last of repeated keys; in a hand-written scenario the other value was
    # meant too, so a repeat is an error rather than a silent choice.
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(f"{name_shown(key)}: appears twice in one object")
        result[key] = value
    return result


def load_scenario(path: str):
    """The game state of a scenario JSON file (rules Appendix A).

    An unreadable file raises ToolError with exit 6; a malformed one (invalid JSON, a key repeated
    in one object, or a field that `scenario.from_dict` rejects, named in the message) with exit 3.
    """
    import json

    from hackmatrix.game import scenario

    if not path:
        raise ToolError("--scenario: the path is empty", EXIT_BAD_ARGUMENTS)
    try:
        with open(path, encoding="utf-8-sig") as file:  # a byte-order mark, as Notepad writes
            text = file.read()
    except OSError as error:
        raise ToolError(f"{path}: cannot read: {error.strerror}", EXIT_BAD_CHECKPOINT) from None
    except UnicodeDecodeError:
        raise ToolError(f"{path}: not a JSON text file (not UTF-8)", EXIT_BAD_ARGUMENTS) from None
    try:
        data = json.loads(text, object_pairs_hook=_object_without_duplicate_keys)
    except json.JSONDecodeError as error:
        raise ToolError(f"{path}: invalid JSON at line {error.lineno} column {error.colno}: "
                        f"{error.msg}", EXIT_BAD_ARGUMENTS) from None
    except _DuplicateKey as error:
        raise ToolError(f"{path}: {error}", EXIT_BAD_ARGUMENTS) from None
    except RecursionError:
        raise ToolError(f"{path}: nested too deeply to be a scenario", EXIT_BAD_ARGUMENTS) from None
    except ValueError as error:  # e.g. a number of over 4300 digits, which Python will not read
        raise ToolError(f"{path}: invalid JSON: {error}", EXIT_BAD_ARGUMENTS) from None
    try:
        return scenario.from_dict(data)
    except ValueError as error:
        raise ToolError(f"{path}: {error}", EXIT_BAD_ARGUMENTS) from None
