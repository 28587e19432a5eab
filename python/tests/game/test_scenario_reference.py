"""Scenario setup (rules Appendix A.1-A.4) against a plain-Python reference, on random scenarios,
and the A.5 quick checks.

Oracle. `reference_state(d)` applies a valid scenario dict the way Appendix A says, on the plain
dicts of `plain.to_plain`. It is written from the rules text alone (not from `scenario.py`):

- A.1: every omitted field takes its default (player hp 3, attackDamage 1, stage 1, ...); a
  player hp outside 0-3 is 3; enemy hp and turnsRemaining are stored verbatim; enemy types in
  any case; spawnCount, when omitted, is the points of a data block (or of a question block
  holding data) and the §7.1 spawn cost of the program otherwise;
- A.2, steps 1-7 in order: an empty board and UNDO history; the player and globals; enemies
  and transmissions appended in order (disabledTurns 0, transmission flags false); blocks in
  order, a later entry replacing an earlier one on its cell, and a siphoned flag once set never
  cleared; resources in order (a data-siphon pickup replaces the cell's block and ignores the
  entry's credits/energy, credits > 0 win over energy > 0, one resource kind per cell, an entry
  setting neither leaves the resource alone); last, the exit at (5,5) replaces the block or
  pickup there and keeps its resource and flags;
- A.3: interval 12, next due turn 12 (whatever the stage and turn), nothing owed, STEP off, no
  ATK+ use, empty history, exitPosition (5,5), no siphon-centre flag, enemy disabledTurns 0.

Where the rules are silent it follows specs/game-rules.md §10/§12: program names match ignoring
case, '-', '_' and spaces; a repeated owned program counts once; the `points` of a program block
(or of a question block holding a program) and the `program` of a data block are ignored; the
optional extension fields (exitPosition, exitCell, siphonedCells, siphonCenterCells, the hidden
counters, stepActive, enemies[].disabledTurns, the transmission flags) set the value they name
and take the A.3 values when omitted.

Every case checks that

- `plain.to_plain(scenario.from_dict(d))` equals `reference_state(d)`, every field and cell;
- `scenario.inspect` reports the A.4 names with the reference's values (enemies in list order);
- the same state comes from the JSON text of `d` and from the JSON text of `scenario.to_dict`;
- `inspect`'s own output (its enemies and counters) is a scenario that `from_dict` takes back
  to the same `inspect`.

Randomness. NUM_CASES dicts come from `random.Random(SEED)`. The first five are minimal (only
the player's cell), the next twenty give every field; the others draw the probability that an
optional field or list is given (0.3-1), so every field occurs omitted and given. A quarter of
the cases add the extension fields.
Coordinates are drawn half the time from a few "hot" cells (the player's cell, (5,5) and two
others), so that blocks, pickups, resources, enemies, transmissions, the player and the exit
share cells. Values include the edges of their valid ranges (32-bit extremes, hp 0 and
negative, turnsRemaining <= 0, stage 1 and 8, 36 enemies or transmissions). The test also
asserts that every rule of interest was exercised (`REQUIRED_TAGS`).

The A.5 quick checks run through `compiled.STEP` (one compile shared with the other modules);
the rest compiles nothing.
"""

import json
import random
import re
from collections import Counter

import jax
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import CORNERS

SEED = 20240611
NUM_CASES = 500
SIZE = 6
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
KEY = jax.random.PRNGKey(0)
UP, SIPHON = 0, 4  # §3 action indices

# Facts of the rules, written from the rules text.
ENEMY_TYPES = ("virus", "daemon", "glitch", "cryptog")  # kind 0-3 in the plain state
PROGRAMS = ("PUSH", "PULL", "CRASH", "WARP", "POLY", "WAIT", "DEBUG", "ROW", "COL", "UNDO",
            "STEP", "SIPH+", "EXCH", "SHOW", "RESET", "CALM", "D_BOM", "DELAY", "ANTI-V",
            "SCORE", "REDUC", "ATK+", "HACK")  # §7.1: action 5 + index
SPAWN_COST = (4, 4, 6, 5, 3, 1, 4, 2, 2, 3, 4, 7, 3, 2, 2, 6, 4, 4, 4, 5, 3, 8, 4)  # §7.1
FIRST_PROGRAM_ACTION = 5
A1_TOP_LEVEL = ("player", "enemies", "transmissions", "blocks", "resources", "ownedPrograms",
                "stage", "turn", "showActivated", "scheduledTasksDisabled")
A1_PLAYER = ("row", "col", "hp", "credits", "energy", "dataSiphons", "score", "attackDamage")
A4_COUNTERS = ("scheduledTaskInterval", "nextScheduledTaskTurn", "pendingSiphonTransmissions",
               "turn")
A4_ENEMY_FIELDS = ("row", "col", "type", "hp", "disabledTurns", "stunned", "spawnedFromSiphon",
                   "isFromScheduledTask")

# Cell contents as the state encodes them (the layout `plain.to_plain` reads).
BLOCK_CONTENT = {"data": C.DATA_BLOCK, "program": C.PROGRAM_BLOCK, "question": C.QUESTION_BLOCK}

