"""Seeded fuzz of what the tools read: metrics files (plot_metrics.py), typed commands (play.py)
and command lines (watch_jax_agent.py, evaluate.py), against the contract of README "Exit
codes" and specs/agent-tools.md: 0 done, 3 bad arguments or an output file that cannot be
written or would replace a training run's file (checked before any work), 6 a missing or
incompatible input, every failure one line `prog: error: ...` on stderr, never a traceback.

Every script runs in-process (`conftest.load_script`), so play.py compiles its step once for
the whole module. Cases come from random.Random(SEED) and an oracle written from the docs:
  - plot_metrics.py: metrics files mixing records (known curves, unknown keys, repeated keys,
    NaN/inf/null/bool/string/nested/huge-but-finite values, missing, repeated and decreasing
    `update`s) with blank lines, text that is not JSON, JSON that is not an object, truncated
    records (a run killed mid-write, then resumed) and undecodable bytes, the last line cut
    or not. A file with a record plots (exit 0, "wrote FILE (N records)", a PNG whose curves are
    exactly the numeric finite points of the records, nothing on stderr); one without exits 6,
    writing nothing. Also: an empty, binary or very long file, a directory or FIFO in the
    file's place, and output paths that must be refused (exit 3, before the metrics are read)
    or replaced; training run files are never touched.
  - play.py: sessions of random command lines (moves in every documented spelling, action
    numbers in and out of range, program names in odd case and spacing, junk text, control
    characters, unicode, undecodable bytes as stdin passes them on, a very long line, blank
    lines, `save` to good and refused paths, quit, end of input in the middle of a line),
    replayed by an independent oracle on the game API with play.py's keys: each line gets its
    documented answer (a refusal is one line and leaves the board as it was; a valid action
    prints the reward and the oracle's next board), a saved file is the oracle's state, and the
    session ends with exit 0 at quit, game over or end of input.
  - watch_jax_agent.py and evaluate.py: every value of every flag alone (valid and bad:
    zero, negative, floats, NaN/inf, huge, empty, 5000 digits; output paths to a missing
    folder, a folder, a device, a FIFO, a run's files, the checkpoint read under another name,
    /proc), after a valid command line and after ones that fail later with exit 6 (so a bad
    value must be refused first); then random command lines mixing them, spelled `--flag value`,
    `--flag=value` or abbreviated (refused: full names only), with repeated and unknown flags,
    stray words and a missing last value. Loading the policy, watching and evaluating are
    replaced by a stop (`Reached`), so nothing compiles; a case either reaches it with nothing
    on stderr or exits 3 or 6 with one line, in the order of the checks, leaving the workspace
    as it was.
Inputs that once broke the contract have tests of their own below and stay out of the random
pools.
"""

import contextlib
import io
import json
import math
import os
import random
import string
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import pytest
from PIL import Image

from conftest import load_script
from hackmatrix import game, xla_options
from hackmatrix.game import constants as C
from hackmatrix.game import scenario
from hackmatrix.tools import cli, evaluation, plotting, policy, viewer

SEED = 20240613
PLOT = load_script("plot_metrics.py")
PLAY = load_script("play.py")
WATCH = load_script("watch_jax_agent.py")
EVALUATE = load_script("evaluate.py")

REACHED = "reached"  # watch/evaluate passed every check and was about to load the policy


class Reached(BaseException):
    """Stands in for loading a policy, watching and evaluating."""


@dataclass(frozen=True)
class Outcome:
    code: object  # the exit code (returned, or raised as SystemExit by argparse), or REACHED
    out: str
    err: str


def run_cli(main, argv) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
        except Reached:
            code = REACHED
    return Outcome(code, out.getvalue(), err.getvalue())


def assert_one_line_error(outcome: Outcome, prog: str, code: int, context=""):
    assert outcome.code == code, (context, outcome)
    assert outcome.err.startswith(f"{prog}: error: "), (context, outcome.err)
    assert outcome.err.count("\n") == 1 and outcome.err.endswith("\n"), (context, outcome.err)
    assert "Traceback" not in outcome.err


def snapshot(folder: Path) -> dict:
    """Every file under `folder` with its bytes (a FIFO by name only: reading it would block)."""
    files = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(root, name)
            files[path] = path.read_bytes() if path.is_file() else None
    return files


# ------------------------------------------------------------------------------------------
# plot_metrics.py

# Curves whose legend label is known, so that the drawn lines can be matched to their keys.
CURVE_LABELS = {"train/entropy": "entropy", "train/approx_kl": "approx_kl", "train/sps": "sps",
                "train/mean_episode_return": "mean_episode_return", "stats/win_rate": "won",
                "actions/move_frac": "move",
                **{f"reward/{name}": name for name in C.REWARD_COMPONENTS[:2]}}
IGNORED_KEYS = ("", "unknown/key", "train/entropy/extra", "ünï")
NUMBERS = [0, 1, -3, 7, 2.5, -0.125, 1e-300, 5e-324, 1e30, -1e30, 3.4e38, 10**20, -(10**18)]
# JSON texts of values that are not plotted (spec: "non-numeric or NaN values ... skipped").
NOT_NUMBERS = ["NaN", "Infinity", "-Infinity", "null", "true", "false", '"3"', '""',
               '"ünï ✓"', '{"a": {"b": [1]}}', "[1, 2]", '"$ one dollar"']
NOT_JSON = ["not json", "{", "}{", "update: 3", "{'update': 1}", '{"update": 1,}', "# comment",
            '{"update": 1} trailing', "[", '{"update": nan}']
NOT_OBJECTS = ["[1, 2]", "3", '"text"', "null", "true", '[{"update": 1}]', "-0.5e3"]
BLANKS = ["", "   ", "\t \t"]


def _value_text(rng) -> str:
    if rng.random() < 0.7:
        return json.dumps(rng.choice(NUMBERS))
    return rng.choice(NOT_NUMBERS)


def _record_text(rng, update: int, x_keys) -> str:
    """A record as its JSON text: the `x_keys` (update, timesteps) mostly, their values mostly
    `update` (missing, repeated, decreasing or odd otherwise); some curves; sometimes ignored
    keys and a key given twice."""
    entries = []
    for key in x_keys:
        if rng.random() < 0.8:
            value = update * (128 if key == "timesteps" else 1)
            entries.append((key, json.dumps(value) if rng.random() < 0.9 else _value_text(rng)))
    for key in rng.sample(sorted(CURVE_LABELS), rng.randint(0, 4)):
        entries.append((key, _value_text(rng)))
    for key in rng.sample(IGNORED_KEYS, rng.randint(0, 1)):
        entries.append((key, _value_text(rng)))
    if entries and rng.random() < 0.1:  # json keeps the last of repeated keys
        entries.append((rng.choice(entries)[0], _value_text(rng)))
    rng.shuffle(entries)
    return "{" + ", ".join(f"{json.dumps(key)}: {value}" for key, value in entries) + "}"


