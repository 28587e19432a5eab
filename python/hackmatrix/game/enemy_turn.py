"""The enemy turn (rules §8), in the exact order of the rules.

1. STEP check: if stepActive, clear it and stop (nothing else, no snapshot).
2. turn += 1.
3. Transmissions count down in list order; those at turnsRemaining <= 1 hatch into enemies with
   full hp, disabledTurns 1 and the transmission's flags, appended in transmission order.
4. Enemy actions: two steps (step 1 only matters for viruses, speed 2), each in a fresh uniformly
   random order of all enemy slots. An enemy that is not disabled, not stunned, has not attacked
   this turn and has step < speed attacks if adjacent to the player (hp - 1, floor 0, once per
   turn), else moves by §8.1. Moves take effect at once for the enemies processed later.
5. Scheduled task (§10), 6. pending siphon transmissions (§9.2), both in one placement call
   (scheduled first, then the siphon ones: the same as two consecutive placements).
7. Status decay. 8. Snapshot onto the UNDO history.

The enemy loop has a static trip count (2 x MAX_ENEMIES): each phase first permutes the enemy
arrays into processing order, so iteration i reads and writes slot i with an index that is not
batched under vmap (a cheap dynamic slice, not a gather). Inactive slots are skipped by masks.
hp reaching 0 does not stop the turn.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from hackmatrix.game import bitboard as bb
from hackmatrix.game import constants as C
from hackmatrix.game import history
from hackmatrix.game import pathfinding
from hackmatrix.game import spawning
from hackmatrix.game import state as S

_MAX_HP = jnp.asarray(C.ENEMY_MAX_HP)
_MAX_SPEED = int(C.ENEMY_SPEED.max())


def select_state(pred, new: S.GameState, old: S.GameState) -> S.GameState:
    """`new` where `pred`, else `old`, for every field except the UNDO history (taken from new).

    Only for callers whose `new` state has the same history as `old`.
    """
    pick = lambda a, b: jnp.where(pred, a, b)
    core = jax.tree_util.tree_map(pick, new.core, old.core)
    scalars = {name: pick(getattr(new, name), getattr(old, name))
               for name in ("stage", "exit_row", "exit_col", "step_active",
                            "pending_siphon_transmissions", "scheduled_interval",
                            "next_scheduled_turn")}
    return new.replace(core=core, **scalars)


def _hatch(enemies: S.Enemies, transmissions: S.Transmissions):
    """§8 step 3: count down, hatch, append hatchlings in transmission order."""
    hatching = transmissions.active & (transmissions.turns_remaining <= 1)
    capacity = enemies.active.shape[0]
    slot = jnp.sum(enemies.active) + jnp.cumsum(hatching) - 1
    slot = jnp.where(hatching, slot, capacity)  # out of range: dropped by the scatter

    def put(field, value):
        return field.at[slot].set(jnp.asarray(value, field.dtype), mode="drop")

    kind = transmissions.enemy_type
    enemies = enemies.replace(
        active=put(enemies.active, True), kind=put(enemies.kind, kind),
        row=put(enemies.row, transmissions.row), col=put(enemies.col, transmissions.col),
        hp=put(enemies.hp, _MAX_HP[kind]), disabled_turns=put(enemies.disabled_turns, 1),
        stunned=put(enemies.stunned, False),
        from_siphon=put(enemies.from_siphon, transmissions.from_siphon),
        from_scheduled=put(enemies.from_scheduled, transmissions.from_scheduled))
    counted_down = transmissions.replace(
        turns_remaining=jnp.where(hatching, transmissions.turns_remaining,
                                  transmissions.turns_remaining - 1))
    return enemies, S.compact(counted_down, ~hatching)


# Loop-slot word: everything one iteration reads about its enemy, so a single dynamic slice
# (and a single dynamic update) per iteration. Bits: row 0-2, col 3-5, kind 6-7, ready 8,
# attacked 9.
_COL_SHIFT, _KIND_SHIFT, _READY_BIT, _ATTACKED_BIT = 3, 6, 1 << 8, 1 << 9
_COUNT_PLANES = 6  # bit-sliced per-cell enemy counts, enough for 36 enemies on one cell


def _pack(row, col, kind, ready):
    return (row | (col << _COL_SHIFT) | (kind << _KIND_SHIFT)
            | jnp.where(ready, _READY_BIT, 0)).astype(jnp.int32)


def _count_planes(active, row, col):
    """Per-cell enemy counts, bit-sliced: plane b holds the cells whose count has bit b set."""
    cell = jnp.where(active, row * C.BOARD_SIZE + col, C.NUM_CELLS)
    counts = jnp.zeros((C.NUM_CELLS + 1,), jnp.int32).at[cell].add(1)[:C.NUM_CELLS]
    counts = counts.reshape(C.BOARD_SIZE, C.BOARD_SIZE)
    return tuple(bb.from_bool(((counts >> b) & 1) == 1) for b in range(_COUNT_PLANES))


def _leave(planes, cell: bb.Board):
    """Decrement the count of `cell` (a single-cell board, or empty for no change)."""
    borrow, result = cell, []
    for plane in planes:
        result.append(plane ^ borrow)
        borrow = borrow & ~plane
    return tuple(result)


def _speed(kind):
    speed = jnp.int32(0)
    for enemy_type in range(C.NUM_ENEMY_TYPES):
        speed = jnp.where(kind == enemy_type, int(C.ENEMY_SPEED[enemy_type]), speed)
    return speed


def _enemy_actions(key, core: S.Core):
    """§8 step 4. Returns (enemy rows, enemy cols, player hp)."""
    enemies = core.enemies
    p_row, p_col = core.player_row, core.player_col
    block_board = pathfinding.blocks(core.cells)
    transmission_cells = bb.from_cells(core.transmissions.active, core.transmissions.row,
                                       core.transmissions.col)
    rule2 = pathfinding.rule2_first_steps(p_row, p_col, block_board)
    capacity = enemies.active.shape[0]

    # Enemies never move onto an occupied cell, so counts only matter for cells that start
    # shared (after PUSH/PULL or hatching); moving in just sets plane 0.
    planes = _count_planes(enemies.active, enemies.row, enemies.col)
    ready = enemies.active & (enemies.disabled_turns <= 0) & ~enemies.stunned
    slot_words = _pack(enemies.row, enemies.col, enemies.kind, ready)
    order = jnp.arange(capacity)  # loop slot i holds enemy order[i]
    hp = core.hp

    for phase, phase_key in enumerate(jax.random.split(key, _MAX_SPEED)):
        permutation = jax.random.permutation(phase_key, capacity)
        order, slot_words = order[permutation], slot_words[permutation]

        def act(i, carry, phase=phase):
            slot_words, planes, hp = carry
            word = jax.lax.dynamic_index_in_dim(slot_words, i, keepdims=False)
            e_row, e_col = word & 7, (word >> _COL_SHIFT) & 7
            e_kind = (word >> _KIND_SHIFT) & 3
            acts = ((word & (_READY_BIT | _ATTACKED_BIT)) == _READY_BIT) & (phase < _speed(e_kind))
            adjacent = jnp.abs(e_row - p_row) + jnp.abs(e_col - p_col) == 1
            attack = acts & adjacent
            occupied = transmission_cells
            for plane in planes:
                occupied = occupied | plane
            new_row, new_col = pathfinding.enemy_move(
                e_row, e_col, e_kind == C.GLITCH, p_row, p_col, block_board, occupied, rule2)
            moves = acts & ~adjacent & ((new_row != e_row) | (new_col != e_col))
            planes = _leave(planes, bb.where(moves, bb.single(e_row, e_col), bb.empty()))
            planes = (planes[0] | bb.where(moves, bb.single(new_row, new_col), bb.empty()),
                      ) + planes[1:]
            row = jnp.where(moves, new_row, e_row)
            col = jnp.where(moves, new_col, e_col)
            word = ((word & ~(_ATTACKED_BIT | 0x3F)) | row | (col << _COL_SHIFT)
                    | jnp.where(attack, _ATTACKED_BIT, word & _ATTACKED_BIT))
            slot_words = jax.lax.dynamic_update_index_in_dim(slot_words, word, i, 0)
            hp = jnp.where(attack, jnp.maximum(hp - 1, 0), hp)
            return slot_words, planes, hp

        slot_words, planes, hp = jax.lax.fori_loop(0, capacity, act, (slot_words, planes, hp))

    # Undo the processing order: enemy order[i] is at loop slot i.
    slot_words = jnp.zeros_like(slot_words).at[order].set(slot_words)
    return slot_words & 7, (slot_words >> _COL_SHIFT) & 7, hp


def _full_turn(key, state: S.GameState) -> S.GameState:
    """§8 steps 2-7 (no STEP check, no snapshot)."""
    action_key, placement_key = jax.random.split(key)
    core = state.core
    turn = core.turn + 1
    enemies, transmissions = _hatch(core.enemies, core.transmissions)
    core = core.replace(turn=turn, enemies=enemies, transmissions=transmissions)

    row, col, hp = _enemy_actions(action_key, core)
    core = core.replace(hp=hp, enemies=core.enemies.replace(row=row, col=col))

    fires = (~core.scheduled_tasks_disabled & (state.scheduled_interval > 0)
             & (turn >= state.next_scheduled_turn))
    pending = jnp.maximum(state.pending_siphon_transmissions, 0)
    first = jnp.arange(C.MAX_TRANSMISSIONS) == 0
    state = state.replace(
        core=core,
        next_scheduled_turn=jnp.where(fires, turn + state.scheduled_interval,
                                      state.next_scheduled_turn),
        pending_siphon_transmissions=jnp.zeros_like(state.pending_siphon_transmissions))
    state = spawning.place_transmissions(
        placement_key, state, fires.astype(jnp.int32) + pending,
        from_siphon=~(first & fires), from_scheduled=first & fires)

    enemies = state.core.enemies
    enemies = enemies.replace(disabled_turns=jnp.maximum(enemies.disabled_turns - 1, 0),
                              stunned=jnp.zeros_like(enemies.stunned))
    return state.replace(core=state.core.replace(enemies=enemies))


def run(key, state: S.GameState, follows) -> S.GameState:
    """The enemy turn of §8 when `follows`; the state unchanged otherwise."""
    full_turn = follows & ~state.step_active
    turned = select_state(full_turn, _full_turn(key, state), state)
    turned = turned.replace(step_active=state.step_active & ~follows)
    return history.push(turned, full_turn)
