"""UNDO history (§7.15) as a fixed-capacity ring buffer of packed `Core` snapshots.

The rules' stack is unbounded; here it holds the newest HISTORY_CAPACITY snapshots and the oldest
drops when a push finds it full. UNDO is valid exactly while `history_size > 0`.

The history is most of an env's memory, so a snapshot is packed into four small arrays
(`Snapshot`, 704 bytes, against about 2.5 KB for a live `Core`):

- `scalars` int32[14]: the player and global fields of `Core`, showActivated and
  scheduledTasksDisabled as two bits, the owned programs as a bit mask, and the lengths of the
  two lists (their `active` prefix);
- `enemies` int16[36, 2]: kind | row | col | stunned | disabledTurns bit-packed, and hp;
- `transmissions` int16[36, 2]: row | col | enemyType bit-packed, and turnsRemaining;
- `cells` int16[36, 5]: content | program | siphoned | siphonCenter bit-packed, points,
  spawnCount, credits, energy.

Amounts stored as int16 saturate at -32768 and 32767 and disabledTurns at 63: far beyond anything
reachable in play (hp <= 3, disabledTurns <= 1, cell amounts <= 9). The origin flags
(spawnedFromSiphon, fromScheduledTask) are not stored: §7.15 restores them as false.
With four leaves, push writes four small slices (out of range, hence dropped, without a push)
and pop reads four; neither touches the whole buffer, so under vmap they cost O(snapshot) per env.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from hackmatrix.game import constants as C
from hackmatrix.game import fusion
from hackmatrix.game import state as S


@struct.dataclass
class Snapshot:
    scalars: jax.Array        # int32[14]: _SCALAR_FIELDS, then flags, owned mask, list lengths
    enemies: jax.Array        # int16[MAX_ENEMIES, 2]
    transmissions: jax.Array  # int16[MAX_TRANSMISSIONS, 2]
    cells: jax.Array          # int16[NUM_CELLS, 5]


_SCALAR_FIELDS = ("player_row", "player_col", "hp", "credits", "energy", "data_siphons", "score",
                  "attack_damage", "turn", "atk_plus_uses")
_FLAGS, _OWNED, _ENEMY_COUNT, _TRANSMISSION_COUNT = range(len(_SCALAR_FIELDS),
                                                          len(_SCALAR_FIELDS) + 4)
_NUM_SCALARS = len(_SCALAR_FIELDS) + 4
_MAX_DISABLED_TURNS = 63  # 6 bits of the packed enemy word
_OWNED_BITS = np.left_shift(1, np.arange(C.NUM_PROGRAMS), dtype=np.int32)
_INT16 = np.iinfo(np.int16)


def _to_int16(*columns):
    """Stack int32 columns into a saturating int16 [n, len(columns)] array."""
    clipped = [jnp.clip(column, _INT16.min, _INT16.max) for column in columns]
    if len(columns) == 2:
        # One int32 per row, reinterpreted as its two int16 halves (low half first): XLA:CPU
        # writes an int16 [n, 2] array element by element, which is slower.
        return jax.lax.bitcast_convert_type((clipped[0] & 0xFFFF) | (clipped[1] << 16),
                                            jnp.int16)
    stacked = fusion.stack_last(clipped, jnp.int32)  # one kernel, where jnp.stack makes several
    return stacked.astype(jnp.int16)


def _field(word, shift, width):
    return (word >> shift) & ((1 << width) - 1)


def empty_history() -> Snapshot:
    """An empty buffer: HISTORY_CAPACITY zeroed snapshots (contents unused while size is 0)."""
    return Snapshot(
        scalars=jnp.zeros((C.HISTORY_CAPACITY, _NUM_SCALARS), jnp.int32),
        enemies=jnp.zeros((C.HISTORY_CAPACITY, C.MAX_ENEMIES, 2), jnp.int16),
        transmissions=jnp.zeros((C.HISTORY_CAPACITY, C.MAX_TRANSMISSIONS, 2), jnp.int16),
        cells=jnp.zeros((C.HISTORY_CAPACITY, C.NUM_CELLS, 5), jnp.int16),
    )


def pack(core: S.Core) -> Snapshot:
    """The snapshot of `core` (§7.15 'What a snapshot holds')."""
    as_int = lambda flag: flag.astype(jnp.int32)  # noqa: E731
    flags = as_int(core.show_activated) | (as_int(core.scheduled_tasks_disabled) << 1)
    owned = jnp.sum(jnp.where(core.owned, _OWNED_BITS, 0), dtype=jnp.int32)
    scalars = fusion.stack_last([getattr(core, name) for name in _SCALAR_FIELDS] + [
        flags, owned, jnp.sum(core.enemies.active, dtype=jnp.int32),
        jnp.sum(core.transmissions.active, dtype=jnp.int32)], jnp.int32)
    e, t = core.enemies, core.transmissions
    enemy_word = (e.kind | (e.row << 2) | (e.col << 5) | (as_int(e.stunned) << 8)
                  | (jnp.clip(e.disabled_turns, 0, _MAX_DISABLED_TURNS) << 9))
    transmission_word = t.row | (t.col << 3) | (t.enemy_type << 6)
    c = jax.tree_util.tree_map(lambda x: x.reshape(C.NUM_CELLS), core.cells)
    cell_word = (c.content | ((c.program + 1) << 3) | (as_int(c.siphoned) << 8)
                 | (as_int(c.siphon_center) << 9))
    return Snapshot(
        scalars=scalars,
        enemies=_to_int16(enemy_word, e.hp),
        transmissions=_to_int16(transmission_word, t.turns_remaining),
        cells=_to_int16(cell_word, c.points, c.spawn_count, c.credits, c.energy),
    )


def unpack(snapshot: Snapshot) -> S.Core:
    """The live `Core` of a snapshot, origin flags false (§7.15 'What restoring does')."""
    scalars = snapshot.scalars
    enemy_word, enemy_hp = (snapshot.enemies[:, i].astype(jnp.int32) for i in range(2))
    enemy_active = jnp.arange(C.MAX_ENEMIES) < scalars[_ENEMY_COUNT]
    no_enemy_flag = jnp.zeros((C.MAX_ENEMIES,), jnp.bool_)
    enemies = S.Enemies(
        active=enemy_active, kind=_field(enemy_word, 0, 2), row=_field(enemy_word, 2, 3),
        col=_field(enemy_word, 5, 3), hp=enemy_hp, disabled_turns=_field(enemy_word, 9, 6),
        stunned=_field(enemy_word, 8, 1) == 1, from_siphon=no_enemy_flag,
        from_scheduled=no_enemy_flag)
    transmission_word, turns = (snapshot.transmissions[:, i].astype(jnp.int32) for i in range(2))
    no_transmission_flag = jnp.zeros((C.MAX_TRANSMISSIONS,), jnp.bool_)
    transmissions = S.Transmissions(
        active=jnp.arange(C.MAX_TRANSMISSIONS) < scalars[_TRANSMISSION_COUNT],
        row=_field(transmission_word, 0, 3), col=_field(transmission_word, 3, 3),
        turns_remaining=turns, enemy_type=_field(transmission_word, 6, 2),
        from_siphon=no_transmission_flag, from_scheduled=no_transmission_flag)
    board = (C.BOARD_SIZE, C.BOARD_SIZE)
    cell_word, points, spawn_count, credits, energy = (
        snapshot.cells[:, i].astype(jnp.int32).reshape(board) for i in range(5))
    cells = S.Cells(
        content=_field(cell_word, 0, 3), points=points, program=_field(cell_word, 3, 5) - 1,
        spawn_count=spawn_count, credits=credits, energy=energy,
        siphoned=_field(cell_word, 8, 1) == 1, siphon_center=_field(cell_word, 9, 1) == 1)
    return S.Core(
        **{name: scalars[i] for i, name in enumerate(_SCALAR_FIELDS)},
        owned=(scalars[_OWNED] & _OWNED_BITS) != 0,
        enemies=enemies, transmissions=transmissions, cells=cells,
        show_activated=_field(scalars[_FLAGS], 0, 1) == 1,
        scheduled_tasks_disabled=_field(scalars[_FLAGS], 1, 1) == 1)


def _slot(buffer, index):
    return jax.tree_util.tree_map(lambda leaf: leaf[index], buffer)


def push(state: S.GameState, do_push) -> S.GameState:
    """Snapshot `state.core` onto the history when `do_push` (end of a full enemy turn, §8 step 8).

    When the buffer is full the new snapshot overwrites the oldest one.
    """
    slot = (state.history_top + 1) % C.HISTORY_CAPACITY
    # Without a push the write goes out of range and is dropped: no read-back of the old slot.
    target = jnp.where(do_push, slot, C.HISTORY_CAPACITY)
    history = jax.tree_util.tree_map(
        lambda buffer, value: buffer.at[target].set(value, mode="drop"), state.history,
        pack(state.core))
    return state.replace(
        history=history,
        history_top=jnp.where(do_push, slot, state.history_top),
        history_size=jnp.where(do_push, jnp.minimum(state.history_size + 1, C.HISTORY_CAPACITY),
                               state.history_size),
    )


def top(state: S.GameState) -> S.Core:
    """The newest snapshot as a live `Core` (origin flags false). Meaningful when size > 0."""
    return unpack(_slot(state.history, jnp.maximum(state.history_top, 0)))


def pop(state: S.GameState, do_pop) -> S.GameState:
    """UNDO's restore (§7.15): when `do_pop` and the history is non-empty, replace `core` by the
    newest snapshot and drop it. Only the pointers move; the buffer itself is not rewritten.
    """
    do_pop, = fusion.computed_once(do_pop & (state.history_size > 0))  # read by every field
    core = jax.tree_util.tree_map(lambda new, old: jnp.where(do_pop, new, old), top(state),
                                  state.core)
    return state.replace(
        core=core,
        history_top=jnp.where(do_pop, (state.history_top - 1) % C.HISTORY_CAPACITY,
                              state.history_top),
        history_size=jnp.where(do_pop, state.history_size - 1, state.history_size),
    )