def _undecodable_bytes(rng) -> bytes:
    # Bytes above 0x7f and control characters: text with no JSON in it, whatever the splits.
    return bytes(rng.choice([*range(0x80, 0x100), 0, 7, 0x0b, 0x1b]) for _ in range(20))


@dataclass(frozen=True)
class MetricsFile:
    data: bytes
    records: list  # the JSON texts of the records it holds, in order


def fuzzed_metrics_file(rng) -> MetricsFile:
    """Lines of every kind; a quarter of the files have no record at all. Records log update
    and timesteps, or update only, or neither (the x-axis falls back to the record index)."""
    with_records = rng.random() < 0.75
    x_keys = rng.choice([("update", "timesteps")] * 2 + [("update",), ()])
    lines, records, update = [], [], 0
    for _ in range(rng.randint(1, 60)):
        kind = rng.choice(["record"] * 6 * with_records + ["blank", "not json", "not object",
                                                           "truncated", "bytes"])
        update += rng.choice([1, 1, 1, 0, -2])  # repeated and decreasing: a resumed run
        if kind == "record":
            text = _record_text(rng, update, x_keys)
            records.append(text)
            lines.append(text.encode())
        elif kind == "truncated":
            text = _record_text(rng, update, x_keys)
            lines.append(text[:rng.randrange(len(text) - 1)].encode())
        elif kind == "bytes":
            lines.append(_undecodable_bytes(rng))
        else:
            pool = {"blank": BLANKS, "not json": NOT_JSON, "not object": NOT_OBJECTS}[kind]
            lines.append(rng.choice(pool).encode())
    ending = rng.choice(["\n", "", "cut"])  # a last line cut mid-record: a run killed mid-write
    data = b"\n".join(lines)
    if ending == "cut":
        text = _record_text(rng, update + 1, x_keys)
        data += b"\n" + text[:rng.randrange(len(text) - 1)].encode()
    return MetricsFile(data + ending.encode() if ending == "\n" else data, records)


def _number(value):
    """specs/agent-tools.md: numbers within plotting.PLOTTABLE_LIMIT are drawn."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value if abs(value) <= plotting.PLOTTABLE_LIMIT else None


def expected_curves(record_texts) -> tuple[str, dict]:
    """The x-axis label and {legend label: (xs, ys)} the spec promises: against timesteps, else
    update, else the record index; only points whose x and y are finite numbers."""
    records = [json.loads(text) for text in record_texts]
    x_key = next((key for key in ("timesteps", "update")
                  if any(_number(record.get(key)) is not None for record in records)), None)
    curves = {}
    for key, label in CURVE_LABELS.items():
        points = [(index if x_key is None else _number(record.get(x_key)),
                   _number(record.get(key))) for index, record in enumerate(records)]
        points = [point for point in points if None not in point]
        if points:
            curves[label] = tuple(map(list, zip(*points)))
    return x_key or "record", curves


@pytest.fixture
def drawn_figures(monkeypatch):
    """The figures plot_run draws, kept open for inspection instead of closed."""
    figures, close = [], plotting.plt.close
    monkeypatch.setattr(plotting.plt, "close", figures.append)
    yield figures
    for figure in figures:
        close(figure)


def drawn_curves(figure) -> dict:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for ax in figure.axes for line in ax.get_lines()
            if not line.get_label().startswith("limit")}


def assert_png(path: Path):
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 1000


def assert_plotted(outcome: Outcome, output: Path, count: int, context=""):
    assert outcome == Outcome(0, f"wrote {output} ({plotting.records_text(count)})\n", ""), (
        context, outcome)
    assert_png(output)


def assert_refused_with_6(outcome: Outcome, run_dir: Path, before: dict, context=""):
    assert_one_line_error(outcome, "plot_metrics.py", cli.EXIT_BAD_CHECKPOINT, context)
    assert outcome.out == "" and snapshot(run_dir) == before, context


def test_fuzzed_metrics_files_plot_their_records_or_exit_6(tmp_path, drawn_figures):
    rng = random.Random(SEED)
    for case in range(10):
        metrics = fuzzed_metrics_file(rng)
        run_dir = tmp_path / f"run_{case}"
        run_dir.mkdir()
        (run_dir / "metrics.jsonl").write_bytes(metrics.data)
        before = snapshot(run_dir)
        outcome = run_cli(PLOT, [str(run_dir)])
        context = (case, metrics.data[-300:])
        if not metrics.records:
            assert_refused_with_6(outcome, run_dir, before, context)
            continue
        assert_plotted(outcome, run_dir / "training_curves.png", len(metrics.records), context)
        figure = drawn_figures.pop()
        x_label, curves = expected_curves(metrics.records)
        assert drawn_curves(figure) == curves, context
        title = figure._suptitle.get_text()
        assert title.startswith(f"{run_dir.name}: {plotting.records_text(len(metrics.records))}"
                                f", last {x_label} "), (context, title)


def test_a_long_live_run_plots_all_but_its_cut_last_line(tmp_path):
    run_dir = tmp_path / "long"
    run_dir.mkdir()
    lines = [json.dumps({"update": u, "timesteps": 128 * u, "train/entropy": 1 / u})
             for u in range(1, 20_001)]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + '\n{"update": 20001, "time')
    assert_plotted(run_cli(PLOT, [str(run_dir)]), run_dir / "training_curves.png", 20_000)


@pytest.mark.parametrize("make_metrics", [
    pytest.param(lambda path: path.write_bytes(b""), id="empty"),
    pytest.param(lambda path: path.write_text("\n \n\t\n"), id="blank-lines"),
    pytest.param(lambda path: path.write_bytes(bytes(range(256)) * 40), id="binary"),
    pytest.param(lambda path: path.write_text('{"update": 1, "train/entr'), id="one-cut-line"),
    pytest.param(lambda path: path.mkdir(), id="a-directory"),
    pytest.param(os.mkfifo, id="a-fifo"),  # is_file() is false: never opened, so never blocks
    pytest.param(lambda path: path.symlink_to(path.parent / "absent"), id="dangling-link"),
])
def test_metrics_that_cannot_be_plotted_exit_6_writing_nothing(make_metrics, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    make_metrics(run_dir / "metrics.jsonl")
    before = snapshot(run_dir)
    for source in (run_dir, run_dir / "metrics.jsonl"):
        outcome = run_cli(PLOT, [str(source)])
        assert_refused_with_6(outcome, run_dir, before, source)
        if source == run_dir and (run_dir / "metrics.jsonl").is_dir():
            assert outcome.err.endswith(
                f"{run_dir / 'metrics.jsonl'} is a directory, not a metrics file\n"), outcome.err


def test_unreadable_metrics_exit_6(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    metrics = run_dir / "metrics.jsonl"
    metrics.write_text('{"update": 1}\n')
    # What a user without read permission meets (root reads any file, so chmod cannot show it).
    opened = Path.open

    def refuse_the_metrics(path, *args, **kwargs):
        if Path(path) == metrics:
            raise PermissionError(13, "Permission denied", str(path))
        return opened(path, *args, **kwargs)

    before = snapshot(run_dir)
    with monkeypatch.context() as patched:
        patched.setattr(Path, "open", refuse_the_metrics)
        outcome = run_cli(PLOT, [str(run_dir)])
    assert_refused_with_6(outcome, run_dir, before)
    assert "cannot read" in outcome.err and "Permission denied" in outcome.err


RUN_FILES = ("metrics.jsonl", "summary.json", "checkpoint_2.pkl", "params_2.npz",
             "final_params.npz")


@pytest.fixture
def plottable_run(tmp_path) -> Path:
    """A run directory with one record and every file a training run writes."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in RUN_FILES:
        (run_dir / name).write_bytes(f"{name} of the run\n".encode())
    (run_dir / "metrics.jsonl").write_text('{"update": 1, "train/entropy": 1.0}\n')
    return run_dir


