"""The array observation (rules §15): player f32[10], programs i32[23], grid f32[6,6,42].

Everything is computed with fixed-shape array ops so that it stays cheap under `vmap`: the
"first element of a list on each cell" rules use a [list, 36] mask reduced to one slot per cell,
never a per-cell loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from hackmatrix.game import constants as C
from hackmatrix.game import state as S

FLAT_SIZE = C.PLAYER_FEATURES + C.NUM_PROGRAMS + C.NUM_CELLS * C.GRID_CHANNELS  # 1545


@struct.dataclass
class Observation:
    player: jax.Array    # f32[10]  (§15.1)
    programs: jax.Array  # i32[23]  (§15.2)
    grid: jax.Array      # f32[6, 6, 42]  (§15.3)


def _per_cell(row, col, eligible, features):
    """[6, 6, F]: on each cell, the features of the first eligible element (list order) there.

    The first slot per cell is a min-reduction over a [N, 36] mask; the features are then
    gathered (a zero row stands for "nothing on this cell"). Much cheaper under vmap than a
    cumulative sum or a one-hot matmul.
    """
    capacity = row.shape[0]
    cell = row * C.BOARD_SIZE + col
    on_cell = (cell[:, None] == jnp.arange(C.NUM_CELLS)[None, :]) & eligible[:, None]
    first_slot = jnp.min(jnp.where(on_cell, jnp.arange(capacity)[:, None], capacity), axis=0)
    padded = jnp.concatenate([features, jnp.zeros((1, features.shape[1]), features.dtype)])
    return padded[first_slot].reshape(C.BOARD_SIZE, C.BOARD_SIZE, -1)


def _enemy_channels(state: S.GameState) -> jax.Array:
    """Channels 0-6 from the first enemy with hp > 0 on each cell; hidden cryptogs blank it."""
    core = state.core
    enemies = core.enemies
    # A cryptog is visible only in the player's row or column, or while SHOW is active; the
    # blank hides the whole cell even if another enemy shares it (§15.3).
    visible = ((enemies.kind != C.CRYPTOG) | (enemies.row == core.player_row)
               | (enemies.col == core.player_col) | core.show_activated)
    features = jnp.concatenate([
        jax.nn.one_hot(enemies.kind, C.NUM_ENEMY_TYPES, dtype=jnp.float32),
        (enemies.hp / 3.0)[:, None],
        enemies.stunned[:, None],
        enemies.from_siphon[:, None],
    ], axis=1).astype(jnp.float32) * visible[:, None]
    return _per_cell(enemies.row, enemies.col, enemies.active & (enemies.hp > 0), features)


def _transmission_channel(state: S.GameState) -> jax.Array:
    """Channel 36: countdown of the first transmission on the cell; its type is never shown."""
    transmissions = state.core.transmissions
    countdown = jnp.minimum(transmissions.turns_remaining / 4.0, 1.0)[:, None]
    return _per_cell(transmissions.row, transmissions.col, transmissions.active,
                     countdown.astype(jnp.float32))


def observe(state: S.GameState) -> Observation:
    """The §15 observation of an unbatched state (vmap it for batches).

    Grid channels in order: 0-6 enemy, 7-9 block kinds, 10 points, 11 siphoned block,
    12-34 program on block, 35 spawn count, 36 transmission, 37-38 resources, 39 data-siphon
    pickup, 40 exit, 41 siphon centre.
    """
    core = state.core
    cells = core.cells
    f32 = jnp.float32

    player = jnp.stack([
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
    ]).astype(f32)

    is_data = cells.content == C.DATA_BLOCK
    is_program = cells.content == C.PROGRAM_BLOCK
    is_question = cells.content == C.QUESTION_BLOCK
    visible_block = is_data | is_program  # question blocks show only channel 9
    # Resources are hidden under a block until that block's cell is siphoned (§15.3).
    resources_visible = ~(is_data | is_program | is_question) | cells.siphoned
    program_channels = (jax.nn.one_hot(cells.program, C.NUM_PROGRAMS, dtype=f32)
                        * is_program[..., None])

    def channel(values):
        return jnp.asarray(values, f32)[..., None]

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
    ], axis=-1)

    return Observation(player=player, programs=core.owned.astype(jnp.int32), grid=grid)


def flatten(obs: Observation) -> jax.Array:
    """f32[1545]: player ++ programs ++ grid in row-major [row, col, channel] order."""
    return jnp.concatenate([
        obs.player,
        obs.programs.astype(jnp.float32),
        obs.grid.reshape(obs.grid.shape[:-3] + (-1,)),
    ], axis=-1)
