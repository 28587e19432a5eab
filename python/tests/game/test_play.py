"""scripts/play.py: a scripted stdin session, game over, and malformed scenario files."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

PLAY = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "play.py"


def play(*args, stdin="", timeout=300):
    return subprocess.run([sys.executable, str(PLAY), *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def run_play(tmp_path, scenario, stdin="", extra=()):
    path = tmp_path / "scenario.json"
    path.write_text(scenario if isinstance(scenario, str) else json.dumps(scenario))
    return play("--scenario", str(path), *extra, stdin=stdin)


def test_scripted_session(tmp_path):
    scenario = {"player": {"row": 3, "col": 3, "credits": 5}, "ownedPrograms": ["SIPH+"]}
    result = run_play(tmp_path, scenario,
                      "bogus\n\n--5\n²\nhelp\nwarp\nx\nsiph+\nw\nx\n99\nq\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "\x1b[" not in out  # no colour when stdout is not a terminal
    assert out.count("Valid actions: 0 up, 1 down, 2 left, 3 right, 16 SIPH+") == 1
    assert "Unknown command 'bogus'" in out and "; help lists them" in out
    assert out.count("Commands:\n  w a s d") == 1 and "  save FILE.json" in out  # help
    assert "Unknown command ''" not in out                         # an empty line is skipped
    assert "Unknown command '--5'" in out and "Unknown command '²'" in out  # not numbers
    assert "WARP is not valid now: you do not own it" in out
    assert "siphon is not valid now: you have no data siphons" in out
    assert "Reward -0.2600 (step_penalty -0.0100, resourceGain -0.2500)" in out   # SIPH+
    assert "Valid actions: 0 up, 1 down, 2 left, 3 right, 4 siphon" in out
    assert "Reward +0.0400 (step_penalty -0.0100, distance +0.0500)" in out       # w = up
    assert "Reward -0.0100 (step_penalty -0.0100)" in out                         # siphon
    assert "No action 99: action numbers are 0-27" in out
    boards = out.split("Valid actions")
    last_board = boards[-2]
    assert " 4 |         |         |         |@        |" in last_board  # moved to row 4
    assert "Siphons 0" in last_board and "Turn 2" in last_board


def test_refusals_say_why(tmp_path):
    scenario = {"player": {"row": 0, "col": 0, "credits": 3, "energy": 1},
                "blocks": [{"row": 1, "col": 0, "type": "data", "points": 1}],
                "ownedPrograms": ["SIPH+", "WARP", "ROW", "EXCH"]}
    result = run_play(tmp_path, scenario, "siph+\nwarp\nrow\nexch\nw\na\n-3\nq\n")
    assert result.returncode == 0, result.stderr
    refusals = [line.removeprefix("> ") for line in result.stdout.splitlines()
                if line.startswith("> ") and line != "> "]
    assert refusals == [
        "SIPH+ is not valid now: it costs 5 credits, you have 3",
        "WARP is not valid now: it costs 2 energy, you have 1; there is no enemy or transmission",
        "ROW is not valid now: no enemy is in your row",
        "EXCH is not valid now: it costs 4 credits, you have 3",
        "up is not valid now: a block is in the way",
        "left is not valid now: the board ends there",
        "No action -3: action numbers are 0-27",
    ]


def test_a_player_with_no_valid_action_is_told_so(tmp_path):
    walled_in = {"player": {"row": 0, "col": 0, "energy": 0},
                 "blocks": [{"row": 1, "col": 0, "type": "data", "points": 1},
                            {"row": 0, "col": 1, "type": "data", "points": 1}],
                 "ownedPrograms": ["WAIT"]}
    result = run_play(tmp_path, walled_in, "w\n")
    assert result.returncode == 0, result.stderr
    # The last words, with no prompt for an action that cannot be taken.
    assert result.stdout.endswith(
        "Valid actions: none\nNo action is valid: no direction is open, there is no data "
        "siphon and no program can run. The game cannot go on.\n")


def test_ctrl_c_exits_7_with_one_line(tmp_path, kill_if_hung):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"player": {"row": 0, "col": 0}}))
    process = kill_if_hung(subprocess.Popen(
        [sys.executable, str(PLAY), "--scenario", str(path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}))
    try:
        shown = b""
        while not shown.endswith(b"> "):  # the prompt: play.py is waiting for a command
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, "play.py ended before prompting"
            shown += chunk
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 7
    assert err.decode() == "play.py: interrupted by SIGINT\n"


def test_session_ends_when_the_game_ends(tmp_path):
    result = run_play(tmp_path, {"player": {"row": 3, "col": 3, "hp": 0}}, "d\nq\n")
    assert result.returncode == 0, result.stderr
    assert "You died on stage 1." in result.stdout
    assert result.stdout.count("Valid actions") == 1  # the trailing q is never read


def test_end_of_input_quits(tmp_path):
    result = run_play(tmp_path, {"player": {"row": 0, "col": 0}}, "")
    assert result.returncode == 0 and "Valid actions: 0 up, 3 right" in result.stdout


def test_invalid_field_exits_3_with_one_line(tmp_path):
    scenario = {"player": {"row": 1, "col": 1},
                "enemies": [{"type": "dragon", "row": 1, "col": 2, "hp": 1}]}
    result = run_play(tmp_path, scenario)
    assert result.returncode == 3
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "enemies[0].type: unknown enemy type 'dragon'" in lines[0]


def test_bad_json_exits_3_with_one_line(tmp_path):
    result = run_play(tmp_path, '{"player": {"row": 1,')
    assert result.returncode == 3
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "invalid JSON at line 1" in lines[0]


def test_help_documents_exit_codes():
    result = play("--help", timeout=120)
    assert result.returncode == 0
    assert "exit codes" in result.stdout and "malformed scenario file" in result.stdout
    assert "7  interrupted" in result.stdout


def test_save_writes_the_current_state_as_a_scenario(tmp_path):
    from hackmatrix.game import scenario

    start = {"player": {"row": 3, "col": 3, "credits": 5, "dataSiphons": 1},
             "ownedPrograms": ["SIPH+"],
             "enemies": [{"type": "virus", "row": 0, "col": 0, "hp": 2}]}
    saved = tmp_path / "Saved Game.json"
    result = run_play(tmp_path, start,
                      f"save\nw\nsave {tmp_path}/missing/x.json\nsave {tmp_path}/scenario.json\n"
                      f"save {tmp_path}/new/\nsave \"{saved}\"\nq\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "save needs a file name: save FILE.json" in out
    assert f"Not saved: save {tmp_path}/missing/x.json: directory" in out
    assert "which this command reads" in out           # never over the scenario being played
    assert f"save {tmp_path}/new/: that names a directory" in out
    assert f"Saved to {saved} (play it from here: play.py --scenario '{saved}')" in out
    state = json.loads(saved.read_text())
    assert state["player"]["row"] == 4 and state["player"]["col"] == 3
    assert state["turn"] == 1
    assert scenario.to_dict(scenario.from_dict(state)) == state


def test_keys_numbers_and_program_names_map_to_their_actions(tmp_path):
    # 0 = up by number, s = down, the left arrow (ESC [ D), then PUSH by name; the player
    # sees the board as the observation has it (no hidden cryptog, no watcher's legend).
    scenario = {"player": {"row": 3, "col": 3, "energy": 2}, "ownedPrograms": ["PUSH"],
                "enemies": [{"type": "cryptog", "row": 0, "col": 0, "hp": 1}]}
    result = run_play(tmp_path, scenario, "0\ns\n\x1b[D\npush\nq\n")
    assert result.returncode == 0, result.stderr
    boards = result.stdout.split("Valid actions")[:-1]
    players = []
    for board in boards:
        line = next(line for line in board.splitlines() if re.match(r" \d \|.*@", line))
        players.append((int(line[1]), next(col for col, cell in enumerate(line.split("|")[1:])
                                           if "@" in cell)))
    assert players == [(3, 3), (4, 3), (3, 3), (3, 2), (3, 2)]
    assert "is not valid now" not in result.stdout          # PUSH, which is owned, not PULL
    assert "c1" not in boards[0] and "hidden from the player" not in boards[0]
    assert "Energy 2" in boards[-2] and "Energy 0" in boards[-1]


def test_a_won_game_names_its_final_score(tmp_path):
    result = run_play(tmp_path, {"player": {"row": 5, "col": 4, "score": 7}, "stage": 8}, "d\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("You won! Final score 7.\n")


def test_the_seed_chooses_the_game():
    boards = [play("--seed", seed).stdout for seed in ("1", "1", "2")]
    assert boards[0] == boards[1] != boards[2]


def test_z_and_wait_take_the_wait_program(tmp_path):
    scenario = {"player": {"row": 0, "col": 0, "energy": 2}, "ownedPrograms": ["WAIT"]}
    result = run_play(tmp_path, scenario, "z\nwait\nq\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("Reward -0.0600 (step_penalty -0.0100, resourceGain -0.0500)") == 2
    assert "Turn 2" in result.stdout.split("Valid actions")[-2]
