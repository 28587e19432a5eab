"""New game (§13.1), stage completion (§12.1) and stage generation (§12.2)."""

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import history
from hackmatrix.game import scenario
from hackmatrix.game import worldgen

import compiled

GAMES = 3000
CORNERS = [tuple(c) for c in C.CORNERS.tolist()]
BLOCKS = (C.DATA_BLOCK, C.PROGRAM_BLOCK, C.QUESTION_BLOCK)
RIGHT = 3

_new_games = jax.jit(jax.vmap(worldgen.new_game))
_complete = jax.jit(worldgen.complete_stage)
_complete_seeds = jax.jit(jax.vmap(worldgen.complete_stage, in_axes=(0, None, None)))


@pytest.fixture(scope="module")
def games():
    """GAMES fresh games as NumPy trees (one compile, one call)."""
    out = _new_games(jax.random.split(jax.random.PRNGKey(42), GAMES))
    return jax.tree_util.tree_map(np.asarray, out.replace(history=None))


def _connected(is_block, exit_cell):
    """§12.2 acceptance, written from the rules."""
    for r, c in zip(*np.nonzero(is_block)):
        if not any(0 <= r + dr < 6 and 0 <= c + dc < 6 and not is_block[r + dr, c + dc]
                   for dr, dc in C.DIRECTION_DELTAS):
            return False
    start = (0, 0)
    seen, stack = {start}, [start]
    while stack:
        cell = stack.pop()
        if cell == exit_cell and cell != start:
            continue
        for dr, dc in C.DIRECTION_DELTAS:
            nxt = (cell[0] + dr, cell[1] + dc)
            if 0 <= nxt[0] < 6 and 0 <= nxt[1] < 6 and not is_block[nxt] and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return len(seen) == 36 - is_block.sum()


def test_new_game_player_bonus_and_counters(games):
    core = games.core
    players = Counter(zip(core.player_row.tolist(), core.player_col.tolist()))
    assert set(players) == set(CORNERS)
    assert all(abs(n / GAMES - 0.25) < 0.04 for n in players.values())
    bonus = Counter(zip(core.credits.tolist(), core.energy.tolist(), core.data_siphons.tolist()))
    assert set(bonus) == {(10, 0, 0), (0, 11, 0), (0, 0, 1)}
    assert all(abs(n / GAMES - 1 / 3) < 0.04 for n in bonus.values())
    assert (core.hp == 3).all() and (core.attack_damage == 1).all() and (core.score == 0).all()
    assert (core.turn == 0).all() and (games.stage == 1).all() and not core.owned.any()
    assert (games.scheduled_interval == 12).all() and (games.next_scheduled_turn == 12).all()
    assert (games.pending_siphon_transmissions == 0).all() and (games.history_size == 0).all()
    assert not core.enemies.active.any()


def test_exit_and_data_siphons_on_the_corners(games):
    core = games.core
    exits = Counter()
    for g in range(GAMES):
        player = (core.player_row[g], core.player_col[g])
        exit_cell = (games.exit_row[g], games.exit_col[g])
        assert exit_cell in CORNERS and exit_cell != player
        assert core.cells.content[g][exit_cell] == C.EXIT
        for corner in CORNERS:
            if corner not in (player, exit_cell):
                assert core.cells.content[g][corner] == C.DATA_SIPHON
        assert core.cells.content[g][player] == C.EMPTY
        exits[(CORNERS.index(player) - CORNERS.index(exit_cell)) % 4] += 1
    assert all(abs(n / GAMES - 1 / 3) < 0.04 for n in exits.values())


def test_blocks_are_accepted_layouts(games):
    cells = games.core.cells
    counts = Counter()
    for g in range(GAMES):
        is_block = np.isin(cells.content[g], BLOCKS)
        counts[int(is_block.sum())] += 1
        assert not any(is_block[corner] for corner in CORNERS)
        assert _connected(is_block, (games.exit_row[g], games.exit_col[g]))
    assert set(counts) <= set(range(5, 12)) | {0}
    # N is uniform in 5..11; with 100 attempts a stage gets no blocks with probability ~2e-5
    # (docstring), so N = 11 is as frequent as the others.
    assert counts[0] <= 2
    for n in range(5, 12):
        assert abs(counts[n] / GAMES - 1 / 7) < 0.035


