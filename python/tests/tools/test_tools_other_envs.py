"""The tools on a run trained on another env than HackMatrix: a tiny CartPole run (gymnax).

evaluate.py plays the trained policy and the random baseline on the same episodes; the viewer
prints one line per step with the observation; plot_metrics.py leaves out the panels the run
did not log; without gymnax each tool says so in one line (exit 3).
"""

import json
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import load_script
from hackmatrix.tools import cli, plotting, policy_env
from hackmatrix.training import metrics, params_files, policy_loading
from hackmatrix.training import network as net

evaluate_main = load_script("evaluate.py")
watch_main = load_script("watch_jax_agent.py")
plot_main = load_script("plot_metrics.py")

ENV = "CartPole-v1"
CARTPOLE_MAX_RETURN = 500  # one point per step, 500 steps at most
EPISODES, SEED = 8, 3


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    """A run directory from 8 updates of PPO on CartPole (4 envs x 32 steps)."""
    pytest.importorskip("gymnax")
    from hackmatrix.training import cli as train_cli

    checkpoint_dir = tmp_path_factory.mktemp("checkpoints")
    assert train_cli.main(["--env", ENV, "--num-envs", "4", "--num-steps", "32",
                           "--total-timesteps", str(4 * 32 * 8), "--hidden-dim", "16",
                           "--seed", "1", "--no-wandb", "--checkpoint-dir", str(checkpoint_dir),
                           "--run-name", "cartpole"]) == 0
    run_dir = checkpoint_dir / "cartpole"
    assert (run_dir / "final_params.npz").is_file()
    return run_dir


def _evaluate(run_dir, json_path, *flags):
    assert evaluate_main([str(run_dir), "--episodes", str(EPISODES), "--seed", str(SEED),
                          "--json", str(json_path), *flags]) == 0
    return json.loads(json_path.read_text())


@pytest.mark.parametrize("mode", [[], ["--deterministic"]])
def test_evaluate_reports_the_policy_and_random_on_the_same_episodes(mode, cartpole_run,
                                                                     tmp_path, capsys):
    first = _evaluate(cartpole_run, tmp_path / "first.json", *mode)
    out = capsys.readouterr().out
    assert list(first) == [str(cartpole_run), "random"]
    for summary in first.values():
        assert summary["env"] == ENV and summary["episodes"] == EPISODES
        assert 1 <= summary["min_return"] <= summary["mean_return"] <= summary["max_return"]
        assert summary["max_return"] <= CARTPOLE_MAX_RETURN
        # CartPole pays one point per step: the return is the episode's length.
        assert summary["mean_length"] == pytest.approx(summary["mean_return"])
        assert summary["std_return"] >= 0 and summary["truncated_rate"] == 0.0
        assert not {"mean_stage", "win_rate", "mean_score", "programs_used"} & set(summary)
    assert first[str(cartpole_run)]["checkpoint_file"] == str(cartpole_run / "final_params.npz")
    assert f"{EPISODES} episodes per policy on {ENV}, seed {SEED}, max 500 steps" in out
    assert "exit-runner" not in out and "stage" not in out
    # The same seed plays the same episodes, to the last digit.
    assert _evaluate(cartpole_run, tmp_path / "second.json", *mode) == first


def test_the_random_baseline_alone_plays_the_env_named_by_flag(tmp_path, capsys):
    pytest.importorskip("gymnax")
    json_path = tmp_path / "random.json"
    assert evaluate_main(["--env", ENV, "--episodes", "4", "--json", str(json_path)]) == 0
    assert capsys.readouterr().out.startswith(
        "no CHECKPOINT given: evaluating the baselines only (random)\n")
    (summary,) = json.loads(json_path.read_text()).values()
    assert summary["episodes"] == 4 and 1 <= summary["mean_return"] <= CARTPOLE_MAX_RETURN


@pytest.mark.parametrize("argv, message", [
    (["--env", ENV, "--baselines", "exit-runner"], "--baselines exit-runner plays HackMatrix only"),
    (["RUN", "--env", "Acrobot-v1"], f"was trained on {ENV}"),
    (["RUN", "--baselines", "random,exit-runner"], "--baselines exit-runner plays HackMatrix"),
])
def test_what_cannot_play_the_env_exits_3_in_one_line(argv, message, cartpole_run, capsys):
    argv = [str(cartpole_run) if word == "RUN" else word for word in argv]
    try:
        code = evaluate_main(argv)
    except SystemExit as exited:  # refused while parsing, as for any bad flag
        code = exited.code
    assert code == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err