@pytest.mark.parametrize("output", [
    *[f"run/{name}" for name in RUN_FILES],
    "copy/metrics.jsonl",  # by name, wherever it is
    "run/metrics_link.png",  # the metrics file read, under another name (RUN_DIR names it)
    "run", "absent/curves.png", "", "/dev/null", "fifo", "/proc/curves.png",
])
def test_refused_outputs_exit_3_before_reading_and_change_nothing(output, plottable_run):
    root = plottable_run.parent
    (root / "copy").mkdir()
    (root / "copy" / "metrics.jsonl").write_text("another run's metrics\n")
    os.link(plottable_run / "metrics.jsonl", plottable_run / "metrics_link.png")
    os.mkfifo(root / "fifo")
    target = output if output.startswith("/") or not output else str(root / output)
    before = snapshot(root)
    sources = [plottable_run / "metrics.jsonl"]
    if "link" not in output:  # refused as the file read, which only a RUN_DIR naming it shows
        sources.append(root / "absent_run")  # refused before the missing run is noticed
    for source in sources:
        outcome = run_cli(PLOT, [str(source), "-o", target])
        assert_one_line_error(outcome, "plot_metrics.py", cli.EXIT_BAD_ARGUMENTS, source)
        assert outcome.err.startswith(f"plot_metrics.py: error: -o {target}".rstrip())
        assert outcome.out == "" and snapshot(root) == before


def test_the_default_output_is_refused_when_a_folder_is_in_its_place(plottable_run):
    (plottable_run / "training_curves.png").mkdir()
    before = snapshot(plottable_run)
    outcome = run_cli(PLOT, [str(plottable_run)])
    assert_one_line_error(outcome, "plot_metrics.py", cli.EXIT_BAD_ARGUMENTS)
    assert snapshot(plottable_run) == before


@pytest.mark.parametrize("output", ["run/training_curves.png", "odd name ünï"])
def test_an_existing_plain_file_is_replaced_by_the_plot(output, plottable_run):
    target = plottable_run.parent / output
    target.write_text("an earlier plot")
    before = snapshot(plottable_run.parent)
    assert_plotted(run_cli(PLOT, [str(plottable_run), "-o", str(target)]), target, 1)
    after = snapshot(plottable_run.parent)
    assert {path for path in after if after[path] != before[path]} == {target}


TWO_RECORDS = ('{"update": 1, "timesteps": 10, "train/entropy": 1.0}\n'
               '{"update": 2, "timesteps": 20, "train/entropy": 0.5}\n')
PLOT_SKIPS = {
    # A number too large for a float: skipped (once an OverflowError from math.isfinite).
    "int-beyond-float": ("run", TWO_RECORDS + '{"update": 3, "train/entropy": 1'
                         + "0" * 400 + "}\n"),
    # Lines json.loads refuses with a plain ValueError or a RecursionError: skipped.
    "5000-digit-int": ("run", TWO_RECORDS + '{"update": 3, "train/sps": ' + "9" * 5000 + "}\n"),
    "deeply-nested": ("run", TWO_RECORDS + "[" * 100_000 + "]" * 100_000 + "\n"),
    # Text where the title's x value was: matplotlib reads "$...$" as mathtext, and a lone
    # surrogate cannot be drawn; the title shows the newest numeric x instead.
    "mathtext-x": ("run", TWO_RECORDS + '{"update": 3, "timesteps": "$\\\\foo$"}\n'),
    "surrogate-x": ("run", TWO_RECORDS + '{"update": 3, "timesteps": "\\ud800"}\n'),
    # A run name the trainer accepts (--run-name) that is bad mathtext: drawn as plain text.
    "mathtext-run-name": ("lr$\\foo$", TWO_RECORDS),
}
# Finite values of both signs near the float limit, whose span overflows matplotlib's ticker
# (once exit 2): skipped beyond plotting.PLOTTABLE_LIMIT.
HUGE_FINITE_SPAN = TWO_RECORDS + ('{"update": 3, "timesteps": 30, "train/entropy": 1e308}\n'
                                  '{"update": 4, "timesteps": 40, "train/entropy": -1e308}\n')


def plot_run(tmp_path, run_name, text) -> Outcome:
    run_dir = tmp_path / run_name
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text(text)
    return run_cli(PLOT, [str(run_dir), "-o", str(tmp_path / "curves.png")])


@pytest.mark.parametrize("case", PLOT_SKIPS)
def test_plot_skips_a_value_or_line_it_cannot_draw(case, tmp_path):
    outcome = plot_run(tmp_path, *PLOT_SKIPS[case])
    assert outcome.code == 0 and outcome.err == "", outcome


