"""`benchmark.py learn`: a recipe trained over seeds, judged by play on fixed boards."""

import json
import pathlib
import subprocess
import sys

import pytest

from hackmatrix.bench import learn
from hackmatrix.tools.cli import EXIT_BAD_ARGUMENTS

# 2 updates of 8 envs x 16 steps per seed; a learning rate large enough that two updates move
# the policy away from the near-uniform initial one (whose samples match the random baseline's).
TINY = ["--total-timesteps", "256", "--eval-episodes", "8", "--max-steps", "50"]
RECIPE = ["--", "--num-envs", "8", "--num-steps", "16", "--hidden-dim", "16", "--num-layers", "1",
          "--lr", "0.05"]
PLAY = ("mean_return", "mean_stage", "win_rate", "mean_score", "siphon_frac", "program_frac")
BENCHMARK = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "benchmark.py"


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    path = tmp_path_factory.mktemp("learn") / "report.json"
    assert learn.main(["--seeds", "2", *TINY, "--json", str(path), *RECIPE]) == 0
    return json.loads(path.read_text())


def test_reports_each_seed_and_their_mean_and_population_std(two_seeds):
    report = two_seeds
    assert report["seeds"] == [0, 1] and report["trainer_flags"] == RECIPE[1:]
    assert report["config"]["num_envs"] == 8 and report["config"]["lr"] == 0.05
    assert (report["num_updates"], report["timesteps_per_seed"]) == (2, 256)
    assert report["eval"] == {"episodes": 8, "eval_seed": 0, "max_steps": 50,
                              "actions": "sampled"}
    assert [row["seed"] for row in report["per_seed"]] == [0, 1]
    names = (*PLAY, "sps")
    for row in report["per_seed"]:
        assert set(row) == {"seed", *names} and row["sps"] > 0
        assert 1 <= row["mean_stage"] <= 8 and 0 <= row["win_rate"] <= 1
    assert report["std_kind"].startswith("population")
    for name in names:
        first, second = (row[name] for row in report["per_seed"])
        assert report["mean"][name] == pytest.approx((first + second) / 2)
        # The population std of two values is half their distance (the sample std: 1/sqrt 2).
        assert report["std"][name] == pytest.approx(abs(first - second) / 2)
    # The seeds trained different agents.
    assert [report["per_seed"][0][name] for name in PLAY] != \
        [report["per_seed"][1][name] for name in PLAY]
    assert set(report["baselines"]) == {"random", "exit-runner"}
    for figures in report["baselines"].values():
        assert set(figures) == set(PLAY)


def test_the_same_eval_seed_plays_the_same_boards(two_seeds, tmp_path, capsys):
    capsys.readouterr()
    path = tmp_path / "one.json"
    assert learn.main(["--seed-list", "1", *TINY, "--json", str(path), *RECIPE]) == 0
    report = json.loads(path.read_text())
    assert report["baselines"] == two_seeds["baselines"]
    # A seed's agent and games do not depend on the other seeds of the run (one CPU device
    # trains bit-reproducibly).
    assert [report["per_seed"][0][name] for name in PLAY] == \
        [two_seeds["per_seed"][1][name] for name in PLAY]
    assert report["std"] == {name: 0.0 for name in (*PLAY, "sps")}
    rows = {line.split("  ")[0].strip(): line for line in capsys.readouterr().out.splitlines()}
    assert {"policy", "seed 1", "mean ± std", "random", "exit-runner"} <= set(rows)
    assert rows["random"].split()[1:] == [f"{report['baselines']['random'][name]:.3f}"
                                          for name in PLAY]


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "expected a positive integer, got 0"),
    (["--seeds", "2", "--seed-list", "0,1"], "not allowed with argument --seeds"),
    (["--seed-list", "0,0"], "a seed appears twice"),
    (["--total-timesteps", "1.5"], "expected a positive whole number"),
    (["--eval-episodes", "100000"], "at most 65536"),
    (["--", "--no-such-flag"], "after --: unrecognized arguments: --no-such-flag"),
    (["--", "--seed", "3"], "learn's --seeds or --seed-list"),
    (["--", "--total-timesteps", "256"], "give it before --"),
    (["--", "--checkpoint-dir", "elsewhere"], "--checkpoint-dir is a run option"),
    (["--", "--num-envs", "8", "--num-steps", "16", "--num-minibatches", "3"],
     "not divisible by num_minibatches 3"),  # a ConfigError
    (["--total-timesteps", "64", "--", "--num-envs", "8", "--num-steps", "16"],
     "less than one update's batch"),
    (["--json", "/no/such/folder/report.json"], "does not exist"),
])
def test_bad_flags_exit_3_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        learn.main(argv)
    assert exit_info.value.code == EXIT_BAD_ARGUMENTS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("benchmark.py learn: error: ")
    assert message in err


def test_the_dispatcher_runs_it():
    result = subprocess.run([sys.executable, str(BENCHMARK), "learn", "--seeds", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == EXIT_BAD_ARGUMENTS
    assert result.stderr == ("benchmark.py learn: error: argument --seeds: expected a positive "
                             "integer, got 0\n")
