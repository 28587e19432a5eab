"""The 23 program effects (§7): masks at the edges (§4.3, §7.1), effects, rewards, observation.

Effects are checked on `programs.apply` directly (the state right after the program); rewards and
observations go through `transition.step`. UNDO has its own file (test_undo.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import history, programs, scenario

import compiled

APPLY = compiled.APPLY_PROGRAM
APPLY_MANY_KEYS = jax.jit(jax.vmap(programs.apply, in_axes=(0, None, None)))
VALID = compiled.VALID_ACTIONS
STEP = compiled.STEP
KEY = jax.random.PRNGKey(0)
enemy = compiled.enemy

CH_STUNNED, CH_CRYPTOG, CH_ENEMY_HP = 5, 3, 4
CH_SPAWN_COUNT, CH_TRANSMISSION = 35, 36
PLAYER_ATTACK, PLAYER_SHOW, PLAYER_CALM = 7, 8, 9


def index(name):
    return C.PROGRAM_NAMES.index(name)


def action(name):
    return C.FIRST_PROGRAM_ACTION + index(name)


def transmission(row, col, turns=2, kind="virus"):
    return {"row": row, "col": col, "turnsRemaining": turns, "enemyType": kind}


def scene(name, row=2, col=2, credits=None, energy=None, **extra):
    """A scenario owning `name` with exactly its cost in credits and energy unless given."""
    player = {"row": row, "col": col,
              "credits": int(C.PROGRAM_CREDIT_COST[index(name)]) if credits is None else credits,
              "energy": int(C.PROGRAM_ENERGY_COST[index(name)]) if energy is None else energy}
    player.update(extra.pop("player", {}))
    return {"player": player, "ownedPrograms": [name], **extra}


def apply(d, name, key=KEY):
    return APPLY(key, scenario.from_dict(d), index(name))


def enemies_of(state):
    return [(e["type"], e["row"], e["col"], e["hp"], e["stunned"])
            for e in scenario.inspect(state)["enemies"]]


def positions(state):
    return [(e["row"], e["col"]) for e in scenario.inspect(state)["enemies"]]


def transmissions_of(state):
    t = state.core.transmissions
    active = np.asarray(t.active)
    return list(zip(np.asarray(t.row)[active].tolist(), np.asarray(t.col)[active].tolist(),
                    np.asarray(t.turns_remaining)[active].tolist()))


def is_valid(d, name, state=None):
    return bool(VALID(scenario.from_dict(d) if state is None else state)[action(name)])


def with_history(d):
    """The scenario's state with one snapshot of itself on the UNDO history."""
    return history.push(scenario.from_dict(d), jnp.asarray(True))


# --- §4.3 / §7.1: ownership, exact cost, applicability edges --------------------------------

# Per program: (extra scenario fields that make it applicable, ones that just miss).
APPLICABILITY = {
    "PUSH": ({"enemies": [enemy("virus", 5, 5)]}, {"transmissions": [transmission(5, 5)]}),
    "PULL": ({"enemies": [enemy("glitch", 0, 0, hp=0)]}, {"transmissions": [transmission(5, 5)]}),
    "CRASH": ({"transmissions": [transmission(3, 3)]},
              {"enemies": [enemy("virus", 4, 4)],
               "blocks": [{"row": 0, "col": 4, "type": "data", "points": 1}]}),
    "WARP": ({"transmissions": [transmission(5, 0)]}, {}),
    "POLY": ({"enemies": [enemy("cryptog", 5, 0)]}, {"transmissions": [transmission(5, 0)]}),
    "WAIT": ({}, None),
    "DEBUG": ({"enemies": [enemy("virus", 4, 4)],
               "blocks": [{"row": 4, "col": 4, "type": "data", "points": 2, "siphoned": True}]},
              {"enemies": [enemy("virus", 4, 3)],
               "blocks": [{"row": 4, "col": 4, "type": "data", "points": 2}]}),
    "ROW": ({"enemies": [enemy("daemon", 2, 5)]}, {"enemies": [enemy("daemon", 3, 2)]}),
    "COL": ({"enemies": [enemy("daemon", 0, 2)]}, {"enemies": [enemy("daemon", 2, 3)]}),
    "STEP": ({}, None),
    "SIPH+": ({}, None),
    "EXCH": ({}, {"player": {"credits": 3}}),
    "SHOW": ({}, {"showActivated": True}),
    "RESET": ({"player": {"hp": 2}}, {"player": {"hp": 3}}),
    "CALM": ({}, {"scheduledTasksDisabled": True}),
    "D_BOM": ({"enemies": [enemy("daemon", 5, 5)]}, {"enemies": [enemy("virus", 5, 5)]}),
    "DELAY": ({"transmissions": [transmission(0, 5)]}, {"enemies": [enemy("virus", 0, 5)]}),
    "ANTI-V": ({"enemies": [enemy("virus", 5, 5)]}, {"enemies": [enemy("glitch", 5, 5)]}),
    "SCORE": ({"stage": 7}, {"stage": 8}),
    "REDUC": ({"blocks": [{"row": 0, "col": 0, "type": "question", "points": 4,
                           "spawnCount": 1}]},
              {"blocks": [{"row": 0, "col": 0, "type": "data", "points": 4, "spawnCount": 0},
                          {"row": 0, "col": 1, "type": "data", "points": 4,
                           "siphoned": True}]}),
    "ATK+": ({"atkPlusUsesThisStage": 1}, {"atkPlusUsesThisStage": 2}),
    "HACK": ({"siphonedCells": [{"row": 0, "col": 3}]}, {}),
}


