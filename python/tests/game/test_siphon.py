"""Siphon (rules §6.2) and siphon quality (§14.4)."""

import jax
import numpy as np
import pytest

from hackmatrix.game import scenario, siphon_quality
from hackmatrix.game import constants as C

import compiled

RESOLVE = compiled.RESOLVE
STEP = compiled.STEP
QUALITY = jax.jit(siphon_quality.siphon_quality)
KEY = jax.random.PRNGKey(0)
SIPHON = C.ACTION_SIPHON
CH_BLOCK_SIPHONED, CH_SPAWN_COUNT, CH_TRANSMISSION, CH_SIPHON_CENTER = 11, 35, 36, 41


def siphon(d):
    """The state right after the siphon action, before the enemy turn."""
    return RESOLVE(KEY, scenario.from_dict(d), SIPHON)


def quality(d):
    return float(QUALITY(scenario.from_dict(d)))


def player(row=3, col=3, siphons=1, **extra):
    return {"row": row, "col": col, "dataSiphons": siphons, **extra}


def test_quick_check_siphoning_a_data_block():
    """A.5: data block 9/9 above the player → score 9, reward 4.49, 9 siphon transmissions."""
    d = {"player": player(), "blocks": [{"row": 4, "col": 3, "type": "data", "points": 9}]}
    state, obs, reward, done, info = STEP(KEY, scenario.from_dict(d), SIPHON)
    hidden = scenario.inspect(state)
    assert float(reward) == pytest.approx(4.49, abs=1e-5) and not done
    assert float(info["reward_components"]["siphonQuality"]) == 0.0
    assert int(state.core.score) == 9 and int(state.core.data_siphons) == 0
    assert hidden["turn"] == 1
    assert hidden["scheduledTaskInterval"] == 11 and hidden["nextScheduledTaskTurn"] == 17
    assert hidden["pendingSiphonTransmissions"] == 0
    assert float(obs.grid[4, 3, CH_BLOCK_SIPHONED]) == 1.0
    assert float(obs.grid[4, 3, CH_SPAWN_COUNT]) == 0.0
    assert float(obs.grid[3, 3, CH_SIPHON_CENTER]) == 1.0

    transmissions = state.core.transmissions
    active = np.asarray(transmissions.active)
    assert active.sum() == 9 and np.asarray(transmissions.from_siphon)[active].all()
    cells = set(zip(np.asarray(transmissions.row)[active], np.asarray(transmissions.col)[active]))
    assert len(cells) == 9
    for row, col in cells:
        assert float(obs.grid[row, col, CH_TRANSMISSION]) == 0.25
        # Outside the line of fire: not in row 3, not in column 3 below the player, not the
        # block; cells above the block in column 3 are outside.
        assert row != 3 and not (col == 3 and row < 3) and (row, col) != (4, 3)


def test_the_cross_siphons_every_kind_of_block_at_once():
    d = {"player": player(2, 2),
         "ownedPrograms": ["SHOW"],
         "blocks": [
             {"row": 3, "col": 2, "type": "data", "points": 4},                    # up
             {"row": 1, "col": 2, "type": "program", "program": "CRASH"},          # down, s=6
             {"row": 2, "col": 1, "type": "question", "points": 7},                # left, s=7
             {"row": 2, "col": 3, "type": "question", "program": "SHOW"},          # right, s=2
         ]}
    state, outcome = siphon(d)
    cells = state.core.cells
    assert int(state.core.score) == 4 + 7
    assert int(state.pending_siphon_transmissions) == 4 + 6 + 7 + 2
    owned = np.asarray(state.core.owned)
    assert owned[C.CRASH] and owned[C.SHOW] and owned.sum() == 2
    assert int(cells.content[2, 1]) == C.DATA_BLOCK and int(cells.points[2, 1]) == 7
    assert int(cells.content[2, 3]) == C.PROGRAM_BLOCK and int(cells.program[2, 3]) == C.SHOW
    for row, col in [(3, 2), (1, 2), (2, 1), (2, 3)]:
        assert int(cells.spawn_count[row, col]) == 0
    cross = np.zeros((6, 6), bool)
    cross[[2, 3, 1, 2, 2], [2, 2, 2, 1, 3]] = True
    np.testing.assert_array_equal(np.asarray(cells.siphoned), cross)
    centre = np.zeros((6, 6), bool)
    centre[2, 2] = True
    np.testing.assert_array_equal(np.asarray(cells.siphon_center), centre)
    assert int(state.core.data_siphons) == 0 and bool(outcome.enemy_turn_follows)


