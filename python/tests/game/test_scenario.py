"""Scenario API (rules Appendix A): fields, defaults, order of application, errors, round trip."""

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import action_mask
from hackmatrix.game import constants as C
from hackmatrix.game import observation
from hackmatrix.game import renderer
from hackmatrix.game import scenario
from hackmatrix.game import transition

import compiled

PLAYER = {"row": 3, "col": 3}


def build(**fields):
    return scenario.from_dict({"player": dict(PLAYER), **fields})


def cells(state):
    return jax.tree_util.tree_map(np.asarray, state.core.cells)


def assert_states_equal(a, b):
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ---------------------------------------------------------------------------------------------
# A.1 fields and defaults


def test_player_defaults():
    core = build().core
    assert (int(core.player_row), int(core.player_col)) == (3, 3)
    assert int(core.hp) == 3
    assert [int(core.credits), int(core.energy), int(core.data_siphons), int(core.score)] == [0] * 4
    assert int(core.attack_damage) == 1


def test_player_fields_given():
    core = scenario.from_dict({"player": {"row": 0, "col": 5, "hp": 2, "credits": 7, "energy": 4,
                                          "dataSiphons": 2, "score": 11,
                                          "attackDamage": 5}}).core
    assert (int(core.player_row), int(core.player_col), int(core.hp)) == (0, 5, 2)
    assert (int(core.credits), int(core.energy), int(core.data_siphons)) == (7, 4, 2)
    assert (int(core.score), int(core.attack_damage)) == (11, 5)


@pytest.mark.parametrize("hp, stored", [(0, 0), (1, 1), (3, 3), (4, 3), (-1, 3), (99, 3)])
def test_hp_outside_0_to_3_is_treated_as_3(hp, stored):
    assert int(scenario.from_dict({"player": {**PLAYER, "hp": hp}}).core.hp) == stored


def test_global_defaults_and_hidden_values_after_setup():
    state = build()
    assert int(state.stage) == 1 and int(state.core.turn) == 0
    assert not bool(state.core.show_activated)
    assert not bool(state.core.scheduled_tasks_disabled)
    assert not np.asarray(state.core.owned).any()
    # A.3
    assert int(state.scheduled_interval) == 12 and int(state.next_scheduled_turn) == 12
    assert int(state.pending_siphon_transmissions) == 0
    assert not bool(state.step_active)
    assert int(state.core.atk_plus_uses) == 0
    assert int(state.history_size) == 0
    assert (int(state.exit_row), int(state.exit_col)) == (5, 5)
    assert not np.asarray(state.core.enemies.active).any()
    assert not np.asarray(state.core.transmissions.active).any()
    board = cells(state)
    expected_content = np.zeros((6, 6), np.int32)
    expected_content[5, 5] = C.EXIT
    np.testing.assert_array_equal(board.content, expected_content)
    assert not board.siphoned.any() and not board.siphon_center.any()
    assert not board.credits.any() and not board.energy.any()


def test_hidden_values_do_not_depend_on_stage_or_turn():
    state = build(stage=6, turn=20, showActivated=True, scheduledTasksDisabled=True)
    assert (int(state.stage), int(state.core.turn)) == (6, 20)
    assert bool(state.core.show_activated) and bool(state.core.scheduled_tasks_disabled)
    assert int(state.scheduled_interval) == 12 and int(state.next_scheduled_turn) == 12


def test_owned_programs_by_index_and_name():
    state = build(ownedPrograms=[8, "siph+", "Anti-V", "d_bom", 27, 8])
    owned = np.flatnonzero(np.asarray(state.core.owned))
    assert owned.tolist() == sorted([C.WARP, C.SIPH_PLUS, C.ANTI_V, C.D_BOM, C.HACK])