def merged(base, extra):
    out = dict(base)
    for key, value in extra.items():
        out[key] = {**out.get(key, {}), **value} if key == "player" else value
    return out


@pytest.mark.parametrize("name", sorted(APPLICABILITY))
def test_mask_exact_cost_ownership_and_applicability_edge(name):
    applicable, just_misses = APPLICABILITY[name]
    d = merged(scene(name), applicable)
    assert is_valid(d, name)
    credit_cost = int(C.PROGRAM_CREDIT_COST[index(name)])
    energy_cost = int(C.PROGRAM_ENERGY_COST[index(name)])
    if credit_cost:
        assert not is_valid(merged(d, {"player": {"credits": credit_cost - 1}}), name)
    if energy_cost:
        assert not is_valid(merged(d, {"player": {"energy": energy_cost - 1}}), name)
    assert not is_valid({**d, "ownedPrograms": []}, name)
    if just_misses is not None:
        assert not is_valid(merged(scene(name), just_misses), name)


def test_undo_mask_needs_a_snapshot_and_exactly_one_credit():
    d = scene("UNDO", credits=1)
    assert not is_valid(d, "UNDO")  # A.3: empty history after setup
    assert is_valid(d, "UNDO", with_history(d))
    assert not is_valid(d, "UNDO", with_history(merged(d, {"player": {"credits": 0}})))


def test_enemies_given_no_hp_still_make_programs_applicable():
    """§4.3: an enemy with hp <= 0 from setup still counts as an enemy."""
    d = scene("ROW", enemies=[enemy("virus", 2, 0, hp=0)])
    assert is_valid(d, "ROW")


def data_block(row, col, **extra):
    return {"row": row, "col": col, "type": "data", "points": 2, **extra}


# (program, scenario fields, valid) with ample credits and energy: only §7.1 applicability decides.
MASK_EDGES = [
    pytest.param("CRASH", {"enemies": [enemy("virus", 2, 2)]}, False, id="CRASH-enemy-on-own-cell"),
    pytest.param("CRASH", {"transmissions": [transmission(2, 2)]}, False,
                 id="CRASH-transmission-on-own-cell"),
    pytest.param("CRASH", {"player": {"row": 0, "col": 5}, "enemies": [enemy("virus", 1, 0)],
                           "transmissions": [transmission(5, 4)]}, False, id="CRASH-no-wraparound"),
    pytest.param("CRASH", {"player": {"row": 0, "col": 0}, "blocks": [data_block(1, 1)]}, True,
                 id="CRASH-corner-ring"),
    pytest.param("CRASH", {"player": {"row": 4, "col": 4},  # exit (5,5): not a block either
                           "resources": [{"row": 3, "col": 3, "dataSiphon": True},
                                         {"row": 3, "col": 4, "credits": 2}]}, False,
                 id="CRASH-exit-siphon-resource-are-not-blocks"),
    pytest.param("DEBUG", {"enemies": [enemy("daemon", 0, 0)],
                           "blocks": [{"row": 0, "col": 0, "type": "question", "points": 2}]},
                 True, id="DEBUG-enemy-on-question-block"),
    pytest.param("DEBUG", {"transmissions": [transmission(0, 0)], "blocks": [data_block(0, 0)]},
                 False, id="DEBUG-transmission-on-block"),
    pytest.param("DEBUG", {"enemies": [enemy("daemon", 5, 5), enemy("virus", 0, 0)],
                           "resources": [{"row": 0, "col": 0, "dataSiphon": True}]}, False,
                 id="DEBUG-enemies-on-exit-and-data-siphon"),
    pytest.param("ROW", {"enemies": [enemy("virus", 2, 2)]}, True, id="ROW-enemy-on-own-cell"),
    pytest.param("COL", {"enemies": [enemy("virus", 2, 2)]}, True, id="COL-enemy-on-own-cell"),
    pytest.param("ROW", {"transmissions": [transmission(2, 5)]}, False, id="ROW-transmission"),
    pytest.param("D_BOM", {"enemies": [enemy("daemon", 4, 4, hp=0)]}, True, id="D_BOM-dead-daemon"),
    pytest.param("D_BOM", {"transmissions": [transmission(4, 4, kind="daemon")]}, False,
                 id="D_BOM-daemon-transmission"),
    pytest.param("ANTI-V", {"transmissions": [transmission(4, 4, kind="virus")]}, False,
                 id="ANTI-V-virus-transmission"),
    pytest.param("DELAY", {"transmissions": [transmission(4, 4, turns=-2)]}, True,
                 id="DELAY-negative-countdown"),
    pytest.param("REDUC", {"blocks": [{"row": 4, "col": 4, "type": "question", "points": 3,
                                       "spawnCount": 0}]}, False, id="REDUC-question-at-zero"),
    pytest.param("REDUC", {"blocks": [{"row": 4, "col": 4, "type": "question",
                                       "program": "WAIT"}]}, True,
                 id="REDUC-question-program-spawn-cost-one"),
    pytest.param("RESET", {"player": {"hp": 0}}, True, id="RESET-hp-0"),
    pytest.param("RESET", {"player": {"hp": 7}}, False, id="RESET-setup-hp-7-counts-as-3"),
    pytest.param("HACK", {"siphonCenterCells": [{"row": 3, "col": 3}]}, False,
                 id="HACK-siphon-centre-alone"),
    pytest.param("HACK", {"blocks": [data_block(1, 1, siphoned=True)]}, True,
                 id="HACK-siphoned-block"),
    pytest.param("ATK+", {"player": {"attackDamage": 3}}, True, id="ATK+-no-damage-cap"),
]


