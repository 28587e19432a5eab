"""Programs in play (rules §5, §7, §8, §12, §14): sequences of steps through
`transition.step`."""

import jax
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled

STEP = compiled.STEP
KEY = jax.random.PRNGKey(0)
UP, RIGHT = 0, 3
CH_STUNNED, CH_CREDITS = 5, 37
program = compiled.program_action
play = compiled.play


def hidden(state):
    return scenario.inspect(state)


def enemy_cells(state):
    return [(e["row"], e["col"]) for e in hidden(state)["enemies"]]


def transmission_count(state):
    return int(np.asarray(state.core.transmissions.active).sum())


def test_undo_after_a_siphon_walks_back_one_full_turn_per_use():
    d = {"player": {"row": 3, "col": 3, "dataSiphons": 1, "credits": 2, "energy": 1},
         "ownedPrograms": ["WAIT", "UNDO"],
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 9}]}
    state, *_ = play(scenario.from_dict(d), C.ACTION_WAIT, C.ACTION_SIPHON)
    assert int(state.core.score) == 9 and transmission_count(state) == 9
    assert int(state.history_size) == 2 and hidden(state)["turn"] == 2

    # The top snapshot is the state right after the siphon's enemy turn: only the origin flags go.
    state, _, reward, _, _ = play(state, program("UNDO"))
    assert int(state.core.score) == 9 and transmission_count(state) == 9
    assert not np.asarray(state.core.transmissions.from_siphon).any()
    assert float(reward) == pytest.approx(-0.01)  # the credit comes back with the snapshot

    state, obs, reward, done, info = play(state, program("UNDO"))
    assert int(state.core.score) == 0 and int(state.core.data_siphons) == 1
    assert transmission_count(state) == 0 and hidden(state)["turn"] == 1
    assert not bool(state.core.cells.siphoned[4, 3])
    assert int(state.core.cells.spawn_count[4, 3]) == 9
    assert float(obs.grid[3, 3, 41]) == 0.0  # siphon centre gone with the board
    # Not restored (§7.15): the siphon's schedule change stays.
    assert hidden(state)["scheduledTaskInterval"] == 11
    assert hidden(state)["nextScheduledTaskTurn"] == 17
    assert float(info["reward_components"]["score"]) == pytest.approx(-4.5)
    assert int(state.history_size) == 0 and not bool(done)


def test_undo_after_a_stage_change_restores_the_old_board_but_not_the_stage():
    d = {"player": {"row": 5, "col": 4, "hp": 2, "credits": 1, "energy": 1},
         "ownedPrograms": ["WAIT", "UNDO"],
         "blocks": [{"row": 0, "col": 0, "type": "data", "points": 4}]}
    state, *_ = play(scenario.from_dict(d), C.ACTION_WAIT)
    state, _, _, _, info = play(state, RIGHT)
    assert bool(info["stage_complete"]) and int(state.stage) == 2 and int(state.core.hp) == 3
    new_exit = (int(state.exit_row), int(state.exit_col))
    assert new_exit != (5, 5) and int(state.history_size) == 1  # stage change keeps the stack

    state, obs, _, _, _ = play(state, program("UNDO"))
    assert (int(state.core.player_row), int(state.core.player_col)) == (5, 4)
    assert int(state.core.hp) == 2 and hidden(state)["turn"] == 1
    assert int(state.stage) == 2 and (int(state.exit_row), int(state.exit_col)) == new_exit
    assert int(state.core.cells.content[5, 5]) == C.EXIT  # the old board's exit cell
    assert int(state.core.cells.content[0, 0]) == C.DATA_BLOCK
    assert transmission_count(state) == 0
    assert hidden(state)["scheduledTaskInterval"] == 11
    assert float(obs.player[5]) == pytest.approx(1 / 7)


def test_step_then_wait_skips_exactly_one_enemy_turn():
    d = {"player": {"row": 0, "col": 0, "energy": 5}, "ownedPrograms": ["STEP", "WAIT"],
         "enemies": [{"type": "daemon", "row": 0, "col": 3, "hp": 3}]}
    state, _, reward, done, _ = play(scenario.from_dict(d), program("STEP"), C.ACTION_WAIT)
    assert enemy_cells(state) == [(0, 3)] and hidden(state)["turn"] == 0
    assert not bool(state.step_active) and int(state.history_size) == 0
    assert float(reward) == pytest.approx(-0.01 - 0.05) and not bool(done)
    state, *_ = play(state, C.ACTION_WAIT)
    assert enemy_cells(state) == [(0, 2)] and hidden(state)["turn"] == 1
    assert int(state.history_size) == 1


