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

`run_until_placement` stops before the placement and the snapshot and returns them as a request
and a flag, so that a step places its transmissions once, whether they come from the enemy turn
or from a stage generation (`finish` completes the turn; `run` is both).

Each phase permutes the packed enemy words into processing order: the enemies that can act in
this phase first, in a fresh random order, then the others in list order (they never move or
attack, so their order changes nothing), and loops over them, so iteration i reads slot i with
an index that is not batched under vmap (a cheap slice, not a gather). The loop runs MAX_ENEMIES
iterations per phase, or fewer when the caller passes `loop_bounds`: the batched env step passes
its batch's largest `acting_counts`, an unbatched bound, so the loop really stops there (under
random play, well below 36 in both phases). Slots past the bound keep their
words. hp reaching 0 does not stop the turn.

Speed (XLA:CPU): a kernel launch can cost more than the work of a small kernel, so an
iteration is one big kernel (the whole decision, breadth-first search unrolled) plus one small
kernel updating the four carried board words, rather than dozens of small kernels (a per-layer
search loop, [K]-wide shared-cell checks and slot updates).
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

_MAX_SPEED = int(C.ENEMY_SPEED.max())


# Packed transmission word for hatching and compaction: row 0-2, col 3-5, type 6-7,
# from_siphon 8, from_scheduled 9, present 10. turnsRemaining moves on its own: setup stores any
# int32 verbatim (A.1).
_T_COL, _T_TYPE, _T_SIPHON, _T_SCHEDULED, _T_PRESENT = 3, 6, 1 << 8, 1 << 9, 1 << 10


def _hatch(enemies: S.Enemies, transmissions: S.Transmissions):
    """§8 step 3: count down, hatch, append hatchlings in transmission order.

    Moves go through one scatter of packed words each (cheaper than per-field moves).
    """
    t = transmissions
    hatching = t.active & (t.turns_remaining <= 1)
    staying = t.active & ~hatching
    words = (t.row | (t.col << _T_COL) | (t.enemy_type << _T_TYPE)
             | jnp.where(t.from_siphon, _T_SIPHON, 0) | jnp.where(t.from_scheduled, _T_SCHEDULED, 0)
             | _T_PRESENT).astype(jnp.int32)
    capacity = t.active.shape[0]
    enemy_capacity = enemies.active.shape[0]

    # Hatchlings go to the enemy slots after the last enemy, in transmission order; those past
    # the enemy list's end are dropped (§2.7), as is every transmission that is not hatching.
    first_free = jnp.sum(enemies.active)
    target = jnp.where(hatching, first_free + spawning.exclusive_prefix_count(hatching),
                       enemy_capacity)
    born = jnp.zeros((enemy_capacity,), jnp.int32).at[target].set(words, mode="drop")
    new = (born & _T_PRESENT) != 0
    kind = (born >> _T_TYPE) & 3
    max_hp = jnp.zeros_like(kind)
    for enemy_type in range(C.NUM_ENEMY_TYPES):
        max_hp = jnp.where(kind == enemy_type, int(C.ENEMY_MAX_HP[enemy_type]), max_hp)
    put = lambda old, value: jnp.where(new, jnp.asarray(value, old.dtype), old)
    enemies = enemies.replace(
        active=enemies.active | new, kind=put(enemies.kind, kind),
        row=put(enemies.row, born & 7), col=put(enemies.col, (born >> _T_COL) & 7),
        hp=put(enemies.hp, max_hp), disabled_turns=put(enemies.disabled_turns, 1),
        stunned=put(enemies.stunned, False),
        from_siphon=put(enemies.from_siphon, (born & _T_SIPHON) != 0),
        from_scheduled=put(enemies.from_scheduled, (born & _T_SCHEDULED) != 0))

    # The others count down and close ranks (stable).
    target = jnp.where(staying, spawning.exclusive_prefix_count(staying), capacity)
    kept = jnp.zeros((capacity,), jnp.int32).at[target].set(words, mode="drop")
    kept_turns = jnp.zeros((capacity,), jnp.int32).at[target].set(t.turns_remaining - 1,
                                                                   mode="drop")
    transmissions = S.Transmissions(
        active=(kept & _T_PRESENT) != 0, row=kept & 7, col=(kept >> _T_COL) & 7,
        turns_remaining=kept_turns,
        enemy_type=(kept >> _T_TYPE) & 3, from_siphon=(kept & _T_SIPHON) != 0,
        from_scheduled=(kept & _T_SCHEDULED) != 0)
    return enemies, transmissions


