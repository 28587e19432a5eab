"""Seeded fuzz of the Scenario API (rules Appendix A): input checking and the round trip.

Each case draws a valid scenario dict with `random.Random(case)`, using every field `from_dict`
accepts (player fields, globals, owned programs by action index and by name, enemies,
transmissions, data/program/question blocks, resources, data-siphon pickups, and the extension
fields: exit position and cell, siphoned and siphon-center cells, STEP, hidden counters), then
applies one mutation:

- replace: a value, an object, a list or the whole scenario becomes another value: strings,
  floats (1.0, 1.5, NaN, inf), booleans, None, lists, objects, integers beyond 32 bits, NumPy
  scalars, unknown names, values just outside the field's range, or a fresh valid value (which
  may break a rule between fields: a question block moved onto a siphoned cell);
- rewrite: a value becomes an equivalent one (3.0 or np.int64(3) for 3, "VIRUS" for "virus", a
  program's name for its action index, np.bool_ for a bool);
- remove a key; add an unknown key; duplicate or drop a list entry; fill enemies or
  transmissions up to or past their capacity of 36.

An oracle written from Appendix A and specs/game-rules.md §10/§12 (`violations`) lists the paths
of the fields a scenario gets wrong: a value of the wrong kind or range, an unknown or missing
field, an overfull list, or a rule between fields. Every case checks that:

- `from_dict` raises ValueError exactly when the oracle finds a violation, never another
  exception, and its message starts with the path of one of them ("enemies[2].hp: ...");
- `from_dict` leaves its input unchanged, and a rewrite gives the state of the unmutated one;
- an accepted scenario round-trips: `to_dict` is JSON-compatible and `from_dict(to_dict(s))`
  equals `s` leaf for leaf; `inspect` reports the given turn, enemies and hidden values (A.3
  defaults where omitted);
- every tenth case, when it is JSON, also goes through a file and `cli.load_scenario` (play.py
  --scenario): a rejection is a one-line ToolError with exit code 3 and the same message.

A deterministic sweep adds what random draws may miss (an off-by-one at a range's edge, a
program block without its program): every field of one full scenario against every kind of
value, every key removed, an unknown key added.

`from_dict` compiles nothing, but it puts some 30 arrays on the device (about 3 ms a state on a
CPU; a rejection costs 0.03 ms): the 1000 cases take about 5 s, the sweep (2200 checks)
1.5 s. Inputs that the pools' own checks could not print (integers over 4300 digits, nesting
past the recursion limit) and keys with a line break have tests of their own at the end.
"""

import copy
import dataclasses
import json
import math
import numbers
import random
import re
from typing import Callable

import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario
from hackmatrix.tools import cli

from test_scenario import assert_states_equal

NUM_CASES = 1000
CLI_EVERY = 10
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
SIZE = C.BOARD_SIZE
CAPACITY = 36  # enemies and transmissions
ENEMY_TYPES = ("virus", "daemon", "glitch", "cryptog")
BLOCK_TYPES = ("data", "program", "question")


# ---------------------------------------------------------------------------------------------
# Field kinds: the values each field takes on its own


