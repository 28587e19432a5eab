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

GAMES = 3000
CORNERS = [tuple(c) for c in C.CORNERS.tolist()]
BLOCKS = (C.DATA_BLOCK, C.PROGRAM_BLOCK, C.QUESTION_BLOCK)

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
