"""Text rendering: glyphs for every kind of thing, row 5 on top, the status line, ANSI colour."""

import re

import jax

from hackmatrix import game
from hackmatrix.game import renderer, scenario

ANSI = re.compile(r"\x1b\[[0-9;]*m")

SCENARIO = {
    "player": {"row": 2, "col": 3, "hp": 2, "credits": 12, "energy": 7, "dataSiphons": 1,
               "score": 9, "attackDamage": 2},
    "enemies": [{"type": "virus", "row": 4, "col": 0, "hp": 2, "stunned": True},
                {"type": "daemon", "row": 1, "col": 1, "hp": 3},
                {"type": "glitch", "row": 1, "col": 4, "hp": 1},
                {"type": "cryptog", "row": 2, "col": 0, "hp": 2},    # player's row: visible
                {"type": "cryptog", "row": 0, "col": 5, "hp": 1}],   # hidden from the player
    "transmissions": [{"row": 3, "col": 5, "turnsRemaining": 3, "enemyType": "daemon"}],
    "blocks": [{"row": 4, "col": 2, "type": "data", "points": 7},
               {"row": 3, "col": 2, "type": "data", "points": 4, "siphoned": True},
               {"row": 4, "col": 4, "type": "program", "program": "ANTI-V"},
               {"row": 0, "col": 2, "type": "question", "points": 8},
               {"row": 4, "col": 3, "type": "data", "points": 5}],
    "resources": [{"row": 0, "col": 0, "dataSiphon": True},
                  {"row": 1, "col": 2, "credits": 2},
                  {"row": 1, "col": 3, "energy": 3},
                  {"row": 4, "col": 3, "credits": 1},      # under an unsiphoned block: hidden
                  {"row": 3, "col": 2, "energy": 2}],      # under a siphoned block: shown
    "ownedPrograms": ["WARP", "siph+"],
    "stage": 3, "turn": 14,
}


def board_lines(text):
    return text.splitlines()


def row_lines(text, row):
    """The two text lines (pieces, terrain) of a board row."""
    lines = board_lines(text)
    start = next(i for i, line in enumerate(lines) if line.startswith(f" {row} |"))
    return lines[start], lines[start + 1]


def cell_text(text, row, col):
    pieces, terrain = row_lines(text, row)
    return (pieces.split("|")[col + 1].strip(), terrain.split("|")[col + 1].strip())


def test_glyphs_for_every_kind():
    text = renderer.render(scenario.from_dict(SCENARIO))
    assert cell_text(text, 2, 3) == ("@", "")
    assert cell_text(text, 4, 0) == ("V2~", "")
    assert cell_text(text, 1, 1) == ("D3", "")
    assert cell_text(text, 1, 4) == ("G1", "")
    assert cell_text(text, 2, 0) == ("C2", "")
    assert cell_text(text, 0, 5) == ("c1", "")    # hidden cryptog in lower case
    assert cell_text(text, 3, 5) == ("t3", "")    # transmission: countdown, never the type
    assert cell_text(text, 4, 2) == ("", "D7")
    assert cell_text(text, 3, 2) == ("", "D4* e2")
    assert cell_text(text, 4, 4) == ("", "P:ANTV")
    assert cell_text(text, 0, 2) == ("", "?")      # question content stays hidden
    assert cell_text(text, 4, 3) == ("", "D5")     # resource under the block stays hidden
    assert cell_text(text, 0, 0) == ("", "DS")
    assert cell_text(text, 1, 2) == ("", "$2")
    assert cell_text(text, 1, 3) == ("", "e3")
    assert cell_text(text, 5, 5) == ("", "EXIT")


def test_row_five_is_printed_first():
    lines = board_lines(renderer.render(scenario.from_dict(SCENARIO)))
    row_labels = [line[:3].strip() for line in lines if re.match(r" \d \|", line)]
    assert row_labels == ["5", "4", "3", "2", "1", "0"]