def integer(value):
    """The integer a JSON number stands for (integral floats count, §12), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def int_in(low, high):
    def valid(value):
        number = integer(value)
        return number is not None and low <= number <= high
    return valid


def program_key(name: str) -> str:
    # §12: program names match ignoring case, '-', '_' and spaces.
    return re.sub("[-_ ]", "", name.upper())


PROGRAM_KEYS = {program_key(name): k for k, name in enumerate(C.PROGRAM_NAMES)}
FIRST_ACTION, LAST_ACTION = C.FIRST_PROGRAM_ACTION, C.NUM_ACTIONS - 1  # 5-27


def valid_program(value):
    if isinstance(value, str):
        return program_key(value) in PROGRAM_KEYS
    return int_in(FIRST_ACTION, LAST_ACTION)(value)


def program_rewrites(value):
    index = (PROGRAM_KEYS[program_key(value)] if isinstance(value, str)
             else integer(value) - FIRST_ACTION)
    name, action = C.PROGRAM_NAMES[index], index + FIRST_ACTION
    return [name, name.lower(), name.title().replace("-", "_"), f" {name.replace('-', ' ')}",
            action, float(action), np.int64(action)]


def int_rewrites(value):
    return [float(value), np.int64(value), np.int32(value), np.float64(value)]


@dataclasses.dataclass(frozen=True)
class Leaf:
    valid: Callable       # value -> whether the field takes it
    draw: Callable        # rng -> a valid value
    rewrites: Callable    # valid value -> equivalent values
    edges: tuple          # values at and just past the edges of the valid ones


@dataclasses.dataclass(frozen=True)
class Obj:
    fields: dict
    required: frozenset = frozenset()
    rule: Callable | None = None  # entry with valid fields -> whether the object is valid


@dataclasses.dataclass(frozen=True)
class ListOf:
    item: object
    capacity: int | None = None


def number_leaf(low, high, typical):
    return Leaf(int_in(low, high), lambda rng: rng.choice(typical), int_rewrites,
                (low - 1, low, high, high + 1, float(low - 1), float(high + 1)))


# Every cell is an edge case of a coordinate: moving one entry can break a rule between two.
COORDINATE = dataclasses.replace(number_leaf(0, SIZE - 1, range(SIZE)),
                                 edges=(*range(SIZE), -1, SIZE, -1.0, float(SIZE)))
INT32 = number_leaf(INT32_MIN, INT32_MAX, (INT32_MIN, -5, -1, 0, 1, 2, 3, 4, 99, INT32_MAX))
NON_NEGATIVE = number_leaf(0, INT32_MAX, (0, 1, 2, 7, 12, 100, INT32_MAX))
ATTACK = number_leaf(1, INT32_MAX, (1, 2, 5, INT32_MAX))
STAGE = number_leaf(1, C.MAX_STAGE, range(1, C.MAX_STAGE + 1))
BOOL = Leaf(lambda v: isinstance(v, (bool, np.bool_)), lambda rng: rng.random() < 0.5,
            lambda v: [np.bool_(v), bool(v)], (0, 1, "true", "false", None))
ENEMY_TYPE = Leaf(lambda v: isinstance(v, str) and v.lower() in ENEMY_TYPES,
                  lambda rng: rng.choice(ENEMY_TYPES),
                  lambda v: [v.upper(), v.title(), v.lower()],
                  ("Virus", "DAEMON", "viruses", "virus ", "", "transmission", 0))
BLOCK_TYPE = Leaf(lambda v: isinstance(v, str) and v in BLOCK_TYPES,  # exact lower case (A.1)
                  lambda rng: rng.choice(BLOCK_TYPES), lambda v: [],
                  ("Data", "DATA", "data ", "question", "program", "pickup", 0))
PROGRAM = Leaf(valid_program,
               lambda rng: rng.choice(program_rewrites(rng.randrange(FIRST_ACTION,
                                                                     LAST_ACTION + 1))),
               program_rewrites,
               (FIRST_ACTION - 1, LAST_ACTION + 1, FIRST_ACTION, LAST_ACTION, 4.0, 27.0, "SIPH",
                "siph+", "siph-plus", "ANTI V", "atk++", ""))


def is_corner(entry):
    return all(integer(entry[name]) in (0, SIZE - 1) for name in ("row", "col"))


# A coordinate of exitPosition or exitCell: any coordinate on its own, drawn on a corner.
CORNER_COORDINATE = Leaf(COORDINATE.valid, lambda rng: rng.choice((0, SIZE - 1)), int_rewrites,
                         COORDINATE.edges)
CELL = Obj({"row": COORDINATE, "col": COORDINATE}, frozenset({"row", "col"}))
CORNER = Obj({"row": CORNER_COORDINATE, "col": CORNER_COORDINATE}, frozenset({"row", "col"}),
             is_corner)
PLAYER = Obj({"row": COORDINATE, "col": COORDINATE, "hp": INT32, "credits": NON_NEGATIVE,
              "energy": NON_NEGATIVE, "dataSiphons": NON_NEGATIVE, "score": NON_NEGATIVE,
              "attackDamage": ATTACK}, frozenset({"row", "col"}))
ENEMY = Obj({"type": ENEMY_TYPE, "row": COORDINATE, "col": COORDINATE, "hp": INT32,
             "stunned": BOOL, "spawnedFromSiphon": BOOL, "isFromScheduledTask": BOOL,
             "disabledTurns": NON_NEGATIVE}, frozenset({"type", "row", "col", "hp"}))
TRANSMISSION = Obj({"row": COORDINATE, "col": COORDINATE, "turnsRemaining": INT32,
                    "enemyType": ENEMY_TYPE, "spawnedFromSiphon": BOOL,
                    "isFromScheduledTask": BOOL},
                   frozenset({"row", "col", "turnsRemaining", "enemyType"}))
BLOCK = Obj({"row": COORDINATE, "col": COORDINATE, "type": BLOCK_TYPE, "points": NON_NEGATIVE,
             "spawnCount": NON_NEGATIVE, "siphoned": BOOL, "program": PROGRAM},
            frozenset({"row", "col", "type"}))
RESOURCE = Obj({"row": COORDINATE, "col": COORDINATE, "credits": INT32, "energy": INT32,
                "dataSiphon": BOOL}, frozenset({"row", "col"}))
HIDDEN_DEFAULTS = {"scheduledTaskInterval": 12, "nextScheduledTaskTurn": 12,
                   "pendingSiphonTransmissions": 0, "atkPlusUsesThisStage": 0}
SCENARIO = Obj({
    "player": PLAYER, "enemies": ListOf(ENEMY, CAPACITY),
    "transmissions": ListOf(TRANSMISSION, CAPACITY), "blocks": ListOf(BLOCK),
    "resources": ListOf(RESOURCE), "ownedPrograms": ListOf(PROGRAM), "stage": STAGE,
    "turn": NON_NEGATIVE, "showActivated": BOOL, "scheduledTasksDisabled": BOOL,
    "exitPosition": CORNER, "exitCell": CORNER, "siphonedCells": ListOf(CELL),
    "siphonCenterCells": ListOf(CELL), "stepActive": BOOL,
    **{name: NON_NEGATIVE for name in HIDDEN_DEFAULTS},
}, frozenset({"player"}))
ALL_FIELD_NAMES = {name for spec in (SCENARIO, PLAYER, ENEMY, TRANSMISSION, BLOCK, RESOURCE)
                   for name in spec.fields}


def required_fields(spec: Obj, entry: dict) -> frozenset:
    if spec is BLOCK and entry.get("type") == "program":
        return spec.required | {"program"}  # A.2 step 5
    return spec.required


def path_text(path) -> str:
    """("enemies", 2, "hp") -> "enemies[2].hp"; the scenario itself is "scenario". A key that is
    empty or not printable text is quoted, so that the message shows it."""
    if not path:
        return "scenario"
    text = ""
    for token in path:
        if isinstance(token, int):
            text += f"[{token}]"
            continue
        name = token if token and token.isprintable() else repr(token)
        text += f".{name}" if text else name
    return text


# ---------------------------------------------------------------------------------------------
# The oracle


def field_violations(value, spec, path=()) -> list:
    """Paths of the fields of `value` that its kind rules out, one by one."""
    if isinstance(spec, Leaf):
        return [] if spec.valid(value) else [path]
    if isinstance(spec, ListOf):
        if not isinstance(value, (list, tuple)):
            return [path]
        found = [path] if spec.capacity is not None and len(value) > spec.capacity else []
        for i, item in enumerate(value):
            found += field_violations(item, spec.item, path + (i,))
        return found
    if not isinstance(value, dict):
        return [path]
    found = [path + (name,) for name in required_fields(spec, value) if name not in value]
    for name, item in value.items():
        found += (field_violations(item, spec.fields[name], path + (name,))
                  if name in spec.fields else [path + (name,)])
    if not found and spec.rule is not None and not spec.rule(value):
        found.append(path)
    return found


def cell_violations(d: dict) -> list:
    """The rules between entries (A.2 step 5, §12): a question block never sits on a siphoned
    cell, whether its own entry, an earlier block entry or siphonedCells marks it. Entries with
    a bad field are skipped (they are violations already)."""
    def entries(name, spec):
        items = d.get(name, [])
        for i, entry in enumerate(items if isinstance(items, (list, tuple)) else []):
            if not field_violations(entry, spec):
                yield i, entry, (integer(entry["row"]), integer(entry["col"]))

    found, siphoned, content = [], set(), {}
    for i, entry, cell in entries("blocks", BLOCK):
        if entry["type"] == "question" and entry.get("siphoned", False):
            found.append(("blocks", i, "siphoned"))
        if entry["type"] == "question" and cell in siphoned:
            found.append(("blocks", i))
        if entry.get("siphoned", False):
            siphoned.add(cell)
        content[cell] = entry["type"]
    for _, entry, cell in entries("resources", RESOURCE):
        if entry.get("dataSiphon", False):
            content[cell] = "data siphon"
    for i, _, cell in entries("siphonedCells", CELL):
        if content.get(cell) == "question":  # before the exit replaces a block (step 7)
            found.append(("siphonedCells", i))
    return found


def violations(d) -> list[str]:
    found = field_violations(d, SCENARIO)
    if isinstance(d, dict):
        found += cell_violations(d)
    return [path_text(path) for path in found]


# ---------------------------------------------------------------------------------------------
# Valid scenarios


def draw(rng, spec, p=0.5):
    """A valid value of a kind; an object gets its required fields, and each other field with
    probability p, in a random order."""
    if isinstance(spec, Leaf):
        return spec.draw(rng)
    if isinstance(spec, ListOf):
        return [draw(rng, spec.item) for _ in range(rng.randrange(6))]
    names = [name for name in spec.fields if name in spec.required or rng.random() < p]
    rng.shuffle(names)
    entry = {name: draw(rng, spec.fields[name]) for name in names}
    if spec is BLOCK and entry["type"] == "program":
        entry.setdefault("program", draw(rng, PROGRAM))
    return entry


def valid_scenario(rng) -> dict:
    d = draw(rng, SCENARIO, p=0.6)
    # Blocks and siphonedCells kept clear of the question-block rules.
    siphoned, question_cells = set(), set()
    for entry in d.get("blocks", []):
        cell = (entry["row"], entry["col"])
        if entry["type"] == "question" and cell in siphoned:
            entry["type"] = "data"
        if entry["type"] == "question":
            question_cells.add(cell)
            entry.pop("siphoned", None)
        if entry.get("siphoned"):
            siphoned.add(cell)
    free = [(r, c) for r in range(SIZE) for c in range(SIZE) if (r, c) not in question_cells]
    d["siphonedCells"] = [{"row": r, "col": c} for r, c in rng.sample(free, rng.randrange(4))]
    assert not violations(d), d
    return d


# ---------------------------------------------------------------------------------------------
# Mutations

UNKNOWN_KEYS = ("health", "Row", "ROW", "row ", " col", "", "enemy_type", "spawncount", "exit",
                "siphoned_cells", "disabled_turns", "é", "0", "null", "__class__")
JUNK = {  # by kind of value, each kind as likely as any other
    "null": (None,),
    "bool": (True, False, np.bool_(True), np.bool_(False)),
    "int": (0, 1, -1, 2, 5, 6, 7, 8, 9, 27, 28, 100, -7, INT32_MAX, INT32_MIN),
    "wide int": (2**31, -2**31 - 1, 2**63, -2**64, 10**30, np.uint64(2**64 - 1)),
    "float": (0.0, -0.0, 1.0, 3.0, 5.0, 1.5, -0.5, 1e20, 2.0**31, 1e308, np.float32(2.0),
              np.float64(2.5)),
    "non-finite": (float("nan"), float("inf"), float("-inf"), np.float64("nan")),
    "other number": (complex(1, 0), np.int64(4), np.int8(-3)),
    "string": ("", "0", "3", "1.0", "true", "null", "virus", "Virus", "dragon", "data", "Data",
               "wall", "WARP", "siph+", "anti_v", "NUKE", "row", "x" * 1000),
    "list": ([], [1], [0, 0], [{}], (1,)),
    "object": ({}, {"row": 0, "col": 0}, {"type": "virus"}),
}
# Mutations, weighted: replacing is the most varied, and most of its cases are cheap rejections.
MUTATIONS = ("replace",) * 5 + ("rewrite", "remove", "add", "duplicate", "drop", "fill")


def junk(rng):
    return rng.choice(rng.choice(list(JUNK.values())))


@dataclasses.dataclass
class Case:
    d: object
    what: str
    same_as: dict | None = None  # a rewrite: must give the state of this scenario


ABSENT = object()  # an optional field the scenario leaves out


def sites(value, spec, path=()):
    """(path, spec, value) of the scenario, of everything in it, and of the optional fields its
    objects leave out (value ABSENT: replacing one sets it)."""
    yield path, spec, value
    if isinstance(spec, Obj) and isinstance(value, dict):
        for name, field in spec.fields.items():
            yield from sites(value.get(name, ABSENT), field, path + (name,))
    elif isinstance(spec, ListOf) and isinstance(value, list):
        for i, item in enumerate(value):
            yield from sites(item, spec.item, path + (i,))


def pick(rng, candidates):
    """A site, each field of the schema ("blocks[].points") as likely as any other."""
    by_field = {}
    for site in candidates:
        field = tuple("[]" if isinstance(token, int) else token for token in site[0])
        by_field.setdefault(field, []).append(site)
    return rng.choice(by_field[rng.choice(list(by_field))])


def put(d, path, value):
    """A copy of `d` with the value at `path` replaced."""
    if not path:
        return value
    d = copy.deepcopy(d)
    parent = d
    for token in path[:-1]:
        parent = parent[token]
    parent[path[-1]] = value
    return d


def mutate(rng, base: dict) -> Case:
    everything = list(sites(base, SCENARIO))
    present = [site for site in everything if site[2] is not ABSENT]
    kind = rng.choice(MUTATIONS)
    lists = [site for site in present if isinstance(site[1], ListOf) and site[2]]
    if kind in ("duplicate", "drop") and not lists:
        kind = "replace"
    if kind == "rewrite":
        path, spec, value = pick(rng, [site for site in present
                                       if isinstance(site[1], Leaf) and site[1].rewrites(site[2])])
        new = rng.choice(spec.rewrites(value))
        return Case(put(base, path, new), f"rewrite {path_text(path)} as {new!r}", base)
    if kind == "remove":
        path, _, value = pick(rng, [site for site in present
                                    if isinstance(site[1], Obj) and site[2]])
        name = rng.choice(list(value))
        return Case(put(base, path, {k: v for k, v in value.items() if k != name}),
                    f"remove {path_text(path + (name,))}")
    if kind == "add":
        path, spec, value = pick(rng, [site for site in present if isinstance(site[1], Obj)])
        name = rng.choice([k for k in (*UNKNOWN_KEYS, *ALL_FIELD_NAMES) if k not in spec.fields])
        return Case(put(base, path, {**value, name: junk(rng)}),
                    f"add {path_text(path + (name,))}")
    if kind == "duplicate":
        path, _, value = pick(rng, lists)
        entries = list(value)
        entries.insert(rng.randrange(len(entries) + 1), copy.deepcopy(rng.choice(entries)))
        return Case(put(base, path, entries), f"duplicate an entry of {path_text(path)}")
    if kind == "drop":
        path, _, value = pick(rng, lists)
        i = rng.randrange(len(value))
        return Case(put(base, path, value[:i] + value[i + 1:]), f"drop {path_text(path + (i,))}")
    if kind == "fill":
        name = rng.choice(("enemies", "transmissions"))
        count = rng.choice((CAPACITY, CAPACITY + 1, CAPACITY + rng.randrange(1, 50)))
        entries = [draw(rng, SCENARIO.fields[name].item) for _ in range(count)]
        return Case({**base, name: entries}, f"fill {name} with {count} entries")
    path, spec, _ = pick(rng, everything)
    choices = [junk, junk, lambda rng: draw(rng, spec)]
    if isinstance(spec, Leaf):
        choices.append(lambda rng: rng.choice(spec.edges))
    new = rng.choice(choices)(rng)
    return Case(put(base, path, new), f"replace {path_text(path)} with {new!r}")


# ---------------------------------------------------------------------------------------------
# Checks


def expected_inspect(d: dict) -> dict:
    """What `inspect` reports for an accepted scenario: the input's values, A.3 defaults."""
    def enemy(e):
        return {"row": integer(e["row"]), "col": integer(e["col"]), "type": e["type"].lower(),
                "hp": integer(e["hp"]), "disabledTurns": integer(e.get("disabledTurns", 0)),
                **{flag: bool(e.get(flag, False))
                   for flag in ("stunned", "spawnedFromSiphon", "isFromScheduledTask")}}
    return {
        **{name: integer(d.get(name, default)) for name, default in HIDDEN_DEFAULTS.items()
           if name != "atkPlusUsesThisStage"},
        "turn": integer(d.get("turn", 0)),
        "enemies": [enemy(e) for e in d.get("enemies", [])],
    }


