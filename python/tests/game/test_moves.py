"""Move / attack (rules §6.1): line of fire, attacks, stun, kills, pickups, the exit."""

import jax
import numpy as np
import pytest

from hackmatrix.game import action_mask, scenario
from hackmatrix.game import constants as C

import compiled

RESOLVE = compiled.RESOLVE
STEP = compiled.STEP
KEY = jax.random.PRNGKey(0)
UP, DOWN, LEFT, RIGHT = range(4)


def resolve(d, action):
    """The state right after the player action, before any enemy turn."""
    return RESOLVE(KEY, scenario.from_dict(d), action)


def run(d, action):
    return STEP(KEY, scenario.from_dict(d), action)


def player_at(state):
    return int(state.core.player_row), int(state.core.player_col)


def enemy_list(state):
    return scenario.inspect(state)["enemies"]


def transmission_count(state):
    return int(state.core.transmissions.active.sum())


@pytest.mark.parametrize("action, expected", [(UP, (4, 3)), (DOWN, (2, 3)), (LEFT, (3, 2)),
                                              (RIGHT, (3, 4))])
def test_moves_one_cell_in_each_direction(action, expected):
    moved, outcome = resolve({"player": {"row": 3, "col": 3}}, action)
    assert player_at(moved) == expected
    assert not outcome.failed and outcome.enemy_turn_follows and not outcome.exit_reached


@pytest.mark.parametrize("action", [DOWN, LEFT])
def test_moving_off_the_board_fails(action):
    _, outcome = resolve({"player": {"row": 0, "col": 0}}, action)
    assert outcome.failed


@pytest.mark.parametrize("siphoned", [False, True])
def test_moving_into_a_block_fails_even_when_siphoned(siphoned):
    d = {"player": {"row": 3, "col": 3},
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 2, "siphoned": siphoned}]}
    _, outcome = resolve(d, UP)
    assert outcome.failed


def test_attack_at_range_damages_and_stuns_without_moving():
    d = {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "daemon", "row": 0, "col": 5, "hp": 3}]}
    attacked, outcome = resolve(d, RIGHT)
    assert player_at(attacked) == (0, 0)
    [daemon] = enemy_list(attacked)
    assert daemon["hp"] == 2 and daemon["stunned"]
    assert outcome.kills == 0 and outcome.enemy_turn_follows and not outcome.failed


def test_attack_damage_uses_attack_damage_and_removes_the_dead_in_list_order():
    d = {"player": {"row": 0, "col": 0, "attackDamage": 2},
         "enemies": [{"type": "glitch", "row": 3, "col": 3, "hp": 2},
                     {"type": "virus", "row": 0, "col": 3, "hp": 2},
                     {"type": "daemon", "row": 4, "col": 4, "hp": 3}]}
    attacked, outcome = resolve(d, RIGHT)
    assert [(e["type"], e["row"], e["col"]) for e in enemy_list(attacked)] == [
        ("glitch", 3, 3), ("daemon", 4, 4)]
    assert int(outcome.kills) == 1


def test_enemy_with_setup_hp_zero_is_removed_when_hit():
    d = {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "virus", "row": 1, "col": 0, "hp": 0}]}
    attacked, outcome = resolve(d, UP)
    assert enemy_list(attacked) == [] and int(outcome.kills) == 1


def test_killing_a_scheduled_enemy_pays_no_kill():
    d = {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "virus", "row": 2, "col": 0, "hp": 1, "isFromScheduledTask": True}]}
    attacked, outcome = resolve(d, UP)
    assert enemy_list(attacked) == [] and int(outcome.kills) == 0


def test_a_block_stops_the_line_of_fire_and_the_player_moves_instead():
    d = {"player": {"row": 0, "col": 0},
         "blocks": [{"row": 0, "col": 2, "type": "data", "points": 1}],
         "enemies": [{"type": "virus", "row": 0, "col": 4, "hp": 2}]}
    moved, outcome = resolve(d, RIGHT)
    assert player_at(moved) == (0, 1)
    assert enemy_list(moved)[0]["hp"] == 2 and not outcome.failed


