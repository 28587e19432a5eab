"""Transmission placement (rules §9.2), many transmissions in one fixed-shape pass.

A cell is free if it is not the player's cell and holds no enemy, transmission or block; it is
in the line of fire if it shares the player's row or column with no enemy or block strictly in
between (transmissions do not shield). Each new transmission goes to a uniformly random free
cell out of the line of fire, else to a uniformly random free cell, else nowhere.

Placing n transmissions one at a time is the same as taking a uniformly random order of the
preferred cells A (free, out of the line of fire) followed by a uniformly random order of the
fallback cells B (free, in the line of fire) and using its first min(n, |A| + |B|) cells:
a placed transmission only removes its own cell from A or B, because transmissions change
neither freedom of other cells nor the line of fire. We implement this uniform choice directly,
as a random order of all free cells with the preferred ones first (see `placed_words`
for the tie-breaking bias, below 2e-5). The rules' rejection-sampling procedure (100 draws per
category) is only the canonical way to obtain the same distribution; unlike it, we never drop
a transmission while a free cell exists.

All placed transmissions get turnsRemaining 1 and a uniformly random enemy type, and are
appended to the list in placement order (an append past capacity is dropped).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import bitboard as bb
from hackmatrix.game import constants as C
from hackmatrix.game import pathfinding
from hackmatrix.game import state as S


def free_and_line_of_fire(core: S.Core):
    """(free cells, cells in the player's line of fire) as bitboards (§9.2)."""
    enemies, transmissions = core.enemies, core.transmissions
    enemy_cells = bb.from_cells(enemies.active, enemies.row, enemies.col)
    transmission_cells = bb.from_cells(transmissions.active, transmissions.row,
                                       transmissions.col)
    block_cells = pathfinding.blocks(core.cells)
    player = bb.single(core.player_row, core.player_col)
    free = ~(player | enemy_cells | transmission_cells | block_cells)

    open_cells = ~(enemy_cells | block_cells)
    line_of_fire = bb.empty()
    for direction in range(C.NUM_DIRECTIONS):
        ray = bb.shift(player, direction)
        for _ in range(C.BOARD_SIZE - 1):
            line_of_fire = line_of_fire | ray
            ray = bb.shift(ray & open_cells, direction)
    return free, line_of_fire


def _mix(x):
    """A bijective 32-bit integer hash with good avalanche (the "lowbias32" constants)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def random_words(key, n: int):
    """uint32[n] random words from a JAX key, far cheaper than `jax.random.bits` on CPU.

    A splitmix-style generator: the bijective hash of a Weyl sequence whose start is a hash of
    the key's two words (one hash per word). `jax.random.bits` runs threefry (20 rounds per
    64 bits), a loop of small kernels on XLA:CPU; the engine needs over a thousand words per
    env and step. Keys come from jax.random.split or `split_key`, so they are
    independent; the exact random stream is not part of the rules' contract.
    """
    data = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) \
        else key
    data = data.astype(jnp.uint32)
    start = _mix(_mix(data[..., 0]) ^ data[..., -1])
    if n >= 64:  # a buffer: XLA would otherwise recompute the start's hashes for every word
        start = bb.materialize(jnp.stack([start, start], axis=-1))[..., 0]
    return _mix(start[..., None] + jnp.arange(n, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9))


def split_key(key, n: int):
    """n independent raw keys (uint32[n, 2]) for `random_words`, from its own stream: a
    replacement for jax.random.split, whose threefry runs as a loop of small kernels on CPU.
    The env's steps and the trainer's per-env keys use it."""
    return random_words(key, 2 * n).reshape(n, 2)


def random_ranks(words):
    """Position of each of n items in a uniformly random order (int32[n]), without a sort.

    `words` are n random uint32 words. Pairwise comparisons of distinct keys: 26 random bits
    above the item index; items whose random bits collide (probability < 1e-5 for n = 36) keep
    their index order. One comparison kernel, much cheaper than XLA's CPU sort.
    """
    index = jnp.arange(words.shape[-1], dtype=jnp.uint32)
    return _ranks((words & jnp.uint32(0xFFFFFFC0)) | index)


def random_order_first(words, first):
    """Position of each of n items in a processing order (int32[n]): the items of bool[n]
    `first` in a uniformly random order, then the others in index order.

    One ranking serves both: the `first` items get keys of 25 random bits above the index
    (ties, below 2e-5 for n = 36, keep index order), the others keys above all of those (the
    top bit set, then the index). Ordering the others too would double the comparisons."""
    index = jnp.arange(words.shape[-1], dtype=jnp.uint32)
    return _ranks(jnp.where(first, ((words >> 1) & jnp.uint32(0x7FFFFFC0)) | index,
                            jnp.uint32(0x80000000) | index))


def _ranks(keys):
    """The rank of each of n distinct uint32 keys among them (int32[n])."""
    # The keys materialised, so the [n, n] comparison reads them instead of recomputing them.
    # One reduction kernel: the same comparisons unrolled into n elementwise steps run as a
    # slower scalar loop (specs/performance.md, "Levers in use").
    keys = bb.materialize(keys)
    return jnp.sum(keys[None, :] < keys[:, None], axis=-1, dtype=jnp.int32)


def exclusive_prefix_count(mask):
    """int32[n]: number of True entries of bool[n] strictly before each position.

    The mask is packed into 32-bit words and each count is a popcount under a constant prefix
    mask: a few operations per entry, where XLA's cumsum lowers to a slow reduce-window and
    n unrolled comparisons cost n operations per entry.
    """
    n = mask.shape[-1]
    count = jnp.zeros(mask.shape, jnp.int32)
    for first in range(0, n, 32):
        size = min(32, n - first)
        bits = np.array([1 << b for b in range(size)], np.uint32)
        word = jnp.sum(jnp.where(mask[..., first:first + size], bits, np.uint32(0)),
                       axis=-1, dtype=jnp.uint32, keepdims=True)
        below = np.array([(1 << min(max(position - first, 0), 32)) - 1 for position in range(n)],
                         np.uint64).astype(np.uint32)
        count = count + jax.lax.population_count(word & below).astype(jnp.int32)
    return count


# Packed new-transmission word: row 0-2, col 3-5, placed 6, type 7-8, from_siphon 9,
# from_scheduled 10.
_COL_SHIFT, _PLACED_BIT, _TYPE_SHIFT, _SIPHON_BIT, _SCHEDULED_BIT = 3, 1 << 6, 7, 1 << 9, 1 << 10


def place_transmissions(key, state: S.GameState, count, from_siphon, from_scheduled,
                        max_count: int = C.MAX_TRANSMISSIONS) -> S.GameState:
    """Place `count` (traced int, at most the static `max_count`) transmissions by §9.2: the
    slots `placed_words` (same arguments) fills, written by `with_placed`."""
    core = state.core
    new = placed_words(key, state, count, from_siphon, from_scheduled, max_count)
    return state.replace(core=core.replace(transmissions=with_placed(core.transmissions, new)))


def placed_words(key, state: S.GameState, count, from_siphon, from_scheduled,
                 max_count: int = C.MAX_TRANSMISSIONS):
    """int32[capacity]: per transmission slot, the packed transmission that placing `count`
    transmissions writes there, or 0 for a slot the placement leaves as it is.

    `from_siphon` / `from_scheduled` are bools, either scalars or bool[max_count] indexed by
    placement order (the enemy turn places its scheduled transmission first and the siphon
    ones after it in one call).

    Each free cell gets a random sort key, preferred cells before fallback ones; a cell's
    placement index is its rank among the free cells (`_ranks`: pairwise comparisons in one
    reduction kernel, cheaper than XLA's CPU sort or 36 sequential picks).
    Keys are 25 random bits above the cell index: cells whose random bits collide (probability
    < 2e-5 per call) keep their row-major order.
    """
    core = state.core
    free, line_of_fire = free_and_line_of_fire(core)
    cell_words = random_words(key, C.NUM_CELLS + max_count)
    words = cell_words[C.NUM_CELLS:]
    count = jnp.minimum(count, max_count)

    cell = jnp.arange(C.NUM_CELLS)
    is_free = bb.to_bool(free).reshape(C.NUM_CELLS)
    in_fire = bb.to_bool(line_of_fire).reshape(C.NUM_CELLS)
    keys = (jnp.where(in_fire, jnp.uint32(1 << 31), jnp.uint32(0))
            | ((cell_words[:C.NUM_CELLS] >> 7) << 6) | cell.astype(jnp.uint32))
    # Occupied cells get a key above every free cell's (those are at most 0xFFFFFFE3): they
    # never count in a free cell's rank, and their own ranks (tied) are not used.
    rank = _ranks(jnp.where(is_free, keys, jnp.uint32(0xFFFFFFFF)))
    placed = is_free & (rank < count)
    # picks[j]: the packed cell of placement j (placements form a prefix of the picks).
    cell_word = (cell // C.BOARD_SIZE) | ((cell % C.BOARD_SIZE) << _COL_SHIFT) | _PLACED_BIT
    picks = jnp.zeros((max_count,), jnp.int32).at[jnp.where(placed, rank, max_count)].set(
        cell_word, mode="drop")

    flag = lambda value: jnp.broadcast_to(jnp.asarray(value, jnp.bool_), (max_count,))
    # Each placement draws its type from a word of its own, apart from the cells' sort keys.
    enemy_type = (words & 3).astype(jnp.int32)
    picks = (picks | (enemy_type << _TYPE_SHIFT)
             | jnp.where(flag(from_siphon), _SIPHON_BIT, 0)
             | jnp.where(flag(from_scheduled), _SCHEDULED_BIT, 0))
    # Placements form a prefix of the picks; scatter them to the slots after the last one.
    transmissions = core.transmissions
    capacity = transmissions.active.shape[0]
    start = jnp.sum(transmissions.active)
    placed = (picks & _PLACED_BIT) != 0
    target = jnp.where(placed, start + jnp.arange(max_count), capacity)
    return jnp.zeros((capacity,), jnp.int32).at[target].set(picks, mode="drop")


def with_placed(transmissions: S.Transmissions, new) -> S.Transmissions:
    """`transmissions` with the slots that `new` (from `placed_words`) fills written."""
    write = (new & _PLACED_BIT) != 0

    def put(old, value):
        return jnp.where(write, jnp.asarray(value, old.dtype), old)

    return transmissions.replace(
        active=transmissions.active | write,
        row=put(transmissions.row, new & 7),
        col=put(transmissions.col, (new >> _COL_SHIFT) & 7),
        turns_remaining=put(transmissions.turns_remaining, 1),
        enemy_type=put(transmissions.enemy_type, (new >> _TYPE_SHIFT) & 3),
        from_siphon=put(transmissions.from_siphon, (new & _SIPHON_BIT) != 0),
        from_scheduled=put(transmissions.from_scheduled, (new & _SCHEDULED_BIT) != 0),
    )


class Placement(NamedTuple):
    """A `place_transmissions` call as data: a step makes at most one (its enemy turn's or its
    stage generation's), so a batched step selects the request per env and places once."""
    key: jax.Array
    count: jax.Array           # int32, at most C.MAX_TRANSMISSIONS
    from_siphon: jax.Array     # bool[C.MAX_TRANSMISSIONS], by placement order
    from_scheduled: jax.Array  # bool[C.MAX_TRANSMISSIONS]


def placement(key, count, from_siphon, from_scheduled) -> Placement:
    """A request with its flags broadcast to one per placement."""
    flags = lambda value: jnp.broadcast_to(jnp.asarray(value, jnp.bool_), (C.MAX_TRANSMISSIONS,))
    return Placement(key, jnp.asarray(count, jnp.int32), flags(from_siphon), flags(from_scheduled))


def place(state: S.GameState, request: Placement) -> S.GameState:
    """Carry out a request: the same as `place_transmissions` with its arguments (a larger
    `max_count` than a caller's count needs changes nothing: see `random_words`)."""
    return place_transmissions(request.key, state, request.count, request.from_siphon,
                               request.from_scheduled)
