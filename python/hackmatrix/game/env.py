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
- On CPU, jit with `compiler_options=hackmatrix.xla_options.compiler_options()` as the trainer
  and the tools do: the step runs faster, with bit-identical results (see that module).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from hackmatrix.game import action_mask
from hackmatrix.game import batching
from hackmatrix.game import constants as C
from hackmatrix.game import curriculum
from hackmatrix.game import enemy_turn
from hackmatrix.game import history
from hackmatrix.game import observation
from hackmatrix.game import reward
from hackmatrix.game import siphon_quality
from hackmatrix.game import spaces
from hackmatrix.game import spawning
from hackmatrix.game import state as S
from hackmatrix.game import transition
from hackmatrix.game import worldgen
from hackmatrix.game.actions import is_program_action


RULES_REWARD_WEIGHTS = (1.0,) * C.NUM_REWARD_COMPONENTS
DISTANCE_REWARD_PER_CELL = 0.05  # §14.1 #6


@struct.dataclass
class EnvParams:
    """Traced env settings. The defaults give the rules' game and reward (§14); the reward
    options are for training (`reward_options.py` builds them from names) and never change the
    game; the curriculum (`curriculum.py`) only changes what a new game starts with.

    reward_weights: one factor per component of `C.REWARD_COMPONENTS`, in that order; the
        reward is the weighted components added in table order (all 1.0: the rules' reward).
    distance_potential: reward per cell of §14.2's signed Δ, paid in both directions, so that
        a step away costs what a step closer earns (potential-based shaping: pacing earns
        nothing). Usually set with the `distance` weight at 0, which it replaces.
    program_potential: reward per program owned, paid on the change in the number of owned
        programs (acquiring one pays it, UNDO taking one back costs it): potential-based, so
        it adds up to this times the programs owned at the end, however they were reached.
    start_programs, start_programs_prob: a new game owns this many random programs, with this
        probability (`curriculum.py`); 0 programs is the rules' start.
    """
    max_steps_in_episode: int = 2000
    reward_weights: tuple = RULES_REWARD_WEIGHTS
    distance_potential: float = 0.0
    program_potential: float = 0.0
    start_programs: int = 0
    start_programs_prob: float = 0.5


@struct.dataclass
class EnvState:
    game: S.GameState
    time: jax.Array  # int32: steps taken in the current episode