def test_attempt_layouts_are_uniform_subsets_of_the_available_cells():
    available = jnp.uint32(0b1010110100000001)  # six cells, in slot space
    words = jax.random.bits(jax.random.PRNGKey(0), (worldgen.MAX_BLOCKS, 70000), jnp.uint32)
    layouts = np.asarray(jax.jit(worldgen._attempt_layouts)(words, available, jnp.int32(3)))
    counts = Counter(layouts.tolist())
    assert all(bin(k).count("1") == 3 and k & ~int(available) == 0 for k in counts)
    assert len(counts) == 20  # C(6, 3), each with probability 1/20
    assert all(abs(c / 70000 - 1 / 20) < 0.004 for c in counts.values())
    # More blocks than available cells: all of them are used.
    many = np.asarray(jax.jit(worldgen._attempt_layouts)(words[:, :100], available, jnp.int32(9)))
    assert (many == int(available)).all()


def test_block_contents(games):
    cells = games.core.cells
    content, points, program, spawn = cells.content, cells.points, cells.program, cells.spawn_count
    is_block = np.isin(content, BLOCKS)
    holds_program = is_block & (program >= 0)
    question = content == C.QUESTION_BLOCK
    assert abs(question.sum() / is_block.sum() - 0.10) < 0.02
    assert abs(holds_program.sum() / is_block.sum() - 0.5) < 0.03
    data = is_block & ~holds_program
    assert (points[data] >= 1).all() and (points[data] <= 9).all()
    assert (spawn[data] == points[data]).all()
    assert np.allclose(np.bincount(points[data], minlength=10)[1:] / data.sum(), 1 / 9, atol=0.02)
    assert (spawn[holds_program] == C.PROGRAM_SPAWN_COST[program[holds_program]]).all()
    assert (points[holds_program] == 0).all()
    assert (content[holds_program & ~question] == C.PROGRAM_BLOCK).all()
    assert (content[data & ~question] == C.DATA_BLOCK).all()
    for g in range(GAMES):
        programs = program[g][holds_program[g]].tolist()
        assert len(programs) == len(set(programs))  # never repeats within a stage
    used = Counter(program[holds_program].tolist())
    assert set(used) == set(range(C.NUM_PROGRAMS))


def test_resources(games):
    cells = games.core.cells
    content = cells.content
    gets = (content == C.EMPTY) | (content == C.DATA_SIPHON)
    amount = cells.credits + cells.energy
    assert ((cells.credits > 0) & (cells.energy > 0)).sum() == 0
    assert (amount[~gets] == 0).all()
    assert (amount[gets] >= 1).all() and (amount[gets] <= 3).all()
    frequencies = np.bincount(amount[gets], minlength=4)[1:] / gets.sum()
    assert np.allclose(frequencies, [0.45, 0.45, 0.10], atol=0.01)
    assert abs((cells.credits[gets] > 0).mean() - 0.5) < 0.01
    assert not cells.siphoned.any() and not cells.siphon_center.any()


def test_one_stage_one_transmission_out_of_the_line_of_fire(games):
    t = games.core.transmissions
    assert (t.active.sum(axis=1) == 1).all()
    assert (t.turns_remaining[:, 0] == 1).all()
    assert not t.from_siphon.any() and not t.from_scheduled.any()
    # Out of the line of fire: the player's row and column up to and including the first
    # block (no enemies yet). There are always such free cells on a generated board.
    for g in range(GAMES):
        line = set()
        for dr, dc in C.DIRECTION_DELTAS:
            r, c = games.core.player_row[g] + dr, games.core.player_col[g] + dc
            while 0 <= r < 6 and 0 <= c < 6:
                line.add((r, c))
                if games.core.cells.content[g][r, c] in BLOCKS:
                    break
                r, c = r + dr, c + dc
        assert (t.row[g, 0], t.col[g, 0]) not in line
        assert games.core.cells.content[g][t.row[g, 0], t.col[g, 0]] not in BLOCKS
    types = np.bincount(t.enemy_type[:, 0], minlength=4) / GAMES
    assert np.allclose(types, 0.25, atol=0.035)


# ------------------------------------------------------------------------------------------
# Stage completion.

def _mid_game(stage, hp=2):
    state = scenario.from_dict({
        "player": {"row": 5, "col": 5, "hp": hp, "credits": 7, "energy": 4, "dataSiphons": 2,
                   "score": 13, "attackDamage": 2},
        "enemies": [{"type": "daemon", "row": 2, "col": 2, "hp": 1, "stunned": True,
                     "spawnedFromSiphon": True}],
        "transmissions": [{"row": 3, "col": 1, "turnsRemaining": 2, "enemyType": "virus"}],
        "blocks": [{"row": 1, "col": 1, "type": "data", "points": 4, "siphoned": True}],
        "ownedPrograms": ["WAIT", "CRASH"], "stage": stage, "turn": 9, "showActivated": True,
        "scheduledTasksDisabled": True, "stepActive": True, "atkPlusUsesThisStage": 2,
        "pendingSiphonTransmissions": 3, "scheduledTaskInterval": 6,
        "nextScheduledTaskTurn": 15})
    # One snapshot in the history: generation must carry it.
    return history.push(state, jnp.asarray(True))


