"""Stage generation (rules §12.2), stage completion (§12.1) and the new game (§13.1).

Block placement (§12.2 step 5) makes up to 100 attempts of N random blocks and keeps the first
accepted one. Acceptance depends only on the block cells, never on the blocks' contents, so we
run all BLOCK_ATTEMPTS = 100 attempts in parallel as position-only layouts (fixed shapes), take
the first accepted one, and draw the contents afterwards for its cells only. This is exactly the
rules' distribution: the first accepted of i.i.d. attempts is uniform over the accepted layouts,
and a stage gets no blocks exactly when all 100 attempts fail, as in the rules.

An attempt is one uint32 over the 32 non-corner cells (Floyd's sampling plus a bit deposit, see
`_attempt_layouts`) and a 24-layer single-colour-word flood fill: one kernel for all layouts,
one for all acceptance tests.

Measured acceptance per attempt on an empty stage-1 board (32 768 layouts per N):
N = 5: 0.84, 6: 0.75, 7: 0.62, 8: 0.47, 9: 0.31, 10: 0.18, 11: 0.085 (large N often cut the board
in two). All-fail probability (1 - a)^100: 1.4e-4 for N = 11, 2.5e-9 for N = 10, below 1e-16
otherwise, i.e. 2e-5 of all stages (N uniform in 5..11); measured: 5 of 327 680 new games had
no blocks (1.5e-5).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import bitboard as bb
from hackmatrix.game import constants as C
from hackmatrix.game import fusion
from hackmatrix.game import spawning
from hackmatrix.game import state as S

BLOCK_ATTEMPTS = 100
MIN_BLOCKS, MAX_BLOCKS = 5, 11
QUESTION_CHANCE = 0.10
STARTING_BONUS_CREDITS, STARTING_BONUS_ENERGY = 10, 11

_CORNER_BOARD = bb.Board(np.uint32(1 | (1 << 22)), np.uint32((1 << 2) | (1 << 20)))
_CELL_IS = np.eye(C.NUM_CELLS, dtype=bool).reshape(C.BOARD_SIZE, C.BOARD_SIZE, C.BOARD_SIZE,
                                                   C.BOARD_SIZE)  # [r, c]: one-hot [6, 6] mask
_FLOOD_LAYERS = 24  # >= 23, the longest possible shortest path (see pathfinding.py)
_U24 = 1 << 24


def _chance(word, probability):
    """bool with P = probability (to 2**-24) from the high 24 bits of a random word."""
    return (word >> 8) < jnp.uint32(round(probability * _U24))


def _corner_cells():
    return [(int(r), int(c)) for r, c in C.CORNERS]


# Layouts are drawn in "slot space": the 32 non-corner cells as bits of one uint32, the 16
# even-colour cells (in even-word bit order) in bits 0-15 and the 16 odd ones in bits 16-31.
_NON_CORNER = bb.Board(np.uint32(bb.WORD_MASK) & ~_CORNER_BOARD.even,
                       np.uint32(bb.WORD_MASK) & ~_CORNER_BOARD.odd)


def _bit_runs(mask: int):
    """(first bit, length) of each maximal run of set bits of a constant mask, low to high."""
    runs, bit = [], 0
    while mask >> bit:
        if (mask >> bit) & 1:
            length = 0
            while (mask >> (bit + length)) & 1:
                length += 1
            runs.append((bit, length))
            bit += length
        else:
            bit += 1
    return runs


def _to_slots(board: bb.Board):
    """The non-corner cells of a board in slot space (a constant bit gather, run by run)."""
    slots, slot = jnp.uint32(0), 0
    for word, colour_mask in ((board.even, int(_NON_CORNER.even)),
                              (board.odd, int(_NON_CORNER.odd))):
        for first, length in _bit_runs(colour_mask):
            slots = slots | (((word >> first) & ((1 << length) - 1)) << slot)
            slot += length
    return slots


def _from_slots(slots) -> bb.Board:
    """Inverse of `_to_slots`."""
    words, slot = [], 0
    for colour_mask in (int(_NON_CORNER.even), int(_NON_CORNER.odd)):
        word = jnp.zeros_like(slots)
        for first, length in _bit_runs(colour_mask):
            word = word | (((slots >> slot) & ((1 << length) - 1)) << first)
            slot += length
        words.append(word)
    return bb.Board(*words)


def _expand_masks(mask):
    """The five move masks of Hacker's Delight's `expand` (bit deposit) for a traced mask."""
    moves, move_from = [], ~mask << 1
    for i in range(5):
        prefix = move_from ^ (move_from << 1)  # parallel suffix: bits with an odd count of 0s below
        for shift in (2, 4, 8, 16):
            prefix = prefix ^ (prefix << shift)
        move = prefix & mask
        moves.append(move)
        mask = (mask ^ move) | (move >> (1 << i))
        move_from = move_from & ~prefix
    return moves


def _expand(x, mask, moves):
    """Deposit the low bits of x, in order, onto the set bits of `mask` (pdep)."""
    for i in range(4, -1, -1):
        x = (x & ~moves[i]) | ((x << (1 << i)) & moves[i])
    return x & mask


def _attempt_layouts(words, available_slots, count):
    """BLOCK_ATTEMPTS independent layouts (uint32[BLOCK_ATTEMPTS] in slot space) of
    min(count, |available|) blocks on uniformly random distinct cells of `available_slots`.
    `words`: uint32[MAX_BLOCKS, BLOCK_ATTEMPTS].

    Floyd's algorithm draws a uniform n-subset of the indices 0..M-1 (M available cells) with
    one random number per block and no pool to update, then a bit deposit maps index i to the
    i-th available cell. ~5x cheaper than n sequential picks of a random set bit.
    """
    size = jax.lax.population_count(available_slots).astype(jnp.int32)
    n = jnp.minimum(count, size)
    chosen = jnp.zeros(words.shape[-1:], jnp.uint32)
    for i in range(MAX_BLOCKS):
        top = jnp.clip(size - n + i, 0, 31)  # Floyd: add a uniform t <= top, or top if taken
        t = bb.uniform_index(words[i], top + 1).astype(jnp.uint32)
        pick = jnp.where((chosen >> t) & 1 == 1, top.astype(jnp.uint32), t)
        chosen = jnp.where(i < n, chosen | (jnp.uint32(1) << pick), chosen)
    # The masks depend on the env only: materialised, not recomputed for every attempt.
    moves = bb.materialize(jnp.stack(_expand_masks(available_slots), axis=-1))
    return _expand(chosen, available_slots, [moves[..., i, None] for i in range(5)])


def _accepted(layout: bb.Board, exit_row, exit_col):
    """§12.2 acceptance: every block has a free neighbour, and the free cells are connected
    when the exit may be entered but not passed through (search from (0,0), a corner, hence
    never a block; if it is the exit it is expanded like any other cell)."""
    free = ~layout
    every_block_open = bb.is_empty(layout & ~bb.neighbors(free))
    exit_cell = bb.single(exit_row, exit_col)
    frontier = jnp.full(layout.even.shape, 1, jnp.uint32)  # (0,0): even word, bit 0
    unvisited_even, unvisited_odd = free.even & ~frontier, free.odd

    # Unrolled: one fused kernel per attempt batch, every layer computed once (a loop's tuple
    # carry costs a kernel per word and iteration, each recomputing part of the layer).
    for _ in range(_FLOOD_LAYERS // 2):
        frontier = bb.spread(frontier, 0) & unvisited_odd
        unvisited_odd = unvisited_odd ^ frontier
        frontier = bb.spread(frontier & ~exit_cell.odd, 1) & unvisited_even
        unvisited_even = unvisited_even ^ frontier
        frontier = frontier & ~exit_cell.even
    return every_block_open & ((unvisited_even | unvisited_odd) == 0)


def _generate_blocks(key, core: S.Core, exit_row, exit_col):
    """§12.2 step 5: (content, points, program, spawn_count) as int32[6,6] arrays, plus
    uint32[6,6] random words for the resources of step 6."""
    layout_key, content_key = spawning.split_key(key, 2)
    # Each layout word is read once, inside the layout kernel; the others are read by several
    # kernels, so they are materialised (else every reader recomputes its words' hashes).
    layout_words = spawning.random_words(layout_key, MAX_BLOCKS * BLOCK_ATTEMPTS).reshape(
        MAX_BLOCKS, BLOCK_ATTEMPTS)
    words = bb.materialize(spawning.random_words(content_key,
                                                 1 + 3 * C.NUM_CELLS + C.NUM_PROGRAMS))
    count = MIN_BLOCKS + bb.uniform_index(words[0], jnp.int32(MAX_BLOCKS - MIN_BLOCKS + 1))
    cell_words = words[1:-C.NUM_PROGRAMS].reshape(3, C.NUM_CELLS)
    program_words = words[-C.NUM_PROGRAMS:]

    enemies, transmissions = core.enemies, core.transmissions
    occupied = (bb.from_cells(enemies.active, enemies.row, enemies.col)
                | bb.from_cells(transmissions.active, transmissions.row, transmissions.col))
    available = _to_slots(~occupied)
    # Materialised once: read by the acceptance test and by the selection.
    layouts = bb.materialize(_attempt_layouts(layout_words, available, count))
    accepted = _accepted(_from_slots(layouts), exit_row, exit_col)
    attempt = jnp.arange(BLOCK_ATTEMPTS)
    first = jnp.min(jnp.where(accepted, attempt, BLOCK_ATTEMPTS))  # the first accepted wins
    chosen = layouts[jnp.minimum(first, BLOCK_ATTEMPTS - 1)]  # a gather: one word per env
    blocks = _from_slots(jnp.where(first < BLOCK_ATTEMPTS, chosen, jnp.uint32(0)))  # all failed
    is_block = bb.to_bool(bb.materialize(blocks)).reshape(C.NUM_CELLS)

    # Contents, drawn per block cell; the "one by one" order of the rules only matters for
    # programs never repeating: the j-th program block (row-major) gets the program ranked j
    # by random keys, i.e. a uniformly random injective assignment.
    question = _chance(cell_words[0], QUESTION_CHANCE)
    has_program = is_block & ((cell_words[0] & 1) == 1)
    points = 1 + bb.uniform_index(cell_words[1], jnp.int32(9))
    program_rank = spawning.random_ranks(program_words)
    program_slot = spawning.exclusive_prefix_count(has_program)
    # The programs in rank order with their costs (packed: program | cost << 8); a scatter, so
    # it is computed once rather than inside the per-cell selection below.
    ranked = jnp.zeros((C.NUM_PROGRAMS,), jnp.int32).at[program_rank].set(
        jnp.arange(C.NUM_PROGRAMS) | (jnp.asarray(C.PROGRAM_SPAWN_COST) << 8))
    assigned = jnp.full((C.NUM_CELLS,), C.NO_PROGRAM & 0xFF, jnp.int32)
    for j in range(MAX_BLOCKS):
        assigned = jnp.where(has_program & (program_slot == j), ranked[j], assigned)
    program = jnp.where(has_program, assigned & 0xFF, C.NO_PROGRAM)
    spawn_cost = assigned >> 8

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
    enemies, pending siphon transmissions and the history, adds `stage` transmissions and
    regenerates the rest.

    Decision (rules silent): if fewer free non-corner cells than N exist, all of them are used.
    """
    return spawning.place(generate_board(key, state), stage_transmissions(key, state.stage))