class EnvObservation(NamedTuple):
    features: jax.Array     # f32[1545]: player ++ programs ++ grid (row-major)
    action_mask: jax.Array  # bool[28]


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

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """The 28 actions (gymnax interface; `EnvObservation.action_mask` says which are valid)."""
        return spaces.action_space()

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """The space of `EnvObservation.features`, f32[1545] (gymnax interface)."""
        return spaces.feature_space()

    def reset_env(self, key, params: EnvParams):
        """A new game (§13.1): returns (EnvObservation, EnvState). A finished episode of `step`
        restarts from the same `worldgen.new_game_parts`, so it continues exactly as
        `reset_env(reset_key)` would start."""
        game = _with_start_programs(key, worldgen.new_game(key), True, params)
        return _env_observation(game), EnvState(game=game, time=jnp.asarray(0, jnp.int32))

    def reset_shapes(self, params: EnvParams | None = None):
        """`jax.ShapeDtypeStruct`s of `reset_env`'s (EnvObservation, EnvState), from a blank
        state: no stage generation is traced. The trainer lowers its update against them while
        the real reset traces and compiles beside that compile."""
        def blank():
            game = S.empty_state()
            return (EnvObservation(jnp.zeros(observation.FLAT_SIZE, jnp.float32),
                                   jnp.zeros(C.NUM_ACTIONS, jnp.bool_)),
                    EnvState(game=game, time=jnp.asarray(0, jnp.int32)))
        return jax.eval_shape(blank)

    def _step_before_generation(self, key, state: EnvState, action, params: EnvParams):
        """The game step up to its stage generation (see transition.py), with the env's time,
        done (truncation included) and info: (StepBeforeGeneration, time, done, info)."""
        return _with_time(transition.step_before_generation(key, state.game, action), state,
                          params)

    def step_env(self, key, state: EnvState, action, params: EnvParams):
        """One game step without auto-reset: (obs, state, reward, done, info)."""
        before, time, done, info = self._step_before_generation(key, state, action, params)
        game = transition.finish(before)
        return (_env_observation(game), EnvState(game=game, time=time),
                jnp.asarray(before.reward, jnp.float32), done, info)

    def reset(self, key, params: EnvParams | None = None):
        """`reset_env` with the default params unless given: (EnvObservation, EnvState)."""
        return self.reset_env(key, self.default_params if params is None else params)

    def get_obs(self, state: EnvState, params: EnvParams | None = None) -> EnvObservation:
        """The observation of `state` (gymnax interface): for an EnvState built by hand, such
        as `EnvState(game=scenario.from_dict(d), time=jnp.int32(0))`."""
        del params  # the observation does not depend on them
        return _env_observation(state.game)

    def step(self, key, state: EnvState, action, params: EnvParams | None = None):
        """`step_env`, then a fresh episode in place of a finished one (gymnax auto-reset).

        Equal to `step_env(step_key, ...)` followed by `reset_env(reset_key)` on done, with
        `step_key, reset_key = spawning.split_key(key, 2)`, but it generates one stage and
        observes one state. One difference no observable shows: the new game keeps the UNDO
        buffer's stale contents (its pointers say empty, so UNDO is invalid), where
        `reset_env` zeroes it (`state.select`).
        A step that generates a stage never ends the game (it completes a stage before stage
        8, and no enemy turn follows, so nobody dies; completing stage 8 wins and generates
        nothing), so on done the generation can take a new game's starting state instead of
        the completed stage (whose successor a truncation would discard anyway).
        """
        params = self.default_params if params is None else params
        step_key, reset_key = spawning.split_key(key, 2)
        before, time, done, info = self._step_before_generation(step_key, state, action, params)
        generation_input, generation_key = _generation_input(reset_key, done, before)
        generated = worldgen.generate_board(generation_key, generation_input)
        game = transition.select_generated(done | before.generates, generated, generation_input,
                                           before.state)
        game = transition.place_once(game, done | before.generates, generation_key, before)
        game = _with_start_programs(reset_key, game, done, params)
        return _finish_step(game, time, done, before, info)

    def batch_reset(self, keys, params: EnvParams | None = None):
        """`reset` over a batch of keys (the leading axis): (EnvObservation, EnvState)."""
        params = self.default_params if params is None else params
        return jax.vmap(self.reset_env, in_axes=(0, None))(keys, params)

    def batch_step(self, keys, states: EnvState, actions, params: EnvParams | None = None):
        """`step` over a batch (leading axis of keys, states and actions), bit-identical to
        `jax.vmap(step)` but cheaper: programs, the siphon quality, transmission placement and
        stage generations run only for the envs that need them (`batching.compacted_map`),
        where under a plain vmap every env pays for all of them every step, and the enemy loop
        stops after the batch's largest number of acting enemies instead of the capacity.
        """
        params = self.default_params if params is None else params
        # As `step` reads them (actions.resolve): a float action must not pick other branches.
        actions = jnp.asarray(actions).astype(jnp.int32)
        size = batching.chunk_size(keys.shape[0])
        step_keys, reset_keys = jnp.moveaxis(jax.vmap(spawning.split_key, in_axes=(0, None))(
            keys, 2), 1, 0)
        games = states.game

        qualities = batching.compacted_map(
            siphon_quality.siphon_quality, actions == C.ACTION_SIPHON,
            (games.replace(history=None),), jnp.zeros(actions.shape, jnp.float32), size)
        acted, outcomes = jax.vmap(transition.resolve_except_programs)(step_keys, games, actions,
                                                                      qualities)
        # Programs resolve in the results of the other actions, where a program env still has
        # its input state: built in place, nothing else reads those arrays.
        acted, outcomes = batching.compacted_map(
            lambda key, action, buffer, row: transition.resolve_program(
                key, row[0].replace(history=buffer), action),
            is_program_action(actions), (step_keys, actions, games.history),
            (acted.replace(history=None), outcomes), size, fallback_is_input=True)
        resolved = jax.vmap(transition.resolved_step)(
            step_keys, games, actions, acted.replace(history=games.history), outcomes)
        loop_bounds = jnp.max(jax.vmap(enemy_turn.acting_counts)(resolved.state), axis=0)
        before = jax.vmap(transition.before_generation, in_axes=(0, None))(resolved, loop_bounds)
        before, time, done, info = jax.vmap(_with_time, in_axes=(0, 0, None))(before, states,
                                                                             params)

        def generate(reset_key, done, before, state):
            generation_input, generation_key = _generation_input(reset_key, done,
                                                                 before._replace(state=state))
            return worldgen.generate_board(generation_key, generation_input).replace(history=None)

        generates = done | before.generates
        # The state goes in as the fallback only: nothing reads it after the generation, so
        # XLA generates into its buffers (no copy of each array per step).
        generated = batching.compacted_map(generate, generates,
                                           (reset_keys, done, before._replace(state=None)),
                                           before.state.replace(history=None), size,
                                           fallback_is_input=True)
        game = generated.replace(history=before.state.history)
        generation_keys = jax.vmap(_generation_key)(reset_keys, done, before.generation_key)
        # `transition.place_once`, with the placement run only for the envs placing any
        # transmission (about one in ten under random play; with none it changes nothing).
        # Packed words come back from the chunks (one array, not the seven of a Transmissions).
        requests = jax.vmap(transition.placement_request)(game, generates, generation_keys, before)
        words = batching.compacted_map(
            _placed_words, requests.count > 0, (game.replace(history=None), requests),
            jnp.zeros_like(game.core.transmissions.row), size)
        game = game.replace(core=game.core.replace(
            transmissions=jax.vmap(spawning.with_placed)(game.core.transmissions, words)))
        game = jax.vmap(history.push)(game, before.snapshot & ~generates)
        game = jax.vmap(_with_start_programs, in_axes=(0, 0, 0, None))(reset_keys, game, done,
                                                                       params)
        return jax.vmap(_finish_step)(game, time, done, before, info)


