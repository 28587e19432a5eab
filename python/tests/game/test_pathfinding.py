"""Bitboards, enemy movement (§8.1) and path distance (§14.2)."""

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import bitboard as bb
from hackmatrix.game import pathfinding as pf
from hackmatrix.game import scenario

DIRECTIONS = [(1, 0), (-1, 0), (0, -1), (0, 1)]


def _grid(cells):
    grid = np.zeros((6, 6), bool)
    for r, c in cells:
        grid[r, c] = True
    return grid


def _move(e_row, e_col, is_glitch, p_row, p_col, blocks, others):
    block_board = bb.from_bool(blocks)
    # The enemy loop passes O including the mover's own cell; do the same here.
    occupied = bb.from_bool(others) | bb.single(e_row, e_col)
    rule2 = pf.rule2_first_steps(p_row, p_col, block_board)
    return pf.enemy_move(e_row, e_col, is_glitch, p_row, p_col, block_board, occupied, rule2)


_move_jit = jax.jit(_move)
_move_batch = jax.jit(jax.vmap(_move))


def move(enemy, player, blocks=(), others=(), glitch=False):
    row, col = _move_jit(enemy[0], enemy[1], glitch, player[0], player[1],
                         jnp.asarray(_grid(blocks)), jnp.asarray(_grid(others)))
    return int(row), int(col)


# ------------------------------------------------------------------------------------------
# Reference implementation of §8.1 and §14.2, written straight from the rules.

def _bfs(source, passable):
    distance = {source: 0}
    queue = deque([source])
    while queue:
        cell = queue.popleft()
        for dr, dc in DIRECTIONS:
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt in passable and nxt not in distance:
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return distance


def reference_move(e, p, glitch, blocks, others):
    on_board = lambda x: 0 <= x[0] < 6 and 0 <= x[1] < 6
    neighbours = [(e[0] + dr, e[1] + dc) for dr, dc in DIRECTIONS]

    def first_step(use_others):
        if e == p or (not glitch and p in blocks):
            return None
        passable = {(r, c) for r in range(6) for c in range(6)
                    if (glitch or (r, c) not in blocks) and not (use_others and (r, c) in others)}
        distance = _bfs(p, passable | {p})
        options = [n for n in neighbours if n in distance and (n in passable or n == p)]
        if not options:
            return None
        best = min(distance[n] for n in options)
        return next(n for n in neighbours if n in options and distance[n] == best)

    step = first_step(True)
    if step is not None:
        return step
    step = first_step(False)
    if step is not None and step not in others:
        return step
    best = None
    for n in neighbours:
        if on_board(n) and (glitch or n not in blocks) and n not in others:
            d = abs(n[0] - p[0]) + abs(n[1] - p[1])
            if best is None or d < best[0]:
                best = (d, n)
    return best[1] if best else e


def reference_distance(a, b, blocks):
    if a == b:
        return 0
    passable = {(r, c) for r in range(6) for c in range(6) if (r, c) not in blocks} | {b}
    return _bfs(a, passable).get(b, 0)


# ------------------------------------------------------------------------------------------
# Bitboards.

def test_bitboard_pack_shift_and_popcount_match_numpy():
    rng = np.random.default_rng(0)
    grids = rng.random((64, 6, 6)) < 0.4

    @jax.jit
    @jax.vmap
    def ops(grid):
        board = bb.from_bool(grid)
        shifted = jnp.stack([bb.to_bool(bb.shift(board, d)) for d in range(4)])
        return (bb.to_bool(board), shifted, bb.to_bool(bb.neighbors(board)), bb.popcount(board),
                bb.to_bool(~board))

    unpacked, shifted, neighbours, counts, inverted = map(np.asarray, ops(grids))
    for g, grid in enumerate(grids):
        assert (unpacked[g] == grid).all()
        assert (inverted[g] == ~grid).all()
        assert counts[g] == grid.sum()
        union = np.zeros((6, 6), bool)
        for d, (dr, dc) in enumerate(DIRECTIONS):
            expected = np.zeros((6, 6), bool)
            for r, c in zip(*np.nonzero(grid)):
                if 0 <= r + dr < 6 and 0 <= c + dc < 6:
                    expected[r + dr, c + dc] = True
            assert (shifted[g, d] == expected).all()
            union |= expected
        assert (neighbours[g] == union).all()