def test_owned_program_block_still_owes_its_transmissions():
    d = {"player": player(), "ownedPrograms": ["WARP"],
         "blocks": [{"row": 3, "col": 4, "type": "program", "program": "WARP"}]}
    state, _ = siphon(d)
    assert int(state.pending_siphon_transmissions) == 5
    assert int(np.asarray(state.core.owned).sum()) == 1


def test_resources_on_open_cells_of_the_cross_are_collected_including_the_centre():
    d = {"player": player(0, 0),
         "resources": [{"row": 0, "col": 0, "credits": 2}, {"row": 1, "col": 0, "energy": 3},
                       {"row": 0, "col": 1, "credits": 1}, {"row": 1, "col": 1, "credits": 3}]}
    state, _ = siphon(d)
    cells = state.core.cells
    assert int(state.core.credits) == 3 and int(state.core.energy) == 3
    assert int(cells.credits[0, 0]) == 0 and int(cells.energy[1, 0]) == 0
    assert int(cells.credits[1, 1]) == 3  # diagonal: not in the cross


def test_resources_under_blocks_are_not_collected():
    d = {"player": player(),
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 2}],
         "resources": [{"row": 4, "col": 3, "credits": 3}]}
    state, _ = siphon(d)
    assert int(state.core.credits) == 0 and int(state.core.cells.credits[4, 3]) == 3
    assert bool(state.core.cells.siphoned[4, 3])


def test_a_data_siphon_pickup_is_not_collected_by_siphoning_but_its_resource_is():
    d = {"player": player(), "resources": [{"row": 2, "col": 3, "energy": 2},
                                           {"row": 2, "col": 3, "dataSiphon": True}]}
    state, _ = siphon(d)
    assert int(state.core.cells.content[2, 3]) == C.DATA_SIPHON
    assert int(state.core.data_siphons) == 0 and int(state.core.energy) == 2


def test_the_exit_cell_resource_is_collected():
    d = {"player": player(5, 4), "resources": [{"row": 5, "col": 5, "credits": 2}]}
    state, _ = siphon(d)
    assert int(state.core.credits) == 2 and int(state.core.cells.content[5, 5]) == C.EXIT


def test_already_siphoned_cells_are_skipped():
    d = {"player": player(siphons=2),
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 5, "siphoned": True},
                    {"row": 3, "col": 2, "type": "data", "points": 3}],
         "siphonedCells": [{"row": 2, "col": 3}],
         "resources": [{"row": 2, "col": 3, "credits": 3}, {"row": 3, "col": 4, "energy": 1}]}
    state, _ = siphon(d)
    cells = state.core.cells
    assert int(state.core.score) == 3 and int(state.pending_siphon_transmissions) == 3
    assert int(cells.spawn_count[4, 3]) == 5
    assert int(state.core.credits) == 0 and int(cells.credits[2, 3]) == 3
    assert int(state.core.energy) == 1 and int(state.core.data_siphons) == 1


def test_a_siphon_that_gathers_nothing_still_spends_and_marks():
    d = {"player": player(0, 5)}
    state, outcome = siphon(d)
    hidden = scenario.inspect(state)
    assert int(state.core.data_siphons) == 0 and not outcome.failed
    assert hidden["scheduledTaskInterval"] == 11 and hidden["nextScheduledTaskTurn"] == 17
    assert int(np.asarray(state.core.cells.siphoned).sum()) == 3  # corner cross
    assert bool(state.core.cells.siphon_center[0, 5])


def test_interval_floor_is_four():
    d = {"player": player(), "scheduledTaskInterval": 4, "nextScheduledTaskTurn": 20}
    state, _ = siphon(d)
    hidden = scenario.inspect(state)
    assert hidden["scheduledTaskInterval"] == 4 and hidden["nextScheduledTaskTurn"] == 25


def test_siphon_without_charges_fails():
    _, outcome = siphon({"player": player(siphons=0)})
    assert outcome.failed