def stage_transmissions(key, stage) -> spawning.Placement:
    """The last part of `generate_stage(key, ...)`: its `stage` transmissions, as a request."""
    return spawning.placement(spawning.split_key(key, 3)[2], stage, False, False)


def generate_board(key, state: S.GameState) -> S.GameState:
    """`generate_stage` but its transmissions (`stage_transmissions`): the transmissions are
    carried, like the enemies. Placement reads the generated blocks, so it comes after."""
    exit_key, block_key = spawning.split_key(key, 3)[:2]
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

    # A buffer: the exit is read by kernels over all attempts and cells, which would otherwise
    # recompute its random choice for every element.
    exit_row, exit_col = bb.materialize(jnp.stack([exit_row, exit_col]))
    is_exit = [(exit_row == r) & (exit_col == c) for r, c in corners]
    content, points, program, spawn_count, resource_words = _generate_blocks(
        block_key, core, exit_row, exit_col)
    for (r, c), allowed, here in zip(corners, not_player, is_exit):
        corner_content = jnp.where(here, C.EXIT, jnp.where(allowed, C.DATA_SIPHON, C.EMPTY))
        content = jnp.where(_CELL_IS[r, c], corner_content, content)  # select: fuses, unlike .at

    # Resources on empty and data-siphon cells: amount 1/2/3 at 0.45/0.45/0.10, kind 50/50.
    gets_resource = (content == C.EMPTY) | (content == C.DATA_SIPHON)
    amount = jnp.where(_chance(resource_words, 0.45), 1,
                       jnp.where(_chance(resource_words, 0.90), 2, 3))
    is_credits = (resource_words & 1) == 1
    # astype: a `jnp.where` of Python ints is weakly typed, and a weakly typed leaf would make
    # a jitted step compile again for stepped states.
    cells = S.Cells(
        content=content.astype(jnp.int32), points=points, program=program,
        spawn_count=spawn_count,
        credits=jnp.where(gets_resource & is_credits, amount, 0).astype(jnp.int32),
        energy=jnp.where(gets_resource & ~is_credits, amount, 0).astype(jnp.int32),
        siphoned=jnp.zeros(content.shape, jnp.bool_),
        siphon_center=jnp.zeros(content.shape, jnp.bool_))

    core = core.replace(turn=jnp.int32(0), cells=cells, show_activated=jnp.asarray(False),
                        scheduled_tasks_disabled=jnp.asarray(False), atk_plus_uses=jnp.int32(0))
    return state.replace(core=core, exit_row=exit_row, exit_col=exit_col,
                         step_active=jnp.asarray(False),
                         next_scheduled_turn=state.scheduled_interval)