# Loop-slot word: everything one iteration reads about its enemy. Bits: row 0-2, col 3-5,
# kind 6-7, ready 8, attacked 9, active 10, list index 12-17, and (set per phase) 18: another
# enemy processed later in this phase starts on the same cell.
# A decision is the slot word after the enemy's action (new cell, attacked bit) plus what the
# next iteration needs to update the boards: the old cell (bits 19-24) and three flags.
_COL_SHIFT, _KIND_SHIFT = 3, 6
_READY_BIT, _ATTACKED_BIT, _ACTIVE_BIT = 1 << 8, 1 << 9, 1 << 10
_INDEX_SHIFT = 12
_LATER_CELLMATE_BIT = 1 << 18
_OLD_CELL_SHIFT = 19
_MOVES_BIT, _VACATES_BIT, _STAYS_BIT = 1 << 25, 1 << 26, 1 << 27
_CELL_BITS = 0x3F
_SLOT_BITS = (1 << 18) - 1  # the slot word without per-phase and decision bits
_KEY_SCALE = 128  # > 2 * (MAX_ENEMIES - 1): keys of different cells are at least K apart


def _ready(enemies: S.Enemies):
    """bool[K]: active, not disabled and not stunned (may act this turn, §8 step 4)."""
    return enemies.active & (enemies.disabled_turns <= 0) & ~enemies.stunned


def _pack(enemies: S.Enemies):
    ready = _ready(enemies)
    return (enemies.row | (enemies.col << _COL_SHIFT) | (enemies.kind << _KIND_SHIFT)
            | jnp.where(ready, _READY_BIT, 0) | jnp.where(enemies.active, _ACTIVE_BIT, 0)
            | (jnp.arange(enemies.active.shape[0]) << _INDEX_SHIFT)).astype(jnp.int32)


def _speed(kind):
    speed = jnp.int32(0)
    for enemy_type in range(C.NUM_ENEMY_TYPES):
        speed = jnp.where(kind == enemy_type, int(C.ENEMY_SPEED[enemy_type]), speed)
    return speed


def _mark_later_cellmates(words):
    """Set _LATER_CELLMATE_BIT on the words (in processing order) of active enemies whose cell
    also holds an active enemy processed later.

    Each key holds the cell above the position, so two slots share a cell exactly when their
    keys are less than K apart, and the later one has the larger key: one [K, K] comparison,
    reduced by `jnp.any`."""
    capacity = words.shape[-1]
    key = (words & (_ACTIVE_BIT | _CELL_BITS)) * _KEY_SCALE + jnp.arange(capacity)
    # later[i]: 1 <= key[other] - key[i] <= K - 1 for some other slot (same cell, comes later).
    later = jnp.any((key[None, :] - key[:, None] - 1).astype(jnp.uint32) < capacity - 1, axis=-1)
    return jnp.where(later & ((words & _ACTIVE_BIT) != 0), words | _LATER_CELLMATE_BIT, words)


def _can_act(slot_words, phase):
    """bool[K]: the slot words' enemies that act in this phase unless adjacent-and-attacked
    (ready, not yet attacked this turn, speed above the phase)."""
    ready = (slot_words & (_READY_BIT | _ATTACKED_BIT)) == _READY_BIT
    return ready & (phase < _speed((slot_words >> _KIND_SHIFT) & 3))


def acting_counts(state: S.GameState):
    """int32[2]: per phase of the enemy turn of `state`, the most enemies that can act (§8
    step 4; hatchlings are disabled, so hatching adds none). A batch's maximum is a valid
    `loop_bounds` for all of its states (`run`)."""
    enemies = state.core.enemies
    ready = _ready(enemies)
    speed = _speed(enemies.kind)
    return jnp.stack([jnp.sum(ready & (phase < speed), dtype=jnp.int32)
                      for phase in range(_MAX_SPEED)])


