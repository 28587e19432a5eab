"""Resolving one player action (rules §6 and the dispatch of §3).

`resolve(key, state, action)` handles all 28 actions. Under `vmap` every branch runs for every
env, so each branch is computed exactly once for the traced action (the move for the traced
direction, the siphon, the program via `programs.apply`) and the results are merged field by
field. A field that a branch leaves untouched is the very same array object as the input, and the
merge skips selects between identical arrays, so XLA only selects what actually changed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import fusion
from hackmatrix.game import outcome as O
from hackmatrix.game import programs
from hackmatrix.game import siphon_quality
from hackmatrix.game import state as S
from hackmatrix.game import action_mask

_ROWS = np.arange(C.BOARD_SIZE, dtype=np.int32)[:, None]
_COLS = np.arange(C.BOARD_SIZE, dtype=np.int32)[None, :]
# Further than any cell on a 6x6 board: "not on the ray" / "no block on the ray".
_NOT_ON_RAY = 99


def first_index(mask):
    """Index of the first True entry of a 1-d mask (its length if none): the list-order pick."""
    return jnp.min(jnp.where(mask, jnp.arange(mask.shape[0]), mask.shape[0]))


def remove_at(items, index):
    """Stable removal of slot `index` (nothing if index >= capacity).

    Equivalent to `state.compact` for a single slot, as a shift by one: slots from `index`
    onwards take their successor's value.
    """
    shifted_from = jnp.arange(items.active.shape[0]) >= index

    def shift(field):
        successor = jnp.concatenate([field[1:], jnp.zeros_like(field[:1])])
        return jnp.where(shifted_from, successor, field)

    return jax.tree_util.tree_map(shift, items)


def _ray_steps(rows, cols, player_row, player_col, delta_row, delta_col):
    """Number of steps from the player along the ray to (rows, cols); _NOT_ON_RAY if off it."""
    offset_row = rows - player_row
    offset_col = cols - player_col
    steps = offset_row * delta_row + offset_col * delta_col
    on_ray = (offset_row == steps * delta_row) & (offset_col == steps * delta_col) & (steps >= 1)
    return jnp.where(on_ray, steps, _NOT_ON_RAY)


def _move_or_attack(state: S.GameState, direction):
    """§6.1 for the (traced) direction 0-3: line of fire, then attack or move."""
    core = state.core
    cells, enemies, transmissions = core.cells, core.enemies, core.transmissions
    # §1 order: up (+1, 0), down (−1, 0), left (0, −1), right (0, +1).
    delta_row = jnp.where(direction == 0, 1, jnp.where(direction == 1, -1, 0))
    delta_col = jnp.where(direction == 3, 1, jnp.where(direction == 2, -1, 0))
    row, col = core.player_row, core.player_col

    def steps_to(rows, cols):
        return _ray_steps(rows, cols, row, col, delta_row, delta_col)

    # Line of fire as one vectorised pass: every object's distance along the ray. A block stops
    # the line only if nothing hittable stands on it (transmission/enemy checks come first).
    cell_steps = steps_to(_ROWS, _COLS)
    block = C.is_block(cells.content)
    block_distance = jnp.min(jnp.where(block, cell_steps, _NOT_ON_RAY))
    transmission_steps = jnp.where(transmissions.active,
                                   steps_to(transmissions.row, transmissions.col), _NOT_ON_RAY)
    enemy_steps = jnp.where(enemies.active, steps_to(enemies.row, enemies.col), _NOT_ON_RAY)
    transmission_distance = jnp.min(transmission_steps)
    enemy_distance = jnp.min(enemy_steps)
    target_distance = jnp.minimum(transmission_distance, enemy_distance)
    has_target = (target_distance < _NOT_ON_RAY) & (target_distance <= block_distance)
    hits_transmission = has_target & (transmission_distance == target_distance)
    hits_enemy = has_target & ~hits_transmission
    capacity = enemies.active.shape[0]
    no_slot = max(capacity, transmissions.active.shape[0])
    hit_transmission = jnp.where(hits_transmission,
                                 first_index(transmission_steps == target_distance), no_slot)
    hit_enemy = jnp.where(hits_enemy, first_index(enemy_steps == target_distance), no_slot)
    target = jnp.arange(capacity) == hit_enemy

    # Attack: damage floored at 0, survivors stunned, the dead target removed (§6.1).
    damaged_hp = jnp.maximum(enemies.hp - core.attack_damage, 0)
    hp = jnp.where(target, damaged_hp, enemies.hp)
    killed = target & (damaged_hp <= 0)
    stunned = enemies.stunned | (target & (damaged_hp > 0))
    enemies = remove_at(enemies.replace(hp=hp, stunned=stunned),
                        jnp.where(jnp.any(killed), hit_enemy, no_slot))
    transmissions = remove_at(transmissions, hit_transmission)
    destroyed = jnp.arange(transmissions.active.shape[0]) == hit_transmission
    kills = (jnp.sum(killed & ~core.enemies.from_scheduled)
             + jnp.sum(destroyed & ~core.transmissions.from_scheduled)).astype(jnp.int32)

    # Move: one step onto an on-board cell without a block (the next cell is ray step 1).
    next_cell = cell_steps == 1
    next_on_board = jnp.any(next_cell)
    next_content = jnp.sum(jnp.where(next_cell, cells.content, 0))
    moves = ~has_target & next_on_board & ~C.is_block(next_content)
    picks_up_siphon = moves & (next_content == C.DATA_SIPHON)
    exit_reached = moves & (next_content == C.EXIT)
    # Credits and energy are never picked up by walking; only the pickup content is cleared.
    content = jnp.where(next_cell & picks_up_siphon, C.EMPTY, cells.content)

    new_core = core.replace(
        player_row=jnp.where(moves, row + delta_row, row),
        player_col=jnp.where(moves, col + delta_col, col),
        data_siphons=core.data_siphons + picks_up_siphon.astype(jnp.int32),
        enemies=enemies, transmissions=transmissions, cells=cells.replace(content=content))
    outcome = O.no_outcome()._replace(
        failed=~has_target & ~moves, exit_reached=exit_reached,
        enemy_turn_follows=~exit_reached, kills=kills, data_siphon_collected=picks_up_siphon)
    return state.replace(core=new_core), outcome


def _siphon(state: S.GameState, quality):
    """§6.2: quality check (`quality`: `siphon_quality.siphon_quality(state)`), centre flag,
    the cross (skipping siphoned cells), counters."""
    core = state.core
    cells = core.cells
    row, col = core.player_row, core.player_col

    at_player = (_ROWS == row) & (_COLS == col)
    cross = (jnp.abs(_ROWS - row) + jnp.abs(_COLS - col)) <= 1
    processed = cross & ~cells.siphoned
    content = cells.content
    block = C.is_block(content)
    question = content == C.QUESTION_BLOCK
    carries_program = (content == C.PROGRAM_BLOCK) | (question & (cells.program >= 0))
    carries_data = (content == C.DATA_BLOCK) | (question & (cells.program < 0))
    siphoned_block = processed & block
    gathered = processed & ~block  # resources under blocks stay (they only become visible)

    # Programs acquired, as a 23-bit mask OR-ed over the processed cells.
    program_bits = jnp.where(siphoned_block & carries_program,
                             jnp.left_shift(1, jnp.maximum(cells.program, 0)), 0)
    acquired_bits = jax.lax.reduce(program_bits, 0, jax.lax.bitwise_or, (0, 1))
    acquired = ((acquired_bits >> jnp.arange(C.NUM_PROGRAMS)) & 1) == 1
    revealed = jnp.where(carries_program, C.PROGRAM_BLOCK, C.DATA_BLOCK)
    new_cells = cells.replace(
        content=jnp.where(siphoned_block & question, revealed, content),
        spawn_count=jnp.where(siphoned_block, 0, cells.spawn_count),
        credits=jnp.where(gathered, 0, cells.credits),
        energy=jnp.where(gathered, 0, cells.energy),
        siphoned=cells.siphoned | cross,
        siphon_center=cells.siphon_center | at_player,
    )
    # Score, credits, energy and owed transmissions, as four sums: one sum of a stacked [4, 6, 6]
    # array would fuse the stack into the reduction, a slower kernel than these four.
    score, credits, energy, owed = (
        jnp.sum(jnp.where(taken, amount, 0))
        for taken, amount in ((siphoned_block & carries_data, cells.points),
                              (gathered, cells.credits), (gathered, cells.energy),
                              (siphoned_block, cells.spawn_count)))
    new_core = core.replace(
        score=core.score + score, credits=core.credits + credits, energy=core.energy + energy,
        owned=core.owned | acquired, data_siphons=core.data_siphons - 1, cells=new_cells)
    new_state = state.replace(
        core=new_core,
        pending_siphon_transmissions=state.pending_siphon_transmissions + owed,
        scheduled_interval=jnp.maximum(4, state.scheduled_interval - 1),
        next_scheduled_turn=state.next_scheduled_turn + 5,
    )
    outcome = O.no_outcome()._replace(
        failed=core.data_siphons < 1, enemy_turn_follows=jnp.asarray(True),
        siphon_quality=quality)
    return new_state, outcome


def _merge_leaf(choices, base):
    """Select among per-branch arrays, grouping branches that returned the identical array."""
    groups = []  # [(array, predicate)]
    for predicate, value in choices:
        for i, (array, grouped) in enumerate(groups):
            if array is value:
                groups[i] = (array, grouped | predicate)
                break
        else:
            groups.append((value, predicate))
    # Start from the base if some branch kept it, so the common case is a single select.
    groups.sort(key=lambda group: group[0] is not base)
    merged = groups[0][0]
    for array, predicate in groups[1:]:
        merged = jnp.where(predicate, array, merged)
    return merged


def program_index(action):
    """The program an action runs (0..22); clipped, so any action gives a valid index."""
    return jnp.clip(jnp.asarray(action, jnp.int32) - C.FIRST_PROGRAM_ACTION, 0,
                    C.NUM_PROGRAMS - 1)


def run_program(key, state: S.GameState, action):
    """The program branch of `resolve`: `programs.apply` for the action's program, with its
    failure (§4.3: the mask, or whatever the program reports) in the outcome; the state without
    the UNDO buffer (no program rewrites it)."""
    programmed, outcome = programs.apply(key, state, program_index(action))
    allowed = jnp.any(action_mask.program_mask(state)
                      & (jnp.arange(C.NUM_PROGRAMS) == program_index(action)))
    return programmed.replace(history=None), outcome._replace(failed=outcome.failed | ~allowed)


def is_program_action(action):
    """bool: the action (any int32) runs a program."""
    return (action >= C.FIRST_PROGRAM_ACTION) & (action < C.NUM_ACTIONS)


def resolve_program(key, state: S.GameState, action):
    """`resolve` of a program action, without the UNDO buffer: (state, ActionOutcome). The
    batched env step runs it only for the envs whose action is a program, after `resolve` with
    `programs_elsewhere` for all of them."""
    programmed, outcome = run_program(key, state, action)
    state = state.replace(history=None)
    failed, = fusion.computed_once(outcome.failed)  # read by the select of every state array
    return jax.tree_util.tree_map(lambda new, old: jnp.where(failed, old, new), programmed,
                                  state), outcome


def resolve(key, state: S.GameState, action, quality=None, programs_elsewhere=False):
    """Resolve any of the 28 actions (§5 step 2); returns (state, ActionOutcome).

    A failed action (§4.4) reports `failed` and returns the input state unchanged. Program
    failure is the §4.3 mask itself (owned, affordable, applicable) or whatever the program
    reports; paying and the effect happen in `programs.apply`. `quality`, if given, is
    `siphon_quality.siphon_quality(state)` computed elsewhere (only needed when the action is a
    siphon). With `programs_elsewhere`, a program action returns the input state and an outcome
    to be replaced by `resolve_program`'s.
    """
    action = jnp.asarray(action, jnp.int32)
    # A number outside 0-27 is no action at all: it fails like any invalid action (§4.4).
    in_range = (action >= 0) & (action < C.NUM_ACTIONS)
    is_move = in_range & (action < C.NUM_DIRECTIONS)
    is_siphon = action == C.ACTION_SIPHON
    is_program = is_program_action(action)

    moved, move_outcome = _move_or_attack(state, jnp.clip(action, 0, C.NUM_DIRECTIONS - 1))
    siphoned, siphon_outcome = _siphon(state, siphon_quality.siphon_quality(state)
                                       if quality is None else quality)
    programmed, program_outcome = ((state, O.no_outcome()) if programs_elsewhere
                                   else run_program(key, state, action))

    predicates = (is_move, is_siphon, is_program)
    outcomes = (move_outcome, siphon_outcome, program_outcome)
    outcome = O.ActionOutcome(*[_merge_leaf(list(zip(predicates, fields)), None)
                                for fields in zip(*outcomes)])
    outcome = outcome._replace(failed=outcome.failed | ~in_range)

    # A branch's state is taken only if it is the chosen one and did not fail; otherwise the
    # input state stays (§4.4), folded into the same selects. The UNDO history buffer is never
    # selected over: no branch rewrites it (UNDO moves only history_top / history_size, which
    # are merged like any other scalar).
    # Read by the select of every state array: computed once, not once per array.
    failed, *succeeded = fusion.computed_once(
        outcome.failed, *[p & ~o.failed for p, o in zip(predicates, outcomes)])
    branches = [branch.replace(history=state.history) for branch in (moved, siphoned, programmed)]

    def merge(base, *values):
        return _merge_leaf([(failed, base)] + list(zip(succeeded, values)), base)

    return jax.tree_util.tree_map(merge, state, *branches), outcome