def test_step_skipped_turn_keeps_pending_transmissions_for_the_next_full_turn():
    d = {"player": player(energy=1), "stepActive": True, "ownedPrograms": ["WAIT"],
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 2}]}
    state, _, _, _, _ = STEP(KEY, scenario.from_dict(d), SIPHON)
    assert scenario.inspect(state)["pendingSiphonTransmissions"] == 2
    assert int(state.core.transmissions.active.sum()) == 0 and not bool(state.step_active)
    state, _, _, _, _ = STEP(KEY, state, C.ACTION_WAIT)
    assert scenario.inspect(state)["pendingSiphonTransmissions"] == 0
    assert int(state.core.transmissions.active.sum()) == 2


# --- siphon quality (§14.4) ------------------------------------------------------------------


def test_quality_zero_when_nothing_beats_the_yield():
    assert quality({"player": player(),
                    "blocks": [{"row": 4, "col": 3, "type": "data", "points": 9}]}) == 0.0
    assert quality({"player": player(), "resources": [{"row": 3, "col": 3, "credits": 3}]}) == 0.0


def test_quality_penalises_a_better_resource_position():
    d = {"player": player(), "resources": [{"row": 3, "col": 4, "credits": 1},
                                           {"row": 0, "col": 0, "credits": 3}]}
    # (0,0) and (1,0)/(0,1) yield 3 credits against 1: missed 2 → −0.5 × 0.05 × 2.
    assert quality(d) == pytest.approx(-0.05, abs=1e-7)


def test_quality_takes_the_two_maxima_independently():
    d = {"player": player(), "resources": [{"row": 0, "col": 0, "credits": 3},
                                           {"row": 5, "col": 0, "energy": 2}]}
    assert quality(d) == pytest.approx(-0.5 * (0.05 * 3 + 0.05 * 2), abs=1e-7)


def test_quality_with_blocks_only_considers_cells_next_to_the_same_blocks():
    d = {"player": player(),
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 1, "col": 1, "type": "data", "points": 5}],
         # (4,4) also reaches the block at (4,3) and the 2 credits at (5,4).
         "resources": [{"row": 5, "col": 4, "credits": 2},
                       # (1,0) reaches a different 5-point block and 3 credits: not a candidate.
                       {"row": 0, "col": 0, "credits": 3}]}
    assert quality(d) == pytest.approx(-0.05, abs=1e-7)


def test_quality_with_blocks_requires_the_same_data_values():
    d = {"player": player(),
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 5, "col": 4, "type": "data", "points": 1}],
         # (4,4) reaches both blocks: V = [1, 5] differs from [5].
         "resources": [{"row": 4, "col": 5, "credits": 3}]}
    assert quality(d) == 0.0


def test_quality_candidates_must_touch_every_block_of_the_cross():
    d = {"player": player(),
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 3, "col": 4, "type": "program", "program": "WAIT"}],
         # (4,4) touches both blocks: same V and G, plus 3 energy at (5,4).
         "resources": [{"row": 5, "col": 4, "energy": 3}]}
    assert quality(d) == pytest.approx(-0.5 * 0.05 * 3, abs=1e-7)


def test_owned_programs_do_not_count_as_yield():
    # The only block holds an owned program: the yield has no values, so every open cell is a
    # candidate; (0,0) reaches 2 credits.
    d = {"player": player(), "ownedPrograms": ["WAIT"],
         "blocks": [{"row": 4, "col": 3, "type": "program", "program": "WAIT"}],
         "resources": [{"row": 0, "col": 0, "credits": 2}]}
    assert quality(d) == pytest.approx(-0.05, abs=1e-7)


def test_quality_for_a_player_on_a_block_uses_the_empty_yield():
    d = {"player": player(),
         "blocks": [{"row": 3, "col": 3, "type": "data", "points": 5}],
         "resources": [{"row": 0, "col": 0, "energy": 1}]}
    assert quality(d) == pytest.approx(-0.025, abs=1e-7)


def test_siphoned_cells_do_not_count_in_yields():
    d = {"player": player(),
         "siphonedCells": [{"row": 0, "col": 0}],
         "resources": [{"row": 0, "col": 0, "credits": 3}]}
    assert quality(d) == 0.0


