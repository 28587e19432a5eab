"""Siphon quality, reward component 13 (rules §14.4), on the state before the siphon.

The yield of every board position is computed at once from shifted [6, 6] boards: each cross
cell contributes a data value (multiset V), a program bit (set G as a 23-bit mask), credits and
energy. Multisets are compared as sorted 5-tuples (a cross has at most 5 cells), sorted by a
fixed sorting network, so any integer point value compares exactly.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C

# "No data value" in a cross slot; larger than any points value, so it sorts last.
_NO_VALUE = np.int32(2**30)
_ROWS = np.arange(C.BOARD_SIZE, dtype=np.int32)[:, None]
_COLS = np.arange(C.BOARD_SIZE, dtype=np.int32)[None, :]
# A 9-comparator sorting network for 5 elements.
_SORT5 = ((0, 1), (3, 4), (2, 4), (2, 3), (0, 3), (0, 2), (1, 4), (1, 3), (1, 2))


def neighbour(board, delta_row, delta_col, fill):
    """Board whose value at x is `board` at x + (delta_row, delta_col), or `fill` off the board."""
    size = C.BOARD_SIZE
    if delta_row:
        pad = jnp.full((1, size), fill, board.dtype)
        board = (jnp.concatenate([board[1:], pad]) if delta_row > 0
                 else jnp.concatenate([pad, board[:-1]]))
    if delta_col:
        pad = jnp.full((size, 1), fill, board.dtype)
        board = (jnp.concatenate([board[:, 1:], pad], axis=1) if delta_col > 0
                 else jnp.concatenate([pad, board[:, :-1]], axis=1))
    return board


def _cross_values(board, fill):
    """The 5 values of each position's cross (centre, up, down, left, right)."""
    return [board] + [neighbour(board, int(dr), int(dc), fill) for dr, dc in C.DIRECTION_DELTAS]


def _sorted5(values):
    values = list(values)
    for i, j in _SORT5:
        values[i], values[j] = jnp.minimum(values[i], values[j]), jnp.maximum(values[i], values[j])
    return values


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

    data_value = jnp.where(unsiphoned & has_data, cells.points, _NO_VALUE)
    program_bit = jnp.where(unsiphoned & has_program & not_owned, 1 << program, 0)
    credits = jnp.where(unsiphoned & ~block, cells.credits, 0)
    energy = jnp.where(unsiphoned & ~block, cells.energy, 0)

    # Yield of every position; a position holding a block yields nothing.
    values = [jnp.where(block, _NO_VALUE, v)
              for v in _sorted5(_cross_values(data_value, _NO_VALUE))]
    program_bits = 0
    for bits in _cross_values(program_bit, 0):
        program_bits = program_bits | bits
    program_bits = jnp.where(block, 0, program_bits)
    yield_credits = jnp.where(block, 0, sum(_cross_values(credits, 0)))
    yield_energy = jnp.where(block, 0, sum(_cross_values(energy, 0)))

    at_player = (_ROWS == core.player_row) & (_COLS == core.player_col)

    def at_player_value(board):
        return jnp.sum(jnp.where(at_player, board, 0))

    player_values = [at_player_value(v) for v in values]
    player_bits = at_player_value(program_bits)
    player_credits = at_player_value(yield_credits)
    player_energy = at_player_value(yield_energy)

    # Candidates: with blocks in the yield, only non-block cells adjacent to every unsiphoned
    # block of the player's cross; otherwise every non-block cell.
    yields_blocks = (player_values[0] != _NO_VALUE) | (player_bits != 0)
    player_cross = (jnp.abs(_ROWS - core.player_row) + jnp.abs(_COLS - core.player_col)) <= 1
    cross_blocks = (player_cross & block & unsiphoned).astype(jnp.int32)
    adjacent_blocks = sum(neighbour(cross_blocks, int(dr), int(dc), 0)
                          for dr, dc in C.DIRECTION_DELTAS)
    candidate = ~block & (~yields_blocks | (adjacent_blocks == jnp.sum(cross_blocks)))

    same_blocks = program_bits == player_bits
    for value, player_value in zip(values, player_values):
        same_blocks = same_blocks & (value == player_value)
    dominates = (candidate & same_blocks
                 & (yield_credits >= player_credits) & (yield_energy >= player_energy)
                 & ((yield_credits > player_credits) | (yield_energy > player_energy)))
    missed_credits = jnp.max(jnp.where(dominates, yield_credits, player_credits)) - player_credits
    missed_energy = jnp.max(jnp.where(dominates, yield_energy, player_energy)) - player_energy
    penalty = -0.5 * (0.05 * missed_credits.astype(jnp.float32)
                      + 0.05 * missed_energy.astype(jnp.float32))
    return jnp.where(jnp.any(dominates), penalty, 0.0).astype(jnp.float32)