# The rule each field of the plain state follows, for failure messages.
RULE = {
    "player_row": "A.1 player.row", "player_col": "A.1 player.col",
    "hp": "A.1 player.hp (default 3; outside 0-3 is 3)",
    "credits": "A.1 player.credits (default 0)", "energy": "A.1 player.energy (default 0)",
    "data_siphons": "A.1 player.dataSiphons (default 0)",
    "score": "A.1 player.score (default 0)",
    "attack_damage": "A.1 player.attackDamage (default 1)",
    "turn": "A.1 turn (default 0)", "stage": "A.1 stage (default 1)",
    "owned": "A.1/A.2 step 2 ownedPrograms (index or name, repeats count once)",
    "show_activated": "A.1 showActivated (default false)",
    "scheduled_tasks_disabled": "A.1 scheduledTasksDisabled (default false)",
    "enemies": "A.2 step 3 enemies (given order, fields verbatim, disabledTurns 0)",
    "transmissions": "A.2 step 4 transmissions (given order, flags false)",
    "exit_row": "A.2 step 7/A.3 exitPosition (5,5)",
    "exit_col": "A.2 step 7/A.3 exitPosition (5,5)",
    "step_active": "A.3 stepActive false", "atk_plus_uses": "A.3 atkPlusUsesThisStage 0",
    "pending_siphon_transmissions": "A.3 pendingSiphonTransmissions 0",
    "scheduled_interval": "A.3 scheduledTaskInterval 12",
    "next_scheduled_turn": "A.3 nextScheduledTaskTurn 12",
    "history_size": "A.2 step 1/A.3 empty UNDO history",
    "cells.content": "A.2 steps 5-7 (blocks, pickups replace blocks, exit at (5,5))",
    "cells.points": "A.2 step 5 blocks[].points (default 0; cleared by a pickup or the exit)",
    "cells.program": "A.2 step 5 blocks[].program",
    "cells.spawn_count": "A.1 blocks[].spawnCount (default points or §7.1 spawn cost)",
    "cells.credits": "A.2 step 6 resources (credits > 0 first, one kind per cell; "
                     "kept under a pickup and the exit)",
    "cells.energy": "A.2 step 6 resources (energy > 0 if no credits, one kind per cell; "
                    "kept under a pickup and the exit)",
    "cells.siphoned": "A.2 step 5/A.3 siphoned flags (set by siphoned entries, never cleared)",
    "cells.siphon_center": "A.3 no siphonCenter flags",
}
# The fields an extension field (specs/game-rules.md §10) can set.
EXTENDED = {"enemies", "transmissions", "exit_row", "exit_col", "step_active", "atk_plus_uses",
            "pending_siphon_transmissions", "scheduled_interval", "next_scheduled_turn",
            "cells.content", "cells.siphoned", "cells.siphon_center"}


# ---------------------------------------------------------------------------------------------
# Reference (Appendix A.1-A.3)


def program_index(value) -> int:
    """A.1: an action index 5-27 or the program's name (specs §12: ignoring case, '-', '_' and
    spaces)."""
    if isinstance(value, str):
        key = re.sub("[-_ ]", "", value.upper())
        return [re.sub("[-_ ]", "", name) for name in PROGRAMS].index(key)
    return int(value) - FIRST_PROGRAM_ACTION


