"""Transmission placement (rules §9.2), many transmissions in one fixed-shape pass.

A cell is free if it is not the player's cell and holds no enemy, transmission or block; it is
in the line of fire if it shares the player's row or column with no enemy or block strictly in
between (transmissions do not shield). Each new transmission goes to a uniformly random free
cell out of the line of fire, else to a uniformly random free cell, else nowhere.

Placing n transmissions one at a time is the same as taking a uniformly random order of the
preferred cells A (free, out of the line of fire) followed by a uniformly random order of the
fallback cells B (free, in the line of fire) and using its first min(n, |A| + |B|) cells:
a placed transmission only removes its own cell from A or B, because transmissions change
neither freedom of other cells nor the line of fire. We implement this exact uniform choice with
one sort of random keys. The rules' rejection-sampling procedure (100 draws per category) is
only the canonical way to obtain the same distribution; unlike it, we never drop a transmission
while a free cell exists.

All placed transmissions get turnsRemaining 1 and a uniformly random enemy type, and are
appended to the list in placement order (an append past capacity is dropped).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def place_transmissions(key, state: S.GameState, count, from_siphon, from_scheduled
                        ) -> S.GameState:
    """Place `count` (traced int) new transmissions by §9.2, as if one at a time.

    `from_siphon` / `from_scheduled` are bools, either scalars or bool[MAX_TRANSMISSIONS]
    indexed by placement order (the enemy turn places its scheduled transmission first and the
    siphon ones after it in one call).
    """
    core = state.core
    free, line_of_fire = free_and_line_of_fire(core)
    preferred = bb.to_bool(free & ~line_of_fire).reshape(C.NUM_CELLS)
    fallback = bb.to_bool(free & line_of_fire).reshape(C.NUM_CELLS)

    order_key, type_key = jax.random.split(key)
    noise = jax.random.uniform(order_key, (C.NUM_CELLS,))
    sort_key = jnp.where(preferred, noise, jnp.where(fallback, 1.0 + noise, 3.0))
    cell_order = jnp.argsort(sort_key)  # cells in placement order, preferred ones first

    transmissions = core.transmissions
    capacity = transmissions.active.shape[0]
    start = jnp.sum(transmissions.active)
    placed = jnp.minimum(jnp.maximum(count, 0), bb.popcount(free))
    placement = jnp.arange(capacity) - start  # placement index written into each slot
    write = (placement >= 0) & (placement < placed)
    index = jnp.clip(placement, 0, C.NUM_CELLS - 1)
    cell = cell_order[index]
    flag = lambda value: jnp.broadcast_to(jnp.asarray(value, jnp.bool_), (capacity,))[index]
    enemy_type = jax.random.randint(type_key, (capacity,), 0, C.NUM_ENEMY_TYPES)

    def put(old, new):
        return jnp.where(write, jnp.asarray(new, old.dtype), old)

    transmissions = transmissions.replace(
        active=transmissions.active | write,
        row=put(transmissions.row, cell // C.BOARD_SIZE),
        col=put(transmissions.col, cell % C.BOARD_SIZE),
        turns_remaining=put(transmissions.turns_remaining, 1),
        enemy_type=put(transmissions.enemy_type, enemy_type),
        from_siphon=put(transmissions.from_siphon, flag(from_siphon)),
        from_scheduled=put(transmissions.from_scheduled, flag(from_scheduled)),
    )
    return state.replace(core=core.replace(transmissions=transmissions))
