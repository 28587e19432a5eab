"""Move / attack (rules §6.1): line of fire, attacks, stun, kills, pickups, the exit."""

import random

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


def transmission_list(state):
    """(row, col, turnsRemaining) of the active transmissions, in list order."""
    t = state.core.transmissions
    return [(int(t.row[i]), int(t.col[i]), int(t.turns_remaining[i]))
            for i in range(int(t.active.sum()))]


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


@pytest.mark.parametrize("kind", ["credits", "energy"])
def test_a_collected_pickup_leaves_either_kind_of_resource_on_its_cell(kind):
    """§6.1: any credits/energy on a collected pickup's cell stay there, whichever kind."""
    d = {"player": {"row": 0, "col": 0},
         "resources": [{"row": 0, "col": 1, kind: 3}, {"row": 0, "col": 1, "dataSiphon": True}]}
    moved, outcome = resolve(d, RIGHT)
    cells = moved.core.cells
    assert bool(outcome.data_siphon_collected) and int(cells.content[0, 1]) == C.EMPTY
    assert (int(cells.credits[0, 1]), int(cells.energy[0, 1])) == (
        (3, 0) if kind == "credits" else (0, 3))
    assert (int(moved.core.credits), int(moved.core.energy)) == (0, 0)


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


# --- line of fire edge cases (§6.1) ---------------------------------------------------------

# name -> (setup, action, player cell after, enemies after as (type, hp, stunned), transmissions
# left, kills)
LINE_OF_FIRE_CASES = {
    "transmission on a block past an empty cell": (
        {"player": {"row": 0, "col": 0},
         "blocks": [{"row": 0, "col": 2, "type": "data", "points": 1}],
         "transmissions": [{"row": 0, "col": 2, "turnsRemaining": 2, "enemyType": "virus"}],
         "enemies": [{"type": "virus", "row": 0, "col": 4, "hp": 2}]},
        RIGHT, (0, 0), [("virus", 2, False)], 0, 1),
    "enemy on a siphoned block at range": (
        {"player": {"row": 0, "col": 0},
         "blocks": [{"row": 3, "col": 0, "type": "data", "points": 1, "siphoned": True}],
         "enemies": [{"type": "virus", "row": 3, "col": 0, "hp": 2},
                     {"type": "glitch", "row": 5, "col": 0, "hp": 2}]},
        UP, (0, 0), [("virus", 1, True), ("glitch", 2, False)], 0, 0),
    # The line starts next to the player: an enemy sharing the player's cell is not on it.
    "enemy on the player's own cell": (
        {"player": {"row": 2, "col": 2},
         "enemies": [{"type": "daemon", "row": 2, "col": 2, "hp": 3}]},
        UP, (3, 2), [("daemon", 3, False)], 0, 0),
    "transmission before an enemy on the same block": (
        {"player": {"row": 2, "col": 2},
         "blocks": [{"row": 2, "col": 1, "type": "data", "points": 1}],
         "enemies": [{"type": "daemon", "row": 2, "col": 1, "hp": 3}],
         "transmissions": [{"row": 2, "col": 1, "turnsRemaining": 2, "enemyType": "glitch"}]},
        LEFT, (2, 2), [("daemon", 3, False)], 0, 1),
    # Only the earliest enemy on the cell is hit, and the kill follows its own flag.
    "scheduled enemy first on a shared cell": (
        {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "daemon", "row": 0, "col": 2, "hp": 1, "isFromScheduledTask": True},
                     {"type": "virus", "row": 0, "col": 2, "hp": 1}]},
        RIGHT, (0, 0), [("virus", 1, False)], 0, 0),
    "enemy with negative setup hp": (
        {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "virus", "row": 0, "col": 3, "hp": -2}]},
        RIGHT, (0, 0), [], 0, 1),
    "a hit keeps earlier stuns": (
        {"player": {"row": 0, "col": 0},
         "enemies": [{"type": "daemon", "row": 0, "col": 1, "hp": 3, "stunned": True},
                     {"type": "virus", "row": 4, "col": 4, "hp": 2, "stunned": True}]},
        RIGHT, (0, 0), [("daemon", 2, True), ("virus", 2, True)], 0, 0),
}


