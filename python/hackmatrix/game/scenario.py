"""Scenario API (rules Appendix A): build an exact state, read its hidden values, save it back.

`from_dict` applies A.1/A.2 literally and sets the hidden values of A.3. It is plain Python
building NumPy arrays (never traced), so it can validate thoroughly: every bad input raises a
`ValueError` whose message starts with the path of the offending field, e.g.
``enemies[2].type: unknown enemy type 'dragon'``.

Besides the A.1 fields, a few optional *extension* fields exist so that `to_dict` can save any
reachable state (`play.py`'s `save` command writes mid-game states). When omitted they take
exactly the A.3 values, so scenarios written against Appendix A behave as the rules say:

- ``exitPosition`` {row, col} — default (5,5) (A.2 step 7 places the exit there);
- ``exitCell`` {row, col} — default exitPosition: where the exit cell is, for the one state
  where the two differ (UNDO across a stage change brings back the old board, §7.15);
- ``siphonedCells`` / ``siphonCenterCells`` — lists of {row, col} marking those flags on any cell;
- ``scheduledTaskInterval`` (12), ``nextScheduledTaskTurn`` (12), ``pendingSiphonTransmissions``
  (0), ``stepActive`` (false), ``atkPlusUsesThisStage`` (0);
- ``enemies[].disabledTurns`` (0), ``transmissions[].spawnedFromSiphon`` /
  ``transmissions[].isFromScheduledTask`` (false).

The UNDO history is never saved: a loaded state starts with an empty stack (A.3).
"""

from __future__ import annotations

import numbers
from typing import Any

import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import history
from hackmatrix.game import state as S
from hackmatrix.messages import name_shown, shown

_BLOCK_CONTENT = {"data": C.DATA_BLOCK, "program": C.PROGRAM_BLOCK, "question": C.QUESTION_BLOCK}
_HIDDEN_DEFAULTS = {
    "scheduledTaskInterval": 12,
    "nextScheduledTaskTurn": 12,
    "pendingSiphonTransmissions": 0,
    "atkPlusUsesThisStage": 0,
}
_TOP_LEVEL_FIELDS = {
    "player", "enemies", "transmissions", "blocks", "resources", "ownedPrograms", "stage", "turn",
    "showActivated", "scheduledTasksDisabled",
    # extensions (module docstring)
    "exitPosition", "exitCell", "siphonedCells", "siphonCenterCells", "stepActive",
    *_HIDDEN_DEFAULTS,
}
_PLAYER_FIELDS = {"row", "col", "hp", "credits", "energy", "dataSiphons", "score", "attackDamage"}
_ENEMY_FIELDS = {"type", "row", "col", "hp", "stunned", "spawnedFromSiphon", "isFromScheduledTask",
                 "disabledTurns"}
_TRANSMISSION_FIELDS = {"row", "col", "turnsRemaining", "enemyType", "spawnedFromSiphon",
                        "isFromScheduledTask"}
_BLOCK_FIELDS = {"row", "col", "type", "points", "spawnCount", "siphoned", "program"}
_RESOURCE_FIELDS = {"row", "col", "credits", "energy", "dataSiphon"}
_CELL_FIELDS = {"row", "col"}


def _normalise_program_name(name: str) -> str:
    # "ANTI-V", "anti_v" and "antiv" all name the same program.
    return name.upper().replace("-", "").replace("_", "").replace(" ", "")


_PROGRAM_BY_NAME = {_normalise_program_name(n): k for k, n in enumerate(C.PROGRAM_NAMES)}


def program_from_name(name: str) -> int | None:
    """Program index (0-22) for a program name, case-insensitive ("siph+", "anti_v"), else None."""
    return _PROGRAM_BY_NAME.get(_normalise_program_name(name))


# --------------------------------------------------------------------------------------------
# Validation helpers. Each takes the field path used in error messages.


def _fail(path: str, message: str):
    raise ValueError(f"{path}: {message}")


def _json_shown(value) -> str:
    """A value for a message, spelt as JSON spells null and the booleans (a scenario is
    written as JSON); anything else as `shown` gives it."""
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    return shown(value)


