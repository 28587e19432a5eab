"""The transition function, reset / step: one game step in the order of rules §5, invalid actions (§4.4), done (§13.2).

A step is split at the stage generation (§12.2), the most expensive part after the enemy turn:
`step_before_generation` does everything else and reports whether a generation is needed, and
`step` finishes with it. Reward, done and info are final before the generation because no reward
component depends on the generated board (§14: after a completion Δ = D_before, and generation
leaves hp, credits, energy and score untouched). The auto-resetting env uses the split to
generate once per step: either the completed stage's successor or a new game, never both (a
completing step has no enemy turn, so it cannot die; a won game generates nothing).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from hackmatrix.game import actions
from hackmatrix.game import constants as C
from hackmatrix.game import enemy_turn
from hackmatrix.game import fusion
from hackmatrix.game import observation
from hackmatrix.game import outcome as O
from hackmatrix.game import pathfinding
from hackmatrix.game import reward
from hackmatrix.game import spawning
from hackmatrix.game import state as S
from hackmatrix.game import worldgen


class StepBeforeGeneration(NamedTuple):
    """A step up to the stage generation. When `generates`, `state` is the completed stage's
    state with §12.1 applied (hp + 1, stage + 1, scheduled interval) and the step ends with
    `worldgen.generate_stage(generation_key, state)`; otherwise the step ends with the enemy
    turn's transmission placement and snapshot (`placement`, `snapshot`; none without a full
    enemy turn). `finish` does either."""
    state: S.GameState
    generates: jax.Array       # bool
    generation_key: jax.Array
    placement: spawning.Placement
    snapshot: jax.Array        # bool
    reward: jax.Array          # f32, final
    done: jax.Array            # bool, final
    info: dict                 # final; as `step`'s info, but `reward_components` is f32[15]


def reset(key):
    """A new game (§13.1) and its observation."""
    state = worldgen.new_game(key)
    return state, observation.observe(state)


def _step_keys(key):
    """The step's keys (resolve, generation, enemy turn), from the step's `key`. The batched env
    step resolves actions in parts; every part must use these to stay bit-identical to `step`."""
    return spawning.split_key(key, 3)


def resolve_except_programs(key, state: S.GameState, action, quality):
    """`actions.resolve` with the step's resolve key, programs left to `resolve_program`."""
    return actions.resolve(_step_keys(key)[0], state, action, quality, programs_elsewhere=True)


def resolve_program(key, state: S.GameState, action):
    """`actions.resolve_program` with the step's resolve key (`key` is the step's), for the
    batched env step: it resolves programs apart, then calls `resolved_step`."""
    return actions.resolve_program(_step_keys(key)[0], state, action)


class ActionResolved(NamedTuple):
    """A step up to its enemy turn (§5.1-§5.3): what `before_generation` finishes."""
    start_state: S.GameState  # the step's input, for the §5.1 values (`reward.before`)
    state: S.GameState          # after the action and the stage advance
    outcome: O.ActionOutcome
    action: jax.Array
    stage_completed: jax.Array  # bool
    generates: jax.Array        # bool
    won: jax.Array              # bool (before the validity check)
    generation_key: jax.Array
    enemy_key: jax.Array


def resolve_action(key, state: S.GameState, action) -> ActionResolved:
    """§5.1-§5.3: the reward's starting point (kept as the input state), the action, the stage
    advance."""
    action = jnp.asarray(action, jnp.int32)
    resolved, outcome = actions.resolve(_step_keys(key)[0], state, action)  # §5.2
    return resolved_step(key, state, action, resolved, outcome)


def resolved_step(key, state: S.GameState, action, resolved: S.GameState,
                  outcome: O.ActionOutcome) -> ActionResolved:
    """`resolve_action` from the action's result (`actions.resolve` with the step's resolve key):
    the stage advance (§5.3). The batched env step resolves programs apart, then calls this."""
    action = jnp.asarray(action, jnp.int32)
    _, generation_key, enemy_key = _step_keys(key)
    stage_completed = ~outcome.failed & outcome.exit_reached
    staged, generates, won = worldgen.advance_stage(resolved, stage_completed)         # §5.3
    return ActionResolved(state, staged, outcome, action, stage_completed, generates, won,
                          generation_key, enemy_key)