# ------------------------------------------------------------------------------------------
# Enemy movement (§8.1).

def test_rules_examples_on_an_empty_board():
    assert move((2, 2), (0, 0)) == (1, 2)   # down before left
    assert move((5, 5), (3, 3)) == (4, 5)   # down before left
    assert move((4, 0), (0, 0)) == (3, 0)


@pytest.mark.parametrize("enemy, player, expected", [
    ((1, 1), (3, 3), (2, 1)),   # up and right shorten: up first
    ((3, 3), (1, 1), (2, 3)),   # down and left: down first
    ((2, 3), (2, 0), (2, 2)),   # only left
    ((2, 0), (2, 3), (2, 1)),   # only right
    ((4, 1), (2, 3), (3, 1)),   # down and right: down first
])
def test_tie_break_order_up_down_left_right(enemy, player, expected):
    assert move(enemy, player) == expected


def test_rule1_goes_around_blocks():
    # A wall on row 1 except at column 5: the only way down is round the right end.
    wall = [(1, c) for c in range(5)]
    assert move((2, 0), (0, 0), blocks=wall) == (2, 1)
    assert move((2, 4), (0, 0), blocks=wall) == (2, 5)


def test_rule1_goes_around_other_pieces():
    # Enemy (2,2), player (0,2); another enemy on (1,2): the shortest free path has length 4,
    # via (2,1) (left) or (2,3) (right); left comes first.
    assert move((2, 2), (0, 2), others=[(1, 2)]) == (2, 1)


def test_rule2_through_pieces_then_rule3_when_its_first_cell_is_occupied():
    # Corridor: blocks on columns 1 and 3 of rows 0-4 leave column 2 as the only way down.
    corridor = [(r, c) for r in range(5) for c in (1, 3)]
    # The piece at (1,2) cuts every free path: rule 2's first step (3,2) is free → take it.
    assert move((4, 2), (0, 2), blocks=corridor, others=[(1, 2)]) == (3, 2)
    # Now rule 2's first step (3,2) itself is occupied → rule 3: greedy over free neighbours;
    # (5,2) is the only one (left/right are blocks), so the enemy moves away.
    assert move((4, 2), (0, 2), blocks=corridor, others=[(3, 2)]) == (5, 2)


def test_rule3_when_the_player_is_walled_in():
    # Player (0,0) enclosed by blocks (1,0) and (0,1): no path at all, even through pieces.
    walls = [(1, 0), (0, 1)]
    assert move((2, 2), (0, 0), blocks=walls) == (1, 2)    # down: Manhattan 3 (left also 3)
    assert move((1, 1), (0, 0), blocks=walls) == (2, 1)    # every free neighbour is farther: up
    # No qualifying neighbour at all → stays.
    boxed = [(0, 3), (2, 3), (1, 2), (1, 4)]
    assert move((1, 3), (5, 5), blocks=boxed) == (1, 3)


def test_glitch_moves_through_blocks_others_do_not():
    wall = [(1, c) for c in range(5)]
    assert move((2, 0), (0, 0), blocks=wall, glitch=True) == (1, 0)
    assert move((2, 0), (0, 0), blocks=wall) == (2, 1)


def test_player_on_a_block():
    # Non-glitch: p is not passable → rules 1 and 2 fail → greedy rule 3 (Manhattan).
    assert move((3, 0), (0, 0), blocks=[(0, 0)]) == (2, 0)
    # Greedy ties: up (4,0) and right (3,1) are both at Manhattan 4 (down is a block); the
    # earliest direction wins, even though it moves away.
    blocks = [(0, 0), (1, 0), (2, 0)]
    assert move((3, 0), (0, 0), blocks=blocks) == (4, 0)
    # A glitch ignores blocks, so the player on a block is an ordinary target.
    assert move((3, 0), (0, 0), blocks=blocks, glitch=True) == (2, 0)


def test_enemy_on_the_players_cell_takes_the_first_free_neighbour():
    assert move((2, 2), (2, 2)) == (3, 2)
    assert move((2, 2), (2, 2), others=[(3, 2)]) == (1, 2)
    assert move((5, 5), (5, 5), blocks=[(4, 5)]) == (5, 4)