@pytest.mark.parametrize("case", sorted(LINE_OF_FIRE_CASES))
def test_line_of_fire_edge_cases(case):
    d, action, player, enemies, transmissions, kills = LINE_OF_FIRE_CASES[case]
    after, outcome = resolve(d, action)
    assert not outcome.failed
    assert player_at(after) == player
    assert [(e["type"], e["hp"], e["stunned"]) for e in enemy_list(after)] == enemies
    assert transmission_count(after) == transmissions and int(outcome.kills) == kills


# --- the exit (§6.1, §12.1) ------------------------------------------------------------------


@pytest.mark.parametrize("piece", [
    {"enemies": [{"type": "virus", "row": 5, "col": 5, "hp": 1}]},
    {"transmissions": [{"row": 5, "col": 5, "turnsRemaining": 3, "enemyType": "virus"}]},
], ids=["enemy", "transmission"])
def test_attacking_a_piece_on_the_exit_does_not_reach_it(piece):
    state, _, _, done, info = run({"player": {"row": 4, "col": 5}, **piece}, UP)
    assert player_at(state) == (4, 5) and int(state.stage) == 1
    assert enemy_list(state) == [] and transmission_count(state) == 0
    assert not bool(info["stage_complete"]) and not done
    # An ordinary turn: the enemy turn ran and took a snapshot.
    assert scenario.inspect(state)["turn"] == 1 and int(state.history_size) == 1


@pytest.mark.parametrize("stage", [1, 8])
def test_reaching_the_exit_runs_no_enemy_turn(stage):
    """§5/§12.1: hp + 1, the adjacent daemon neither moves nor attacks, the due transmission
    does not hatch, no turn increment and no snapshot; credits on the exit are not picked up."""
    d = {"player": {"row": 4, "col": 5, "hp": 2, "credits": 1}, "stage": stage, "turn": 7,
         "enemies": [{"type": "daemon", "row": 5, "col": 4, "hp": 3}],
         "transmissions": [{"row": 0, "col": 0, "turnsRemaining": 1, "enemyType": "virus"}],
         "resources": [{"row": 5, "col": 5, "credits": 3}]}
    state, _, _, done, info = run(d, UP)
    assert bool(info["stage_complete"]) and player_at(state) == (5, 5)
    assert int(state.core.hp) == 3 and int(state.core.credits) == 1
    [daemon] = enemy_list(state)
    assert (daemon["row"], daemon["col"], daemon["hp"], daemon["stunned"]) == (5, 4, 3, False)
    assert transmission_list(state)[0] == (0, 0, 1) and int(state.history_size) == 0
    if stage == 8:  # won: nothing generated, the turn counter stays
        assert bool(done) and bool(info["won"]) and int(state.stage) == 8
        assert scenario.inspect(state)["turn"] == 7 and transmission_count(state) == 1
    else:  # the next stage: turn 0 and `stage` new transmissions after the carried one
        assert not done and not bool(info["won"]) and int(state.stage) == 2
        assert scenario.inspect(state)["turn"] == 0 and transmission_count(state) == 1 + 2


# --- the turn counter and the snapshot (§5, §8) ----------------------------------------------


@pytest.mark.parametrize("action, turn, snapshots", [
    (UP, 6, 1),                                            # move
    (RIGHT, 6, 1),                                         # attack at range
    (C.ACTION_SIPHON, 6, 1),
    (C.FIRST_PROGRAM_ACTION + C.SIPH_PLUS, 5, 0),          # free action
])
def test_only_turn_ending_actions_advance_the_turn_and_push_a_snapshot(action, turn, snapshots):
    d = {"player": {"row": 0, "col": 0, "credits": 10, "dataSiphons": 1}, "turn": 5,
         "ownedPrograms": ["SIPH+"], "enemies": [{"type": "daemon", "row": 0, "col": 4, "hp": 3}]}
    state, _, _, done, info = run(d, action)
    assert not info["invalid_action"] and not done
    assert scenario.inspect(state)["turn"] == turn and int(state.history_size) == snapshots


# --- randomised comparison with a literal reading of §6.1 ------------------------------------

DELTAS = {UP: (1, 0), DOWN: (-1, 0), LEFT: (0, -1), RIGHT: (0, 1)}
ENEMY_TYPES = ["virus", "daemon", "glitch", "cryptog"]


