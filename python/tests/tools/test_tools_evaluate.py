"""evaluate.py, the episode runner and the two baselines."""

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import ReaderLeavesAfter, load_script
from hackmatrix.game import constants as C
from hackmatrix.game import scenario
from hackmatrix.game.env import EnvParams
from hackmatrix.tools import baselines, cli, evaluation, policy
from hackmatrix.training import policy_loading
from hackmatrix.training.config import MAX_COUNT

evaluate_main = load_script("evaluate.py")

EPISODES, MAX_STEPS, SEED = 16, 80, 3
JSON_FIELDS = ("mean_return", "std_return", "mean_stage", "max_stage", "win_rate", "mean_score",
               "mean_length")


@pytest.fixture(scope="module")
def cli_report(tiny_run, tmp_path_factory):
    """One evaluate.py run of the tiny checkpoint and both baselines, with --json."""
    json_path = tmp_path_factory.mktemp("evaluation") / "results"  # any extension, or none
    exit_code = evaluate_main([str(tiny_run), "--episodes", str(EPISODES), "--max-steps",
                               str(MAX_STEPS), "--seed", str(SEED), "--json", str(json_path)])
    assert exit_code == 0
    return json.loads(json_path.read_text())


def test_the_json_is_written_when_the_reader_of_stdout_goes_away(tiny_run, tmp_path,
                                                                 monkeypatch):
    stdout = ReaderLeavesAfter(2)  # the first line: its text and its line end
    monkeypatch.setattr("sys.stdout", stdout)
    json_path = tmp_path / "piped.json"
    # The same static arguments as `cli_report`, so this reuses its compilation.
    assert evaluate_main([str(tiny_run), "--episodes", str(EPISODES), "--max-steps",
                          str(MAX_STEPS), "--seed", str(SEED), "--baselines", "random",
                          "--json", str(json_path)]) == 0
    assert list(json.loads(json_path.read_text())) == [str(tiny_run), "random"]
    assert stdout.getvalue().count("\n") == 1


def test_json_has_one_object_per_policy_with_the_issue_fields(cli_report, tiny_run):
    assert list(cli_report) == [str(tiny_run), "random", "exit-runner"]
    for summary in cli_report.values():
        assert all(field in summary for field in JSON_FIELDS)
    # The run directory is the key; the file it resolved to is named too.
    assert cli_report[str(tiny_run)]["checkpoint_file"] == str(
        policy_loading.resolve_policy_file(tiny_run))
    assert "checkpoint_file" not in cli_report["random"]


def test_numbers_are_sane(cli_report):
    for name, s in cli_report.items():
        assert s["episodes"] == EPISODES
        assert 1 <= s["mean_stage"] <= s["max_stage"] <= C.MAX_STAGE, name
        assert 0.0 <= s["win_rate"] <= 1.0 and s["std_return"] >= 0.0
        assert 1 <= s["mean_length"] <= MAX_STEPS and s["mean_score"] >= 0
        assert s["invalid_action_rate"] == 0.0, f"{name} took an invalid action"
        assert sum(s["action_fractions"].values()) == pytest.approx(1.0)
        assert set(s["programs_used"]) <= set(C.PROGRAM_NAMES)


def test_exit_runner_reaches_higher_stages_than_random(cli_report):
    assert cli_report["exit-runner"]["mean_stage"] > cli_report["random"]["mean_stage"]


@pytest.mark.parametrize("name", ["random", "exit-runner"])
def test_baselines_are_reproducible_for_a_fixed_seed(cli_report, name):
    # Same static arguments as the CLI run, so this reuses its compilation.
    first = evaluation.run_episodes(baselines.baseline(name), jax.random.key(SEED), EPISODES,
                                    MAX_STEPS)
    second = evaluation.run_episodes(baselines.baseline(name), jax.random.key(SEED), EPISODES,
                                     MAX_STEPS)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    summary = evaluation.summarise(first)
    assert summary["mean_return"] == pytest.approx(cli_report[name]["mean_return"])
    assert summary["mean_stage"] == cli_report[name]["mean_stage"]


def _exit_runner_action(setup: dict, mask=None) -> int:
    state = scenario.from_dict(setup)
    if mask is None:
        _, mask = evaluation.features_and_mask(state)
    return int(baselines.exit_runner_policy(None, jax.random.key(0), state, None, mask))


def test_exit_runner_walks_the_shortest_path_around_blocks():
    # Exit at (5,5). The block above the player forces the detour to the right.
    wall = {"player": {"row": 0, "col": 0},
            "blocks": [{"row": 1, "col": 0, "type": "data", "points": 1}]}
    assert C.ACTION_NAMES[_exit_runner_action(wall)] == "right"
    distance = np.asarray(baselines.exit_distance_field(scenario.from_dict(wall)))
    assert distance[5, 5] == 0 and distance[0, 0] == 10 and distance[0, 1] == 9
    assert distance[1, 0] >= 10_000  # a block is never on a path


