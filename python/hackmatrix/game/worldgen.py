"""Stage generation (rules §12.2), stage completion (§12.1) and the new game (§13.1).

Block placement (§12.2 step 5) makes up to 100 attempts of N random blocks and keeps the first
accepted one. Acceptance depends only on the block cells, never on the blocks' contents, so we
run BLOCK_ATTEMPTS attempts in parallel (fixed shapes), take the first accepted one, and draw the
contents afterwards for its cells only. Conditional on acceptance this is exactly the rules'
distribution: the first accepted of i.i.d. attempts is uniform over the accepted layouts.

The only change is how often every attempt fails (the stage then has no blocks, as in the
rules). Measured acceptance per attempt on an empty stage-1 board (20 000 layouts per N):
N = 5: 0.85, 6: 0.75, 7: 0.63, 8: 0.48, 9: 0.32, 10: 0.19, 11: 0.088 (large N often cut the board
in two). All-fail probability (1 - a)^attempts:

    attempts      N = 11    N = 10    N = 9     N <= 8    share of all stages (N uniform)
    100 (rules)   1e-4      1e-9      < 1e-9    < 1e-9    0.0015%
    32 (ours)     0.053     0.0014    4e-6      < 1e-9    0.8%
    16            0.23      0.037     0.002     3e-5      3.8%

Each attempt costs ~0.028 ms per 1024 envs (11 picks of a random set bit plus a 24-layer
flood fill), so BLOCK_ATTEMPTS trades speed for fidelity.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import bitboard as bb
from hackmatrix.game import constants as C
from hackmatrix.game import enemy_turn
from hackmatrix.game import spawning
from hackmatrix.game import state as S

BLOCK_ATTEMPTS = 32
MIN_BLOCKS, MAX_BLOCKS = 5, 11
QUESTION_CHANCE = 0.10
STARTING_BONUS_CREDITS, STARTING_BONUS_ENERGY = 10, 11

_CORNER_BOARD = bb.Board(np.uint32(1 | (1 << 22)), np.uint32((1 << 2) | (1 << 20)))
_FLOOD_LAYERS = 24  # >= 23, the longest possible shortest path (see pathfinding.py)
_U24 = 1 << 24


def _chance(word, probability):
    """bool with P = probability (to 2**-24) from the high 24 bits of a random word."""
    return (word >> 8) < jnp.uint32(round(probability * _U24))


def _corner_cells():
    return [(int(r), int(c)) for r, c in C.CORNERS]


def _attempt_layouts(words, available: bb.Board, count):
    """BLOCK_ATTEMPTS independent layouts of `count` blocks on uniformly random distinct cells
    of `available` (Boards with a leading [BLOCK_ATTEMPTS] axis). `words`: uint32[MAX_BLOCKS, M].
    """
    attempts = words.shape[-1]
    pool = bb.Board(jnp.broadcast_to(available.even, (attempts,)),
                    jnp.broadcast_to(available.odd, (attempts,)))

    def pick(i, carry):
        # Pipelined (see spawning.place_transmissions): the chosen cell is carried to the next
        # iteration so that XLA computes the bit selection once.
        pool, layout, chosen = carry
        pool, layout = pool & ~chosen, layout | chosen
        pool_size = bb.popcount(pool)
        chosen = bb.kth_set_cell(pool, bb.uniform_index(words[i], pool_size))
        return pool, layout, bb.where((i < count) & (pool_size > 0), chosen, nothing)

    nothing = bb.Board(jnp.zeros((attempts,), jnp.uint32), jnp.zeros((attempts,), jnp.uint32))
    pool, layout, chosen = jax.lax.fori_loop(0, MAX_BLOCKS, pick, (pool, nothing, nothing))
    return layout | chosen


def _accepted(layout: bb.Board, exit_row, exit_col):
    """§12.2 acceptance: every block has a free neighbour, and the free cells are connected
    when the exit may be entered but not passed through (search from (0,0), a corner, hence
    never a block; if it is the exit it is expanded like any other cell)."""
    free = ~layout
    every_block_open = bb.is_empty(layout & ~bb.neighbors(free))
    exit_cell = bb.single(exit_row, exit_col)
    frontier = jnp.full(layout.even.shape, 1, jnp.uint32)  # (0,0): even word, bit 0
    unvisited_even, unvisited_odd = free.even & ~frontier, free.odd

    def two_layers(_, carry):
        frontier, unvisited_even, unvisited_odd = carry
        frontier = bb.spread(frontier, 0) & unvisited_odd
        unvisited_odd = unvisited_odd ^ frontier
        frontier = bb.spread(frontier & ~exit_cell.odd, 1) & unvisited_even
        unvisited_even = unvisited_even ^ frontier
        return frontier & ~exit_cell.even, unvisited_even, unvisited_odd

    carry = jax.lax.fori_loop(0, _FLOOD_LAYERS // 2, two_layers,
                              (frontier, unvisited_even, unvisited_odd))
    return every_block_open & ((carry[1] | carry[2]) == 0)


def _generate_blocks(key, core: S.Core, exit_row, exit_col):
    """§12.2 step 5: (content, points, program, spawn_count) as int32[6,6] arrays, plus
    uint32[6,6] random words for the resources of step 6."""
    words = spawning.random_words(key, 1 + MAX_BLOCKS * BLOCK_ATTEMPTS + 3 * C.NUM_CELLS
                                  + C.NUM_PROGRAMS)
    count = MIN_BLOCKS + bb.uniform_index(words[0], jnp.int32(MAX_BLOCKS - MIN_BLOCKS + 1))
    layout_words = words[1:1 + MAX_BLOCKS * BLOCK_ATTEMPTS].reshape(MAX_BLOCKS, BLOCK_ATTEMPTS)
    cell_words = words[1 + MAX_BLOCKS * BLOCK_ATTEMPTS:-C.NUM_PROGRAMS].reshape(3, C.NUM_CELLS)
    program_words = words[-C.NUM_PROGRAMS:]

    enemies, transmissions = core.enemies, core.transmissions
    occupied = (bb.from_cells(enemies.active, enemies.row, enemies.col)
                | bb.from_cells(transmissions.active, transmissions.row, transmissions.col))
    available = ~(occupied | _CORNER_BOARD)
    layouts = _attempt_layouts(layout_words, available, count)
    accepted = _accepted(layouts, exit_row, exit_col)
    blocks = bb.empty()  # if every attempt fails
    for m in range(BLOCK_ATTEMPTS - 1, -1, -1):  # the first accepted attempt wins
        blocks = bb.where(accepted[m], bb.Board(layouts.even[m], layouts.odd[m]), blocks)
    is_block = bb.to_bool(bb.materialize(blocks)).reshape(C.NUM_CELLS)

    # Contents, drawn per block cell; the "one by one" order of the rules only matters for
    # programs never repeating: the j-th program block (row-major) gets the program ranked j
    # by random keys, i.e. a uniformly random injective assignment.
    question = _chance(cell_words[0], QUESTION_CHANCE)
    has_program = is_block & ((cell_words[0] & 1) == 1)
    points = 1 + bb.uniform_index(cell_words[1], jnp.int32(9))
    program_rank = spawning.random_ranks(program_words)
    program_slot = spawning.exclusive_prefix_count(has_program)
    # The programs in rank order (only the first MAX_BLOCKS ranks can be used) and their costs.
    ranked_program = jnp.zeros((MAX_BLOCKS,), jnp.int32)
    ranked_cost = jnp.zeros((MAX_BLOCKS,), jnp.int32)
    for p in range(C.NUM_PROGRAMS):
        at_rank = jnp.arange(MAX_BLOCKS) == program_rank[p]
        ranked_program = jnp.where(at_rank, p, ranked_program)
        ranked_cost = jnp.where(at_rank, int(C.PROGRAM_SPAWN_COST[p]), ranked_cost)
    program = jnp.full((C.NUM_CELLS,), C.NO_PROGRAM, jnp.int32)
    spawn_cost = jnp.zeros((C.NUM_CELLS,), jnp.int32)
    for j in range(MAX_BLOCKS):
        mine = has_program & (program_slot == j)
        program = jnp.where(mine, ranked_program[j], program)
        spawn_cost = jnp.where(mine, ranked_cost[j], spawn_cost)

    content = jnp.where(question, C.QUESTION_BLOCK,
                        jnp.where(has_program, C.PROGRAM_BLOCK, C.DATA_BLOCK))
    content = jnp.where(is_block, content, C.EMPTY)
    points = jnp.where(is_block & ~has_program, points, 0)
    spawn_count = jnp.where(has_program, spawn_cost, points)
    shape = (C.BOARD_SIZE, C.BOARD_SIZE)
    return (content.reshape(shape), points.reshape(shape), program.reshape(shape),
            spawn_count.reshape(shape), cell_words[2].reshape(shape))


def generate_stage(key, state: S.GameState) -> S.GameState:
    """§12.2 for `state.stage` and `state.scheduled_interval` (already set): carries the player,
    enemies, transmissions, pending siphon transmissions and the history; regenerates the rest.

    Decision (rules silent): if fewer free non-corner cells than N exist, all of them are used.
    """
    exit_key, block_key, transmission_key = jax.random.split(key, 3)
    core = state.core
    p_row, p_col = core.player_row, core.player_col

    # Exit: uniform among the corners other than the player's cell; data siphons on the rest.
    corners = _corner_cells()
    not_player = [~((p_row == r) & (p_col == c)) for r, c in corners]
    choices = sum(x.astype(jnp.int32) for x in not_player)
    k = bb.uniform_index(spawning.random_words(exit_key, 1)[0], choices)
    exit_row, exit_col, seen = jnp.int32(0), jnp.int32(0), jnp.int32(0)
    is_exit = []
    for (r, c), allowed in zip(corners, not_player):
        here = allowed & (seen == k)
        exit_row, exit_col = jnp.where(here, r, exit_row), jnp.where(here, c, exit_col)
        is_exit.append(here)
        seen = seen + allowed.astype(jnp.int32)

    content, points, program, spawn_count, resource_words = _generate_blocks(
        block_key, core, exit_row, exit_col)
    for (r, c), allowed, here in zip(corners, not_player, is_exit):
        corner_content = jnp.where(here, C.EXIT, jnp.where(allowed, C.DATA_SIPHON, C.EMPTY))
        content = content.at[r, c].set(corner_content)

    # Resources on empty and data-siphon cells: amount 1/2/3 at 0.45/0.45/0.10, kind 50/50.
    gets_resource = (content == C.EMPTY) | (content == C.DATA_SIPHON)
    amount = jnp.where(_chance(resource_words, 0.45), 1,
                       jnp.where(_chance(resource_words, 0.90), 2, 3))
    is_credits = (resource_words & 1) == 1
    cells = S.Cells(
        content=content, points=points, program=program, spawn_count=spawn_count,
        credits=jnp.where(gets_resource & is_credits, amount, 0),
        energy=jnp.where(gets_resource & ~is_credits, amount, 0),
        siphoned=jnp.zeros(content.shape, jnp.bool_),
        siphon_center=jnp.zeros(content.shape, jnp.bool_))

    core = core.replace(turn=jnp.int32(0), cells=cells, show_activated=jnp.asarray(False),
                        scheduled_tasks_disabled=jnp.asarray(False), atk_plus_uses=jnp.int32(0))
    state = state.replace(core=core, exit_row=exit_row, exit_col=exit_col,
                          step_active=jnp.asarray(False),
                          next_scheduled_turn=state.scheduled_interval)
    return spawning.place_transmissions(transmission_key, state, state.stage, False, False,
                                        max_count=C.MAX_STAGE)


def complete_stage(key, state: S.GameState, reached):
    """§12.1 when `reached`: hp + 1 (max 3); stage < 8 → next stage generated; stage 8 → won.

    Returns (state, won). When not `reached` the state is returned unchanged.
    """
    advances = reached & (state.stage < C.MAX_STAGE)
    won = reached & (state.stage >= C.MAX_STAGE)
    core = state.core.replace(hp=jnp.where(reached, jnp.minimum(state.core.hp + 1, 3),
                                           state.core.hp))
    healed = state.replace(core=core)
    next_stage = healed.replace(stage=healed.stage + 1, scheduled_interval=12 - healed.stage)
    generated = generate_stage(key, next_stage)
    return enemy_turn.select_state(advances, generated, healed), won


def starting_state(key) -> S.GameState:
    """§13.1 before the stage is generated: player on a random corner, one random bonus.

    `new_game(key)` is `generate_stage` applied to this; an auto-resetting env can select
    between this and a completed stage's state first and generate once for both.
    """
    corner_word, bonus_word = spawning.random_words(key, 2)
    corner = (corner_word & 3).astype(jnp.int32)
    bonus = bb.uniform_index(bonus_word, jnp.int32(3))
    state = S.empty_state()
    core = state.core.replace(
        player_row=jnp.asarray(C.CORNERS[:, 0])[corner],
        player_col=jnp.asarray(C.CORNERS[:, 1])[corner],
        credits=jnp.where(bonus == 0, STARTING_BONUS_CREDITS, 0),
        energy=jnp.where(bonus == 1, STARTING_BONUS_ENERGY, 0),
        data_siphons=jnp.where(bonus == 2, 1, 0))
    return state.replace(core=core)


def new_game(key) -> S.GameState:
    """§13.1: player on a random corner, one random starting bonus, stage 1 generated."""
    setup_key, stage_key = jax.random.split(key)
    return generate_stage(stage_key, starting_state(setup_key))
