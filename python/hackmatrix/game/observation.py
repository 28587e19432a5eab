"""The array observation (rules §15): player f32[10], programs i32[23], grid f32[6,6,42].

Everything is computed with fixed-shape array ops so that it stays cheap under `vmap`: the
"first element of a list on each cell" rules use one scatter-min of slot numbers per list, never
a per-cell loop, and gather one value per cell.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from hackmatrix.game import constants as C
from hackmatrix.game import fusion
from hackmatrix.game import state as S

FLAT_SIZE = C.PLAYER_FEATURES + C.NUM_PROGRAMS + C.NUM_CELLS * C.GRID_CHANNELS  # 1545


@struct.dataclass
class Observation:
    player: jax.Array    # f32[10]  (§15.1)
    programs: jax.Array  # i32[23]  (§15.2)
    grid: jax.Array      # f32[6, 6, 42]  (§15.3)


def _first_slot_per_cell(row, col, eligible):
    """int32[36]: on each cell (row-major), the first eligible slot there in list order, or the
    list capacity if none: one scatter-min of slot numbers (cheaper under vmap than a
    [list, 36] mask reduction)."""
    capacity = row.shape[0]
    cell = jnp.where(eligible, row * C.BOARD_SIZE + col, C.NUM_CELLS)  # out of range: dropped
    return jnp.full((C.NUM_CELLS,), capacity, jnp.int32).at[cell].min(
        jnp.arange(capacity, dtype=jnp.int32), mode="drop")


def _per_cell(values, slot, empty):
    """values[slot] per cell, `empty` where the slot is the capacity (nothing on the cell)."""
    return jnp.concatenate([values, jnp.full((1,), empty, values.dtype)])[slot]


# The enemy word: shown 1 bit, kind 2 bits, stunned, spawnedFromSiphon. One int32 gather per cell
# instead of six floats; hp has its own gather, since scenario hp is any int32 (stored verbatim).
_SHOWN, _KIND_SHIFT, _STUNNED_SHIFT, _SIPHON_SHIFT = 1, 1, 3, 4


def _enemy_channels(state: S.GameState) -> jax.Array:
    """[36, 7], channels 0-6 from the first enemy with hp > 0 on each cell; hidden cryptogs
    blank it."""
    core = state.core
    enemies = core.enemies
    # A cryptog is visible only in the player's row or column, or while SHOW is active; the
    # blank hides the whole cell even if another enemy shares it (§15.3).
    visible = ((enemies.kind != C.CRYPTOG) | (enemies.row == core.player_row)
               | (enemies.col == core.player_col) | core.show_activated)
    word = jnp.where(visible, _SHOWN | (enemies.kind << _KIND_SHIFT)
                     | (enemies.stunned.astype(jnp.int32) << _STUNNED_SHIFT)
                     | (enemies.from_siphon.astype(jnp.int32) << _SIPHON_SHIFT), 0)
    slot = _first_slot_per_cell(enemies.row, enemies.col, enemies.active & (enemies.hp > 0))
    word = _per_cell(word, slot, 0)[:, None]
    hp = _per_cell(jnp.where(visible, enemies.hp, 0), slot, 0)[:, None]
    kind = jnp.where((word & _SHOWN) != 0, (word >> _KIND_SHIFT) & 3, -1)
    return jnp.concatenate([
        (kind == jnp.arange(C.NUM_ENEMY_TYPES)).astype(jnp.float32),
        hp / 3.0,
        (word >> _STUNNED_SHIFT) & 1,
        (word >> _SIPHON_SHIFT) & 1,
    ], axis=1).astype(jnp.float32)


def _transmission_channel(state: S.GameState) -> jax.Array:
    """[36, 1], channel 36: countdown of the first transmission on the cell; its type is never
    shown."""
    transmissions = state.core.transmissions
    countdown = jnp.minimum(transmissions.turns_remaining / 4.0, 1.0).astype(jnp.float32)
    slot = _first_slot_per_cell(transmissions.row, transmissions.col, transmissions.active)
    return _per_cell(countdown, slot, 0.0)[:, None]


def observe(state: S.GameState) -> Observation:
    """The §15 observation of an unbatched state (vmap it for batches).

    Grid channels in order: 0-6 enemy, 7-9 block kinds, 10 points, 11 siphoned block,
    12-34 program on block, 35 spawn count, 36 transmission, 37-38 resources, 39 data-siphon
    pickup, 40 exit, 41 siphon centre.
    """
    S.check_one_game(state, "observe")
    core = state.core
    cells = core.cells
    f32 = jnp.float32

    player = fusion.stack_last([
        core.player_row / 5.0,
        core.player_col / 5.0,
        core.hp / 3.0,
        jnp.minimum(core.credits / 50.0, 1.0),
        jnp.minimum(core.energy / 50.0, 1.0),
        (state.stage - 1) / 7.0,
        core.data_siphons / 10.0,          # not capped
        (core.attack_damage - 1) / 2.0,    # not capped
        core.show_activated,
        core.scheduled_tasks_disabled,
    ], f32)

    # Cells flattened row-major: every channel group is a [36, k] block of one concatenation
    # (cheaper than concatenating [6, 6, k] blocks).
    cells = jax.tree_util.tree_map(lambda field: field.reshape(C.NUM_CELLS), cells)
    is_data = cells.content == C.DATA_BLOCK
    is_program = cells.content == C.PROGRAM_BLOCK
    is_question = cells.content == C.QUESTION_BLOCK
    visible_block = is_data | is_program  # question blocks show only channel 9
    # Resources are hidden under a block until that block's cell is siphoned (§15.3).
    resources_visible = ~(is_data | is_program | is_question) | cells.siphoned
    program_channels = (jax.nn.one_hot(cells.program, C.NUM_PROGRAMS, dtype=f32)
                        * is_program[:, None])

    def channel(values):
        return jnp.asarray(values, f32)[:, None]

    grid = jnp.concatenate([
        _enemy_channels(state),
        channel(is_data),
        channel(is_program),
        channel(is_question),
        channel(jnp.where(is_data, cells.points / 9.0, 0.0)),
        channel(visible_block & cells.siphoned),
        program_channels,
        channel(jnp.where(visible_block, cells.spawn_count / 9.0, 0.0)),
        _transmission_channel(state),
        channel(jnp.where(resources_visible, cells.credits / 3.0, 0.0)),
        channel(jnp.where(resources_visible, cells.energy / 3.0, 0.0)),
        channel(cells.content == C.DATA_SIPHON),
        channel(cells.content == C.EXIT),
        channel(cells.siphon_center),
    ], axis=-1).reshape(C.BOARD_SIZE, C.BOARD_SIZE, C.GRID_CHANNELS)

    return Observation(player=player, programs=core.owned.astype(jnp.int32), grid=grid)


def flatten(obs: Observation) -> jax.Array:
    """f32[1545]: player ++ programs ++ grid in row-major [row, col, channel] order."""
    return jnp.concatenate([
        obs.player,
        obs.programs.astype(jnp.float32),
        obs.grid.reshape(obs.grid.shape[:-3] + (-1,)),
    ], axis=-1)