def test_enemies_full_field_set_in_order():
    state = build(enemies=[
        {"type": "Virus", "row": 4, "col": 3, "hp": 2},
        {"type": "DAEMON", "row": 0, "col": 0, "hp": 7, "stunned": True, "spawnedFromSiphon": True,
         "isFromScheduledTask": True},
        {"type": "cryptog", "row": 1, "col": 2, "hp": -1},
        {"type": "glitch", "row": 1, "col": 2, "hp": 0},
    ])
    assert scenario.inspect(state)["enemies"] == [
        {"row": 4, "col": 3, "type": "virus", "hp": 2, "disabledTurns": 0, "stunned": False,
         "spawnedFromSiphon": False, "isFromScheduledTask": False},
        {"row": 0, "col": 0, "type": "daemon", "hp": 7, "disabledTurns": 0, "stunned": True,
         "spawnedFromSiphon": True, "isFromScheduledTask": True},
        {"row": 1, "col": 2, "type": "cryptog", "hp": -1, "disabledTurns": 0, "stunned": False,
         "spawnedFromSiphon": False, "isFromScheduledTask": False},
        {"row": 1, "col": 2, "type": "glitch", "hp": 0, "disabledTurns": 0, "stunned": False,
         "spawnedFromSiphon": False, "isFromScheduledTask": False},
    ]
    assert np.asarray(state.core.enemies.active).tolist() == [True] * 4 + [False] * 32


def test_transmissions_in_order_with_flags_false():
    state = build(transmissions=[
        {"row": 4, "col": 3, "turnsRemaining": 3, "enemyType": "Glitch"},
        {"row": 0, "col": 1, "turnsRemaining": -2, "enemyType": "cryptog"},
    ])
    t = jax.tree_util.tree_map(np.asarray, state.core.transmissions)
    assert t.active[:3].tolist() == [True, True, False]
    assert t.row[:2].tolist() == [4, 0] and t.col[:2].tolist() == [3, 1]
    assert t.turns_remaining[:2].tolist() == [3, -2]  # verbatim
    assert t.enemy_type[:2].tolist() == [C.GLITCH, C.CRYPTOG]
    assert not t.from_siphon.any() and not t.from_scheduled.any()


def test_data_block_spawn_count_defaults_to_points():
    board = cells(build(blocks=[{"row": 1, "col": 1, "type": "data", "points": 6},
                                {"row": 2, "col": 1, "type": "data", "points": 6, "spawnCount": 0},
                                {"row": 3, "col": 1, "type": "data"}]))
    assert board.content[1, 1] == C.DATA_BLOCK
    assert (board.points[1, 1], board.spawn_count[1, 1]) == (6, 6)
    assert (board.points[2, 1], board.spawn_count[2, 1]) == (6, 0)  # zero given is used
    assert (board.points[3, 1], board.spawn_count[3, 1]) == (0, 0)
    assert board.program[1, 1] == C.NO_PROGRAM


def test_program_block_spawn_count_defaults_to_spawn_cost():
    board = cells(build(blocks=[{"row": 1, "col": 1, "type": "program", "program": "ATK+"},
                                {"row": 1, "col": 2, "type": "program", "program": 10,
                                 "spawnCount": 9}]))
    assert board.content[1, 1] == C.PROGRAM_BLOCK
    assert (board.program[1, 1], board.spawn_count[1, 1]) == (C.ATK_PLUS, 8)
    assert (board.program[1, 2], board.spawn_count[1, 2]) == (C.WAIT, 9)


def test_question_block_hidden_content():
    board = cells(build(blocks=[
        {"row": 1, "col": 1, "type": "question", "points": 4},
        {"row": 1, "col": 2, "type": "question", "program": "CALM", "points": 4},
        {"row": 1, "col": 3, "type": "question", "program": "CALM", "spawnCount": 1},
    ]))
    assert (board.content[1, 1:4] == C.QUESTION_BLOCK).all()
    # data content: points, spawnCount = points
    assert (board.points[1, 1], board.program[1, 1], board.spawn_count[1, 1]) == (
        4, C.NO_PROGRAM, 4)
    # program content: the program, spawnCount = its spawn cost (CALM: 6)
    assert (board.program[1, 2], board.spawn_count[1, 2]) == (C.CALM, 6)
    assert (board.program[1, 3], board.spawn_count[1, 3]) == (C.CALM, 1)


