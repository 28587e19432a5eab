"""Move / attack (rules §6.1) and the direction part of the valid-action mask (§4.1) against a
plain-Python reference, on random scenarios.

The reference below is written from the rules text alone and works on the plain dicts of
`plain.to_plain`. Each case is a random scenario dict (`scenario.from_dict`), biased so that the
player's four lines are crowded: enemies of every type and hp (dead ones from setup included),
stunned or not, on blocks and sharing cells; transmissions on enemies' cells and on blocks;
siphoned and unsiphoned blocks in the way; credits, energy and data-siphon pickups on the cells
next to the player (a pickup often with a resource under it); the exit next to the player;
the player on edges and corners; attackDamage 1-3.

For each case and each of the four directions:

- Mask: the game's flag (`VALID_ACTIONS`) must equal the reference's §4.1 test.
- Effect: `compiled.RESOLVE` (the player's action alone, before any enemy turn) must give the
  whole plain state the reference computes, and the outcome the rules define: failed (§4.4; a
  failed action leaves the state unchanged), kills (§6.1: a destroyed transmission or removed
  enemy counts unless it carries fromScheduledTask), exit reached (§6.1, §12.1: moving onto the
  exit cell), enemy turn follows (§5: unless the exit was reached), data siphon collected (§6.1,
  §14.1 component 5) and no siphon-quality component (§14.1 component 13 is siphon-only).
  Directions outside the mask are resolved too: they fail, except the setup-only case §4.1 names
  (a transmission on a block cell with no enemy), where the attack succeeds.
- Reward link: for the cases that kill, collect a pickup or reach the exit, `compiled.STEP`'s
  kills and dataSiphon components and its "stage complete" flag must follow that outcome (§14.1).

Everything is drawn from fixed seeds.
"""

import copy
import random
from collections import Counter

import jax
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import CORNERS, TYPE_NAMES

KEY = jax.random.PRNGKey(0)
SIZE = 6
DIRECTION_NAMES = ("up", "down", "left", "right")
KILL_REWARD = 0.3           # §14.1 component 4, per kill
DATA_SIPHON_REWARD = 1.0    # §14.1 component 5

NUM_SETUPS = 300
NO_KILL = "removed piece from a scheduled task: no kill"
REWARD_CHECKS_PER_KIND = 25  # STEP runs an enemy turn: check a sample of each kind of outcome


# ---------------------------------------------------------------------------------------------
# Reference (§4.1, §6.1)

def on_board(row, col):
    return 0 <= row < SIZE and 0 <= col < SIZE


def pieces_at(pieces, row, col):
    """Indices of the pieces (enemies or transmissions) on (row, col), in list order."""
    return [i for i, x in enumerate(pieces) if (x["row"], x["col"]) == (row, col)]


def reference_valid(s, direction):
    """§4.1: the next cell is on the board and has no block, or has a block with an enemy on it
    (any enemy in the list, whatever its hp)."""
    dr, dc = plain.DIRECTIONS[direction]
    row, col = s["player_row"] + dr, s["player_col"] + dc
    return on_board(row, col) and (not plain.block_at(s, row, col)
                                   or bool(pieces_at(s["enemies"], row, col)))


def line_of_fire(s, direction, tags):
    """§6.1 line of fire: ("transmissions" | "enemies", index) of the target, or None."""
    dr, dc = plain.DIRECTIONS[direction]
    row, col = s["player_row"] + dr, s["player_col"] + dc
    distance = 1
    while on_board(row, col):
        for kind in ("transmissions", "enemies"):
            here = pieces_at(s[kind], row, col)
            if here:
                if distance > 1:
                    tags.add("target at range > 1")
                if plain.block_at(s, row, col):
                    tags.add(f"target on a block: {kind}")
                if kind == "transmissions" and pieces_at(s["enemies"], row, col):
                    tags.add("transmission found before an enemy on its cell")
                if len(here) > 1:
                    tags.add(f"several {kind} on the target cell")
                return kind, here[0]
        cells = s["cells"]
        if plain.block_at(s, row, col):
            behind = [(row + k * dr, col + k * dc) for k in range(1, SIZE)]
            if any(pieces_at(s["enemies"], *cell) or pieces_at(s["transmissions"], *cell)
                   for cell in behind if on_board(*cell)):
                tags.add("block shields a piece behind it")
            if cells["siphoned"][row][col]:
                tags.add("siphoned block stops the line")
            return None
        if (cells["content"][row][col] in (C.DATA_SIPHON, C.EXIT) or cells["credits"][row][col]
                or cells["energy"][row][col]):
            tags.add("line passes a pickup, the exit or a resource")
        row, col = row + dr, col + dc
        distance += 1
    return None