def test_plot_skips_values_whose_span_overflows_the_axis(tmp_path):
    outcome = plot_run(tmp_path, "run", HUGE_FINITE_SPAN)
    assert outcome.code == 0 and outcome.err == "", outcome


# ------------------------------------------------------------------------------------------
# play.py

SCENARIOS = {
    "rich": {"player": {"row": 2, "col": 2, "hp": 3, "credits": 12, "energy": 12,
                        "dataSiphons": 1},
             "enemies": [{"type": "virus", "row": 2, "col": 4, "hp": 2},
                         {"type": "daemon", "row": 5, "col": 2, "hp": 3},
                         {"type": "glitch", "row": 0, "col": 0, "hp": 1}],
             "transmissions": [{"row": 4, "col": 4, "turnsRemaining": 2,
                                "enemyType": "cryptog"}],
             "blocks": [{"row": 3, "col": 2, "type": "data", "points": 3, "spawnCount": 1},
                        {"row": 1, "col": 3, "type": "program", "program": "WARP",
                         "spawnCount": 0}],
             "resources": [{"row": 2, "col": 1, "credits": 2}],
             "ownedPrograms": list(C.PROGRAM_NAMES)},
    "poor": {"player": {"row": 0, "col": 0, "credits": 3, "energy": 1},
             "blocks": [{"row": 1, "col": 0, "type": "data", "points": 1}],
             "enemies": [{"type": "virus", "row": 4, "col": 4, "hp": 1}],
             "ownedPrograms": ["SIPH+", "WARP", "ROW", "EXCH", "WAIT"]},
    "dying": {"player": {"row": 3, "col": 3, "hp": 0}, "ownedPrograms": ["WAIT"]},  # any step
}
DIRECTION_SPELLINGS = {0: ["w", "W", "up", " Up ", "\x1b[A"], 1: ["s", "S", "down", "\x1b[B"],
                       2: ["a", "left", "LEFT\t", "\x1b[D"], 3: ["d", "right", "\x1b[C"],
                       4: ["x", "X", "siphon", " SIPHON"]}
BLANK_COMMANDS = ["", " ", "\t\t", " \x0b\x0c ", "\u3000"]  # all whitespace to str.strip
QUIT_SPELLINGS = ["q", "Q", "quit", " EXIT "]
# Text that names nothing: "!" keeps it from being a number, a program or a command.
JUNK_PIECES = [*string.ascii_letters, *string.digits, *"+-_ .,;'\"\\/$%", "é", "ß", "€", "😀",
               "\u202e", "\u0301", "\x00", "\x07", "\x0b", "\x1c", "\u2028", "\udcff"]
NOT_COMMANDS = ["bogus", "--5", "1.0", "²", "١", "w w", "ww", "q!", "savegame x.json",
                "quit now", "0x1", "1e1", "!" + "z" * 20_000]


@dataclass(frozen=True)
class Command:
    text: str
    meaning: tuple  # ("blank",) ("unknown",) ("number", n) ("action", a) ("save", path, ok)
    #                 ("save syntax",) ("quit",)


def _program_spelling(rng, name: str) -> str:
    """Any case, "-", "_" or " " between letters (play.py ignores them), spaces around."""
    letters = [rng.choice([char.lower(), char.upper()]) for char in name.replace("-", "")]
    spelled = "".join(char + (rng.choice(["", "", " ", "_", "-"]) if i < len(letters) - 1
                              else "") for i, char in enumerate(letters))
    return rng.choice(["", " ", "\t"]) + spelled + rng.choice(["", "  "])


@dataclass(frozen=True)
class SaveTargets:
    """Paths for `save`, made in a session's folder: where it saves, and what it must refuse."""
    folder: Path
    scenario: Path

    def good(self, rng, index: int) -> tuple[str, str]:
        """(command text, path): new or existing plain files, odd names, quoted names."""
        path = str(self.folder / rng.choice([f"game_{index}.json", f"with space {index}.json",
                                             f"ünï €{index}", f"\udcff{index}.json",
                                             "existing.json"]))
        quoted = rng.choice(["'", '"']) if " " in path or rng.random() < 0.3 else ""
        return rng.choice(["save", "SAVE", "Save"]) + f" {quoted}{path}{quoted}", path

    def refused(self, rng) -> str:
        return str(rng.choice([
            self.folder / "absent" / "x.json", self.folder, "/dev/null", self.scenario,
            self.folder / "metrics.jsonl", self.folder / "checkpoint_1.pkl",
            "/proc/x.json", self.folder / ("n" * 300 + ".json"), "~absent_user_x/x.json"]))


def fuzzed_commands(rng, targets: SaveTargets, count: int) -> list[Command]:
    commands = []
    for index in range(count):
        kind = rng.choice(["direction"] * 4 + ["number"] * 2 + ["program"] * 4 + [
            "out of range", "blank", "junk", "junk", "save", "save refused", "save syntax",
            "quit" if rng.random() < 0.2 else "blank"])
        if kind == "direction":
            action = rng.randrange(5)
            commands.append(Command(rng.choice(DIRECTION_SPELLINGS[action]), ("action", action)))
        elif kind == "number":
            action = rng.randrange(C.NUM_ACTIONS)
            text = rng.choice([f"{action}", f"+{action}", f"00{action}", f" {action} "])
            commands.append(Command(text, ("action", action)))
        elif kind == "program":
            program = rng.randrange(C.NUM_PROGRAMS)
            commands.append(Command(_program_spelling(rng, C.PROGRAM_NAMES[program]),
                                    ("action", C.FIRST_PROGRAM_ACTION + program)))
        elif kind == "out of range":
            number = rng.choice([C.NUM_ACTIONS, 99, -1, -27, int("1" * 40)])
            commands.append(Command(str(number), ("number", number)))
        elif kind == "blank":
            commands.append(Command(rng.choice(BLANK_COMMANDS), ("blank",)))
        elif kind == "junk":
            text = rng.choice(NOT_COMMANDS) if rng.random() < 0.4 else "!" + "".join(
                rng.choice(JUNK_PIECES) for _ in range(rng.randint(0, 12)))
            commands.append(Command(text, ("unknown",)))
        elif kind == "save":
            text, path = targets.good(rng, index)
            commands.append(Command(text, ("save", path, True)))
        elif kind == "save refused":
            path = targets.refused(rng)
            commands.append(Command(f"save {path}", ("save", path, False)))
        elif kind == "save syntax":
            text = rng.choice(["save", "save   ", 'save ""', f"save {targets.folder}/"])
            commands.append(Command(text, ("save syntax",)))
        else:
            commands.append(Command(rng.choice(QUIT_SPELLINGS), ("quit",)))
    return commands


