"""The environment contract: what the trainer, its metrics and the tools ask of an env.

A training env is an object with
  env_id: str                  the `--env` id it was made from (recorded in checkpoints)
  observation_size: int        length of `EnvObservation.features`
  num_actions: int             size of the discrete action space
  default_params               its env params (gymnax style)
  batch_reset(keys, params) -> (EnvObservation, states)
  batch_step(keys, states, actions, params) -> (EnvObservation, states, reward, done, info)
      over a batch (the leading axis of every argument and result). Steps reset themselves: on
      `done` (terminated or truncated; PPO and A2C bootstrap neither) the observation returned
      is the next episode's first. `reward` is f32[B], `done` bool[B].
  metrics: EnvMetrics          its own per-episode and per-step statistics
  reset_shapes(params)         optional: the shapes of one env's reset, traced cheaply
Observations are `EnvObservation(features f32[B, observation_size], action_mask
bool[B, num_actions])`; an env without masks marks every action valid.

`EnvMetrics` splits an env's statistics between the device and the host, so that the trainer
logs them without knowing what they mean:
  step_stats(info, action) -> dict of per-env arrays kept for each rollout step (device)
  rollout_sums(stats, done, action) -> dict of sums (and `max_keys` maxima) over one rollout
      of [B, T] arrays (device)
  sum_keys, max_keys: the names `rollout_sums` returns, summed or maximised over a log window
  summarize(sums, maxima, steps, per_episode) -> prefixed metric values for a log line (host):
      `steps` env steps, `per_episode(name)` a sum divided by the window's ended episodes.
The returns, lengths and episode counts of every env are the trainer's own (`metrics.py`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax

from hackmatrix.game.env import EnvObservation

__all__ = ["EnvObservation", "EnvMetrics", "NO_METRICS", "EnvError"]


class EnvError(ValueError):
    """An env id that cannot be made here: unknown, continuous actions, or gymnax missing."""


class EnvMetrics(NamedTuple):
    step_stats: Callable[[dict, jax.Array], dict]
    rollout_sums: Callable[[dict, jax.Array, jax.Array], dict]
    sum_keys: tuple[str, ...]
    max_keys: tuple[str, ...]
    summarize: Callable[[dict, dict, int, Callable[[str], float]], dict]


# An env with nothing to add to the trainer's returns and lengths.
NO_METRICS = EnvMetrics(step_stats=lambda info, action: {},
                        rollout_sums=lambda stats, done, action: {},
                        sum_keys=(), max_keys=(),
                        summarize=lambda sums, maxima, steps, per_episode: {})
