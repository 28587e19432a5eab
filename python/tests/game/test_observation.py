"""The array observation (rules §15): every channel with exact values, and what stays hidden."""

import random
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import observation, scenario

import compiled
import plain

OBSERVE = jax.jit(observation.observe)
FLAT = jax.jit(lambda state: observation.flatten(observation.observe(state)))
PLAYER = {"row": 3, "col": 3}
enemy = compiled.enemy


def observe(**fields):
    fields.setdefault("player", dict(PLAYER))
    return jax.tree_util.tree_map(np.asarray, OBSERVE(scenario.from_dict(fields)))


def cell(obs, row, col):
    """The non-zero channels of one cell as {channel: value}."""
    values = obs.grid[row, col]
    return {int(ch): pytest.approx(float(values[ch])) for ch in np.flatnonzero(values)}


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
    assert obs.grid[1, 1, 4] == np.float32(hp) / np.float32(3)


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


# --- observations returned by the step -------------------------------------------------------


@pytest.mark.parametrize("start_row, action, visible", [(3, 0, True), (4, 1, False)])
def test_cryptog_visibility_uses_the_player_position_after_the_step(start_row, action,
                                                                    visible):
    # STEP skips the enemy turn, so the cryptog at (4,0) stays put while the player moves into
    # (up, 3 -> 4) or out of (down, 4 -> 3) its row.
    state = scenario.from_dict({"player": {"row": start_row, "col": 3}, "stepActive": True,
                                "enemies": [enemy("cryptog", 4, 0, 2)]})
    assert bool(OBSERVE(state).grid[4, 0, 3]) is not visible
    obs = jax.tree_util.tree_map(np.asarray, compiled.STEP(jax.random.PRNGKey(0), state,
                                                           action)[1])
    assert cell(obs, 4, 0) == ({3: 1.0, 4: pytest.approx(2 / 3)} if visible else {})


def test_observation_after_a_stage_completion_shows_the_new_stage():
    d = {"player": {"row": 5, "col": 4}, "showActivated": True, "scheduledTasksDisabled": True}
    state, obs, _, _, _ = compiled.STEP(jax.random.PRNGKey(0), scenario.from_dict(d), 3)
    obs = jax.tree_util.tree_map(np.asarray, obs)
    np.testing.assert_allclose(obs.player[[0, 1, 5, 8, 9]], [1, 1, 1 / 7, 0, 0], rtol=1e-6)
    exit_cell = (int(state.exit_row), int(state.exit_col))
    assert exit_cell in [(0, 0), (0, 5), (5, 0)]
    assert obs.grid[..., 40].sum() == 1 and obs.grid[exit_cell][40] == 1
    pickups = {(0, 0), (0, 5), (5, 0)} - {exit_cell}
    assert {tuple(x) for x in np.argwhere(obs.grid[..., 39] == 1).tolist()} == pickups
    # The two new transmissions (stage 2), each counting down from 1.
    assert sorted(obs.grid[..., 36][obs.grid[..., 36] != 0].tolist()) == [0.25, 0.25]


# --- a randomised comparison with a plain reference (§15 from the scenario dict) ---------------

_TYPES = ["virus", "daemon", "glitch", "cryptog"]


def _random_scenario(rng):
    """One cell per block entry and per resource entry (A.2's replacement rules are tested in
    test_scenario.py); enemies and transmissions may share cells."""
    cells = [(r, c) for r in range(6) for c in range(6)]
    row, col = rng.choice(cells)
    d = {"player": {"row": row, "col": col, "hp": rng.randint(0, 3),
                    "credits": rng.choice([0, 3, 49, 50, 120]), "energy": rng.choice([0, 7, 60]),
                    "dataSiphons": rng.randint(0, 14), "attackDamage": rng.randint(1, 5)},
         "stage": rng.randint(1, 8), "showActivated": rng.random() < 0.3,
         "scheduledTasksDisabled": rng.random() < 0.3,
         "ownedPrograms": rng.sample(range(5, 28), rng.randint(0, 6))}
    board = rng.sample([x for x in cells if x != (5, 5)], 14)
    d["blocks"] = []
    for r, c in board[:rng.randint(0, 8)]:
        kind = rng.choice(["data", "data", "program", "question"])
        block = {"row": r, "col": c, "type": kind}
        if kind == "program" or (kind == "question" and rng.random() < 0.5):
            block["program"] = rng.randint(5, 27)
            block["spawnCount"] = rng.randint(0, 9)
        else:
            block["points"] = rng.randint(0, 9)
            if rng.random() < 0.5:
                block["spawnCount"] = rng.randint(0, 9)
        if kind != "question" and rng.random() < 0.3:
            block["siphoned"] = True
        d["blocks"].append(block)
    d["resources"] = []
    for r, c in rng.sample(cells, rng.randint(0, 12)):
        choice = rng.random()
        block_here = any((b["row"], b["col"]) == (r, c) for b in d["blocks"])
        if choice < 0.15 and not block_here and (r, c) != (5, 5):
            d["resources"].append({"row": r, "col": c, "dataSiphon": True})
        else:
            kind = "credits" if choice < 0.6 else "energy"
            d["resources"].append({"row": r, "col": c, kind: rng.randint(1, 4)})
    near = [(row, rng.randint(0, 5)), (rng.randint(0, 5), col)]
    d["enemies"] = [{"type": rng.choice(_TYPES), "row": r, "col": c, "hp": rng.randint(-1, 5),
                     "stunned": rng.random() < 0.3, "spawnedFromSiphon": rng.random() < 0.3}
                    for r, c in [rng.choice(cells + near) for _ in range(rng.randint(0, 7))]]
    d["transmissions"] = [{"row": r, "col": c, "turnsRemaining": rng.randint(-1, 6),
                           "enemyType": rng.choice(_TYPES)}
                          for r, c in [rng.choice(cells) for _ in range(rng.randint(0, 5))]]
    d["siphonCenterCells"] = [{"row": r, "col": c} for r, c in rng.sample(cells, 2)]
    return d