def reference_move(d, action):
    """§6.1 on a scenario dict: (player cell, enemies, transmission cells, siphons, kills), or
    None when the action fails."""
    player = d["player"]
    row, col = player["row"], player["col"]
    enemies = [dict(e) for e in d["enemies"]]
    transmissions = [dict(t) for t in d["transmissions"]]
    blocks = {(b["row"], b["col"]) for b in d["blocks"]}
    pickups = {(p["row"], p["col"]) for p in d["resources"]}
    delta_row, delta_col = DELTAS[action]

    def result(cell=(row, col), siphons=0, kills=0):
        return cell, enemies, [(t["row"], t["col"]) for t in transmissions], siphons, kills

    r, c = row + delta_row, col + delta_col
    while 0 <= r < 6 and 0 <= c < 6:
        on_cell = [t for t in transmissions if (t["row"], t["col"]) == (r, c)]
        if on_cell:
            transmissions.remove(on_cell[0])
            return result(kills=int(not on_cell[0]["isFromScheduledTask"]))
        on_cell = [e for e in enemies if (e["row"], e["col"]) == (r, c)]
        if on_cell:
            target = on_cell[0]
            target["hp"] = max(target["hp"] - player["attackDamage"], 0)
            if target["hp"] > 0:
                target["stunned"] = True
                return result()
            enemies.remove(target)
            return result(kills=int(not target["isFromScheduledTask"]))
        if (r, c) in blocks:
            break
        r, c = r + delta_row, c + delta_col
    cell = (row + delta_row, col + delta_col)
    if not (0 <= cell[0] < 6 and 0 <= cell[1] < 6) or cell in blocks:
        return None
    return result(cell, siphons=int(cell in pickups))


def random_line_scenario(rng):
    """Pieces mostly on the player's row and column, so that lines of fire meet them."""
    row, col = rng.randrange(6), rng.randrange(6)

    def cell():
        if rng.random() < 0.4:
            return rng.randrange(6), rng.randrange(6)
        return (row, rng.randrange(6)) if rng.random() < 0.5 else (rng.randrange(6), col)

    taken = {(row, col), (5, 5)}
    blocks = {cell() for _ in range(rng.randrange(5))} - taken
    pickups = {cell() for _ in range(rng.randrange(3))} - taken - blocks
    return {
        "player": {"row": row, "col": col, "attackDamage": rng.randint(1, 3)},
        "blocks": [{"row": r, "col": c, "type": "data", "points": 1,
                    "siphoned": rng.random() < 0.3} for r, c in sorted(blocks)],
        "resources": [{"row": r, "col": c, "dataSiphon": True} for r, c in sorted(pickups)],
        "enemies": [{"type": rng.choice(ENEMY_TYPES), "row": r, "col": c,
                     "hp": rng.randint(-1, 3), "stunned": rng.random() < 0.3,
                     "isFromScheduledTask": rng.random() < 0.3}
                    for r, c in [cell() for _ in range(rng.randrange(5))]],
        "transmissions": [{"row": r, "col": c, "turnsRemaining": 2, "enemyType": "virus",
                           "isFromScheduledTask": rng.random() < 0.3}
                          for r, c in [cell() for _ in range(rng.randrange(3))]],
    }


def test_move_and_attack_match_a_literal_reading_of_the_rules():
    rng = random.Random(7)
    fields = ("type", "row", "col", "hp", "stunned", "isFromScheduledTask")
    for _ in range(150):
        d = random_line_scenario(rng)
        state = scenario.from_dict(d)
        for action in DELTAS:
            after, outcome = RESOLVE(KEY, state, action)
            expected = reference_move(d, action)
            assert bool(outcome.failed) == (expected is None), (d, action)
            if expected is None:
                continue
            cell, enemies, transmissions, siphons, kills = expected
            assert player_at(after) == cell, (d, action)
            assert ([tuple(e[f] for f in fields) for e in enemy_list(after)]
                    == [tuple(e.get(f, False) for f in fields) for e in enemies]), (d, action)
            assert [t[:2] for t in transmission_list(after)] == transmissions, (d, action)
            assert int(after.core.data_siphons) == siphons, (d, action)
            assert bool(outcome.data_siphon_collected) == bool(siphons), (d, action)
            assert int(outcome.kills) == kills, (d, action)
            moved = cell != (d["player"]["row"], d["player"]["col"])
            assert bool(outcome.exit_reached) == (moved and cell == (5, 5)), (d, action)
            assert bool(outcome.enemy_turn_follows) == (not outcome.exit_reached), (d, action)
