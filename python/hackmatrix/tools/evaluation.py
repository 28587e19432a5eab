"""Many episodes at once: a jitted, vmapped episode runner and the summary statistics.

The runner drives the game API directly (`transition.reset` / `transition.step`, `valid_actions`,
`observation.flatten`): the flat features are the ones the env feeds the network, and the policy
also gets the full game state, which the scripted baselines need.

Episodes end on death, victory or an invalid action (§13.2). A policy that neither wins nor dies
could run for ever, so every episode is capped at `max_steps` steps; one that reaches the cap
counts as truncated and keeps the stage and score it had. The loop stops soon after every
episode has ended.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix import xla_options
from hackmatrix.game import constants as C
from hackmatrix.game import observation
from hackmatrix.game import transition
from hackmatrix.game import action_mask
from hackmatrix.game.env import EnvParams

# `act(params, key, game_state, features, action_mask) -> action`, unbatched.
ActFunction = Callable[[Any, jax.Array, Any, jax.Array, jax.Array], jax.Array]

DEFAULT_MAX_STEPS = EnvParams.max_steps_in_episode  # the training env's default episode limit


class Policy(NamedTuple):
    name: str
    act: ActFunction
    params: Any  # a pytree passed to `act` as a traced argument (None for the baselines)


class EpisodeResults(NamedTuple):
    """Per-episode outcomes, NumPy arrays with a leading episode axis."""
    episode_return: np.ndarray   # f32[N]
    length: np.ndarray           # i32[N] steps taken
    stage: np.ndarray            # i32[N] stage at the end (8 on a win)
    score: np.ndarray            # i32[N]
    won: np.ndarray              # bool[N]
    death: np.ndarray            # bool[N]
    invalid_action: np.ndarray   # bool[N]
    truncated: np.ndarray        # bool[N] still running after max_steps
    action_counts: np.ndarray    # i32[N, 28]


def features_and_mask(game_state):
    """What the network sees, and the valid-action mask."""
    return (observation.flatten(observation.observe(game_state)),
            action_mask.valid_actions(game_state))


class _Batch(NamedTuple):
    """Everything the episode loop carries between steps (leading axis: episodes)."""
    key: jax.Array
    act_keys: jax.Array
    states: Any                   # batched GameState
    features: jax.Array
    action_masks: jax.Array
    running: jax.Array
    episode_return: jax.Array
    length: jax.Array
    stage: jax.Array
    score: jax.Array
    won: jax.Array
    death: jax.Array
    invalid_action: jax.Array
    action_counts: jax.Array


def run_episodes(policy: Policy, key: jax.Array, num_episodes: int,
                 max_steps: int = DEFAULT_MAX_STEPS) -> EpisodeResults:
    """Plays `num_episodes` fresh games in parallel until each ends or reaches `max_steps`.

    The game step of the whole batch is one jitted function shared by every policy, and the
    policy's batched action is another; a Python loop alternates them. Compiling the game step
    dominates start-up, so evaluating several policies compiles it once, not once per policy.
    """
    batch = _compiled(_start, static_argnums=1)(key, num_episodes)
    act, advance = _batched_act(policy.act), _compiled(_advance)
    for t in range(max_steps):
        actions = act(policy.params, batch.act_keys, batch.states, batch.features,
                      batch.action_masks)
        batch = advance(batch, actions)
        # Checking for the end forces a device sync, so look only every few steps.
        if t % _END_CHECK_INTERVAL == _END_CHECK_INTERVAL - 1 and not bool(batch.running.any()):
            break
    return EpisodeResults(*jax.device_get((
        batch.episode_return, batch.length, batch.stage, batch.score, batch.won, batch.death,
        batch.invalid_action, batch.running, batch.action_counts)))


_END_CHECK_INTERVAL = 16


@functools.lru_cache(maxsize=None)
def _compiled(function, static_argnums=()):
    """`jax.jit` with the CPU compile options, made on first use (they need JAX's backend)."""
    return jax.jit(function, static_argnums=static_argnums,
                   compiler_options=xla_options.compiler_options())


@functools.lru_cache(maxsize=None)
def _batched_act(act: ActFunction):
    return _compiled(jax.vmap(act, in_axes=(None, 0, 0, 0, 0)))


def _split(key, count):
    return jax.random.split(key, count)


def _start(key, num_episodes) -> _Batch:
    reset_key, act_key, loop_key = jax.random.split(key, 3)
    states, _ = jax.vmap(transition.reset)(_split(reset_key, num_episodes))
    features, masks = jax.vmap(features_and_mask)(states)
    zeros_i32 = jnp.zeros((num_episodes,), jnp.int32)
    false = jnp.zeros((num_episodes,), jnp.bool_)
    return _Batch(
        key=loop_key, act_keys=_split(act_key, num_episodes), states=states, features=features,
        action_masks=masks, running=~false,
        episode_return=jnp.zeros((num_episodes,), jnp.float32), length=zeros_i32,
        stage=states.stage, score=states.core.score, won=false, death=false,
        invalid_action=false, action_counts=jnp.zeros((num_episodes, C.NUM_ACTIONS), jnp.int32))


def _advance(batch: _Batch, actions) -> _Batch:
    """One step of every game; finished episodes keep their final numbers while their games
    keep stepping unseen (fixed shapes under vmap)."""
    num_episodes = actions.shape[0]
    key, step_key, act_key = jax.random.split(batch.key, 3)
    states, _, rewards, done, info = jax.vmap(transition.step)(
        _split(step_key, num_episodes), batch.states, actions)
    features, masks = jax.vmap(features_and_mask)(states)
    running = batch.running

    def update(old, new):
        return jnp.where(running, new, old)

    return _Batch(
        key=key, act_keys=_split(act_key, num_episodes), states=states, features=features,
        action_masks=masks, running=running & ~done,
        episode_return=update(batch.episode_return, batch.episode_return + rewards),
        length=update(batch.length, batch.length + 1),
        stage=update(batch.stage, info["stage"]),
        score=update(batch.score, info["score"]),
        won=update(batch.won, info["won"]),
        death=update(batch.death, info["death"]),
        invalid_action=update(batch.invalid_action, info["invalid_action"]),
        action_counts=batch.action_counts + jnp.where(
            running[:, None], jax.nn.one_hot(actions, C.NUM_ACTIONS, dtype=jnp.int32), 0),
    )


def summarise(results: EpisodeResults) -> dict:
    """The report of one policy: its summary statistics plus action and program use."""
    counts = results.action_counts.sum(axis=0)
    total_actions = max(int(counts.sum()), 1)
    program_counts = counts[C.FIRST_PROGRAM_ACTION:]
    return {
        "episodes": int(results.episode_return.shape[0]),
        "mean_return": float(np.mean(results.episode_return)),
        "std_return": float(np.std(results.episode_return)),
        "mean_stage": float(np.mean(results.stage)),
        "max_stage": int(np.max(results.stage)),
        "win_rate": float(np.mean(results.won)),
        "mean_score": float(np.mean(results.score)),
        "mean_length": float(np.mean(results.length)),
        "death_rate": float(np.mean(results.death)),
        "invalid_action_rate": float(np.mean(results.invalid_action)),
        "truncated_rate": float(np.mean(results.truncated)),
        "action_fractions": {
            "move": float(counts[:C.NUM_DIRECTIONS].sum() / total_actions),
            "siphon": float(counts[C.ACTION_SIPHON] / total_actions),
            "program": float(program_counts.sum() / total_actions),
        },
        "programs_used": {name: int(count) for name, count in zip(C.PROGRAM_NAMES, program_counts)
                          if count > 0},
    }