def test_later_block_entry_replaces_earlier():
    board = cells(build(blocks=[
        {"row": 2, "col": 2, "type": "program", "program": "WARP"},
        {"row": 2, "col": 2, "type": "data", "points": 3},
    ]))
    assert board.content[2, 2] == C.DATA_BLOCK
    assert (board.points[2, 2], board.program[2, 2], board.spawn_count[2, 2]) == (
        3, C.NO_PROGRAM, 3)


def test_siphoned_flag_is_never_cleared_by_a_later_entry():
    board = cells(build(blocks=[
        {"row": 2, "col": 2, "type": "data", "points": 3, "siphoned": True},
        {"row": 2, "col": 2, "type": "program", "program": "WARP", "siphoned": False},
    ]))
    assert board.content[2, 2] == C.PROGRAM_BLOCK and board.siphoned[2, 2]
    assert board.siphoned.sum() == 1


def test_siphoned_flag_stays_when_the_block_is_replaced_by_a_pickup_or_the_exit():
    board = cells(build(
        blocks=[{"row": 0, "col": 0, "type": "data", "points": 1, "siphoned": True},
                {"row": 5, "col": 5, "type": "data", "points": 1, "siphoned": True}],
        resources=[{"row": 0, "col": 0, "dataSiphon": True}]))
    assert board.content[0, 0] == C.DATA_SIPHON and board.siphoned[0, 0]
    assert board.content[5, 5] == C.EXIT and board.siphoned[5, 5]
    assert board.points[0, 0] == 0 and board.spawn_count[5, 5] == 0


def test_resources_one_kind_per_cell_and_replacement_rules():
    board = cells(build(resources=[
        {"row": 0, "col": 1, "credits": 2, "energy": 3},     # credits win
        {"row": 0, "col": 2, "energy": 3},
        {"row": 0, "col": 2, "credits": 1},                  # replaces the energy
        {"row": 0, "col": 3, "credits": 2},
        {"row": 0, "col": 3},                                # sets neither: unchanged
        {"row": 0, "col": 4, "energy": 1},
        {"row": 0, "col": 4, "dataSiphon": True, "credits": 5},  # pickup, credits ignored
        {"row": 1, "col": 0, "credits": 0, "energy": 0},
    ]))
    assert (board.credits[0, 1], board.energy[0, 1]) == (2, 0)
    assert (board.credits[0, 2], board.energy[0, 2]) == (1, 0)
    assert (board.credits[0, 3], board.energy[0, 3]) == (2, 0)
    assert (board.credits[0, 4], board.energy[0, 4]) == (0, 1)
    assert board.content[0, 4] == C.DATA_SIPHON
    assert (board.credits[1, 0], board.energy[1, 0]) == (0, 0)


def test_resources_under_blocks_and_pickup_replacing_a_block():
    board = cells(build(
        blocks=[{"row": 2, "col": 2, "type": "data", "points": 5},
                {"row": 2, "col": 3, "type": "program", "program": "WARP"}],
        resources=[{"row": 2, "col": 2, "energy": 2},
                   {"row": 2, "col": 3, "dataSiphon": True}]))
    assert board.content[2, 2] == C.DATA_BLOCK and board.energy[2, 2] == 2
    assert board.content[2, 3] == C.DATA_SIPHON
    assert board.program[2, 3] == C.NO_PROGRAM and board.spawn_count[2, 3] == 0


def test_exit_replaces_block_and_pickup_but_keeps_resource():
    state = build(blocks=[{"row": 5, "col": 5, "type": "data", "points": 9}],
                  resources=[{"row": 5, "col": 5, "credits": 3, "dataSiphon": False}])
    board = cells(state)
    assert board.content[5, 5] == C.EXIT and board.credits[5, 5] == 3
    assert board.points[5, 5] == 0 and board.spawn_count[5, 5] == 0
    board = cells(build(resources=[{"row": 5, "col": 5, "dataSiphon": True}]))
    assert board.content[5, 5] == C.EXIT


def test_player_on_the_exit_cell():
    state = scenario.from_dict({"player": {"row": 5, "col": 5}})
    assert cells(state).content[5, 5] == C.EXIT
    assert int(state.stage) == 1


