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


def cross_sums(planes):
    """For stacked boards [P, 6, 6]: the sum over each position's cross (off-board adds 0)."""
    padded = jnp.pad(planes, ((0, 0), (1, 1), (1, 1)))
    return (padded[:, 1:7, 1:7] + padded[:, 2:8, 1:7] + padded[:, 0:6, 1:7]
            + padded[:, 1:7, 0:6] + padded[:, 1:7, 2:8])


def _cross_or(board):
    padded = jnp.pad(board, 1)
    return (padded[1:7, 1:7] | padded[2:8, 1:7] | padded[0:6, 1:7]
            | padded[1:7, 0:6] | padded[1:7, 2:8])


def siphon_quality(state) -> jnp.ndarray:
    """−0.5 × (0.05 × missedCredits + 0.05 × missedEnergy), or 0 if nothing dominates (§14.4)."""
    core = state.core
    cells = core.cells
    content = cells.content
    block = (content >= C.DATA_BLOCK) & (content <= C.QUESTION_BLOCK)
    unsiphoned = ~cells.siphoned
    question = content == C.QUESTION_BLOCK
    has_program = (content == C.PROGRAM_BLOCK) | (question & (cells.program >= 0))
    has_data = (content == C.DATA_BLOCK) | (question & (cells.program < 0))
    owned_bits = jnp.sum(core.owned.astype(jnp.int32) << jnp.arange(C.NUM_PROGRAMS))
    program = jnp.maximum(cells.program, 0)
    not_owned = ((owned_bits >> program) & 1) == 0
    open_cell = unsiphoned & ~block
    player_cross = (jnp.abs(_ROWS - core.player_row) + jnp.abs(_COLS - core.player_col)) <= 1

    # Per-position yields (data-cell count, credits, energy) and, as a fourth plane, how many
    # unsiphoned blocks of the player's cross each position's cross holds.
    per_cell = jnp.stack([
        unsiphoned & has_data,
        jnp.where(open_cell, cells.credits, 0),
        jnp.where(open_cell, cells.energy, 0),
        player_cross & block & unsiphoned,
    ]).astype(jnp.int32)
    data_count, yield_credits, yield_energy, cross_blocks_reached = cross_sums(per_cell)
    program_bits = _cross_or(jnp.where(unsiphoned & has_program & not_owned, 1 << program, 0))

    # The player's yield: one stacked reduction (empty when the player stands on a block).
    at_player = (_ROWS == core.player_row) & (_COLS == core.player_col)
    player_open = ~jnp.any(at_player & block)
    yields = jnp.stack([data_count, program_bits, yield_credits, yield_energy])
    player_yield = jnp.where(player_open, jnp.sum(jnp.where(at_player, yields, 0), axis=(1, 2)), 0)
    player_data, player_bits, player_credits, player_energy = player_yield

    # Candidates: with blocks in the yield, only non-block cells adjacent to every unsiphoned
    # block of the player's cross (a non-block x reaches such a block only as a neighbour);
    # otherwise every non-block cell.
    yields_blocks = (player_data > 0) | (player_bits != 0)
    cross_block_count = jnp.sum(per_cell[3])
    candidate = ~block & (~yields_blocks | (cross_blocks_reached == cross_block_count))

    dominates = (candidate & (data_count == player_data) & (program_bits == player_bits)
                 & (yield_credits >= player_credits) & (yield_energy >= player_energy)
                 & ((yield_credits > player_credits) | (yield_energy > player_energy)))
    # Both maxima (taken independently) and "any dominates" in one reduction.
    best = jnp.max(jnp.stack([jnp.where(dominates, yield_credits, player_credits),
                              jnp.where(dominates, yield_energy, player_energy),
                              dominates.astype(jnp.int32)]), axis=(1, 2))
    missed_credits = (best[0] - player_credits).astype(jnp.float32)
    missed_energy = (best[1] - player_energy).astype(jnp.float32)
    penalty = -0.5 * (0.05 * missed_credits + 0.05 * missed_energy)
    return jnp.where(best[2] > 0, penalty, 0.0).astype(jnp.float32)