def test_completing_a_stage_generates_the_next_one():
    state = _mid_game(stage=3)
    out, won = _complete(jax.random.PRNGKey(5), state, jnp.asarray(True))
    assert not bool(won)
    core = out.core
    assert int(out.stage) == 4 and int(core.hp) == 3
    assert int(out.scheduled_interval) == 9 and int(out.next_scheduled_turn) == 9
    assert int(core.turn) == 0 and not bool(core.show_activated)
    assert not bool(core.scheduled_tasks_disabled) and not bool(out.step_active)
    assert int(core.atk_plus_uses) == 0
    assert (int(core.credits), int(core.energy), int(core.data_siphons), int(core.score),
            int(core.attack_damage)) == (7, 4, 2, 13, 2)
    assert int(out.pending_siphon_transmissions) == 3 and int(out.history_size) == 1
    assert scenario.inspect(out)["enemies"] == scenario.inspect(state)["enemies"]
    t = out.core.transmissions
    assert int(np.sum(t.active)) == 1 + 4  # carried one, then `stage` new ones
    assert (int(t.row[0]), int(t.col[0]), int(t.turns_remaining[0])) == (3, 1, 2)
    assert (np.asarray(t.turns_remaining[1:5]) == 1).all()
    assert (int(core.player_row), int(core.player_col)) == (5, 5)
    assert (int(out.exit_row), int(out.exit_col)) != (5, 5)
    assert not np.asarray(core.cells.siphoned).any()


def test_generation_keeps_blocks_off_carried_pieces():
    state = _mid_game(stage=2)
    out, _ = _complete_seeds(jax.random.split(jax.random.PRNGKey(9), 200), state,
                             jnp.asarray(True))
    content = np.asarray(out.core.cells.content)
    assert not np.isin(content[:, 2, 2], BLOCKS).any()
    assert not np.isin(content[:, 3, 1], BLOCKS).any()
    # Cells under carried pieces still get resources.
    amount = np.asarray(out.core.cells.credits + out.core.cells.energy)
    assert (amount[:, 2, 2] > 0).all() and (amount[:, 3, 1] > 0).all()


def test_hp_is_capped_at_three():
    out, _ = _complete(jax.random.PRNGKey(1), _mid_game(stage=1, hp=3), jnp.asarray(True))
    assert int(out.core.hp) == 3 and int(out.stage) == 2
    assert int(out.scheduled_interval) == 11


def test_completing_stage_eight_wins_without_generating():
    state = _mid_game(stage=8, hp=1)
    out, won = _complete(jax.random.PRNGKey(2), state, jnp.asarray(True))
    assert bool(won) and int(out.stage) == 8 and int(out.core.hp) == 2
    same = jax.tree_util.tree_leaves(out.core.cells) + [out.exit_row, out.core.turn]
    before = jax.tree_util.tree_leaves(state.core.cells) + [state.exit_row, state.core.turn]
    assert all(np.array_equal(a, b) for a, b in zip(same, before))


def test_not_reached_changes_nothing():
    state = _mid_game(stage=3)
    out, won = _complete(jax.random.PRNGKey(3), state, jnp.asarray(False))
    assert not bool(won)
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(state)):
        assert np.array_equal(a, b)


# ------------------------------------------------------------------------------------------
# Stage completion through the step (§5, §12.1, §12.2 step 1), and generation at a stage
# transition over many keys.

