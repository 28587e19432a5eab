"""train_purejaxrl CLI with `--env` and `--algo`, end to end on CartPole-v1 (gymnax): what a run
records and prints, the refusals (exit 3 before any work, exit 6 on a resume that changes the env
or the algorithm), and an exact resume."""

import json
import os
import re
import signal

import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli, policy_loading
from hackmatrix.training import metrics as M

from tiny_runs import assert_same_params, load_params

UPDATES = 6
CARTPOLE = ["--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16", "--log-interval",
            "2", "--seed", "1", "--total-timesteps", str(4 * 16 * UPDATES)]


def train(checkpoint_dir, run_name, *extra):
    return cli.main([*CARTPOLE, "--checkpoint-dir", str(checkpoint_dir), "--run-name", run_name,
                     "--no-wandb", *extra])


def resume(checkpoint_dir, run_name, *extra):
    return cli.main(["--resume", "--run-name", run_name, "--checkpoint-dir", str(checkpoint_dir),
                     "--no-wandb", *extra])


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_cartpole_run_trains_records_its_env_and_algo_and_logs_its_own_metrics(tmp_path,
                                                                                 capsys):
    assert train(tmp_path, "cartpole") == 0
    run_dir = tmp_path / "cartpole"
    saved = ckpt.load_checkpoint(run_dir / f"checkpoint_{UPDATES}.pkl")
    assert saved["update"] == UPDATES
    assert (saved["config"]["env"], saved["config"]["algo"]) == ("CartPole-v1", "ppo")
    # Another env's defaults: the 64x2 mlp of PureJaxRL, over CartPole's 4 features.
    params, network = policy_loading.load_policy_params(run_dir)
    assert network == {"hidden_dim": 64, "num_layers": 2, "obs_dim": 4, "num_actions": 2,
                       "torso": "mlp", "shared": False, "activation": "tanh",
                       "conv_channels": 0}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["config"]["env"] == "CartPole-v1"

    logged = records(run_dir)
    assert [record["update"] for record in logged] == [2, 4, 6]
    for record in logged:
        # CartPole pays 1 a step: an episode's return is its length.
        assert record["train/mean_episode_return"] == record["train/mean_episode_length"] > 5
        assert record["train/mean_reward"] == 1.0 and record["train/num_episodes"] > 0
        assert not [key for key in record if key.startswith(("stats/", "reward/", "actions/"))]

    out = capsys.readouterr().out
    assert ("[config] env=CartPole-v1 algo=ppo network=separate(2x64 tanh) ent_coef=0.01->0.01 "
            "clip_value_loss=True reward=the env's own") in out
    lines = [line for line in out.splitlines() if line.startswith("[train]")]
    assert len(lines) == 3
    for line in lines:
        assert len(line) <= M.LINE_WIDTH == 160
        assert re.fullmatch(r"\[train\] update=\d/6 timesteps=\d+ sps=\d+ eta=\S+ return=\S+ "
                            r"entropy=\S+ kl=\S+ clip=\S+ ev=\S+", line), line
        assert "stage=" not in line


def test_an_a2c_run_takes_sb3s_defaults_and_records_its_algo(tmp_path, capsys):
    assert cli.main(["--env", "CartPole-v1", "--algo", "a2c", "--num-envs", "8",
                     "--total-timesteps", str(8 * 5 * 4), "--log-interval", "2",
                     "--checkpoint-dir", str(tmp_path), "--run-name", "a2c", "--no-wandb"]) == 0
    run_dir = tmp_path / "a2c"
    config = ckpt.load_checkpoint(run_dir / "checkpoint_4.pkl")["config"]
    assert {name: config[name] for name in ("env", "algo", "num_steps", "lr", "lr_schedule",
                                            "gae_lambda", "num_minibatches", "update_epochs")} == {
        "env": "CartPole-v1", "algo": "a2c", "num_steps": 5, "lr": 7e-4,
        "lr_schedule": "constant", "gae_lambda": 1.0, "num_minibatches": 1, "update_epochs": 1}
    logged = records(run_dir)
    assert [record["update"] for record in logged] == [2, 4]
    assert all(record["train/learning_rate"] == pytest.approx(7e-4) for record in logged)
    assert all(record["train/clip_fraction"] == 0.0 for record in logged)
    out = capsys.readouterr().out
    assert "num_minibatches=1 update_epochs=1 gradient_steps=1" in out
    assert "[config] env=CartPole-v1 algo=a2c " in out