class RecordingStdin:
    """stdin as Python gives it in this locale (UTF-8, undecodable bytes as surrogates;
    `errors` to change that), noting where stdout stood each time a line was read."""

    def __init__(self, text: str, stdout: io.StringIO, errors="surrogateescape"):
        self._lines = io.TextIOWrapper(io.BytesIO(text.encode("utf-8", "surrogateescape")),
                                       encoding="utf-8", errors=errors)
        self._stdout = stdout
        self.read_at = []

    def readline(self):
        self.read_at.append(len(self._stdout.getvalue()))
        return self._lines.readline()

    @property
    def errors(self):  # as sys.stdin's
        return self._lines.errors

    def reconfigure(self, **options):
        self._lines.reconfigure(**options)


@dataclass(frozen=True)
class Session:
    code: object
    err: str
    start: str  # what play.py printed before reading the first line
    answers: list  # what it printed after reading each line, up to the next read


def play_session(monkeypatch, argv, stdin_text, errors="surrogateescape") -> Session:
    out, err = io.StringIO(), io.StringIO()
    stdin = RecordingStdin(stdin_text, out, errors)
    monkeypatch.setattr(sys, "stdin", stdin)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = PLAY(argv)
    text, ends = out.getvalue(), stdin.read_at + [len(out.getvalue())]
    return Session(code, err.getvalue(), text[:ends[0]],
                   [text[start:end] for start, end in zip(ends, ends[1:])])


class Oracle:
    """The game as play.py should drive it, on the game API: play.py's keys, valid actions
    checked against the mask, the board as the player sees it."""

    def __init__(self, scenario_path: Path, seed: int):
        options = xla_options.compiler_options()  # as play.py's, so its compiles are reused
        self._step = jax.jit(game.step, compiler_options=options)
        self._valid_actions = jax.jit(game.valid_actions, compiler_options=options)
        self.state = cli.load_scenario(str(scenario_path))
        self.key, _ = jax.random.split(jax.random.PRNGKey(seed))

    def valid(self) -> np.ndarray:
        return np.asarray(self._valid_actions(self.state))

    def board(self) -> str:
        valid = ", ".join(f"{a} {C.ACTION_NAMES[a]}" for a in np.flatnonzero(self.valid()))
        return (game.render(self.state, color=False, player_view=True)
                + f"\nValid actions: {valid or 'none'}\n")

    def step(self, action: int):
        self.key, step_key = jax.random.split(self.key)
        self.state, _, reward, done, info = self._step(step_key, self.state, action)
        return float(reward), bool(done), info


def assert_one_line_answer(answer: str, prefix: str, context):
    assert answer.startswith(prefix) and answer.endswith("\n> "), (context, answer[:300])
    assert answer.count("\n") == 1, (context, answer[:300])


def check_session(played: Session, commands: list[Command], oracle: Oracle):
    """Each line's answer as documented, the oracle stepping the valid actions only."""
    assert played.code == 0 and played.err == "", played
    assert played.start.startswith("compiling the game...\n")
    assert played.start.endswith(oracle.board() + "> ")
    for index, command in enumerate(commands):
        answer, kind = played.answers[index], command.meaning[0]
        context = (index, command)
        if kind == "quit":
            assert answer == "" and len(played.answers) == index + 1, context
            return
        if kind == "blank":
            assert answer == "> ", context
        elif kind == "unknown":
            assert_one_line_answer(answer, "Unknown command ", context)
        elif kind == "number":
            number = command.meaning[1]
            assert answer == f"No action {number}: action numbers are 0-27\n> ", context
        elif kind == "save syntax":
            assert_one_line_answer(answer, "save ", context)
        elif kind == "save":
            _, path, ok = command.meaning
            if ok:
                assert_one_line_answer(answer, f"Saved to {path} (play it from here: ", context)
                assert json.loads(Path(path).read_text()) == json.loads(
                    json.dumps(scenario.to_dict(oracle.state))), context
            else:
                assert_one_line_answer(answer, "Not saved: ", context)
        else:
            action = command.meaning[1]
            if not oracle.valid()[action]:
                assert_one_line_answer(answer, f"{C.ACTION_NAMES[action]} is not valid now: ",
                                       context)
                continue
            reward, done, info = oracle.step(action)
            assert answer.startswith(f"Reward {reward:+.4f}"), (context, answer[:300])
            if done or not oracle.valid().any():
                assert len(played.answers) == index + 1, context  # the session is over
                ending = ("You won!" if bool(info["won"]) else "You died" if bool(info["death"])
                          else "Invalid action" if done else "No action is valid")
                assert ending in answer, (context, answer)
                return
            assert answer.endswith(oracle.board() + "> "), (context, answer[-500:])
    assert played.answers[len(commands):] == ["\n"], played.answers[len(commands):]  # EOF


@pytest.fixture
def save_folder(tmp_path) -> SaveTargets:
    """A session's folder: the scenarios, a save that exists and a run's files to protect."""
    for name, state in SCENARIOS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(state))
    for name in ("existing.json", "metrics.jsonl", "checkpoint_1.pkl"):
        (tmp_path / name).write_text(f"{name} before\n")
    return SaveTargets(tmp_path, tmp_path / "rich.json")


def test_fuzzed_play_sessions_answer_every_line_and_step_only_valid_actions(
        save_folder, monkeypatch):
    rng = random.Random(SEED)
    protected = {path: path.read_bytes() for path in
                 (save_folder.folder / "metrics.jsonl", save_folder.folder / "checkpoint_1.pkl")}
    for _ in range(16):
        name = rng.choice(["rich", "rich", "poor", "dying"])
        targets = SaveTargets(save_folder.folder, save_folder.folder / f"{name}.json")
        seed = rng.randrange(2**32)
        commands = fuzzed_commands(rng, targets, rng.randint(10, 30))
        # The input may end in the middle of a line (not after an empty one: no line then).
        ending = rng.choice(["\n", "" if commands[-1].text else "\n"])
        stdin_text = "\n".join(command.text for command in commands) + ending
        played = play_session(monkeypatch, ["--scenario", str(targets.scenario), "--seed",
                                             str(seed)], stdin_text)
        check_session(played, commands, Oracle(targets.scenario, seed))
    assert all(path.read_bytes() == data for path, data in protected.items())
    assert not (save_folder.folder / "absent").exists()