def test_siphon_quality_component_is_paid_in_the_step():
    d = {"player": player(), "resources": [{"row": 0, "col": 0, "credits": 3}]}
    _, _, reward, _, info = STEP(KEY, scenario.from_dict(d), SIPHON)
    assert float(info["reward_components"]["siphonQuality"]) == pytest.approx(-0.075, abs=1e-7)


# --- more of §6.2 ----------------------------------------------------------------------------


def test_siphoning_while_standing_on_a_question_block_reveals_it():
    d = {"player": player(2, 2),
         "blocks": [{"row": 2, "col": 2, "type": "question", "points": 6, "spawnCount": 4}]}
    state, _ = siphon(d)
    cells = state.core.cells
    assert int(state.core.score) == 6 and int(state.pending_siphon_transmissions) == 4
    assert int(cells.content[2, 2]) == C.DATA_BLOCK and int(cells.points[2, 2]) == 6
    assert int(cells.spawn_count[2, 2]) == 0
    assert bool(cells.siphoned[2, 2]) and bool(cells.siphon_center[2, 2])


def test_two_blocks_with_the_same_program_acquire_it_once_and_owe_both_spawn_counts():
    d = {"player": player(2, 2),
         "blocks": [{"row": 3, "col": 2, "type": "program", "program": "ROW"},
                    {"row": 1, "col": 2, "type": "question", "program": "ROW"}]}
    state, _ = siphon(d)
    owned = np.asarray(state.core.owned)
    assert owned[C.ROW] and owned.sum() == 1
    assert int(state.pending_siphon_transmissions) == 2 + 2  # ROW's spawn cost, twice
    assert int(state.core.cells.content[1, 2]) == C.PROGRAM_BLOCK
    assert int(state.core.cells.program[1, 2]) == C.ROW


def test_pieces_on_the_cross_are_untouched_and_do_not_shield_their_cells():
    d = {"player": player(2, 2),
         "blocks": [{"row": 3, "col": 2, "type": "data", "points": 4}],
         "enemies": [{"type": "glitch", "row": 3, "col": 2, "hp": 2},    # on the block
                     {"type": "daemon", "row": 2, "col": 3, "hp": 3}],
         "transmissions": [{"row": 1, "col": 2, "turnsRemaining": 3, "enemyType": "virus"}],
         "resources": [{"row": 2, "col": 3, "credits": 2}, {"row": 1, "col": 2, "energy": 1}]}
    state, _ = siphon(d)
    assert int(state.core.score) == 4 and int(state.pending_siphon_transmissions) == 4
    assert int(state.core.credits) == 2 and int(state.core.energy) == 1
    assert [(e["type"], e["row"], e["col"], e["hp"], e["stunned"])
            for e in scenario.inspect(state)["enemies"]] == [("glitch", 3, 2, 2, False),
                                                           ("daemon", 2, 3, 3, False)]
    transmissions = state.core.transmissions
    assert int(transmissions.active.sum()) == 1 and int(transmissions.turns_remaining[0]) == 3
    assert np.asarray(state.core.cells.siphoned)[[2, 3, 1, 2, 2], [2, 2, 2, 1, 3]].all()


@pytest.mark.parametrize("interval, expected", [(13, 12), (5, 4), (2, 4)])
def test_interval_drops_by_one_to_at_least_four_and_the_due_turn_moves_five(interval, expected):
    """§6.2 step 5: max(4, interval − 1), so a setup interval below 4 rises to 4."""
    d = {"player": player(), "scheduledTaskInterval": interval, "nextScheduledTaskTurn": 3}
    state, _ = siphon(d)
    hidden = scenario.inspect(state)
    assert hidden["scheduledTaskInterval"] == expected and hidden["nextScheduledTaskTurn"] == 8


def test_owed_transmissions_add_to_those_pending_and_all_are_placed_in_the_enemy_turn():
    d = {"player": player(2, 2), "pendingSiphonTransmissions": 3,
         "blocks": [{"row": 3, "col": 2, "type": "data", "points": 2}]}
    state, _ = siphon(d)
    assert int(state.pending_siphon_transmissions) == 3 + 2
    state, _, _, _, _ = STEP(KEY, scenario.from_dict(d), SIPHON)
    transmissions = state.core.transmissions
    active = np.asarray(transmissions.active)
    assert active.sum() == 5 and scenario.inspect(state)["pendingSiphonTransmissions"] == 0
    assert np.asarray(transmissions.from_siphon)[active].all()
    assert (np.asarray(transmissions.turns_remaining)[active] == 1).all()