def check_round_trip(state, d):
    saved = scenario.to_dict(state)
    assert json.loads(json.dumps(saved)) == saved
    assert_states_equal(scenario.from_dict(saved), state)
    assert scenario.inspect(state) == expected_inspect(d)


def check_cli(tmp_path, d, outcome):
    """load_scenario (play.py --scenario) gives the same outcome from a JSON file."""
    try:
        text = json.dumps(d)
    except TypeError:
        return  # NumPy scalars, complex numbers: not JSON
    if repr(json.loads(text)) != repr(d):
        return  # tuples read back as lists, and their messages differ
    path = tmp_path / "scenario.json"
    path.write_text(text)
    if isinstance(outcome, ValueError):
        with pytest.raises(cli.ToolError) as error:
            cli.load_scenario(str(path))
        assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
        assert str(error.value) == f"{path}: {outcome}"
        assert len(str(error.value).splitlines()) == 1
    else:
        assert_states_equal(cli.load_scenario(str(path)), outcome)


def from_dict_outcome(d, context: str):
    """The state `from_dict` returns, or the ValueError it raises."""
    before = repr(d)
    try:
        outcome = scenario.from_dict(d)
    except ValueError as error:
        outcome = error
    except Exception as error:  # noqa: BLE001  (the contract: a state or a ValueError)
        pytest.fail(f"{context}: {type(error).__name__}: {error}")
    assert repr(d) == before, f"{context}: from_dict changed its input"
    return outcome