def test_a_siphoned_block_also_stops_the_line():
    d = {"player": {"row": 0, "col": 0},
         "blocks": [{"row": 0, "col": 1, "type": "data", "points": 1, "siphoned": True}],
         "enemies": [{"type": "virus", "row": 0, "col": 4, "hp": 2}]}
    _, outcome = resolve(d, RIGHT)
    assert outcome.failed


def test_an_enemy_standing_on_a_block_is_hit():
    d = {"player": {"row": 0, "col": 0},
         "blocks": [{"row": 0, "col": 2, "type": "program", "program": "WAIT"}],
         "enemies": [{"type": "virus", "row": 0, "col": 2, "hp": 2},
                     {"type": "virus", "row": 0, "col": 4, "hp": 2}]}
    attacked, _ = resolve(d, RIGHT)
    assert [e["hp"] for e in enemy_list(attacked)] == [1, 2]


def test_the_nearest_target_is_hit():
    d = {"player": {"row": 5, "col": 0},
         "transmissions": [{"row": 1, "col": 0, "turnsRemaining": 2, "enemyType": "virus"}],
         "enemies": [{"type": "daemon", "row": 3, "col": 0, "hp": 3}]}
    attacked, _ = resolve(d, DOWN)
    assert enemy_list(attacked)[0]["hp"] == 2 and transmission_count(attacked) == 1


def test_a_transmission_is_found_before_an_enemy_on_the_same_cell():
    d = {"player": {"row": 2, "col": 2},
         "enemies": [{"type": "virus", "row": 2, "col": 0, "hp": 2}],
         "transmissions": [{"row": 2, "col": 0, "turnsRemaining": 2, "enemyType": "daemon"},
                           {"row": 2, "col": 0, "turnsRemaining": 4, "enemyType": "glitch"}]}
    attacked, outcome = resolve(d, LEFT)
    assert enemy_list(attacked)[0]["hp"] == 2
    transmissions = attacked.core.transmissions
    # The earliest transmission on the cell is destroyed; the other moves up in the list.
    assert transmission_count(attacked) == 1
    assert int(transmissions.turns_remaining[0]) == 4
    assert int(transmissions.enemy_type[0]) == C.GLITCH
    assert int(outcome.kills) == 1 and player_at(attacked) == (2, 2)


def test_the_earliest_enemy_on_a_cell_is_hit():
    d = {"player": {"row": 0, "col": 3},
         "enemies": [{"type": "daemon", "row": 4, "col": 3, "hp": 3},
                     {"type": "virus", "row": 4, "col": 3, "hp": 2}]}
    attacked, _ = resolve(d, UP)
    assert [e["hp"] for e in enemy_list(attacked)] == [2, 2]


def test_a_transmission_on_a_block_is_hit_although_the_mask_omits_the_direction():
    d = {"player": {"row": 3, "col": 3},
         "blocks": [{"row": 3, "col": 4, "type": "data", "points": 3}],
         "transmissions": [{"row": 3, "col": 4, "turnsRemaining": 1, "enemyType": "virus"}]}
    attacked, outcome = resolve(d, RIGHT)
    assert not outcome.failed and transmission_count(attacked) == 0
    assert int(outcome.kills) == 1


def test_scheduled_transmission_pays_no_kill():
    d = {"player": {"row": 3, "col": 3},
         "transmissions": [{"row": 3, "col": 0, "turnsRemaining": 1, "enemyType": "virus",
                            "isFromScheduledTask": True}]}
    attacked, outcome = resolve(d, LEFT)
    assert transmission_count(attacked) == 0 and int(outcome.kills) == 0


def test_data_siphons_exit_and_resources_do_not_stop_the_line():
    d = {"player": {"row": 5, "col": 0},
         "resources": [{"row": 5, "col": 1, "dataSiphon": True},
                       {"row": 5, "col": 2, "credits": 3}],
         "enemies": [{"type": "glitch", "row": 5, "col": 5, "hp": 2}]}
    attacked, _ = resolve(d, RIGHT)
    assert player_at(attacked) == (5, 0) and enemy_list(attacked)[0]["hp"] == 1