def advance_stage(state: S.GameState, reached):
    """§12.1 when `reached`, up to the generation: (state, generates, won).

    hp + 1 (max 3); below stage 8 the stage and its scheduled interval advance and the caller
    must generate the new stage (`generates`); on stage 8 the game is won. When not `reached`
    the state is returned unchanged.
    """
    generates = reached & (state.stage < C.MAX_STAGE)
    won = reached & (state.stage >= C.MAX_STAGE)
    core = state.core.replace(hp=jnp.where(reached, jnp.minimum(state.core.hp + 1, 3),
                                           state.core.hp))
    return state.replace(
        core=core,
        stage=jnp.where(generates, state.stage + 1, state.stage),
        scheduled_interval=jnp.where(generates, 12 - state.stage, state.scheduled_interval),
    ), generates, won


def complete_stage(key, state: S.GameState, reached):
    """§12.1 when `reached`: `advance_stage`, then the next stage generated if there is one.

    Returns (state, won). When not `reached` the state is returned unchanged.
    """
    advanced, generates, won = advance_stage(state, reached)
    return S.select(generates, generate_stage(key, advanced), advanced), won


def starting_state(key) -> S.GameState:
    """§13.1 before the stage is generated: player on a random corner, one random bonus.

    `new_game_parts` pairs it with the key that `new_game` generates stage 1 with.
    """
    # Each word is read by several state arrays' kernels: computed once.
    corner_word, bonus_word = fusion.computed_once(*spawning.random_words(key, 2))
    corner = (corner_word & 3).astype(jnp.int32)
    bonus = bb.uniform_index(bonus_word, jnp.int32(3))
    state = S.empty_state()
    core = state.core.replace(
        player_row=jnp.asarray(C.CORNERS[:, 0])[corner],
        player_col=jnp.asarray(C.CORNERS[:, 1])[corner],
        credits=jnp.where(bonus == 0, STARTING_BONUS_CREDITS, 0).astype(jnp.int32),
        energy=jnp.where(bonus == 1, STARTING_BONUS_ENERGY, 0).astype(jnp.int32),
        data_siphons=jnp.where(bonus == 2, 1, 0).astype(jnp.int32))
    return state.replace(core=core)


def new_game_parts(key):
    """A new game (§13.1) before its stage generation: (starting state, generation key).

    `new_game(key)` generates from these; an auto-resetting env selects between them and a
    completed stage's state and key first, so that one generation serves both.
    """
    setup_key, stage_key = spawning.split_key(key, 2)
    return starting_state(setup_key), stage_key


def new_game(key) -> S.GameState:
    """§13.1: player on a random corner, one random starting bonus, stage 1 generated."""
    start, stage_key = new_game_parts(key)
    return generate_stage(stage_key, start)