def check_outcome(d, context: str):
    """`from_dict(d)` rejects `d` exactly when the oracle does, naming one of the fields it
    finds; returns the state or the ValueError."""
    expected = violations(d)
    outcome = from_dict_outcome(d, context)
    if isinstance(outcome, ValueError):
        message = str(outcome)
        assert expected, f"{context}: rejected: {message}"
        assert any(message.startswith(f"{path}: ") for path in expected), (
            f"{context}: {message!r} names none of {expected}")
    else:
        assert not expected, f"{context}: accepted, but the oracle finds {expected}"
    return outcome


def check_case(tmp_path, i: int) -> tuple[Case, object]:
    rng = random.Random(i)
    case = mutate(rng, valid_scenario(rng))
    outcome = check_outcome(case.d, f"case {i}: {case.what}")
    if not isinstance(outcome, ValueError):
        check_round_trip(outcome, case.d)
        if case.same_as is not None:
            assert_states_equal(outcome, scenario.from_dict(case.same_as))
    if i % CLI_EVERY == 0:
        check_cli(tmp_path, case.d, outcome)
    return case, outcome


def test_fuzz_from_dict_checks_its_input_and_round_trips(tmp_path):
    results = [check_case(tmp_path, i) for i in range(NUM_CASES)]
    # The draws reach both outcomes, every mutation and every top-level field.
    rejected = sum(isinstance(outcome, ValueError) for _, outcome in results)
    assert NUM_CASES // 4 < rejected < NUM_CASES * 3 // 4
    assert {case.what.split()[0] for case, _ in results} == set(MUTATIONS)
    touched = {re.match(r"\w+ (\w+)", case.what).group(1) for case, _ in results
               if case.what.split()[0] in ("replace", "rewrite", "remove")}
    assert set(SCENARIO.fields) <= touched


