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

from hackmatrix.game import action_mask
from hackmatrix.game import constants as C
from hackmatrix.game import observation
from hackmatrix.game import spawning
from hackmatrix.game import state as S
from hackmatrix.game import transition
from hackmatrix.game import worldgen


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


def _new_game_parts(key):
    """A new game (§13.1) before its stage generation: (starting state, generation key).

    `reset_env` and the auto-reset in `step` both draw their games from this, so a finished
    episode continues exactly as `reset_env(reset_key)` would start.
    """
    setup_key, stage_key = spawning.split_key(key, 2)
    return worldgen.starting_state(setup_key), stage_key


def _env_observation(game: S.GameState) -> EnvObservation:
    return EnvObservation(features=observation.flatten(observation.observe(game)),
                          action_mask=action_mask.valid_actions(game))


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
        start, generation_key = _new_game_parts(key)
        game = worldgen.generate_stage(generation_key, start)
        return _env_observation(game), EnvState(game=game, time=jnp.asarray(0, jnp.int32))

    def _step_before_generation(self, key, state: EnvState, action, params: EnvParams):
        """The game step up to its stage generation (see transition.py), with the env's time,
        done (truncation included) and info: (StepBeforeGeneration, time, done, info)."""
        before = transition.step_before_generation(key, state.game, action)
        time = state.time + 1
        truncated = (time >= params.max_steps_in_episode) & ~before.done
        info = {name: before.info[name] for name in ("reward_components", "stage", "score", "won",
                                                     "death", "invalid_action")}
        info["truncated"] = truncated
        return before, time, before.done | truncated, info

    def step_env(self, key, state: EnvState, action, params: EnvParams):
        """One game step without auto-reset: (obs, state, reward, done, info)."""
        before, time, done, info = self._step_before_generation(key, state, action, params)
        game = transition.finish(before)
        return (_env_observation(game), EnvState(game=game, time=time),
                jnp.asarray(before.reward, jnp.float32), done, info)

    def reset(self, key, params: EnvParams | None = None):
        return self.reset_env(key, self.default_params if params is None else params)

    def step(self, key, state: EnvState, action, params: EnvParams | None = None):
        """`step_env`, then a fresh episode in place of a finished one (gymnax auto-reset).

        Equal to `step_env(step_key, ...)` followed by `reset_env(reset_key)` on done, with
        `step_key, reset_key = split(key)`, but it generates one stage and observes one state.
        A step that completes a stage never ends the game (no enemy turn follows, so nobody
        dies; a won game generates nothing), so on done the generation can take a new game's
        starting state instead of the completed stage (whose successor a truncation would
        discard anyway).
        """
        params = self.default_params if params is None else params
        step_key, reset_key = jax.random.split(key)
        before, time, done, info = self._step_before_generation(step_key, state, action, params)
        start, new_game_key = _new_game_parts(reset_key)
        generation_input = S.select(done, start, before.state)
        generation_key = jnp.where(done, new_game_key, before.generation_key)
        generated = worldgen.generate_stage(generation_key, generation_input)
        game = transition.select_generated(done | before.generates, generated, generation_input,
                                           before.state)
        next_state = EnvState(game=game, time=jnp.where(done, 0, time))
        return (_env_observation(game), next_state, jnp.asarray(before.reward, jnp.float32),
                done, info)