def test_exit_runner_attacks_what_stands_on_its_path():
    setup = {"player": {"row": 4, "col": 5},
             "enemies": [{"type": "daemon", "row": 5, "col": 5, "hp": 3}]}
    assert C.ACTION_NAMES[_exit_runner_action(setup)] == "up"  # the line of fire hits the daemon


def test_exit_runner_without_a_path_attacks_or_takes_a_valid_action():
    sealed = {"player": {"row": 0, "col": 0},
              "blocks": [{"row": 4, "col": 5, "type": "data", "points": 1},
                         {"row": 5, "col": 4, "type": "data", "points": 1}],
              "enemies": [{"type": "virus", "row": 0, "col": 1, "hp": 2}]}
    assert C.ACTION_NAMES[_exit_runner_action(sealed)] == "right"  # the adjacent virus
    only_siphon = jnp.zeros(C.NUM_ACTIONS, bool).at[C.ACTION_SIPHON].set(True)
    assert _exit_runner_action(sealed, only_siphon) == C.ACTION_SIPHON


def test_exit_runner_breaks_a_tie_between_shortest_paths_by_the_lowest_action_index():
    # From (0,0) to the exit at (5,5) "up" (action 0) and "right" (action 3) both start one.
    assert C.ACTION_NAMES[_exit_runner_action({"player": {"row": 0, "col": 0}})] == "up"


SEALED_EXIT = [{"row": 4, "col": 5, "type": "data", "points": 1},
               {"row": 5, "col": 4, "type": "data", "points": 1}]


def test_exit_runner_without_a_path_attacks_an_adjacent_transmission():
    sealed = {"player": {"row": 0, "col": 0}, "blocks": SEALED_EXIT,
              "transmissions": [{"row": 0, "col": 1, "turnsRemaining": 3, "enemyType": "virus"}]}
    assert C.ACTION_NAMES[_exit_runner_action(sealed)] == "right"


def test_exit_runner_without_a_path_or_a_target_uses_crash_before_wandering():
    # The diagonal block puts CRASH in reach (its ring of 8) without blocking a move.
    sealed = {"player": {"row": 0, "col": 0, "credits": 20, "energy": 20},
              "blocks": [*SEALED_EXIT, {"row": 1, "col": 1, "type": "data", "points": 1}],
              "ownedPrograms": ["PUSH", "PULL", "CRASH"]}
    state = scenario.from_dict(sealed)
    _, mask = evaluation.features_and_mask(state)
    assert mask[baselines._CRASH_ACTION] and mask[C.ACTION_NAMES.index("up")]
    assert _exit_runner_action(sealed) == baselines._CRASH_ACTION