def test_several_pieces_and_siphon_centre_share_a_cell():
    state = scenario.from_dict({
        "player": {"row": 2, "col": 2},
        "enemies": [{"type": "virus", "row": 2, "col": 2, "hp": 1}],
        "transmissions": [{"row": 2, "col": 2, "turnsRemaining": 1, "enemyType": "virus"}],
        "resources": [{"row": 2, "col": 2, "credits": 3}],
        "siphonCenterCells": [{"row": 2, "col": 2}],
    })
    assert cell_text(renderer.render(state), 2, 2) == ("@ V1 t1", "$3 o")


def test_the_player_view_draws_only_what_the_observation_shows():
    # §15.3: per cell the first enemy with hp > 0, none if it is a hidden cryptog, and the
    # first transmission. play.py's human is the player; a watcher of an agent sees it all.
    state = scenario.from_dict({
        "player": {"row": 0, "col": 0},
        "enemies": [{"type": "cryptog", "row": 3, "col": 3, "hp": 1},  # hidden: hides the virus
                    {"type": "virus", "row": 3, "col": 3, "hp": 2},
                    {"type": "daemon", "row": 4, "col": 4, "hp": 0},   # dead: not observed
                    {"type": "glitch", "row": 4, "col": 4, "hp": 2},
                    {"type": "cryptog", "row": 0, "col": 4, "hp": 2}],  # player's row: shown
        "transmissions": [{"row": 2, "col": 5, "turnsRemaining": 2, "enemyType": "virus"},
                          {"row": 2, "col": 5, "turnsRemaining": 1, "enemyType": "virus"}],
    })
    watched, played = renderer.render(state), renderer.render(state, player_view=True)
    cells = [(3, 3), (4, 4), (0, 4), (2, 5)]
    assert [cell_text(watched, *cell)[0] for cell in cells] == ["c1 V2", "D0 G2", "C2", "t2 t1"]
    assert [cell_text(played, *cell)[0] for cell in cells] == ["", "G2", "C2", "t2"]
    assert "hidden from the player" in watched and "hidden from the player" not in played


def test_status_line():
    text = renderer.render(scenario.from_dict(SCENARIO))
    status = text.splitlines()[-1]
    assert status == ("HP 2/3  Credits 12  Energy 7  Siphons 1  Score 9  Stage 3/8  Turn 14  "
                      "ATK 2  Programs: WARP, SIPH+")
    assert "Legend" in text


def test_status_line_shows_active_effects_and_no_programs():
    state = scenario.from_dict({"player": {"row": 0, "col": 0}, "showActivated": True,
                                "scheduledTasksDisabled": True})
    status = renderer.render(state).splitlines()[-1]
    assert status.endswith("Active: SHOW CALM  Programs: -")


def test_colour_on_and_off():
    state = scenario.from_dict(SCENARIO)
    plain = renderer.render(state)
    coloured = renderer.render(state, color=True)
    assert "\x1b[" not in plain
    assert "\x1b[" in coloured
    assert ANSI.sub("", coloured) == plain  # colour never shifts the layout


def test_package_level_render_and_fresh_game():
    state, _ = jax.jit(game.reset)(jax.random.PRNGKey(0))
    text = game.render(state)
    assert "@" in text and "EXIT" in text
    assert len({len(line) for line in board_lines(text) if line.startswith("   +")}) == 1


def test_show_reveals_cryptogs_and_one_turn_marks_show():
    # SHOW makes a cryptog off the player's row and column visible (upper case); an enemy
    # disabled for a single turn is still marked; energy 1 is shown like any other amount.
    state = scenario.from_dict({
        "player": {"row": 0, "col": 0}, "showActivated": True, "stepActive": True,
        "enemies": [{"type": "cryptog", "row": 3, "col": 3, "hp": 2},
                    {"type": "virus", "row": 4, "col": 4, "hp": 1, "disabledTurns": 1}],
        "resources": [{"row": 2, "col": 2, "energy": 1}],
    })
    text = renderer.render(state)
    assert cell_text(text, 3, 3) == ("C2", "")
    assert cell_text(text, 4, 4) == ("V1z", "")
    assert cell_text(text, 2, 2) == ("", "e1")
    assert text.splitlines()[-1] == ("HP 3/3  Credits 0  Energy 0  Siphons 0  Score 0  "
                                     "Stage 1/8  Turn 0  ATK 1  Active: SHOW STEP  Programs: -")