def assert_moves_match_the_reference(cases):
    """`cases`: (enemy, player, is_glitch, blocks bool[6, 6], others bool[6, 6]) tuples, moved
    in one batch (400 cases: one compile for every caller)."""
    arrays = [jnp.asarray(np.array(x)) for x in zip(*[
        (e[0], e[1], g, p[0], p[1], b, o) for e, p, g, b, o in cases])]
    rows, cols = map(np.asarray, _move_batch(*arrays))
    for (e, p, glitch, blocks, others), row, col in zip(cases, rows, cols):
        block_set = set(zip(*np.nonzero(blocks)))
        other_set = set(zip(*np.nonzero(others)))
        assert (row, col) == reference_move(e, p, glitch, block_set, other_set), (e, p, glitch)


def test_moves_match_the_reference_on_random_boards():
    rng = np.random.default_rng(7)
    cases = []
    while len(cases) < 400:
        density = rng.uniform(0.05, 0.5)
        blocks = rng.random((6, 6)) < density * 0.7
        others = rng.random((6, 6)) < density * 0.5
        e, p = tuple(rng.integers(0, 6, 2)), tuple(rng.integers(0, 6, 2))
        if abs(e[0] - p[0]) + abs(e[1] - p[1]) == 1:
            continue  # adjacent enemies attack instead
        others[e] = False
        cases.append((e, p, bool(rng.random() < 0.3), blocks, others))
    assert_moves_match_the_reference(cases)


# The longest induced path of the 6x6 grid (23 steps, found by exhaustive search): with every
# other cell a block it is a corridor, and no shortest path on the board is longer.
LONGEST = [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 5), (2, 5), (2, 4), (3, 4),
           (3, 3), (3, 2), (2, 2), (2, 1), (2, 0), (3, 0), (4, 0), (4, 1), (5, 1), (5, 2),
           (5, 3), (5, 4), (5, 5), (4, 5)]
CORRIDOR_WALLS = [(r, c) for r in range(6) for c in range(6) if (r, c) not in LONGEST]


@pytest.mark.parametrize("player_end", [0, 23])
def test_enemy_follows_the_longest_corridor_from_any_distance(player_end):
    # Rule 1 must see 23 steps deep: from every cell of the corridor the enemy steps one cell
    # along it towards the player (distance 1 is adjacent: it attacks instead of moving).
    towards = -1 if player_end == 0 else 1
    player = LONGEST[player_end]
    for k in range(24):
        if abs(k - player_end) >= 2:
            assert move(LONGEST[k], player, blocks=CORRIDOR_WALLS) == LONGEST[k + towards], k


def test_rules_two_and_three_deep_in_the_longest_corridor():
    player = LONGEST[0]
    # A piece in the middle cuts the only free path: rule 2 (22 steps deep) still finds the
    # corridor, and its first cell (5,4) is free. (Rule 3 would pick (4,5): down before left.)
    assert move(LONGEST[22], player, blocks=CORRIDOR_WALLS, others=[LONGEST[12]]) == LONGEST[21]
    # A piece on rule 2's first cell: rule 3, and no neighbour qualifies, so the enemy stays.
    far = LONGEST[23]
    assert move(far, player, blocks=CORRIDOR_WALLS, others=[LONGEST[22]]) == far


def test_rule1_takes_the_long_way_round_pieces_at_any_depth():
    # The longest corridor with its wall (3,5) opened: (2,5) = LONGEST[7] and (4,5) =
    # LONGEST[23] now also meet through (3,5), closing a loop. Rule 1 must find first steps
    # up to 22 deep even when a piece makes the way round long (a rule-2 step or the greedy
    # rule 3 would go elsewhere).
    loop_walls = [cell for cell in CORRIDOR_WALLS if cell != (3, 5)]
    player = LONGEST[0]
    # A piece on (3,4) = LONGEST[9] cuts the short way from (3,2) = LONGEST[11]: the way round
    # the loop starts down, its first step (2,2) 20 steps from the player (through the piece,
    # the way right is 10 steps shorter).
    assert move(LONGEST[11], player, blocks=loop_walls, others=[LONGEST[9]]) == LONGEST[12]
    # A piece on (3,5) itself: from (5,5) = LONGEST[22] the free way goes left along the
    # corridor, its first step (5,4) 21 steps from the player; down (4,5) leads only to the
    # piece (through it, the way down is 12 steps shorter).
    assert move(LONGEST[22], player, blocks=loop_walls, others=[(3, 5)]) == LONGEST[21]