# Every field, an entry in each list, a block of each type; one coordinate away from breaking
# the question-block rules (blocks[2] to (3, 3), siphonedCells[0] to (3, 4)).
FULL_SCENARIO = {
    "player": {"row": 1, "col": 2, "hp": 2, "credits": 3, "energy": 4, "dataSiphons": 1,
               "score": 5, "attackDamage": 2},
    "enemies": [{"type": "virus", "row": 0, "col": 1, "hp": 2, "stunned": True,
                 "spawnedFromSiphon": False, "isFromScheduledTask": True, "disabledTurns": 1}],
    "transmissions": [{"row": 2, "col": 2, "turnsRemaining": 3, "enemyType": "daemon",
                       "spawnedFromSiphon": True, "isFromScheduledTask": False}],
    "blocks": [{"row": 3, "col": 3, "type": "data", "points": 4, "spawnCount": 4,
                "siphoned": True, "program": "WARP"},
               {"row": 2, "col": 4, "type": "program", "points": 1, "spawnCount": 2,
                "siphoned": False, "program": 10},
               {"row": 3, "col": 4, "type": "question", "points": 3, "spawnCount": 1,
                "siphoned": False, "program": "calm"}],
    "resources": [{"row": 4, "col": 1, "credits": 2, "energy": 0, "dataSiphon": False}],
    "ownedPrograms": ["SIPH+"], "stage": 2, "turn": 5, "showActivated": False,
    "scheduledTasksDisabled": True, "exitPosition": {"row": 0, "col": 5},
    "exitCell": {"row": 0, "col": 5}, "siphonedCells": [{"row": 1, "col": 4}],
    "siphonCenterCells": [{"row": 1, "col": 1}], "stepActive": True,
    "scheduledTaskInterval": 10, "nextScheduledTaskTurn": 15, "pendingSiphonTransmissions": 1,
    "atkPlusUsesThisStage": 1,
}