def _enemy_actions(key, core: S.Core, loop_bounds=None):
    """§8 step 4. Returns (enemy rows, enemy cols, player hp).

    `loop_bounds` (int32[2], or None for the capacity) caps each phase's loop at that many
    acting enemies; it must be at least the phase's number of acting enemies (`acting_counts`).

    Each phase is a scan over the slot words in processing order that carries only two
    boards: the occupied cells and `stayed` (cells of enemies already processed in this phase
    that did not move). A mover frees its old cell unless an enemy shares it (after PUSH/PULL or
    hatching): since moves never enter an occupied cell, the enemies still on that cell are the
    ones that started the phase there and either come later in the order (bit
    _LATER_CELLMATE_BIT, computed once per phase) or came earlier and stayed (in `stayed`).
    Attacks do not depend on hp, so hp is updated once from the attacked bits after the loop.
    """
    enemies = core.enemies
    p_row, p_col = core.player_row, core.player_col
    block_board = pathfinding.blocks(core.cells)
    transmission_cells = bb.from_cells(core.transmissions.active, core.transmissions.row,
                                       core.transmissions.col)
    rule2 = pathfinding.rule2_first_steps(p_row, p_col, block_board)
    capacity = enemies.active.shape[0]

    def decide(word, phase, boards):
        """Slot `word`'s action: its decision word (see the bit layout above)."""
        occupied, stayed = bb.Board(boards[0], boards[1]), bb.Board(boards[2], boards[3])
        e_row, e_col = word & 7, (word >> _COL_SHIFT) & 7
        e_kind = (word >> _KIND_SHIFT) & 3
        active = (word & _ACTIVE_BIT) != 0
        acts = _can_act(word, phase)
        adjacent = jnp.abs(e_row - p_row) + jnp.abs(e_col - p_col) == 1
        new_row, new_col = pathfinding.enemy_move(
            e_row, e_col, e_kind == C.GLITCH, p_row, p_col, block_board,
            occupied | transmission_cells, rule2)
        moves = acts & ~adjacent & ((new_row != e_row) | (new_col != e_col))
        attacks = acts & adjacent
        shared = ((word & _LATER_CELLMATE_BIT) != 0) | bb.contains(stayed, e_row, e_col)
        new_cell = jnp.where(moves, new_row | (new_col << _COL_SHIFT), word & _CELL_BITS)
        return ((word & _SLOT_BITS & ~_CELL_BITS) | new_cell
                | ((word & _CELL_BITS) << _OLD_CELL_SHIFT)
                | jnp.where(attacks, _ATTACKED_BIT, 0) | jnp.where(moves, _MOVES_BIT, 0)
                | jnp.where(moves & ~shared, _VACATES_BIT, 0)
                | jnp.where(active & ~moves, _STAYS_BIT, 0)).astype(jnp.int32)

    def apply(decision, boards):
        """Update the boards by a decision."""
        old_cell = decision >> _OLD_CELL_SHIFT
        old = bb.single(old_cell & 7, (old_cell >> _COL_SHIFT) & 7)
        new = bb.single(decision & 7, (decision >> _COL_SHIFT) & 7)
        flag = lambda bit: (decision & bit) != 0
        occupied, stayed = bb.Board(boards[0], boards[1]), bb.Board(boards[2], boards[3])
        occupied = ((occupied & ~bb.where(flag(_VACATES_BIT), old, bb.empty()))
                    | bb.where(flag(_MOVES_BIT), new, bb.empty()))
        return jnp.stack([*occupied, *(stayed | bb.where(flag(_STAYS_BIT), old, bb.empty()))])

    # Software-pipelined loop: iteration i applies slot i-1's decision, then decides slot i.
    # The decision crosses iterations as a loop-carried value and is the only output of the
    # big kernel, so XLA computes it once instead of inside every kernel that consumes it. The
    # four board words travel as one array: one small kernel per iteration updates all of them.
    order_words = spawning.random_words(key, _MAX_SPEED * capacity).reshape(_MAX_SPEED, capacity)

    def one_phase(phase, slot_words):
        # A loop over the phases (not a Python loop) keeps one copy of the body: half the
        # compile time.
        # The enemies that can act this phase in a fresh uniformly random order, then the
        # others: those never move or attack, so only the acting prefix needs the loop.
        phase_words = jax.lax.dynamic_index_in_dim(order_words, phase, keepdims=False)
        position = spawning.random_order_first(phase_words, _can_act(slot_words, phase))
        slot_words = jnp.zeros_like(slot_words).at[position].set(slot_words & _SLOT_BITS)
        slot_words = _mark_later_cellmates(slot_words)
        occupied = bb.from_cells((slot_words & _ACTIVE_BIT) != 0, slot_words & 7,
                                 (slot_words >> _COL_SHIFT) & 7)

        def step(i, carry):
            boards, previous, decisions = carry
            boards = apply(previous, boards)
            # Slot i-1's decision is written now (i = 0 writes the no-op placeholder, which
            # slot 0's decision overwrites).
            decisions = jax.lax.dynamic_update_index_in_dim(decisions, previous,
                                                            jnp.maximum(i - 1, 0), 0)
            word = jax.lax.dynamic_index_in_dim(slot_words, i, keepdims=False)
            return boards, decide(word, phase, boards), decisions

        # Slots past the acting prefix keep their words: no move, no attack.
        bound = capacity if loop_bounds is None else loop_bounds[phase]
        carry = (jnp.stack([*occupied, *bb.empty()]), jnp.int32(0), slot_words)
        _, last, decisions = jax.lax.fori_loop(0, bound, step, carry)
        return jnp.where((jnp.arange(capacity) == bound - 1), last, decisions)

    slot_words = jax.lax.fori_loop(0, _MAX_SPEED, one_phase, _pack(enemies))

    # Undo the processing order: every slot word carries its enemy's list index.
    list_index = (slot_words >> _INDEX_SHIFT) & 0x3F
    slot_words = jnp.zeros_like(slot_words).at[list_index].set(slot_words)
    attacks = jnp.sum(((slot_words & _ATTACKED_BIT) != 0).astype(jnp.int32))
    return slot_words & 7, (slot_words >> _COL_SHIFT) & 7, jnp.maximum(core.hp - attacks, 0)