def reference_direction(before, direction):
    """The result of direction `direction` on `before` (§6.1): (state, outcome, tags). The
    state is `before` itself when the action fails (§4.4)."""
    s = copy.deepcopy(before)
    tags = set()
    outcome = {"failed": False, "exit_reached": False, "enemy_turn_follows": True, "kills": 0,
               "data_siphon_collected": False, "siphon_quality": 0.0}
    target = line_of_fire(s, direction, tags)
    if target is not None:
        kind, index = target
        piece = s[kind][index]
        if kind == "transmissions":
            # No hit points: one hit always removes it.
            del s[kind][index]
            outcome["kills"] = 0 if piece["from_scheduled"] else 1
            tags.add("transmission destroyed")
            if piece["from_scheduled"]:
                tags.add(NO_KILL)
        else:
            damage = s["attack_damage"]
            type_name = TYPE_NAMES[piece["kind"]]
            tags.add(f"attack damage {damage}")
            if piece["hp"] <= 0:
                tags.add("target already at hp <= 0")
            piece["hp"] = max(0, piece["hp"] - damage)
            if piece["hp"] > 0:
                if piece["stunned"]:
                    tags.add("already stunned, stunned again")
                piece["stunned"] = True
                tags.add(f"stun {type_name}")
            else:
                del s[kind][index]
                outcome["kills"] = 0 if piece["from_scheduled"] else 1
                tags.add(f"kill {type_name}")
                if piece["from_scheduled"]:
                    tags.add(NO_KILL)
        return s, outcome, tags

    dr, dc = plain.DIRECTIONS[direction]
    row, col = s["player_row"] + dr, s["player_col"] + dc
    if not on_board(row, col):
        tags.add("fails: off the board")
        return before, {"failed": True}, tags
    if plain.block_at(s, row, col):
        tags.add("fails: block")
        return before, {"failed": True}, tags
    s["player_row"], s["player_col"] = row, col
    tags.add("move")
    cells = s["cells"]
    if cells["credits"][row][col] or cells["energy"][row][col]:
        tags.add("walks onto credits/energy (left there)")
    if cells["content"][row][col] == C.DATA_SIPHON:
        s["data_siphons"] += 1
        cells["content"][row][col] = C.EMPTY
        outcome["data_siphon_collected"] = True
        tags.add("data siphon picked up")
        if cells["credits"][row][col] or cells["energy"][row][col]:
            tags.add("data siphon picked up, resource left")
    if cells["content"][row][col] == C.EXIT:
        outcome["exit_reached"] = True
        outcome["enemy_turn_follows"] = False
        tags.add("exit reached")
        if (row, col) != (s["exit_row"], s["exit_col"]):
            tags.add("exit cell away from exitPosition")
    return s, outcome, tags


# ---------------------------------------------------------------------------------------------
# Random scenarios

def line_cells(row, col):
    """The cells of the player's row and column, without the player's cell."""
    return ([(row, c) for c in range(SIZE) if c != col]
            + [(r, col) for r in range(SIZE) if r != row])