@pytest.mark.parametrize("name, extra, valid", MASK_EDGES)
def test_mask_applicability_edge_cases(name, extra, valid):
    """§4.3 / §7.1: ring of 8 excludes the player's cell and never wraps; transmissions are not
    enemies; corners are not blocks; RESET needs hp < 3; no cap on attackDamage."""
    assert is_valid(merged(scene(name, credits=30, energy=30), extra), name) == valid


# --- costs and turn structure ---------------------------------------------------------------

RICH = {"player": {"row": 2, "col": 2, "credits": 20, "energy": 20, "hp": 2},
        "enemies": [enemy("daemon", 3, 3), enemy("virus", 2, 5)],
        "transmissions": [transmission(0, 0)],
        "blocks": [{"row": 4, "col": 4, "type": "data", "points": 3}],
        "siphonedCells": [{"row": 1, "col": 1}]}


@pytest.mark.parametrize("name", [n for n in C.PROGRAM_NAMES if n != "UNDO"])
def test_cost_is_paid_and_only_wait_ends_the_turn(name):
    state, outcome = apply(RICH, name)
    credits = 20 - int(C.PROGRAM_CREDIT_COST[index(name)])
    energy = 20 - int(C.PROGRAM_ENERGY_COST[index(name)]) + (4 if name == "EXCH" else 0)
    assert (int(state.core.credits), int(state.core.energy)) == (credits, energy)
    assert bool(outcome.enemy_turn_follows) == (name == "WAIT")
    assert not bool(outcome.failed) and not bool(outcome.data_siphon_collected)
    assert int(state.history_size) == 0 and int(state.core.turn) == 0