def _json_kind(value) -> str:
    """What a value is, in JSON's words."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return _json_shown(value)
    if isinstance(value, numbers.Number):
        return f"number {shown(value)}"
    if isinstance(value, str):
        return f"string {shown(value)}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _mapping(value, path: str, allowed: set[str]) -> dict:
    if not isinstance(value, dict):
        _fail(path or "scenario", f"expected an object, got {_json_kind(value)}")
    for name in value:
        if name not in allowed:
            _fail(f"{path}.{name_shown(name)}" if path else name_shown(name), "unknown field")
    return value


def _list(value, path: str) -> list:
    if not isinstance(value, (list, tuple)):
        _fail(path, f"expected a list, got {_json_kind(value)}")
    return list(value)


_INT32 = np.iinfo(np.int32)


def _scalar(value):
    """The Python number or boolean a 0-d NumPy or JAX array holds (a value read out of a state,
    such as `state.core.hp`); anything else as it is."""
    if getattr(value, "shape", None) == () and hasattr(value, "dtype"):
        try:
            return np.asarray(value).item()
        except Exception:  # a tracer, inside jit: no value to read
            return value
    return value


def _int(value, path: str) -> int:
    # JSON has one number type: accept integral floats (3.0) but not 3.5, strings or booleans.
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)):
        _fail(path, f"expected an integer, got {_json_kind(value)}")
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        number = int(value)
    else:
        _fail(path, f"expected an integer, got {_json_shown(value)}")
    # The state holds int32: a wider value would fail later with no field named.
    if not _INT32.min <= number <= _INT32.max:
        _fail(path, f"{shown(number)} does not fit in 32 bits ({_INT32.min} to {_INT32.max})")
    return number


def _bool(value, path: str) -> bool:
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    _fail(path, f"expected true or false, got {_json_shown(value)}")


def _get(entry: dict, name: str, path: str, parse, default=None, required=False):
    if name not in entry:
        if required:
            _fail(f"{path}.{name}" if path else name, "missing required field")
        return default
    return parse(entry[name], f"{path}.{name}" if path else name)


def _coordinate(value, path: str) -> int:
    number = _int(value, path)
    if not 0 <= number < C.BOARD_SIZE:
        _fail(path, f"{number} is off the board (0-{C.BOARD_SIZE - 1})")
    return number


def _non_negative(value, path: str) -> int:
    number = _int(value, path)
    if number < 0:
        _fail(path, f"must be >= 0, got {number}")
    return number


def _enemy_type(value, path: str) -> int:
    # A.1: enemy types are case-insensitive.
    if isinstance(value, str) and value.lower() in C.ENEMY_TYPE_NAMES:
        return C.ENEMY_TYPE_NAMES.index(value.lower())
    _fail(path, f"unknown enemy type {_json_shown(value)}")


def _program(value, path: str) -> int:
    """An action index 5-27 or a program name (case-insensitive); returns the program index."""
    value = _scalar(value)
    if isinstance(value, str):
        index = program_from_name(value)
        if index is None:
            _fail(path, f"unknown program {shown(value)}")
        return index
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        _fail(path, f"expected a program name or action index 5-27, got {_json_shown(value)}")
    action = _int(value, path)
    if not C.FIRST_PROGRAM_ACTION <= action < C.NUM_ACTIONS:
        _fail(path, f"program action index must be 5-27, got {action}")
    return action - C.FIRST_PROGRAM_ACTION


def _corner(d: dict, name: str, default: tuple[int, int]) -> tuple[int, int]:
    """A corner cell field: the exit is always on one (§2.6), and stage generation (§12.2)
    relies on it, the player starting the next stage on the old exit's corner."""
    if name not in d:
        return default
    row, col = _position(_mapping(d[name], name, _CELL_FIELDS), name)
    if row not in (0, C.BOARD_SIZE - 1) or col not in (0, C.BOARD_SIZE - 1):
        _fail(name, f"({row}, {col}) is not a corner")
    return row, col


def _position(entry: dict, path: str) -> tuple[int, int]:
    row = _get(entry, "row", path, _coordinate, required=True)
    col = _get(entry, "col", path, _coordinate, required=True)
    return row, col


# --------------------------------------------------------------------------------------------
# from_dict