def test_every_field_against_every_kind_of_value():
    """A sweep of what the random draws may miss: in FULL_SCENARIO, each value (objects, lists
    and the scenario itself included) replaced by its kind's edge values and by two values of
    each kind in JUNK (drawn with a seed per field), each key of each object removed, and an
    unknown key added to each object."""
    assert not violations(FULL_SCENARIO)
    for path, spec, value in sites(FULL_SCENARIO, SCENARIO):
        rng = random.Random(path_text(path))
        news = [new for kind in JUNK.values() for new in rng.sample(kind, min(2, len(kind)))]
        for new in [*news, *(spec.edges if isinstance(spec, Leaf) else ())]:
            check_outcome(put(FULL_SCENARIO, path, new), f"{path_text(path)} = {new!r}")
        if isinstance(spec, Obj):
            for name in value:
                check_outcome(put(FULL_SCENARIO, path, {k: v for k, v in value.items()
                                                        if k != name}),
                              f"remove {path_text(path + (name,))}")
            check_outcome(put(FULL_SCENARIO, path, {**value, "Row": 1}),
                          f"add {path_text(path)}.Row")


# ---------------------------------------------------------------------------------------------
# Inputs that Python itself cannot print or read (integers over 4300 digits, nesting past the
# recursion limit) and keys with a line break: the fuzz found each of them breaking the
# one-line error. They stay out of the pools, whose checks print the values they draw.


