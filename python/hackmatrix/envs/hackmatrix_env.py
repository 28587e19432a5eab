"""HackMatrix under the env contract: the game's env with its metrics (stages, wins, deaths,
reward components and the kinds of actions taken)."""

from __future__ import annotations

import jax.numpy as jnp

from hackmatrix.envs.contract import EnvMetrics
from hackmatrix.game.constants import (ACTION_SIPHON, FIRST_PROGRAM_ACTION, NUM_REWARD_COMPONENTS,
                                       REWARD_COMPONENTS)
from hackmatrix.game.env import HackMatrixEnv

ENV_ID = "hackmatrix"


def _step_stats(info: dict, action) -> dict:
    return {name: info[name] for name in ("reward_components", "stage", "won", "death",
                                          "truncated", "invalid_action")}


def _rollout_sums(stats: dict, done, action) -> dict:
    return {
        "reward_components_sum": stats["reward_components"].reshape(
            -1, NUM_REWARD_COMPONENTS).sum(0),
        "move_count": (action < ACTION_SIPHON).sum(dtype=jnp.int32),
        "siphon_count": (action == ACTION_SIPHON).sum(dtype=jnp.int32),
        "program_count": (action >= FIRST_PROGRAM_ACTION).sum(dtype=jnp.int32),
        "invalid_action_count": stats["invalid_action"].sum(dtype=jnp.int32),
        "highest_stage": stats["stage"].max(),
        "ended_stage_sum": jnp.where(done, stats["stage"], 0).sum(),
        "episodes_won": (done & stats["won"]).sum(dtype=jnp.int32),
        "episodes_died": (done & stats["death"]).sum(dtype=jnp.int32),
        "episodes_truncated": (done & stats["truncated"]).sum(dtype=jnp.int32),
    }


def _summarize(sums: dict, maxima: dict, steps: int, per_episode) -> dict:
    metrics = {
        "actions/move_frac": float(sums["move_count"]) / steps,
        "actions/siphon_frac": float(sums["siphon_count"]) / steps,
        "actions/program_frac": float(sums["program_count"]) / steps,
        "stats/highest_stage": int(maxima["highest_stage"]),
        "stats/mean_final_stage": per_episode("ended_stage_sum"),
        "stats/win_rate": per_episode("episodes_won"),
        "stats/death_rate": per_episode("episodes_died"),
        "stats/truncation_rate": per_episode("episodes_truncated"),
        "stats/invalid_action_frac": float(sums["invalid_action_count"]) / steps,
    }
    for name, value in zip(REWARD_COMPONENTS, sums["reward_components_sum"] / steps):
        metrics[f"reward/{name}"] = float(value)
    return metrics


HACKMATRIX_METRICS = EnvMetrics(
    step_stats=_step_stats, rollout_sums=_rollout_sums,
    sum_keys=("reward_components_sum", "move_count", "siphon_count", "program_count",
              "invalid_action_count", "ended_stage_sum", "episodes_won", "episodes_died",
              "episodes_truncated"),
    max_keys=("highest_stage",), summarize=_summarize)


class HackMatrixTrainingEnv(HackMatrixEnv):
    """The game's env (`game/env.py`) as the trainer and tools see it."""
    env_id = ENV_ID
    metrics = HACKMATRIX_METRICS
