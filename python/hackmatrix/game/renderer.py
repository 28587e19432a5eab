"""Text rendering of one (unbatched) game state, for terminal play and viewers.

The board is printed with row 5 at the top, since row 0 is the bottom row (§1). Each cell shows two
lines: the pieces standing on it (player, enemies, transmissions) and the cell itself (block, exit,
data-siphon pickup, resource, siphon centre). The rendering shows what the player can see (§15.4):
question blocks are '?', resources under unsiphoned blocks and transmission types are not shown.
By default, for a human watching an agent, every piece on a cell is drawn, and a cryptog hidden
from the player in lower case so the watcher can still follow it. `player_view=True` draws a
cell's pieces as the observation has them (§15.3), for a human who is the player: the first
enemy with hp > 0 unless it is a hidden cryptog, and the first transmission.
"""

from __future__ import annotations

import jax
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import state as S

CELL_WIDTH = 9

# Four-letter program labels so that "P:NAME*$3" fits in a cell.
PROGRAM_LABELS = (
    "PUSH", "PULL", "CRSH", "WARP", "POLY", "WAIT", "DBUG", "ROW", "COL", "UNDO", "STEP", "SIP+",
    "EXCH", "SHOW", "RSET", "CALM", "DBOM", "DLAY", "ANTV", "SCOR", "REDC", "ATK+", "HACK",
)
ENEMY_LETTERS = "VDGC"  # virus, daemon, glitch, cryptog (§9.1)

_ANSI = {
    "player": "\x1b[1;32m", "enemy": "\x1b[1;31m", "hidden": "\x1b[2;35m",
    "transmission": "\x1b[33m", "data": "\x1b[36m", "program": "\x1b[34m",
    "question": "\x1b[35m", "exit": "\x1b[1;42;30m", "pickup": "\x1b[1;36m",
    "credits": "\x1b[93m", "energy": "\x1b[96m", "center": "\x1b[2m", "label": "\x1b[2m",
}
_RESET = "\x1b[0m"

LEGEND = (
    "Legend: @ player   V/D/G/C<hp> virus/daemon/glitch/cryptog (~ stunned, z disabled,\n"
    "        c = cryptog hidden from the player)   t<n> transmission hatching in n turns\n"
    "        D<p> data block with p points   P:<prog> program block   ? question block\n"
    "        * siphoned   EXIT   DS data-siphon pickup   $<n> credits   e<n> energy\n"
    "        o siphon centre"
)
PLAYER_LEGEND = LEGEND.replace(",\n        c = cryptog hidden from the player)", ")\n     ")


def _paint(tokens, color: bool) -> str:
    """Join (text, style) tokens into a cell of CELL_WIDTH visible characters.

    Tokens are space-separated while there is room, run together when only that fits, and
    dropped (with a trailing '+') when even that does not.
    """
    text, shown = "", 0
    for token, style in tokens:
        separator = " " if shown and shown + 1 + len(token) <= CELL_WIDTH else ""
        if shown + len(separator) + len(token) > CELL_WIDTH:
            if shown < CELL_WIDTH:
                text, shown = text + "+", shown + 1
            break
        text += separator + (f"{_ANSI[style]}{token}{_RESET}" if color else token)
        shown += len(separator) + len(token)
    return text + " " * (CELL_WIDTH - shown)


def _pieces(state, row, col, player_view: bool):
    """Tokens for what stands on a cell: player, then enemies and transmissions in list order
    (with `player_view`, only those the observation shows)."""
    core = state.core
    tokens = []
    if (core.player_row, core.player_col) == (row, col):
        tokens.append(("@", "player"))
    enemies = core.enemies
    here = enemies.active & (enemies.row == row) & (enemies.col == col)
    on_cell = (np.flatnonzero(here & (enemies.hp > 0))[:1] if player_view
               else np.flatnonzero(here))
    for i in on_cell:
        text, hidden = enemy_token(core, i)
        if not (hidden and player_view):
            tokens.append((text, "hidden" if hidden else "enemy"))
    transmissions = core.transmissions
    on_cell = np.flatnonzero(
        transmissions.active & (transmissions.row == row) & (transmissions.col == col))
    for i in on_cell[:1] if player_view else on_cell:
        tokens.append((f"t{int(transmissions.turns_remaining[i])}", "transmission"))
    return tokens