@pytest.mark.parametrize("step_active", [False, True])
def test_a_completing_step_has_no_enemy_turn_and_clears_the_stage_flags(step_active):
    # With STEP active an enemy turn would be skipped anyway; the flag must still be cleared.
    d = {"player": {"row": 5, "col": 4, "credits": 1},
         "enemies": [{"type": "daemon", "row": 4, "col": 4, "hp": 2, "stunned": True,
                      "spawnedFromSiphon": True, "disabledTurns": 2},
                     {"type": "glitch", "row": 1, "col": 1, "hp": 1, "isFromScheduledTask": True},
                     {"type": "virus", "row": 4, "col": 5, "hp": 2}],  # next to the exit
         "transmissions": [{"row": 2, "col": 3, "turnsRemaining": 1, "enemyType": "virus"}],
         "turn": 7, "showActivated": True, "scheduledTasksDisabled": True,
         "stepActive": step_active, "pendingSiphonTransmissions": 4, "atkPlusUsesThisStage": 2}
    start = scenario.from_dict(d)
    state, _, _, done, info = compiled.STEP(jax.random.PRNGKey(0), start, RIGHT)
    assert bool(info["stage_complete"]) and not bool(done) and int(state.stage) == 2
    # No enemy turn (§5): nobody moved or attacked, stun and disable did not decay, the
    # transmission with 1 turn left did not hatch, and no snapshot was taken.
    assert scenario.inspect(state)["enemies"] == scenario.inspect(start)["enemies"]
    assert int(state.core.hp) == 3 and int(state.history_size) == 0
    t = state.core.transmissions
    assert int(np.sum(t.active)) == 1 + 2  # carried one, then `stage` = 2 new ones
    assert (int(t.row[0]), int(t.col[0]), int(t.turns_remaining[0])) == (2, 3, 1)
    # §12.2 step 1; pendingSiphonTransmissions is carried.
    assert int(state.core.turn) == 0 and int(state.pending_siphon_transmissions) == 4
    assert not bool(state.core.show_activated) and not bool(state.core.scheduled_tasks_disabled)
    assert not bool(state.step_active) and int(state.core.atk_plus_uses) == 0
    assert int(state.scheduled_interval) == 11 and int(state.next_scheduled_turn) == 11
    assert int(state.core.credits) == 1


def test_the_winning_step_leaves_board_and_pieces_untouched():
    d = {"player": {"row": 5, "col": 4, "hp": 2}, "stage": 8, "turn": 5,
         "enemies": [{"type": "virus", "row": 4, "col": 5, "hp": 2}],
         "transmissions": [{"row": 2, "col": 2, "turnsRemaining": 1, "enemyType": "daemon"}],
         "blocks": [{"row": 3, "col": 3, "type": "data", "points": 4}],
         "resources": [{"row": 0, "col": 0, "credits": 2}]}
    start = scenario.from_dict(d)
    state, _, _, done, info = compiled.STEP(jax.random.PRNGKey(0), start, RIGHT)
    assert bool(done) and bool(info["won"]) and bool(info["stage_complete"])
    assert not bool(info["death"])
    assert int(state.stage) == 8 and int(state.core.hp) == 3  # §12.1: hp + 1 even on victory
    # Nothing generated (§12.1 step 3) and no enemy turn: board, exit, pieces and turn as before.
    for a, b in zip(jax.tree_util.tree_leaves(state.core.cells),
                    jax.tree_util.tree_leaves(start.core.cells)):
        assert np.array_equal(a, b)
    assert (int(state.exit_row), int(state.exit_col)) == (5, 5) and int(state.core.turn) == 5
    assert scenario.inspect(state)["enemies"] == scenario.inspect(start)["enemies"]
    t = state.core.transmissions
    assert int(np.sum(t.active)) == 1 and int(t.turns_remaining[0]) == 1


TRANSITION_KEYS = 1000


def _complete_many(seed, state, count):
    """`count` completions of `state` with different keys, 200 per call of `_complete_seeds`
    (the batch size it is compiled for), as NumPy trees."""
    keys = jax.random.split(jax.random.PRNGKey(seed), count).reshape(-1, 200, 2)
    outs = [_complete_seeds(k, state, jnp.asarray(True))[0].replace(history=None) for k in keys]
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outs)
# Carried pieces: blocks and new transmissions must avoid them.
_CARRIED = {"enemies": [{"type": "daemon", "row": 4, "col": 2, "hp": 3},
                        {"type": "glitch", "row": 2, "col": 4, "hp": 1, "stunned": True},
                        {"type": "virus", "row": 5, "col": 2, "hp": 2}],
            "transmissions": [{"row": 1, "col": 3, "turnsRemaining": 2, "enemyType": "cryptog"}]}