def test_warp_onto_the_exit_completes_the_stage_without_an_enemy_turn():
    """Appendix A.5: reward 1.59, stage 2, two new transmissions, no enemies."""
    d = {"player": {"row": 0, "col": 0, "credits": 2, "energy": 2}, "ownedPrograms": ["WARP"],
         "enemies": [{"type": "virus", "row": 5, "col": 5, "hp": 2}]}
    state, _, reward, done, info = play(scenario.from_dict(d), program("WARP"))
    assert float(reward) == pytest.approx(1.59, abs=1e-5) and not bool(done)
    assert int(state.stage) == 2 and bool(info["stage_complete"])
    assert hidden(state)["enemies"] == [] and transmission_count(state) == 2
    assert (int(state.core.player_row), int(state.core.player_col)) == (5, 5)
    assert (int(state.exit_row), int(state.exit_col)) != (5, 5)
    assert hidden(state)["turn"] == 0 and int(state.history_size) == 0
    parts = info["reward_components"]
    assert float(parts["kills"]) == pytest.approx(0.3) and float(parts["stage"]) == 1.0
    assert float(parts["distance"]) == pytest.approx(0.5)


def test_poly_kills_a_damaged_daemon():
    d = {"player": {"row": 0, "col": 0, "credits": 1, "energy": 1}, "ownedPrograms": ["POLY"],
         "enemies": [{"type": "daemon", "row": 3, "col": 0, "hp": 1}]}
    state, obs, reward, done, info = play(scenario.from_dict(d), program("POLY"))
    assert hidden(state)["enemies"] == [] and not np.asarray(obs.grid[:, :, :7]).any()
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)
    assert float(reward) == pytest.approx(-0.01 + 0.3 - 0.1)


def test_crash_exposes_resources_that_a_siphon_then_collects():
    d = {"player": {"row": 2, "col": 2, "credits": 3, "energy": 2, "dataSiphons": 1},
         "ownedPrograms": ["CRASH"],
         "blocks": [{"row": 3, "col": 2, "type": "data", "points": 2}],
         "resources": [{"row": 3, "col": 2, "credits": 3}]}
    state = scenario.from_dict(d)
    state, obs, _, _, _ = play(state, program("CRASH"))
    assert int(state.core.cells.content[3, 2]) == C.EMPTY
    assert float(obs.grid[3, 2, CH_CREDITS]) == 1.0  # no block on it any more: visible
    state, obs, reward, _, info = play(state, C.ACTION_SIPHON)
    assert int(state.core.credits) == 3 and int(state.core.score) == 0
    assert int(state.core.cells.credits[3, 2]) == 0 and transmission_count(state) == 0
    assert float(info["reward_components"]["resourceGain"]) == pytest.approx(0.15)


def test_d_bom_near_other_enemies():
    d = {"player": {"row": 2, "col": 2, "credits": 3}, "ownedPrograms": ["D_BOM"],
         "enemies": [{"type": "daemon", "row": 2, "col": 4, "hp": 3},
                     {"type": "virus", "row": 3, "col": 5, "hp": 1},
                     {"type": "glitch", "row": 1, "col": 3, "hp": 2},
                     {"type": "virus", "row": 3, "col": 2, "hp": 2}]}
    state, obs, reward, _, info = play(scenario.from_dict(d), program("D_BOM"))
    assert enemy_cells(state) == [(1, 3), (3, 2)]
    assert float(obs.grid[1, 3, CH_STUNNED]) == 1.0 and float(obs.grid[3, 2, CH_STUNNED]) == 0.0
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.6)
    assert float(reward) == pytest.approx(-0.01 + 0.6 - 0.15)


def test_hack_after_a_siphon_hits_the_enemy_that_walked_onto_the_cross():
    d = {"player": {"row": 3, "col": 3, "dataSiphons": 1, "credits": 2, "energy": 3},
         "ownedPrograms": ["HACK", "WAIT"],
         "enemies": [{"type": "daemon", "row": 3, "col": 5, "hp": 3}]}
    state, *_ = play(scenario.from_dict(d), C.ACTION_SIPHON)
    assert enemy_cells(state) == [(3, 4)] and bool(state.core.cells.siphoned[3, 4])
    state, obs, reward, _, _ = play(state, program("HACK"))
    assert hidden(state)["enemies"][0]["hp"] == 2 and float(obs.grid[3, 4, CH_STUNNED]) == 1.0
    assert float(reward) == pytest.approx(-0.01 - 0.2)
    # The stun from a free program lasts through the next full enemy turn: no attack.
    state, obs, _, _, _ = play(state, C.ACTION_WAIT)
    assert int(state.core.hp) == 3 and float(obs.grid[3, 4, CH_STUNNED]) == 0.0


@pytest.mark.parametrize("delay", [True, False])
def test_delay_postpones_a_transmission_that_would_hatch_this_turn(delay):
    d = {"player": {"row": 0, "col": 5, "credits": 1, "energy": 3},
         "ownedPrograms": ["DELAY", "WAIT"],
         "transmissions": [{"row": 5, "col": 0, "turnsRemaining": 1, "enemyType": "daemon"}]}
    actions = (program("DELAY"), C.ACTION_WAIT) if delay else (C.ACTION_WAIT,)
    state, *_ = play(scenario.from_dict(d), *actions)
    if delay:
        assert enemy_cells(state) == [] and transmission_count(state) == 1
        assert int(state.core.transmissions.turns_remaining[0]) == 3
    else:
        assert enemy_cells(state) == [(5, 0)] and transmission_count(state) == 0