def from_dict(d: dict, key=None) -> S.GameState:
    """Build the exact state described by a scenario dict (Appendix A.1-A.3).

    `key` is accepted for symmetry with `reset(key)`; setup is deterministic and does not use it.
    Raises ValueError naming the offending field for any malformed input. Host-side Python: not
    for use inside `jit` or `vmap` (stack the states of several scenarios to batch them).
    """
    _mapping(d, "", _TOP_LEVEL_FIELDS)
    size = C.BOARD_SIZE

    # A.2 step 1: empty board.
    content = np.full((size, size), C.EMPTY, np.int32)
    points = np.zeros((size, size), np.int32)
    program = np.full((size, size), C.NO_PROGRAM, np.int32)
    spawn_count = np.zeros((size, size), np.int32)
    credits = np.zeros((size, size), np.int32)
    energy = np.zeros((size, size), np.int32)
    siphoned = np.zeros((size, size), bool)
    siphon_center = np.zeros((size, size), bool)

    # A.2 step 2: player, globals, owned programs.
    if "player" not in d:
        _fail("player", "missing required field")
    player = _mapping(d["player"], "player", _PLAYER_FIELDS)
    player_row, player_col = _position(player, "player")
    hp = _get(player, "hp", "player", _int, default=3)
    if not 0 <= hp <= 3:
        hp = 3  # A.1: a value outside 0-3 is treated as 3
    player_credits = _get(player, "credits", "player", _non_negative, default=0)
    player_energy = _get(player, "energy", "player", _non_negative, default=0)
    data_siphons = _get(player, "dataSiphons", "player", _non_negative, default=0)
    score = _get(player, "score", "player", _non_negative, default=0)
    attack_damage = _get(player, "attackDamage", "player", _int, default=1)
    if attack_damage < 1:
        _fail("player.attackDamage", f"must be >= 1, got {attack_damage}")

    stage = _get(d, "stage", "", _int, default=1)
    if not 1 <= stage <= C.MAX_STAGE:
        _fail("stage", f"must be 1-{C.MAX_STAGE}, got {stage}")
    turn = _get(d, "turn", "", _non_negative, default=0)
    show_activated = _get(d, "showActivated", "", _bool, default=False)
    tasks_disabled = _get(d, "scheduledTasksDisabled", "", _bool, default=False)

    owned = np.zeros((C.NUM_PROGRAMS,), bool)
    for i, value in enumerate(_list(d.get("ownedPrograms", []), "ownedPrograms")):
        owned[_program(value, f"ownedPrograms[{i}]")] = True

    # A.2 step 3: enemies in order.
    enemy_entries = _list(d.get("enemies", []), "enemies")
    if len(enemy_entries) > C.MAX_ENEMIES:
        _fail("enemies", f"{len(enemy_entries)} enemies exceed the capacity of {C.MAX_ENEMIES}")
    enemies = []
    for i, entry in enumerate(enemy_entries):
        path = f"enemies[{i}]"
        _mapping(entry, path, _ENEMY_FIELDS)
        kind = _get(entry, "type", path, _enemy_type, required=True)
        row, col = _position(entry, path)
        enemies.append(dict(
            kind=kind, row=row, col=col,
            hp=_get(entry, "hp", path, _int, required=True),  # verbatim, no clamping
            disabled_turns=_get(entry, "disabledTurns", path, _non_negative, default=0),
            stunned=_get(entry, "stunned", path, _bool, default=False),
            from_siphon=_get(entry, "spawnedFromSiphon", path, _bool, default=False),
            from_scheduled=_get(entry, "isFromScheduledTask", path, _bool, default=False),
        ))

    # A.2 step 4: transmissions in order.
    transmission_entries = _list(d.get("transmissions", []), "transmissions")
    if len(transmission_entries) > C.MAX_TRANSMISSIONS:
        _fail("transmissions", f"{len(transmission_entries)} transmissions exceed the capacity "
                               f"of {C.MAX_TRANSMISSIONS}")
    transmissions = []
    for i, entry in enumerate(transmission_entries):
        path = f"transmissions[{i}]"
        _mapping(entry, path, _TRANSMISSION_FIELDS)
        row, col = _position(entry, path)
        transmissions.append(dict(
            row=row, col=col,
            turns_remaining=_get(entry, "turnsRemaining", path, _int, required=True),
            enemy_type=_get(entry, "enemyType", path, _enemy_type, required=True),
            from_siphon=_get(entry, "spawnedFromSiphon", path, _bool, default=False),
            from_scheduled=_get(entry, "isFromScheduledTask", path, _bool, default=False),
        ))

    # A.2 step 5: blocks in order; a later entry on the same cell replaces the block.
    for i, entry in enumerate(_list(d.get("blocks", []), "blocks")):
        path = f"blocks[{i}]"
        _mapping(entry, path, _BLOCK_FIELDS)
        row, col = _position(entry, path)
        block_type = _get(entry, "type", path, lambda v, p: v, required=True)
        if not isinstance(block_type, str) or block_type not in _BLOCK_CONTENT:
            # exact lower-case names only
            _fail(f"{path}.type", f"unknown block type {shown(block_type)}")
        block_points = _get(entry, "points", path, _non_negative, default=0)
        block_program = _get(entry, "program", path, _program)
        is_siphoned = _get(entry, "siphoned", path, _bool, default=False)
        if block_type == "program" and block_program is None:
            _fail(f"{path}.program", "missing required field for a program block")
        if block_type == "question" and is_siphoned:
            _fail(f"{path}.siphoned", "a question block cannot be on a siphoned cell")
        if block_type == "question" and siphoned[row, col]:
            # The flag from an earlier entry is never cleared (A.2 step 5), so this would put a
            # question block on a siphoned cell, which cannot happen in play (§15.3).
            _fail(path, "a question block cannot be on a cell an earlier entry marked siphoned")

        carries_program = block_type == "program" or (
            block_type == "question" and block_program is not None)
        default_spawn = (int(C.PROGRAM_SPAWN_COST[block_program]) if carries_program
                         else block_points)
        content[row, col] = _BLOCK_CONTENT[block_type]
        points[row, col] = 0 if carries_program else block_points
        program[row, col] = block_program if carries_program else C.NO_PROGRAM
        spawn_count[row, col] = _get(entry, "spawnCount", path, _non_negative,
                                    default=default_spawn)
        siphoned[row, col] |= is_siphoned  # a later siphoned=false never clears the flag

    # A.2 step 6: resources in order.
    for i, entry in enumerate(_list(d.get("resources", []), "resources")):
        path = f"resources[{i}]"
        _mapping(entry, path, _RESOURCE_FIELDS)
        row, col = _position(entry, path)
        entry_credits = _get(entry, "credits", path, _int, default=0)
        entry_energy = _get(entry, "energy", path, _int, default=0)
        if _get(entry, "dataSiphon", path, _bool, default=False):
            _clear_content(row, col, content, points, program, spawn_count)
            content[row, col] = C.DATA_SIPHON
        elif entry_credits > 0:
            credits[row, col], energy[row, col] = entry_credits, 0
        elif entry_energy > 0:
            credits[row, col], energy[row, col] = 0, entry_energy

    # Extension flags (only ever produced by to_dict).
    for name, flags in (("siphonedCells", siphoned), ("siphonCenterCells", siphon_center)):
        for i, entry in enumerate(_list(d.get(name, []), name)):
            path = f"{name}[{i}]"
            _mapping(entry, path, _CELL_FIELDS)
            position = _position(entry, path)
            if name == "siphonedCells" and content[position] == C.QUESTION_BLOCK:
                _fail(path, "a question block cannot be on a siphoned cell")
            flags[position] = True

    # A.2 step 7: the exit replaces any block or pickup on its cell; the resource stays.
    exit_row, exit_col = _corner(d, "exitPosition", (C.BOARD_SIZE - 1, C.BOARD_SIZE - 1))
    exit_cell = _corner(d, "exitCell", (exit_row, exit_col))
    _clear_content(*exit_cell, content, points, program, spawn_count)
    content[exit_cell] = C.EXIT

    # Never below 0 in play (an interval of 0 means no scheduled tasks, §8 step 5).
    hidden = {name: _get(d, name, "", _non_negative, default=default)
              for name, default in _HIDDEN_DEFAULTS.items()}
    step_active = _get(d, "stepActive", "", _bool, default=False)

    def i32(x):
        return jnp.asarray(x, jnp.int32)

    core = S.Core(
        player_row=i32(player_row), player_col=i32(player_col), hp=i32(hp),
        credits=i32(player_credits), energy=i32(player_energy), data_siphons=i32(data_siphons),
        score=i32(score), attack_damage=i32(attack_damage), turn=i32(turn),
        owned=jnp.asarray(owned),
        enemies=_pack(S.empty_enemies(), enemies),
        transmissions=_pack(S.empty_transmissions(), transmissions),
        cells=S.Cells(content=i32(content), points=i32(points), program=i32(program),
                      spawn_count=i32(spawn_count), credits=i32(credits), energy=i32(energy),
                      siphoned=jnp.asarray(siphoned), siphon_center=jnp.asarray(siphon_center)),
        show_activated=jnp.asarray(show_activated),
        scheduled_tasks_disabled=jnp.asarray(tasks_disabled),
        atk_plus_uses=i32(hidden["atkPlusUsesThisStage"]),
    )
    return S.GameState(
        core=core, stage=i32(stage), exit_row=i32(exit_row), exit_col=i32(exit_col),
        step_active=jnp.asarray(step_active),
        pending_siphon_transmissions=i32(hidden["pendingSiphonTransmissions"]),
        scheduled_interval=i32(hidden["scheduledTaskInterval"]),
        next_scheduled_turn=i32(hidden["nextScheduledTaskTurn"]),
        history=history.empty_history(), history_top=i32(-1), history_size=i32(0),
    )