def reference_state(d: dict, tags: set | None = None) -> dict:
    """The plain state (`plain.to_plain` layout) that Appendix A makes of the valid scenario
    `d`. Adds to `tags` the name of each rule of interest it applies."""
    note = tags.add if tags is not None else (lambda tag: None)

    # A.2 step 1: an empty board, no enemies or transmissions, an empty UNDO history.
    def grid(value):
        return [[value] * SIZE for _ in range(SIZE)]

    cells = {"content": grid(C.EMPTY), "points": grid(0), "program": grid(C.NO_PROGRAM),
             "spawn_count": grid(0), "credits": grid(0), "energy": grid(0),
             "siphoned": grid(False), "siphon_center": grid(False)}

    def set_content(row, col, content, points=0, program=C.NO_PROGRAM, spawn_count=0):
        cells["content"][row][col] = content
        cells["points"][row][col] = points
        cells["program"][row][col] = program
        cells["spawn_count"][row][col] = spawn_count

    # Step 2: the player, then the globals, then the owned programs.
    player = d["player"]
    hp = player.get("hp", 3)
    if not 0 <= hp <= 3:
        note("player hp outside 0-3 is 3")
        hp = 3
    state = {
        "player_row": player["row"], "player_col": player["col"], "hp": hp,
        "credits": player.get("credits", 0), "energy": player.get("energy", 0),
        "data_siphons": player.get("dataSiphons", 0), "score": player.get("score", 0),
        "attack_damage": player.get("attackDamage", 1),
        "stage": d.get("stage", 1), "turn": d.get("turn", 0),
        "show_activated": d.get("showActivated", False),
        "scheduled_tasks_disabled": d.get("scheduledTasksDisabled", False),
        "owned": sorted({program_index(p) for p in d.get("ownedPrograms", [])}),
    }

    # Step 3: enemies in the given order, every field as given, disabledTurns 0.
    state["enemies"] = [
        {"kind": ENEMY_TYPES.index(e["type"].lower()), "row": e["row"], "col": e["col"],
         "hp": e["hp"], "disabled_turns": e.get("disabledTurns", 0),
         "stunned": e.get("stunned", False), "from_siphon": e.get("spawnedFromSiphon", False),
         "from_scheduled": e.get("isFromScheduledTask", False)}
        for e in d.get("enemies", [])]
    # Step 4: transmissions in the given order, both flags false.
    state["transmissions"] = [
        {"row": t["row"], "col": t["col"], "turns_remaining": t["turnsRemaining"],
         "enemy_type": ENEMY_TYPES.index(t["enemyType"].lower()),
         "from_siphon": t.get("spawnedFromSiphon", False),
         "from_scheduled": t.get("isFromScheduledTask", False)}
        for t in d.get("transmissions", [])]

    # Step 5: blocks in the given order; a later entry replaces an earlier one on its cell.
    for entry in d.get("blocks", []):
        row, col, kind = entry["row"], entry["col"], entry["type"]
        if cells["content"][row][col] != C.EMPTY:
            note("a later block entry replaces an earlier one")
        holds_program = kind != "data" and "program" in entry
        if holds_program:  # a program block, or a question block hiding a program
            program = program_index(entry["program"])
            spawn_count = entry.get("spawnCount", SPAWN_COST[program])
            set_content(row, col, BLOCK_CONTENT[kind], 0, program, spawn_count)
        else:  # a data block, or a question block hiding data
            points = entry.get("points", 0)
            set_content(row, col, BLOCK_CONTENT[kind], points, C.NO_PROGRAM,
                        entry.get("spawnCount", points))
        note(f"{kind} block{' holding a program' if kind == 'question' and holds_program else ''}"
             f", spawnCount {'given' if 'spawnCount' in entry else 'omitted'}")
        if entry.get("siphoned", False):
            cells["siphoned"][row][col] = True
        elif cells["siphoned"][row][col]:
            note("a siphoned flag survives a later unsiphoned entry")

    # Step 6: resources in the given order; at most one resource kind per cell.
    for entry in d.get("resources", []):
        row, col = entry["row"], entry["col"]
        had_resource = cells["credits"][row][col] or cells["energy"][row][col]
        if entry.get("dataSiphon", False):
            if C.DATA_BLOCK <= cells["content"][row][col] <= C.QUESTION_BLOCK:
                note("a data-siphon pickup replaces a block")
            set_content(row, col, C.DATA_SIPHON)
        elif entry.get("credits", 0) > 0:
            cells["credits"][row][col], cells["energy"][row][col] = entry["credits"], 0
            if entry.get("energy", 0) > 0:
                note("credits win over energy in one entry")
        elif entry.get("energy", 0) > 0:
            cells["credits"][row][col], cells["energy"][row][col] = 0, entry["energy"]
        elif had_resource:
            note("an entry setting neither credits nor energy leaves the resource")

    # Extension fields (specs/game-rules.md §10): the flags they name.
    for cell in d.get("siphonedCells", []):
        cells["siphoned"][cell["row"]][cell["col"]] = True
    for cell in d.get("siphonCenterCells", []):
        cells["siphon_center"][cell["row"]][cell["col"]] = True

    # Step 7: the exit replaces the block or pickup on its cell; resource and flags stay.
    exit_position = d.get("exitPosition", {"row": 5, "col": 5})
    exit_cell = d.get("exitCell", exit_position)
    if cells["content"][exit_cell["row"]][exit_cell["col"]] != C.EMPTY:
        note("the exit replaces a block or pickup")
    set_content(exit_cell["row"], exit_cell["col"], C.EXIT)

    # A.3: the hidden values right after setup.
    state.update({
        "cells": cells, "exit_row": exit_position["row"], "exit_col": exit_position["col"],
        "scheduled_interval": d.get("scheduledTaskInterval", 12),
        "next_scheduled_turn": d.get("nextScheduledTaskTurn", 12),
        "pending_siphon_transmissions": d.get("pendingSiphonTransmissions", 0),
        "step_active": d.get("stepActive", False),
        "atk_plus_uses": d.get("atkPlusUsesThisStage", 0),
        "history_size": 0,
    })
    return state


def reference_inspect(expected: dict) -> dict:
    """A.4: the hidden values a test may read, under the rules' names."""
    return {
        "scheduledTaskInterval": expected["scheduled_interval"],
        "nextScheduledTaskTurn": expected["next_scheduled_turn"],
        "pendingSiphonTransmissions": expected["pending_siphon_transmissions"],
        "turn": expected["turn"],
        "enemies": [{"row": e["row"], "col": e["col"], "type": ENEMY_TYPES[e["kind"]],
                     "hp": e["hp"], "disabledTurns": e["disabled_turns"],
                     "stunned": e["stunned"], "spawnedFromSiphon": e["from_siphon"],
                     "isFromScheduledTask": e["from_scheduled"]}
                    for e in expected["enemies"]],
    }


