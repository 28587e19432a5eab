"""GIF frames: the same glyph meanings as the text renderer, and a legend for every glyph drawn."""

import re

import pytest
from PIL import Image, ImageDraw

from hackmatrix.game import constants as C
from hackmatrix.game import renderer, scenario
from hackmatrix.tools import gif

# Every kind of glyph on one board: the four enemy kinds, stunned and disabled, a hidden cryptog,
# two enemies on one cell, a transmission, the three block kinds (one siphoned), the exit, a
# pickup, credits and energy (also under a siphoned block), a siphon centre.
EVERYTHING = {
    "player": {"row": 2, "col": 3, "hp": 2},
    "enemies": [{"type": "virus", "row": 4, "col": 0, "hp": 2, "stunned": True},
                {"type": "daemon", "row": 1, "col": 1, "hp": 3, "disabledTurns": 2},
                {"type": "glitch", "row": 1, "col": 4, "hp": 1},
                {"type": "cryptog", "row": 2, "col": 0, "hp": 2},     # player's row: visible
                {"type": "cryptog", "row": 0, "col": 5, "hp": 1},     # hidden from the player
                {"type": "virus", "row": 5, "col": 0, "hp": 1},
                {"type": "glitch", "row": 5, "col": 0, "hp": 2}],     # two on one cell
    "transmissions": [{"row": 3, "col": 5, "turnsRemaining": 3, "enemyType": "daemon"}],
    "blocks": [{"row": 4, "col": 2, "type": "data", "points": 7, "spawnCount": 2},
               {"row": 3, "col": 2, "type": "data", "points": 4, "siphoned": True},
               {"row": 4, "col": 4, "type": "program", "program": "ANTI-V"},
               {"row": 0, "col": 2, "type": "question", "points": 8}],
    "resources": [{"row": 0, "col": 0, "dataSiphon": True},
                  {"row": 1, "col": 2, "credits": 2},
                  {"row": 1, "col": 3, "energy": 3},
                  {"row": 3, "col": 2, "energy": 2}],
    "siphonCenterCells": [{"row": 3, "col": 3}],
}

# What each drawn glyph is called in the legend. A glyph drawn that matches none of these is a
# new glyph the legend must learn; a name missing from the legend is an unexplained glyph. The
# groups capture the marks a glyph can carry (stunned, disabled, siphoned), legend entries too.
LEGEND_NAME_OF_GLYPH = {
    r"@": "@",
    r"[VDGC]\d+(~?)(z?)": "V/D/G/C<hp>",
    r"c\d+": "c<hp>",
    r"x\d+": "x<n>",
    r"t\d+": "t<n>",
    r"D\d+(\*?)": "D<p>",
    r"P:[A-Z+-]+(\*?)": "P:<prog>",
    r"\?": "?",
    r"s\d+": "s<n>",
    r"EXIT": "EXIT",
    r"DS": "DS",
    r"\$\d+": "$<n>",
    r"e\d+": "e<n>",
    r"o": "o",
}


@pytest.fixture(scope="module")
def board_glyphs():
    """{(row, col): [texts drawn in that cell]} for a frame of EVERYTHING."""
    drawn = []
    original_text = ImageDraw.ImageDraw.text

    def record(self, xy, text, *args, **kwargs):
        drawn.append((xy, text))
        return original_text(self, xy, text, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ImageDraw.ImageDraw, "text", record)
        gif.render_frame(scenario.from_dict(EVERYTHING), "status", "label")
    glyphs = {}
    board_top = gif.MARGIN + gif.STATUS_HEIGHT
    for (x, y), text in drawn:
        col, row_from_top = int((x - gif.MARGIN) // gif.CELL), int((y - board_top) // gif.CELL)
        if 0 <= col < C.BOARD_SIZE and 0 <= row_from_top < C.BOARD_SIZE:
            glyphs.setdefault((C.BOARD_SIZE - 1 - row_from_top, col), []).append(text)
    return glyphs


def test_every_glyph_drawn_is_in_the_legend(board_glyphs):
    explained = set()
    for texts in board_glyphs.values():
        for text in texts:
            matches = [(re.fullmatch(pattern, text), name)
                       for pattern, name in LEGEND_NAME_OF_GLYPH.items()]
            match, name = next(((m, name) for m, name in matches if m), (None, None))
            assert match is not None, f"glyph {text!r} is not in the test's table"
            explained.add(name)
            explained.update(mark for mark in match.groups() if mark)
    # This board shows every glyph, and the legend names each one, and nothing else.
    assert explained == {entry.split(" ", 1)[0] for entry in gif.LEGEND_ENTRIES}


def test_legend_lines_fit_the_frame():
    font = gif._FONTS[11]
    assert len(gif.LEGEND_LINES) >= 2
    assert all(font.getlength(line) <= gif.WIDTH - 2 * gif.MARGIN for line in gif.LEGEND_LINES)
    assert "   ".join(gif.LEGEND_LINES) == "   ".join(gif.LEGEND_ENTRIES)


def test_glyphs_mean_what_they_mean_in_the_text_renderer(board_glyphs):
    """Cell by cell, the GIF draws the text renderer's tokens, plus only its own two glyphs
    (spawn count, enemy count) and minus the enemies hidden behind the first on a cell."""
    text = renderer.render(scenario.from_dict(EVERYTHING))
    lines = text.splitlines()
    for row in range(C.BOARD_SIZE):
        start = next(i for i, line in enumerate(lines) if line.startswith(f" {row} |"))
        pieces, terrain = lines[start].split("|")[1:-1], lines[start + 1].split("|")[1:-1]
        for col in range(C.BOARD_SIZE):
            text_tokens = (pieces[col] + " " + terrain[col]).split()
            gif_tokens = [token for token in board_glyphs.get((row, col), [])
                          if not re.fullmatch(r"[sx]\d+", token)]
            if (row, col) == (5, 0):  # two enemies: the GIF draws the first and a count
                assert text_tokens == ["V1", "G2"] and gif_tokens == ["V1"]
                assert "x2" in board_glyphs[row, col]
            else:
                assert sorted(gif_tokens) == sorted(text_tokens), (row, col)



def test_frames_are_kept_as_the_palette_images_the_gif_stores(tmp_path):
    # A third of an RGB frame's memory; the GIF holds exactly these pixels.
    frame = gif.render_frame(scenario.from_dict(EVERYTHING), "status", "label")
    assert frame.mode == "P" and frame.size == (gif.WIDTH, gif.HEIGHT)
    gif.write_gif([frame], tmp_path / "one.gif", frame_seconds=0.3)
    with Image.open(tmp_path / "one.gif") as written:
        assert written.convert("RGB").tobytes() == frame.convert("RGB").tobytes()


def test_status_line_and_frame_duration(tmp_path):
    state = scenario.from_dict({"player": {"row": 0, "col": 0, "hp": 2, "credits": 5,
                                           "energy": 4, "dataSiphons": 1, "score": 9,
                                           "attackDamage": 2}, "stage": 3})
    assert gif.status_line(state, 2, 7) == (
        "ep 2  step 7  stage 3  hp 2  cr 5  en 4  siph 1  atk 2  score 9")
    frames = [gif.render_frame(state, gif.status_line(state, 1, step), "label")
              for step in (0, 1)]
    gif.write_gif(frames, tmp_path / "two.gif", frame_seconds=0.45)
    with Image.open(tmp_path / "two.gif") as written:
        assert written.n_frames == 2 and written.info["duration"] == 450
