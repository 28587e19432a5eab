"""Training curves from a run's metrics.jsonl, drawn with matplotlib (Agg, no display, no wandb).

Every panel is optional: a key that a run never logged is skipped, and a panel with no data
says so instead of failing, so the plot works on old runs, partial runs and future keys. A run
of another env than HackMatrix, which logs none of its game's figures, gets only the panels
with data. Curves
can be smoothed (a trailing moving average), and a dotted vertical line marks each point where
the run was resumed (the `resumed_at_*` fields of the first record logged after a resume). A
run of several agents (`--num-seeds`) logs their mean under each name, drawn as the curve, and
each agent's values as `agent/<i>/<name>`: a shaded band around the curve spans the mean ± the
std over the agents (in every panel but the reward components').
"""

from __future__ import annotations

import json
import pathlib

import matplotlib

matplotlib.use("Agg")  # headless: users run this over ssh
import matplotlib.pyplot as plt  # noqa: E402  (must follow the backend choice)

from hackmatrix.game import constants as C  # noqa: E402
from hackmatrix.tools import policy_env  # noqa: E402
from hackmatrix.training.atomic_files import atomic_write  # noqa: E402
# The trainer's file and its health thresholds: above those lines the update is too large.
from hackmatrix.training.metrics import (APPROX_KL_LIMIT, CLIP_FRACTION_LIMIT,  # noqa: E402
                                         METRICS_FILE)

ACTION_FRACTION_KEYS = ("actions/move_frac", "actions/siphon_frac", "actions/program_frac")

# A series this short is drawn with markers too: a line needs two points, so a run with one
# record (or a key logged once) would otherwise leave its panel blank.
MARKER_MAX_POINTS = 30


class MetricsError(Exception):
    """The run directory or its metrics file is missing or unreadable."""


def metrics_path(run: str | pathlib.Path) -> pathlib.Path:
    """The metrics file of a run directory, or `run` itself when it names the file."""
    path = pathlib.Path(run)
    return path / METRICS_FILE if path.is_dir() else path


def run_name(run: str | pathlib.Path) -> str:
    """The run's name: its directory's, also when `run` names the metrics file inside it."""
    return metrics_path(run).resolve().parent.name


def records_text(count: int) -> str:
    return f"{count} record{'' if count == 1 else 's'}"


def read_metrics(run_dir: str | pathlib.Path) -> list[dict]:
    """The logged records of a run, in file order; lines that are not JSON objects are skipped
    (a run killed mid-write leaves a truncated last line; a binary file, such as a checkpoint
    named by mistake, has none). A byte-order mark, which some editors add, is ignored."""
    path = metrics_path(run_dir)
    if path.is_dir():  # a folder that bears the file's name
        raise MetricsError(f"{path} is a directory, not a metrics file")
    if not path.is_file():
        folder = pathlib.Path(run_dir)
        runs = (sorted(child.parent.name for child in folder.glob(f"*/{METRICS_FILE}"))
                if folder.is_dir() else [])
        hint = (f": {folder} is a folder of runs, not a run; name one, e.g. {folder / runs[0]}"
                if runs else "")
        raise MetricsError(f"no {METRICS_FILE} at {path}{hint}")
    records = []
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):  # not JSON, a number of over 4300 digits,
                    continue                           # nesting past the recursion limit
                if isinstance(record, dict):
                    records.append(record)
    except OSError as error:
        raise MetricsError(f"cannot read {path}: {error.strerror}") from None
    if not records:
        raise MetricsError(f"{path} holds no metrics records")
    return records


def _x_axis(records: list[dict]) -> tuple[str, str]:
    """Plot against timesteps when logged, else the update number, else the record index."""
    for key in ("timesteps", "update"):
        if any(_number(r.get(key)) is not None for r in records):
            return key, key
    return "", "record"


# Beyond this matplotlib cannot lay out an axis: the span of two values near the float limit
# overflows its ticker. No metric comes near it (a non-finite loss stops the trainer first).
PLOTTABLE_LIMIT = 1e300


