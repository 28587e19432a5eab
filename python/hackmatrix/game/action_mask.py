"""The 28-action mask (rules §4) and program applicability (§7.1 table).

"Enemy" means any slot of the enemy list: hidden cryptogs, stunned or disabled enemies and enemies
with hp <= 0 from setup all count (§4.3).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import fusion
from hackmatrix.game import state as S

_ROWS = np.arange(C.BOARD_SIZE, dtype=np.int32)[:, None]
_COLS = np.arange(C.BOARD_SIZE, dtype=np.int32)[None, :]
_DELTA_ROW = C.DIRECTION_DELTAS[:, 0][:, None]  # [4, 1] against per-slot [K] offsets
_DELTA_COL = C.DIRECTION_DELTAS[:, 1][:, None]


def direction_mask(state) -> jnp.ndarray:
    """bool[4], §4.1: the next cell is on the board and has no block or an enemy on it."""
    core = state.core
    enemies = core.enemies
    target_row = core.player_row + C.DIRECTION_DELTAS[:, 0]
    target_col = core.player_col + C.DIRECTION_DELTAS[:, 1]
    on_board = ((target_row >= 0) & (target_row < C.BOARD_SIZE)
                & (target_col >= 0) & (target_col < C.BOARD_SIZE))
    target_content = core.cells.content.reshape(-1)[
        jnp.clip(target_row, 0, C.BOARD_SIZE - 1) * C.BOARD_SIZE
        + jnp.clip(target_col, 0, C.BOARD_SIZE - 1)]
    blocked = C.is_block(target_content)
    enemy_there = jnp.any(
        enemies.active[None]
        & (enemies.row[None] - core.player_row == _DELTA_ROW)
        & (enemies.col[None] - core.player_col == _DELTA_COL), axis=1)
    return on_board & (~blocked | enemy_there)


def program_applicable(state) -> jnp.ndarray:
    """bool[23]: the "applicable when" column of §7.1, indexed by program index."""
    core = state.core
    enemies, transmissions, cells = core.enemies, core.transmissions, core.cells
    row, col = core.player_row, core.player_col
    block = C.is_block(cells.content).reshape(-1)

    def in_ring(rows, cols):
        return jnp.maximum(jnp.abs(rows - row), jnp.abs(cols - col)) == 1

    # The "is there any ..." tests: one bit per test in a word per list element, OR-reduced
    # once per list (one kernel each under vmap instead of one per test).
    def any_of(*tests):
        word = sum(test.astype(jnp.int32) << bit for bit, test in enumerate(tests))
        found = jax.lax.reduce(word.reshape(-1), 0, jax.lax.bitwise_or, (0,))
        return [((found >> bit) & 1) == 1 for bit in range(len(tests))]

    active = enemies.active
    enemy_on_block = block[enemies.row * C.BOARD_SIZE + enemies.col]
    (any_enemy, enemy_in_ring, any_enemy_on_block, any_virus, any_daemon, enemy_in_row,
     enemy_in_col) = any_of(active, active & in_ring(enemies.row, enemies.col),
                            active & enemy_on_block, active & (enemies.kind == C.VIRUS),
                            active & (enemies.kind == C.DAEMON), active & (enemies.row == row),
                            active & (enemies.col == col))
    any_transmission, transmission_in_ring = any_of(
        transmissions.active,
        transmissions.active & in_ring(transmissions.row, transmissions.col))
    siphoned = cells.siphoned.reshape(-1)
    block_in_ring, unsiphoned_spawning_block, any_siphoned = any_of(
        block & in_ring(_ROWS, _COLS).reshape(-1),
        block & ~siphoned & (cells.spawn_count.reshape(-1) > 0),
        siphoned)

    true = jnp.asarray(True)
    applicable = {
        C.PUSH: any_enemy,
        C.PULL: any_enemy,
        C.CRASH: block_in_ring | enemy_in_ring | transmission_in_ring,
        C.WARP: any_enemy | any_transmission,
        C.POLY: any_enemy,
        C.WAIT: true,
        C.DEBUG: any_enemy_on_block,
        C.ROW: enemy_in_row,
        C.COL: enemy_in_col,
        C.UNDO: state.history_size > 0,
        C.STEP: true,
        C.SIPH_PLUS: true,
        C.EXCH: core.credits >= 4,
        C.SHOW: ~core.show_activated,
        C.RESET: core.hp < 3,
        C.CALM: ~core.scheduled_tasks_disabled,
        C.D_BOM: any_daemon,
        C.DELAY: any_transmission,
        C.ANTI_V: any_virus,
        C.SCORE: state.stage < C.MAX_STAGE,
        C.REDUC: unsiphoned_spawning_block,
        C.ATK_PLUS: core.atk_plus_uses < 2,
        C.HACK: any_siphoned,
    }
    # Packed into one word per state, computed once, then unpacked: as a stack of 23 values,
    # every element of the mask (and of the mask's kernel) would evaluate all 23 tests.
    word, = fusion.computed_once(sum(jnp.where(applicable[k], 1 << k, 0)
                                     for k in range(C.NUM_PROGRAMS)))
    return ((word >> jnp.arange(C.NUM_PROGRAMS)) & 1) == 1


def program_mask(state) -> jnp.ndarray:
    """bool[23], §4.3: owned, affordable and applicable."""
    core = state.core
    affordable = ((core.credits >= C.PROGRAM_CREDIT_COST)
                  & (core.energy >= C.PROGRAM_ENERGY_COST))
    return core.owned & affordable & program_applicable(state)


def valid_actions(state) -> jnp.ndarray:
    """bool[28], §4: directions, siphon, programs, in action order."""
    S.check_one_game(state, "valid_actions")
    return jnp.concatenate([
        direction_mask(state),
        (state.core.data_siphons >= 1)[None],
        program_mask(state),
    ])
