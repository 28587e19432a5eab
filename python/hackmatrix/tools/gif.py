"""Animated GIFs of episodes, drawn with Pillow from the full game state.

Layout of a frame (top to bottom): a status line (episode, step, stage, hp, credits, energy,
data siphons, attack, score), the 6x6 board with row 0 at the bottom, a label naming the action
that led to this frame and its reward, and a legend of every glyph drawn.

Glyphs mean what they mean in the text renderer (game/renderer.py): "@" the player (its ring
colour is the hp), V/D/G/C<hp> enemies with "~" stunned and "z" disabled, a lower-case "c" for a
cryptog hidden from the player, "t<n>" a transmission, "D<p>" and "P:<prog>" blocks with "*" once
siphoned, "?" a question block, "EXIT", "DS" a data-siphon pickup, "$<n>" credits, "e<n>" energy,
"o" the siphon centre. Pictures add what text cannot: colours, a hollow disc for the hidden
cryptog, darker siphoned blocks, and two glyphs of their own: "s<n>" a block's spawn count and
"x<n>" the number of enemies on a cell (only the first is drawn).

Frame rule: every episode contributes its initial state plus one frame per step taken, so a GIF
of episodes with lengths L1..Ln has sum(Li + 1) frames. The status line carries the episode and
step numbers, so no two consecutive frames are identical and Pillow never merges them.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from hackmatrix.game import constants as C
from hackmatrix.game import renderer
from hackmatrix.training.atomic_files import atomic_write

CELL = 76
MARGIN = 12
STATUS_HEIGHT = 30
LABEL_LINE_HEIGHT = 22
LEGEND_LINE_HEIGHT = 14
BOARD_PIXELS = C.BOARD_SIZE * CELL
WIDTH = BOARD_PIXELS + 2 * MARGIN

BACKGROUND = (24, 26, 33)
GRID_LINE = (70, 74, 88)
FLOOR = (40, 43, 54)
TEXT = (230, 232, 240)
DIM_TEXT = (150, 155, 170)
BLOCK = (120, 126, 140)
SIPHONED_BLOCK = (70, 72, 80)
EXIT = (46, 150, 80)
DATA_SIPHON = (30, 130, 140)
PLAYER = (60, 120, 230)
TRANSMISSION = (235, 200, 50)
CREDITS = (240, 210, 90)
ENERGY = (120, 200, 255)
ENEMY_COLOURS = ((220, 60, 60), (240, 140, 40), (210, 70, 210), (150, 90, 230))
HP_COLOURS = {3: (90, 220, 110), 2: (240, 200, 60), 1: (240, 80, 60), 0: (110, 110, 110)}

# One entry per glyph drawn; tests/tools check that every glyph a frame shows is listed here.
LEGEND_ENTRIES = (
    "@ you (ring = hp: green 3, yellow 2, red 1, grey 0)",
    "V/D/G/C<hp> virus/daemon/glitch/cryptog",
    "~ stunned",
    "z disabled",
    "c<hp> cryptog hidden from you (hollow)",
    "x<n> n enemies on the cell",
    "t<n> transmission hatching in n turns",
    "D<p> data block, p points",
    "P:<prog> program block",
    "? question block",
    "s<n> spawn count",
    "* siphoned (darker)",
    "EXIT the exit",
    "DS data-siphon pickup",
    "$<n> credits",
    "e<n> energy",
    "o siphon centre",
)


def _font(size: int) -> ImageFont.ImageFont:
    # Pillow's bundled scalable font: identical on every machine, no system fonts needed.
    return ImageFont.load_default(size=size)


_FONTS = {size: _font(size) for size in (11, 13, 15, 22)}


def _wrap(entries, font, width: int) -> list[str]:
    """The entries packed into lines no wider than `width` pixels, never splitting an entry."""
    lines = []
    for entry in entries:
        joined = f"{lines[-1]}   {entry}" if lines else entry
        if lines and font.getlength(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(entry)
    return lines


LEGEND_LINES = _wrap(LEGEND_ENTRIES, _FONTS[11], WIDTH - 2 * MARGIN)
LABEL_HEIGHT = LABEL_LINE_HEIGHT + LEGEND_LINE_HEIGHT * len(LEGEND_LINES) + 6
HEIGHT = STATUS_HEIGHT + BOARD_PIXELS + LABEL_HEIGHT + 2 * MARGIN


def _cell_box(row: int, col: int) -> tuple[int, int, int, int]:
    """Pixel box of a cell; row 0 is drawn at the bottom (rules §1)."""
    left = MARGIN + col * CELL
    top = MARGIN + STATUS_HEIGHT + (C.BOARD_SIZE - 1 - row) * CELL
    return left, top, left + CELL, top + CELL


def _centred(draw, box, text, font, fill, dy=0):
    left, top, right, bottom = box
    draw.text(((left + right) / 2, (top + bottom) / 2 + dy), text, font=font, fill=fill,
              anchor="mm")


def _draw_cell(draw, state, row, col):
    cells = state.core.cells
    box = _cell_box(row, col)
    left, top, right, bottom = box
    content = int(cells.content[row, col])
    siphoned = bool(cells.siphoned[row, col])
    is_block = C.is_block(content)
    fill = FLOOR
    if is_block:
        fill = SIPHONED_BLOCK if siphoned else BLOCK
    elif content == C.EXIT:
        fill = EXIT
    elif content == C.DATA_SIPHON:
        fill = DATA_SIPHON
    draw.rectangle(box, fill=fill, outline=GRID_LINE, width=1)

    small, medium = _FONTS[11], _FONTS[13]
    siphoned_mark = "*" if siphoned else ""
    if content == C.DATA_BLOCK:
        _centred(draw, box, f"D{int(cells.points[row, col])}{siphoned_mark}", medium, TEXT,
                 dy=-24)
    elif content == C.PROGRAM_BLOCK:
        label = renderer.PROGRAM_LABELS[int(cells.program[row, col])]
        _centred(draw, box, f"P:{label}{siphoned_mark}", medium, TEXT, dy=-24)
    elif content == C.QUESTION_BLOCK:
        _centred(draw, box, "?", _FONTS[15], TEXT, dy=-24)
    elif content == C.EXIT:
        _centred(draw, box, "EXIT", small, TEXT, dy=-26)
    elif content == C.DATA_SIPHON:
        _centred(draw, box, "DS", medium, TEXT, dy=-24)
    if content in (C.DATA_BLOCK, C.PROGRAM_BLOCK):
        draw.text(((left + right) / 2, bottom - 4), f"s{int(cells.spawn_count[row, col])}",
                  font=small, fill=DIM_TEXT, anchor="md")

    # Like the text renderer, show what the player can see: resources under an unsiphoned
    # block are hidden (§15.3).
    if siphoned or not is_block:
        credits, energy = int(cells.credits[row, col]), int(cells.energy[row, col])
        if credits > 0:
            draw.text((left + 4, bottom - 4), f"${credits}", font=small, fill=CREDITS,
                      anchor="ld")
        if energy > 0:
            draw.text((right - 4, bottom - 4), f"e{energy}", font=small, fill=ENERGY, anchor="rd")
    if bool(cells.siphon_center[row, col]):
        draw.text((right - 4, top + 4), "o", font=medium, fill=TEXT, anchor="ra")


def _draw_pieces(draw, state):
    core = state.core
    # Transmissions: a badge in the top-right corner, so an enemy on the same cell stays visible.
    tx = core.transmissions
    for slot in np.flatnonzero(tx.active):
        left, top, right, _ = _cell_box(int(tx.row[slot]), int(tx.col[slot]))
        draw.rounded_rectangle((right - 34, top + 18, right - 4, top + 36), radius=4,
                               fill=TRANSMISSION)
        draw.text((right - 19, top + 27), f"t{int(tx.turns_remaining[slot])}", font=_FONTS[11],
                  fill=(30, 30, 30), anchor="mm")

    # Enemies: the first one in list order on a cell is drawn large, later ones as a count.
    enemies = core.enemies
    drawn_cells: dict[tuple[int, int], int] = {}
    for slot in np.flatnonzero(enemies.active):
        cell = (int(enemies.row[slot]), int(enemies.col[slot]))
        drawn_cells[cell] = drawn_cells.get(cell, 0) + 1
        if drawn_cells[cell] > 1:
            continue
        kind = int(enemies.kind[slot])
        box = _cell_box(*cell)
        left, top, right, bottom = box
        cx, cy = (left + right) / 2, (top + bottom) / 2 + 6
        text, hidden = renderer.enemy_token(core, slot)  # a hidden cryptog is drawn hollow
        draw.ellipse((cx - 17, cy - 17, cx + 17, cy + 17),
                     fill=None if hidden else ENEMY_COLOURS[kind], outline=ENEMY_COLOURS[kind],
                     width=2)
        draw.text((cx, cy), text, font=_FONTS[13], fill=TEXT, anchor="mm")
    for (row, col), count in drawn_cells.items():
        if count > 1:
            left, top, _, _ = _cell_box(row, col)
            draw.text((left + 4, top + 18), f"x{count}", font=_FONTS[11], fill=TEXT)

    # The player last, on top of everything it shares a cell with.
    box = _cell_box(int(core.player_row), int(core.player_col))
    left, top, right, bottom = box
    cx, cy = (left + right) / 2, (top + bottom) / 2 + 6
    hp_colour = HP_COLOURS.get(int(np.clip(core.hp, 0, 3)))
    draw.ellipse((cx - 20, cy - 20, cx + 20, cy + 20), fill=PLAYER, outline=hp_colour, width=4)
    draw.text((cx, cy), "@", font=_FONTS[22], fill=TEXT, anchor="mm")


def status_line(state, episode: int, step: int) -> str:
    core = state.core
    return (f"ep {episode}  step {step}  stage {int(state.stage)}  hp {int(core.hp)}  "
            f"cr {int(core.credits)}  en {int(core.energy)}  siph {int(core.data_siphons)}  "
            f"atk {int(core.attack_damage)}  score {int(core.score)}")


def render_frame(state, status: str, action_label: str) -> Image.Image:
    """One frame of a (host or device) GameState, drawn in RGB and kept as the palette image
    the GIF writer would convert it to: the same file, a third of the memory (a long recording
    held ~1.6 MB per RGB frame)."""
    state = jax.device_get(state)
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((MARGIN, MARGIN + STATUS_HEIGHT / 2 - 4), status, font=_FONTS[15], fill=TEXT,
              anchor="lm")
    for row in range(C.BOARD_SIZE):
        for col in range(C.BOARD_SIZE):
            _draw_cell(draw, state, row, col)
    _draw_pieces(draw, state)
    label_top = MARGIN + STATUS_HEIGHT + BOARD_PIXELS + 6
    draw.text((MARGIN, label_top), action_label, font=_FONTS[15], fill=TEXT)
    for index, line in enumerate(LEGEND_LINES):
        draw.text((MARGIN, label_top + LABEL_LINE_HEIGHT + index * LEGEND_LINE_HEIGHT), line,
                  font=_FONTS[11], fill=DIM_TEXT)
    return image.convert("P", palette=Image.Palette.ADAPTIVE)


def write_gif(frames: list[Image.Image], path: str | pathlib.Path, frame_seconds: float) -> None:
    """Writes the frames as a looping GIF, whatever the file's extension; every frame lasts
    `frame_seconds` (at least 20 ms, the shortest delay browsers honour). The file appears
    complete or not at all (a temp file renamed over `path`)."""
    if not frames:
        raise ValueError("no frames to write")
    duration_ms = max(20, int(round(frame_seconds * 1000)))
    atomic_write(pathlib.Path(path), lambda file: frames[0].save(
        file, format="GIF", save_all=True, append_images=frames[1:], duration=duration_ms,
        loop=0, optimize=False))