def test_chained_free_programs_then_a_move():
    d = {"player": {"row": 2, "col": 2, "credits": 9, "energy": 5},
         "ownedPrograms": ["SHOW", "ATK+", "ROW"],
         "enemies": [{"type": "cryptog", "row": 2, "col": 5, "hp": 2},
                     {"type": "daemon", "row": 2, "col": 0, "hp": 3}]}
    state = scenario.from_dict(d)
    rewards = []
    for name in ("SHOW", "ATK+", "ROW"):
        state, obs, reward, done, _ = play(state, program(name))
        rewards.append(float(reward))
        assert hidden(state)["turn"] == 0 and not bool(done)
    assert rewards == pytest.approx([-0.01 - 0.1, -0.01 - 0.4, -0.01 + 0.3 - 0.2])
    assert hidden(state)["enemies"] == [
        {"row": 2, "col": 0, "type": "daemon", "hp": 1, "disabledTurns": 0, "stunned": True,
         "spawnedFromSiphon": False, "isFromScheduledTask": False}]
    assert (int(state.core.credits), int(state.core.energy)) == (0, 0)
    state, obs, reward, done, _ = play(state, UP)
    assert (int(state.core.player_row), int(state.core.player_col)) == (3, 2)
    assert hidden(state)["turn"] == 1 and int(state.history_size) == 1
    # The stunned daemon skipped its turn, then recovered.
    assert enemy_cells(state) == [(2, 0)] and not hidden(state)["enemies"][0]["stunned"]
    assert int(state.core.hp) == 3 and bool(state.core.show_activated)


def test_atk_plus_twice_then_an_attack_kills_a_full_daemon():
    d = {"player": {"row": 2, "col": 2, "credits": 8, "energy": 8}, "ownedPrograms": ["ATK+"],
         "enemies": [{"type": "daemon", "row": 3, "col": 2, "hp": 3}]}
    state, *_ = play(scenario.from_dict(d), program("ATK+"), program("ATK+"))
    assert int(state.core.attack_damage) == 3 and int(state.core.atk_plus_uses) == 2
    assert not bool(compiled.VALID_ACTIONS(state)[program("ATK+")])  # §7.21: two uses a stage
    state, _, reward, _, info = play(state, UP)
    assert hidden(state)["enemies"] == [] and int(state.core.player_row) == 2
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)


@pytest.mark.parametrize("stage, hp, expected", [
    # §14: stage, distance, cost, holding 0.01 * 3 credits left; hp + 1 on the exit (§12.1).
    (1, 2, -0.01 + 1.0 + 0.5 - 0.2 + 0.03 + 1.0),
    (8, 3, -0.01 + 64.0 + 0.5 - 0.2 + 0.03 + 500 + 100 * 3),  # victory: 500 + 100 * score
])
def test_warp_onto_a_scheduled_transmission_on_the_exit_completes_the_stage_without_a_kill(
        stage, hp, expected):
    d = {"player": {"row": 0, "col": 0, "hp": hp, "credits": 5, "energy": 2, "score": 3},
         "ownedPrograms": ["WARP"], "stage": stage,
         "transmissions": [{"row": 5, "col": 5, "turnsRemaining": 3, "enemyType": "daemon",
                            "isFromScheduledTask": True}]}
    state, _, reward, done, info = play(scenario.from_dict(d), program("WARP"))
    assert bool(info["stage_complete"]) and float(info["reward_components"]["kills"]) == 0.0
    assert float(reward) == pytest.approx(expected, abs=1e-3)
    assert bool(done) == (stage == 8) and bool(info["won"]) == (stage == 8)
    assert int(state.stage) == min(stage + 1, 8) and int(state.core.hp) == 3


def test_warp_onto_the_old_exit_cell_after_undo_across_a_stage_change_does_not_exit():
    """§7.15: UNDO brings back the old board with its exit cell, but WARP uses exitPosition."""
    d = {"player": {"row": 0, "col": 0, "credits": 5, "energy": 5},
         "ownedPrograms": ["WAIT", "WARP", "UNDO"],
         "transmissions": [{"row": 5, "col": 5, "turnsRemaining": 9, "enemyType": "virus"}]}
    state, *_ = play(scenario.from_dict(d), C.ACTION_WAIT, program("WARP"))
    assert int(state.stage) == 2
    new_exit = (int(state.exit_row), int(state.exit_col))
    assert new_exit != (5, 5)
    state, *_ = play(state, program("UNDO"))
    assert int(state.core.cells.content[5, 5]) == C.EXIT and transmission_count(state) == 1
    state, _, reward, done, info = play(state, program("WARP"))
    assert (int(state.core.player_row), int(state.core.player_col)) == (5, 5)
    assert not bool(info["stage_complete"]) and not bool(done) and int(state.stage) == 2
    assert (int(state.exit_row), int(state.exit_col)) == new_exit
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)
    assert float(info["reward_components"]["stage"]) == 0.0 and hidden(state)["turn"] == 1
