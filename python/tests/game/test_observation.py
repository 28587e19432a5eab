"""The array observation (rules §15): every channel with exact values, and what stays hidden."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import observation, scenario

OBSERVE = jax.jit(observation.observe)
FLAT = jax.jit(lambda state: observation.flatten(observation.observe(state)))
PLAYER = {"row": 3, "col": 3}


def observe(**fields):
    fields.setdefault("player", dict(PLAYER))
    return jax.tree_util.tree_map(np.asarray, OBSERVE(scenario.from_dict(fields)))


def cell(obs, row, col):
    """The non-zero channels of one cell as {channel: value}."""
    values = obs.grid[row, col]
    return {int(ch): pytest.approx(float(values[ch])) for ch in np.flatnonzero(values)}


def enemy(kind, row, col, hp, **flags):
    return {"type": kind, "row": row, "col": col, "hp": hp, **flags}


def test_shapes_and_dtypes():
    obs = observe()
    assert obs.player.shape == (10,) and obs.player.dtype == np.float32
    assert obs.programs.shape == (23,) and obs.programs.dtype == np.int32
    assert obs.grid.shape == (6, 6, 42) and obs.grid.dtype == np.float32
    assert observation.FLAT_SIZE == 1545


def test_player_vector_exact_values():
    obs = observe(player={"row": 2, "col": 4, "hp": 2, "credits": 25, "energy": 10,
                          "dataSiphons": 3, "attackDamage": 2}, stage=3)
    np.testing.assert_allclose(obs.player, [2 / 5, 4 / 5, 2 / 3, 0.5, 0.2, 2 / 7, 0.3, 0.5, 0, 0],
                               rtol=1e-6)


def test_player_vector_caps_resources_but_not_siphons_or_attack():
    obs = observe(player={"row": 5, "col": 0, "hp": 0, "credits": 120, "energy": 50,
                          "dataSiphons": 25, "attackDamage": 6, "score": 40},
                  stage=8, showActivated=True, scheduledTasksDisabled=True)
    np.testing.assert_allclose(obs.player, [1, 0, 0, 1, 1, 1, 2.5, 2.5, 1, 1], rtol=1e-6)


def test_score_and_turn_are_not_observed():
    a = observe(turn=0)
    b = observe(turn=9, player={**PLAYER, "score": 30})
    np.testing.assert_array_equal(a.player, b.player)
    np.testing.assert_array_equal(a.grid, b.grid)


def test_program_flags():
    obs = observe(ownedPrograms=["PUSH", "HACK", 18])
    expected = np.zeros(23, np.int32)
    expected[[C.PUSH, C.HACK, C.SHOW]] = 1
    np.testing.assert_array_equal(obs.programs, expected)


@pytest.mark.parametrize("kind, channel", [("virus", 0), ("daemon", 1), ("glitch", 2),
                                           ("cryptog", 3)])
def test_enemy_type_and_hp(kind, channel):
    obs = observe(enemies=[enemy(kind, 3, 0, 2)])  # in the player's row: cryptogs visible
    assert cell(obs, 3, 0) == {channel: 1.0, 4: pytest.approx(2 / 3)}


def test_enemy_hp_is_not_capped_and_flags_are_shown():
    obs = observe(enemies=[enemy("daemon", 1, 1, 7, stunned=True, spawnedFromSiphon=True)])
    assert cell(obs, 1, 1) == {1: 1.0, 4: pytest.approx(7 / 3), 5: 1.0, 6: 1.0}


@pytest.mark.parametrize("hp", [2**26, 2**31 - 1])
def test_enemy_hp_is_exact_up_to_the_int32_range(hp):
    # A.1 stores scenario hp verbatim; the hp channel must not wrap for huge values.
    obs = observe(enemies=[enemy("daemon", 1, 1, hp)])
    assert cell(obs, 1, 1)[4] == np.float32(hp) / np.float32(3)


def test_from_scheduled_task_flag_is_not_observable():
    plain = observe(enemies=[enemy("virus", 1, 1, 2)])
    scheduled = observe(enemies=[enemy("virus", 1, 1, 2, isFromScheduledTask=True)])
    np.testing.assert_array_equal(plain.grid, scheduled.grid)


def test_first_enemy_in_list_order_with_positive_hp_is_shown():
    obs = observe(enemies=[enemy("glitch", 1, 1, 0), enemy("virus", 1, 1, -2),
                           enemy("daemon", 1, 1, 3), enemy("virus", 1, 1, 1, stunned=True)])
    assert cell(obs, 1, 1) == {1: 1.0, 4: 1.0}


def test_enemies_with_hp_zero_are_invisible():
    obs = observe(enemies=[enemy("virus", 1, 1, 0), enemy("daemon", 2, 2, -1)])
    assert not obs.grid[..., :7].any()


@pytest.mark.parametrize("fields, visible", [
    ({"enemies": [enemy("cryptog", 0, 0, 2)]}, False),                        # elsewhere
    ({"enemies": [enemy("cryptog", 3, 0, 2)]}, True),                         # same row
    ({"enemies": [enemy("cryptog", 0, 3, 2)]}, True),                         # same column
    ({"enemies": [enemy("cryptog", 0, 0, 2)], "showActivated": True}, True),  # SHOW
])
def test_cryptog_visibility(fields, visible):
    obs = observe(**fields)
    row, col = fields["enemies"][0]["row"], fields["enemies"][0]["col"]
    assert cell(obs, row, col) == ({3: 1.0, 4: pytest.approx(2 / 3)} if visible else {})


def test_hidden_cryptog_blanks_the_whole_cell_even_with_another_enemy():
    obs = observe(enemies=[enemy("cryptog", 0, 0, 2), enemy("virus", 0, 0, 2)])
    assert cell(obs, 0, 0) == {}


def test_dead_cryptog_first_does_not_hide_the_next_enemy():
    obs = observe(enemies=[enemy("cryptog", 0, 0, 0), enemy("virus", 0, 0, 2)])
    assert cell(obs, 0, 0) == {0: 1.0, 4: pytest.approx(2 / 3)}


def test_data_block_channels():
    obs = observe(blocks=[{"row": 1, "col": 1, "type": "data", "points": 6, "spawnCount": 4},
                          {"row": 1, "col": 2, "type": "data", "points": 9, "siphoned": True,
                           "spawnCount": 0}])
    assert cell(obs, 1, 1) == {7: 1.0, 10: pytest.approx(6 / 9), 35: pytest.approx(4 / 9)}
    assert cell(obs, 1, 2) == {7: 1.0, 10: 1.0, 11: 1.0}


def test_program_block_channels():
    obs = observe(blocks=[{"row": 1, "col": 1, "type": "program", "program": "DELAY",
                           "points": 5},
                          {"row": 2, "col": 1, "type": "program", "program": 5, "siphoned": True,
                           "spawnCount": 0}])
    assert cell(obs, 1, 1) == {8: 1.0, 12 + C.DELAY: 1.0, 35: pytest.approx(4 / 9)}
    assert cell(obs, 2, 1) == {8: 1.0, 11: 1.0, 12: 1.0}


@pytest.mark.parametrize("block", [
    {"type": "question", "points": 7},
    {"type": "question", "program": "SIPH+"},
    {"type": "question", "program": "WARP", "spawnCount": 9},
])
def test_question_block_shows_only_channel_9(block):
    obs = observe(blocks=[{"row": 1, "col": 1, **block}],
                  resources=[{"row": 1, "col": 1, "credits": 2}])
    assert cell(obs, 1, 1) == {9: 1.0}


@pytest.mark.parametrize("block, siphoned, visible", [
    (None, False, True),
    ({"type": "data", "points": 1}, False, False),
    ({"type": "data", "points": 1}, True, True),
    ({"type": "program", "program": "WAIT"}, False, False),
    ({"type": "program", "program": "WAIT"}, True, True),
])
def test_resources_visible_only_without_block_or_when_siphoned(block, siphoned, visible):
    blocks = [{"row": 2, "col": 2, **block, "siphoned": siphoned}] if block else []
    obs = observe(blocks=blocks, resources=[{"row": 2, "col": 2, "credits": 2},
                                            {"row": 2, "col": 4, "energy": 3}])
    assert obs.grid[2, 2, 37] == pytest.approx(2 / 3 if visible else 0.0)
    assert obs.grid[2, 4, 38] == 1.0


def test_resource_values_are_not_capped():
    obs = observe(resources=[{"row": 0, "col": 1, "credits": 6}, {"row": 0, "col": 2,
                                                                  "energy": 9}])
    assert cell(obs, 0, 1) == {37: 2.0}
    assert cell(obs, 0, 2) == {38: 3.0}


@pytest.mark.parametrize("turns, value", [(1, 0.25), (3, 0.75), (4, 1.0), (9, 1.0), (0, 0.0),
                                          (-2, -0.5)])
def test_transmission_countdown(turns, value):
    obs = observe(transmissions=[{"row": 4, "col": 1, "turnsRemaining": turns,
                                  "enemyType": "virus"}])
    assert cell(obs, 4, 1) == ({36: value} if value else {})


def test_first_transmission_on_a_cell_is_shown():
    obs = observe(transmissions=[{"row": 4, "col": 1, "turnsRemaining": 2, "enemyType": "virus"},
                                 {"row": 4, "col": 1, "turnsRemaining": 1,
                                  "enemyType": "daemon"}])
    assert cell(obs, 4, 1) == {36: 0.5}


@pytest.mark.parametrize("show", [False, True])
def test_transmission_type_is_never_shown(show):
    grids = [observe(showActivated=show,
                     transmissions=[{"row": 4, "col": 1, "turnsRemaining": 2,
                                     "enemyType": kind}]).grid
             for kind in C.ENEMY_TYPE_NAMES]
    for grid in grids[1:]:
        np.testing.assert_array_equal(grid, grids[0])


def test_pickup_exit_and_siphon_centre():
    obs = observe(resources=[{"row": 0, "col": 0, "dataSiphon": True},
                             {"row": 0, "col": 0, "energy": 1}],
                  siphonCenterCells=[{"row": 3, "col": 3}])
    assert cell(obs, 0, 0) == {38: pytest.approx(1 / 3), 39: 1.0}
    assert cell(obs, 5, 5) == {40: 1.0}
    assert cell(obs, 3, 3) == {41: 1.0}


def test_siphoned_flag_of_cells_without_block_is_not_observable():
    plain = observe(resources=[{"row": 0, "col": 0, "dataSiphon": True}])
    flagged = observe(resources=[{"row": 0, "col": 0, "dataSiphon": True}],
                      siphonedCells=[{"row": 0, "col": 0}, {"row": 2, "col": 2}])
    np.testing.assert_array_equal(plain.grid, flagged.grid)


def test_row_zero_is_the_first_grid_row():
    obs = observe(blocks=[{"row": 0, "col": 4, "type": "data", "points": 9}])
    assert obs.grid[0, 4, 7] == 1.0 and obs.grid[5, 4, 7] == 0.0


def test_flatten_layout():
    d = {"player": {"row": 1, "col": 2, "credits": 3}, "ownedPrograms": ["HACK"],
         "enemies": [enemy("daemon", 1, 4, 3)],
         "blocks": [{"row": 4, "col": 2, "type": "program", "program": "ROW"}]}
    state = scenario.from_dict(d)
    obs = OBSERVE(state)
    flat = np.asarray(FLAT(state))
    assert flat.shape == (1545,) and flat.dtype == np.float32
    np.testing.assert_array_equal(flat[:10], obs.player)
    np.testing.assert_array_equal(flat[10:33], obs.programs)
    assert flat[10 + C.HACK] == 1.0
    for row, col, channel in [(1, 4, 1), (1, 4, 4), (4, 2, 12 + C.ROW), (5, 5, 40)]:
        assert flat[33 + (row * 6 + col) * 42 + channel] == obs.grid[row, col, channel] != 0


def test_observe_under_vmap_matches_single_states():
    dicts = [{"player": PLAYER, "enemies": [enemy("cryptog", 0, 0, 2)]},
             {"player": {"row": 0, "col": 1}, "enemies": [enemy("cryptog", 0, 0, 2)]}]
    states = [scenario.from_dict(d) for d in dicts]
    batch = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)
    batched = jax.jit(jax.vmap(observation.observe))(batch)
    for i, state in enumerate(states):
        single = OBSERVE(state)
        np.testing.assert_array_equal(batched.grid[i], single.grid)
        np.testing.assert_array_equal(batched.player[i], single.player)
    flat = jax.jit(jax.vmap(lambda s: observation.flatten(observation.observe(s))))(batch)
    assert flat.shape == (2, 1545)
    assert float(flat[0, 33 + 3]) == 0.0 and float(flat[1, 33 + 3]) == 1.0  # cryptog at (0,0)
