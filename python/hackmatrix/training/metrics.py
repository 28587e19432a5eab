"""Host-side metrics: aggregation over logged updates, stdout lines, metrics.jsonl, health
warnings, progress bar and summary.json.

Episode statistics are exact: the device returns per-update sums and counts of the episodes that
ended, and a logged value is total sum / total count over the updates it covers.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from hackmatrix.envs.contract import EnvMetrics
from hackmatrix.envs.hackmatrix_env import HACKMATRIX_METRICS
from hackmatrix.training.atomic_files import atomic_write

METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"

# Health thresholds from the users' monitoring table (specs/training.md).
APPROX_KL_LIMIT = 0.08
CLIP_FRACTION_LIMIT = 0.35
ENTROPY_FLOOR = 0.1

# Per-update values a log window averages. The losses must be finite (a non-finite one stops
# the run); explained variance is NaN for a rollout whose value targets do not vary.
LOSS_KEYS = ("pg_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "total_loss",
             "grad_norm")
MEAN_KEYS = (*LOSS_KEYS, "explained_variance")
# Every env's (`trainer.rollout_metrics`); an env adds its own (`EnvMetrics.sum_keys`).
EPISODE_SUM_KEYS = ("reward_sum", "episode_return_sum", "episode_length_sum", "num_episodes")
SUM_KEYS = EPISODE_SUM_KEYS + HACKMATRIX_METRICS.sum_keys  # HackMatrix's window


class MetricsWindow:
    """Accumulates the per-update metrics of the updates one log line covers: the trainer's
    own and those of the env (`env_metrics`, HackMatrix's by default)."""

    def __init__(self, batch_size: int, env_metrics: EnvMetrics = HACKMATRIX_METRICS):
        self.batch_size = batch_size
        self.env_metrics = env_metrics
        self.sum_keys = EPISODE_SUM_KEYS + env_metrics.sum_keys
        self.reset()

    def reset(self) -> None:
        self.updates = 0
        self.steps = 0  # env steps; a resume with another batch size keeps the old updates' own
        self.sums: dict[str, np.ndarray] = {}
        self.loss_sums: dict[str, float] = {}
        self.maxima = {key: 0 for key in self.env_metrics.max_keys}
        self.learning_rate = float("nan")

    def add(self, chunk_metrics: dict, num_active: int) -> None:
        """Adds the first `num_active` updates of a chunk's stacked metrics (host arrays)."""
        for key in self.sum_keys:
            total = np.asarray(chunk_metrics[key][:num_active], np.float64).sum(axis=0)
            self.sums[key] = self.sums.get(key, 0) + total
        for key in MEAN_KEYS:
            self.loss_sums[key] = self.loss_sums.get(key, 0.0) + float(
                np.asarray(chunk_metrics[key][:num_active], np.float64).sum())
        for key in self.maxima:
            self.maxima[key] = max(self.maxima[key],
                                   int(np.max(chunk_metrics[key][:num_active])))
        self.learning_rate = float(chunk_metrics["learning_rate"][num_active - 1])
        self.updates += num_active
        self.steps += num_active * self.batch_size

    def state(self, seconds: float) -> dict:
        """A part-filled window and its training `seconds`, for a checkpoint: a resume then logs
        the episodes that ended between the last log line and the save."""
        return {"updates": self.updates, "steps": self.steps, "seconds": float(seconds),
                "sums": {key: np.asarray(value) for key, value in self.sums.items()},
                "loss_sums": dict(self.loss_sums), **self.maxima,
                "learning_rate": self.learning_rate}

    def restore(self, state: dict) -> float:
        """Continues the window a checkpoint saved; returns its training seconds. ValueError
        (or KeyError/TypeError) if `state` is not what `state()` writes."""
        updates, steps, seconds = int(state["updates"]), int(state["steps"]), float(state["seconds"])
        sums = {key: np.asarray(state["sums"][key], np.float64) for key in state["sums"]}
        loss_sums = {key: float(state["loss_sums"][key]) for key in state["loss_sums"]}
        complete = (set(sums) == set(self.sum_keys)
                    and set(LOSS_KEYS) <= set(loss_sums) <= set(MEAN_KEYS))
        if updates:  # a window saved without explained variance logs it as undefined
            loss_sums.setdefault("explained_variance", math.nan)
        if updates < 0 or steps < 0 or not math.isfinite(seconds) or seconds < 0 or (
                updates and not complete) or (not updates and (sums or loss_sums)):
            raise ValueError(f"inconsistent window of {updates} updates")
        self.updates, self.steps, self.sums, self.loss_sums = updates, steps, sums, loss_sums
        self.maxima = {key: int(state[key]) for key in self.env_metrics.max_keys}
        self.learning_rate = float(state["learning_rate"])
        return seconds

    def summarize(self) -> dict:
        """Prefixed metric values (train/, and the env's: reward/, actions/, stats/ for
        HackMatrix); NaN where undefined."""
        steps = self.steps
        episodes = float(self.sums["num_episodes"])
        per_episode = (lambda key: float(self.sums[key]) / episodes) if episodes else (lambda key: math.nan)
        metrics = {f"train/{key}": self.loss_sums[key] / self.updates for key in MEAN_KEYS}
        metrics.update({
            "train/mean_episode_return": per_episode("episode_return_sum"),
            "train/mean_episode_length": per_episode("episode_length_sum"),
            "train/num_episodes": int(episodes),
            "train/mean_reward": float(self.sums["reward_sum"]) / steps,
            "train/learning_rate": self.learning_rate,
        })
        metrics.update(self.env_metrics.summarize(self.sums, self.maxima, steps, per_episode))
        return metrics


def losses_are_finite(chunk_metrics: dict, num_active: int) -> bool:
    return all(np.isfinite(np.asarray(chunk_metrics[key][:num_active])).all() for key in LOSS_KEYS)


def short_number(value: float) -> str:
    """3 significant digits: at most 9 characters ("-1.23e-05"), so that the [train] line keeps
    within LINE_WIDTH."""
    return f"{value:.3g}" if math.isfinite(value) else "nan"


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


# The [train] line fits a terminal this wide (a 160-column tmux pane); everything else is in
# metrics.jsonl (and the TensorBoard events).
LINE_WIDTH = 160
STDOUT_FIELDS = (
    ("return", "train/mean_episode_return"),
    ("stage", "stats/mean_final_stage"),
    ("entropy", "train/entropy"),
    ("kl", "train/approx_kl"),
    ("clip", "train/clip_fraction"),
    ("ev", "train/explained_variance"),
)


def format_line(record: dict, num_updates: int, eta_seconds: float,
                value_text: Callable[[str], str] | None = None) -> str:
    """One grep-friendly `key=value` line per logged update, within LINE_WIDTH columns: the
    fields from the first that would pass it are left out (one agent's widest values fit).
    `value_text(key)` writes a field's value (default: `short_number` of the record's)."""
    value_text = value_text or (lambda key: short_number(record[key]))
    line = (f"[train] update={record['update']}/{num_updates} timesteps={record['timesteps']} "
            f"sps={record['train/sps']:.0f} eta={format_duration(eta_seconds)}")
    for name, key in STDOUT_FIELDS:
        if key in record:
            field = f" {name}={value_text(key)}"
            if len(line) + len(field) > LINE_WIDTH:
                break
            line += field
    return line


def health_warnings(record: dict, where: str = "") -> list[str]:
    """The `[health]` lines of a record; `where` follows its update (" agent=2")."""
    warnings = []
    if record["train/approx_kl"] > APPROX_KL_LIMIT:
        warnings.append(f"approx_kl {record['train/approx_kl']:.3f} > {APPROX_KL_LIMIT}: policy "
                        "updates too large (lower --lr or --update-epochs)")
    if record["train/clip_fraction"] > CLIP_FRACTION_LIMIT:
        warnings.append(f"clip_fraction {record['train/clip_fraction']:.3f} > {CLIP_FRACTION_LIMIT}: "
                        "most samples clipped (lower --lr)")
    if record["train/entropy"] < ENTROPY_FLOOR:
        warnings.append(f"entropy {record['train/entropy']:.4f} < {ENTROPY_FLOOR}: policy collapsing "
                        "to deterministic (raise --ent-coef)")
    return [f"[health] update={record['update']}{where} {w}" for w in warnings]


def json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class MetricsFile:
    """Appends one JSON object per logged update to metrics.jsonl in the run directory."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / METRICS_FILE

    def split_after(self, update: int) -> tuple[list[str], list[str]]:
        """(the lines logged up to `update`, the others): a run resumed at `update` logs the
        later ones anew. A line without a whole-number update (a write cut short by a kill, or
        an edited file) counts as later, so that it is set aside rather than lost."""
        if not self.path.is_file():
            return [], []
        kept, later = [], []
        for line in self.path.read_text().splitlines():
            try:
                logged_update = json.loads(line).get("update")
            except (json.JSONDecodeError, AttributeError):
                logged_update = None
            is_kept = (isinstance(logged_update, int) and not isinstance(logged_update, bool)
                       and logged_update <= update)
            (kept if is_kept else later).append(line)
        return kept, later

    def rewrite(self, lines: list[str]) -> None:
        write_lines(self.path, lines)

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(json_safe(record)) + "\n")


def write_lines(path: Path, lines: list[str]) -> Path:
    """Replaces `path` atomically with `lines`, one per line."""
    return atomic_write(path, lambda f: f.write("".join(line + "\n" for line in lines).encode()))


def write_summary(run_dir: Path, summary: dict) -> Path:
    text = json.dumps(json_safe(summary), indent=2, sort_keys=True) + "\n"
    return atomic_write(Path(run_dir) / SUMMARY_FILE, lambda f: f.write(text.encode()))


class Console:
    """Log lines to stdout; with a tty, also a tqdm progress bar with ETA that lines print above."""

    def __init__(self, total_updates: int, start_update: int, force_plain: bool = False):
        self.bar = None
        if sys.stdout.isatty() and not force_plain:
            from tqdm import tqdm
            self.bar = tqdm(total=total_updates, initial=start_update, unit="upd",
                            dynamic_ncols=True, file=sys.stdout)

    def print(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def advance(self, updates: int) -> None:
        if self.bar is not None:
            self.bar.update(updates)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