# ---------------------------------------------------------------------------------------------
# Comparison


def rule_of(name: str, extended: bool) -> str:
    if extended and name in EXTENDED:
        return RULE[name] + " or the extension field (specs/game-rules.md §10)"
    return RULE[name]


def differences(expected: dict, actual: dict, extended: bool) -> list[str]:
    """Every field where the game's plain state differs from the reference, with its rule."""
    found = []
    for name in sorted(set(expected) | set(actual)):
        want, got = expected.get(name), actual.get(name)
        if name == "cells":
            for field, rows in want.items():
                found += [f"cells.{field}[{r}][{c}]: reference {rows[r][c]}, game "
                          f"{got[field][r][c]} ({rule_of('cells.' + field, extended)})"
                          for r in range(SIZE) for c in range(SIZE)
                          if rows[r][c] != got[field][r][c]]
        elif name in ("enemies", "transmissions") and len(want) == len(got):
            found += [f"{name}[{i}].{field}: reference {w[field]}, game {g.get(field)} "
                      f"({rule_of(name, extended)})"
                      for i, (w, g) in enumerate(zip(want, got)) for field in w
                      if w[field] != g.get(field)]
        elif want != got:
            found.append(f"{name}: reference {want}, game {got} ({rule_of(name, extended)})")
    return found


def inspect_differences(expected: dict, hidden: dict) -> list[str]:
    """A.4 names missing from `inspect` or reported with another value."""
    found = [f"inspect()[{name!r}]: reference {expected[name]}, game "
             f"{hidden.get(name, 'missing')} (A.4)"
             for name in A4_COUNTERS if hidden.get(name, "missing") != expected[name]]
    enemies = hidden.get("enemies", "missing")
    if not isinstance(enemies, list) or len(enemies) != len(expected["enemies"]):
        return found + [f"inspect()['enemies']: reference {expected['enemies']}, game {enemies} "
                        "(A.4: every enemy in list order)"]
    return found + [f"inspect()['enemies'][{i}][{field!r}]: reference {want[field]}, game "
                    f"{got.get(field, 'missing')} (A.4)"
                    for i, (want, got) in enumerate(zip(expected["enemies"], enemies))
                    for field in A4_ENEMY_FIELDS if got.get(field, "missing") != want[field]]


# ---------------------------------------------------------------------------------------------
# Random valid scenarios


def program_value(rng, index: int):
    """Program `index` written as its action number or as its name in some spelling."""
    name = PROGRAMS[index]
    return rng.choice((index + FIRST_PROGRAM_ACTION, name, name.lower(), name.capitalize(),
                       name.translate(str.maketrans("-_", "_-"))))


def type_name(rng, kind: str) -> str:
    return rng.choice((kind, kind.upper(), kind.capitalize()))