def _placed_words(game: S.GameState, request: spawning.Placement):
    return spawning.placed_words(request.key, game, request.count, request.from_siphon,
                                 request.from_scheduled)


def _with_time(before: transition.StepBeforeGeneration, state: EnvState, params: EnvParams):
    """The env's time, done (truncation included) and info for a game step up to its stage
    generation: (StepBeforeGeneration, time, done, info)."""
    time = state.time + 1
    truncated = (time >= params.max_steps_in_episode) & ~before.done
    info = {name: before.info[name] for name in ("reward_components", "stage", "score",
                                                 "stage_complete", "won", "death",
                                                 "invalid_action")}
    info["truncated"] = truncated
    before = before._replace(reward=training_reward(before.info, params))
    return before, time, before.done | truncated, info


def training_reward(info: dict, params: EnvParams) -> jax.Array:
    """The reward under `params`' weights and potentials; with the defaults, exactly the rules'
    reward (each component times 1.0, added in the same order, plus 0.0 twice)."""
    weights = jnp.asarray(params.reward_weights, jnp.float32)
    weighted = reward.total(info["reward_components"] * weights)
    return (weighted + jnp.float32(params.distance_potential) * info["distance_delta"]
            + jnp.float32(params.program_potential) * info["programs_gained"])


def _with_start_programs(new_game_key, game: S.GameState, is_new, params: EnvParams):
    """`game`, when `is_new` (a new game of `new_game_key`), with the curriculum's programs."""
    return curriculum.with_start_programs(curriculum.curriculum_key(new_game_key), game,
                                          params.start_programs,
                                          jnp.where(is_new, params.start_programs_prob, 0.0))


def _generation_input(reset_key, done, before: transition.StepBeforeGeneration):
    """What an auto-resetting step generates from: a new game's starting state when `done`,
    else the completed stage (used only when `before.generates`). (state, generation key)."""
    start, _ = worldgen.new_game_parts(reset_key)
    return (S.select(done, start, before.state),
            _generation_key(reset_key, done, before.generation_key))


def _generation_key(reset_key, done, stage_key):
    """The key an auto-resetting step generates with: a new game's when `done`."""
    return jnp.where(done, worldgen.new_game_parts(reset_key)[1], stage_key)


def _finish_step(game: S.GameState, time, done, before: transition.StepBeforeGeneration, info):
    next_state = EnvState(game=game, time=jnp.where(done, 0, time))
    return (_env_observation(game), next_state, jnp.asarray(before.reward, jnp.float32), done,
            info)