PLAY_REFUSALS = {
    # A number of over 4300 digits, which Python will not read (once a ValueError: exit 2).
    "5000-digit-number": ("9" * 5000 + "\n", "surrogateescape"),
    # A save path no file can have (once "embedded null byte" from the probe file: exit 2).
    "save-with-a-nul-byte": ("save {folder}/bad\x00name.json\n", "surrogateescape"),
    # A byte that strict UTF-8 stdin cannot decode (PYTHONIOENCODING=utf-8, or a locale such as
    # en_US.UTF-8; once a UnicodeDecodeError: exit 2).
    "undecodable-byte-on-strict-stdin": ("caf\udce9\n", "strict"),
}


@pytest.mark.parametrize("case", PLAY_REFUSALS)
def test_play_refuses_a_line_it_cannot_take_and_goes_on(case, save_folder, monkeypatch):
    line, errors = PLAY_REFUSALS[case]
    played = play_session(monkeypatch, ["--scenario", str(save_folder.scenario)],
                           line.format(folder=save_folder.folder) + "q\n", errors)
    assert played.code == 0 and played.err == "", played
    assert played.answers[0].count("\n") == 1 and played.answers[1] == ""


# ------------------------------------------------------------------------------------------
# watch_jax_agent.py and evaluate.py

@dataclass(frozen=True)
class Value:
    text: str
    parses: bool  # argparse takes it (its type function included)
    usable: bool = True  # and the range check after parsing passes


AT_LEAST_ONE = [Value("1", True), Value("3", True), Value(" 2 ", True), Value("+2", True),
                Value("1" + "0" * 30, True), Value("0", True, False), Value("-1", True, False),
                Value("1.5", False), Value("1e3", False), Value("", False), Value("two", False),
                Value("0x10", False), Value("nan", False), Value("9" * 5000, False)]
# Counts bounded in --help (what would exhaust memory or time): a huge one is refused.
BOUNDED_COUNT = [Value(value.text, value.parses, value.usable and value.text != "1" + "0" * 30)
                 for value in AT_LEAST_ONE]
SECONDS = [Value("0", True), Value("0.3", True), Value("600", True), Value("1e-3", True),
           Value("-0", True), Value("600.5", False), Value("-0.1", False), Value("nan", False),
           Value("inf", False), Value("-inf", False), Value("1e3", False), Value("", False),
           Value("soon", False)]
SEEDS = [Value("0", True), Value("4294967295", True), Value("7", True),
         Value("4294967296", False), Value("-1", False), Value("1.0", False), Value("", False),
         Value("1e3", False), Value("9" * 5000, False)]
# Whether the file holds the agent is known once it is loaded (test_tools_agents.py).
AGENTS = [Value("0", True), Value("1", True), Value(" 2 ", True), Value("1" + "0" * 30, True),
          Value("-1", False), Value("1.5", False), Value("", False), Value("one", False)]
# Output paths, relative to the workspace: whether the up-front check lets them through.
OUTPUTS = {"new.out": True, "noext": True, "existing.png": True, "ünï €.out": True,
           "absent/x.out": False, "somedir": False, "": False, "/dev/null": False,
           "fifo": False, "checkpoints/run/metrics.jsonl": False,
           "checkpoints/run/summary.json": False, "checkpoints/run/checkpoint_1.pkl": False,
           "checkpoints/run/params_2.npz": False, "/proc/x.out": False,
           "models/agent.npz": "unless not read",
           "models/agent_link.out": "unless not read"}  # the checkpoint's other name
CHECKPOINT_DIRS = {"checkpoints": True, "empty": False, "absent": False, "models": False,
                   "": False}
SCENARIO_FILES = {"scenario.json": REACHED, "absent.json": cli.EXIT_BAD_CHECKPOINT,
                  "not_json.json": cli.EXIT_BAD_ARGUMENTS, "bad_field.json": cli.EXIT_BAD_ARGUMENTS}
BASELINES = {"random,exit-runner": ["random", "exit-runner"], "random": ["random"],
             "none": [], " exit-runner , random ,": ["exit-runner", "random"],
             "random,random": None, "": [], "foo": None, "RANDOM": None, "none,random": None}
UNKNOWN_FLAGS = ["--bogus", "--gifs", "-x", "--max_steps", "--no-colour", "--jsonn"]


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """The cwd of a tool: checkpoints/run (the newest policy: params_2.npz), a params file
    under a name no run writes (models/agent.npz) and a hard link to it, scenario files, an
    empty folder, a FIFO. Loading, watching and evaluating stop at Reached."""
    run = tmp_path / "checkpoints" / "run"
    run.mkdir(parents=True)
    for name in ("checkpoint_1.pkl", "params_2.npz", "metrics.jsonl", "summary.json"):
        (run / name).write_text(name)
    os.utime(run / "checkpoint_1.pkl", (1, 1))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "agent.npz").write_text("agent")
    os.link(tmp_path / "models" / "agent.npz", tmp_path / "models" / "agent_link.out")
    for name in ("empty", "somedir"):
        (tmp_path / name).mkdir()
    (tmp_path / "existing.png").write_text("old")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "scenario.json").write_text('{"player": {"row": 1, "col": 1}}')
    (tmp_path / "not_json.json").write_text('{"player": ')
    (tmp_path / "bad_field.json").write_text('{"player": {"row": 9, "col": 1}}')
    monkeypatch.chdir(tmp_path)

    def reached(*args, **kwargs):
        raise Reached

    for module, name in ((policy, "load_policy"), (viewer, "watch"),
                         (evaluation, "run_episodes")):
        monkeypatch.setattr(module, name, reached)
    return tmp_path


@dataclass(frozen=True)
class Flag:
    name: str
    values: object  # a list of Value, or a dict {text: verdict}; None for a switch


WATCH_FLAGS = [Flag("--latest", None), Flag("--checkpoint-dir", CHECKPOINT_DIRS),
               Flag("--episodes", BOUNDED_COUNT), Flag("--deterministic", None),
               Flag("--delay", SECONDS), Flag("--step", None), Flag("--seed", SEEDS),
               Flag("--scenario", SCENARIO_FILES), Flag("--max-steps", BOUNDED_COUNT),
               Flag("--no-color", None), Flag("--top", AT_LEAST_ONE), Flag("--gif", OUTPUTS),
               Flag("--agent", AGENTS)]