@pytest.mark.parametrize("argv, message", [
    (["--env", "Nope"], "error: bad arguments: unknown --env Nope: use hackmatrix or a gymnax id "
                        "(Acrobot-v1, "),
    (["--env", "Pendulum-v1"], "error: bad arguments: --env Pendulum-v1 has a continuous action "
                               "space"),
    (["--env", "CartPole-v1", "--reward-weights", "kills=2"],
     "error: bad arguments: --reward-weights, --distance-shaping and --program-potential shape "
     "HackMatrix's reward: --env CartPole-v1 trains on its own"),
    (["--env", "CartPole-v1", "--distance-shaping", "potential"],
     "error: bad arguments: --reward-weights, --distance-shaping and --program-potential shape "
     "HackMatrix's reward: --env CartPole-v1 trains on its own"),
    (["--env", "CartPole-v1", "--eval-interval", "5"],
     "error: bad arguments: --eval-interval plays HackMatrix boards against its baselines; for "
     "--env CartPole-v1 use evaluate.py on the run"),
    (["--env", "CartPole-v1", "--torso", "ego"],
     "error: bad arguments: --torso ego reads HackMatrix's board: --env CartPole-v1 takes "
     "--torso mlp"),
    (["--env", "CartPole-v1", "--algo", "a2c", "--num-minibatches", "4"],
     "error: bad arguments: --algo a2c takes one gradient step per rollout"),
], ids=["unknown", "continuous", "reward_weights", "distance_shaping", "eval_interval", "torso",
        "a2c_minibatches"])
def test_what_another_env_cannot_do_exits_3_with_one_line_before_any_work(argv, message,
                                                                         tmp_path, capsys):
    assert cli.main([*argv, "--checkpoint-dir", str(tmp_path), "--run-name", "refused",
                     "--no-wandb"]) == cli.EXIT_BAD_ARGUMENTS == 3
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(message), line
    assert "[train]" not in captured.out and "[compile]" not in captured.out
    assert not (tmp_path / "refused").exists()


@pytest.mark.parametrize("flags, message", [
    (["--env", "hackmatrix"], "--env hackmatrix but the checkpoint's run trains --env "
                              "CartPole-v1: a run keeps its env and algorithm"),
    (["--algo", "a2c"], "--algo a2c but the checkpoint's run trains --algo ppo: a run keeps its "
                        "env and algorithm"),
], ids=["env", "algo"])
def test_resuming_with_another_env_or_algorithm_exits_6(flags, message, tmp_path, capsys):
    assert train(tmp_path, "kept", "--total-timesteps", str(4 * 16 * 2)) == 0
    capsys.readouterr()
    before = sorted(path.name for path in (tmp_path / "kept").iterdir())
    assert resume(tmp_path, "kept", "--total-timesteps", str(4 * 16 * 4),
                  *flags) == cli.EXIT_BAD_CHECKPOINT == 6
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: checkpoint:") and message in line, line
    assert sorted(path.name for path in (tmp_path / "kept").iterdir()) == before
    # Named again as it was, the env and algorithm are no change: the run goes on.
    assert resume(tmp_path, "kept", "--total-timesteps", str(4 * 16 * 4), "--env", "CartPole-v1",
                  "--algo", "ppo") == 0
    assert ckpt.load_checkpoint(tmp_path / "kept" / "checkpoint_4.pkl")["update"] == 4


def test_an_interrupted_cartpole_run_resumes_bit_identically(tmp_path, monkeypatch, capsys):
    assert train(tmp_path, "straight") == 0
    # A real SIGINT to this process right after the first log line (update 2).
    format_line = M.format_line

    def interrupting_format_line(record, *args):
        if record["update"] == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return format_line(record, *args)

    monkeypatch.setattr(M, "format_line", interrupting_format_line)
    assert train(tmp_path, "interrupted") == cli.EXIT_INTERRUPTED
    monkeypatch.setattr(M, "format_line", format_line)
    run_dir = tmp_path / "interrupted"
    assert [update for update, _ in ckpt.list_checkpoints(run_dir)] == [2]
    # The resume keeps the env without being told.
    assert resume(tmp_path, "interrupted") == 0
    final = ckpt.load_checkpoint(run_dir / f"checkpoint_{UPDATES}.pkl")
    assert final["update"] == UPDATES and final["config"]["env"] == "CartPole-v1"
    assert_same_params(load_params(tmp_path / "straight" / "final_params.npz"),
                       load_params(run_dir / "final_params.npz"))
    straight, resumed = records(tmp_path / "straight"), records(run_dir)
    assert [record["update"] for record in resumed] == [2, 4, 6]
    for key in ("train/mean_episode_return", "train/pg_loss", "train/value_loss"):
        assert [r[key] for r in straight] == [r[key] for r in resumed], key