def test_siphoning_on_the_exit_of_stage_eight_neither_wins_nor_changes_the_exit():
    d = {"player": player(5, 5), "stage": 8, "resources": [{"row": 5, "col": 5, "energy": 2}]}
    state, _, _, done, info = STEP(KEY, scenario.from_dict(d), SIPHON)
    assert not done and not bool(info["won"]) and not bool(info["stage_complete"])
    assert int(state.stage) == 8 and scenario.inspect(state)["turn"] == 1
    assert int(state.core.energy) == 2 and int(state.core.cells.content[5, 5]) == C.EXIT
    assert bool(state.core.cells.siphon_center[5, 5])


# --- more siphon-quality dominance cases (§14.4) ---------------------------------------------

# name -> (setup, expected component); the player stands at (3,3) with one charge.
QUALITY_CASES = {
    # (0,0) and (0,1) reach 2 credits as the player does, and 1 energy more.
    "equal credits and more energy dominates": (
        {"resources": [{"row": 3, "col": 4, "credits": 2}, {"row": 0, "col": 0, "credits": 2},
                       {"row": 0, "col": 1, "energy": 1}]}, -0.5 * 0.05 * 1),
    # The siphoned block at (3,4) is not in B, so (5,3) next to (4,3) is a candidate: 2 energy.
    "a siphoned block of the cross is not in B": (
        {"blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 3, "col": 4, "type": "data", "points": 1, "siphoned": True}],
         "resources": [{"row": 5, "col": 3, "energy": 2}]}, -0.5 * 0.05 * 2),
    # An owned program block still belongs to B: no open cell touches both (4,3) and (2,3),
    # so (4,4) with 3 credits is no candidate.
    "an owned program block of the cross is in B": (
        {"ownedPrograms": ["WAIT"],
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 2, "col": 3, "type": "program", "program": "WAIT"}],
         "resources": [{"row": 4, "col": 4, "credits": 3}]}, 0.0),
    # The yield holds V = [5], so only cells next to (4,3) are candidates: (4,4) with 1 credit
    # dominates, (0,0) with 3 credits does not.
    "a question block's points count as data": (
        {"blocks": [{"row": 4, "col": 3, "type": "question", "points": 5}],
         "resources": [{"row": 4, "col": 4, "credits": 1}, {"row": 0, "col": 0, "credits": 3}]},
        -0.5 * 0.05 * 1),
    # (4,4) also reaches the program block at (5,4): G differs unless the player owns it.
    "an unowned extra program in the candidate's cross": (
        {"blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 5, "col": 4, "type": "program", "program": "WAIT"}],
         "resources": [{"row": 4, "col": 4, "credits": 3}]}, 0.0),
    "an owned extra program in the candidate's cross": (
        {"ownedPrograms": ["WAIT"],
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 5},
                    {"row": 5, "col": 4, "type": "program", "program": "WAIT"}],
         "resources": [{"row": 4, "col": 4, "credits": 3}]}, -0.5 * 0.05 * 3),
    # The yield holds only an owned program: every open cell is a candidate, but V must stay
    # empty. The 3 credits at (0,0) are reachable only from (0,0), whose cross holds the data
    # blocks at (1,0) and (0,1); (5,0) reaches the energy.
    "an empty yield needs candidates without data": (
        {"ownedPrograms": ["WAIT"],
         "blocks": [{"row": 4, "col": 3, "type": "program", "program": "WAIT"},
                    {"row": 1, "col": 0, "type": "data", "points": 2},
                    {"row": 0, "col": 1, "type": "data", "points": 2}],
         "resources": [{"row": 0, "col": 0, "credits": 3}, {"row": 5, "col": 0, "energy": 1}]},
        -0.5 * 0.05 * 1),
}


@pytest.mark.parametrize("case", sorted(QUALITY_CASES))
def test_quality_dominance(case):
    setup, expected = QUALITY_CASES[case]
    assert quality({"player": player(), **setup}) == pytest.approx(expected, abs=1e-7)