def _clear_content(row, col, content, points, program, spawn_count):
    content[row, col] = C.EMPTY
    points[row, col] = 0
    program[row, col] = C.NO_PROGRAM
    spawn_count[row, col] = 0


def _pack(empty, entries: list[dict]):
    """Write list entries into the prefix slots of an empty fixed-capacity list."""
    fields = {name: np.array(getattr(empty, name)) for name in empty.__dataclass_fields__}
    for slot, entry in enumerate(entries):
        fields["active"][slot] = True
        for name, value in entry.items():
            fields[name][slot] = value
    return empty.replace(**{name: jnp.asarray(value) for name, value in fields.items()})


# --------------------------------------------------------------------------------------------
# inspect / to_dict (unbatched states)


def _enemy_list(state: S.GameState) -> list[dict]:
    enemies = _numpy(state.core.enemies)
    return [
        {
            "row": int(enemies.row[i]), "col": int(enemies.col[i]),
            "type": C.ENEMY_TYPE_NAMES[int(enemies.kind[i])], "hp": int(enemies.hp[i]),
            "disabledTurns": int(enemies.disabled_turns[i]),
            "stunned": bool(enemies.stunned[i]),
            "spawnedFromSiphon": bool(enemies.from_siphon[i]),
            "isFromScheduledTask": bool(enemies.from_scheduled[i]),
        }
        for i in np.flatnonzero(enemies.active)
    ]


