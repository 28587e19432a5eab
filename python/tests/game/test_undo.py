"""UNDO (§7.10) and its history (§7.15): snapshot contents, restore, ring-buffer capacity."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import history, scenario

import compiled

APPLY = compiled.APPLY_PROGRAM
PUSH = jax.jit(history.push)
VALID = compiled.VALID_ACTIONS
STEP = compiled.STEP
program = compiled.program_action
play = compiled.play
ROUND_TRIP = jax.jit(lambda core: history.unpack(history.pack(core)))
KEY = jax.random.PRNGKey(0)
UNDO = C.PROGRAM_NAMES.index("UNDO")
UNDO_ACTION = C.FIRST_PROGRAM_ACTION + UNDO
TRUE = jnp.asarray(True)

# Every kind of Core content, including values only a setup can produce.
RICH = {
    "player": {"row": 1, "col": 4, "hp": 2, "credits": 17, "energy": 9, "dataSiphons": 2,
               "score": 31, "attackDamage": 4},
    "enemies": [
        {"type": "virus", "row": 2, "col": 4, "hp": -2, "stunned": True, "disabledTurns": 1,
         "spawnedFromSiphon": True},
        {"type": "cryptog", "row": 5, "col": 0, "hp": 7, "isFromScheduledTask": True},
        {"type": "glitch", "row": 3, "col": 3, "hp": 1},
    ],
    "transmissions": [{"row": 0, "col": 0, "turnsRemaining": -3, "enemyType": "daemon"},
                      {"row": 4, "col": 1, "turnsRemaining": 11, "enemyType": "cryptog"}],
    "blocks": [{"row": 3, "col": 2, "type": "data", "points": 9, "spawnCount": 2,
                "siphoned": True},
               {"row": 1, "col": 3, "type": "question", "program": "HACK"},
               {"row": 2, "col": 0, "type": "question", "points": 6},
               {"row": 0, "col": 5, "type": "program", "program": "UNDO", "spawnCount": 0}],
    "resources": [{"row": 4, "col": 4, "credits": 3}, {"row": 3, "col": 2, "energy": 2},
                  {"row": 0, "col": 0, "dataSiphon": True}],
    "siphonCenterCells": [{"row": 1, "col": 1}],
    "siphonedCells": [{"row": 1, "col": 1}],
    "ownedPrograms": list(C.PROGRAM_NAMES[::2]),
    "stage": 3, "turn": 7, "showActivated": True, "scheduledTasksDisabled": True,
    "atkPlusUsesThisStage": 2,
}


def without_origin_flags(core):
    def cleared(items):
        return items.replace(from_siphon=jnp.zeros_like(items.from_siphon),
                             from_scheduled=jnp.zeros_like(items.from_scheduled))
    return core.replace(enemies=cleared(core.enemies), transmissions=cleared(core.transmissions))


def assert_trees_equal(actual, expected):
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(actual),
                            jax.tree_util.tree_leaves(expected)):
        assert a.dtype == b.dtype, jax.tree_util.keystr(path)
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))


def test_a_snapshot_holds_every_core_field_and_drops_the_origin_flags():
    core = scenario.from_dict(RICH).core
    assert_trees_equal(ROUND_TRIP(core), without_origin_flags(core))


def test_undo_restores_the_snapshot_but_not_the_stage_level_fields():
    snapshot_state = scenario.from_dict(RICH)
    state = PUSH(snapshot_state, TRUE)
    # Free actions after the snapshot, and changes to the fields UNDO must not restore.
    changed = state.replace(
        core=state.core.replace(credits=jnp.int32(40), score=jnp.int32(0), player_row=jnp.int32(5),
                                owned=jnp.ones((C.NUM_PROGRAMS,), bool),
                                enemies=scenario.from_dict({"player": {"row": 0, "col": 0}})
                                .core.enemies),
        stage=jnp.int32(4), exit_row=jnp.int32(0), step_active=TRUE,
        pending_siphon_transmissions=jnp.int32(6), scheduled_interval=jnp.int32(9),
        next_scheduled_turn=jnp.int32(21))
    undone, outcome = APPLY(KEY, changed, UNDO)
    assert_trees_equal(undone.core, without_origin_flags(snapshot_state.core))
    assert int(undone.stage) == 4 and int(undone.exit_row) == 0 and bool(undone.step_active)
    assert int(undone.pending_siphon_transmissions) == 6
    assert (int(undone.scheduled_interval), int(undone.next_scheduled_turn)) == (9, 21)
    assert int(undone.history_size) == 0 and int(outcome.kills) == 0
    assert not bool(outcome.enemy_turn_follows) and not bool(VALID(undone)[UNDO_ACTION])


def test_undo_right_after_the_snapshot_only_clears_origin_flags_but_consumes_it():
    state = PUSH(PUSH(scenario.from_dict({**RICH, "ownedPrograms": ["UNDO"]}), TRUE), TRUE)
    undone, _ = APPLY(KEY, state, UNDO)
    assert_trees_equal(undone.core, without_origin_flags(state.core))
    assert int(undone.history_size) == 1 and bool(VALID(undone)[UNDO_ACTION])


@pytest.mark.parametrize("extra", [0, 5])
def test_ring_buffer_keeps_the_newest_snapshots_in_order(extra):
    """Push capacity + extra snapshots; UNDO walks back through the newest `capacity` of them."""
    capacity = C.HISTORY_CAPACITY
    state = scenario.from_dict({"player": {"row": 0, "col": 0, "credits": 1},
                                "ownedPrograms": ["UNDO"]})
    pushes = capacity + extra
    for turn in range(pushes):
        state = PUSH(state.replace(core=state.core.replace(turn=jnp.int32(turn),
                                                           credits=jnp.int32(100 + turn))),
                     TRUE)
    assert int(state.history_size) == capacity
    for turn in reversed(range(pushes - capacity, pushes)):
        assert bool(VALID(state)[UNDO_ACTION])
        state, _ = APPLY(KEY, state, UNDO)
        assert (int(state.core.turn), int(state.core.credits)) == (turn, 100 + turn)
    assert int(state.history_size) == 0 and not bool(VALID(state)[UNDO_ACTION])
    # A further (masked) UNDO is harmless: nothing left to restore, only the cost is paid.
    again, _ = APPLY(KEY, state, UNDO)
    assert int(again.core.turn) == pushes - capacity and int(again.history_size) == 0


def test_history_memory_per_env():
    """A packed snapshot is 704 bytes and the buffer holds 32 of them: 22.5 KB per env, as
    specs/game-rules.md states."""
    buffer = history.empty_history()
    total = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(buffer))
    assert C.HISTORY_CAPACITY == 32
    assert total == 704 * 32 == 22_528


def test_undo_through_a_step_rewinds_free_actions_and_scores_the_difference():
    """Full enemy turn (snapshot), then SCORE and ATK+; UNDO takes both back."""
    d = {"player": {"row": 0, "col": 0, "credits": 5, "energy": 12},
         "ownedPrograms": ["WAIT", "SCORE", "ATK+", "UNDO"]}
    state = scenario.from_dict(d)
    state, *_ = STEP(KEY, state, C.ACTION_WAIT)
    assert int(state.history_size) == 1
    for name in ("SCORE", "ATK+"):
        state, *_ = STEP(KEY, state, program(name))
    assert (int(state.core.score), int(state.core.attack_damage)) == (7, 2)
    assert (int(state.core.credits), int(state.core.energy)) == (1, 2)
    state, obs, reward, done, info = STEP(KEY, state, UNDO_ACTION)
    parts = info["reward_components"]
    assert (int(state.core.score), int(state.core.attack_damage)) == (0, 1)
    assert (int(state.core.credits), int(state.core.energy)) == (5, 11)
    assert int(state.core.atk_plus_uses) == 0 and int(state.history_size) == 0
    assert float(parts["score"]) == pytest.approx(-3.5)
    assert float(parts["resourceGain"]) == pytest.approx(0.05 * (4 + 9))
    assert float(parts["kills"]) == 0.0 and not bool(done)
    assert float(reward) == pytest.approx(-0.01 - 3.5 + 0.65)
    assert float(obs.player[7]) == 0.0


def test_undo_brings_enemies_and_transmissions_back_without_origin_flags():
    d = {"player": {"row": 0, "col": 0, "credits": 4, "energy": 3},
         "ownedPrograms": ["CRASH", "UNDO"],
         "enemies": [{"type": "daemon", "row": 1, "col": 1, "hp": 3,
                      "spawnedFromSiphon": True}],
         "transmissions": [{"row": 0, "col": 1, "turnsRemaining": 3, "enemyType": "glitch",
                            "spawnedFromSiphon": True}]}
    state = PUSH(scenario.from_dict(d), TRUE)
    crashed, outcome = APPLY(KEY, state, C.PROGRAM_NAMES.index("CRASH"))
    assert int(outcome.kills) == 2 and not np.asarray(crashed.core.enemies.active).any()
    undone, outcome = APPLY(KEY, crashed, UNDO)
    enemies = scenario.inspect(undone)["enemies"]
    assert [(e["type"], e["row"], e["col"], e["hp"], e["spawnedFromSiphon"]) for e in enemies] == [
        ("daemon", 1, 1, 3, False)]
    transmissions = undone.core.transmissions
    assert int(jnp.sum(transmissions.active)) == 1 and not bool(transmissions.from_siphon[0])
    assert int(transmissions.turns_remaining[0]) == 3 and int(outcome.kills) == 0
    assert (int(undone.core.credits), int(undone.core.energy)) == (4, 3)


def test_undo_after_warping_away_pays_the_distance_back_without_a_kill():
    d = {"player": {"row": 4, "col": 4, "credits": 3, "energy": 3},
         "ownedPrograms": ["WAIT", "WARP", "UNDO"],
         "transmissions": [{"row": 0, "col": 0, "turnsRemaining": 5, "enemyType": "virus"}]}
    state, *_ = play(scenario.from_dict(d), C.ACTION_WAIT)
    state, _, _, _, info = play(state, program("WARP"))
    assert (int(state.core.player_row), int(state.core.player_col)) == (0, 0)
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)
    state, _, _, _, info = play(state, UNDO_ACTION)
    parts = info["reward_components"]
    # Path distance 10 at (0,0) back to 2 at (4,4): +8 cells (§14.2); UNDO yields no kills.
    assert float(parts["distance"]) == pytest.approx(0.05 * 8) and float(parts["kills"]) == 0.0
    assert (int(state.core.player_row), int(state.core.player_col)) == (4, 4)
    assert (int(state.core.credits), int(state.core.energy)) == (3, 2)
    t = state.core.transmissions
    assert int(jnp.sum(t.active)) == 1 and int(t.turns_remaining[0]) == 4


def test_undo_brings_back_an_unrevealed_question_block_and_unowns_its_program():
    d = {"player": {"row": 3, "col": 3, "energy": 1, "credits": 1, "dataSiphons": 1},
         "ownedPrograms": ["WAIT", "UNDO"],
         "blocks": [{"row": 4, "col": 3, "type": "question", "program": "HACK"},
                    {"row": 3, "col": 4, "type": "data", "points": 2}],
         "resources": [{"row": 2, "col": 3, "credits": 3}, {"row": 3, "col": 3, "energy": 2},
                       {"row": 4, "col": 3, "credits": 1}]}
    hack = C.PROGRAM_NAMES.index("HACK")
    state, *_ = play(scenario.from_dict(d), C.ACTION_WAIT, C.ACTION_SIPHON)
    cells = state.core.cells
    assert int(cells.content[4, 3]) == C.PROGRAM_BLOCK and bool(state.core.owned[hack])
    assert int(state.core.score) == 2 and int(state.core.credits) == 4
    state, obs, _, _, info = play(state, UNDO_ACTION, UNDO_ACTION)
    cells = state.core.cells
    assert int(cells.content[4, 3]) == C.QUESTION_BLOCK and int(cells.program[4, 3]) == hack
    assert int(cells.spawn_count[4, 3]) == int(C.PROGRAM_SPAWN_COST[hack])
    assert not bool(state.core.owned[hack]) and int(obs.programs[hack]) == 0
    assert float(obs.grid[4, 3, 9]) == 1.0  # shown as a question block again
    assert not np.asarray(cells.siphoned).any() and not np.asarray(cells.siphon_center).any()
    resources = (int(cells.credits[2, 3]), int(cells.energy[3, 3]), int(cells.credits[4, 3]))
    assert resources == (3, 2, 1)
    core = state.core
    assert (int(core.score), int(core.data_siphons), int(core.credits)) == (0, 1, 1)
    assert float(info["reward_components"]["score"]) == pytest.approx(-1.0)


def test_undo_in_play_keeps_step_active_pending_siphon_transmissions_and_the_schedule():
    d = {"player": {"row": 3, "col": 3, "credits": 2, "energy": 6, "dataSiphons": 1},
         "ownedPrograms": ["WAIT", "STEP", "UNDO"],
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 4}]}
    state, *_ = play(scenario.from_dict(d), C.ACTION_WAIT, C.ACTION_WAIT, program("STEP"),
                     UNDO_ACTION)
    assert bool(state.step_active) and int(state.core.energy) == 4  # energy from the snapshot
    # The siphon's enemy turn is skipped (STEP): its 4 transmissions wait, and no snapshot.
    state, *_ = play(state, C.ACTION_SIPHON)
    assert int(state.pending_siphon_transmissions) == 4 and int(state.history_size) == 1
    assert (int(state.scheduled_interval), int(state.next_scheduled_turn)) == (11, 17)  # §10
    state, *_ = play(state, UNDO_ACTION)
    assert int(state.core.score) == 0 and int(state.core.data_siphons) == 1
    assert not bool(state.core.cells.siphoned[4, 3]) and scenario.inspect(state)["turn"] == 1
    assert int(state.pending_siphon_transmissions) == 4
    assert (int(state.scheduled_interval), int(state.next_scheduled_turn)) == (11, 17)
    assert int(state.history_size) == 0 and not bool(state.step_active)


RANDOM_START = {
    "player": {"row": 2, "col": 2, "credits": 400, "energy": 400, "dataSiphons": 6},
    "ownedPrograms": list(C.PROGRAM_NAMES),
    "enemies": [{"type": "daemon", "row": 5, "col": 0, "hp": 3},
                {"type": "virus", "row": 0, "col": 5, "hp": 2}],
    "transmissions": [{"row": 4, "col": 4, "turnsRemaining": 2, "enemyType": "virus"}],
    "blocks": [{"row": 3, "col": 2, "type": "data", "points": 5},
               {"row": 1, "col": 3, "type": "question", "program": "HACK"},
               {"row": 4, "col": 1, "type": "program", "program": "SCORE"}],
    "resources": [{"row": 2, "col": 1, "credits": 2}, {"row": 1, "col": 2, "energy": 3}],
}
NOT_RESTORED = ("stage", "exit_row", "exit_col", "step_active", "pending_siphon_transmissions",
                "scheduled_interval", "next_scheduled_turn")


def test_random_play_undo_restores_the_core_after_each_full_enemy_turn():
    """§7.15 against a model stack: every full enemy turn (turn-ending action, no STEP, no stage
    change) pushes the core; every UNDO restores the newest one and nothing stage-level."""
    rng = random.Random(0)
    key = jax.random.PRNGKey(1)
    state = scenario.from_dict(RANDOM_START)
    stack, undos = [], 0
    for _ in range(80):
        valid = np.asarray(VALID(state))
        if int(state.core.hp) <= 2 and valid[program("RESET")]:
            act = program("RESET")
        elif valid[UNDO_ACTION] and rng.random() < 0.3:
            act = UNDO_ACTION
        else:
            choices = np.flatnonzero(valid).tolist()
            turn_enders = [a for a in choices if a <= C.ACTION_SIPHON or a == C.ACTION_WAIT]
            act = rng.choice(turn_enders if turn_enders and rng.random() < 0.6 else choices)
        key, subkey = jax.random.split(key)
        new, _, _, done, info = STEP(subkey, state, act)
        assert not bool(info["invalid_action"])
        if act == UNDO_ACTION:
            undos += 1
            assert_trees_equal(new.core, without_origin_flags(stack.pop()))
            for field in NOT_RESTORED:
                assert int(getattr(new, field)) == int(getattr(state, field)), field
            assert float(info["reward_components"]["kills"]) == 0.0
        elif ((act <= C.ACTION_SIPHON or act == C.ACTION_WAIT) and not bool(state.step_active)
              and not bool(info["stage_complete"])):
            stack = (stack + [new.core])[-C.HISTORY_CAPACITY:]
        assert int(new.history_size) == len(stack)
        state = new
        if bool(done):
            break
    assert undos >= 8