def random_scenario(rng: random.Random, presence: float, extended: bool) -> dict:
    """A valid scenario dict; each optional field and list is given with probability
    `presence`; `extended` adds the extension fields."""

    def given():
        return rng.random() < presence

    def any_cell():
        return rng.randrange(SIZE), rng.randrange(SIZE)

    player_cell = (5, 5) if rng.random() < 0.15 else any_cell()
    hot = [player_cell, (5, 5), any_cell(), any_cell()]

    def cell(extra=()):
        row, col = rng.choice(hot + list(extra)) if rng.random() < 0.5 else any_cell()
        return {"row": row, "col": col}

    player = {"row": player_cell[0], "col": player_cell[1]}
    if given():
        player["hp"] = rng.choice((0, 1, 2, 3, 3, 4, -1, 99, INT32_MIN, INT32_MAX))
    for name in ("credits", "energy", "dataSiphons", "score"):
        if given():
            player[name] = rng.choice((0, 1, 2, 7, 50, INT32_MAX))
    if given():
        player["attackDamage"] = rng.choice((1, 2, 3, 5, INT32_MAX))
    d = {"player": player}
    if given():
        d["stage"] = rng.randint(1, 8)
    if given():
        d["turn"] = rng.choice((0, 1, 5, 10, 11, 12, 30, INT32_MAX))
    for name in ("showActivated", "scheduledTasksDisabled"):
        if given():
            d[name] = rng.random() < 0.5
    if given():
        owned = [rng.randrange(len(PROGRAMS)) for _ in range(rng.choice((0, 1, 3, 6, 23)))]
        d["ownedPrograms"] = [program_value(rng, k) for k in owned + owned[:rng.randrange(3)]]

    def flags(entry, names):
        for name in names:
            if given():
                entry[name] = rng.random() < 0.5

    if given():
        count = 36 if rng.random() < 0.04 else rng.choice((0, 1, 2, 3, 5, 8))
        d["enemies"] = []
        for _ in range(count):
            enemy = {"type": type_name(rng, rng.choice(ENEMY_TYPES)), **cell(),
                     "hp": rng.choice((INT32_MIN, -3, 0, 1, 2, 2, 3, 3, 4, 9, INT32_MAX))}
            flags(enemy, ("stunned", "spawnedFromSiphon", "isFromScheduledTask"))
            if extended and given():
                enemy["disabledTurns"] = rng.choice((0, 1, 2, 5, INT32_MAX))
            d["enemies"].append(enemy)
    if given():
        count = 36 if rng.random() < 0.04 else rng.choice((0, 1, 2, 4, 7))
        d["transmissions"] = []
        for _ in range(count):
            transmission = {**cell(), "enemyType": type_name(rng, rng.choice(ENEMY_TYPES)),
                            "turnsRemaining": rng.choice((INT32_MIN, -2, 0, 1, 2, 3, 4, 5, 9,
                                                          INT32_MAX))}
            if extended:
                flags(transmission, ("spawnedFromSiphon", "isFromScheduledTask"))
            d["transmissions"].append(transmission)

    # A question block never goes where an earlier entry marked the cell siphoned (A.2 step 5).
    siphoned, question_cells = set(), set()
    if given():
        d["blocks"] = []
        for _ in range(rng.choice((0, 1, 2, 4, 6, 10))):
            block = {**cell(), "type": rng.choice(("data", "program", "question"))}
            where = (block["row"], block["col"])
            if block["type"] == "question" and where in siphoned:
                block["type"] = "data"
            if block["type"] == "program" or given() and rng.random() < 0.5:
                block["program"] = program_value(rng, rng.randrange(len(PROGRAMS)))
            if given():
                block["points"] = rng.choice((0, 1, 5, 9, 10, INT32_MAX))
            if given():
                block["spawnCount"] = rng.choice((0, 1, 4, 9, 12, INT32_MAX))
            if given():
                block["siphoned"] = block["type"] != "question" and rng.random() < 0.5
            if block.get("siphoned"):
                siphoned.add(where)
            if block["type"] == "question":
                question_cells.add(where)
            d["blocks"].append(block)
    if given():
        d["resources"] = []
        block_cells = [(b["row"], b["col"]) for b in d.get("blocks", [])]
        for _ in range(rng.choice((0, 1, 2, 4, 6, 10))):
            resource = cell(block_cells)
            for name in ("credits", "energy"):
                if given():
                    resource[name] = rng.choice((INT32_MIN, -5, 0, 1, 3, 3, 40, INT32_MAX))
            flags(resource, ("dataSiphon",))
            d["resources"].append(resource)

    if extended:
        for name in ("exitPosition", "exitCell"):
            if given():
                row, col = rng.choice(CORNERS)
                d[name] = {"row": row, "col": col}
        if given():  # never on a question block (specs §12)
            free = [(r, c) for r in range(SIZE) for c in range(SIZE)
                    if (r, c) not in question_cells]
            d["siphonedCells"] = [{"row": r, "col": c}
                                  for r, c in rng.sample(free, rng.randrange(4))]
        if given():
            d["siphonCenterCells"] = [cell() for _ in range(rng.randrange(3))]
        for name, values in (("scheduledTaskInterval", (0, 4, 7, 12, INT32_MAX)),
                             ("nextScheduledTaskTurn", (0, 3, 12, 40, INT32_MAX)),
                             ("pendingSiphonTransmissions", (0, 1, 9, INT32_MAX)),
                             ("atkPlusUsesThisStage", (0, 1, 2))):
            if given():
                d[name] = rng.choice(values)
        if given():
            d["stepActive"] = rng.random() < 0.5
    return d


