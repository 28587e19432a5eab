"""The game state as plain Python values, for the tests' independent rule references.

A reference model written against these dicts and lists shares no code with the game: only the
field layout of `GameState` is read here. Cells are indexed [row][col], row 0 the bottom row;
enemies and transmissions are lists in the rules' list order (§2.8).
"""

import jax
import numpy as np

from hackmatrix.game import constants as C


# Facts of the rules, written from the rules text for the references (not the game's constants).
DIRECTIONS = ((1, 0), (-1, 0), (0, -1), (0, 1))  # (d_row, d_col) of up, down, left, right (§1)
MAX_HP = (2, 3, 2, 2)  # by enemy kind: virus, daemon, glitch, cryptog (§9.1)
TYPE_NAMES = ("virus", "daemon", "glitch", "cryptog")  # enemy kinds 0-3 (§9.1)
CORNERS = ((0, 0), (0, 5), (5, 0), (5, 5))  # (row, col) (§1)
STAGE_TABLE = (1, 2, 4, 8, 16, 32, 64, 100)  # §14.1 component 2 and the death penalty


def _item_list(items, fields):
    active = np.asarray(items.active)
    columns = {name: np.asarray(getattr(items, attr)) for name, attr in fields.items()}
    return [{name: column[slot].item() for name, column in columns.items()}
            for slot in np.flatnonzero(active)]


_ENEMY_FIELDS = {"kind": "kind", "row": "row", "col": "col", "hp": "hp",
                 "disabled_turns": "disabled_turns", "stunned": "stunned",
                 "from_siphon": "from_siphon", "from_scheduled": "from_scheduled"}
_TRANSMISSION_FIELDS = {"row": "row", "col": "col", "turns_remaining": "turns_remaining",
                        "enemy_type": "enemy_type", "from_siphon": "from_siphon",
                        "from_scheduled": "from_scheduled"}
_CELL_FIELDS = ("content", "points", "program", "spawn_count", "credits", "energy", "siphoned",
                "siphon_center")


def to_plain(state) -> dict:
    """An unbatched `GameState` as a dict of Python ints, bools and lists (no UNDO buffer; its
    number of snapshots is `history_size`). `cells[name][row][col]`; enemies and transmissions
    hold only their active slots, each a dict; `owned` is a list of program indices in
    program order."""
    state = jax.device_get(state)
    core = state.core
    return {
        "player_row": int(core.player_row), "player_col": int(core.player_col),
        "hp": int(core.hp), "credits": int(core.credits), "energy": int(core.energy),
        "data_siphons": int(core.data_siphons), "score": int(core.score),
        "attack_damage": int(core.attack_damage), "turn": int(core.turn),
        "owned": [int(p) for p in np.flatnonzero(np.asarray(core.owned))],
        "enemies": _item_list(core.enemies, _ENEMY_FIELDS),
        "transmissions": _item_list(core.transmissions, _TRANSMISSION_FIELDS),
        "cells": {name: np.asarray(getattr(core.cells, name)).tolist() for name in _CELL_FIELDS},
        "show_activated": bool(core.show_activated),
        "scheduled_tasks_disabled": bool(core.scheduled_tasks_disabled),
        "atk_plus_uses": int(core.atk_plus_uses),
        "stage": int(state.stage), "exit_row": int(state.exit_row),
        "exit_col": int(state.exit_col), "step_active": bool(state.step_active),
        "pending_siphon_transmissions": int(state.pending_siphon_transmissions),
        "scheduled_interval": int(state.scheduled_interval),
        "next_scheduled_turn": int(state.next_scheduled_turn),
        "history_size": int(state.history_size),
    }


def unbatch(tree, index):
    """Row `index` of a batched pytree (e.g. one env of a vmapped batch of states)."""
    return jax.tree_util.tree_map(lambda x: x[index], tree)


def is_block(content) -> bool:
    return C.DATA_BLOCK <= content <= C.QUESTION_BLOCK


def block_at(s: dict, row: int, col: int) -> bool:
    """Whether cell (row, col) of the plain state `s` holds a block."""
    return is_block(s["cells"]["content"][row][col])


def assert_covered(seen, minimums: dict, what: str) -> None:
    """Each name of `minimums` was seen at least that many times (`seen` maps names to counts):
    a random reference test proves nothing about a case it never drew."""
    short = {name: (seen[name], least) for name, least in minimums.items() if seen[name] < least}
    assert not short, f"too few {what} (seen, minimum): {short}; all: {dict(seen)}"


def state_diff(expected, actual) -> list[str]:
    """Readable differences between two plain states (cells listed per differing cell)."""
    diffs = []
    for name in sorted(set(expected) | set(actual)):
        if name == "cells":
            for field, grid in expected["cells"].items():
                diffs += [f"cells.{field}[{r}][{c}]: reference {grid[r][c]}, game "
                          f"{actual['cells'][field][r][c]}"
                          for r in range(6) for c in range(6)
                          if grid[r][c] != actual["cells"][field][r][c]]
        elif expected.get(name) != actual.get(name):
            diffs.append(f"{name}: reference {expected.get(name)}, game {actual.get(name)}")
    return diffs