def test_inputs_accept_json_text_round_trip():
    text = json.dumps({"player": PLAYER, "enemies": [{"type": "virus", "row": 1, "col": 1,
                                                      "hp": 2.0}]})
    assert scenario.inspect(scenario.from_dict(json.loads(text)))["enemies"][0]["hp"] == 2


def test_key_argument_is_accepted():
    assert_states_equal(scenario.from_dict({"player": PLAYER}, jax.random.PRNGKey(3)), build())


def test_numbers_read_out_of_a_state_are_accepted():
    # 0-d NumPy and JAX arrays, such as `state.core.hp`, hold one number or boolean.
    state = build(player={"row": jnp.int32(1), "col": np.int64(2), "hp": jnp.asarray(2)},
                  showActivated=jnp.bool_(True), ownedPrograms=[jnp.int32(15), np.array(10)],
                  blocks=[{"row": 0, "col": 0, "type": "program", "program": jnp.int32(9)}])
    assert_states_equal(state, build(player={"row": 1, "col": 2, "hp": 2}, showActivated=True,
                                     ownedPrograms=[15, 10],
                                     blocks=[{"row": 0, "col": 0, "type": "program",
                                              "program": 9}]))
    for value, message in ((jnp.float32(1.5), "expected an integer, got 1.5"),
                           (jnp.zeros(2, jnp.int32), "expected an integer, got Array(")):
        with pytest.raises(ValueError, match=re.escape(f"player.row: {message}")):
            build(player={"row": value, "col": 0})


def test_a_batch_of_states_is_refused_by_the_functions_of_one_game():
    # Otherwise some shape deep inside fails, naming nothing the caller wrote.
    batch = jax.tree.map(lambda *leaves: jnp.stack(leaves), build(), build())
    hint = "jax.tree.map(lambda leaf: leaf[i], states) picks game i"
    for name, call in (("observe", observation.observe),
                       ("valid_actions", action_mask.valid_actions),
                       ("step", lambda s: jax.jit(transition.step)(jax.random.PRNGKey(0), s, 0))):
        with pytest.raises(ValueError, match=re.escape(
                f"{name} takes one game state, got a batch of shape (2,): jax.vmap({name}) "
                f"handles a batch, and {hint}")):
            call(batch)
    for name, call in (("render", renderer.render), ("inspect", scenario.inspect),
                       ("to_dict", scenario.to_dict)):
        with pytest.raises(ValueError, match=re.escape(
                f"{name} takes one game state, got a batch of shape (2,): {hint}")):
            call(batch)


# ---------------------------------------------------------------------------------------------
# Errors name the offending field


