"""Fixed-iteration breadth-first wavefronts on bitboards (rules §8.1 enemy movement, §14.2).

Every search runs a static number of wavefront steps with no early exit. The bound is exact:
a shortest path is an induced path of the 6x6 grid (a chord would shorten it), and the longest
induced path of the 6x6 grid has 23 edges (exhaustive search), so no distance ever exceeds 23.

Wavefront layers alternate colours (see bitboard.py), so a step touches one uint32 word.

Enemy movement (§8.1) for enemy E at e, player at p:
- rule 1 searches from p through passable cells (no block unless E is a glitch, not occupied by
  another enemy or a transmission). p is the source even when occupied, but not for a
  non-glitch when the player stands on a block. The first layer that touches a neighbour of e
  holds exactly the neighbours on shortest paths; E takes the first of them in
  up/down/left/right order.
  Treating E's own cell as occupied changes nothing: a neighbour n with d(n) = d(e) - 1 has a
  shortest path that cannot pass through e.
- rule 2 ignores occupancy, so its answer depends only on p and the blocks: it is computed once
  per enemy turn for every cell (`rule2_first_steps`); for a glitch it is the Manhattan step.
- rule 3 is the greedy fallback over the four neighbours.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from hackmatrix.game import bitboard as bb
from hackmatrix.game import constants as C
from hackmatrix.game import fusion

# A shortest path has at most 23 edges, so a distance-d(e) path's first step lies in layer <= 22.
MAX_PATH_LENGTH = 23
_OPPOSITE = (1, 0, 3, 2)
_FAR = 1 << 20


def blocks(cells) -> bb.Board:
    """Cells whose content is a data, program or question block."""
    return bb.from_bool(C.is_block(cells.content))


def _first_layer_touching(p_row, p_col, source_ok, passable: bb.Board, targets: bb.Board):
    """Breadth-first search from p through `passable`.

    Returns the cells of `targets` in the first layer (distance from p) that contains any, as a
    word of the targets' colour (all targets must share one colour), or 0 if none is reached
    within MAX_PATH_LENGTH - 1 steps.
    """
    parity = bb.cell_parity(p_row, p_col)
    source = jnp.where(source_ok, bb.cell_mask(p_row, p_col), jnp.uint32(0))
    unvisited_same = passable.word(parity) & ~source
    unvisited_other = passable.word(1 - parity)
    targets_same, targets_other = targets.word(parity), targets.word(1 - parity)
    found = source & targets_same

    def two_layers(carry):
        frontier, unvisited_same, unvisited_other, found = carry
        frontier = bb.spread(frontier, parity) & unvisited_other
        unvisited_other = unvisited_other ^ frontier
        found = jnp.where(found != 0, found, frontier & targets_other)
        frontier = bb.spread(frontier, 1 - parity) & unvisited_same
        unvisited_same = unvisited_same ^ frontier
        found = jnp.where(found != 0, found, frontier & targets_same)
        return frontier, unvisited_same, unvisited_other, found

    # Unrolled (not a fori_loop): the enemy loop calls this once per enemy, and unrolled the
    # whole move is one elementwise kernel; a loop costs several kernel launches per layer.
    carry = (source, unvisited_same, unvisited_other, found)
    for _ in range((MAX_PATH_LENGTH - 1) // 2):
        carry = two_layers(carry)
    return carry[3]


class Rule2Steps(NamedTuple):
    """Per direction d: cells whose neighbour in d starts a shortest block-avoiding path to p."""
    up: bb.Board
    down: bb.Board
    left: bb.Board
    right: bb.Board


def rule2_first_steps(p_row, p_col, block_board: bb.Board) -> Rule2Steps:
    """§8.1 rule 2 for non-glitch enemies, for every cell at once (occupancy ignored).

    A cell x is in `steps[d]` iff its neighbour in direction d is passable (no block) and at
    minimal distance from p among x's neighbours. The player's own cell is not meaningful (rule 2
    yields no step there). Empty everywhere when the player stands on a block.

    Layer k (distance k from p) lies in one word, of p's colour for even k ("same") and of the
    other colour for odd k, so the search keeps its sets per relative colour. The loop carries
    its 13 words as two arrays, the search's 5 and the steps' 8: two kernels per iteration (a
    tuple of words costs one per word, and in one array every word's kernel entry would
    compute all 13).
    """
    parity = bb.cell_parity(p_row, p_col)
    source = jnp.where(bb.contains(block_board, p_row, p_col), jnp.uint32(0),
                       bb.cell_mask(p_row, p_col))
    passable = (~block_board).word(parity), (~block_board).word(1 - parity)  # same, other

    def expand(k, here, layer, visited, touched, steps):
        """Expand layer k (relative colour `here`, static) by one step."""
        there = 1 - here
        layer_parity = parity ^ here
        adjacent = bb.spread(layer, layer_parity) & jnp.uint32(bb.WORD_MASK)
        fresh = adjacent & ~touched[there]
        for d in range(C.NUM_DIRECTIONS):
            steps[d][there] = steps[d][there] | (fresh & bb.shift_word(layer, layer_parity,
                                                                         _OPPOSITE[d]))
        layer = adjacent & passable[there] & ~visited[there]
        visited[there] = visited[there] | layer
        touched[there] = touched[there] | adjacent
        return layer

    def unpack(words):
        search, step_words = words
        return (search[0], [search[1], search[2]], [search[3], search[4]],
                [[step_words[2 * d], step_words[2 * d + 1]] for d in range(C.NUM_DIRECTIONS)])

    def two_layers(_, words):
        layer, visited, touched, steps = unpack(words)
        layer = expand(0, 0, layer, visited, touched, steps)
        layer = expand(1, 1, layer, visited, touched, steps)
        return (fusion.stack_last([layer, *visited, *touched]),
                fusion.stack_last([w for pair in steps for w in pair]))

    zero = jnp.uint32(0)
    words = (jnp.stack([source, source, zero, zero, zero]),
             jnp.zeros((2 * C.NUM_DIRECTIONS,), jnp.uint32))
    # Layers 0..21 in the loop, then layer 22: distances never exceed 23 (module docstring).
    words = jax.lax.fori_loop(0, (MAX_PATH_LENGTH - 1) // 2, two_layers, words)
    layer, visited, touched, steps = unpack(words)
    expand(MAX_PATH_LENGTH - 1, 0, layer, visited, touched, steps)
    same_is_even = parity == 0
    return Rule2Steps(*(bb.Board(jnp.where(same_is_even, same, other),
                                 jnp.where(same_is_even, other, same))
                        for same, other in steps))


def _first_direction(hits):
    """Index of the first True among four bools (up, down, left, right); 4 if none."""
    up, down, left, right = hits
    return jnp.where(up, 0, jnp.where(down, 1, jnp.where(left, 2, jnp.where(right, 3, 4))))


def _pick(index, options):
    """options[index] for a traced index, as a chain of selects (fuses; jnp.select does not)."""
    result = options[-1]
    for k in range(len(options) - 2, -1, -1):
        result = jnp.where(index == k, options[k], result)
    return result


def enemy_move(e_row, e_col, is_glitch, p_row, p_col, block_board: bb.Board,
               occupied: bb.Board, rule2: Rule2Steps):
    """Cell an enemy at (e_row, e_col) moves to by §8.1 rules 1-3 (its own cell if it stays).

    `occupied` is O: cells of the other enemies and of all transmissions (the mover's own cell
    may be included, see the module docstring). Called only for non-adjacent enemies.
    Written with four scalar directions (no [4] arrays, no reductions), so that the whole move
    fuses into one elementwise kernel under vmap. All four neighbours have the colour opposite
    to e, so every neighbour test is a shift of one word.
    """
    at_player = (e_row == p_row) & (e_col == p_col)
    walls = bb.where(is_glitch, bb.empty(), block_board)
    neighbors = [(e_row + int(dr), e_col + int(dc)) for dr, dc in C.DIRECTION_DELTAS]
    on_board = [bb.on_board(r, c) for r, c in neighbors]
    bits = [jnp.clip(bb.ROW_STRIDE * r + c // 2, 0, 31).astype(jnp.uint32) for r, c in neighbors]
    neighbor_parity = 1 - bb.cell_parity(e_row, e_col)

    def neighbor_in(word):
        """Four bools: is neighbour d in `word` (a word of the neighbours' colour)?"""
        return [ok & (((word >> bit) & 1) != 0) for ok, bit in zip(on_board, bits)]

    # Rule 1: shortest path around everything.
    player_reachable = ~bb.contains(walls, p_row, p_col)
    touching = _first_layer_touching(p_row, p_col, player_reachable, ~(walls | occupied),
                                     bb.neighbors(bb.single(e_row, e_col)))
    rule1_dir = _first_direction(neighbor_in(touching))

    # Rule 2: shortest path through other pieces; taken only if its first cell is free.
    e_bit = bb.cell_mask(e_row, e_col)
    plain = [(board.word(1 - neighbor_parity) & e_bit) != 0 for board in rule2]
    glitch = [p_row > e_row, p_row < e_row, p_col < e_col, p_col > e_col]
    rule2_dir = _first_direction([jnp.where(is_glitch, g, h) for g, h in zip(glitch, plain)])
    # Rule 2's first cell is never a wall, so "free" is "not a wall and not occupied".
    blocked = neighbor_in((walls | occupied).word(neighbor_parity))
    rule2_ok = _pick(rule2_dir, [~x for x in blocked] + [jnp.asarray(False)])

    # Rule 3: greedy fallback, earliest direction on ties.
    rule3_dir, best = jnp.int32(4), jnp.int32(_FAR)
    for direction, ((r, c), ok, taken) in enumerate(zip(neighbors, on_board, blocked)):
        distance = jnp.where(ok & ~taken, jnp.abs(r - p_row) + jnp.abs(c - p_col), _FAR)
        better = distance < best
        rule3_dir = jnp.where(better, direction, rule3_dir)
        best = jnp.where(better, distance, best)

    direction = jnp.where(at_player, rule3_dir,
                          jnp.where(rule1_dir < 4, rule1_dir,
                                    jnp.where(rule2_ok, rule2_dir, rule3_dir)))
    rows = [r for r, _ in neighbors] + [e_row]
    cols = [c for _, c in neighbors] + [e_col]
    return _pick(direction, rows), _pick(direction, cols)


def path_distance(state, start_row, start_col):
    """§14.2: BFS distance from (start_row, start_col) to exitPosition; 0 if unreachable.

    Blocks cannot be entered except the goal cell itself; the start is expanded whatever it
    holds; enemies and transmissions are ignored.
    """
    return _distance(blocks(state.core.cells), state.exit_row, state.exit_col, start_row,
                     start_col)


def path_distances(searches):
    """`path_distance(state, start_row, start_col)` for each triple of `searches`, as int32[n]:
    one search over n boards, so its loop is compiled and launched once, not n times."""
    inputs = [(blocks(state.core.cells), state.exit_row, state.exit_col, row, col)
              for state, row, col in searches]
    return jax.vmap(_distance)(*jax.tree.map(lambda *xs: jnp.stack(xs), *inputs))


def _distance(block_board: bb.Board, goal_row, goal_col, start_row, start_col):
    passable = ~block_board | bb.single(goal_row, goal_col)
    parity = bb.cell_parity(start_row, start_col)
    start = bb.cell_mask(start_row, start_col)
    goal = bb.cell_mask(goal_row, goal_col)
    goal_is_same = bb.cell_parity(goal_row, goal_col) == parity
    goal_same = jnp.where(goal_is_same, goal, jnp.uint32(0))
    goal_other = jnp.where(goal_is_same, jnp.uint32(0), goal)

    def two_layers(i, carry):
        frontier, unvisited_same, unvisited_other, distance = carry
        frontier = bb.spread(frontier, parity) & unvisited_other
        unvisited_other = unvisited_other ^ frontier
        distance = jnp.where((distance < 0) & ((frontier & goal_other) != 0), 2 * i + 1, distance)
        frontier = bb.spread(frontier, 1 - parity) & unvisited_same
        unvisited_same = unvisited_same ^ frontier
        distance = jnp.where((distance < 0) & ((frontier & goal_same) != 0), 2 * i + 2, distance)
        return frontier, unvisited_same, unvisited_other, distance

    at_goal = (start_row == goal_row) & (start_col == goal_col)
    carry = (start, passable.word(parity) & ~start, passable.word(1 - parity),
             jnp.where(at_goal, 0, -1))
    # Unrolled (not a fori_loop): inside training the search then fuses into one kernel with
    # its reader instead of a loop of small kernels launched at every step.
    for i in range((MAX_PATH_LENGTH + 1) // 2):
        carry = two_layers(i, carry)
    return jnp.maximum(carry[3], 0).astype(jnp.int32)
