"""Gymnax-style RL environment around the game (specs/architecture.md, "RL environment").

- `EnvParams` holds the traced settings (changing them never recompiles); static capacities live
  in constants.py.
- Observations are `EnvObservation(features=f32[1545], action_mask=bool[28])`: the flattened §15
  observation and the §4 valid-action mask.
- `step_env` never resets; `step` auto-resets on done (gymnax semantics): the returned
  observation and state start the next episode, while reward, done and info describe the step
  that was taken, with the terminal values from before the reset.
- An episode that reaches `max_steps_in_episode` steps is truncated: done is true and
  `info["truncated"]` is set (only when the game itself did not end on that step).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from hackmatrix.game import constants as C
from hackmatrix.game import observation
from hackmatrix.game import state as S
from hackmatrix.game import step as game_step
from hackmatrix.game import valid_actions


@struct.dataclass
class EnvParams:
    max_steps_in_episode: int = 2000


@struct.dataclass
class EnvState:
    game: S.GameState
    time: jax.Array  # int32: steps taken in the current episode


class EnvObservation(NamedTuple):
    features: jax.Array     # f32[1545]: player ++ programs ++ grid (row-major)
    action_mask: jax.Array  # bool[28]


def _new_game(key) -> S.GameState:
    """A new game with every leaf strongly typed.

    A weakly typed leaf (e.g. from a Python-scalar `jnp.where`) would give reset states other
    abstract types than stepped or scenario states, so a jitted step would compile twice.
    """
    game, _ = game_step.reset(key)
    return jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf, leaf.dtype), game)


def _env_observation(game: S.GameState) -> EnvObservation:
    return EnvObservation(features=observation.flatten(observation.observe(game)),
                          action_mask=valid_actions.valid_actions(game))


def _select_state(use_first, first: EnvState, second: EnvState) -> EnvState:
    """`first` where `use_first`, else `second`, without selecting over the UNDO buffer.

    `first` is always a fresh episode whose history is empty (size 0), so only its pointers
    matter; keeping `second`'s buffer contents is invisible and saves copying the largest part
    of the state on every step.
    """
    def select(a, b):
        return jnp.where(use_first, a, b)

    without_buffer = jax.tree_util.tree_map(
        select, first.replace(game=first.game.replace(history=None)),
        second.replace(game=second.game.replace(history=None)))
    return without_buffer.replace(game=without_buffer.game.replace(history=second.game.history))


class HackMatrixEnv:
    """The HackMatrix game as a single (unbatched) environment; `vmap` it for batches."""

    name = "HackMatrix"
    num_actions = C.NUM_ACTIONS
    observation_size = observation.FLAT_SIZE

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params: EnvParams):
        """A new game (§13.1): returns (EnvObservation, EnvState)."""
        game = _new_game(key)
        return _env_observation(game), EnvState(game=game, time=jnp.asarray(0, jnp.int32))

    def _game_step(self, key, state: EnvState, action, params: EnvParams):
        """The game step without its observation: (EnvState, reward, done, info)."""
        # The game's own observation output is unused here, so jit drops it: the env observes
        # only the state it returns (after the auto-reset choice in `step`).
        game, _, reward, terminated, game_info = game_step.step(key, state.game, action)
        time = state.time + 1
        truncated = (time >= params.max_steps_in_episode) & ~terminated
        info = {
            "reward_components": jnp.stack(
                [game_info["reward_components"][name] for name in C.REWARD_COMPONENTS]),
            "stage": game_info["stage"],
            "score": game_info["score"],
            "won": game_info["won"],
            "death": game_info["death"],
            "invalid_action": game_info["invalid_action"],
            "truncated": truncated,
        }
        return (EnvState(game=game, time=time), jnp.asarray(reward, jnp.float32),
                terminated | truncated, info)

    def step_env(self, key, state: EnvState, action, params: EnvParams):
        """One game step without auto-reset: (obs, state, reward, done, info)."""
        state, reward, done, info = self._game_step(key, state, action, params)
        return _env_observation(state.game), state, reward, done, info

    def reset(self, key, params: EnvParams | None = None):
        return self.reset_env(key, self.default_params if params is None else params)

    def step(self, key, state: EnvState, action, params: EnvParams | None = None):
        """`step_env`, then a fresh episode in place of a finished one (gymnax auto-reset).

        The observation is computed once, from the state actually returned.
        """
        params = self.default_params if params is None else params
        step_key, reset_key = jax.random.split(key)
        stepped, reward, done, info = self._game_step(step_key, state, action, params)
        fresh = EnvState(game=_new_game(reset_key), time=jnp.asarray(0, jnp.int32))
        next_state = _select_state(done, fresh, stepped)
        return _env_observation(next_state.game), next_state, reward, done, info