def random_setup(rng):
    """A scenario dict crowded along the player's four lines (module docstring)."""
    exit_cell = rng.choice(CORNERS)
    roll = rng.random()
    if roll < 0.25:
        p_row, p_col = rng.choice([(exit_cell[0] + dr, exit_cell[1] + dc)
                                   for dr, dc in plain.DIRECTIONS
                                   if on_board(exit_cell[0] + dr, exit_cell[1] + dc)])
    elif roll < 0.4:
        p_row, p_col = rng.choice(CORNERS)
    elif roll < 0.55:
        edge = rng.randrange(SIZE)
        p_row, p_col = rng.choice([(0, edge), (SIZE - 1, edge), (edge, 0), (edge, SIZE - 1)])
    else:
        p_row, p_col = rng.randrange(SIZE), rng.randrange(SIZE)
    neighbours = [(p_row + dr, p_col + dc) for dr, dc in plain.DIRECTIONS
                  if on_board(p_row + dr, p_col + dc)]
    lines = line_cells(p_row, p_col)

    def line_cell():
        roll = rng.random()
        if roll < 0.45:
            return rng.choice(neighbours)
        if roll < 0.85:
            return rng.choice(lines)
        return rng.randrange(SIZE), rng.randrange(SIZE)

    blocks = {}
    for _ in range(rng.choice([0, 1, 2, 3, 3, 4, 5, 6])):
        r, c = line_cell()
        if (r, c) == (p_row, p_col) and rng.random() < 0.9:
            continue
        kind = rng.choice(["data", "data", "program", "question"])
        block = {"row": r, "col": c, "type": kind, "spawnCount": rng.randint(0, 9)}
        if kind == "program" or (kind == "question" and rng.random() < 0.5):
            block["program"] = rng.choice(C.PROGRAM_NAMES)
        else:
            block["points"] = rng.randint(1, 9)
        if kind != "question" and rng.random() < 0.3:
            block["siphoned"] = True
        blocks[(r, c)] = block
    block_cells = sorted(blocks)

    def piece_cell(pieces):
        roll = rng.random()
        if roll < 0.3 and block_cells:
            return rng.choice(block_cells)
        if roll < 0.45 and pieces:
            piece = rng.choice(pieces)
            return piece["row"], piece["col"]
        return line_cell()

    enemies = []
    for _ in range(rng.choice([0, 1, 2, 2, 3, 3, 4, 5])):
        kind = rng.randrange(4)
        r, c = piece_cell(enemies)
        roll = rng.random()
        hp = (plain.MAX_HP[kind] if roll < 0.5 else rng.randint(1, plain.MAX_HP[kind])
              if roll < 0.9 else rng.randint(-1, 0))
        enemies.append({"type": TYPE_NAMES[kind], "row": r, "col": c, "hp": hp,
                        "stunned": rng.random() < 0.3, "disabledTurns": rng.choice([0, 0, 1]),
                        "spawnedFromSiphon": rng.random() < 0.3,
                        "isFromScheduledTask": rng.random() < 0.3})
    transmissions = []
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        r, c = piece_cell(transmissions + enemies)
        transmissions.append({"row": r, "col": c, "turnsRemaining": rng.randint(0, 4),
                              "enemyType": rng.choice(TYPE_NAMES),
                              "spawnedFromSiphon": rng.random() < 0.3,
                              "isFromScheduledTask": rng.random() < 0.3})
    resources = []
    for _ in range(rng.choice([0, 1, 2, 3, 4])):
        r, c = line_cell() if rng.random() < 0.85 else exit_cell
        amount = rng.randint(1, 3)
        entry = rng.choice([{"credits": amount}, {"energy": amount}, {"dataSiphon": True},
                            {"dataSiphon": True}])
        resources.append({"row": r, "col": c, **entry})
        if "dataSiphon" in entry and rng.random() < 0.4:
            # A resource under the pickup (A.2 step 6: a later entry sets it).
            resources.append({"row": r, "col": c, **rng.choice(
                [{"credits": rng.randint(1, 3)}, {"energy": rng.randint(1, 3)}])})

    siphoned = {line_cell() for _ in range(rng.choice([0, 0, 1, 2]))}
    siphoned -= {cell for cell, b in blocks.items() if b["type"] == "question"}
    d = {
        "player": {"row": p_row, "col": p_col, "hp": rng.randint(1, 3),
                   "credits": rng.randint(0, 9), "energy": rng.randint(0, 9),
                   "dataSiphons": rng.randint(0, 2), "score": rng.randint(0, 20),
                   "attackDamage": rng.choice([1, 1, 1, 2, 2, 3])},
        "enemies": enemies, "transmissions": transmissions, "blocks": list(blocks.values()),
        "resources": resources,
        "ownedPrograms": [name for name in C.PROGRAM_NAMES if rng.random() < 0.2],
        "stage": rng.randint(1, 8), "turn": rng.randint(0, 15),
        "showActivated": rng.random() < 0.25, "scheduledTasksDisabled": rng.random() < 0.25,
        "exitPosition": {"row": exit_cell[0], "col": exit_cell[1]},
        "siphonedCells": [{"row": r, "col": c} for r, c in sorted(siphoned)],
        "stepActive": rng.random() < 0.2, "atkPlusUsesThisStage": rng.choice([0, 1, 2]),
        "pendingSiphonTransmissions": rng.randint(0, 3),
    }
    if rng.random() < 0.12:
        # The one state where the exit cell is away from exitPosition (UNDO across a stage
        # change, §7.15): walking onto the exit *cell* still reaches the exit.
        other = rng.choice([corner for corner in CORNERS if corner != exit_cell])
        d["exitPosition"] = {"row": other[0], "col": other[1]}
        d["exitCell"] = {"row": exit_cell[0], "col": exit_cell[1]}
    return d


@pytest.fixture(scope="module")
def cases():
    """[(case label, GameState)] from a fixed seed."""
    rng = random.Random(0)
    return [(f"setup seed 0 #{i}", scenario.from_dict(random_setup(rng)))
            for i in range(NUM_SETUPS)]


# ---------------------------------------------------------------------------------------------
# Comparison helpers


def game_outcome(outcome):
    return {"failed": bool(outcome.failed), "exit_reached": bool(outcome.exit_reached),
            "enemy_turn_follows": bool(outcome.enemy_turn_follows), "kills": int(outcome.kills),
            "data_siphon_collected": bool(outcome.data_siphon_collected),
            "siphon_quality": float(outcome.siphon_quality)}