def _number(value):
    """A plottable number, or None (JSON's integers can be too large even for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if -PLOTTABLE_LIMIT <= value <= PLOTTABLE_LIMIT else None


def _series(records: list[dict], x_key: str, key: str):
    xs, ys = [], []
    for index, record in enumerate(records):
        y = _number(record.get(key))
        x = _number(record.get(x_key)) if x_key else index
        if y is not None and x is not None:
            xs.append(x)
            ys.append(y)
    return xs, ys


def smoothed(values: list[float], window: int) -> list[float]:
    """The trailing moving average over `window` points (fewer at the start); the values
    themselves for a window of 1. Each window is summed anew: differences of running sums would
    lose small values next to large ones."""
    if window <= 1:
        return list(values)
    return [sum(values[max(0, i + 1 - window):i + 1]) / min(i + 1, window)
            for i in range(len(values))]


def agent_spread(records: list[dict], x_key: str, key: str):
    """(xs, mean - std, mean + std) over the agents' values of `key` (`agent/<i>/<key>`), at
    each record of several agents that has some; empty lists for a run of one agent."""
    xs, lows, highs = [], [], []
    for index, record in enumerate(records):
        count = 0
        while f"agent/{count}/{key}" in record:
            count += 1
        values = [value for agent in range(count)
                  if (value := _number(record[f"agent/{agent}/{key}"])) is not None]
        x = _number(record.get(x_key)) if x_key else index
        if count > 1 and values and x is not None:
            mean = sum(values) / len(values)
            std = (sum((value - mean) ** 2 for value in values) / len(values)) ** 0.5
            xs.append(x)
            lows.append(mean - std)
            highs.append(mean + std)
    return xs, lows, highs


def resume_points(records: list[dict], x_key: str) -> list[float]:
    """Where on the x axis each resume started: its first record's `resumed_at_<x>`
    (the record's index when the x axis is the index)."""
    points = []
    for index, record in enumerate(records):
        if _number(record.get("resumed_at_update")) is None:
            continue
        x = _number(record.get(f"resumed_at_{x_key}")) if x_key else index
        if x is not None:
            points.append(x)
    return points


def _panel(ax, records, x_key, x_label, title, keys, labels=None, thresholds=(), smooth=1,
           resumes=(), bands=True):
    drawn = banded = False
    for index, key in enumerate(keys):
        xs, ys = _series(records, x_key, key)
        if xs:
            ys = smoothed(ys, smooth)
            label = labels[index] if labels else key.split("/")[-1]
            # Dashed lines once the 10-colour cycle repeats, so 15 components stay distinct.
            (line,) = ax.plot(xs, ys, label=label, linewidth=1.2,
                              linestyle="-" if index < 10 else "--",
                              marker="o" if len(xs) <= MARKER_MAX_POINTS else None, markersize=3)
            drawn = True
            band_xs, lows, highs = agent_spread(records, x_key, key) if bands else ([], [], [])
            if band_xs:
                ax.fill_between(band_xs, smoothed(lows, smooth), smoothed(highs, smooth),
                                color=line.get_color(), alpha=0.2, linewidth=0,
                                label=None if banded else "± std over agents")
                banded = True
    for value, label in thresholds:
        ax.axhline(value, color="red", linestyle="--", linewidth=1, label=label)
    for index, x in enumerate(resumes):
        ax.axvline(x, color="gray", linestyle=":", linewidth=1,
                   label="resumed" if index == 0 else None)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(x_label, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if drawn or thresholds or resumes:
        ax.legend(fontsize=6, loc="best")
    if not drawn:
        ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes,
                color="gray")
    return drawn


# (title, keys, legend labels or None for the keys' last parts, threshold lines), in the order
# drawn; the reward components come last, in a panel of their own.
PANELS = [
    ("Episode return", ["train/mean_episode_return"], None, ()),
    ("Episode length", ["train/mean_episode_length"], None, ()),
    ("Stage reached", ["stats/mean_final_stage", "stats/highest_stage"],
     ["mean final stage", "highest stage"], ()),
    ("Episode outcomes", ["stats/win_rate", "stats/death_rate", "stats/truncation_rate"],
     ["won", "died", "truncated"], ()),
    ("Entropy", ["train/entropy"], None, ()),
    ("Approx KL", ["train/approx_kl"], None, [(APPROX_KL_LIMIT, f"limit {APPROX_KL_LIMIT}")]),
    ("Clip fraction", ["train/clip_fraction"], None,
     [(CLIP_FRACTION_LIMIT, f"limit {CLIP_FRACTION_LIMIT}")]),
    ("Value loss", ["train/value_loss"], None, ()),
    ("Explained variance", ["train/explained_variance"], None, ()),
    ("Learning rate", ["train/learning_rate"], None, ()),
    ("Gradient norm (before clipping)", ["train/grad_norm"], None, ()),
    ("Steps per second", ["train/sps"], None, ()),
    ("Action fractions", list(ACTION_FRACTION_KEYS), ["move", "siphon", "program"], ()),
]
REWARD_PANEL = ("Reward components (mean per step)",
                [f"reward/{name}" for name in C.REWARD_COMPONENTS], list(C.REWARD_COMPONENTS), ())
OTHER_ENV_COLUMNS = 4


def plot_run(run_dir: str | pathlib.Path, output: str | pathlib.Path, smooth: int = 1) -> int:
    """Draws the training curves of `run_dir` (a run directory or its metrics file) into a PNG
    at exactly the path `output`, whatever its extension, each curve a moving average over
    `smooth` records; returns the record count. A run of HackMatrix (or of no known env) gets
    every panel; a run of another env (its summary.json says which) only those it logged."""
    records = read_metrics(run_dir)
    x_key, x_label = _x_axis(records)
    drawing = {"smooth": smooth, "resumes": resume_points(records, x_key)}
    env = policy_env.summary_env(metrics_path(run_dir).parent)
    if env in (None, policy_env.HACKMATRIX):
        figure = _hackmatrix_figure(records, x_key, x_label, drawing)
        named = run_name(run_dir)
    else:
        figure = _logged_panels_figure(records, x_key, x_label, drawing)
        named = f"{run_name(run_dir)} ({env})"

    # The newest x that is a number (a record's text is never drawn: matplotlib would read
    # "$...$" in it as a formula), and the run's name as plain text for the same reason.
    xs = [_number(record.get(x_key)) for record in records] if x_key else range(len(records))
    last_x = next((x for x in reversed(xs) if x is not None), len(records) - 1)
    title = f"{named}: {records_text(len(records))}, last {x_label} {last_x}"
    if smooth > 1:
        title += f", moving average over {smooth} records"
    figure.suptitle(title.replace("$", r"\$"))
    figure.tight_layout()
    # An explicit format: matplotlib otherwise picks it from the extension and, with none,
    # appends ".png" to the name. The file appears complete or not at all.
    try:
        atomic_write(pathlib.Path(output), lambda file: figure.savefig(file, dpi=100, format="png"))
    finally:
        plt.close(figure)
    return len(records)


def _hackmatrix_figure(records, x_key, x_label, drawing):
    """Every panel, each one without data saying "not logged"."""
    figure, axes = plt.subplots(4, 4, figsize=(20, 16))
    for ax, (title, keys, labels, thresholds) in zip(axes.flat, PANELS):
        _panel(ax, records, x_key, x_label, title, keys, labels, thresholds, **drawing)

    # The 15 reward components share one wide panel: their scales differ by orders of
    # magnitude, so a symmetric log scale keeps small shaping terms visible next to stage rewards.
    for ax in axes[3, 1:]:
        ax.remove()
    reward_ax = figure.add_subplot(4, 4, (14, 16))
    title, keys, labels, _ = REWARD_PANEL
    # 15 bands would hide the curves: the components' spread over agents is in metrics.jsonl.
    if _panel(reward_ax, records, x_key, x_label, title, keys, labels, bands=False, **drawing):
        reward_ax.set_yscale("symlog", linthresh=1e-3)
        reward_ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def _logged_panels_figure(records, x_key, x_label, drawing):
    """The panels with data only, four to a row: another env logs none of HackMatrix's stages,
    outcomes, actions or reward components. With no curve at all, one panel says so."""
    logged = [panel for panel in [*PANELS, REWARD_PANEL]
              if any(_series(records, x_key, key)[0] for key in panel[1])] or PANELS[:1]
    rows = -(-len(logged) // OTHER_ENV_COLUMNS)
    columns = min(len(logged), OTHER_ENV_COLUMNS)
    figure, axes = plt.subplots(rows, columns, figsize=(5 * columns, 4 * rows), squeeze=False)
    for ax, (title, keys, labels, thresholds) in zip(axes.flat, logged):
        _panel(ax, records, x_key, x_label, title, keys, labels, thresholds, **drawing)
    for ax in list(axes.flat)[len(logged):]:
        ax.remove()
    return figure
