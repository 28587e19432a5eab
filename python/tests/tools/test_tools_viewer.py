"""watch_jax_agent.py and the pieces behind it: loading, masked selection, text output, GIF."""

import io
import json
import os
import re
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, ReaderLeavesAfter, load_script
from hackmatrix.game import constants as C
from hackmatrix.game import scenario
from hackmatrix.tools import cli, policy, report, viewer
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files, policy_loading
from hackmatrix.training import network as net

watch_main = load_script("watch_jax_agent.py")

FAST = ["--delay", "0", "--max-steps", "6"]
STEP_PROMPT = "[Enter] next step, q + Enter quits: "


def _episode_lengths(output: str) -> list[int]:
    return [int(n) for n in re.findall(r"^steps (\d+)  return", output, flags=re.MULTILINE)]


def _actions_shown(output: str) -> list[str]:
    return re.findall(r"^action: (\S+) \(", output, flags=re.MULTILINE)


def test_watches_a_full_checkpoint_headless(tiny_run, capsys):
    pkl = ckpt.newest_checkpoint(tiny_run)
    assert watch_main([str(pkl), *FAST, "--episodes", "2", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out  # not a terminal: no colour codes, no screen clearing
    assert len(_episode_lengths(out)) == 2
    assert re.search(r"^value [+-]\d+\.\d+ \| ", out, flags=re.MULTILINE)
    assert re.search(r"^reward [+-]\d+\.\d+ \(step_penalty -0\.010", out, flags=re.MULTILINE)
    assert "stage 1" in out and "won no" in out and "programs used:" in out
    assert set(_actions_shown(out)) <= set(C.ACTION_NAMES)


def test_watches_an_npz_and_a_run_dir_and_latest(tiny_run, capsys):
    for source in ([str(tiny_run / "final_params.npz")], [str(tiny_run)],
                   ["--latest", "--checkpoint-dir", str(tiny_run.parent)]):
        assert watch_main([*source, *FAST, "--deterministic", "--no-color"]) == 0
        out = capsys.readouterr().out
        # The header names the file loaded, also for a run directory; the architecture comes
        # from the checkpoint or the .npz shapes.
        loaded_file = policy_loading.resolve_policy_file(tiny_run)
        assert loaded_file.is_file()
        assert out.startswith(f"watching {loaded_file} (separate ego(16) + 2 x 32 tanh, argmax)\n")
        assert len(_episode_lengths(out)) == 1


def test_a_folder_of_runs_gets_a_hint(tiny_run, capsys):
    assert watch_main([str(tiny_run.parent), "--delay", "0"]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert err == (f"watch_jax_agent.py: error: {tiny_run.parent} is a folder of runs (tiny), "
                   f"not a run: name one, e.g. {tiny_run}, or use --latest --checkpoint-dir "
                   f"{tiny_run.parent}\n")


def test_gif_has_one_frame_per_step_plus_one_per_episode(tiny_run, tmp_path, capsys):
    gif_path = tmp_path / "episodes"  # no extension: still a GIF, at exactly this path
    assert watch_main([str(tiny_run), *FAST, "--episodes", "2", "--gif", str(gif_path)]) == 0
    lengths = _episode_lengths(capsys.readouterr().out)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["episodes"]
    with Image.open(gif_path) as image:
        assert image.format == "GIF"
        assert image.n_frames == sum(length + 1 for length in lengths)
        assert image.size[0] > 300 and image.size[1] > 300


@pytest.mark.parametrize("case", ["missing_directory", "proc", "a_directory"])
def test_unwritable_gif_path_exits_3_before_playing(case, tiny_run, tmp_path, capsys):
    gif_path = {"missing_directory": tmp_path / "absent" / "x.gif",
                "proc": "/proc/x.gif", "a_directory": tmp_path}[case]
    assert watch_main([str(tiny_run), *FAST, "--gif", str(gif_path)]) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.out == ""  # not even the header: nothing was loaded or played
    assert len(captured.err.splitlines()) == 1
    assert captured.err.startswith(f"watch_jax_agent.py: error: --gif {gif_path}: ")


def test_never_takes_an_invalid_action(tiny_run):
    """A policy that strongly prefers masked actions still only takes valid ones."""
    loaded = policy.load_policy(tiny_run / "final_params.npz")
    # Programs PUSH..POLY, which a new game does not own (so they are masked), get by far the
    # largest logits; an unmasked argmax or sample would pick them nearly every time.
    params = jax.tree_util.tree_map(np.array, loaded.params)
    bias = params["params"]["actor_logits"]["bias"]
    bias[:] = 0.0
    bias[C.FIRST_PROGRAM_ACTION:C.ACTION_WAIT] = 100.0
    loaded = loaded._replace(params=jax.tree_util.tree_map(jnp.asarray, params))
    out = io.StringIO()
    summaries = viewer.watch(loaded, viewer.ViewerOptions(episodes=3, delay=0, max_steps=8,
                                                          color=False), out=out)
    # An invalid action would end an episode at once (§4.4), and the viewer raises before one.
    assert len(summaries) == 3
    assert all(summary.end in ("won", "died", "max steps") for summary in summaries)


def test_a_walled_in_start_ends_the_episode_without_an_action(tiny_run, tmp_path, capsys):
    # Blocks on both open sides, no data siphon, no program: every action is masked.
    scenario_file = tmp_path / "walled.json"
    scenario_file.write_text(json.dumps({
        "player": {"row": 5, "col": 5, "credits": 0, "energy": 0, "dataSiphons": 0},
        "blocks": [{"type": "data", "row": 4, "col": 5, "points": 1},
                   {"type": "data", "row": 5, "col": 4, "points": 1}]}))
    assert watch_main([str(tiny_run), "--scenario", str(scenario_file), *FAST,
                       "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("no action is valid: no direction is open, there is no data siphon and no "
                     "program can run") == 2
    assert out.count("end: no valid action") == 2 and _episode_lengths(out) == [0, 0]
    assert _actions_shown(out) == []


def test_masked_selection_only_returns_valid_actions():
    keys = jax.random.split(jax.random.key(0), 2000)
    logits = jax.random.normal(jax.random.key(1), (2000, C.NUM_ACTIONS)) * 5
    masks = jax.random.bernoulli(jax.random.key(2), 0.2, (2000, C.NUM_ACTIONS))
    masks = masks.at[:, 27].set(masks[:, 27] | ~masks.any(axis=1))  # at least one valid
    for deterministic in (False, True):
        actions = jax.vmap(policy.select_action, in_axes=(0, 0, 0, None))(
            keys, logits, masks, deterministic)
        assert bool(jnp.all(masks[jnp.arange(2000), actions]))


def test_top_actions_lists_valid_actions_by_probability():
    probabilities = np.array([0.1, 0.0, 0.6, 0.3] + [0.0] * 24)
    mask = np.zeros(28, bool)
    mask[[0, 2, 3, 10]] = True
    assert policy.top_actions(probabilities, mask, 3) == [(2, 0.6), (3, 0.3), (0, 0.1)]


def test_scenario_start_and_step_mode(tiny_run, tmp_path, capsys, monkeypatch):
    scenario_file = tmp_path / "start.json"
    scenario_file.write_text(json.dumps({"player": {"row": 2, "col": 3, "credits": 7}}))
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))  # one Enter, then end of input
    assert watch_main([str(tiny_run), "--scenario", str(scenario_file), "--step",
                       "--max-steps", "2", "--delay", "0"]) == 0
    out = capsys.readouterr().out
    assert "[Enter] next step" in out
    assert re.search(r"Credits 7", out)


@pytest.mark.parametrize("make_bad_source", ["missing", "empty_dir", "garbage_npz",
                                             "wrong_shape_npz", "vector_kernel_npz",
                                             "complex_npz", "nan_npz", "not_a_checkpoint"])
def test_bad_checkpoint_exits_6_with_one_line(make_bad_source, tmp_path, capsys):
    source = tmp_path / "missing.pkl"
    if make_bad_source == "empty_dir":
        source = tmp_path / "run"
        source.mkdir()
    elif make_bad_source == "garbage_npz":
        source = tmp_path / "garbage.npz"
        source.write_bytes(b"not a zip file")
    elif make_bad_source == "wrong_shape_npz":
        # A network for a different observation size.
        network = net.ActorCritic(hidden_dim=8, num_layers=1, num_actions=C.NUM_ACTIONS)
        source = params_files.save_params(tmp_path / "params_1.npz",
                                          net.init_params(network, jax.random.key(0), obs_dim=12))
    elif make_bad_source in ("vector_kernel_npz", "complex_npz", "nan_npz"):
        network = net.ActorCritic(hidden_dim=8, num_layers=1, num_actions=C.NUM_ACTIONS)
        params = net.init_params(network, jax.random.key(0), obs_dim=1545)
        # A first kernel that is not a matrix, or every array complex: both load as arrays.
        params = jax.tree_util.tree_map(np.array, params)  # writable copies
        if make_bad_source == "vector_kernel_npz":
            params["params"]["torso_0"]["kernel"] = np.zeros(8, np.float32)
        elif make_bad_source == "nan_npz":  # one weight: its policy would show NaN everywhere
            params["params"]["torso_0"]["kernel"][3, 5] = np.nan
        else:
            params = jax.tree_util.tree_map(lambda x: x.astype(np.complex64), params)
        source = params_files.save_params(tmp_path / "final_params.npz", params)
    elif make_bad_source == "not_a_checkpoint":
        source = tmp_path / "checkpoint_1.pkl"
        source.write_bytes(b"\x80\x04K\x01.")  # a pickled int
    assert watch_main([str(source), "--delay", "0"]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if make_bad_source == "nan_npz":
        assert err.endswith(f"{source}: parameters hold NaN or infinite values\n")


@pytest.mark.parametrize("argv, error", [
    (["--episodes", "0"], "--episodes must be >= 1, got 0"),
    (["--max-steps", "-3"], "--max-steps must be >= 1, got -3"),
    (["--top", "0", "--episodes", "0"], "--episodes must be >= 1, got 0"),  # the first one
    (["--top", "0"], "--top must be >= 1, got 0"),
    # Sizes that would exhaust memory or time: refused before any work, as --help states.
    (["--episodes", "1000000000"], "--episodes must be at most 10,000, got 1000000000"),
    (["--max-steps", "100001"], "--max-steps must be at most 100,000, got 100001"),
    (["--episodes", "21", "--gif", "x.gif"], "--gif with --episodes 21 and --max-steps 500 may "
     "hold 10,521 frames in memory, over 10,000: fewer episodes or steps"),
])
def test_a_count_out_of_bounds_is_named_with_its_value(argv, error, capsys):
    with pytest.raises(SystemExit) as exit_info:
        watch_main(["x.pkl", *argv])
    assert exit_info.value.code == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err == f"watch_jax_agent.py: error: {error}\n"


def test_latest_in_empty_dir_and_bad_arguments(tmp_path, capsys):
    assert watch_main(["--latest", "--checkpoint-dir", str(tmp_path)]) == cli.EXIT_BAD_CHECKPOINT
    assert watch_main(["--latest", "--checkpoint-dir", str(tmp_path / "nope")]) == 6
    (tmp_path / "notes.txt").write_text("a file, not a folder of runs\n")
    assert watch_main(["--latest", "--checkpoint-dir", str(tmp_path / "notes.txt")]) == 6
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"watch_jax_agent.py: error: --checkpoint-dir {tmp_path / 'notes.txt'} is not a directory")
    for bad_arguments in ([], ["x.pkl", "--latest"], ["x.pkl", "--episodes", "0"],
                          ["x.pkl", "--seed", "4294967296"], ["x.pkl", "--seed", "-1"],
                          *(["x.pkl", "--delay", delay] for delay in
                            ("nan", "inf", "-inf", "-0.5", "601", "1e300", "soon"))):
        with pytest.raises(SystemExit) as exit_info:
            watch_main(bad_arguments)
        assert exit_info.value.code == cli.EXIT_BAD_ARGUMENTS


@pytest.mark.parametrize("text", ["{not json", '{"player": {"row": 9, "col": 0}}'])
def test_malformed_scenario_exits_3_and_missing_scenario_exits_6(tiny_run, tmp_path, text,
                                                                 capsys):
    scenario_file = tmp_path / "bad.json"
    scenario_file.write_text(text)
    assert watch_main([str(tiny_run), "--scenario", str(scenario_file)]) == 3
    assert watch_main([str(tiny_run), "--scenario", str(tmp_path / "absent.json")]) == 6
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_quitting_in_step_mode_still_writes_the_gif(tiny_run, tmp_path):
    gif_path = tmp_path / "quit.gif"
    out = io.StringIO()
    summaries = viewer.watch(policy.load_policy(tiny_run),
                             viewer.ViewerOptions(step_mode=True, gif_path=str(gif_path),
                                                  color=False),
                             out=out, read_line=lambda: "q\n")
    assert summaries == []  # the episode did not end
    assert out.getvalue().endswith(
        f"{STEP_PROMPT}=== episode 1/1 stopped ===\n"
        "steps 0  return +0.000  stage 1  score 0  won no  end: stopped by the user\n"
        f"programs used: none\nwrote {gif_path} (1 frame)\n")
    with Image.open(gif_path) as image:
        assert image.n_frames == 1  # the initial state only


def test_step_mode_shows_each_board_before_the_action_taken_on_it(tiny_run):
    """The board comes before the first prompt; each Enter shows the action and the board it
    leads to; q stops with the summary so far. The same episode as without --step."""
    loaded = policy.load_policy(tiny_run)
    played = io.StringIO()
    viewer.watch(loaded, viewer.ViewerOptions(delay=0, max_steps=3, color=False), out=played)
    # Without --step each step's block is its header, the board acted on, then the decision
    # (the last one followed by the finished block).
    step_bodies = re.split(r"^=== episode 1/1  step \d ===\n", played.getvalue(),
                           flags=re.MULTILINE)[1:]
    assert len(step_bodies) == 3 and "steps 3  return" in step_bodies[-1]
    boards, decisions = zip(*(body.split("\nvalue ", 1) for body in step_bodies))

    answers = iter(["\n", "\n", "q\n"])
    stepped = io.StringIO()
    assert viewer.watch(loaded, viewer.ViewerOptions(step_mode=True, max_steps=3, color=False),
                        out=stepped, read_line=lambda: next(answers)) == []
    expected = f"=== episode 1/1  start ===\n{boards[0]}\n{STEP_PROMPT}"
    for step in (1, 2):
        expected += (f"=== episode 1/1  step {step} ===\nvalue {decisions[step - 1]}"
                     f"{boards[step]}\n{STEP_PROMPT}")
    assert stepped.getvalue().startswith(expected + "=== episode 1/1 stopped ===\n")
    assert re.fullmatch(r"steps 2  return [+-]\d+\.\d{3}  stage \d  score \d+  won no  end: "
                        r"stopped by the user\nprograms used: .+\n",
                        stepped.getvalue()[len(expected + "=== episode 1/1 stopped ===\n"):])


def test_a_reader_that_goes_away_still_gets_the_gif_so_far(tiny_run, tmp_path):
    gif_path = tmp_path / "piped.gif"
    with pytest.raises(BrokenPipeError):
        viewer.watch(policy.load_policy(tiny_run),
                     viewer.ViewerOptions(episodes=2, delay=0, max_steps=6, color=False,
                                          gif_path=str(gif_path)),
                     out=ReaderLeavesAfter(3))
    with Image.open(gif_path) as image:
        assert image.n_frames >= 3


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("no_color", [False, True])
def test_no_color_on_a_terminal_sends_no_escapes(no_color, tiny_run, monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stdout", terminal)
    arguments = [str(tiny_run), "--delay", "0", "--max-steps", "2"]
    assert watch_main(arguments + (["--no-color"] if no_color else [])) == 0
    out = terminal.getvalue()
    if no_color:
        assert "\x1b" not in out
    else:  # the same run on a terminal without the flag: colour and redraw in place
        assert viewer.CLEAR_SCREEN in out and "\x1b[1;32m@" in out


class InterruptedInput:
    """stdin whose first line is an Enter and whose second read is a Ctrl-C."""

    def __init__(self):
        self.reads = 0

    def readline(self):
        self.reads += 1
        if self.reads > 1:
            raise KeyboardInterrupt
        return "\n"


def test_ctrl_c_writes_the_gif_so_far_and_exits_7(tiny_run, tmp_path, monkeypatch, capsys):
    gif_path = tmp_path / "partial.gif"
    monkeypatch.setattr("sys.stdin", InterruptedInput())
    assert watch_main([str(tiny_run), "--step", "--delay", "0", "--episodes", "3",
                       "--gif", str(gif_path)]) == cli.EXIT_INTERRUPTED
    captured = capsys.readouterr()
    # One step was taken: the initial frame and one more.
    assert len(_actions_shown(captured.out)) == 1
    assert f"wrote {gif_path} (2 frames so far, interrupted)" in captured.out
    assert captured.err == "watch_jax_agent.py: interrupted by SIGINT\n"
    with Image.open(gif_path) as image:
        assert image.n_frames == 2


def test_sigint_to_the_cli_process_writes_the_gif_so_far(tiny_run, tmp_path, kill_if_hung):
    """The real thing: a signal to a running viewer, not a simulated KeyboardInterrupt."""
    gif_path = tmp_path / "partial.gif"
    process = kill_if_hung(subprocess.Popen(
        [sys.executable, str(SCRIPTS / "watch_jax_agent.py"), str(tiny_run), "--delay", "600",
         "--gif", str(gif_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}))
    try:
        lines = []
        for line in process.stdout:  # the first step is shown, then a 600 s pause
            lines.append(line)
            if line.startswith("reward "):
                break
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == cli.EXIT_INTERRUPTED
    assert err == "watch_jax_agent.py: interrupted by SIGINT\n"
    assert out == f"\nwrote {gif_path} (2 frames so far, interrupted)\n"
    with Image.open(gif_path) as image:
        assert image.n_frames == 2


def test_a_signal_while_the_gif_is_written_waits_for_it(tiny_run, tmp_path, monkeypatch,
                                                        capsys):
    # Writing a long recording takes seconds: a Ctrl-C then used to lose the whole GIF.
    gif_path = tmp_path / "whole.gif"
    write = viewer._write_gif
    def interrupted_write(frames, options):
        os.kill(os.getpid(), signal.SIGINT)
        write(frames, options)
    monkeypatch.setattr(viewer, "_write_gif", interrupted_write)
    assert watch_main([str(tiny_run), "--delay", "0", "--max-steps", "3", "--no-color",
                       "--gif", str(gif_path)]) == cli.EXIT_INTERRUPTED
    assert "(4 frames so far, interrupted)" in capsys.readouterr().out
    with Image.open(gif_path) as image:
        assert image.n_frames == 4


def test_reward_components_are_listed_in_the_rules_order():
    # JAX hands back the info dict with its keys sorted; the rules' table (§14.1) comes first.
    components = {"distance": 0.05, "kills": 0.0, "step_penalty": -0.01}
    assert report.reward_line(0.04, components) == (
        "reward +0.040 (step_penalty -0.010, distance +0.050)")


def test_a_death_ends_with_died_and_the_mean_line_counts_no_wins(tiny_run):
    # hp 1, walled in by three daemons of hp 3: whatever the agent does, one attacks it.
    start = scenario.from_dict({
        "player": {"row": 0, "col": 0, "hp": 1},
        "enemies": [{"type": "daemon", "row": 1, "col": 0, "hp": 3},
                    {"type": "daemon", "row": 0, "col": 1, "hp": 3},
                    {"type": "daemon", "row": 1, "col": 1, "hp": 3}]})
    out = io.StringIO()
    summaries = viewer.watch(policy.load_policy(tiny_run),
                             viewer.ViewerOptions(episodes=2, delay=0, max_steps=5, color=False,
                                                  scenario=start), out=out)
    assert [(s.steps, s.end, s.won) for s in summaries] == [(1, "died", False)] * 2
    assert out.getvalue().count("won no  end: died\n") == 2
    assert re.search(r"^2 episodes: mean return [+-]\d+\.\d{3}, mean stage 1\.00, wins 0$",
                     out.getvalue(), flags=re.MULTILINE)


def test_the_chosen_actions_probability_and_deterministic_argmax(tiny_run):
    loaded = policy.load_policy(tiny_run)
    for deterministic in (True, False):
        out = io.StringIO()
        viewer.watch(loaded, viewer.ViewerOptions(delay=0, max_steps=30, color=False, seed=3,
                                                  deterministic=deterministic, top_k=28), out=out)
        steps = re.findall(r"^value [+-][\d.]+ \| (\S+) ([\d.]+)%.*\naction: (\S+) \(([\d.]+)%\)",
                           out.getvalue(), flags=re.MULTILINE)
        shown = [dict(re.findall(r"(\S+) ([\d.]+)%", line)) for line in re.findall(
            r"^value [+-][\d.]+ \| (.*)$", out.getvalue(), flags=re.MULTILINE)]
        assert steps and len(steps) == len(shown)
        for (top, top_p, action, action_p), listed in zip(steps, shown):
            assert listed[action] == action_p  # the chosen action's own probability
        if deterministic:  # argmax: always the most probable action
            assert all(action == top for top, _, action, _ in steps)
        else:  # sampling: not always the top one
            assert any(action != top for top, _, action, _ in steps)


def test_programs_used_most_used_first():
    assert report.programs_used_text({"WARP": 1, "SIPH+": 3, "CRASH": 1}) == (
        "SIPH+ x3, CRASH x1, WARP x1")