def test_an_integer_too_long_to_print_is_rejected_naming_the_field():
    with pytest.raises(ValueError, match=r"^turn: "):
        scenario.from_dict({"player": {"row": 0, "col": 0}, "turn": 10**5000})


def test_a_scenario_file_with_an_integer_over_4300_digits_exits_3(tmp_path):
    path = tmp_path / "long.json"
    path.write_text('{"player": {"row": 0, "col": 0}, "turn": 1' + "0" * 5000 + "}")
    with pytest.raises(cli.ToolError) as error:
        cli.load_scenario(str(path))
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
    # Python's JSON reader refuses the number itself, before any field is looked at.
    message = str(error.value)
    assert message.startswith(f"{path}: invalid JSON: ") and "4300 digits" in message
    assert "\n" not in message


def test_a_scenario_file_may_start_with_a_byte_order_mark(tmp_path):
    text = '{"player": {"row": 2, "col": 4}}'
    (tmp_path / "plain.json").write_text(text, encoding="utf-8")
    (tmp_path / "marked.json").write_text(text, encoding="utf-8-sig")  # as Windows Notepad saves
    assert (tmp_path / "marked.json").read_bytes().startswith(b"\xef\xbb\xbf")
    assert_states_equal(cli.load_scenario(str(tmp_path / "marked.json")),
                        cli.load_scenario(str(tmp_path / "plain.json")))


@pytest.mark.parametrize("text", ['{"player": {"row": 0, "col": 0, "a\\nb": 1}}',
                                  '{"player": {"row": 0, "col": 0}, "a\\nb": 1, "a\\nb": 2}'])
def test_a_scenario_file_error_is_one_line_whatever_the_key(tmp_path, text):
    path = tmp_path / "key.json"
    path.write_text(text)
    with pytest.raises(cli.ToolError) as error:
        cli.load_scenario(str(path))
    assert len(str(error.value).splitlines()) == 1


def test_a_deeply_nested_value_is_rejected_naming_the_field():
    value = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(ValueError, match=r"^player\.row: "):
        scenario.from_dict({"player": {"row": value, "col": 0}})


def test_a_huge_bad_value_is_shown_in_a_short_message():
    with pytest.raises(ValueError) as error:
        scenario.from_dict({"player": {"row": list(range(10**5)), "col": 0}})
    assert str(error.value).startswith("player.row: expected an integer, got [0, 1, 2")
    assert len(str(error.value)) < 120