def _reference_observation(d):
    p, show = d["player"], d["showActivated"]
    player = [p["row"] / 5, p["col"] / 5, p["hp"] / 3, min(p["credits"] / 50, 1),
              min(p["energy"] / 50, 1), (d["stage"] - 1) / 7, p["dataSiphons"] / 10,
              (p["attackDamage"] - 1) / 2, float(show), float(d["scheduledTasksDisabled"])]
    programs = [int(5 + k in d["ownedPrograms"]) for k in range(23)]
    grid = np.zeros((6, 6, 42))
    first_enemy = {}
    for e in d["enemies"]:
        if e["hp"] > 0:
            first_enemy.setdefault((e["row"], e["col"]), e)
    for (r, c), e in first_enemy.items():
        if e["type"] != "cryptog" or r == p["row"] or c == p["col"] or show:
            grid[r, c, _TYPES.index(e["type"])] = 1
            grid[r, c, 4:7] = [e["hp"] / 3, e["stunned"], e["spawnedFromSiphon"]]
    hides_resources = set()
    for b in d["blocks"]:
        r, c, siphoned = b["row"], b["col"], b.get("siphoned", False)
        if not siphoned:
            hides_resources.add((r, c))
        if b["type"] == "question":
            grid[r, c, 9] = 1
            continue
        if b["type"] == "data":
            grid[r, c, [7, 10]] = [1, b["points"] / 9]
            grid[r, c, 35] = b.get("spawnCount", b["points"]) / 9
        else:
            grid[r, c, [8, 12 + b["program"] - 5]] = 1
            grid[r, c, 35] = b["spawnCount"] / 9
        grid[r, c, 11] = siphoned
    first_transmission = {}
    for t in d["transmissions"]:
        first_transmission.setdefault((t["row"], t["col"]), t)
    for (r, c), t in first_transmission.items():
        grid[r, c, 36] = min(t["turnsRemaining"] / 4, 1)
    for x in d["resources"]:
        r, c = x["row"], x["col"]
        if x.get("dataSiphon"):
            grid[r, c, 39] = 1
        elif (r, c) not in hides_resources:
            grid[r, c, 37] = x.get("credits", 0) / 3
            grid[r, c, 38] = x.get("energy", 0) / 3
    grid[5, 5, 40] = 1
    for x in d["siphonCenterCells"]:
        grid[x["row"], x["col"], 41] = 1
    return np.array(player), np.array(programs), grid


def test_observation_matches_a_plain_reference_on_random_scenarios():
    rng = random.Random(2024)
    for i in range(60):
        d = _random_scenario(rng)
        obs = jax.tree_util.tree_map(np.asarray, OBSERVE(scenario.from_dict(d)))
        player, programs, grid = _reference_observation(d)
        np.testing.assert_allclose(obs.player, player, rtol=1e-6, err_msg=f"scenario {i}: {d}")
        np.testing.assert_array_equal(obs.programs, programs, err_msg=f"scenario {i}: {d}")
        np.testing.assert_allclose(obs.grid, grid, rtol=1e-6, atol=1e-7,
                                   err_msg=f"scenario {i}: {d}")