def before_generation(resolved: ActionResolved, enemy_loop_bounds=None) -> StepBeforeGeneration:
    """§5.4-§5.5: the enemy turn, reward and done. `enemy_loop_bounds`: see
    `enemy_turn.acting_counts` (None: the capacity)."""
    outcome, stage_completed, won = resolved.outcome, resolved.stage_completed, resolved.won
    valid = ~outcome.failed
    # The enemy turn never follows a completion (§5), so generating after it is the same as
    # generating before it.
    enemy_turn_follows = valid & outcome.enemy_turn_follows & ~stage_completed
    # Reward and done read no transmission, so they come before the enemy turn's placement.
    after, placement, snapshot = enemy_turn.run_until_placement(                        # §5.4
        resolved.enemy_key, resolved.state, enemy_turn_follows, enemy_loop_bounds)

    # §5.5 reward and done. An invalid action scores exactly 0 and leaves the state as it was:
    # `resolve` returns it unchanged, and neither stage completion nor the enemy turn runs.
    # §5.1's distance is the input state's: it is searched with the end state's, in one search.
    start_state = resolved.start_state
    start_distance, end_distance = pathfinding.path_distances(
        [(start_state, start_state.core.player_row, start_state.core.player_col),
         (after, after.core.player_row, after.core.player_col)])
    start_distance, end_distance = fusion.computed_once(start_distance, end_distance)
    start = reward.before(start_state, start_distance)                                # §5.1
    values = jnp.where(valid, reward.components(start, after, outcome, resolved.action,
                                                stage_completed, won, end_distance), 0.0)
    won = valid & won
    death = valid & (after.core.hp == 0)
    # §14.2's Δ before its max(0, ·), for the env's potential-based shaping option.
    distance_delta = jnp.where(valid & ~death, jnp.where(stage_completed, start_distance,
                                                         start_distance - end_distance), 0)
    info = {
        "reward_components": values,
        "distance_delta": distance_delta.astype(jnp.float32),
        # The change in owned programs (negative when UNDO takes one back), for the env's
        # program-ownership shaping option.
        "programs_gained": (jnp.sum(after.core.owned, dtype=jnp.int32)
                            - jnp.sum(start_state.core.owned, dtype=jnp.int32)
                            ).astype(jnp.float32),
        "invalid_action": ~valid,
        "stage": after.stage,
        "score": after.core.score,
        "stage_complete": stage_completed,
        "death": death,
        "won": won,
    }
    return StepBeforeGeneration(state=after, generates=resolved.generates,
                                generation_key=resolved.generation_key, placement=placement,
                                snapshot=snapshot,
                                reward=reward.total(values), done=~valid | death | won,
                                info=info)


def step_before_generation(key, state: S.GameState, action) -> StepBeforeGeneration:
    """One step (§5) without the stage generation; see `StepBeforeGeneration`."""
    return before_generation(resolve_action(key, state, action))


def select_generated(use_generated, generated: S.GameState, generation_input: S.GameState,
                     otherwise: S.GameState) -> S.GameState:
    """`generated` (= generate_board(key, generation_input)) where `use_generated`, else
    `otherwise`, which must equal `generation_input` wherever `use_generated` is false.

    A field the generation carries over is the very same array as in its input, and the input
    already holds the right value in both cases, so it is taken as is: only the regenerated
    fields are selected. The UNDO buffer is never selected over: it is taken from `otherwise`
    (the generation carries it, and a new game's empty history differs only in its pointers).
    """
    def select(new, given, old):
        return given if new is given else jnp.where(use_generated, new, old)

    without_buffer = jax.tree_util.tree_map(
        select, generated.replace(history=None), generation_input.replace(history=None),
        otherwise.replace(history=None))
    return without_buffer.replace(history=otherwise.history)


def placement_request(state: S.GameState, generated, generation_key,
                      before: StepBeforeGeneration) -> spawning.Placement:
    """A step's one transmission placement on `state`: the generated stage's transmissions
    where `generated` (`state` is then the generated board), else the enemy turn's request
    (`before.placement`).

    The batched step selects the request per env and places once, where placing in both the
    enemy turn and the generation would compile and run two placements."""
    return jax.tree_util.tree_map(
        lambda new, old: jnp.where(generated, new, old),
        worldgen.stage_transmissions(generation_key, state.stage), before.placement)


def place_once(state: S.GameState, generated, generation_key,
               before: StepBeforeGeneration) -> S.GameState:
    """The step's placement (`placement_request`) after `worldgen.generate_board` (`state` is
    the generated board where `generated`: no enemy turn's state survives a generation), then
    the enemy turn's snapshot (`before.snapshot`) where nothing was generated."""
    placement = placement_request(state, generated, generation_key, before)
    return enemy_turn.finish(state, placement, before.snapshot & ~generated)


def finish(before: StepBeforeGeneration) -> S.GameState:
    """The state at the end of the step: the next stage generated when `before.generates`."""
    generated = worldgen.generate_board(before.generation_key, before.state)
    state = select_generated(before.generates, generated, before.state, before.state)
    return place_once(state, before.generates, before.generation_key, before)


def step(key, state: S.GameState, action):
    """One step (§5); returns (state, observation, reward, done, info).

    info: `reward_components` (dict name -> f32, 15 entries summing to reward),
    `invalid_action`, `stage`, `score`, `stage_complete`, `death`, `won`, `distance_delta`
    (§14.2's Δ, signed: the `distance` component pays 0.05 × max(0, Δ)) and `programs_gained`
    (the change in the number of owned programs).
    """
    S.check_one_game(state, "step")
    before = step_before_generation(key, state, action)
    after = finish(before)
    values = before.info["reward_components"]
    info = before.info | {
        "reward_components": {name: values[i] for i, name in enumerate(C.REWARD_COMPONENTS)}}
    return after, observation.observe(after), before.reward, before.done, info