def test_walking_onto_a_data_siphon_collects_it_but_not_the_resource_there():
    d = {"player": {"row": 0, "col": 0, "dataSiphons": 2},
         "resources": [{"row": 0, "col": 1, "energy": 2}, {"row": 0, "col": 1, "dataSiphon": True}]}
    moved, outcome = resolve(d, RIGHT)
    cells = moved.core.cells
    assert int(moved.core.data_siphons) == 3 and bool(outcome.data_siphon_collected)
    assert int(cells.content[0, 1]) == C.EMPTY and int(cells.energy[0, 1]) == 2
    assert int(moved.core.energy) == 0


def test_walking_never_picks_up_credits_or_energy():
    d = {"player": {"row": 2, "col": 2, "credits": 1, "energy": 1},
         "resources": [{"row": 3, "col": 2, "credits": 3}]}
    moved, outcome = resolve(d, UP)
    assert int(moved.core.credits) == 1 and int(moved.core.energy) == 1
    assert int(moved.core.cells.credits[3, 2]) == 3 and not outcome.data_siphon_collected


def test_moving_onto_the_exit_reaches_it_and_no_enemy_turn_follows():
    d = {"player": {"row": 4, "col": 5}}
    moved, outcome = resolve(d, UP)
    assert player_at(moved) == (5, 5)
    assert bool(outcome.exit_reached) and not outcome.enemy_turn_follows


def test_a_player_placed_on_the_exit_does_not_complete_the_stage_by_leaving():
    d = {"player": {"row": 5, "col": 5}}
    moved, outcome = resolve(d, LEFT)
    assert player_at(moved) == (5, 4) and not outcome.exit_reached


# --- through the full step (needs the real enemy turn) --------------------------------------


def test_quick_check_attack_stuns_the_virus_for_this_enemy_turn():
    """A.5: virus hp 2 above the player; attack → hp 1, no action, unstunned afterwards."""
    d = {"player": {"row": 3, "col": 3},
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 2}]}
    state, obs, reward, done, info = run(d, UP)
    assert player_at(state) == (3, 3) and int(state.core.hp) == 3
    [virus] = enemy_list(state)
    assert (virus["row"], virus["col"], virus["hp"], virus["stunned"]) == (4, 3, 1, False)
    assert float(obs.grid[4, 3, 5]) == 0.0 and float(obs.grid[4, 3, 4]) == pytest.approx(1 / 3)
    assert scenario.inspect(state)["turn"] == 1
    assert float(reward) == pytest.approx(-0.01, abs=1e-6) and not done
    assert bool(action_mask.valid_actions(state)[UP])


def test_quick_check_destroying_a_transmission():
    """A.5: transmission at (4,3); step up → destroyed, player stays, reward 0.29, turn 1."""
    d = {"player": {"row": 3, "col": 3},
         "transmissions": [{"row": 4, "col": 3, "turnsRemaining": 3, "enemyType": "daemon"}]}
    state, _, reward, done, info = run(d, UP)
    assert player_at(state) == (3, 3) and transmission_count(state) == 0
    assert float(reward) == pytest.approx(0.29, abs=1e-6) and not done
    assert scenario.inspect(state)["turn"] == 1
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)


def test_enemy_list_order_after_removal_matches_survivors():
    d = {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "daemon", "row": 5, "col": 1, "hp": 3},
                     {"type": "virus", "row": 0, "col": 1, "hp": 1},
                     {"type": "glitch", "row": 5, "col": 3, "hp": 2},
                     {"type": "cryptog", "row": 4, "col": 4, "hp": 2}]}
    attacked, _ = resolve(d, RIGHT)
    enemies = attacked.core.enemies
    np.testing.assert_array_equal(np.asarray(enemies.active[:4]), [True, True, True, False])
    assert [e["type"] for e in enemy_list(attacked)] == ["daemon", "glitch", "cryptog"]
