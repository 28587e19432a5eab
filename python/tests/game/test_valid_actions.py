"""The valid-action mask (rules §4, §7.1 applicability) and invalid actions (§4.4)."""

import jax
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import history, scenario

import compiled

MASK = compiled.VALID_ACTIONS
STEP = compiled.STEP
KEY = jax.random.PRNGKey(0)
UP, DOWN, LEFT, RIGHT = range(4)
ALL_PROGRAMS = list(range(C.FIRST_PROGRAM_ACTION, C.NUM_ACTIONS))


def mask(d):
    return np.asarray(MASK(scenario.from_dict(d)))


def rich(**extra):
    """A player at (2,2) owning every program with plenty of credits and energy."""
    return {"player": {"row": 2, "col": 2, "credits": 20, "energy": 20},
            "ownedPrograms": ALL_PROGRAMS, **extra}


# --- directions (§4.1) -----------------------------------------------------------------------


def test_directions_off_the_board_are_invalid():
    assert list(mask({"player": {"row": 0, "col": 0}})[:4]) == [True, False, False, True]
    assert list(mask({"player": {"row": 5, "col": 5}})[:4]) == [False, True, True, False]


@pytest.mark.parametrize("siphoned", [False, True])
def test_a_block_next_to_the_player_is_invalid_even_when_siphoned(siphoned):
    d = {"player": {"row": 2, "col": 2},
         "blocks": [{"row": 3, "col": 2, "type": "data", "points": 1, "siphoned": siphoned}]}
    assert list(mask(d)[:4]) == [False, True, True, True]


def test_an_enemy_on_a_block_makes_the_direction_valid():
    d = {"player": {"row": 2, "col": 2},
         "blocks": [{"row": 2, "col": 3, "type": "question", "points": 3}],
         "enemies": [{"type": "glitch", "row": 2, "col": 3, "hp": 2}]}
    assert mask(d)[RIGHT]


@pytest.mark.parametrize("hp", [0, -1])
def test_an_enemy_given_no_hp_on_a_block_still_makes_the_direction_valid(hp):
    """§4.1 counts any enemy standing on the block, as §4.3 does for programs."""
    d = {"player": {"row": 2, "col": 2},
         "blocks": [{"row": 1, "col": 2, "type": "data", "points": 3}],
         "enemies": [{"type": "daemon", "row": 1, "col": 2, "hp": hp}]}
    assert mask(d)[DOWN]


def test_a_transmission_alone_on_a_block_leaves_the_direction_out():
    """Setup-only exception (§4.1): not in the list, though executing it would succeed."""
    d = {"player": {"row": 2, "col": 2},
         "blocks": [{"row": 2, "col": 1, "type": "data", "points": 3}],
         "transmissions": [{"row": 2, "col": 1, "turnsRemaining": 2, "enemyType": "virus"}]}
    assert not mask(d)[LEFT]
    _, _, reward, done, info = STEP(KEY, scenario.from_dict(d), LEFT)
    assert not info["invalid_action"] and not done
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)


def test_the_line_beyond_the_next_cell_is_not_considered():
    d = {"player": {"row": 2, "col": 2},
         "blocks": [{"row": 3, "col": 2, "type": "data", "points": 1}],
         "enemies": [{"type": "virus", "row": 5, "col": 2, "hp": 2}]}
    assert not mask(d)[UP]


def test_open_cells_with_pieces_exit_pickups_and_resources_are_valid():
    d = {"player": {"row": 4, "col": 4},
         "enemies": [{"type": "daemon", "row": 3, "col": 4, "hp": 3}],
         "transmissions": [{"row": 4, "col": 3, "turnsRemaining": 2, "enemyType": "virus"}],
         "resources": [{"row": 5, "col": 4, "dataSiphon": True}, {"row": 4, "col": 5, "energy": 2}]}
    assert mask(d)[:4].all()


# --- siphon (§4.2) ---------------------------------------------------------------------------


@pytest.mark.parametrize("siphons, valid", [(0, False), (1, True), (3, True)])
def test_siphon_needs_a_charge_and_nothing_else(siphons, valid):
    assert mask({"player": {"row": 0, "col": 0, "dataSiphons": siphons}})[C.ACTION_SIPHON] == valid