def _numpy(tree):
    return tree.replace(**{name: np.asarray(getattr(tree, name))
                           for name in tree.__dataclass_fields__})


def inspect(state: S.GameState) -> dict[str, Any]:
    """The hidden values tests may read (Appendix A.4), under the rules' names."""
    S.check_one_game(state, "inspect", vmappable=False)
    return {
        "scheduledTaskInterval": int(state.scheduled_interval),
        "nextScheduledTaskTurn": int(state.next_scheduled_turn),
        "pendingSiphonTransmissions": int(state.pending_siphon_transmissions),
        "turn": int(state.core.turn),
        "enemies": _enemy_list(state),
    }


def to_dict(state: S.GameState) -> dict[str, Any]:
    """A JSON-compatible scenario dict with `from_dict(to_dict(s))` equal to `s`.

    Everything except the UNDO history is saved; extension fields are written only when they
    differ from their A.3 defaults, so saved scenarios stay readable.
    """
    S.check_one_game(state, "to_dict", vmappable=False)
    core = state.core
    cells = _numpy(core.cells)
    size = C.BOARD_SIZE
    exit_position = (int(state.exit_row), int(state.exit_col))
    (exit_cell,) = [tuple(int(i) for i in cell) for cell in np.argwhere(cells.content == C.EXIT)]

    blocks, resources, siphoned_cells, center_cells = [], [], [], []
    for row in range(size):
        for col in range(size):
            kind = int(cells.content[row, col])
            is_siphoned = bool(cells.siphoned[row, col])
            if kind in (C.DATA_BLOCK, C.PROGRAM_BLOCK, C.QUESTION_BLOCK):
                block = {"row": row, "col": col,
                         "type": {v: k for k, v in _BLOCK_CONTENT.items()}[kind]}
                block_program = int(cells.program[row, col])
                if block_program >= 0 and kind != C.DATA_BLOCK:
                    block["program"] = C.PROGRAM_NAMES[block_program]
                else:
                    block["points"] = int(cells.points[row, col])
                block["spawnCount"] = int(cells.spawn_count[row, col])
                if is_siphoned:
                    block["siphoned"] = True
                blocks.append(block)
            elif is_siphoned:
                siphoned_cells.append({"row": row, "col": col})
            if cells.siphon_center[row, col]:
                center_cells.append({"row": row, "col": col})
            # A resource entry first, then the pickup: a dataSiphon entry ignores credits/energy.
            if cells.credits[row, col] > 0:
                resources.append({"row": row, "col": col, "credits": int(cells.credits[row, col])})
            elif cells.energy[row, col] > 0:
                resources.append({"row": row, "col": col, "energy": int(cells.energy[row, col])})
            if kind == C.DATA_SIPHON:
                resources.append({"row": row, "col": col, "dataSiphon": True})

    owned = np.asarray(core.owned)
    d: dict[str, Any] = {
        "player": {
            "row": int(core.player_row), "col": int(core.player_col), "hp": int(core.hp),
            "credits": int(core.credits), "energy": int(core.energy),
            "dataSiphons": int(core.data_siphons), "score": int(core.score),
            "attackDamage": int(core.attack_damage),
        },
        "enemies": [
            {k: v for k, v in enemy.items() if k != "disabledTurns" or v != 0}
            for enemy in _enemy_list(state)
        ],
        "transmissions": _transmission_list(state),
        "blocks": blocks,
        "resources": resources,
        "ownedPrograms": [C.PROGRAM_NAMES[k] for k in np.flatnonzero(owned)],
        "stage": int(state.stage),
        "turn": int(core.turn),
        "showActivated": bool(core.show_activated),
        "scheduledTasksDisabled": bool(core.scheduled_tasks_disabled),
    }
    extensions = {
        "exitPosition": ({"row": exit_position[0], "col": exit_position[1]}
                         if exit_position != (size - 1, size - 1) else None),
        "exitCell": ({"row": exit_cell[0], "col": exit_cell[1]}
                     if exit_cell != exit_position else None),
        "siphonedCells": siphoned_cells or None,
        "siphonCenterCells": center_cells or None,
        "stepActive": bool(state.step_active) or None,
        "scheduledTaskInterval": int(state.scheduled_interval),
        "nextScheduledTaskTurn": int(state.next_scheduled_turn),
        "pendingSiphonTransmissions": int(state.pending_siphon_transmissions),
        "atkPlusUsesThisStage": int(core.atk_plus_uses),
    }
    for name, value in extensions.items():
        if value is not None and value != _HIDDEN_DEFAULTS.get(name):
            d[name] = value
    return d


def _transmission_list(state: S.GameState) -> list[dict]:
    transmissions = _numpy(state.core.transmissions)
    entries = []
    for i in np.flatnonzero(transmissions.active):
        entry = {
            "row": int(transmissions.row[i]), "col": int(transmissions.col[i]),
            "turnsRemaining": int(transmissions.turns_remaining[i]),
            "enemyType": C.ENEMY_TYPE_NAMES[int(transmissions.enemy_type[i])],
        }
        # Extension flags, written only when set (A.1 creates transmissions with both false).
        if transmissions.from_siphon[i]:
            entry["spawnedFromSiphon"] = True
        if transmissions.from_scheduled[i]:
            entry["isFromScheduledTask"] = True
        entries.append(entry)
    return entries
