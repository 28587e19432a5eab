"""The enemy turn (§8, §10): order, movement, attacks, hatching, scheduled and siphon spawns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import enemy_turn
from hackmatrix.game import history
from hackmatrix.game import scenario

import compiled

_run = jax.jit(enemy_turn.run)
_run_seeds = jax.jit(jax.vmap(enemy_turn.run, in_axes=(0, None, None)))
enemy = compiled.enemy


def _cells_per_seed(outcomes, count):
    """[((row, col) of each of the first `count` enemies), ...], one tuple per seed."""
    rows = np.asarray(outcomes.core.enemies.row[:, :count]).tolist()
    cols = np.asarray(outcomes.core.enemies.col[:, :count]).tolist()
    return [tuple(zip(r, c)) for r, c in zip(rows, cols)]


def run(state, seed=0, follows=True):
    return _run(jax.random.PRNGKey(seed), state, jnp.asarray(follows))


def setup(**fields):
    fields.setdefault("player", {"row": 0, "col": 0})
    return scenario.from_dict(fields)


def enemies(state):
    return [(e["type"], e["row"], e["col"]) for e in scenario.inspect(state)["enemies"]]


def transmissions(state):
    t = state.core.transmissions
    n = int(np.sum(t.active))
    return [dict(row=int(t.row[i]), col=int(t.col[i]), turns=int(t.turns_remaining[i]),
                 siphon=bool(t.from_siphon[i]), scheduled=bool(t.from_scheduled[i]))
            for i in range(n)]


# ------------------------------------------------------------------------------------------
# Movement and attacks.

def test_daemon_moves_one_cell():
    out = run(setup(enemies=[enemy("daemon", 3, 0)]))
    assert enemies(out) == [("daemon", 2, 0)]
    assert int(out.core.turn) == 1


def test_virus_moves_twice():
    out = run(setup(enemies=[enemy("virus", 4, 0)]))
    assert enemies(out) == [("virus", 2, 0)]


@pytest.mark.parametrize("kind", ["daemon", "glitch", "cryptog"])
def test_other_types_move_once(kind):
    assert enemies(run(setup(enemies=[enemy(kind, 4, 0)]))) == [(kind, 3, 0)]


def test_virus_moves_then_attacks():
    out = run(setup(player={"row": 3, "col": 3}, enemies=[enemy("virus", 5, 3)]))
    assert enemies(out) == [("virus", 4, 3)]
    assert int(out.core.hp) == 2


def test_adjacent_virus_attacks_once_and_stays():
    out = run(setup(player={"row": 3, "col": 3}, enemies=[enemy("virus", 4, 3)]))
    assert enemies(out) == [("virus", 4, 3)]
    assert int(out.core.hp) == 2


def test_every_adjacent_enemy_hits_once_and_hp_floors_at_zero():
    ring = [enemy("daemon", 4, 3), enemy("glitch", 2, 3), enemy("cryptog", 3, 2),
            enemy("virus", 3, 4)]
    out = run(setup(player={"row": 3, "col": 3, "hp": 3}, enemies=ring))
    assert int(out.core.hp) == 0
    assert enemies(out) == [(e["type"], e["row"], e["col"]) for e in ring]


def test_hp_plays_no_part_and_the_turn_goes_on_after_death():
    # A 0-hp enemy from setup still attacks; the far daemon still moves; the scheduled task
    # still fires after the player is dead.
    out = run(setup(player={"row": 3, "col": 3, "hp": 1}, turn=11,
                    enemies=[enemy("daemon", 4, 3, hp=0), enemy("daemon", 0, 0)]))
    assert int(out.core.hp) == 0
    assert enemies(out)[1] == ("daemon", 1, 0)
    assert len(transmissions(out)) == 1 and transmissions(out)[0]["scheduled"]


def test_stunned_enemy_skips_the_turn_and_recovers():
    out = run(setup(player={"row": 3, "col": 3}, enemies=[enemy("virus", 4, 3, stunned=True)]))
    assert int(out.core.hp) == 3
    assert scenario.inspect(out)["enemies"][0]["stunned"] is False


def test_a_stunned_virus_takes_neither_of_its_two_steps():
    out = run(setup(enemies=[enemy("virus", 4, 0, stunned=True)]))
    assert enemies(out) == [("virus", 4, 0)]
    assert scenario.inspect(out)["enemies"][0]["stunned"] is False
    assert enemies(run(out, seed=1)) == [("virus", 2, 0)]


def test_disabled_enemies_sit_out_one_turn_per_disabled_turn():
    # §8 step 4 skips disabledTurns > 0; step 7 decays it by one per full turn.
    state = setup(enemies=[enemy("daemon", 4, 0, disabledTurns=2),
                           enemy("virus", 0, 1, disabledTurns=1)])
    seen = []
    for seed in range(3):
        state = run(state, seed=seed)
        seen.append((enemies(state)[0], int(state.core.hp),
                     [e["disabledTurns"] for e in scenario.inspect(state)["enemies"]]))
    assert seen == [(("daemon", 4, 0), 3, [1, 0]),   # neither acts; the adjacent virus holds
                    (("daemon", 4, 0), 2, [0, 0]),   # the virus attacks, the daemon waits
                    (("daemon", 3, 0), 1, [0, 0])]   # both act


def test_glitch_crosses_and_stands_on_blocks_while_a_daemon_goes_round():
    # §9.1: a wall on row 1 except column 5. The glitch goes straight through onto a block
    # and attacks from it; the daemon takes the way round the right end.
    wall = [{"row": 1, "col": c, "type": "data", "points": 1} for c in range(5)]
    first = run(setup(enemies=[enemy("glitch", 2, 0), enemy("daemon", 2, 3)], blocks=wall))
    assert enemies(first) == [("glitch", 1, 0), ("daemon", 2, 4)]
    second = run(first, seed=3)
    assert enemies(second) == [("glitch", 1, 0), ("daemon", 2, 5)]
    assert int(second.core.hp) == 2
    # A daemon left on a block (PUSH/PULL) moves off it normally: (1,1) and (1,3) are blocks.
    off = run(setup(enemies=[enemy("daemon", 1, 2)], blocks=wall))
    assert enemies(off) == [("daemon", 0, 2)]


def test_processing_order_is_uniformly_random():
    # Both enemies want (0,1). Whoever goes first takes it; the other goes round.
    state = setup(enemies=[enemy("daemon", 0, 2), enemy("daemon", 1, 1)])
    out = _run_seeds(jax.random.split(jax.random.PRNGKey(1), 400), state, jnp.asarray(True))
    rows, cols = np.asarray(out.core.enemies.row[:, :2]), np.asarray(out.core.enemies.col[:, :2])
    first_wins = (rows[:, 0] == 0) & (cols[:, 0] == 1) & (rows[:, 1] == 1) & (cols[:, 1] == 0)
    second_wins = (rows[:, 1] == 0) & (cols[:, 1] == 1) & (rows[:, 0] == 1) & (cols[:, 0] == 2)
    assert (first_wins | second_wins).all()
    assert 0.4 < first_wins.mean() < 0.6


def test_each_virus_step_draws_a_fresh_processing_order():
    # Viruses A (0,3) and B (1,2) chase the player at (0,0). Worked through §8.1 for the four
    # pairs of orders (step 0, step 1): only "A first" twice ends with A (0,1), B (1,0); the
    # other three end with A (1,2), B (0,1). Fresh orders per step give 1/4; reusing step 0's
    # order in step 1 would give 1/2. Over 400 keys the fraction's sd is 0.022, so the bounds
    # [0.15, 0.35] sit 4.6 sd from 1/4 (false failure < 1e-5).
    state = setup(enemies=[enemy("virus", 0, 3), enemy("virus", 1, 2)])
    out = _run_seeds(jax.random.split(jax.random.PRNGKey(4), 400), state, jnp.asarray(True))
    cells = _cells_per_seed(out, 2)
    a_first_twice = np.array([c == ((0, 1), (1, 0)) for c in cells])
    other = np.array([c == ((1, 2), (0, 1)) for c in cells])
    assert (a_first_twice | other).all()
    assert (np.asarray(out.core.hp) == 3).all()
    assert 0.15 < a_first_twice.mean() < 0.35


def test_a_shared_cell_stays_occupied_until_its_last_enemy_leaves():
    # Two daemons stacked on (2,0) (possible after PUSH/PULL). The first to act steps down to
    # (1,0); the second must then go round via (2,1). A third daemon on (3,0) goes right to
    # (3,1) in every order; had (2,0) been freed when the first daemon left, the order
    # (first, third, second) would send it down onto the remaining stacked daemon.
    state = setup(enemies=[enemy("daemon", 2, 0), enemy("daemon", 2, 0)])
    assert sorted(enemies(run(state))) == [("daemon", 1, 0), ("daemon", 2, 1)]
    three = setup(player={"row": 0, "col": 0},
                  enemies=[enemy("daemon", 2, 0), enemy("daemon", 2, 0), enemy("daemon", 3, 0)])
    outcomes = _run_seeds(jax.random.split(jax.random.PRNGKey(2), 64), three, jnp.asarray(True))
    for cells in _cells_per_seed(outcomes, 3):
        assert sorted(cells[:2]) == [(1, 0), (2, 1)]
        assert cells[2] == (3, 1)


def test_a_shared_cell_stays_occupied_while_an_enemy_that_did_not_act_holds_it():
    # A stunned daemon and an active one stacked on (2,0); the active one steps down to (1,0)
    # in every order. The stunned one keeps (2,0) occupied whether it is processed before or
    # after its cellmate, so the daemon on (3,0) always goes round to (3,1), never onto (2,0).
    state = setup(player={"row": 0, "col": 0},
                  enemies=[enemy("daemon", 2, 0, stunned=True), enemy("daemon", 2, 0),
                           enemy("daemon", 3, 0)])
    outcomes = _run_seeds(jax.random.split(jax.random.PRNGKey(3), 64), state, jnp.asarray(True))
    for cells in _cells_per_seed(outcomes, 3):
        assert cells == ((2, 0), (1, 0), (3, 1))


def test_a_shared_cell_stays_occupied_while_an_earlier_cellmate_that_stayed_holds_it():
    # Player (0,0) walled in by blocks (0,1) and (1,0); a daemon and a glitch stacked on (1,1),
    # whose other neighbours are the block (1,2) and a glitch on (2,1). The daemon can only go
    # up, so when it acts before the glitch on (2,1) it stays; its cellmate glitch always steps
    # down through the block onto (0,1). The (1,1) glitch leaving must not free (1,1) while the
    # daemon, processed earlier, still stands there: the (2,1) glitch then always goes left to
    # (2,0), never down onto the daemon (order daemon, its cellmate, the other glitch: 1 in 6).
    state = setup(player={"row": 0, "col": 0},
                  blocks=[{"row": r, "col": c, "type": "data", "points": 1}
                          for r, c in [(0, 1), (1, 0), (1, 2)]],
                  enemies=[enemy("daemon", 1, 1), enemy("glitch", 1, 1), enemy("glitch", 2, 1)])
    outcomes = _run_seeds(jax.random.split(jax.random.PRNGKey(3), 64), state, jnp.asarray(True))
    seen = set(_cells_per_seed(outcomes, 3))
    # The daemon stays (it came before the (2,1) glitch) or follows it up to (2,1).
    assert seen == {((1, 1), (0, 1), (2, 0)), ((2, 1), (0, 1), (2, 0))}
    assert (np.asarray(outcomes.core.hp) == 3).all()


# ------------------------------------------------------------------------------------------
# Hatching (§8 step 3).

def test_transmissions_count_down_and_hatch_disabled_in_list_order():
    state = setup(player={"row": 5, "col": 5}, transmissions=[
        {"row": 0, "col": 0, "turnsRemaining": 3, "enemyType": "virus"},
        {"row": 0, "col": 3, "turnsRemaining": 1, "enemyType": "glitch",
         "isFromScheduledTask": True},
        {"row": 3, "col": 0, "turnsRemaining": 0, "enemyType": "daemon",
         "spawnedFromSiphon": True}])
    out = run(state)
    hatched = scenario.inspect(out)["enemies"]
    assert [(e["type"], e["row"], e["col"], e["hp"]) for e in hatched] == [
        ("glitch", 0, 3, 2), ("daemon", 3, 0, 3)]
    assert [(e["isFromScheduledTask"], e["spawnedFromSiphon"]) for e in hatched] == [
        (True, False), (False, True)]
    # Disabled for the turn they hatch in (they did not move), decayed to 0 at its end.
    assert [e["disabledTurns"] for e in hatched] == [0, 0]
    assert transmissions(out) == [dict(row=0, col=0, turns=2, siphon=False, scheduled=False)]
    # They act in the following turn.
    again = run(out, seed=1)
    assert enemies(again) == [("glitch", 1, 3), ("daemon", 4, 0)]


def test_countdowns_are_exact_for_any_setup_value():
    # A.1 stores turnsRemaining verbatim: huge countdowns count down without wrapping.
    state = setup(player={"row": 5, "col": 5}, transmissions=[
        {"row": 0, "col": 0, "turnsRemaining": 2**31 - 1, "enemyType": "virus"},
        {"row": 0, "col": 1, "turnsRemaining": 2**20 + 2, "enemyType": "daemon"},
        {"row": 0, "col": 2, "turnsRemaining": -2**30, "enemyType": "glitch"}])
    out = run(state)
    assert [t["turns"] for t in transmissions(out)] == [2**31 - 2, 2**20 + 1]
    assert enemies(out) == [("glitch", 0, 2)]


def test_hatchling_counts_for_two_virus_steps_only_from_the_next_turn():
    out = run(setup(player={"row": 5, "col": 0},
                    transmissions=[{"row": 0, "col": 0, "turnsRemaining": 1,
                                    "enemyType": "virus"}]))
    assert enemies(out) == [("virus", 0, 0)]
    assert enemies(run(out)) == [("virus", 2, 0)]


def test_hatchlings_get_their_types_full_hp_after_the_existing_enemies():
    state = setup(player={"row": 5, "col": 0}, enemies=[enemy("daemon", 0, 5, hp=1)],
                  transmissions=[{"row": r, "col": c, "turnsRemaining": 1, "enemyType": kind}
                                 for r, c, kind in [(0, 0, "virus"), (2, 2, "cryptog"),
                                                    (3, 3, "daemon"), (1, 4, "glitch")]])
    out = run(state)
    assert [(e["type"], e["row"], e["col"], e["hp"]) for e in scenario.inspect(out)["enemies"]] == [
        ("daemon", 1, 5, 1), ("virus", 0, 0, 2), ("cryptog", 2, 2, 2), ("daemon", 3, 3, 3),
        ("glitch", 1, 4, 2)]
    assert transmissions(out) == []


@pytest.mark.parametrize("turns", [1, 3])
def test_hatchlings_and_counting_transmissions_are_occupied_cells(turns):
    # §8.1: O holds every other enemy (a hatchling too, in the turn it hatches) and every
    # transmission. The daemon's straight way down through (1,0) is taken: it goes round.
    state = setup(enemies=[enemy("daemon", 2, 0)],
                  transmissions=[{"row": 1, "col": 0, "turnsRemaining": turns,
                                  "enemyType": "glitch"}])
    out = run(state)
    if turns == 1:
        assert enemies(out) == [("daemon", 2, 1), ("glitch", 1, 0)]
    else:
        assert enemies(out) == [("daemon", 2, 1)]
        assert transmissions(out) == [dict(row=1, col=0, turns=2, siphon=False,
                                           scheduled=False)]


@pytest.mark.parametrize("kind, hp_after", [("daemon", 3), ("glitch", 3), ("virus", 2)])
def test_an_enemy_hatched_under_the_player_steps_up_off_it_next_turn(kind, hp_after):
    # §8.1: e = p is not adjacent, so it moves (rule 3: the first free neighbour, up); a virus
    # then attacks with its second step.
    state = setup(player={"row": 2, "col": 2},
                  transmissions=[{"row": 2, "col": 2, "turnsRemaining": 1, "enemyType": kind}])
    hatched = run(state)
    assert enemies(hatched) == [(kind, 2, 2)] and int(hatched.core.hp) == 3
    out = run(hatched, seed=5)
    assert enemies(out) == [(kind, 3, 2)] and int(out.core.hp) == hp_after


def test_a_hatchling_past_a_full_enemy_list_is_dropped():
    # specs/game-rules.md §13: the one departure from §2.7, reachable only with stacked pieces
    # (here 36 daemons on one cell, which play cannot build). The list stays whole and valid.
    state = setup(player={"row": 3, "col": 3}, enemies=[enemy("daemon", 0, 0)] * 36,
                  transmissions=[{"row": 5, "col": 5, "turnsRemaining": 1, "enemyType": "virus"}])
    out = run(state)
    assert transmissions(out) == []
    assert np.asarray(out.core.enemies.active).all()
    assert [e[0] for e in enemies(out)] == ["daemon"] * 36


def test_hatching_with_a_shorter_transmission_list_adds_only_the_hatchlings():
    # The capacities are separate constants: with 8 transmission slots and 36 enemy slots, a
    # transmission that is not hatching must not land in enemy slot 8 (it once did).
    def shortened(items, size, **fields):
        return jax.tree.map(lambda a: a[:size], items).replace(**{
            name: getattr(items, name)[:size].at[0].set(value) for name, value in fields.items()})

    state = setup()
    waiting = shortened(state.core.transmissions, 8, active=True, row=2, col=3, enemy_type=1,
                        turns_remaining=5)
    hatching = waiting.replace(turns_remaining=waiting.turns_remaining.at[0].set(1))
    hatched_enemies, still = enemy_turn._hatch(state.core.enemies, waiting)
    assert not np.asarray(hatched_enemies.active).any()
    assert np.asarray(still.active).tolist() == [True] + [False] * 7
    assert int(still.turns_remaining[0]) == 4
    hatched_enemies, still = enemy_turn._hatch(state.core.enemies, hatching)
    assert np.flatnonzero(np.asarray(hatched_enemies.active)).tolist() == [0]
    assert (int(hatched_enemies.kind[0]), int(hatched_enemies.row[0]),
            int(hatched_enemies.col[0])) == (1, 2, 3)
    assert not np.asarray(still.active).any()


# ------------------------------------------------------------------------------------------
# Scheduled tasks (§10) and pending siphon transmissions (§8 step 6).

def test_first_scheduled_transmission_at_turn_twelve_then_every_twelve():
    state = setup(player={"row": 0, "col": 0})
    spawned_at = []
    for seed in range(25):
        before = len(transmissions(state)) + len(enemies(state))
        state = run(state, seed=seed)
        if len(transmissions(state)) + len(enemies(state)) > before:
            spawned_at.append(int(state.core.turn))
    assert spawned_at == [12, 24]
    assert int(state.next_scheduled_turn) == 36


def test_scheduled_task_after_a_siphon_is_due_at_17_then_28():
    # The siphon at turn 0 made the interval 11 and the due turn 12 + 5 = 17.
    state = setup(scheduledTaskInterval=11, nextScheduledTaskTurn=17, turn=16)
    out = run(state)
    assert int(out.core.turn) == 17 and int(out.next_scheduled_turn) == 28
    assert transmissions(out)[0]["scheduled"] and transmissions(out)[0]["turns"] == 1
    quiet = run(setup(scheduledTaskInterval=11, nextScheduledTaskTurn=17, turn=15))
    assert transmissions(quiet) == [] and int(quiet.next_scheduled_turn) == 17


def test_calm_stops_scheduled_tasks_without_touching_the_due_turn():
    out = run(setup(turn=11, scheduledTasksDisabled=True))
    assert transmissions(out) == [] and int(out.next_scheduled_turn) == 12


@pytest.mark.parametrize("setup_fields, due_after", [
    ({"turn": 10, "scheduledTaskInterval": 7, "nextScheduledTaskTurn": 5}, 18),
    ({"turn": 20}, 33),  # A.3: a setup with turn >= 11 fires at once, then turn + 12
])
def test_an_overdue_scheduled_task_fires_and_counts_from_the_current_turn(setup_fields,
                                                                          due_after):
    out = run(setup(**setup_fields))
    assert [(t["scheduled"], t["siphon"], t["turns"]) for t in transmissions(out)] == [
        (True, False, 1)]
    assert int(out.next_scheduled_turn) == due_after
    assert len(transmissions(run(out, seed=1))) == 0  # hatched, and nothing new is due


def test_calm_stops_the_scheduled_transmission_but_not_the_siphon_ones():
    out = run(setup(player={"row": 3, "col": 3}, turn=11, scheduledTasksDisabled=True,
                    pendingSiphonTransmissions=2))
    assert [(t["scheduled"], t["siphon"]) for t in transmissions(out)] == [(False, True)] * 2
    assert int(out.next_scheduled_turn) == 12 and int(out.pending_siphon_transmissions) == 0


def test_with_no_free_cell_nothing_is_placed_but_the_schedule_advances_and_the_debt_clears():
    # Blocks everywhere but the player's (0,0) and the exit (5,5), where a stunned daemon
    # stands: the scheduled and the three owed transmissions are all lost (§8 steps 5-6).
    blocks = [{"row": r, "col": c, "type": "data", "points": 1}
              for r in range(6) for c in range(6) if (r, c) not in [(0, 0), (5, 5)]]
    out = run(setup(turn=11, pendingSiphonTransmissions=3, blocks=blocks,
                    enemies=[enemy("daemon", 5, 5, stunned=True)]))
    assert transmissions(out) == []
    assert int(out.next_scheduled_turn) == 24 and int(out.pending_siphon_transmissions) == 0


def test_pending_siphon_transmissions_are_created_out_of_the_line_of_fire():
    out = run(setup(player={"row": 3, "col": 3}, pendingSiphonTransmissions=4))
    created = transmissions(out)
    assert len(created) == 4 and int(out.pending_siphon_transmissions) == 0
    for t in created:
        assert t["siphon"] and not t["scheduled"] and t["turns"] == 1
        assert t["row"] != 3 and t["col"] != 3
    assert len({(t["row"], t["col"]) for t in created}) == 4


def test_scheduled_transmission_is_placed_before_the_siphon_ones():
    out = run(setup(turn=11, pendingSiphonTransmissions=2))
    assert [(t["scheduled"], t["siphon"]) for t in transmissions(out)] == [
        (True, False), (False, True), (False, True)]


def test_new_transmissions_see_the_moved_enemies():
    # Every cell but the player's, (5,5) and (4,5) holds a transmission; the daemon moves
    # from (5,5) to (4,5) before the scheduled task, so (5,5) is the only free cell left.
    cells = [(r, c) for r in range(6) for c in range(6) if (r, c) not in [(0, 0), (5, 5), (4, 5)]]
    state = setup(turn=11, enemies=[enemy("daemon", 5, 5)], transmissions=[
        {"row": r, "col": c, "turnsRemaining": 9, "enemyType": "virus"} for r, c in cells])
    out = run(state)
    assert enemies(out) == [("daemon", 4, 5)]
    assert transmissions(out)[-1]["row"] == 5 and transmissions(out)[-1]["col"] == 5


# ------------------------------------------------------------------------------------------
# STEP, snapshot, follows.

def test_step_skips_the_whole_turn_and_takes_no_snapshot():
    state = setup(player={"row": 3, "col": 3}, turn=11, stepActive=True,
                  pendingSiphonTransmissions=2,
                  enemies=[enemy("virus", 4, 3, stunned=True), enemy("daemon", 0, 0)],
                  transmissions=[{"row": 5, "col": 0, "turnsRemaining": 1,
                                  "enemyType": "virus"}])
    out = run(state)
    assert not bool(out.step_active)
    out_core, in_core = jax.tree_util.tree_leaves(out.core), jax.tree_util.tree_leaves(state.core)
    assert all(np.array_equal(a, b) for a, b in zip(out_core, in_core))
    assert int(out.pending_siphon_transmissions) == 2
    assert int(out.history_size) == 0


def test_a_snapshot_is_pushed_after_every_full_turn():
    state = setup(enemies=[enemy("daemon", 4, 0)])
    first = run(state)
    second = run(first, seed=1)
    assert int(first.history_size) == 1 and int(second.history_size) == 2
    top = history.top(second)
    assert int(top.turn) == 2 and int(top.enemies.row[0]) == 2


def test_no_enemy_turn_leaves_the_state_unchanged():
    state = setup(enemies=[enemy("daemon", 4, 0)], stepActive=True, turn=11)
    out = run(state, follows=False)
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(state)):
        assert np.array_equal(a, b)


# ------------------------------------------------------------------------------------------
# Timing across whole steps (siphon, free-program stun, STEP).

def _step(state, action, seed=0):
    return compiled.STEP(jax.random.PRNGKey(seed), state, jnp.int32(action))[0]


def test_a_siphon_on_turn_eleven_postpones_the_first_scheduled_task_to_seventeen():
    # §10: the siphon's +5 relief applies at the moment of siphoning, before its own enemy
    # turn makes turn 12 (a siphon that gathers nothing owes no transmissions).
    out = _step(setup(player={"row": 3, "col": 3, "dataSiphons": 1}, turn=11), C.ACTION_SIPHON)
    hidden = scenario.inspect(out)
    assert (hidden["turn"], hidden["scheduledTaskInterval"],
            hidden["nextScheduledTaskTurn"]) == (12, 11, 17)
    assert transmissions(out) == []


def test_a_free_program_stun_survives_a_step_skipped_turn():
    # §8: ROW's stun lasts through the next *full* enemy turn; the STEP-skipped one does not
    # count and does not clear it.
    state = setup(player={"row": 3, "col": 3, "credits": 20, "energy": 20},
                  ownedPrograms=["ROW", "STEP", "WAIT"], enemies=[enemy("virus", 3, 4)])
    state = _step(_step(state, compiled.program_action("ROW")), compiled.program_action("STEP"))
    seen = []
    for seed in range(3):
        state = _step(state, C.ACTION_WAIT, seed)
        seen.append((int(state.core.turn), int(state.core.hp),
                     scenario.inspect(state)["enemies"][0]["stunned"]))
    assert seen == [(0, 3, True), (1, 3, False), (2, 2, False)]


# ------------------------------------------------------------------------------------------
# Loop bounds: the loop may stop after the acting enemies (the batched env step relies on it).

def test_enemy_loop_stopping_after_the_acting_enemies_changes_nothing():
    from test_fuzz import random_scenario
    states = jax.vmap(random_scenario)(jax.random.split(jax.random.PRNGKey(7), 64))
    keys = jax.random.split(jax.random.PRNGKey(8), 64)
    counts = jax.vmap(enemy_turn.acting_counts)(states)
    assert int(counts[:, 0].max()) >= 3 and int(counts[:, 1].max()) >= 1

    @jax.jit
    def both(keys, states, counts):
        full = jax.vmap(enemy_turn.run, in_axes=(0, 0, None))(keys, states, True)
        tight = jax.vmap(enemy_turn.run, in_axes=(0, 0, None, 0))(keys, states, True, counts)
        return full, tight

    full, tight = both(keys, states, counts)
    for a, b in zip(jax.tree_util.tree_leaves(full), jax.tree_util.tree_leaves(tight),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # The enemies did act: some moved, and the player took hits somewhere.
    assert bool(jnp.any(full.core.enemies.row != states.core.enemies.row))
    assert bool(jnp.any(full.core.hp < states.core.hp))