# --- programs (§4.3, §7.1) -------------------------------------------------------------------

VIRUS = {"type": "virus", "row": 5, "col": 5, "hp": 2}
DAEMON = {"type": "daemon", "row": 5, "col": 5, "hp": 3}
TRANSMISSION = {"row": 5, "col": 0, "turnsRemaining": 2, "enemyType": "virus"}

# program -> (fields making it applicable, fields making it not applicable)
APPLICABILITY = {
    "PUSH": ({"enemies": [VIRUS]}, {"transmissions": [TRANSMISSION]}),
    "PULL": ({"enemies": [DAEMON]}, {}),
    "CRASH": ({"blocks": [{"row": 3, "col": 3, "type": "data", "points": 1}]},
              {"blocks": [{"row": 4, "col": 2, "type": "data", "points": 1}],
               "enemies": [{"type": "virus", "row": 2, "col": 4, "hp": 2}],
               "transmissions": [{"row": 0, "col": 2, "turnsRemaining": 1, "enemyType": "virus"}]}),
    "WARP": ({"transmissions": [TRANSMISSION]}, {}),
    "POLY": ({"enemies": [VIRUS]}, {"transmissions": [TRANSMISSION]}),
    "WAIT": ({}, None),
    "DEBUG": ({"blocks": [{"row": 5, "col": 4, "type": "data", "points": 1, "siphoned": True}],
               "enemies": [{"type": "glitch", "row": 5, "col": 4, "hp": 2}]},
              {"blocks": [{"row": 4, "col": 4, "type": "data", "points": 1}],
               "enemies": [{"type": "glitch", "row": 5, "col": 5, "hp": 2}]}),
    "ROW": ({"enemies": [{"type": "cryptog", "row": 2, "col": 5, "hp": 2}]},
            {"enemies": [{"type": "virus", "row": 3, "col": 5, "hp": 2}]}),
    "COL": ({"enemies": [{"type": "virus", "row": 5, "col": 2, "hp": 2}]},
            {"enemies": [{"type": "virus", "row": 5, "col": 3, "hp": 2}]}),
    "STEP": ({"stepActive": True}, None),
    "SIPH+": ({}, None),
    "EXCH": ({}, {"player": {"row": 2, "col": 2, "credits": 3, "energy": 20}}),
    "SHOW": ({}, {"showActivated": True}),
    "RESET": ({"player": {"row": 2, "col": 2, "credits": 20, "energy": 20, "hp": 2}}, {}),
    "CALM": ({}, {"scheduledTasksDisabled": True}),
    "D_BOM": ({"enemies": [VIRUS, DAEMON]}, {"enemies": [VIRUS]}),
    "DELAY": ({"transmissions": [TRANSMISSION]}, {"enemies": [VIRUS]}),
    "ANTI-V": ({"enemies": [DAEMON, VIRUS]}, {"enemies": [DAEMON]}),
    "SCORE": ({"stage": 7}, {"stage": 8}),
    "REDUC": ({"blocks": [{"row": 0, "col": 0, "type": "question", "points": 1}]},
              {"blocks": [{"row": 0, "col": 0, "type": "data", "points": 3, "siphoned": True},
                          {"row": 0, "col": 1, "type": "data", "points": 3, "spawnCount": 0}]}),
    "ATK+": ({"atkPlusUsesThisStage": 1}, {"atkPlusUsesThisStage": 2}),
    "HACK": ({"siphonedCells": [{"row": 0, "col": 4}]}, {}),
}


action_of = compiled.program_action


@pytest.mark.parametrize("name", sorted(APPLICABILITY))
def test_program_applicability(name):
    applicable, not_applicable = APPLICABILITY[name]
    assert mask(rich(**applicable))[action_of(name)]
    if not_applicable is not None:
        assert not mask(rich(**not_applicable))[action_of(name)]


def test_undo_needs_a_snapshot():
    state = scenario.from_dict(rich())
    assert not np.asarray(MASK(state))[action_of("UNDO")]
    assert np.asarray(MASK(history.push(state, True)))[action_of("UNDO")]


