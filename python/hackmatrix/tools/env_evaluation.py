"""Many episodes of another env than HackMatrix at once, and their report.

Any env under the env contract (`envs/contract.py`) plays here through its `batch_reset` and
`batch_step`; HackMatrix keeps its own runner (`evaluation.py`), which also reports stages,
scores and the actions used. Policies are the tools' (`evaluation.Policy`); the env state
stands in for the game state, which the network and the random baseline ignore.

Every policy plays the same episodes: the first observations and the env's randomness come
from the key alone. The env resets itself when an episode ends; the runner counts each env's
first episode only. An episode still running after `max_steps` steps counts as truncated.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix import xla_options
from hackmatrix.tools.evaluation import Policy

# Checking for the end forces a device sync, so the loop looks only every few steps.
_END_CHECK_INTERVAL = 16


class EnvEpisodeResults(NamedTuple):
    """Per-episode outcomes, NumPy arrays with a leading episode axis."""
    episode_return: np.ndarray   # f32[N]
    length: np.ndarray           # i32[N] steps taken
    truncated: np.ndarray        # bool[N] still running after max_steps


class _Batch(NamedTuple):
    key: jax.Array
    states: Any                  # the env's batched state
    observation: Any             # EnvObservation of the batch
    running: jax.Array
    episode_return: jax.Array
    length: jax.Array


def run_env_episodes(env, policy: Policy, key: jax.Array, num_episodes: int,
                     max_steps: int) -> EnvEpisodeResults:
    """Plays `num_episodes` episodes of `env` in parallel until each ends or reaches
    `max_steps` steps. One jitted function steps the whole batch (the policy's actions, then
    the env's step); a Python loop calls it, so an interrupt is seen between steps."""
    batch = _start_function(env, num_episodes)(key)
    advance = _advance_function(env, policy.act)
    for t in range(max_steps):
        batch = advance(policy.params, batch)
        if t % _END_CHECK_INTERVAL == _END_CHECK_INTERVAL - 1 and not bool(batch.running.any()):
            break
    return EnvEpisodeResults(*jax.device_get((batch.episode_return, batch.length,
                                              batch.running)))


@functools.lru_cache(maxsize=None)
def _start_function(env, num_episodes: int):
    def start(key) -> _Batch:
        reset_key, loop_key = jax.random.split(key)
        observation, states = env.batch_reset(jax.random.split(reset_key, num_episodes))
        return _Batch(key=loop_key, states=states, observation=observation,
                      running=jnp.ones((num_episodes,), jnp.bool_),
                      episode_return=jnp.zeros((num_episodes,), jnp.float32),
                      length=jnp.zeros((num_episodes,), jnp.int32))

    return jax.jit(start, compiler_options=xla_options.compiler_options())


@functools.lru_cache(maxsize=None)
def _advance_function(env, act):
    """One step of every episode; one compilation per (env, policy kind), the policy's params
    a traced argument. Ended episodes keep their numbers while their envs step on unseen
    (fixed shapes under vmap)."""
    batched_act = jax.vmap(act, in_axes=(None, 0, 0, 0, 0))

    def advance(params, batch: _Batch) -> _Batch:
        num_episodes = batch.running.shape[0]
        key, act_key, step_key = jax.random.split(batch.key, 3)
        actions = batched_act(params, jax.random.split(act_key, num_episodes), batch.states,
                              batch.observation.features, batch.observation.action_mask)
        observation, states, reward, done, _ = env.batch_step(
            jax.random.split(step_key, num_episodes), batch.states, actions)
        running = batch.running
        return _Batch(key=key, states=states, observation=observation,
                      running=running & ~done,
                      episode_return=jnp.where(running, batch.episode_return + reward,
                                               batch.episode_return),
                      length=jnp.where(running, batch.length + 1, batch.length))

    return jax.jit(advance, compiler_options=xla_options.compiler_options())


def summarise(results: EnvEpisodeResults, env_id: str) -> dict:
    """The report of one policy on `env_id`."""
    returns = results.episode_return
    return {
        "env": env_id,
        "episodes": int(returns.shape[0]),
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "min_return": float(np.min(returns)),
        "max_return": float(np.max(returns)),
        "mean_length": float(np.mean(results.length)),
        "truncated_rate": float(np.mean(results.truncated)),
    }


def evaluation_table(summaries: dict[str, dict]) -> str:
    """One row per policy: return, its range, episode length and the share cut off."""
    name_width = max([len("policy")] + [len(name) for name in summaries])
    header = (f"{'policy':<{name_width}}  {'return (mean +- std)':>22}  {'min':>9}  {'max':>9}  "
              f"{'length':>7}  {'cut off':>7}")
    lines = [header, "-" * len(header)]
    for name, s in summaries.items():
        lines.append(
            f"{name:<{name_width}}  {s['mean_return']:>10.3f} +- {s['std_return']:<8.3f}  "
            f"{s['min_return']:>9.3f}  {s['max_return']:>9.3f}  {s['mean_length']:>7.1f}  "
            f"{100 * s['truncated_rate']:>6.1f}%")
    return "\n".join(lines)