@pytest.mark.parametrize("d, message", [
    ({}, "player: missing required field"),
    ({"player": {"row": 3}}, "player.col: missing required field"),
    ({"player": {"row": 6, "col": 0}}, "player.row: 6 is off the board"),
    ({"player": {"row": 0, "col": -1}}, "player.col: -1 is off the board"),
    ({"player": {"row": "3", "col": 0}}, "player.row: expected an integer"),
    ({"player": {"row": 1.5, "col": 0}}, "player.row: expected an integer"),
    ({"player": {"row": True, "col": 0}}, "player.row: expected an integer"),
    ({"player": [3, 3]}, "player: expected an object"),
    ({"player": {**PLAYER, "credits": -1}}, "player.credits: must be >= 0"),
    ({"player": {**PLAYER, "hp": None}}, "player.hp: expected an integer"),
    ({"player": {**PLAYER, "health": 3}}, "player.health: unknown field"),
    ({"player": PLAYER, "stage": 9}, "stage: must be 1-8"),
    ({"player": PLAYER, "stage": "2"}, "stage: expected an integer"),
    ({"player": PLAYER, "turn": -1}, "turn: must be >= 0"),
    ({"player": PLAYER, "showActivated": 1}, "showActivated: expected true or false"),
    ({"player": PLAYER, "scheduledTasksDisabled": "yes"},
     "scheduledTasksDisabled: expected true or false"),
    ({"player": PLAYER, "bonus": 1}, "bonus: unknown field"),
    ({"player": PLAYER, "enemies": {"type": "virus"}}, "enemies: expected a list"),
    ({"player": PLAYER, "enemies": [{"type": "virus", "row": 1, "col": 1, "hp": 1},
                                    {"type": "virus", "row": 1, "col": 1, "hp": 1},
                                    {"type": "dragon", "row": 1, "col": 1, "hp": 1}]},
     "enemies[2].type: unknown enemy type 'dragon'"),
    ({"player": PLAYER, "enemies": [{"row": 1, "col": 1, "hp": 1}]},
     "enemies[0].type: missing required field"),
    ({"player": PLAYER, "enemies": [{"type": "virus", "row": 1, "col": 1}]},
     "enemies[0].hp: missing required field"),
    ({"player": PLAYER, "enemies": [{"type": "virus", "row": 1, "col": 7, "hp": 1}]},
     "enemies[0].col: 7 is off the board"),
    ({"player": PLAYER, "enemies": [{"type": "virus", "row": 1, "col": 1, "hp": 1,
                                     "stunned": "no"}]},
     "enemies[0].stunned: expected true or false"),
    ({"player": PLAYER, "enemies": [{"type": 3, "row": 1, "col": 1, "hp": 1}]},
     "enemies[0].type: unknown enemy type 3"),
    ({"player": PLAYER, "enemies": ["virus"]}, "enemies[0]: expected an object"),
    ({"player": PLAYER, "transmissions": [{"row": 1, "col": 1, "turnsRemaining": 2,
                                           "enemyType": "ghost"}]},
     "transmissions[0].enemyType: unknown enemy type 'ghost'"),
    ({"player": PLAYER, "transmissions": [{"row": 1, "col": 1, "enemyType": "virus"}]},
     "transmissions[0].turnsRemaining: missing required field"),
    ({"player": PLAYER, "transmissions": [{"row": -1, "col": 1, "turnsRemaining": 1,
                                           "enemyType": "virus"}]},
     "transmissions[0].row: -1 is off the board"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "Data"}]},
     "blocks[0].type: unknown block type 'Data'"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "wall"}]},
     "blocks[0].type: unknown block type 'wall'"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1}]}, "blocks[0].type: missing required"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 6, "type": "data"}]},
     "blocks[0].col: 6 is off the board"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "program"}]},
     "blocks[0].program: missing required field"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "program", "program": "NUKE"}]},
     "blocks[0].program: unknown program 'NUKE'"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "program", "program": 4}]},
     "blocks[0].program: program action index must be 5-27, got 4"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "program", "program": 28}]},
     "blocks[0].program: program action index must be 5-27, got 28"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "data", "program": "NUKE"}]},
     "blocks[0].program: unknown program 'NUKE'"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "question", "points": 2,
                                    "siphoned": True}]},
     "blocks[0].siphoned: a question block cannot be on a siphoned cell"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "data", "siphoned": True},
                                   {"row": 1, "col": 1, "type": "question", "points": 2}]},
     "blocks[1]: a question block cannot be on a cell an earlier entry marked siphoned"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "question", "points": 2}],
      "siphonedCells": [{"row": 1, "col": 1}]},
     "siphonedCells[0]: a question block cannot be on a siphoned cell"),
    ({"player": PLAYER, "exitPosition": {"row": 6, "col": 0}},
     "exitPosition.row: 6 is off the board"),
    ({"player": PLAYER, "exitPosition": {"row": 2, "col": 5}},
     "exitPosition: (2, 5) is not a corner"),
    ({"player": PLAYER, "exitCell": {"row": 3, "col": 0}}, "exitCell: (3, 0) is not a corner"),
    ({"player": PLAYER, "scheduledTaskInterval": -1},
     "scheduledTaskInterval: must be >= 0, got -1"),  # 0: no scheduled tasks (§8 step 5)
    ({"player": PLAYER, "nextScheduledTaskTurn": -5}, "nextScheduledTaskTurn: must be >= 0"),
    ({"player": PLAYER, "pendingSiphonTransmissions": -4},
     "pendingSiphonTransmissions: must be >= 0"),
    ({"player": PLAYER, "atkPlusUsesThisStage": -2}, "atkPlusUsesThisStage: must be >= 0"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": ["data"]}]},
     "blocks[0].type: unknown block type ['data']"),
    # The state holds int32 (a wider value used to escape as an OverflowError naming nothing).
    ({"player": {**PLAYER, "credits": 2**31}},
     "player.credits: 2147483648 does not fit in 32 bits"),
    ({"player": PLAYER, "enemies": [{"type": "virus", "row": 0, "col": 0, "hp": -2**40}]},
     "enemies[0].hp: -1099511627776 does not fit in 32 bits"),
    ({"player": PLAYER, "turn": 1e20}, "turn: 100000000000000000000 does not fit in 32 bits"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "data", "points": "9"}]},
     "blocks[0].points: expected an integer"),
    # Points and spawn counts feed the score and the siphon's transmissions (§2.1: never < 0).
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "data", "points": -3}]},
     "blocks[0].points: must be >= 0, got -3"),
    ({"player": PLAYER, "blocks": [{"row": 1, "col": 1, "type": "program", "program": "WARP",
                                    "spawnCount": -1}]},
     "blocks[0].spawnCount: must be >= 0, got -1"),
    ({"player": PLAYER, "resources": [{"row": 1, "col": 9, "credits": 1}]},
     "resources[0].col: 9 is off the board"),
    ({"player": PLAYER, "resources": [{"col": 1, "credits": 1}]},
     "resources[0].row: missing required field"),
    ({"player": PLAYER, "resources": [{"row": 1, "col": 1, "dataSiphon": 1}]},
     "resources[0].dataSiphon: expected true or false"),
    ({"player": PLAYER, "ownedPrograms": [8, 3]},
     "ownedPrograms[1]: program action index must be 5-27, got 3"),
    ({"player": PLAYER, "ownedPrograms": ["warp", "teleport"]},
     "ownedPrograms[1]: unknown program 'teleport'"),
    ({"player": PLAYER, "ownedPrograms": [None]}, "ownedPrograms[0]: expected a program name"),
    ({"player": PLAYER, "ownedPrograms": "WARP"}, "ownedPrograms: expected a list"),
    ({"player": PLAYER, "enemies": [{"type": "virus", "row": 0, "col": 0, "hp": 1}] * 37},
     "enemies: 37 enemies exceed the capacity of 36"),
    ({"player": PLAYER, "transmissions": [{"row": 0, "col": 0, "turnsRemaining": 1,
                                           "enemyType": "virus"}] * 37},
     "transmissions: 37 transmissions exceed the capacity of 36"),
    ("not a dict", "scenario: expected an object, got string 'not a dict'"),
    ({"player": None}, "player: expected an object, got null"),
    ({"player": PLAYER, "enemies": {"type": "virus"}}, "enemies: expected a list, got an object"),
    ([PLAYER], "scenario: expected an object, got a list"),
    ({"player": {"row": True, "col": 0}}, "player.row: expected an integer, got true"),
    ({"player": {"row": None, "col": 0}}, "player.row: expected an integer, got null"),
    ({"player": PLAYER, "showActivated": None}, "showActivated: expected true or false, got null"),
    ({"player": PLAYER, "enemies": [{"type": None, "row": 0, "col": 0, "hp": 1}]},
     "enemies[0].type: unknown enemy type null"),
])
def test_bad_input_raises_value_error_naming_the_field(d, message):
    with pytest.raises(ValueError) as error:
        scenario.from_dict(d)
    assert str(error.value).startswith(message)


