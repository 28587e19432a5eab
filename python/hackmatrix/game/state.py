"""The game state as fixed-shape pytrees (rules §2).

Layout conventions, relied on by every module:
- Ordered lists (enemies, transmissions) are fixed-capacity arrays whose active slots form a
  prefix in list order: slot i is the i-th element of the rules' list. New pieces go to the
  slots after the last active one (past the capacity they are dropped: specs/game-rules.md,
  "Implementation capacities"); removing compacts the survivors stably (`compact`). `active`
  marks the prefix.
- Cells are [6, 6] arrays indexed [row, col]; row 0 is the bottom row.
- Everything UNDO restores (§7.15) lives in `Core`; a history snapshot is a compact copy of it.
- Scalars are int32/bool 0-d arrays, so the same code runs unbatched and under vmap.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from hackmatrix.game import constants as C


@struct.dataclass
class Enemies:
    active: jax.Array          # bool[K]
    kind: jax.Array            # int32[K]: VIRUS, DAEMON, GLITCH, CRYPTOG
    row: jax.Array             # int32[K]
    col: jax.Array             # int32[K]
    hp: jax.Array              # int32[K]; scenario hp is stored verbatim
    disabled_turns: jax.Array  # int32[K]
    stunned: jax.Array         # bool[K]
    from_siphon: jax.Array     # bool[K]  (spawnedFromSiphon)
    from_scheduled: jax.Array  # bool[K]  (isFromScheduledTask)


@struct.dataclass
class Transmissions:
    active: jax.Array           # bool[T]
    row: jax.Array              # int32[T]
    col: jax.Array              # int32[T]
    turns_remaining: jax.Array  # int32[T]
    enemy_type: jax.Array       # int32[T]
    from_siphon: jax.Array      # bool[T]
    from_scheduled: jax.Array   # bool[T]


@struct.dataclass
class Cells:
    content: jax.Array        # int32[6,6]: EMPTY, DATA_BLOCK, PROGRAM_BLOCK, QUESTION_BLOCK, DATA_SIPHON, EXIT
    points: jax.Array         # int32[6,6]: data points (also the hidden points of a data question block)
    program: jax.Array        # int32[6,6]: program index, NO_PROGRAM (-1) if none (question: hidden program)
    spawn_count: jax.Array    # int32[6,6]
    credits: jax.Array        # int32[6,6]; a cell never holds both credits and energy
    energy: jax.Array         # int32[6,6]
    siphoned: jax.Array       # bool[6,6]
    siphon_center: jax.Array  # bool[6,6]


@struct.dataclass
class Core:
    """Everything an UNDO snapshot holds and restores (§7.15)."""
    player_row: jax.Array
    player_col: jax.Array
    hp: jax.Array
    credits: jax.Array
    energy: jax.Array
    data_siphons: jax.Array
    score: jax.Array
    attack_damage: jax.Array
    turn: jax.Array
    owned: jax.Array           # bool[23], indexed by program index
    enemies: Enemies
    transmissions: Transmissions
    cells: Cells
    show_activated: jax.Array
    scheduled_tasks_disabled: jax.Array
    atk_plus_uses: jax.Array


@struct.dataclass
class GameState:
    core: Core
    stage: jax.Array
    exit_row: jax.Array
    exit_col: jax.Array
    step_active: jax.Array
    pending_siphon_transmissions: jax.Array
    scheduled_interval: jax.Array
    next_scheduled_turn: jax.Array
    history: object      # history.Snapshot: HISTORY_CAPACITY packed snapshots of `core`
    history_top: jax.Array   # slot of the newest snapshot
    history_size: jax.Array  # number of valid snapshots, 0..HISTORY_CAPACITY


def check_one_game(state: GameState, caller: str, vmappable: bool = True) -> None:
    """ValueError unless `state` is one game, not a batch of states (a leading axis on every
    leaf), which would otherwise fail on some shape deep inside `caller`. Shapes are static, so
    this costs nothing when traced."""
    shape = np.shape(state.core.player_row)
    if shape:
        raise ValueError(f"{caller} takes one game state, got a batch of shape {shape}: "
                         + (f"jax.vmap({caller}) handles a batch, and " if vmappable else "")
                         + "jax.tree.map(lambda leaf: leaf[i], states) picks game i")


def _i32(x=0):
    return jnp.asarray(x, dtype=jnp.int32)


def _bool(x=False):
    return jnp.asarray(x, dtype=jnp.bool_)


def empty_enemies() -> Enemies:
    k = C.MAX_ENEMIES
    zeros = jnp.zeros((k,), jnp.int32)
    false = jnp.zeros((k,), jnp.bool_)
    return Enemies(active=false, kind=zeros, row=zeros, col=zeros, hp=zeros,
                   disabled_turns=zeros, stunned=false, from_siphon=false, from_scheduled=false)


def empty_transmissions() -> Transmissions:
    t = C.MAX_TRANSMISSIONS
    zeros = jnp.zeros((t,), jnp.int32)
    false = jnp.zeros((t,), jnp.bool_)
    return Transmissions(active=false, row=zeros, col=zeros, turns_remaining=zeros,
                         enemy_type=zeros, from_siphon=false, from_scheduled=false)


def empty_cells() -> Cells:
    shape = (C.BOARD_SIZE, C.BOARD_SIZE)
    zeros = jnp.zeros(shape, jnp.int32)
    false = jnp.zeros(shape, jnp.bool_)
    return Cells(content=zeros, points=zeros, program=jnp.full(shape, C.NO_PROGRAM, jnp.int32),
                 spawn_count=zeros, credits=zeros, energy=zeros, siphoned=false,
                 siphon_center=false)


def empty_core() -> Core:
    return Core(player_row=_i32(), player_col=_i32(), hp=_i32(3), credits=_i32(), energy=_i32(),
                data_siphons=_i32(), score=_i32(), attack_damage=_i32(1), turn=_i32(),
                owned=jnp.zeros((C.NUM_PROGRAMS,), jnp.bool_), enemies=empty_enemies(),
                transmissions=empty_transmissions(), cells=empty_cells(),
                show_activated=_bool(), scheduled_tasks_disabled=_bool(), atk_plus_uses=_i32())


def empty_state() -> GameState:
    """A blank state: empty board, exit at (5,5) not yet placed, empty history (A.2 step 1)."""
    from hackmatrix.game import history  # local: history depends on this module
    return GameState(core=empty_core(), stage=_i32(1), exit_row=_i32(5), exit_col=_i32(5),
                     step_active=_bool(), pending_siphon_transmissions=_i32(),
                     scheduled_interval=_i32(12), next_scheduled_turn=_i32(12),
                     history=history.empty_history(), history_top=_i32(-1), history_size=_i32())


def select(pred, on_true: GameState, on_false: GameState) -> GameState:
    """`on_true` where `pred`, else `on_false`, field by field, except the UNDO buffer.

    The history buffer is taken from `on_false` without a select: callers pass states whose
    buffers are equal, or whose `on_true` is a new game (an empty history differs only in its
    pointers, which are selected). Selecting the buffer would copy the largest part of the state
    on every step.
    """
    picked = jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b),
                                    on_true.replace(history=None), on_false.replace(history=None))
    return picked.replace(history=on_false.history)


def _survivors_up_to(keep):
    """int32[K]: number of True entries of `keep` at slots <= i (an inclusive prefix count).

    The mask is packed into 32-bit words and each count is a popcount of a constant prefix mask:
    elementwise work, where a cumulative sum or a triangular product costs O(K^2) under vmap.
    """
    capacity = keep.shape[0]
    count = jnp.zeros((capacity,), jnp.int32)
    for first in range(0, capacity, 32):
        size = min(32, capacity - first)
        bit = np.array([1 << b for b in range(size)], np.uint32)
        word = jnp.sum(jnp.where(keep[first:first + size], bit, np.uint32(0)), dtype=jnp.uint32)
        prefix = np.array([(1 << min(max(slot + 1 - first, 0), 32)) - 1
                           for slot in range(capacity)], np.uint64).astype(np.uint32)
        count = count + jax.lax.population_count(word & prefix).astype(jnp.int32)
    return count


# Bit widths of the small non-negative list fields that `compact` moves packed in one int32.
_NARROW_BITS = {
    Enemies: {"active": 1, "kind": 2, "row": 3, "col": 3, "stunned": 1, "from_siphon": 1,
              "from_scheduled": 1},
    Transmissions: {"active": 1, "row": 3, "col": 3, "enemy_type": 2, "from_siphon": 1,
                    "from_scheduled": 1},
}


def compact(items, keep):
    """Stable removal for a prefix-ordered list (Enemies or Transmissions).

    Slots where `keep` is False (or that were inactive) are dropped; survivors move to the front
    in their original order and freed slots are zeroed. A survivor's new slot is the number of
    survivors before it; one scatter turns that into the source slot of every new slot, and the
    fields move by gathers (the narrow ones bit-packed into a single word), all O(K).
    """
    keep = keep & items.active
    capacity = keep.shape[0]
    slots = jnp.arange(capacity, dtype=jnp.int32)
    survivors_so_far = _survivors_up_to(keep)
    target = jnp.where(keep, survivors_so_far - 1, capacity)
    source = jnp.zeros_like(slots).at[target].set(slots, mode="drop")
    filled = slots < survivors_so_far[-1]

    def move(field):
        return jnp.where(filled, field[source], jnp.zeros((), field.dtype))

    narrow_bits = _NARROW_BITS[type(items)]
    word, shift = jnp.zeros_like(slots), 0
    for name, bits in narrow_bits.items():
        word = word | (getattr(items, name).astype(jnp.int32) << shift)
        shift += bits
    word, shift = move(word), 0
    moved = {}
    for name, bits in narrow_bits.items():
        moved[name] = ((word >> shift) & ((1 << bits) - 1)).astype(getattr(items, name).dtype)
        shift += bits
    wide = {field.name: move(getattr(items, field.name)) for field in dataclasses.fields(items)
            if field.name not in narrow_bits}
    return items.replace(**moved, **wide)