@pytest.mark.parametrize("stage", [1, 4, 7])
def test_generation_at_a_stage_transition_over_many_keys(stage):
    start = scenario.from_dict({"player": {"row": 5, "col": 5}, "stage": stage, **_CARRIED})
    out = _complete_many(100 + stage, start, TRANSITION_KEYS)
    new_stage = stage + 1
    assert (out.stage == new_stage).all()
    assert (out.scheduled_interval == 13 - new_stage).all()  # §10
    assert (out.next_scheduled_turn == 13 - new_stage).all() and (out.core.turn == 0).all()
    # Tolerances: with 1000 keys a frequency's standard deviation is 0.015 (p = 1/3) and 0.011
    # (p = 1/7); the bounds are >= 4.3 standard deviations, so a correct generator fails one of
    # the 30 frequency checks of the three cases with probability < 1e-3 for arbitrary keys.
    exits = Counter(zip(out.exit_row.tolist(), out.exit_col.tolist()))
    assert set(exits) == {(0, 0), (0, 5), (5, 0)}  # §12.2 step 3: not the player's corner
    assert all(abs(n / TRANSITION_KEYS - 1 / 3) < 0.065 for n in exits.values())
    is_block = np.isin(out.core.cells.content, BLOCKS)
    for row, col in CORNERS + [(4, 2), (2, 4), (5, 2), (1, 3)]:
        assert not is_block[:, row, col].any()
    counts = Counter(is_block.sum(axis=(1, 2)).tolist())
    assert set(counts) <= set(range(5, 12)) | {0} and counts[0] <= 2
    assert all(abs(counts[n] / TRANSITION_KEYS - 1 / 7) < 0.05 for n in range(5, 12))
    # §12.2 step 7: the carried transmission, then `stage` new ones on distinct free cells.
    t = out.core.transmissions
    assert (t.active.sum(axis=1) == 1 + new_stage).all()
    assert (t.row[:, 0] == 1).all() and (t.col[:, 0] == 3).all()
    assert (t.turns_remaining[:, 0] == 2).all() and (t.enemy_type[:, 0] == C.CRYPTOG).all()
    new = slice(1, 1 + new_stage)
    assert (t.turns_remaining[:, new] == 1).all()
    assert not t.from_siphon.any() and not t.from_scheduled.any()
    cells = t.row[:, :1 + new_stage] * 6 + t.col[:, :1 + new_stage]
    assert all(len(set(row)) == 1 + new_stage for row in cells.tolist())
    taken = np.array([4 * 6 + 2, 2 * 6 + 4, 5 * 6 + 2, 5 * 6 + 5])  # enemies and the player
    assert not np.isin(cells, taken).any()
    assert not np.take_along_axis(is_block.reshape(-1, 36), cells, axis=1).any()


# §12.2 step 5 acceptance with the exit as a dead end. Daemons fill every non-corner cell but
# the ones listed, so blocks can only go there.
STAIRCASE = [(4, 1), (3, 1), (3, 2), (2, 2), (2, 3), (1, 3), (1, 4), (0, 4)]


def _generate_with_only(free_cells, seed):
    daemons = [{"type": "daemon", "row": r, "col": c, "hp": 3}
               for r in range(6) for c in range(6)
               if (r, c) not in CORNERS and (r, c) not in free_cells]
    state = scenario.from_dict({"player": {"row": 5, "col": 5}, "enemies": daemons})
    out = _complete_many(seed, state, 200)
    is_block = np.isin(out.core.cells.content, BLOCKS)
    outside = np.ones((6, 6), bool)
    outside[tuple(np.transpose(free_cells))] = False
    assert not is_block[:, outside].any()
    return is_block, list(zip(out.exit_row.tolist(), out.exit_col.tolist()))


def test_a_wall_connected_only_through_the_exit_is_rejected():
    # The staircase splits the board into two sides that meet only at corner (5,0). Any part
    # of it is accepted; the full wall (N >= 8) only if the exit is not (5,0), which may be
    # entered but not passed through. With N >= 8 every attempt is the full wall, so with the
    # exit on (5,0) the stage gets no blocks.
    is_block, exits = _generate_with_only(STAIRCASE, seed=3)
    counts = is_block.sum(axis=(1, 2))
    on_gate = np.array([e == (5, 0) for e in exits])
    assert set(counts[on_gate].tolist()) <= {0, 5, 6, 7}
    assert set(counts[~on_gate].tolist()) <= {5, 6, 7, 8}
    # Each case has probability >= 4/21 per key: absent from 200 keys with p < 1e-18.
    assert (counts[on_gate] == 0).any() and (counts[~on_gate] == 8).any()
    for g in np.flatnonzero(counts):
        assert _connected(is_block[g], exits[g])


def test_a_wall_isolating_a_corner_leaves_the_stage_without_blocks():
    # At least 5 blocks are drawn and only (1,0) and (0,1) are available: both are blocked in
    # every attempt, cutting (0,0) off, so all 100 attempts fail.
    is_block, _ = _generate_with_only([(1, 0), (0, 1)], seed=4)
    assert not is_block.any()