def test_capacity_is_exactly_36():
    state = build(enemies=[{"type": "virus", "row": 0, "col": 0, "hp": 1}] * 36,
                  transmissions=[{"row": 1, "col": 0, "turnsRemaining": 1,
                                  "enemyType": "daemon"}] * 36)
    assert np.asarray(state.core.enemies.active).all()
    assert np.asarray(state.core.transmissions.active).all()


# ---------------------------------------------------------------------------------------------
# inspect and to_dict


def test_inspect_reports_the_hidden_values():
    state = build(turn=7, enemies=[{"type": "glitch", "row": 2, "col": 4, "hp": 1,
                                    "stunned": True}])
    state = state.replace(scheduled_interval=np.int32(9), next_scheduled_turn=np.int32(21),
                          pending_siphon_transmissions=np.int32(4))
    assert scenario.inspect(state) == {
        "scheduledTaskInterval": 9, "nextScheduledTaskTurn": 21,
        "pendingSiphonTransmissions": 4, "turn": 7,
        "enemies": [{"row": 2, "col": 4, "type": "glitch", "hp": 1, "disabledTurns": 0,
                     "stunned": True, "spawnedFromSiphon": False,
                     "isFromScheduledTask": False}],
    }


RICH_SCENARIO = {
    "player": {"row": 2, "col": 2, "hp": 1, "credits": 5, "energy": 6, "dataSiphons": 2,
               "score": 13, "attackDamage": 3},
    "enemies": [{"type": "cryptog", "row": 0, "col": 3, "hp": 2, "stunned": True},
                {"type": "virus", "row": 0, "col": 3, "hp": -1, "spawnedFromSiphon": True,
                 "isFromScheduledTask": True}],
    "transmissions": [{"row": 4, "col": 4, "turnsRemaining": 0, "enemyType": "daemon"}],
    "blocks": [{"row": 1, "col": 1, "type": "data", "points": 7, "spawnCount": 2,
                "siphoned": True},
               {"row": 1, "col": 2, "type": "program", "program": "HACK"},
               {"row": 3, "col": 1, "type": "question", "program": "ROW"},
               {"row": 3, "col": 2, "type": "question", "points": 5, "spawnCount": 1},
               {"row": 0, "col": 0, "type": "data", "points": 1, "siphoned": True}],
    "resources": [{"row": 1, "col": 1, "credits": 3}, {"row": 0, "col": 0, "energy": 2},
                  {"row": 0, "col": 0, "dataSiphon": True}, {"row": 5, "col": 5, "energy": 1}],
    "ownedPrograms": ["WARP", 27],
    "stage": 4, "turn": 9, "showActivated": True, "scheduledTasksDisabled": True,
}