EVALUATE_FLAGS = [Flag("--latest", None), Flag("--checkpoint-dir", CHECKPOINT_DIRS),
                  Flag("--baselines", BASELINES), Flag("--episodes", BOUNDED_COUNT),
                  Flag("--seed", SEEDS), Flag("--max-steps", BOUNDED_COUNT),
                  Flag("--deterministic", None), Flag("--json", OUTPUTS), Flag("--agent", AGENTS)]
WATCH_CHECKPOINTS = ["models/agent.npz", "checkpoints/run", "checkpoints/run/params_2.npz"]
EVALUATE_CHECKPOINTS = [*WATCH_CHECKPOINTS, "absent.npz", "random", "exit-runner"]
NEWEST = "checkpoints/run/params_2.npz"  # what --latest and "checkpoints/run" resolve to
HUGE = "1" + "0" * 30


@dataclass(frozen=True)
class Given:
    flag: Flag
    value: object  # a Value, a path or baselines text, or None for a switch
    spelled: str  # the option as typed
    tokens: tuple


def _spell(rng, flag: Flag) -> str:
    """The flag whole, or an abbreviation of at least 3 characters: refused (exit 3), flags are
    taken by their full names only (specs/training.md; the tools share the rule)."""
    if rng.random() < 0.6:
        return flag.name
    return flag.name[:rng.randint(3, len(flag.name) - 1)]


def _passes(flag: Flag, value) -> bool:
    if isinstance(value, Value):
        return value.parses and value.usable
    return flag.values[value] not in (False, None, cli.EXIT_BAD_ARGUMENTS, cli.EXIT_BAD_CHECKPOINT)


def _given(rng, flag: Flag, excluded: dict) -> Given:
    spelled = _spell(rng, flag)
    if flag.values is None:
        if rng.random() < 0.1:
            return Given(flag, "=", spelled, (f"{spelled}=1",))  # a switch given a value
        return Given(flag, None, spelled, (spelled,))
    pool = [value for value in flag.values if getattr(value, "text", value)
            not in excluded.get(flag.name, ())]
    if rng.random() < 0.5:  # a value that passes, so that the other flags decide
        pool = [value for value in pool if _passes(flag, value)]
    value = rng.choice(pool)
    text = getattr(value, "text", value)
    # Not "--abbrev=a b": argparse reads a token that names no option and holds a space as a
    # positional word (a CHECKPOINT).
    equals_form = rng.random() < 0.3 and (spelled == flag.name or " " not in text)
    tokens = (f"{spelled}={text}",) if equals_form else (spelled, text)
    return Given(flag, value, spelled, tokens)


@dataclass(frozen=True)
class FlagCase:
    argv: list
    givens: list
    checkpoints: list
    parse_error: bool  # an unknown flag, a missing value, a stray word, split CHECKPOINTs


def fuzzed_flag_case(rng, flags: list[Flag], checkpoint_pool: list[str], max_positional: int,
                     excluded: dict) -> FlagCase:
    checkpoints = rng.sample(checkpoint_pool, rng.choice([0, 1, 1, 1, 2]))
    if checkpoints and rng.random() < 0.1:
        checkpoints.append(checkpoints[0])  # the same one twice
    groups = [_given(rng, rng.choice(flags), excluded) for _ in range(rng.randint(0, 4))]
    groups += checkpoints
    rng.shuffle(groups)
    parse_error = len(checkpoints) > max_positional
    # argparse takes the CHECKPOINTs of evaluate.py (nargs="*") only as one run of words.
    kinds = "".join("c" if isinstance(group, str) else "o" for group in groups).strip("o")
    parse_error |= "c" in kinds and "o" in kinds
    if rng.random() < 0.1:
        groups.insert(rng.randrange(len(groups) + 1), rng.choice(UNKNOWN_FLAGS))
        parse_error = True
    argv = [token for group in groups
            for token in ([group] if isinstance(group, str) else group.tokens)]
    if rng.random() < 0.07:
        argv.append(rng.choice([flag.name for flag in flags if flag.values is not None]))
        parse_error = True  # the value is missing
    givens = [group for group in groups if isinstance(group, Given)]  # in the order typed
    return FlagCase(argv, givens, checkpoints, parse_error)


def _parses(case: FlagCase) -> bool:
    """argparse's verdict: each flag by its full name, values of the right type."""
    if case.parse_error:
        return False
    for given in case.givens:
        if given.spelled != given.flag.name or given.value == "=":
            return False
        if isinstance(given.value, Value) and not given.value.parses:
            return False
    return True


def _final(case: FlagCase, name: str, default=None):
    values = [given.value for given in case.givens if given.flag.name == name]
    return values[-1] if values else default


def _output_ok(case: FlagCase, name: str) -> bool:
    path = _final(case, name)
    verdict = OUTPUTS[path] if path is not None else True
    return verdict is True or (verdict == "unless not read" and "models/agent.npz"
                               not in case.checkpoints)


def _ranges_ok(case: FlagCase, names) -> bool:
    return all(_final(case, name, Value("1", True)).usable for name in names)


def expected_watch(case: FlagCase):
    """The documented checks in watch_jax_agent.py's order."""
    latest = _final(case, "--latest", False) is None
    if (not _parses(case) or bool(case.checkpoints) == latest
            or not _ranges_ok(case, ("--episodes", "--max-steps", "--top"))
            or not _output_ok(case, "--gif")):
        return cli.EXIT_BAD_ARGUMENTS
    scenario_verdict = SCENARIO_FILES.get(_final(case, "--scenario"), REACHED)
    if scenario_verdict != REACHED:
        return scenario_verdict
    if latest and not CHECKPOINT_DIRS[_final(case, "--checkpoint-dir", "checkpoints")]:
        return cli.EXIT_BAD_CHECKPOINT
    return REACHED


def expected_evaluate(case: FlagCase):
    """The documented checks in evaluate.py's order."""
    latest = _final(case, "--latest", False) is None
    baselines = BASELINES[_final(case, "--baselines", "random,exit-runner")]
    if (not _parses(case) or baselines is None
            or not _ranges_ok(case, ("--episodes", "--max-steps"))
            or not (case.checkpoints or latest or baselines)
            or not _output_ok(case, "--json")
            or {"random", "exit-runner"} & set(case.checkpoints)):
        return cli.EXIT_BAD_ARGUMENTS
    if latest and not CHECKPOINT_DIRS[_final(case, "--checkpoint-dir", "checkpoints")]:
        return cli.EXIT_BAD_CHECKPOINT
    if "absent.npz" in case.checkpoints:
        return cli.EXIT_BAD_CHECKPOINT
    files = [NEWEST if path.startswith("checkpoints/run") else path for path in case.checkpoints]
    if len(set(files + [NEWEST] * latest)) < len(files) + latest:
        return cli.EXIT_BAD_ARGUMENTS  # one policy given twice, under any name
    return REACHED


