"""Evaluation during training: the current policy on a fixed set of boards, and the best one kept.

Every `--eval-interval` updates the trainer plays `--eval-episodes` fresh games with the current
params, sampled and greedy, on the same boards each time (the keys come from the run's seed), with
`tools.evaluation.run_episodes`: the game's own outcomes and reward, whatever reward the agent
trains on. The exit-runner baseline plays the same boards once, at the start, for reference.
The params with the highest sampled mean stage so far are kept as `best_params.npz`, whose
`meta/` entries record the update and the figures, so that a resumed run goes on comparing
against them. Evaluation reads the params and never the training state: a run with it gives the
same params as one without.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax

from hackmatrix.tools import baselines
from hackmatrix.tools import evaluation as episodes
from hackmatrix.tools.policy import network_act
from hackmatrix.training import params_files

BEST_PARAMS_NAME = params_files.BEST_PARAMS_NAME
# Folded into the run's seed, so that the evaluation boards differ from the training ones.
_EVAL_KEY_SALT = 0x5EED_E7A1


def eval_key(seed: int) -> jax.Array:
    return jax.random.fold_in(jax.random.PRNGKey(seed), _EVAL_KEY_SALT)


def summary_metrics(results: episodes.EpisodeResults, prefix: str) -> dict:
    """The `eval/` figures of one policy's episodes."""
    summary = episodes.summarise(results)
    fractions = summary["action_fractions"]
    return {f"{prefix}mean_return": summary["mean_return"],
            f"{prefix}mean_stage": summary["mean_stage"],
            f"{prefix}win_rate": summary["win_rate"],
            f"{prefix}mean_score": summary["mean_score"],
            f"{prefix}siphon_frac": fractions["siphon"],
            f"{prefix}program_frac": fractions["program"]}


class InTrainingEvaluator:
    """Plays the fixed boards with a network's params; keeps the best params in the run dir."""

    def __init__(self, network, network_config: dict, num_episodes: int, seed: int,
                 run_dir: Path, max_steps: int = episodes.DEFAULT_MAX_STEPS):
        self.network_config = network_config
        self.num_episodes = num_episodes
        self.max_steps = max_steps
        self.key = eval_key(seed)
        self.best_path = Path(run_dir) / BEST_PARAMS_NAME
        self.sampled = episodes.Policy("sampled", network_act(network, False), None)
        self.greedy = episodes.Policy("greedy", network_act(network, True), None)
        self.best_stage, self.best_update = read_best(self.best_path)

    def baseline_line(self) -> str:
        results = episodes.run_episodes(baselines.baseline("exit-runner"), self.key,
                                        self.num_episodes, self.max_steps)
        figures = summary_metrics(results, "")
        return (f"[eval] exit-runner on the same {self.num_episodes} boards: "
                + _figures_text(figures))

    def evaluate(self, params, update: int) -> tuple[dict, str]:
        """(metrics for the log record, the `[eval]` line); saves best_params.npz on a new best."""
        start = time.perf_counter()
        # On the host: params left on the trainer's mesh would compile the episodes again.
        params = jax.device_get(params)
        metrics = {}
        for policy, prefix in ((self.sampled, "eval/"), (self.greedy, "eval/greedy_")):
            results = episodes.run_episodes(policy._replace(params=params), self.key,
                                            self.num_episodes, self.max_steps)
            metrics.update(summary_metrics(results, prefix))
        stage = metrics["eval/mean_stage"]
        note = ""
        if self.best_stage is None or stage > self.best_stage:
            save_best(self.best_path, params, self.network_config, update, stage)
            self.best_stage, self.best_update = stage, update
            note = f" new best -> {BEST_PARAMS_NAME}"
        metrics["eval/seconds"] = time.perf_counter() - start
        metrics["eval/best_mean_stage"] = self.best_stage
        line = (f"[eval] update={update} sampled: " + _figures_text(metrics, "eval/")
                + " | greedy: " + _figures_text(metrics, "eval/greedy_")
                + f" | {metrics['eval/seconds']:.1f}s{note}")
        return metrics, line


def _figures_text(metrics: dict, prefix: str = "") -> str:
    return (f"stage={metrics[prefix + 'mean_stage']:.2f} "
            f"win={100 * metrics[prefix + 'win_rate']:.1f}% "
            f"return={metrics[prefix + 'mean_return']:+.2f} "
            f"score={metrics[prefix + 'mean_score']:.2f} "
            f"siphon={100 * metrics[prefix + 'siphon_frac']:.1f}% "
            f"programs={100 * metrics[prefix + 'program_frac']:.1f}%")


def save_best(path: Path, params, network_config: dict, update: int, mean_stage: float) -> Path:
    return params_files.save_params(path, params, network_config,
                                    meta={"update": int(update), "mean_stage": float(mean_stage),
                                          "env": "hackmatrix"})


def read_best(path: Path) -> tuple[float | None, int | None]:
    """(mean stage, update) recorded in a best-params file; (None, None) without a readable one."""
    meta = params_files.params_meta(path)
    if not {"mean_stage", "update"} <= set(meta):
        return None, None
    return float(meta["mean_stage"]), int(meta["update"])