def test_to_dict_round_trip_of_a_scenario():
    state = scenario.from_dict(RICH_SCENARIO)
    saved = scenario.to_dict(state)
    assert json.loads(json.dumps(saved)) == saved  # JSON-compatible
    assert_states_equal(scenario.from_dict(saved), state)


def test_to_dict_round_trip_keeps_hidden_values_and_flags():
    state = scenario.from_dict(RICH_SCENARIO)
    board = state.core.cells
    state = state.replace(
        exit_row=np.int32(0), exit_col=np.int32(5), step_active=np.bool_(True),
        scheduled_interval=np.int32(8), next_scheduled_turn=np.int32(30),
        pending_siphon_transmissions=np.int32(3),
        core=state.core.replace(
            atk_plus_uses=np.int32(2),
            enemies=state.core.enemies.replace(
                disabled_turns=state.core.enemies.disabled_turns.at[1].set(1)),
            transmissions=state.core.transmissions.replace(
                from_siphon=state.core.transmissions.from_siphon.at[0].set(True)),
            cells=board.replace(
                content=board.content.at[5, 5].set(C.EMPTY).at[0, 5].set(C.EXIT),
                siphoned=board.siphoned.at[2, 2].set(True),
                siphon_center=board.siphon_center.at[2, 2].set(True))))
    saved = scenario.to_dict(state)
    assert saved["exitPosition"] == {"row": 0, "col": 5}
    assert saved["siphonedCells"] == [{"row": 0, "col": 0}, {"row": 2, "col": 2}]
    assert saved["siphonCenterCells"] == [{"row": 2, "col": 2}]
    assert_states_equal(scenario.from_dict(json.loads(json.dumps(saved))), state)