def _induced_walk(rng, min_length=14):
    """A random self-avoiding walk that never touches its own earlier cells sideways (an
    induced path), at least `min_length` cells long."""
    while True:
        path, banned = [tuple(int(x) for x in rng.integers(0, 6, 2))], set()
        while True:
            r, c = path[-1]
            neighbours = [(r + dr, c + dc) for dr, dc in DIRECTIONS]
            options = [n for n in neighbours if 0 <= n[0] < 6 and 0 <= n[1] < 6
                       and n not in path and n not in banned]
            if not options:
                break
            banned |= set(neighbours)
            path.append(options[int(rng.integers(len(options)))])
        if len(path) >= min_length:
            return path


def test_moves_match_the_reference_on_long_maze_corridors():
    # Random boards have short paths; these are corridors (induced walks of 14+ cells, most
    # other cells blocked; path lengths up to 19 here) with a few pieces inside and sometimes
    # the player on a block, so rules 1-3 run deep. 400 cases: the batch shape of the test
    # above, so no new compile.
    rng = np.random.default_rng(5)
    cases = []
    while len(cases) < 400:
        path = _induced_walk(rng)
        blocks = (rng.random((6, 6)) < 0.9) & ~_grid(path)
        p = path[0] if rng.random() < 0.8 else path[int(rng.integers(len(path)))]
        e = path[int(rng.integers(len(path)))]
        if abs(e[0] - p[0]) + abs(e[1] - p[1]) == 1:
            continue
        others = _grid([x for x in path if x != e and rng.random() < 0.06])
        if rng.random() < 0.05:
            blocks[p] = True
        cases.append((e, p, bool(rng.random() < 0.15), blocks, others))
    assert_moves_match_the_reference(cases)


# ------------------------------------------------------------------------------------------
# Path distance (§14.2).

def _state(blocks, exit_position=(5, 5)):
    state = scenario.from_dict({
        "player": {"row": 0, "col": 0},
        "blocks": [{"row": r, "col": c, "type": "data", "points": 1} for r, c in blocks]})
    return state.replace(exit_row=jnp.int32(exit_position[0]), exit_col=jnp.int32(exit_position[1]))


_distance = jax.jit(pf.path_distance)


def test_path_distance_examples():
    assert int(_distance(_state([]), 0, 0)) == 10
    assert int(_distance(_state([]), 5, 5)) == 0                   # a = b
    assert int(_distance(_state([(4, 5), (5, 4)]), 0, 0)) == 0     # exit walled in
    # The goal may hold a block; other blocks cannot be entered; the start is always expanded.
    assert int(_distance(_state([(5, 5)]), 5, 3)) == 2
    assert int(_distance(_state([(0, 0), (0, 1)]), 0, 0)) == 10


def test_path_distance_serpentine_reaches_twenty():
    walls = [(1, c) for c in range(5)] + [(3, c) for c in range(1, 6)]
    assert int(_distance(_state(walls), 0, 0)) == 20


def test_path_distance_along_the_longest_corridor_is_23():
    assert int(_distance(_state(CORRIDOR_WALLS, exit_position=LONGEST[23]), 0, 0)) == 23
    assert int(_distance(_state(CORRIDOR_WALLS, exit_position=LONGEST[0]), 4, 5)) == 23


def test_path_distance_matches_the_reference_on_random_boards():
    rng = np.random.default_rng(3)
    grids = rng.random((200, 6, 6)) < rng.uniform(0, 0.55, (200, 1, 1))
    exits = rng.integers(0, 6, (200, 2))
    starts = rng.integers(0, 6, (200, 2))

    base = _state([])

    @jax.jit
    @jax.vmap
    def distances(grid, exit_position, start):
        content = jnp.where(grid, 1, 0).astype(jnp.int32)
        state = base.replace(exit_row=exit_position[0], exit_col=exit_position[1],
                             core=base.core.replace(
                                 cells=base.core.cells.replace(content=content)))
        return pf.path_distance(state, start[0], start[1])

    got = np.asarray(distances(jnp.asarray(grids), jnp.asarray(exits), jnp.asarray(starts)))
    for g in range(200):
        blocks = set(zip(*np.nonzero(grids[g])))
        assert got[g] == reference_distance(tuple(starts[g]), tuple(exits[g]), blocks)