# --- the same rules read from states reached in play ------------------------------------------
# Play reaches what a scenario cannot set up: exits on other corners, revealed question blocks,
# siphon centres from real siphons, disabled hatchlings, scheduled enemies, SHOW and CALM.

def _reference_observation_of_plain(s):
    """§15 from a plain state (`plain.to_plain`)."""
    row, col, show = s["player_row"], s["player_col"], s["show_activated"]
    player = [row / 5, col / 5, s["hp"] / 3, min(s["credits"] / 50, 1),
              min(s["energy"] / 50, 1), (s["stage"] - 1) / 7, s["data_siphons"] / 10,
              (s["attack_damage"] - 1) / 2, float(show), float(s["scheduled_tasks_disabled"])]
    programs = [int(k in s["owned"]) for k in range(C.NUM_PROGRAMS)]
    grid = np.zeros((6, 6, 42))
    first_enemy = {}
    for e in s["enemies"]:
        if e["hp"] > 0:
            first_enemy.setdefault((e["row"], e["col"]), e)
    for (r, c), e in first_enemy.items():
        if e["kind"] != C.CRYPTOG or r == row or c == col or show:
            grid[r, c, e["kind"]] = 1
            grid[r, c, 4:7] = [e["hp"] / 3, e["stunned"], e["from_siphon"]]
    for t in reversed(s["transmissions"]):  # the first one in list order on a cell wins
        grid[t["row"], t["col"], 36] = min(t["turns_remaining"] / 4, 1)
    cells = s["cells"]
    for r in range(6):
        for c in range(6):
            content, siphoned = cells["content"][r][c], cells["siphoned"][r][c]
            if content == C.QUESTION_BLOCK:
                grid[r, c, 9] = 1
            elif content == C.DATA_BLOCK:
                grid[r, c, [7, 10, 11, 35]] = [1, cells["points"][r][c] / 9, siphoned,
                                               cells["spawn_count"][r][c] / 9]
            elif content == C.PROGRAM_BLOCK:
                grid[r, c, [8, 12 + cells["program"][r][c], 11]] = [1, 1, siphoned]
                grid[r, c, 35] = cells["spawn_count"][r][c] / 9
            if not plain.is_block(content) or siphoned:
                grid[r, c, 37:39] = [cells["credits"][r][c] / 3, cells["energy"][r][c] / 3]
            grid[r, c, 39] = content == C.DATA_SIPHON
            grid[r, c, 40] = content == C.EXIT
            grid[r, c, 41] = cells["siphon_center"][r][c]
    return np.array(player), np.array(programs), grid


def test_observation_matches_a_plain_reference_in_play():
    rng = random.Random(7)
    key = jax.random.PRNGKey(7)
    seen = Counter()
    for game in range(40):
        d = _random_scenario(rng) | {"siphonCenterCells": [], "turn": rng.randint(0, 14)}
        if game % 3 == 0:  # next to the exit: stage completions put it on another corner
            d["player"] |= dict(zip(("row", "col"), rng.choice([(4, 5), (5, 4)])))
        state = scenario.from_dict(d)
        for step in range(12):
            mask = np.asarray(compiled.VALID_ACTIONS(state))
            if not mask.any():
                break
            action = rng.choice(np.flatnonzero(mask).tolist())
            key, step_key = jax.random.split(key)
            state, obs, _, done, _ = compiled.STEP(step_key, state, action)
            s = plain.to_plain(state)
            player, programs, grid = _reference_observation_of_plain(s)
            where = f"game {game}, step {step}, action {C.ACTION_NAMES[action]}"
            np.testing.assert_allclose(obs.player, player, rtol=1e-6, err_msg=where)
            np.testing.assert_array_equal(obs.programs, programs, err_msg=where)
            np.testing.assert_allclose(obs.grid, grid, rtol=1e-6, atol=1e-7, err_msg=where)
            cells = s["cells"]
            seen["exit off (5,5)"] += (s["exit_row"], s["exit_col"]) != (5, 5)
            seen["siphon centre"] += any(map(any, cells["siphon_center"]))
            seen["stunned enemy"] += any(e["stunned"] for e in s["enemies"])
            seen["scheduled enemy"] += any(e["from_scheduled"] for e in s["enemies"])
            seen["hidden cryptog"] += any(
                e["kind"] == C.CRYPTOG and e["row"] != s["player_row"]
                and e["col"] != s["player_col"] and not s["show_activated"]
                for e in s["enemies"])
            seen["siphoned block"] += any(
                plain.is_block(cells["content"][r][c]) and cells["siphoned"][r][c]
                for r in range(6) for c in range(6))
            if bool(done):
                break
    assert min(seen.values()) >= 3 and len(seen) == 6, seen
