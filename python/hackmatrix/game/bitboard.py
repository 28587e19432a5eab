"""The 6x6 board as two uint32 words, one per checkerboard colour.

Layout. Cell (row, col) has colour (row + col) % 2 and lives in word `even` or `odd` at bit
4 * row + col // 2. Each row therefore takes a 4-bit nibble per word: 3 cells and one guard bit
(bit 3), which is always 0; bits 24-31 are always 0 too.

Why not rows 0-2 / rows 3-5 (the obvious split)? Every orthogonal step changes the colour, so a
breadth-first wavefront (§8.1, §12.2, §14.2) lives in a single word at each step and a full
expansion is ~12 operations on one uint32 instead of ~29 on two; a batched search runs
several times faster than with 6- or 7-bit rows split over two words.

Moving one step: up/down shift by a nibble (4 bits). Horizontally, inside one source word,
rows whose cells have even columns move left by one bit and keep their bit moving right; rows
with odd columns do the opposite. Which rows those are depends on the source word's colour
(`EVEN_ROW_BITS` for the even word, `ODD_ROW_BITS` for the odd one), so a wavefront step is
`spread(word, colour)` followed by a mask.

All functions work on unbatched scalars and under vmap; boards are NamedTuples (pytrees).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C

ROW_STRIDE = 4
WORD_MASK = 0x777777            # the 18 valid cell bits of a word
EVEN_ROW_BITS = 0x070707        # nibbles of rows 0, 2, 4
ODD_ROW_BITS = 0x707070         # nibbles of rows 1, 3, 5

_ROWS = np.arange(C.BOARD_SIZE)[:, None]
_COLS = np.arange(C.BOARD_SIZE)[None, :]
CELL_PARITY = ((_ROWS + _COLS) % 2).astype(np.int32)                       # [6,6]
CELL_BIT = (ROW_STRIDE * _ROWS + _COLS // 2).astype(np.uint32)             # [6,6]
_CELL_VALUE = (np.uint32(1) << CELL_BIT).astype(np.uint32)


def _u32(x):
    return jnp.asarray(x, dtype=jnp.uint32)


class Board(NamedTuple):
    """A set of cells. `even` holds cells with (row + col) even, `odd` the others."""
    even: jax.Array
    odd: jax.Array

    def __and__(self, other):
        return Board(self.even & other.even, self.odd & other.odd)

    def __or__(self, other):
        return Board(self.even | other.even, self.odd | other.odd)

    def __xor__(self, other):
        return Board(self.even ^ other.even, self.odd ^ other.odd)

    def __invert__(self):
        return Board(~self.even & _u32(WORD_MASK), ~self.odd & _u32(WORD_MASK))

    def word(self, parity):
        """The word holding cells of colour `parity` (traced 0/1)."""
        return jnp.where(parity == 0, self.even, self.odd)


def materialize(x):
    """Compute `x` (an array whose last axis has size >= 2, or a Board) once, as a buffer.

    XLA's CPU fusion recomputes cheap elementwise producers inside every consumer kernel and
    for every element of a broadcast: a board derived by ~100 bit operations and then expanded
    to [36, 36] pairs would be recomputed 1296 times per env. A scatter is never fused into its
    consumers and is not simplified away
    (optimization_barrier is dropped by the CPU pipeline), so it acts as a materialisation point.
    """
    if isinstance(x, Board):
        words = materialize(jnp.stack([x.even, x.odd], axis=-1))
        return Board(words[..., 0], words[..., 1])
    slots = jnp.arange(x.shape[-1])
    return jnp.zeros_like(x).at[..., slots].set(x)


def empty() -> Board:
    return Board(_u32(0), _u32(0))


def where(pred, a: Board, b: Board) -> Board:
    return Board(jnp.where(pred, a.even, b.even), jnp.where(pred, a.odd, b.odd))


def on_board(row, col):
    return (row >= 0) & (row < C.BOARD_SIZE) & (col >= 0) & (col < C.BOARD_SIZE)


def cell_parity(row, col):
    return (row + col) & 1


def cell_mask(row, col):
    """The single bit of (row, col) within its colour's word; 0 when off the board."""
    bit = jnp.clip(ROW_STRIDE * row + col // 2, 0, 31).astype(jnp.uint32)
    return jnp.where(on_board(row, col), _u32(1) << bit, _u32(0))


def single(row, col) -> Board:
    """The board holding just (row, col); empty when off the board."""
    mask = cell_mask(row, col)
    even = cell_parity(row, col) == 0
    return Board(jnp.where(even, mask, _u32(0)), jnp.where(even, _u32(0), mask))


def contains(board: Board, row, col):
    """bool: (row, col) is on the board and in the set."""
    return (board.word(cell_parity(row, col)) & cell_mask(row, col)) != 0


# [36, 2]: the value of each cell's bit in the even and the odd word.
_PACKING = np.stack([np.where(CELL_PARITY == colour, _CELL_VALUE, 0).reshape(C.NUM_CELLS)
                     for colour in (0, 1)], axis=-1).astype(np.float32)


def from_bool(grid) -> Board:
    """Pack bool[6,6] (indexed [row, col]).

    A [36] x [36, 2] matrix product: under vmap one GEMM rather than a reduction kernel.
    Exact: distinct powers of two below 2**24 add up exactly
    in float32.
    """
    words = grid.reshape(grid.shape[:-2] + (C.NUM_CELLS,)).astype(jnp.float32) @ _PACKING
    words = words.astype(jnp.uint32)
    return Board(words[..., 0], words[..., 1])


def to_bool(board: Board):
    """Unpack to bool[6,6]."""
    word = jnp.where(CELL_PARITY == 0, board.even, board.odd)
    return ((word >> jnp.asarray(CELL_BIT)) & _u32(1)) != 0


def from_cells(active, rows, cols) -> Board:
    """The set of cells (rows[i], cols[i]) over the slots where `active`."""
    masks = jnp.where(active, cell_mask(rows, cols), _u32(0))
    even = cell_parity(rows, cols) == 0
    # Bits may repeat (shared cells), so combine with OR, not a sum.
    reduce_or = lambda x: jax.lax.reduce(x, _u32(0), jax.lax.bitwise_or, (x.ndim - 1,))
    return Board(reduce_or(jnp.where(even, masks, _u32(0))),
                 reduce_or(jnp.where(even, _u32(0), masks)))


def spread(word, source_parity):
    """One orthogonal step from every cell of a single-colour word (no mask applied).

    The result lies in the other colour's word; guard bits and bits >= 24 may be set, so the
    caller ANDs with a valid-cell mask (usually the set of passable cells).
    """
    left_rows = jnp.where(source_parity == 0, _u32(EVEN_ROW_BITS), _u32(ODD_ROW_BITS))
    right_rows = _u32(EVEN_ROW_BITS | ODD_ROW_BITS) ^ left_rows
    return (word | (word << 4) | (word >> 4) | ((word & left_rows) >> 1)
            | ((word & right_rows) << 1))


def neighbors(board: Board) -> Board:
    """Cells orthogonally adjacent to some cell of `board`."""
    mask = _u32(WORD_MASK)
    return Board(spread(board.odd, 1) & mask, spread(board.even, 0) & mask)


_UP, _DOWN, _LEFT, _RIGHT = range(C.NUM_DIRECTIONS)


def shift(board: Board, direction: int) -> Board:
    """Move every cell one step in `direction` (static: 0 up, 1 down, 2 left, 3 right)."""
    mask = _u32(WORD_MASK)
    even_rows, odd_rows = _u32(EVEN_ROW_BITS), _u32(ODD_ROW_BITS)
    e, o = board.even, board.odd
    if direction == _UP:
        return Board((o << 4) & mask, (e << 4) & mask)
    if direction == _DOWN:
        return Board(o >> 4, e >> 4)
    if direction == _LEFT:
        return Board((((o & odd_rows) >> 1) | (o & even_rows)) & mask,
                     (((e & even_rows) >> 1) | (e & odd_rows)) & mask)
    if direction == _RIGHT:
        return Board(((o & odd_rows) | ((o & even_rows) << 1)) & mask,
                     ((e & even_rows) | ((e & odd_rows) << 1)) & mask)
    raise ValueError(f"direction must be 0..3, got {direction}")


def shift_word(word, source_parity, direction: int):
    """`shift` for a single-colour word of colour `source_parity` (traced): the result is a word
    of the other colour."""
    left_rows = jnp.where(source_parity == 0, _u32(EVEN_ROW_BITS), _u32(ODD_ROW_BITS))
    right_rows = _u32(EVEN_ROW_BITS | ODD_ROW_BITS) ^ left_rows
    if direction == _UP:
        return (word << 4) & _u32(WORD_MASK)
    if direction == _DOWN:
        return word >> 4
    if direction == _LEFT:
        return ((word & left_rows) >> 1) | (word & right_rows)
    if direction == _RIGHT:
        return (word & left_rows) | ((word & right_rows) << 1)
    raise ValueError(f"direction must be 0..3, got {direction}")


def popcount(board: Board):
    return (jax.lax.population_count(board.even).astype(jnp.int32)
            + jax.lax.population_count(board.odd).astype(jnp.int32))


def is_empty(board: Board):
    return (board.even | board.odd) == 0


def uniform_index(bits, count):
    """An int32 uniform in [0, count) from 32 random bits (count <= 2**8; bias <= count / 2**24)."""
    return ((bits >> 8) * count.astype(jnp.uint32) >> 24).astype(jnp.int32)
