"""Many episodes at once: a jitted, vmapped episode runner and the summary statistics.

The runner drives the game API directly (`step.reset` / `step.step`, `valid_actions`,
`observation.flatten`): the flat features are the ones the env feeds the network, and the policy
also gets the full game state, which the scripted baselines need.

Episodes end on death, victory or an invalid action (§13.2). A policy that neither wins nor dies
could run for ever, so every episode is capped at `max_steps` steps; one that reaches the cap
counts as truncated and keeps the stage and score it had. The loop stops as soon as every
episode has ended.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import observation
from hackmatrix.game import step as game_step
from hackmatrix.game import valid_actions as valid

# `act(params, key, game_state, features, action_mask) -> action`, unbatched.
ActFunction = Callable[[Any, jax.Array, Any, jax.Array, jax.Array], jax.Array]

DEFAULT_MAX_STEPS = 2000  # the training env's default episode limit (EnvParams)


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
            valid.valid_actions(game_state))


def run_episodes(policy: Policy, key: jax.Array, num_episodes: int,
                 max_steps: int = DEFAULT_MAX_STEPS) -> EpisodeResults:
    """Plays `num_episodes` fresh games in parallel until each ends or reaches `max_steps`."""
    results = _run_episodes_jit(policy.act, num_episodes, max_steps, policy.params, key)
    return EpisodeResults(*jax.device_get(results))


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _run_episodes_jit(act, num_episodes, max_steps, params, key):
    reset_key, loop_key = jax.random.split(key)
    states, _ = jax.vmap(game_step.reset)(jax.random.split(reset_key, num_episodes))
    batched_act = jax.vmap(act, in_axes=(None, 0, 0, 0, 0))
    batched_step = jax.vmap(game_step.step)
    batched_observe = jax.vmap(features_and_mask)

    zeros_i32 = jnp.zeros((num_episodes,), jnp.int32)
    false = jnp.zeros((num_episodes,), jnp.bool_)
    initial = dict(
        key=loop_key, t=jnp.int32(0), states=states, running=~false,
        episode_return=jnp.zeros((num_episodes,), jnp.float32), length=zeros_i32,
        stage=states.stage, score=states.core.score, won=false, death=false,
        invalid_action=false, action_counts=jnp.zeros((num_episodes, C.NUM_ACTIONS), jnp.int32))

    def keep_going(carry):
        return (carry["t"] < max_steps) & jnp.any(carry["running"])

    def one_step(carry):
        key, act_key, step_key = jax.random.split(carry["key"], 3)
        features, masks = batched_observe(carry["states"])
        actions = batched_act(params, jax.random.split(act_key, num_episodes), carry["states"],
                              features, masks)
        states, _, rewards, done, info = batched_step(
            jax.random.split(step_key, num_episodes), carry["states"], actions)
        running = carry["running"]

        def update(old, new):
            # Finished episodes keep their final numbers; their games keep stepping unseen.
            return jnp.where(running, new, old)

        return dict(
            key=key, t=carry["t"] + 1, states=states, running=running & ~done,
            episode_return=update(carry["episode_return"], carry["episode_return"] + rewards),
            length=update(carry["length"], carry["length"] + 1),
            stage=update(carry["stage"], info["stage"]),
            score=update(carry["score"], info["score"]),
            won=update(carry["won"], info["won"]),
            death=update(carry["death"], info["death"]),
            invalid_action=update(carry["invalid_action"], info["invalid_action"]),
            action_counts=carry["action_counts"] + jnp.where(
                running[:, None], jax.nn.one_hot(actions, C.NUM_ACTIONS, dtype=jnp.int32), 0),
        )

    final = jax.lax.while_loop(keep_going, one_step, initial)
    return (final["episode_return"], final["length"], final["stage"], final["score"],
            final["won"], final["death"], final["invalid_action"], final["running"],
            final["action_counts"])


def summarise(results: EpisodeResults) -> dict:
    """The report of one policy: the JSON fields of the issue plus action and program use."""
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