@dataclass(frozen=True)
class Tool:
    prog: str
    main: object
    flags: list
    checkpoints: list  # the CHECKPOINT words to draw from
    max_positional: int
    expected: object  # the oracle
    excluded: dict  # {flag: values left out, known defects}
    sweep_bases: list  # (checkpoints, givens) that every value is swept after


def _base(flags: list[Flag], checkpoints: list, *options: tuple) -> tuple:
    """(checkpoints, givens) of a command line; an option is (switch,) or (flag, value)."""
    flag_named = {flag.name: flag for flag in flags}
    return checkpoints, [Given(flag_named[option[0]], option[-1] if option[1:] else None,
                               option[0], option) for option in options]


TOOLS = {tool.prog: tool for tool in [
    # The bases after the first fail later (exit 6): a bad value must be refused before that.
    Tool("watch_jax_agent.py", WATCH, WATCH_FLAGS, WATCH_CHECKPOINTS, 1, expected_watch, {},
         [_base(WATCH_FLAGS, ["models/agent.npz"]),
          _base(WATCH_FLAGS, ["models/agent.npz"], ("--scenario", "absent.json")),
          _base(WATCH_FLAGS, [], ("--latest",), ("--checkpoint-dir", "absent"))]),
    # A huge --episodes is refused (its own test, below); the pool counts it usable elsewhere.
    Tool("evaluate.py", EVALUATE, EVALUATE_FLAGS, EVALUATE_CHECKPOINTS, 99, expected_evaluate,
         {"--episodes": (HUGE,)},
         [_base(EVALUATE_FLAGS, ["models/agent.npz"]), _base(EVALUATE_FLAGS, ["absent.npz"]),
          _base(EVALUATE_FLAGS, [], ("--latest",), ("--checkpoint-dir", "absent"))]),
]}


def swept_cases(tool: Tool):
    """Every value of every flag, as `--flag value` and `--flag=value`, after each base."""
    for checkpoints, base_givens in tool.sweep_bases:
        for flag in tool.flags:
            for value in flag.values or ():
                text = getattr(value, "text", value)
                if text in tool.excluded.get(flag.name, ()):
                    continue
                for tokens in ((flag.name, text), (f"{flag.name}={text}",)):
                    givens = [*base_givens, Given(flag, value, flag.name, tokens)]
                    argv = checkpoints + [token for given in givens for token in given.tokens]
                    yield FlagCase(argv, givens, checkpoints, parse_error=False)


def check_command_line(tool: Tool, case: FlagCase, workspace: Path, before: dict):
    """The oracle's outcome, said as documented, with nothing written."""
    outcome = run_cli(tool.main, case.argv)
    want = tool.expected(case)
    if want == REACHED:
        assert outcome.code == REACHED and outcome.err == "", (case.argv, outcome)
        # Evaluating baselines only: the note that says so and the header come first.
        lines = outcome.out.splitlines()
        assert lines == [] or (len(lines) == 2 and lines[0].startswith(
            "no CHECKPOINT given: evaluating the baselines only (")
            and " episodes per policy, " in lines[1]), (case.argv, outcome)
    else:
        assert_one_line_error(outcome, tool.prog, want, case.argv)
        assert outcome.out == "", (case.argv, outcome)
    assert snapshot(workspace) == before, case.argv
    return want


@pytest.mark.parametrize("prog", TOOLS)
def test_every_flag_value_alone_reaches_the_policy_or_exits_3_or_6_first(prog, workspace):
    before = snapshot(workspace)
    for case in swept_cases(TOOLS[prog]):
        check_command_line(TOOLS[prog], case, workspace, before)


@pytest.mark.parametrize("prog", TOOLS)
def test_fuzzed_command_lines_reach_the_policy_or_exit_3_or_6_with_one_line(prog, workspace):
    tool, rng = TOOLS[prog], random.Random(f"{SEED}-{prog}")
    before = snapshot(workspace)
    outcomes = {check_command_line(tool, fuzzed_flag_case(rng, tool.flags, tool.checkpoints,
                                                          tool.max_positional, tool.excluded),
                                   workspace, before)
                for _ in range(400)}
    assert outcomes == {REACHED, cli.EXIT_BAD_ARGUMENTS, cli.EXIT_BAD_CHECKPOINT}


@pytest.mark.parametrize("main, prog, argv", [
    (WATCH, "watch_jax_agent.py", [""]),
    (EVALUATE, "evaluate.py", ["models/agent.npz", ""]),
    (PLOT, "plot_metrics.py", [""]),
])
def test_an_empty_input_path_is_refused_not_read_as_the_current_directory(main, prog, argv,
                                                                          workspace):
    # Most often an unset shell variable; the workspace has a run that "." would lead to.
    before = snapshot(workspace)
    outcome = run_cli(main, argv)
    assert_one_line_error(outcome, prog, cli.EXIT_BAD_ARGUMENTS)
    assert "the path is empty" in outcome.err and outcome.out == ""
    assert snapshot(workspace) == before


def test_evaluate_refuses_an_episode_count_no_array_can_hold(workspace):
    outcome = run_cli(EVALUATE, ["--baselines", "random", "--episodes", HUGE])
    assert_one_line_error(outcome, "evaluate.py", cli.EXIT_BAD_ARGUMENTS)


def test_watch_refuses_an_empty_scenario_path(workspace):
    outcome = run_cli(WATCH, ["models/agent.npz", "--scenario", ""])
    assert_one_line_error(outcome, "watch_jax_agent.py", cli.EXIT_BAD_ARGUMENTS)


TOO_LONG = "n" * 300 + ".out"  # a name longer than a file system takes (255 bytes)


@pytest.mark.parametrize("prog, main, argv", [
    ("plot_metrics.py", PLOT, ["checkpoints/run", "-o", TOO_LONG]),
    ("watch_jax_agent.py", WATCH, ["models/agent.npz", "--gif", TOO_LONG]),
    ("evaluate.py", EVALUATE, ["--json", TOO_LONG]),
])
def test_an_output_name_too_long_is_a_bad_argument(prog, main, argv, workspace):
    assert_one_line_error(run_cli(main, argv), prog, cli.EXIT_BAD_ARGUMENTS)