def shape_tags(d: dict) -> set:
    """Tags for the shape of a scenario: what was given, and pieces sharing cells."""
    tags = set()
    player = d["player"]
    if d == {"player": {"row": player["row"], "col": player["col"]}}:
        tags.add("minimal scenario")
    if all(name in d for name in A1_TOP_LEVEL) and all(name in player for name in A1_PLAYER):
        tags.add("every A.1 field given")
    if "hp" in player and player["hp"] == 0:
        tags.add("player hp 0")
    if "stage" in d:
        tags.add(f"stage {d['stage']} given")
    if d.get("turn", 0) >= 11:
        tags.add("turn >= 11")
    owned = d.get("ownedPrograms", [])
    if any(isinstance(p, str) for p in owned) and any(isinstance(p, int) for p in owned):
        tags.add("owned programs by name and by index")
    if len({program_index(p) for p in owned}) < len(owned):
        tags.add("an owned program repeated")
    enemies, transmissions = d.get("enemies", []), d.get("transmissions", [])
    tags.update(f"enemy {e['type'].lower()}" for e in enemies)
    if any(e["type"] not in ENEMY_TYPES for e in enemies + [
            {"type": t["enemyType"]} for t in transmissions]):
        tags.add("enemy type not in lower case")
    if any(not 0 <= e["hp"] <= 3 for e in enemies):
        tags.add("enemy hp outside 0-3 (verbatim)")
    if any(all(name in e for name in ("stunned", "spawnedFromSiphon", "isFromScheduledTask"))
           for e in enemies):
        tags.add("enemy with every flag given")
    if len(enemies) == 36:
        tags.add("36 enemies")
    if len(transmissions) == 36:
        tags.add("36 transmissions")
    if any(t["turnsRemaining"] <= 0 for t in transmissions):
        tags.add("transmission turnsRemaining <= 0")
    pieces = Counter((p["row"], p["col"]) for p in enemies + transmissions)
    if any(n > 1 for n in pieces.values()):
        tags.add("pieces sharing a cell")
    blocks = d.get("blocks", [])
    if any((b["row"], b["col"]) == (player["row"], player["col"]) for b in blocks):
        tags.add("a block under the player")
    if any((e["row"], e["col"]) == (b["row"], b["col"]) for e in enemies for b in blocks):
        tags.add("an enemy on a block cell")
    if any(b["type"] == "data" and "program" in b for b in blocks):
        tags.add("a data block given a program (ignored)")
    if any(b["type"] != "data" and "program" in b and "points" in b for b in blocks):
        tags.add("a program given with points (ignored)")
    resources = d.get("resources", [])
    if any(r.get("dataSiphon") and (r.get("credits", 0) > 0 or r.get("energy", 0) > 0)
           for r in resources):
        tags.add("a pickup entry's credits/energy ignored")
    if any(r.get("credits", 0) < 0 or r.get("energy", 0) < 0 for r in resources):
        tags.add("negative credits or energy in a resource entry")
    if any((r["row"], r["col"]) == (b["row"], b["col"]) and not r.get("dataSiphon")
           for r in resources for b in blocks):
        tags.add("a resource entry on a block cell")
    if (player["row"], player["col"]) == (5, 5):
        tags.add("the player on (5,5)")
    if any((r["row"], r["col"]) == (5, 5) and r.get("credits", 0) > 0 for r in resources):
        tags.add("credits on the exit cell")
    if "exitCell" in d and d["exitCell"] != d.get("exitPosition", {"row": 5, "col": 5}):
        tags.add("exitCell differs from exitPosition")
    if d.get("siphonedCells"):
        tags.add("siphonedCells given")
    return tags


REQUIRED_TAGS = {
    "minimal scenario": 5, "every A.1 field given": 20, "player hp 0": 10,
    "player hp outside 0-3 is 3": 30, **{f"stage {k} given": 10 for k in range(1, 9)},
    "turn >= 11": 30, "owned programs by name and by index": 30, "an owned program repeated": 30,
    **{f"enemy {kind}": 50 for kind in ENEMY_TYPES}, "enemy type not in lower case": 50,
    "enemy hp outside 0-3 (verbatim)": 50, "enemy with every flag given": 30,
    "36 enemies": 3, "36 transmissions": 3, "transmission turnsRemaining <= 0": 30,
    "pieces sharing a cell": 50,
    "a block under the player": 20, "an enemy on a block cell": 30,
    "data block, spawnCount omitted": 25, "data block, spawnCount given": 50,
    "program block, spawnCount omitted": 25, "program block, spawnCount given": 50,
    "question block, spawnCount omitted": 20, "question block, spawnCount given": 30,
    "question block holding a program, spawnCount omitted": 8,
    "question block holding a program, spawnCount given": 30,
    "a data block given a program (ignored)": 10, "a program given with points (ignored)": 20,
    "a later block entry replaces an earlier one": 50,
    "a siphoned flag survives a later unsiphoned entry": 10,
    "a data-siphon pickup replaces a block": 20, "credits win over energy in one entry": 20,
    "an entry setting neither credits nor energy leaves the resource": 10,
    "a pickup entry's credits/energy ignored": 20,
    "negative credits or energy in a resource entry": 30, "a resource entry on a block cell": 30,
    "the exit replaces a block or pickup": 30, "the player on (5,5)": 30,
    "credits on the exit cell": 10, "exitCell differs from exitPosition": 10,
    "siphonedCells given": 20,
}


@pytest.fixture(scope="module")
def cases():
    """[(label, scenario dict, extended)] from the fixed seed."""
    rng = random.Random(SEED)
    drawn = []
    for i in range(NUM_CASES):
        presence = 0.0 if i < 5 else 1.0 if i < 25 else rng.choice((0.3, 0.6, 0.9, 1.0))
        extended = presence > 0 and rng.random() < 0.25
        d = random_scenario(rng, presence, extended)
        names = list(d)
        rng.shuffle(names)  # A.2's order is the rules', not the dict's
        d = {name: d[name] for name in names}
        drawn.append((f"seed {SEED} case {i}", d, extended))
    return drawn


def build(label: str, d: dict):
    """from_dict of a valid scenario; a rejection fails naming the case."""
    try:
        return scenario.from_dict(d)
    except ValueError as error:
        pytest.fail(f"{label}: a valid scenario is rejected: {error} (A.1); "
                    f"scenario {json.dumps(d)}")


# ---------------------------------------------------------------------------------------------
# Tests: setup, inspect, round trips