def test_to_dict_round_trip_after_undo_across_a_stage_change():
    # §7.15: UNDO brings back the old board, exit cell included, while exitPosition stays the
    # new stage's: the two differ, and the exit cell must be saved on its own.
    start = build(player={"row": 5, "col": 4, "credits": 5, "energy": 5},
                  ownedPrograms=["UNDO", "WAIT"])
    right = 3  # §3: up, down, left, right
    state = compiled.play(start, compiled.program_action("WAIT"), right,
                          compiled.program_action("UNDO"))[0]
    exit_cells = np.argwhere(np.asarray(state.core.cells.content) == C.EXIT).tolist()
    assert exit_cells == [[5, 5]] and (int(state.exit_row), int(state.exit_col)) != (5, 5)
    saved = scenario.to_dict(state)
    assert saved["exitCell"] == {"row": 5, "col": 5}
    loaded = scenario.from_dict(json.loads(json.dumps(saved)))
    def without_history(s):  # never saved (A.3: a loaded state starts with an empty stack)
        return s.replace(history=None, history_top=None, history_size=None)
    assert_states_equal(without_history(loaded), without_history(state))


def test_to_dict_of_a_plain_scenario_has_no_extension_fields():
    saved = scenario.to_dict(build())
    assert set(saved) == {"player", "enemies", "transmissions", "blocks", "resources",
                          "ownedPrograms", "stage", "turn", "showActivated",
                          "scheduledTasksDisabled"}


def test_to_dict_round_trip_of_new_games():
    reset = jax.jit(transition.reset)
    for seed in range(3):
        state, _ = reset(jax.random.PRNGKey(seed))
        loaded = scenario.from_dict(json.loads(json.dumps(scenario.to_dict(state))))
        # Everything but the UNDO history, which is never saved (and is empty at reset anyway).
        assert_states_equal(loaded.replace(history=None), state.replace(history=None))


# ---------------------------------------------------------------------------------------------
# A.3 consequences through the step


@pytest.mark.parametrize("turn, next_due", [(10, None), (11, 24), (20, 33)])
def test_setup_turn_at_least_eleven_fires_a_scheduled_task_at_the_first_enemy_turn(turn,
                                                                                     next_due):
    # nextScheduledTaskTurn is 12 whatever the turn: WAIT makes turn + 1 >= 12 fire (§8 step 5)
    # and sets the next due turn to (turn + 1) + 12.
    state = scenario.from_dict({"player": {"row": 0, "col": 0, "energy": 1},
                                "ownedPrograms": ["WAIT"], "turn": turn})
    state = compiled.STEP(jax.random.PRNGKey(0), state, C.ACTION_WAIT)[0]
    hidden = scenario.inspect(state)
    t = jax.tree_util.tree_map(np.asarray, state.core.transmissions)
    assert hidden["turn"] == turn + 1
    if next_due is None:
        assert not t.active.any() and hidden["nextScheduledTaskTurn"] == 12
    else:
        assert t.active.sum() == 1 and t.from_scheduled[0] and not t.from_siphon[0]
        assert t.turns_remaining[0] == 1 and hidden["nextScheduledTaskTurn"] == next_due
        assert hidden["scheduledTaskInterval"] == 12


def test_a_player_placed_on_the_exit_completes_the_stage_only_by_moving_onto_it():
    key = jax.random.PRNGKey(0)
    state = scenario.from_dict({"player": {"row": 5, "col": 5, "energy": 1},
                                "ownedPrograms": ["WAIT"]})
    waited, _, reward, _, info = compiled.STEP(key, state, C.ACTION_WAIT)
    assert not bool(info["stage_complete"]) and int(waited.stage) == 1
    assert float(reward) == pytest.approx(-0.01 - 0.05)
    left, _, _, _, info = compiled.STEP(key, waited, 2)  # left, to (5,4)
    assert not bool(info["stage_complete"]) and int(left.core.player_col) == 4
    back, _, reward, done, info = compiled.STEP(key, left, 3)  # right, onto the exit
    assert bool(info["stage_complete"]) and not bool(done) and int(back.stage) == 2
    assert float(reward) == pytest.approx(1.04, abs=1e-5)
