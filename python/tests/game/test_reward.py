"""Reward (rules §14): every component, the §14.3 worked examples and the A.5 quick checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import outcome as O
from hackmatrix.game import pathfinding, reward, scenario

import compiled

STEP = compiled.STEP
COMPONENTS = jax.jit(reward.components)
KEY = jax.random.PRNGKey(0)
UP, DOWN, LEFT, RIGHT = range(4)


action_of = compiled.program_action


def run(d, action, key=KEY):
    return STEP(key, scenario.from_dict(d), action)


components = compiled.reward_components


def assert_reward(reward_value, info, expected, **expected_components):
    compiled.assert_components_add_up(reward_value, info)
    values = components(info)
    assert float(reward_value) == pytest.approx(expected, abs=1e-5)
    for name, value in expected_components.items():
        assert values[name] == pytest.approx(value, abs=1e-6), name


# --- §14.3 worked examples -------------------------------------------------------------------


def test_moving_closer_to_the_exit():
    _, _, r, done, info = run({"player": {"row": 3, "col": 3}}, UP)
    assert_reward(r, info, 0.04, step_penalty=-0.01, distance=0.05)
    assert not done


def test_moving_away_is_not_penalised():
    _, _, r, _, info = run({"player": {"row": 3, "col": 3}}, DOWN)
    assert_reward(r, info, -0.01, distance=0.0)


@pytest.mark.parametrize("stage, expected", [(1, 1.04), (3, 4.04), (7, 64.04)])
def test_reaching_the_exit(stage, expected):
    state, _, r, done, info = run({"player": {"row": 5, "col": 4}, "stage": stage}, RIGHT)
    assert_reward(r, info, expected, stage=expected - 0.04, distance=0.05)
    assert not done and bool(info["stage_complete"]) and int(state.stage) == stage + 1


def test_reset_at_two_hp_wastes_a_little():
    d = {"player": {"row": 3, "col": 3, "hp": 2, "energy": 4}, "ownedPrograms": ["RESET"]}
    _, _, r, _, info = run(d, action_of("RESET"))
    assert_reward(r, info, 0.49, hpRecovery=1.0, programWaste=-0.3, resourceGain=-0.2)


def test_reset_at_one_hp_is_not_wasteful():
    d = {"player": {"row": 3, "col": 3, "hp": 1, "energy": 4}, "ownedPrograms": ["RESET"]}
    _, _, r, _, info = run(d, action_of("RESET"))
    assert_reward(r, info, 1.79, hpRecovery=2.0, programWaste=0.0)


def test_killing_an_adjacent_enemy():
    d = {"player": {"row": 3, "col": 3},
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 1}]}
    _, _, r, _, info = run(d, UP)
    assert_reward(r, info, 0.29, kills=0.3)


def test_winning_on_stage_eight():
    d = {"player": {"row": 5, "col": 4, "score": 7, "credits": 3, "energy": 5}, "stage": 8}
    state, _, r, done, info = run(d, RIGHT)
    expected = -0.01 + 64 + 0.05 + 500 + 100 * 7 + 0.01 * (3 + 5)
    assert_reward(r, info, expected, stage=64.0, victory=1200.0, resourceHolding=0.08)
    assert bool(done) and bool(info["won"]) and int(state.stage) == 8


# --- A.5 quick checks ------------------------------------------------------------------------


def test_quick_check_attack_on_a_two_hp_virus():
    d = {"player": {"row": 3, "col": 3},
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 2}]}
    _, _, r, done, info = run(d, UP)
    assert_reward(r, info, -0.01)
    assert not done


def test_quick_check_daemon_walks_towards_the_player():
    d = {"player": {"row": 0, "col": 0, "energy": 1}, "ownedPrograms": ["WAIT"],
         "enemies": [{"type": "daemon", "row": 3, "col": 0, "hp": 3}]}
    state, _, _, _, _ = run(d, C.ACTION_WAIT)
    [daemon] = scenario.inspect(state)["enemies"]
    assert (daemon["row"], daemon["col"]) == (2, 0)


@pytest.mark.parametrize("from_siphon, expected", [(False, -1.06), (True, -11.06)])
def test_quick_check_death_by_a_virus(from_siphon, expected):
    d = {"player": {"row": 3, "col": 3, "hp": 1, "energy": 1}, "ownedPrograms": ["WAIT"],
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 2,
                      "spawnedFromSiphon": from_siphon}]}
    state, _, r, done, info = run(d, C.ACTION_WAIT)
    assert_reward(r, info, expected, damagePenalty=-1.0, death=0.0, resourceGain=-0.05,
                  siphonDeathPenalty=-10.0 if from_siphon else 0.0)
    assert bool(done) and bool(info["death"]) and int(state.core.hp) == 0


def test_quick_check_warp_onto_the_exit_kills_and_completes_the_stage():
    d = {"player": {"row": 0, "col": 0, "credits": 2, "energy": 2}, "ownedPrograms": ["WARP"],
         "enemies": [{"type": "virus", "row": 5, "col": 5, "hp": 2}]}
    state, _, r, done, info = run(d, action_of("WARP"))
    assert_reward(r, info, 1.59, kills=0.3, stage=1.0, distance=0.5, resourceGain=-0.2,
                  resourceHolding=0.0)
    assert not done and int(state.stage) == 2
    assert (int(state.exit_row), int(state.exit_col)) != (5, 5)
    assert int(state.core.enemies.active.sum()) == 0
    assert int(state.core.transmissions.active.sum()) == 2


def test_quick_check_destroying_a_transmission():
    d = {"player": {"row": 3, "col": 3},
         "transmissions": [{"row": 4, "col": 3, "turnsRemaining": 3, "enemyType": "virus"}]}
    _, _, r, _, info = run(d, UP)
    assert_reward(r, info, 0.29, kills=0.3)


def test_quick_check_siphon_of_a_nine_point_block():
    d = {"player": {"row": 3, "col": 3, "dataSiphons": 1},
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 9}]}
    _, _, r, _, info = run(d, C.ACTION_SIPHON)
    assert_reward(r, info, 4.49, score=4.5, siphonQuality=0.0)


# --- individual components -------------------------------------------------------------------


@pytest.mark.parametrize("stage, penalty", [(1, 0.0), (2, -0.5), (3, -1.5), (4, -3.5), (5, -7.5),
                                            (6, -15.5), (7, -31.5), (8, -63.5)])
def test_death_penalty_by_stage(stage, penalty):
    """A setup with hp 0 makes any valid action report death (A.3)."""
    state, _, r, done, info = run({"player": {"row": 3, "col": 3, "hp": 0}, "stage": stage}, UP)
    assert_reward(r, info, -0.01 + penalty, death=penalty, distance=0.0)
    assert bool(done) and bool(info["death"])


def test_a_setup_with_hp_zero_lives_on_when_the_action_heals():
    """The exit (§12.1 hp + 1) and RESET (hp 3) end the step with hp > 0: no death (§12.3;
    specs/game-rules.md)."""
    state, _, r, done, info = run({"player": {"row": 5, "col": 4, "hp": 0}, "stage": 2}, RIGHT)
    assert_reward(r, info, 3.04, stage=2.0, hpRecovery=1.0, death=0.0)
    assert not done and not bool(info["death"]) and int(state.core.hp) == 1
    d = {"player": {"row": 3, "col": 3, "hp": 0, "energy": 4}, "ownedPrograms": ["RESET"]}
    state, _, r, done, info = run(d, action_of("RESET"))
    assert_reward(r, info, 2.79, hpRecovery=3.0, resourceGain=-0.2, death=0.0)
    assert not done and not bool(info["death"]) and int(state.core.hp) == 3


def test_siphon_death_penalty_needs_an_adjacent_siphon_enemy_and_a_turn_ending_action():
    d = {"player": {"row": 3, "col": 3, "hp": 0, "credits": 2},
         "ownedPrograms": ["SHOW"],
         "enemies": [{"type": "daemon", "row": 3, "col": 2, "hp": 3, "spawnedFromSiphon": True}]}
    # Attacking stuns the daemon; it still stands next to the player after the enemy turn.
    _, _, r, _, info = run(d, LEFT)
    assert_reward(r, info, -10.01, siphonDeathPenalty=-10.0)
    # A free program never triggers it.
    _, _, r, _, info = run(d, action_of("SHOW"))
    assert_reward(r, info, -0.01 - 0.1, siphonDeathPenalty=0.0, resourceGain=-0.1)


def test_data_siphon_pays_for_walking_onto_a_pickup_only():
    d = {"player": {"row": 0, "col": 0, "credits": 5},
         "ownedPrograms": ["SIPH+"], "resources": [{"row": 1, "col": 0, "dataSiphon": True}]}
    _, _, r, _, info = run(d, UP)
    assert_reward(r, info, -0.01 + 1.0 + 0.05, dataSiphon=1.0)
    _, _, r, _, info = run(d, action_of("SIPH+"))
    assert_reward(r, info, -0.01 - 0.25, dataSiphon=0.0, resourceGain=-0.25)


def test_resource_gain_is_signed_and_exch_is_neutral():
    d = {"player": {"row": 3, "col": 3, "credits": 10, "energy": 10},
         "ownedPrograms": ["CRASH", "EXCH"],
         "blocks": [{"row": 4, "col": 4, "type": "data", "points": 1}]}
    _, _, r, _, info = run(d, action_of("CRASH"))
    assert components(info)["resourceGain"] == pytest.approx(-0.25, abs=1e-6)
    _, _, r, _, info = run(d, action_of("EXCH"))
    assert_reward(r, info, -0.01, resourceGain=0.0)


def test_siphoning_resources_pays_resource_gain():
    d = {"player": {"row": 3, "col": 3, "dataSiphons": 1},
         "resources": [{"row": 3, "col": 4, "credits": 3}, {"row": 2, "col": 3, "energy": 1}]}
    _, _, r, _, info = run(d, C.ACTION_SIPHON)
    assert_reward(r, info, -0.01 + 0.2, resourceGain=0.2, siphonQuality=0.0)


def test_score_program_pays_score_gain():
    d = {"player": {"row": 3, "col": 3, "energy": 5}, "ownedPrograms": ["SCORE"], "stage": 3}
    _, _, r, _, info = run(d, action_of("SCORE"))
    assert_reward(r, info, -0.01 + 0.5 * 5 - 0.25, score=2.5, resourceGain=-0.25)


def test_distance_uses_the_path_around_blocks():
    # A wall on row 4 leaves only column 0 open: D(3,5) = 5 + 2 + 5 = 12 and D(3,4) = 11,
    # although moving left increases the Manhattan distance.
    blocks = [{"row": 4, "col": c, "type": "data", "points": 1} for c in range(1, 6)]
    _, _, r, _, info = run({"player": {"row": 3, "col": 5}, "blocks": blocks}, LEFT)
    assert_reward(r, info, 0.04, distance=0.05)


def test_kills_of_scheduled_pieces_pay_nothing():
    d = {"player": {"row": 3, "col": 3},
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 1, "isFromScheduledTask": True}]}
    _, _, r, _, info = run(d, UP)
    assert_reward(r, info, -0.01, kills=0.0)


def test_components_unit_stage_table_and_holding():
    """components() directly: completing stage 8 pays 64, not 100; holding only on completion."""
    after = scenario.from_dict({"player": {"row": 5, "col": 5, "credits": 10, "energy": 20,
                                           "score": 3}, "stage": 8})
    start = reward.Before(score=jnp.int32(3), hp=jnp.int32(3), credits=jnp.int32(10),
                          energy=jnp.int32(20), distance=jnp.int32(1))
    distance_after = pathfinding.path_distance(after, after.core.player_row,
                                               after.core.player_col)
    values = np.asarray(COMPONENTS(start, after, O.no_outcome(), jnp.int32(RIGHT),
                                   jnp.bool_(True), jnp.bool_(True), distance_after))
    named = dict(zip(C.REWARD_COMPONENTS, values))
    assert named["stage"] == 64.0 and named["victory"] == 800.0
    assert named["resourceHolding"] == pytest.approx(0.3)
    assert named["distance"] == pytest.approx(0.05)
    values = np.asarray(COMPONENTS(start, after, O.no_outcome(), jnp.int32(RIGHT),
                                   jnp.bool_(False), jnp.bool_(False), distance_after))
    named = dict(zip(C.REWARD_COMPONENTS, values))
    assert named["stage"] == 0.0 and named["victory"] == 0.0 and named["resourceHolding"] == 0.0


# --- stage completion, distance shaping and the siphon-death penalty through the step --------


@pytest.mark.parametrize("stage, paid", [(2, 2.0), (4, 8.0), (5, 16.0), (6, 32.0)])
def test_completing_a_stage_pays_the_table_and_starts_the_next_schedule(stage, paid):
    state, _, r, done, info = run({"player": {"row": 5, "col": 4}, "stage": stage}, RIGHT)
    assert_reward(r, info, paid + 0.04, stage=paid, distance=0.05, resourceHolding=0.0)
    assert not done and bool(info["stage_complete"]) and int(state.stage) == stage + 1
    # §10: the new stage s starts with interval 13 - s, due at turn 13 - s; s transmissions.
    assert int(state.scheduled_interval) == 12 - stage
    assert int(state.next_scheduled_turn) == 12 - stage and int(state.core.turn) == 0
    assert int(state.core.transmissions.active.sum()) == stage + 1


def test_completion_pays_hp_recovery_and_resource_holding():
    state, _, r, _, info = run({"player": {"row": 5, "col": 4, "hp": 2}}, RIGHT)
    assert_reward(r, info, 2.04, stage=1.0, hpRecovery=1.0, damagePenalty=0.0)
    assert int(state.core.hp) == 3
    # Holding is paid on every completion, not only the winning one; carried resources are no gain.
    d = {"player": {"row": 5, "col": 4, "credits": 7, "energy": 3}, "stage": 2}
    state, _, r, _, info = run(d, RIGHT)
    assert_reward(r, info, -0.01 + 2.0 + 0.05 + 0.1, resourceHolding=0.1, resourceGain=0.0)
    assert (int(state.core.credits), int(state.core.energy)) == (7, 3)


def test_warp_onto_the_exit_pays_the_whole_path_distance_around_blocks():
    # §14.2: Δ = D_before when the exit is reached; the wall on row 4 makes D(3,5) = 12.
    d = {"player": {"row": 3, "col": 5, "credits": 2, "energy": 2}, "ownedPrograms": ["WARP"],
         "enemies": [{"type": "virus", "row": 5, "col": 5, "hp": 2}],
         "blocks": [{"row": 4, "col": c, "type": "data", "points": 1} for c in range(1, 6)]}
    _, _, r, _, info = run(d, action_of("WARP"))
    assert_reward(r, info, -0.01 + 0.3 + 1.0 + 0.6 - 0.2, distance=0.6, kills=0.3, stage=1.0)


def test_moving_into_a_pocket_without_a_path_pays_the_distance_before():
    # The player stands on a block at (1,0) and steps into the corner (0,0), walled in by the
    # blocks at (0,1) and (1,0): no path after the step counts as D = 0, so Δ = D_before = 9.
    d = {"player": {"row": 1, "col": 0},
         "blocks": [{"row": r, "col": c, "type": "data", "points": 1}
                    for r, c in [(1, 0), (0, 1), (1, 1)]]}
    state, _, r, _, info = run(d, DOWN)
    assert (int(state.core.player_row), int(state.core.player_col)) == (0, 0)
    assert_reward(r, info, -0.01 + 0.45, distance=0.45)


def test_distance_after_a_free_crash_is_measured_on_the_end_board():
    # CRASH opens the wall at (4,4) and (4,5): D falls from 12 to 2 without a move.
    d = {"player": {"row": 3, "col": 5, "credits": 3, "energy": 2}, "ownedPrograms": ["CRASH"],
         "blocks": [{"row": 4, "col": c, "type": "data", "points": 1} for c in range(1, 6)]}
    _, _, r, _, info = run(d, action_of("CRASH"))
    assert_reward(r, info, -0.01 + 0.5 - 0.25, distance=0.5, resourceGain=-0.25)


def test_siphon_death_penalty_when_step_skips_the_wait_turn():
    """§14.1 #15: WAIT counts as followed by an enemy turn even when STEP skips it."""
    d = {"player": {"row": 3, "col": 3, "hp": 0, "energy": 1}, "ownedPrograms": ["WAIT"],
         "stepActive": True,
         "enemies": [{"type": "daemon", "row": 3, "col": 4, "hp": 3, "spawnedFromSiphon": True}]}
    state, _, r, done, info = run(d, C.ACTION_WAIT)
    assert_reward(r, info, -10.06, siphonDeathPenalty=-10.0, death=0.0, resourceGain=-0.05)
    assert bool(done) and bool(info["death"])
    assert not bool(state.step_active) and int(state.core.turn) == 0  # the turn was skipped


@pytest.mark.parametrize("enemy_cell, penalty", [((2, 3), -10.0), ((2, 2), 0.0)])
def test_siphon_death_penalty_needs_an_orthogonal_neighbour(enemy_cell, penalty):
    # The daemon is stunned, so it stays where it is through the siphon's enemy turn.
    d = {"player": {"row": 3, "col": 3, "hp": 0, "dataSiphons": 1}, "stage": 3,
         "enemies": [{"type": "daemon", "row": enemy_cell[0], "col": enemy_cell[1], "hp": 3,
                      "spawnedFromSiphon": True, "stunned": True}]}
    _, _, r, done, info = run(d, C.ACTION_SIPHON)
    assert_reward(r, info, -0.01 - 1.5 + penalty, death=-1.5, siphonDeathPenalty=penalty)
    assert bool(done) and bool(info["death"])