def smallest(failures: list) -> str:
    """A failure report: how many cases failed, and the one with the shortest scenario."""
    label, diffs, d = min(failures, key=lambda failure: len(json.dumps(failure[2])))
    return (f"{len(failures)} of {NUM_CASES} cases differ; the smallest, {label}: {diffs[:12]}; "
            f"scenario {json.dumps(d)}")


def test_setup_matches_the_reference(cases):
    tags_seen, failures = Counter(), []
    for label, d, extended in cases:
        tags = shape_tags(d)
        expected = reference_state(d, tags)
        tags_seen.update(tags)
        diffs = differences(expected, plain.to_plain(build(label, d)), extended)
        if diffs:
            failures.append((label, diffs, d))
    assert not failures, smallest(failures)
    plain.assert_covered(tags_seen, REQUIRED_TAGS, "cases")


def test_inspect_reports_the_a4_values(cases):
    failures = []
    for label, d, _ in cases:
        expected = reference_inspect(reference_state(d))
        diffs = inspect_differences(expected, scenario.inspect(build(label, d)))
        if diffs:
            failures.append((label, diffs, d))
    assert not failures, smallest(failures)


def test_json_text_of_the_scenario_gives_the_same_state(cases):
    failures = []
    for label, d, extended in cases:
        loaded = build(f"{label} through JSON", json.loads(json.dumps(d)))
        diffs = differences(reference_state(d), plain.to_plain(loaded), extended)
        if diffs:
            failures.append((f"{label} through JSON", diffs, d))
    assert not failures, smallest(failures)


def test_saved_scenario_gives_the_same_state(cases):
    """to_dict (specs §10) saves the state so that from_dict of its JSON text gives it back."""
    failures = []
    for label, d, extended in cases:
        saved = json.loads(json.dumps(scenario.to_dict(build(label, d))))
        diffs = differences(reference_state(d), plain.to_plain(build(f"{label} saved", saved)),
                            extended)
        if diffs:
            failures.append((f"{label} saved as {json.dumps(saved)}", diffs, d))
    assert not failures, smallest(failures)


def test_inspect_output_is_a_scenario_with_the_same_hidden_values(cases):
    """inspect's enemies and counters use from_dict's field names: fed back, they come back."""
    failures = []
    for label, d, _ in cases:
        hidden = scenario.inspect(build(label, d))
        rebuilt = {"player": {"row": 0, "col": 0}, "enemies": hidden["enemies"],
                   **{name: hidden[name] for name in A4_COUNTERS}}
        again = scenario.inspect(build(f"{label} rebuilt from inspect",
                                       json.loads(json.dumps(rebuilt))))
        diffs = inspect_differences(hidden, again)
        if diffs:
            failures.append((f"{label} rebuilt as {json.dumps(rebuilt)}", diffs, d))
    assert not failures, smallest(failures)


# ---------------------------------------------------------------------------------------------
# A.5 quick checks, one test each, through the full step (every value the bullet states)


def play(d, action):
    """from_dict, then one step that must be valid: (state, obs, reward, done, info)."""
    state, obs, reward, done, info = compiled.STEP(KEY, scenario.from_dict(d), action)
    assert not bool(info["invalid_action"]), f"A.5: action {action} invalid after setup {d}"
    return state, obs, float(reward), bool(done), info


def assert_components(info, **expected):
    """The reward components A.5 spells out (§14.1 names)."""
    for name, value in expected.items():
        got = float(info["reward_components"][name])
        assert got == pytest.approx(value, abs=1e-5), f"A.5: reward component {name} {got}"


def test_a5_attacking_a_two_hp_virus_stuns_it_for_the_enemy_turn():
    state, obs, reward, done, _ = play(
        {"player": {"row": 3, "col": 3},
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 2}]}, UP)
    after, hidden = plain.to_plain(state), scenario.inspect(state)
    assert (after["player_row"], after["player_col"]) == (3, 3), "A.5: the player stays"
    [virus] = hidden["enemies"]
    assert (virus["row"], virus["col"], virus["hp"]) == (4, 3, 1), f"A.5: virus {virus}"
    assert after["hp"] == 3, "A.5: the stunned virus does not act"
    assert float(obs.grid[4, 3, 0]) == 1.0 and float(obs.grid[4, 3, 5]) == 0.0, (
        "A.5: the observation after the step shows the virus unstunned")
    assert hidden["turn"] == 1, "A.5: turn 1"
    assert reward == pytest.approx(-0.01, abs=1e-6) and not done, f"A.5: reward {reward}"
    assert bool(compiled.VALID_ACTIONS(state)[UP]), "A.5: action 0 still valid"


def test_a5_a_daemon_walks_one_cell_towards_the_player():
    # WAIT needs owning it and 1 energy (§7.1); A.5 leaves that implicit.
    state, *_ = play({"player": {"row": 0, "col": 0, "energy": 1}, "ownedPrograms": ["WAIT"],
                      "enemies": [{"type": "daemon", "row": 3, "col": 0, "hp": 3}]},
                     C.ACTION_WAIT)
    [daemon] = scenario.inspect(state)["enemies"]
    assert (daemon["row"], daemon["col"]) == (2, 0), f"A.5: daemon {daemon}"