class Where:
    """The case, direction and scenario dict of a comparison, formatted only when printed."""

    def __init__(self, case, state, direction):
        self.case, self.state, self.direction = case, state, direction

    def __str__(self):
        return (f"{self.case}, direction {DIRECTION_NAMES[self.direction]}; "
                f"scenario.from_dict({scenario.to_dict(self.state)!r})")


# ---------------------------------------------------------------------------------------------
# Tests

def test_directions_match_the_reference(cases):
    tags_seen, counts = Counter(), Counter()
    reward_checks = Counter()
    for case, state in cases:
        before = plain.to_plain(state)
        mask = [bool(x) for x in jax.device_get(compiled.VALID_ACTIONS(state))[:4]]
        for direction in range(4):
            # Evaluated only in a failing assert's message.
            where = Where(case, state, direction)
            expected_valid = reference_valid(before, direction)
            assert mask[direction] == expected_valid, (
                f"mask: ref {expected_valid} game {mask[direction]}; {where}")
            expected, expected_outcome, tags = reference_direction(before, direction)
            new_state, outcome = compiled.RESOLVE(KEY, state, direction)
            actual_outcome = game_outcome(outcome)
            after = plain.to_plain(new_state)
            if expected_outcome["failed"]:
                # §4.4: only the failure and the untouched state are defined.
                assert expected_valid is False, f"a valid direction failed in the ref; {where}"
                assert actual_outcome["failed"], f"ref fails, game succeeds; {where}"
                diff = plain.state_diff(before, after)
                assert not diff, f"failed action changed the state: {diff}; {where}"
                counts["invalid"] += 1
            else:
                if not expected_valid:
                    # §4.1's setup-only exception: left out of the mask, yet it succeeds.
                    tags.add("outside the mask, succeeds")
                diff = plain.state_diff(expected, after)
                assert not diff, f"{diff}; {where}"
                assert actual_outcome == expected_outcome, (
                    f"outcome: ref {expected_outcome} game {actual_outcome}; {where}")
                counts["attack" if "move" not in tags else "move"] += 1
                counts["kill"] += expected_outcome["kills"]
                kind = ("exit" if expected_outcome["exit_reached"]
                        else "pickup" if expected_outcome["data_siphon_collected"]
                        else "kill" if expected_outcome["kills"]
                        else "no kill" if NO_KILL in tags else None)
                if kind and reward_checks[kind] < REWARD_CHECKS_PER_KIND:
                    check_reward_link(state, direction, expected_outcome, where)
                    reward_checks[kind] += 1
            tags_seen.update(tags)
            if not expected_valid:
                counts["outside the mask"] += 1

    required = {
        "target at range > 1": 20, "target on a block: enemies": 15,
        "target on a block: transmissions": 5, "transmission found before an enemy on its cell": 5,
        "several enemies on the target cell": 10, "several transmissions on the target cell": 3,
        "block shields a piece behind it": 15, "siphoned block stops the line": 10,
        "line passes a pickup, the exit or a resource": 15, "transmission destroyed": 20,
        "attack damage 1": 20, "attack damage 2": 20, "attack damage 3": 20,
        "target already at hp <= 0": 5, "already stunned, stunned again": 5,
        NO_KILL: 10,
        "fails: off the board": 30, "fails: block": 30, "move": 100,
        "walks onto credits/energy (left there)": 15, "data siphon picked up": 15,
        "data siphon picked up, resource left": 5, "exit reached": 15,
        "exit cell away from exitPosition": 3, "outside the mask, succeeds": 3,
        **{f"stun {name}": 12 for name in TYPE_NAMES},
        **{f"kill {name}": 8 for name in TYPE_NAMES},
    }
    plain.assert_covered(tags_seen, required, "cases")
    # Of the 1200 directions: attacks, moves and failures all occur by the hundred.
    assert counts["attack"] >= 300 and counts["move"] >= 200 and counts["invalid"] >= 200 \
        and counts["kill"] >= 150, counts
    assert min(reward_checks[kind] for kind in ("exit", "pickup", "kill", "no kill")) \
        == REWARD_CHECKS_PER_KIND, reward_checks


def check_reward_link(state, direction, expected_outcome, where):
    """§14.1 components 4 and 5 and the "stage complete" info follow the move's outcome."""
    _, _, _, _, info = compiled.STEP(KEY, state, direction)
    components = info["reward_components"]
    assert not bool(info["invalid_action"]), str(where)
    kills = float(components["kills"])
    assert abs(kills - KILL_REWARD * expected_outcome["kills"]) < 1e-5, (
        f"kills component {kills} for {expected_outcome['kills']} kills; {where}")
    pickup = float(components["dataSiphon"])
    assert pickup == (DATA_SIPHON_REWARD if expected_outcome["data_siphon_collected"] else 0.0), (
        f"dataSiphon component {pickup}; {where}")
    assert bool(info["stage_complete"]) == expected_outcome["exit_reached"], str(where)
