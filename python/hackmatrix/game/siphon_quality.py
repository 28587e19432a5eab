"""Siphon quality, reward component 13 (rules §14.4), on the state before the siphon.

The yields of all 36 positions come from shifted [6, 6] boards. Comparing the data multisets
V(x) = V(Y) needs no sorting: when Y holds blocks, every candidate x is adjacent to every block of
B, so x's cross contains B and V(x) is V(Y) plus the data of x's other cross cells; the multisets
are equal exactly when x's cross holds as many data-carrying cells as Y's. When Y holds no blocks,
V(x) must be empty, which is again "as many (zero) data cells". Program sets G are 23-bit masks.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C

_ROWS = np.arange(C.BOARD_SIZE, dtype=np.int32)[:, None]
_COLS = np.arange(C.BOARD_SIZE, dtype=np.int32)[None, :]


def cross_sum(plane):
    """For a board [6, 6]: the sum over each position's cross (off-board adds 0)."""
    padded = jnp.pad(plane, 1)
    return (padded[1:7, 1:7] + padded[2:8, 1:7] + padded[0:6, 1:7]
            + padded[1:7, 0:6] + padded[1:7, 2:8])


def _cross_or(board):
    padded = jnp.pad(board, 1)
    return (padded[1:7, 1:7] | padded[2:8, 1:7] | padded[0:6, 1:7]
            | padded[1:7, 0:6] | padded[1:7, 2:8])


def siphon_quality(state) -> jnp.ndarray:
    """−0.5 × (0.05 × missedCredits + 0.05 × missedEnergy), or 0 if nothing dominates (§14.4)."""
    core = state.core
    cells = core.cells
    content = cells.content
    block = C.is_block(content)
    unsiphoned = ~cells.siphoned
    question = content == C.QUESTION_BLOCK
    has_program = (content == C.PROGRAM_BLOCK) | (question & (cells.program >= 0))
    has_data = (content == C.DATA_BLOCK) | (question & (cells.program < 0))
    owned_bits = jnp.sum(core.owned.astype(jnp.int32) << jnp.arange(C.NUM_PROGRAMS))
    program = jnp.maximum(cells.program, 0)
    not_owned = ((owned_bits >> program) & 1) == 0
    open_cell = unsiphoned & ~block
    player_cross = (jnp.abs(_ROWS - core.player_row) + jnp.abs(_COLS - core.player_col)) <= 1

    # Per-position yields (data-cell count, credits, energy) and how many unsiphoned blocks of
    # the player's cross each position's cross holds.
    player_cross_blocks = player_cross & block & unsiphoned
    data_count = cross_sum((unsiphoned & has_data).astype(jnp.int32))
    yield_credits = cross_sum(jnp.where(open_cell, cells.credits, 0))
    yield_energy = cross_sum(jnp.where(open_cell, cells.energy, 0))
    cross_blocks_reached = cross_sum(player_cross_blocks.astype(jnp.int32))
    program_bits = _cross_or(jnp.where(unsiphoned & has_program & not_owned, 1 << program, 0))

    # The player's yield (empty when the player stands on a block).
    at_player = (_ROWS == core.player_row) & (_COLS == core.player_col)
    player_open = ~jnp.any(at_player & block)
    at_player_open = at_player & player_open
    player_data, player_bits, player_credits, player_energy = (
        jnp.sum(jnp.where(at_player_open, plane, 0))
        for plane in (data_count, program_bits, yield_credits, yield_energy))

    # Candidates: with blocks in the yield, only non-block cells adjacent to every unsiphoned
    # block of the player's cross (a non-block x reaches such a block only as a neighbour);
    # otherwise every non-block cell.
    yields_blocks = (player_data > 0) | (player_bits != 0)
    cross_block_count = jnp.sum(player_cross_blocks.astype(jnp.int32))
    candidate = ~block & (~yields_blocks | (cross_blocks_reached == cross_block_count))

    dominates = (candidate & (data_count == player_data) & (program_bits == player_bits)
                 & (yield_credits >= player_credits) & (yield_energy >= player_energy)
                 & ((yield_credits > player_credits) | (yield_energy > player_energy)))
    # The two maxima are taken independently.
    missed_credits = (jnp.max(jnp.where(dominates, yield_credits, player_credits))
                      - player_credits).astype(jnp.float32)
    missed_energy = (jnp.max(jnp.where(dominates, yield_energy, player_energy))
                     - player_energy).astype(jnp.float32)
    penalty = -0.5 * (0.05 * missed_credits + 0.05 * missed_energy)
    return jnp.where(jnp.any(dominates), penalty, 0.0).astype(jnp.float32)