@pytest.mark.parametrize("from_siphon, expected", [(False, -1.06), (True, -11.06)])
def test_a5_a_virus_kills_a_one_hp_player(from_siphon, expected):
    state, _, reward, done, info = play(
        {"player": {"row": 3, "col": 3, "hp": 1, "energy": 1}, "ownedPrograms": ["WAIT"],
         "enemies": [{"type": "virus", "row": 4, "col": 3, "hp": 2,
                      "spawnedFromSiphon": from_siphon}]}, C.ACTION_WAIT)
    assert int(state.core.hp) == 0 and done, "A.5: hp 0, done"
    assert reward == pytest.approx(expected, abs=1e-5), f"A.5: reward {reward}"
    assert_components(info, step_penalty=-0.01, damagePenalty=-1.0, death=0.0,
                      resourceGain=-0.05, siphonDeathPenalty=-10.0 if from_siphon else 0.0)


def test_a5_warp_onto_the_exit_kills_the_virus_and_completes_stage_1():
    state, _, reward, done, info = play(
        {"player": {"row": 0, "col": 0, "credits": 2, "energy": 2}, "ownedPrograms": ["WARP"],
         "enemies": [{"type": "virus", "row": 5, "col": 5, "hp": 2}]},
        compiled.program_action("WARP"))
    after = plain.to_plain(state)
    assert (after["player_row"], after["player_col"]) == (5, 5), "A.5: WARP lands on (5,5)"
    assert after["stage"] == 2 and not done, "A.5: stage 2, done false"
    exit_cell = (after["exit_row"], after["exit_col"])
    assert exit_cell in CORNERS and exit_cell != (5, 5), f"A.5: new exit {exit_cell}"
    assert after["cells"]["content"][exit_cell[0]][exit_cell[1]] == C.EXIT, "A.5: new exit"
    assert after["enemies"] == [], "A.5: no enemies"
    assert len(after["transmissions"]) == 2, "A.5: 2 new transmissions"
    assert reward == pytest.approx(1.59, abs=1e-5), f"A.5: reward {reward}"
    assert_components(info, step_penalty=-0.01, kills=0.3, stage=1.0, distance=0.5,
                      resourceGain=-0.2, resourceHolding=0.0)


def test_a5_attacking_a_transmission_destroys_it():
    state, _, reward, done, info = play(
        {"player": {"row": 3, "col": 3},
         "transmissions": [{"row": 4, "col": 3, "turnsRemaining": 3, "enemyType": "virus"}]},
        UP)
    after = plain.to_plain(state)
    assert after["transmissions"] == [] and after["enemies"] == [], "A.5: destroyed"
    assert (after["player_row"], after["player_col"]) == (3, 3), "A.5: the player stays"
    assert reward == pytest.approx(0.29, abs=1e-5) and not done, f"A.5: reward {reward}"
    assert_components(info, step_penalty=-0.01, kills=0.3)
    assert after["turn"] == 1, "A.5: turn 1"


def test_a5_siphoning_a_nine_point_data_block():
    state, obs, reward, done, info = play(
        {"player": {"row": 3, "col": 3, "dataSiphons": 1},
         "blocks": [{"row": 4, "col": 3, "type": "data", "points": 9, "spawnCount": 9}]},
        SIPHON)
    after, hidden = plain.to_plain(state), scenario.inspect(state)
    assert (after["score"], after["data_siphons"], after["turn"]) == (9, 0, 1), (
        "A.5: score +9, dataSiphons 0, turn 1")
    assert reward == pytest.approx(4.49, abs=1e-5) and not done, f"A.5: reward {reward}"
    assert_components(info, step_penalty=-0.01, score=4.5, siphonQuality=0.0)
    assert float(obs.grid[4, 3, 11]) == 1.0 and float(obs.grid[4, 3, 35]) == 0.0, (
        "A.5: the block shows channel 11 = 1 and channel 35 = 0")
    assert float(obs.grid[3, 3, 41]) == 1.0, "A.5: (3,3) shows channel 41 = 1"
    transmissions = after["transmissions"]
    cells = {(t["row"], t["col"]) for t in transmissions}
    assert len(transmissions) == 9 and len(cells) == 9, f"A.5: 9 new on free cells: {cells}"
    assert all(t["from_siphon"] for t in transmissions), "A.5: spawnedFromSiphon"
    for row, col in cells:
        assert float(obs.grid[row, col, 36]) == 0.25, f"A.5: channel 36 at {(row, col)}"
        # Outside the line of fire: not the player's row, not column 3 up to the block (the
        # player's and the block's cells are not free); (5,3), behind the block, is outside.
        assert row != 3 and not (col == 3 and row <= 4), f"A.5: transmission at {(row, col)}"
    assert (hidden["scheduledTaskInterval"], hidden["nextScheduledTaskTurn"],
            hidden["pendingSiphonTransmissions"]) == (11, 17, 0), f"A.5: {hidden}"