def test_a_params_file_out_of_its_run_needs_env(cartpole_run, tmp_path, capsys):
    # The trainer's params files record their env: a copy out of its run plays as it is.
    copied = tmp_path / "copied.npz"
    shutil.copy(cartpole_run / "final_params.npz", copied)
    assert watch_main([str(copied), "--max-steps", "2"]) == 0
    assert "step 2  obs [" in capsys.readouterr().out
    # One that records no env (written by other code), with no summary.json beside it.
    bare = tmp_path / "agent.npz"
    params_files.save_params(bare, *policy_loading.load_policy_params(copied))
    assert watch_main([str(bare)]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "network expects 4 features and 2 actions" in err
    assert err.rstrip().endswith("give --env ID")
    assert watch_main([str(bare), "--env", ENV, "--max-steps", "2"]) == 0
    assert "step 2  obs [" in capsys.readouterr().out
    # A params file that records its env as a `meta/env` entry needs no --env.
    params, network = policy_loading.load_policy_params(bare)
    recorded = params_files.save_params(tmp_path / "recorded.npz", params, network,
                                        meta={"env": ENV})
    assert watch_main([str(recorded), "--max-steps", "2"]) == 0
    assert "step 2  obs [" in capsys.readouterr().out


STEP_LINE = re.compile(r"step (\d+)  obs \[([^\]]*)\]  value [-+]\d+\.\d{3}  "
                       r"action ([01]) \(\d+\.\d%\)  reward \+1\.000")


def test_watch_prints_one_line_per_step_with_the_observation(cartpole_run, capsys):
    from hackmatrix.envs.registry import make_env

    assert watch_main([str(cartpole_run), "--episodes", "2", "--max-steps", "5",
                       "--seed", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"watching {cartpole_run / 'final_params.npz'} (separate 2 x 16 tanh, "
                        f"{ENV}, sampling)")
    steps = [STEP_LINE.fullmatch(line) for line in lines if line.startswith("step ")]
    assert all(steps) and [int(m.group(1)) for m in steps] == [1, 2, 3, 4, 5] * 2
    assert lines.count("steps 5  return +5.000  end: max steps") == 2
    # The first line shows the first observation of the episode, rounded to 3 decimals.
    _, reset_key = jax.random.split(jax.random.key(4))
    observation, _ = make_env(ENV).reset(reset_key)
    shown = [float(value) for value in steps[0].group(2).split()]
    np.testing.assert_allclose(shown, np.asarray(observation.features), atol=5e-4)


def test_the_gif_and_scenarios_are_hackmatrix_only(cartpole_run, tmp_path, capsys):
    gif = tmp_path / "cartpole.gif"
    assert watch_main([str(cartpole_run), "--gif", str(gif)]) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.err == (f"watch_jax_agent.py: error: --gif draws HackMatrix's board only: "
                            f"{cartpole_run / 'final_params.npz'} plays {ENV}\n")
    assert not gif.exists() and "step " not in captured.out


def test_plot_leaves_out_the_panels_the_run_did_not_log(cartpole_run, tmp_path, monkeypatch):
    figures, close = [], plotting.plt.close
    monkeypatch.setattr(plotting.plt, "close", figures.append)
    output = tmp_path / "curves.png"
    try:
        assert plot_main([str(cartpole_run), "-o", str(output)]) == 0
        (figure,) = figures
        titles = [ax.get_title() for ax in figure.axes]
        assert titles[:2] == ["Episode return", "Episode length"] and "Value loss" in titles
        assert not {"Stage reached", "Episode outcomes", "Action fractions",
                    "Reward components (mean per step)"} & set(titles)
        assert not any(ax.texts for ax in figure.axes)  # no "not logged" panel
        assert figure._suptitle.get_text().startswith(f"cartpole ({ENV}): 8 records")
    finally:
        for figure in figures:
            close(figure)
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run_without_gymnax(tmp_path, monkeypatch):
    """A CartPole run's params and summary (made without gymnax), in a Python where
    `import gymnax` fails."""
    config = {"torso": "mlp", "shared": False, "activation": "tanh", "hidden_dim": 8,
              "num_layers": 1, "conv_channels": 0, "obs_dim": 4, "num_actions": 2}
    params = net.network_from_config(config).init(jax.random.key(0), jnp.zeros((4,)))
    run_dir = tmp_path / "cartpole"
    run_dir.mkdir()
    params_files.save_params(run_dir / "final_params.npz", jax.device_get(params), config)
    (run_dir / metrics.SUMMARY_FILE).write_text(json.dumps({"config": {"env": ENV}}))
    monkeypatch.setitem(__import__("sys").modules, "gymnax", None)
    return run_dir


@pytest.mark.parametrize("main, prog", [(evaluate_main, "evaluate.py"),
                                        (watch_main, "watch_jax_agent.py")])
def test_without_gymnax_a_gymnax_run_is_one_line_and_exit_3(main, prog, run_without_gymnax,
                                                           capsys):
    assert main([str(run_without_gymnax)]) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.out == "" or "step" not in captured.out
    assert captured.err == (f"{prog}: error: --env {ENV} needs gymnax, an optional "
                            f'dependency: pip install -e "python[gymnax]"\n')


def test_the_constants_spelled_out_before_jax_are_the_trainers_and_the_evaluators():
    from hackmatrix.programs import evaluate
    from hackmatrix.tools import evaluation

    assert policy_env.SUMMARY_FILE == metrics.SUMMARY_FILE
    assert evaluate.HACKMATRIX_MAX_STEPS == evaluation.DEFAULT_MAX_STEPS