def test_cli_errors(tmp_path, capsys):
    assert evaluate_main([str(tmp_path / "absent.pkl")]) == cli.EXIT_BAD_CHECKPOINT
    assert evaluate_main(["--latest", "--checkpoint-dir", str(tmp_path)]) == 6
    assert len(capsys.readouterr().err.strip().splitlines()) == 2
    for bad_arguments in (["--baselines", "greedy"], ["--baselines", "none"], ["--episodes", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            evaluate_main(bad_arguments)
        assert exit_info.value.code == cli.EXIT_BAD_ARGUMENTS


@pytest.mark.parametrize("argv, error", [
    (["--baselines", "random,exit-runner,random"], "baseline 'random' is given twice"),
    (["--baselines", "none,random"],
     "--baselines none means no baselines: it cannot be combined with others"),
    (["--episodes", "0"], "--episodes must be >= 1, got 0"),
    (["--max-steps", "-3"], "--max-steps must be >= 1, got -3"),
    # Sizes that would exhaust memory or time: refused before any work, as --help states.
    (["--episodes", "1000000000"], "--episodes must be at most 65,536, got 1000000000"),
    (["--episodes", str(MAX_COUNT + 1)], f"--episodes must be at most 65,536, got "
                                          f"{MAX_COUNT + 1}"),
    (["--max-steps", "100001"], "--max-steps must be at most 100,000, got 100001"),
])
def test_a_bad_baseline_list_or_count_is_named_in_one_line(argv, error, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(argv)
    assert exit_info.value.code == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err == f"evaluate.py: error: {error}\n"


class Evaluating(BaseException):
    """Stands in for the evaluation (a BaseException, so that run_main lets it through)."""


def test_without_a_checkpoint_it_says_that_only_the_baselines_are_evaluated(capsys,
                                                                            monkeypatch):
    def evaluating(*args, **kwargs):
        raise Evaluating

    monkeypatch.setattr(evaluation, "run_episodes", evaluating)
    with pytest.raises(Evaluating):
        evaluate_main(["--baselines", "exit-runner,random"])
    assert capsys.readouterr().out.startswith(
        "no CHECKPOINT given: evaluating the baselines only (exit-runner, random)\n256 episodes")
    with pytest.raises(SystemExit):
        evaluate_main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "With no CHECKPOINT and no --latest only the baselines are evaluated" in help_text
    assert "run directory (none: the baselines only)" in help_text


def test_max_steps_defaults_to_the_training_env_episode_limit(capsys):
    # The script keeps the number literal so that --help does not import JAX.
    with pytest.raises(SystemExit):
        evaluate_main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {evaluation.DEFAULT_MAX_STEPS}, the training env's" in help_text
    assert evaluation.DEFAULT_MAX_STEPS == EnvParams().max_steps_in_episode


def test_report_names_the_file_loaded(tiny_run, capsys):
    assert evaluate_main([str(tiny_run), "--baselines", "none", "--episodes", str(EPISODES),
                          "--max-steps", str(MAX_STEPS), "--seed", str(SEED)]) == 0
    out = capsys.readouterr().out
    loaded = policy_loading.resolve_policy_file(tiny_run)
    assert f"\n{tiny_run}: {loaded} (separate ego(16) + 2 x 32 tanh)\n" in out
    assert "baselines only" not in out


@pytest.mark.parametrize("case", ["same_text", "run_dir_and_its_file", "latest", "baseline_name"])
def test_the_same_checkpoint_twice_exits_3_before_loading(case, tiny_run, tmp_path, capsys,
                                                         monkeypatch):
    loaded_file = policy_loading.resolve_policy_file(tiny_run)
    latest = policy.latest_checkpoint(tiny_run.parent)
    if case == "baseline_name":
        monkeypatch.chdir(tmp_path)
        (tmp_path / "random").symlink_to(loaded_file)
    arguments, message = {
        "same_text": ([str(tiny_run), str(tiny_run)], f"{tiny_run} is given twice"),
        "run_dir_and_its_file": ([str(tiny_run), str(loaded_file)],
                                 f"{tiny_run} and {loaded_file} are the same checkpoint "
                                 f"({loaded_file})"),
        "latest": ([str(latest), "--latest", "--checkpoint-dir", str(tiny_run.parent)],
                   f"{latest} is given twice"),
        "baseline_name": (["random"], "checkpoint 'random' has the name of a baseline: "
                                      "write ./random"),
    }[case]
    assert evaluate_main(arguments) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing evaluated
    assert captured.err == f"evaluate.py: error: {message}\n"


def test_a_baseline_given_as_a_checkpoint_says_how_to_ask_for_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file called exit-runner here
    assert evaluate_main(["exit-runner"]) == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err == (
        "evaluate.py: error: 'exit-runner' is a baseline, not a checkpoint: baselines are chosen "
        "with --baselines (default: random,exit-runner)\n")


def test_unwritable_json_path_exits_3_before_evaluating(tiny_run, tmp_path, capsys):
    json_path = tmp_path / "absent" / "results.json"
    assert evaluate_main([str(tiny_run), "--json", str(json_path)]) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"evaluate.py: error: --json {json_path}: directory "
                            f"{json_path.parent} does not exist\n")


def test_a_folder_of_runs_gets_a_hint(tiny_run, capsys):
    assert evaluate_main([str(tiny_run.parent)]) == cli.EXIT_BAD_CHECKPOINT
    assert f"use --latest --checkpoint-dir {tiny_run.parent}" in capsys.readouterr().err


def test_an_unreadable_newest_checkpoint_names_the_runs_next_policy_file(tiny_run, tmp_path,
                                                                        capsys):
    run = shutil.copytree(tiny_run, tmp_path / "cut")
    (run / "final_params.npz").unlink()  # as in a run interrupted after its checkpoint 6
    newest = run / "checkpoint_6.pkl"
    newest.write_bytes(newest.read_bytes()[:100])
    assert evaluate_main([str(run), "--episodes", "1"]) == cli.EXIT_BAD_CHECKPOINT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"evaluate.py: error: cannot read checkpoint {newest}: truncated")
    assert line.endswith(f"; the run's next newest policy file: {run / 'params_6.npz'}")
    # A file named on the command line is the one wanted: no other is suggested.
    assert evaluate_main([str(newest), "--episodes", "1"]) == cli.EXIT_BAD_CHECKPOINT
    assert "next newest" not in capsys.readouterr().err