def _full_turn(key, state: S.GameState, loop_bounds=None):
    """§8 steps 2-7 (no STEP check, no snapshot), with the placement of steps 5-6 returned as a
    request: (state, Placement). Status decay (step 7) only changes disabled turns and stuns,
    which placement never reads, so placing after it is the same as placing before."""
    action_key, placement_key = spawning.split_key(key, 2)
    core = state.core
    turn = core.turn + 1
    enemies, transmissions = _hatch(core.enemies, core.transmissions)
    core = core.replace(turn=turn, enemies=enemies, transmissions=transmissions)

    row, col, hp = _enemy_actions(action_key, core, loop_bounds)
    core = core.replace(hp=hp, enemies=core.enemies.replace(row=row, col=col))

    fires = (~core.scheduled_tasks_disabled & (state.scheduled_interval > 0)
             & (turn >= state.next_scheduled_turn))
    pending = jnp.maximum(state.pending_siphon_transmissions, 0)
    first = jnp.arange(C.MAX_TRANSMISSIONS) == 0
    placement = spawning.placement(placement_key, fires.astype(jnp.int32) + pending,
                                   from_siphon=~(first & fires), from_scheduled=first & fires)

    enemies = core.enemies
    disabled = enemies.disabled_turns
    enemies = enemies.replace(disabled_turns=jnp.where(disabled > 0, disabled - 1, disabled),
                              stunned=jnp.zeros_like(enemies.stunned))
    state = state.replace(
        core=core.replace(enemies=enemies),
        next_scheduled_turn=jnp.where(fires, turn + state.scheduled_interval,
                                      state.next_scheduled_turn),
        pending_siphon_transmissions=jnp.zeros_like(state.pending_siphon_transmissions))
    return state, placement


def run_until_placement(key, state: S.GameState, follows, loop_bounds=None):
    """The enemy turn of §8 when `follows` but its transmission placement (steps 5-6) and its
    snapshot (step 8): (state, Placement, snapshot flag). `finish(...)` of these is `run`.

    A step runs at most one placement: its enemy turn's or, when it generates a stage (then no
    enemy turn's state survives), the generation's. The batched env step takes the request and
    places once for both (transition.py).
    """
    full_turn = follows & ~state.step_active
    turned, placement = _full_turn(key, state, loop_bounds)
    turned = S.select(full_turn, turned, state)
    placement = placement._replace(count=jnp.where(full_turn, placement.count, 0))
    return turned.replace(step_active=state.step_active & ~follows), placement, full_turn


def finish(state: S.GameState, placement: spawning.Placement, snapshot) -> S.GameState:
    """§8 steps 5-6 (the placement) and 8 (the snapshot onto the UNDO history, when
    `snapshot`)."""
    return history.push(spawning.place(state, placement), snapshot)


def run(key, state: S.GameState, follows, loop_bounds=None) -> S.GameState:
    """The enemy turn of §8 when `follows`; the state unchanged otherwise.

    `loop_bounds`: see `acting_counts`. A batched step passes its batch's maximum (unbatched),
    so the enemy loop runs as many iterations as the busiest env needs instead of the capacity.
    """
    return finish(*run_until_placement(key, state, follows, loop_bounds))