def test_wait_changes_nothing_but_energy():
    before = scenario.from_dict(RICH)
    after, outcome = APPLY(KEY, before, index("WAIT"))
    expected = before.replace(core=before.core.replace(energy=before.core.energy - 1))
    for a, b in zip(jax.tree_util.tree_leaves(after), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_array_equal(a, b)
    assert bool(outcome.enemy_turn_follows) and int(outcome.kills) == 0


def test_programs_are_free_actions_in_a_step():
    d = scene("SIPH+", credits=5, enemies=[enemy("virus", 3, 2)])
    state, _, reward, done, info = STEP(KEY, scenario.from_dict(d), action("SIPH+"))
    hidden = scenario.inspect(state)
    assert hidden["turn"] == 0 and int(state.core.hp) == 3  # the adjacent virus did not act
    assert not bool(done) and int(state.core.data_siphons) == 1
    # SIPH+ is not a data-siphon pickup (§7.12); its 5 credits are a resource loss.
    assert float(info["reward_components"]["dataSiphon"]) == 0.0
    assert float(info["reward_components"]["resourceGain"]) == pytest.approx(-0.25)
    assert float(reward) == pytest.approx(-0.26)


# --- PUSH (§7.2) ----------------------------------------------------------------------------

def test_push_moves_every_enemy_away_along_the_rule_candidates():
    d = scene("PUSH", enemies=[
        enemy("virus", 2, 4),      # same row: straight away
        enemy("daemon", 3, 3),     # diagonal: diagonally away
        enemy("glitch", 5, 3),     # diagonal at the top edge: slides right
        enemy("cryptog", 0, 0),    # corner facing away: stays
        enemy("virus", 2, 5),      # same row on the edge: stays
        enemy("daemon", 2, 2),     # on the player's cell: stays
    ])
    state, outcome = apply(d, "PUSH")
    assert positions(state) == [(2, 5), (4, 4), (5, 4), (0, 0), (2, 5), (2, 2)]
    assert int(outcome.kills) == 0


def test_push_collisions_resolve_in_list_order():
    # Player (0,0): both (4,5) and (5,4) target (5,5); the first in the list wins.
    first, second = enemy("virus", 4, 5, hp=1, stunned=True), enemy("daemon", 5, 4)
    state, _ = apply(scene("PUSH", row=0, col=0, enemies=[first, second]), "PUSH")
    assert positions(state) == [(5, 5), (5, 4)]
    assert enemies_of(state)[0] == ("virus", 5, 5, 1, True)  # no damage, stun kept
    state, _ = apply(scene("PUSH", row=0, col=0, enemies=[second, first]), "PUSH")
    assert positions(state) == [(5, 5), (4, 5)]


def test_push_ignores_blocks_transmissions_and_enemies_that_stay():
    d = scene("PUSH", row=0, col=0,
              enemies=[enemy("cryptog", 5, 5), enemy("virus", 4, 5), enemy("glitch", 0, 3),
                       enemy("daemon", 3, 0)],
              transmissions=[transmission(4, 0)],
              blocks=[{"row": 0, "col": 4, "type": "data", "points": 1}])
    state, _ = apply(d, "PUSH")
    assert positions(state) == [(5, 5), (5, 5), (0, 4), (4, 0)]


def test_push_of_an_enemy_on_the_player_cell_claims_that_cell():
    d = scene("PUSH", enemies=[enemy("virus", 2, 2), enemy("daemon", 2, 2)])
    state, _ = apply(d, "PUSH")
    assert positions(state) == [(2, 2), (2, 2)]


def test_push_an_enemy_left_behind_by_a_claim_does_not_claim_its_own_cell():
    # Player (0,0): (4,5) and (5,4) both target (5,5); the daemon stays without claiming (5,4),
    # so the glitch pushed diagonally from (4,3) moves onto it (§7.2 step 2).
    d = scene("PUSH", row=0, col=0,
              enemies=[enemy("virus", 4, 5), enemy("daemon", 5, 4), enemy("glitch", 4, 3)])
    state, _ = apply(d, "PUSH")
    assert positions(state) == [(5, 5), (5, 4), (5, 4)]


def test_push_slides_along_either_edge_and_keeps_hp_stun_and_disable():
    d = scene("PUSH", enemies=[
        enemy("virus", 3, 5, hp=1, stunned=True, disabledTurns=2),  # right edge: slides up
        enemy("daemon", 1, 0),                                      # left edge: slides down
        enemy("glitch", 5, 5),                                      # corner facing away: stays
        enemy("cryptog", 0, 4),                                     # bottom edge: slides right
    ])
    state, outcome = apply(d, "PUSH")
    assert positions(state) == [(4, 5), (0, 0), (5, 5), (0, 5)]
    first = scenario.inspect(state)["enemies"][0]
    assert (first["hp"], first["stunned"], first["disabledTurns"]) == (1, True, 2)
    assert int(outcome.kills) == 0


# --- PULL (§7.3) ----------------------------------------------------------------------------

def test_pull_moves_every_enemy_one_step_towards_the_player():
    d = scene("PULL", enemies=[
        enemy("virus", 2, 5),      # same row: one step closer
        enemy("daemon", 5, 5),     # diagonal: diagonally closer
        enemy("glitch", 3, 2),     # orthogonally adjacent: stays
        enemy("cryptog", 1, 1),    # diagonally adjacent: vertically into the player's row
        enemy("virus", 2, 2),      # on the player's cell: stays, claims nothing
    ])
    state, _ = apply(d, "PULL")
    assert positions(state) == [(2, 4), (4, 4), (3, 2), (2, 1), (2, 2)]


def test_pull_collisions_resolve_in_list_order():
    # (2,4) steps to (2,3); the diagonally adjacent (3,3) also targets (2,3).
    first, second = enemy("virus", 2, 4), enemy("daemon", 3, 3)
    state, _ = apply(scene("PULL", enemies=[first, second]), "PULL")
    assert positions(state) == [(2, 3), (3, 3)]
    state, _ = apply(scene("PULL", enemies=[second, first]), "PULL")
    assert positions(state) == [(2, 3), (2, 4)]


def test_pull_shares_the_cell_of_an_enemy_that_stays_and_blocked_pulls_stay():
    d = scene("PULL", enemies=[
        enemy("virus", 3, 2),    # orthogonally adjacent: no candidate, claims nothing
        enemy("daemon", 4, 2),   # steps onto the virus's cell
        enemy("glitch", 4, 3),   # nearest candidate (3,2) is claimed: stays (not (4,2) instead)
    ])
    state, _ = apply(d, "PULL")
    assert positions(state) == [(3, 2), (3, 2), (4, 3)]


def test_pull_ignores_blocks_and_transmissions():
    d = scene("PULL", enemies=[enemy("daemon", 2, 4)], transmissions=[transmission(2, 3)],
              blocks=[{"row": 2, "col": 3, "type": "program", "program": "WAIT"}])
    state, _ = apply(d, "PULL")
    assert positions(state) == [(2, 3)]


# --- CRASH (§7.4) ---------------------------------------------------------------------------

def test_crash_clears_the_ring_leaving_resources_and_flags():
    d = scene("CRASH",
              blocks=[{"row": 3, "col": 3, "type": "data", "points": 5, "siphoned": True},
                      {"row": 1, "col": 2, "type": "question", "program": "HACK"},
                      {"row": 2, "col": 4, "type": "data", "points": 2}],  # outside the ring
              resources=[{"row": 1, "col": 2, "credits": 2}, {"row": 1, "col": 1,
                                                              "dataSiphon": True}],
              siphonCenterCells=[{"row": 3, "col": 3}])
    state, _ = apply(d, "CRASH")
    cells = state.core.cells
    assert int(cells.content[3, 3]) == C.EMPTY and int(cells.content[1, 2]) == C.EMPTY
    assert int(cells.content[2, 4]) == C.DATA_BLOCK
    assert int(cells.content[1, 1]) == C.DATA_SIPHON  # not a block: untouched
    assert int(cells.credits[1, 2]) == 2
    assert bool(cells.siphoned[3, 3]) and bool(cells.siphon_center[3, 3])


def test_crash_removes_every_piece_in_the_ring_counting_a_kill_per_cell_and_kind():
    scheduled = {"isFromScheduledTask": True}
    d = scene("CRASH", enemies=[
        enemy("daemon", 3, 3),                       # kill
        enemy("virus", 3, 3, **scheduled),           # same cell: no extra kill
        enemy("virus", 1, 1, **scheduled),           # earliest on (1,1) is scheduled: 0
        enemy("glitch", 1, 1),
        enemy("cryptog", 2, 2),                      # player's own cell: untouched
        enemy("virus", 4, 2),                        # outside the ring
        enemy("virus", 2, 3, hp=0),                  # dead or not, removed: kill
    ], transmissions=[transmission(3, 3), transmission(1, 2), transmission(5, 5)])
    state, outcome = apply(d, "CRASH")
    assert positions(state) == [(2, 2), (4, 2)]
    assert [(r, c) for r, c, _ in transmissions_of(state)] == [(5, 5)]
    # Enemy cells (3,3), (1,1), (2,3); then transmission cells (3,3) again and (1,2).
    assert int(outcome.kills) == 1 + 0 + 1 + 2


def test_crash_rewards_kills_and_its_cost_and_is_free():
    d = scene("CRASH", enemies=[enemy("virus", 3, 3)],
              blocks=[{"row": 1, "col": 1, "type": "data", "points": 1}])
    state, obs, reward, done, info = STEP(KEY, scenario.from_dict(d), action("CRASH"))
    parts = info["reward_components"]
    assert float(parts["kills"]) == pytest.approx(0.3)
    assert float(parts["resourceGain"]) == pytest.approx(-0.25)
    assert float(reward) == pytest.approx(-0.01 + 0.3 - 0.25)
    assert not bool(done) and scenario.inspect(state)["turn"] == 0
    assert float(obs.grid[1, 1, 7]) == 0.0 and float(obs.grid[3, 3, 0]) == 0.0


def test_crash_that_opens_the_path_to_the_exit_earns_distance_reward():
    # Player (3,5), exit (5,5), blocks on (4,5) and (4,4): path 6 before, 2 after (§7.4, §14.2).
    d = scene("CRASH", row=3, col=5, blocks=[{"row": 4, "col": 5, "type": "data", "points": 1},
                                            {"row": 4, "col": 4, "type": "data", "points": 1}])
    _, _, reward, _, info = STEP(KEY, scenario.from_dict(d), action("CRASH"))
    assert float(info["reward_components"]["distance"]) == pytest.approx(0.05 * 4)
    assert float(reward) == pytest.approx(-0.01 + 0.2 - 0.25)


# --- WARP (§7.5) ----------------------------------------------------------------------------

def test_warp_onto_an_enemy_standing_on_a_block_removes_it_and_nothing_else():
    d = scene("WARP", enemies=[enemy("daemon", 4, 1)], transmissions=[transmission(4, 1)],
              blocks=[{"row": 4, "col": 1, "type": "data", "points": 2}])
    # Two targets: find a key picking the enemy (slot 0 of the enemies-then-transmissions list).
    for seed in range(50):
        state, outcome = apply(d, "WARP", jax.random.PRNGKey(seed))
        if not transmissions_of(state):
            continue
        assert (int(state.core.player_row), int(state.core.player_col)) == (4, 1)
        assert positions(state) == [] and transmissions_of(state) == [(4, 1, 2)]
        assert int(outcome.kills) == 1 and not bool(outcome.exit_reached)
        assert int(state.core.cells.content[4, 1]) == C.DATA_BLOCK
        return
    pytest.fail("no key picked the enemy")


def test_warp_onto_a_transmission_keeps_enemies_there_and_picks_nothing_up():
    d = scene("WARP", transmissions=[transmission(0, 5)],
              resources=[{"row": 0, "col": 5, "credits": 3},
                         {"row": 0, "col": 5, "dataSiphon": True}])
    state, outcome = apply(d, "WARP")
    assert (int(state.core.player_row), int(state.core.player_col)) == (0, 5)
    assert transmissions_of(state) == [] and int(outcome.kills) == 1
    assert int(state.core.data_siphons) == 0 and int(state.core.credits) == 0
    assert int(state.core.cells.content[0, 5]) == C.DATA_SIPHON
    assert int(state.core.cells.credits[0, 5]) == 3


def test_warp_kill_follows_the_earliest_piece_on_the_cell():
    d = scene("WARP", enemies=[enemy("virus", 1, 4, isFromScheduledTask=True),
                               enemy("glitch", 1, 4)])
    state, outcome = apply(d, "WARP")
    assert positions(state) == [] and int(outcome.kills) == 0


def test_warp_onto_a_cell_with_two_transmissions_removes_both_for_one_kill():
    d = scene("WARP", row=0, col=0,
              transmissions=[transmission(3, 3), transmission(3, 3, kind="daemon")])
    state, outcome = apply(d, "WARP")
    assert (int(state.core.player_row), int(state.core.player_col)) == (3, 3)
    assert transmissions_of(state) == [] and int(outcome.kills) == 1


def test_warp_target_is_uniform_over_the_list():
    """Two enemies on (0,4), one on (4,0), one transmission on (5,1): cells 2/4, 1/4, 1/4."""
    d = scene("WARP", enemies=[enemy("virus", 0, 4), enemy("glitch", 0, 4), enemy("daemon", 4, 0)],
              transmissions=[transmission(5, 1)])
    keys = jax.random.split(jax.random.PRNGKey(7), 4000)
    states, outcomes = APPLY_MANY_KEYS(keys, scenario.from_dict(d), index("WARP"))
    landed = np.asarray(states.core.player_row) * 6 + np.asarray(states.core.player_col)
    share = {cell: float(np.mean(landed == cell)) for cell in (4, 24, 31)}
    assert share[4] == pytest.approx(0.5, abs=0.04)
    assert share[24] == pytest.approx(0.25, abs=0.04) and share[31] == pytest.approx(0.25, abs=0.04)
    assert set(np.asarray(outcomes.kills).tolist()) == {1}


def test_warp_landing_on_the_exit_position_reaches_the_exit():
    d = scene("WARP", row=0, col=0, enemies=[enemy("virus", 5, 5)])
    state, outcome = apply(d, "WARP")
    assert bool(outcome.exit_reached) and not bool(outcome.enemy_turn_follows)
    assert int(outcome.kills) == 1


@pytest.mark.parametrize("target, reached", [((0, 5), True), ((5, 5), False)])
def test_warp_reaches_the_exit_only_at_exit_position(target, reached):
    d = scene("WARP", row=0, col=0, enemies=[enemy("virus", *target)],
              exitPosition={"row": 0, "col": 5})
    state, outcome = apply(d, "WARP")
    assert (int(state.core.player_row), int(state.core.player_col)) == target
    assert bool(outcome.exit_reached) == reached and int(outcome.kills) == 1


# --- POLY (§7.6) ----------------------------------------------------------------------------

def test_poly_keeps_damage_across_the_type_change():
    d = scene("POLY", enemies=[enemy("virus", 0, 0, hp=1, stunned=True),
                               enemy("daemon", 5, 5, hp=3)])
    keys = jax.random.split(jax.random.PRNGKey(3), 300)
    states, outcomes = APPLY_MANY_KEYS(keys, scenario.from_dict(d), index("POLY"))
    kinds = np.asarray(states.core.enemies.kind)[:, :2]
    hps = np.asarray(states.core.enemies.hp)[:, :2]
    max_hp = C.ENEMY_MAX_HP
    assert (kinds[:, 0] != C.VIRUS).all() and (kinds[:, 1] != C.DAEMON).all()
    assert set(kinds[:, 0].tolist()) == {C.DAEMON, C.GLITCH, C.CRYPTOG}
    assert set(kinds[:, 1].tolist()) == {C.VIRUS, C.GLITCH, C.CRYPTOG}
    np.testing.assert_array_equal(hps[:, 0], max_hp[kinds[:, 0]] - 1)
    np.testing.assert_array_equal(hps[:, 1], max_hp[kinds[:, 1]])
    assert np.asarray(states.core.enemies.stunned)[:, 0].all()
    assert (np.asarray(outcomes.kills) == 0).all()


def test_poly_new_type_is_uniform_over_the_three_others():
    """§7.6: each of the three other types about equally often (300 draws: 100 expected each;
    a count outside 60-140 is more than 4.9 standard deviations off)."""
    d = scene("POLY", enemies=[enemy("virus", 0, 0), enemy("daemon", 5, 5)])
    keys = jax.random.split(jax.random.PRNGKey(11), 300)  # the shape compiled above
    states, _ = APPLY_MANY_KEYS(keys, scenario.from_dict(d), index("POLY"))
    kinds = np.asarray(states.core.enemies.kind)[:, :2]
    for slot, old in enumerate((C.VIRUS, C.DAEMON)):
        counts = np.bincount(kinds[:, slot], minlength=C.NUM_ENEMY_TYPES)
        others = [kind for kind in range(C.NUM_ENEMY_TYPES) if kind != old]
        assert counts[old] == 0 and all(60 <= counts[kind] <= 140 for kind in others), counts


def test_poly_keeps_the_negative_damage_of_an_enemy_above_max_hp():
    """§7.6: a 5-hp glitch has damage -3, so it ends at maxHP(new type) + 3; disable is kept."""
    d = scene("POLY", enemies=[enemy("glitch", 4, 4, hp=5, disabledTurns=1)])
    keys = jax.random.split(jax.random.PRNGKey(9), 300)  # the shape compiled above
    states, outcomes = APPLY_MANY_KEYS(keys, scenario.from_dict(d), index("POLY"))
    kinds = np.asarray(states.core.enemies.kind)[:, 0]
    assert set(kinds.tolist()) == {C.VIRUS, C.DAEMON, C.CRYPTOG}
    np.testing.assert_array_equal(np.asarray(states.core.enemies.hp)[:, 0],
                                  C.ENEMY_MAX_HP[kinds] + 3)
    assert (np.asarray(states.core.enemies.disabled_turns)[:, 0] == 1).all()
    assert np.asarray(states.core.enemies.active)[:, 0].all()
    assert (np.asarray(outcomes.kills) == 0).all()


def test_poly_kills_a_damaged_daemon_that_becomes_a_two_hp_type():
    d = scene("POLY", enemies=[enemy("daemon", 4, 4, hp=1),
                               enemy("virus", 0, 5, hp=-5, isFromScheduledTask=True)])
    state, outcome = apply(d, "POLY")
    assert positions(state) == []  # 1 hp daemon -> 0 hp; the -5 hp virus stays dead
    assert int(outcome.kills) == 1  # the scheduled one pays nothing


# --- DEBUG, ROW, COL (§7.8, §7.9) -----------------------------------------------------------

def test_debug_hits_enemies_on_blocks_with_attack_damage():
    d = scene("DEBUG", player={"attackDamage": 2},
              enemies=[enemy("daemon", 4, 4), enemy("virus", 0, 1), enemy("glitch", 3, 0)],
              blocks=[{"row": 4, "col": 4, "type": "data", "points": 2},
                      {"row": 0, "col": 1, "type": "program", "program": "WAIT",
                       "siphoned": True}])
    state, outcome = apply(d, "DEBUG")
    assert enemies_of(state) == [("daemon", 4, 4, 1, True), ("glitch", 3, 0, 2, False)]
    assert int(outcome.kills) == 1


def test_row_hits_the_whole_row_through_blocks_and_stuns_survivors():
    d = scene("ROW", enemies=[enemy("daemon", 2, 5), enemy("virus", 2, 0, hp=1),
                              enemy("glitch", 3, 2)],
              blocks=[{"row": 2, "col": 4, "type": "data", "points": 1}])
    state, outcome = apply(d, "ROW")
    assert enemies_of(state) == [("daemon", 2, 5, 2, True), ("glitch", 3, 2, 2, False)]
    assert int(outcome.kills) == 1


@pytest.mark.parametrize("name, expected, kills", [
    ("ROW", [("daemon", 2, 2, 1, True), ("daemon", 2, 0, 1, True), ("virus", 1, 2, 2, False)], 0),
    ("COL", [("daemon", 2, 2, 1, True), ("daemon", 2, 0, 3, False)], 1),
])
def test_row_and_col_hit_an_enemy_on_the_player_cell_with_attack_damage(name, expected, kills):
    d = scene(name, player={"attackDamage": 2},
              enemies=[enemy("daemon", 2, 2), enemy("daemon", 2, 0), enemy("virus", 1, 2)])
    state, outcome = apply(d, name)
    assert enemies_of(state) == expected and int(outcome.kills) == kills


def test_col_reward_and_observation_show_the_stun():
    d = scene("COL", enemies=[enemy("daemon", 5, 2), enemy("virus", 0, 2, hp=1)])
    state, obs, reward, done, info = STEP(KEY, scenario.from_dict(d), action("COL"))
    assert enemies_of(state) == [("daemon", 5, 2, 2, True)]
    assert float(obs.grid[5, 2, CH_STUNNED]) == 1.0
    assert float(obs.grid[5, 2, CH_ENEMY_HP]) == pytest.approx(2 / 3)
    assert float(info["reward_components"]["kills"]) == pytest.approx(0.3)
    # 3 credits + 1 energy spent.
    assert float(reward) == pytest.approx(-0.01 + 0.3 - 0.2)


# --- STEP, SIPH+, EXCH, SHOW, RESET, CALM (§7.11-7.14) --------------------------------------

def test_step_sets_the_flag_and_nothing_else():
    state, outcome = apply(scene("STEP"), "STEP")
    assert bool(state.step_active) and not bool(outcome.enemy_turn_follows)
    again, _ = APPLY(KEY, state.replace(core=state.core.replace(energy=jnp.int32(3))),
                     index("STEP"))
    assert bool(again.step_active) and int(again.core.energy) == 0


def test_exch_turns_four_credits_into_four_energy():
    d = scene("EXCH", credits=9, energy=1)
    state, obs, reward, done, info = STEP(KEY, scenario.from_dict(d), action("EXCH"))
    assert (int(state.core.credits), int(state.core.energy)) == (5, 5)
    assert float(info["reward_components"]["resourceGain"]) == 0.0
    assert float(reward) == pytest.approx(-0.01)
    assert float(obs.player[3]) == pytest.approx(0.1) and float(obs.player[4]) == pytest.approx(0.1)


def test_show_reveals_cryptogs_in_the_observation():
    d = scene("SHOW", enemies=[enemy("cryptog", 4, 4)])
    state, obs, _, _, _ = STEP(KEY, scenario.from_dict(d), action("SHOW"))
    assert bool(state.core.show_activated)
    assert float(obs.player[PLAYER_SHOW]) == 1.0 and float(obs.grid[4, 4, CH_CRYPTOG]) == 1.0


@pytest.mark.parametrize("hp, expected", [(2, 0.49), (1, 1.79)])
def test_reset_heals_to_three_and_pays_program_waste_at_two(hp, expected):
    """§14.3 worked example: RESET with exactly 4 energy."""
    d = scene("RESET", player={"hp": hp})
    state, obs, reward, done, info = STEP(KEY, scenario.from_dict(d), action("RESET"))
    assert int(state.core.hp) == 3 and float(obs.player[2]) == 1.0
    assert float(info["reward_components"]["programWaste"]) == pytest.approx(
        -0.3 if hp == 2 else 0.0)
    assert float(reward) == pytest.approx(expected, abs=1e-5)


def test_calm_disables_scheduled_tasks_without_touching_the_schedule():
    d = scene("CALM", scheduledTaskInterval=7, nextScheduledTaskTurn=3)
    state, obs, _, _, _ = STEP(KEY, scenario.from_dict(d), action("CALM"))
    assert bool(state.core.scheduled_tasks_disabled) and float(obs.player[PLAYER_CALM]) == 1.0
    hidden = scenario.inspect(state)
    assert hidden["scheduledTaskInterval"] == 7 and hidden["nextScheduledTaskTurn"] == 3


# --- D_BOM (§7.16) --------------------------------------------------------------------------

def test_d_bom_removes_the_nearest_daemon_and_blasts_its_ring():
    d = scene("D_BOM", enemies=[
        enemy("daemon", 5, 5),                  # farther daemon
        enemy("virus", 3, 2, hp=1),             # next to the player, not to the bombed daemon
        enemy("daemon", 2, 4),                  # nearest (distance 2), tie with the next
        enemy("daemon", 4, 2),                  # distance 2 as well, later in the list
        enemy("virus", 3, 5, hp=1),             # ring of (2,4): dies
        enemy("glitch", 1, 3),                  # ring of (2,4): survives stunned
        enemy("cryptog", 2, 4),                 # same cell as the daemon: not in its ring
    ])
    state, outcome = apply(d, "D_BOM")
    assert enemies_of(state) == [("daemon", 5, 5, 3, False), ("virus", 3, 2, 1, False),
                                 ("daemon", 4, 2, 3, False), ("glitch", 1, 3, 1, True),
                                 ("cryptog", 2, 4, 2, False)]
    assert int(outcome.kills) == 2


def test_d_bom_blast_ignores_attack_damage_and_counts_scheduled_daemons_as_no_kill():
    d = scene("D_BOM", player={"attackDamage": 5},
              enemies=[enemy("daemon", 2, 3, isFromScheduledTask=True), enemy("daemon", 3, 4)])
    state, outcome = apply(d, "D_BOM")
    assert enemies_of(state) == [("daemon", 3, 4, 2, True)]
    assert int(outcome.kills) == 0


def test_d_bom_blast_hits_an_enemy_on_the_player_cell_but_never_the_player():
    d = scene("D_BOM", enemies=[enemy("daemon", 3, 2), enemy("virus", 2, 2)])
    state, outcome = apply(d, "D_BOM")
    assert enemies_of(state) == [("virus", 2, 2, 1, True)]
    assert int(state.core.hp) == 3 and int(outcome.kills) == 1


def test_d_bom_picks_the_nearest_daemon_even_with_no_hp():
    d = scene("D_BOM", enemies=[enemy("daemon", 5, 5), enemy("daemon", 3, 3, hp=0)])
    state, outcome = apply(d, "D_BOM")
    assert enemies_of(state) == [("daemon", 5, 5, 3, False)] and int(outcome.kills) == 1


# --- DELAY, ANTI-V, SCORE, REDUC, ATK+, HACK (§7.17-7.22) -----------------------------------

def test_delay_adds_three_turns_to_every_transmission():
    d = scene("DELAY", transmissions=[transmission(0, 5, turns=1), transmission(5, 0, turns=0)])
    state, obs, _, _, _ = STEP(KEY, scenario.from_dict(d), action("DELAY"))
    assert transmissions_of(state) == [(0, 5, 4), (5, 0, 3)]
    assert float(obs.grid[0, 5, CH_TRANSMISSION]) == 1.0
    assert float(obs.grid[5, 0, CH_TRANSMISSION]) == 0.75


def test_anti_v_hits_only_viruses_for_exactly_one():
    d = scene("ANTI-V", player={"attackDamage": 3},
              enemies=[enemy("virus", 0, 0), enemy("virus", 5, 5, hp=1), enemy("daemon", 0, 1)])
    state, outcome = apply(d, "ANTI-V")
    assert enemies_of(state) == [("virus", 0, 0, 1, True), ("daemon", 0, 1, 3, False)]
    assert int(outcome.kills) == 1


def test_score_adds_eight_minus_stage():
    d = scene("SCORE", stage=3, player={"score": 4})
    state, _, reward, _, info = STEP(KEY, scenario.from_dict(d), action("SCORE"))
    assert int(state.core.score) == 9
    assert float(info["reward_components"]["score"]) == pytest.approx(2.5)
    assert float(reward) == pytest.approx(-0.01 + 2.5 - 0.25)


@pytest.mark.parametrize("stage, gain", [(1, 7), (7, 1)])
def test_score_gain_by_stage(stage, gain):
    state, _ = apply(scene("SCORE", stage=stage, player={"score": 2}), "SCORE")
    assert int(state.core.score) == 2 + gain  # §7.19: 8 - stage


def test_reduc_lowers_unsiphoned_block_spawn_counts_floored_at_zero():
    d = scene("REDUC", blocks=[
        {"row": 0, "col": 0, "type": "data", "points": 4},
        {"row": 0, "col": 1, "type": "question", "program": "CRASH"},
        {"row": 0, "col": 2, "type": "program", "program": "ROW", "spawnCount": 0},
        {"row": 0, "col": 3, "type": "data", "points": 5, "siphoned": True},
    ])
    state, obs, _, _, _ = STEP(KEY, scenario.from_dict(d), action("REDUC"))
    np.testing.assert_array_equal(np.asarray(state.core.cells.spawn_count)[0, :4], [3, 5, 0, 5])
    assert float(obs.grid[0, 0, CH_SPAWN_COUNT]) == pytest.approx(3 / 9)


def test_atk_plus_has_no_cap_and_counts_uses_this_stage():
    d = scene("ATK+", credits=8, energy=8, player={"attackDamage": 3}, atkPlusUsesThisStage=1)
    state, obs, _, _, _ = STEP(KEY, scenario.from_dict(d), action("ATK+"))
    assert int(state.core.attack_damage) == 4 and int(state.core.atk_plus_uses) == 2
    assert float(obs.player[PLAYER_ATTACK]) == pytest.approx(1.5)
    assert not bool(VALID(state)[action("ATK+")])


def test_hack_hits_enemies_on_any_siphoned_cell_and_leaves_blocks():
    d = scene("HACK", player={"attackDamage": 2},
              enemies=[enemy("daemon", 4, 4), enemy("virus", 1, 1), enemy("glitch", 0, 0),
                       enemy("cryptog", 3, 3)],
              blocks=[{"row": 4, "col": 4, "type": "data", "points": 3, "siphoned": True}],
              siphonedCells=[{"row": 1, "col": 1}], siphonCenterCells=[{"row": 3, "col": 3}])
    state, outcome = apply(d, "HACK")
    # The siphon-centre flag alone does not mark a cell siphoned.
    assert enemies_of(state) == [("daemon", 4, 4, 1, True), ("glitch", 0, 0, 2, False),
                                 ("cryptog", 3, 3, 2, False)]
    assert int(outcome.kills) == 1
    assert int(state.core.cells.content[4, 4]) == C.DATA_BLOCK
    assert int(state.core.cells.spawn_count[4, 4]) == 3


# --- robustness -----------------------------------------------------------------------------

def test_every_program_is_safe_on_an_empty_board():
    state = scenario.from_dict({"player": {"row": 0, "col": 0}})
    for program in range(C.NUM_PROGRAMS):
        new, outcome = APPLY(KEY, state, program)
        assert int(outcome.kills) == 0 and not bool(outcome.exit_reached)
        assert (int(new.core.player_row), int(new.core.player_col)) == (0, 0)
        assert not np.asarray(new.core.enemies.active).any()