def enemy_token(core, slot) -> tuple[str, bool]:
    """(an enemy's text: type letter, hp, "~" stunned, "z" disabled, e.g. "V2~"; whether the player
    cannot see it). A cryptog off the player's row and column without SHOW is hidden (§15) and
    written with a lower-case letter, so a watcher can follow it without mistaking it for
    something the agent observes."""
    enemies = core.enemies
    kind = int(enemies.kind[slot])
    hidden = kind == C.CRYPTOG and not (
        int(enemies.row[slot]) == int(core.player_row)
        or int(enemies.col[slot]) == int(core.player_col) or bool(core.show_activated))
    letter = ENEMY_LETTERS[kind].lower() if hidden else ENEMY_LETTERS[kind]
    marks = ("~" if enemies.stunned[slot] else "") + ("z" if enemies.disabled_turns[slot] > 0 else "")
    return f"{letter}{int(enemies.hp[slot])}{marks}", hidden


def _terrain(state, row, col):
    """Tokens for the cell itself: content, then the visible resource, then the siphon centre."""
    cells = state.core.cells
    content = int(cells.content[row, col])
    siphoned = "*" if cells.siphoned[row, col] else ""
    is_block = C.is_block(content)
    tokens = []
    if content == C.DATA_BLOCK:
        tokens.append((f"D{int(cells.points[row, col])}{siphoned}", "data"))
    elif content == C.PROGRAM_BLOCK:
        tokens.append((f"P:{PROGRAM_LABELS[int(cells.program[row, col])]}{siphoned}", "program"))
    elif content == C.QUESTION_BLOCK:
        tokens.append(("?", "question"))
    elif content == C.EXIT:
        tokens.append(("EXIT", "exit"))
    elif content == C.DATA_SIPHON:
        tokens.append(("DS", "pickup"))
    # Resources under an unsiphoned block are hidden from the player (§15.3).
    if not is_block or cells.siphoned[row, col]:
        if cells.credits[row, col] > 0:
            tokens.append((f"${int(cells.credits[row, col])}", "credits"))
        elif cells.energy[row, col] > 0:
            tokens.append((f"e{int(cells.energy[row, col])}", "energy"))
    if cells.siphon_center[row, col]:
        tokens.append(("o", "center"))
    return tokens


def status_line(state: S.GameState) -> str:
    """Player counters, stage, turn and owned programs in one line."""
    state = jax.tree_util.tree_map(np.asarray, state)
    core = state.core
    owned = [C.PROGRAM_NAMES[k] for k in np.flatnonzero(core.owned)]
    flags = [name for name, on in (("SHOW", core.show_activated),
                                   ("CALM", core.scheduled_tasks_disabled),
                                   ("STEP", state.step_active)) if on]
    return (f"HP {int(core.hp)}/3  Credits {int(core.credits)}  Energy {int(core.energy)}  "
            f"Siphons {int(core.data_siphons)}  Score {int(core.score)}  "
            f"Stage {int(state.stage)}/{C.MAX_STAGE}  Turn {int(core.turn)}  "
            f"ATK {int(core.attack_damage)}"
            + (f"  Active: {' '.join(flags)}" if flags else "")
            + f"  Programs: {', '.join(owned) if owned else '-'}")


def render(state: S.GameState, color: bool = False, player_view: bool = False) -> str:
    """The board (row 5 on top), a legend and the status line, as one string; `player_view`
    draws only the pieces the player observes (module docstring)."""
    S.check_one_game(state, "render", vmappable=False)
    state = jax.tree_util.tree_map(np.asarray, state)
    size = C.BOARD_SIZE
    separator = "   +" + "+".join("-" * CELL_WIDTH for _ in range(size)) + "+"
    header = "    " + " ".join(f"{col:^{CELL_WIDTH}}" for col in range(size))
    lines = [header, separator]
    for row in reversed(range(size)):
        pieces = [_paint(_pieces(state, row, col, player_view), color) for col in range(size)]
        terrain = [_paint(_terrain(state, row, col), color) for col in range(size)]
        lines.append(f" {row} |" + "|".join(pieces) + "|")
        lines.append("   |" + "|".join(terrain) + "|")
        lines.append(separator)
    lines.append(header)
    lines.append(PLAYER_LEGEND if player_view else LEGEND)
    lines.append(status_line(state))
    return "\n".join(lines)