@pytest.mark.parametrize("enemy", [
    {"type": "cryptog", "row": 5, "col": 5, "hp": 2},                 # hidden
    {"type": "virus", "row": 5, "col": 5, "hp": 2, "stunned": True},
    {"type": "virus", "row": 5, "col": 5, "hp": 2, "disabledTurns": 1},
    {"type": "daemon", "row": 5, "col": 5, "hp": 0},                  # dead by setup
])
def test_every_enemy_in_the_list_counts(enemy):
    valid = mask(rich(enemies=[enemy]))
    assert valid[action_of("PUSH")] and valid[action_of("PULL")] and valid[action_of("POLY")]
    assert valid[action_of("WARP")]


def test_programs_must_be_owned():
    d = {"player": {"row": 2, "col": 2, "credits": 20, "energy": 20, "hp": 2},
         "ownedPrograms": ["WAIT"]}
    valid = mask(d)
    assert valid[C.ACTION_WAIT] and valid[C.FIRST_PROGRAM_ACTION:].sum() == 1


@pytest.mark.parametrize("name", C.PROGRAM_NAMES)
def test_programs_must_be_affordable(name):
    index = C.PROGRAM_NAMES.index(name)
    credits, energy = int(C.PROGRAM_CREDIT_COST[index]), int(C.PROGRAM_ENERGY_COST[index])
    applicable, _ = APPLICABILITY.get(name, ({}, None))
    base = {**applicable, "ownedPrograms": [name]}
    player = dict(base.get("player", {"row": 2, "col": 2}))

    def valid_with(credits, energy):
        state = scenario.from_dict({**base, "player": {**player, "credits": credits,
                                                       "energy": energy}})
        if name == "UNDO":  # applicable only with a snapshot to restore
            state = history.push(state, True)
        return np.asarray(MASK(state))[action_of(name)]

    if credits:
        assert not valid_with(credits - 1, 20)
    if energy:
        assert not valid_with(20, energy - 1)
    assert valid_with(credits, energy)


# --- invalid actions (§4.4) ------------------------------------------------------------------

INVALID_CASES = {
    "off the board": ({"player": {"row": 0, "col": 0}}, DOWN),
    "into a block": ({"player": {"row": 0, "col": 0},
                      "blocks": [{"row": 1, "col": 0, "type": "data", "points": 1}]}, UP),
    "siphon without charges": ({"player": {"row": 3, "col": 3}}, C.ACTION_SIPHON),
    "program not owned": ({"player": {"row": 3, "col": 3, "energy": 5}}, C.ACTION_WAIT),
    "program unaffordable": ({"player": {"row": 3, "col": 3, "credits": 4, "energy": 3},
                              "ownedPrograms": ["ATK+"]}, action_of("ATK+")),
    "program not applicable": ({"player": {"row": 3, "col": 3, "energy": 5},
                                "ownedPrograms": ["PUSH"]}, action_of("PUSH")),
    "undo without history": ({"player": {"row": 3, "col": 3, "credits": 5},
                              "ownedPrograms": ["UNDO"]}, action_of("UNDO")),
    # Numbers that name no action fail too, even where a move or HACK would succeed.
    "negative number": ({"player": {"row": 2, "col": 2}}, -1),
    "number past the last action": (
        {"player": {"row": 2, "col": 2, "credits": 5, "energy": 5}, "ownedPrograms": ["HACK"],
         "siphonedCells": [{"row": 0, "col": 0}],
         "enemies": [{"type": "daemon", "row": 0, "col": 0, "hp": 3}]}, C.NUM_ACTIONS),
}


@pytest.mark.parametrize("case", sorted(INVALID_CASES))
def test_invalid_action_changes_nothing_and_ends_the_episode(case):
    d, action = INVALID_CASES[case]
    state = scenario.from_dict(d)
    assert not (0 <= action < C.NUM_ACTIONS and np.asarray(MASK(state))[action])
    new_state, _, reward, done, info = STEP(KEY, state, action)
    for old, new in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(new_state)):
        np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
    assert float(reward) == 0.0 and bool(done) and bool(info["invalid_action"])
    assert all(float(v) == 0.0 for v in info["reward_components"].values())
    assert not info["death"] and not info["won"] and not info["stage_complete"]
