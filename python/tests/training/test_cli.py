"""train_purejaxrl CLI on the real env: outputs, exact resume after SIGINT, exit codes, wandb."""

import concurrent.futures
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hackmatrix import xla_options
from hackmatrix.shell import interrupts
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli, policy_loading, resume, run_records, startup, training_run
from hackmatrix.training import metrics as M

from tiny_runs import TINY, TOTAL, UPDATES, assert_same_params, load_params, train

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train_purejaxrl.py"


def test_end_to_end_run_writes_checkpoint_params_metrics_and_summary(tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative --checkpoint-dir: summary.json's paths are absolute
    assert train(Path("runs"), "e2e", "--save-interval", "2", "--keep-checkpoints", "2") == 0
    run_dir = tmp_path / "runs" / "e2e"
    assert [update for update, _ in ckpt.list_checkpoints(run_dir)] == [4, 6]
    assert {p.name for p in run_dir.glob("params_*.npz")} == {"params_4.npz", "params_6.npz"}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in records] == [2, 4, 6]
    assert records[-1]["timesteps"] == 8 * 16 * UPDATES
    for key in ("train/sps", "train/mean_episode_return", "train/approx_kl", "train/entropy",
                "reward/step_penalty", "actions/move_frac", "stats/highest_stage"):
        assert key in records[-1]
    summary = json.loads((run_dir / "summary.json").read_text())
    lr, batch = summary["config"]["lr"], 8 * 16
    assert summary["config"]["lr_schedule"] == "linear"
    for record in records:
        assert 0 < record["train/grad_norm"] < 1e3 and -10 < record["train/explained_variance"] <= 1
        # The rate the record's last update applied: annealed by the steps trained before it.
        last_update_start = record["timesteps"] - batch
        assert record["train/learning_rate"] == pytest.approx(
            lr * (1 - last_update_start / (batch * UPDATES)), rel=1e-6)
    assert summary["status"] == "completed" and summary["update"] == UPDATES
    assert summary["compile_seconds"] > 0 and summary["sps"] > 0
    paths = [summary["run_dir"], *summary["checkpoints"], summary["final_params"]]
    assert all(Path(path).is_absolute() for path in paths)
    assert [Path(path).resolve() for path in paths] == [
        path.resolve() for path in (run_dir, run_dir / "checkpoint_4.pkl",
                                    run_dir / "checkpoint_6.pkl", run_dir / "final_params.npz")]
    # The CPU compile mode in effect is recorded and printed (hackmatrix/xla_options.py).
    assert (summary["backend"], summary["cpu_compile"]) == ("cpu", xla_options.cpu_compile_mode())
    params, network = policy_loading.load_policy_params(run_dir)
    # The default architecture (separate egocentric tanh torsos, 16 channels per cell), from
    # the params file's own record.
    assert network == {"hidden_dim": 32, "num_layers": 2, "obs_dim": 1545, "num_actions": 28,
                       "torso": "ego", "shared": False, "activation": "tanh", "conv_channels": 16}
    assert policy_loading.load_policy_params(run_dir / "final_params.npz")[1] == network
    out = capsys.readouterr().out
    # The default training reward is the potential-shaped one, named as not the rules' own.
    assert ("[config] env=hackmatrix algo=ppo network=separate(ego16+2x32 tanh) ent_coef=0.01->0.01 "
            "clip_value_loss=True reward=distance_shaping=potential (not the rules' reward; "
            "evaluation reports the game's outcomes)") in out
    assert "batch_size=128 minibatch_size=32" in out and "auto_scaled=no" in out
    assert f"device=cpu cpu_compile={summary['cpu_compile']} " in out
    lines = [line for line in out.splitlines() if line.startswith("[train]")]
    assert len(lines) == 3 and all(len(line) <= M.LINE_WIDTH for line in lines)
    assert all(re.fullmatch(r"\[train\] update=\d+/6 timesteps=\d+ sps=\d+ eta=\S+ return=\S+ "
                            r"stage=\S+ entropy=\S+ kl=\S+ clip=\S+ ev=\S+", line)
               for line in lines), lines
    # Resumed through a relative path: the summary names the checkpoint absolutely.
    assert cli.main(["--resume", "runs/e2e", "--total-timesteps", str(8 * 16 * (UPDATES + 2)),
                     "--no-wandb"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert Path(summary["resumed_from"]).is_absolute()
    assert Path(summary["resumed_from"]).resolve() == (run_dir / "checkpoint_6.pkl").resolve()


@pytest.mark.parametrize("devices", [[], ["--num-devices", "2"]], ids=["one_device", "two_devices"])
def test_sigint_checkpoint_then_resume_gives_bit_identical_params(tmp_path, monkeypatch, devices,
                                                                  capsys):
    def train(tmp_path, run_name):
        return cli.main([*TINY, *devices, *TOTAL, "--checkpoint-dir", str(tmp_path),
                         "--run-name", run_name, "--no-wandb"])
    assert train(tmp_path, "straight") == 0

    # Deliver a real SIGINT to this process right after the first log line (update 2).
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
    first_id = ckpt.load_checkpoint(run_dir / "checkpoint_2.pkl")["wandb_run_id"]

    assert cli.main(["--resume", "--run-name", "interrupted", "--checkpoint-dir", str(tmp_path),
                     "--no-wandb"]) == 0
    final = ckpt.load_checkpoint(run_dir / f"checkpoint_{UPDATES}.pkl")
    assert final["update"] == UPDATES and final["wandb_run_id"] == first_id
    assert_same_params(load_params(tmp_path / "straight" / "final_params.npz"),
                       load_params(run_dir / "final_params.npz"))
    records = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in records] == [2, 4, 6]
    # The resume kept the checkpoint's device count without being told.
    num_devices = 2 if devices else 1
    assert final["config"]["num_devices"] == num_devices
    out = capsys.readouterr().out
    assert out.count(f"num_devices={num_devices} ") == 3
    # Two CPU devices warn on every start that XLA:CPU does not reproduce them bit for bit.
    assert out.count("CPU devices: runs are not bit-reproducible") == (3 if devices else 0)


def test_a_signal_during_the_last_chunk_lets_the_run_complete(tmp_path, monkeypatch, capsys):
    format_line = M.format_line
    def interrupting_format_line(record, *args):
        if record["update"] == UPDATES:
            os.kill(os.getpid(), signal.SIGINT)
        return format_line(record, *args)
    monkeypatch.setattr(M, "format_line", interrupting_format_line)
    assert cli.main([*TINY, *TOTAL, "--checkpoint-dir", str(tmp_path), "--run-name", "last",
                     "--no-wandb"]) == 0
    run_dir = tmp_path / "last"
    assert (run_dir / "final_params.npz").is_file()
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    out = capsys.readouterr().out
    assert "[signal] SIGINT came during the last chunk: the run is complete" in out


def test_a_reader_that_goes_away_does_not_end_the_run(tmp_path, kill_if_hung):
    # `train_purejaxrl.py ... | head -3`, or a pager quit early: the run goes on to its end (its
    # lines are in metrics.jsonl). It used to stop with "error: BrokenPipeError", unsaved.
    command = [sys.executable, str(SCRIPT), *TINY, *TOTAL, "--checkpoint-dir", str(tmp_path),
               "--run-name", "headless", "--no-wandb"]
    process = kill_if_hung(subprocess.Popen(
        command, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True))
    assert process.stdout.readline().startswith("[config]")
    process.stdout.close()
    errors = process.stderr.read()
    assert process.wait(timeout=300) == 0, errors
    summary = json.loads((tmp_path / "headless" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["update"] == UPDATES


def test_a_run_started_without_stdout_completes(tmp_path, monkeypatch):
    # `train_purejaxrl.py ... >&-` (Python's sys.stdout is None) failed at once on isatty().
    monkeypatch.setattr(sys, "stdout", None)
    assert train(tmp_path, "no_stdout") == 0
    assert sys.stdout is None  # put back
    assert (tmp_path / "no_stdout" / "final_params.npz").is_file()


def _logged_record(**values) -> dict:
    """A metrics.jsonl record as the trainer logs it, every stdout field a distinct value."""
    record = {"update": 7, "timesteps": 896, "train/sps": 1234.4,
              "train/mean_episode_return": -1.25, "train/mean_episode_length": 43.5,
              "train/num_episodes": 12, "train/mean_reward": -0.0123, "train/pg_loss": 0.0456,
              "train/value_loss": 0.789, "train/entropy": 2.5, "train/approx_kl": 0.002,
              "train/clip_fraction": 0.03, "train/explained_variance": 0.51234,
              "stats/highest_stage": 3, "stats/mean_final_stage": 1.75}
    return {**record, **values}


def test_the_train_line_names_each_value_by_its_own_key():
    line = M.format_line(_logged_record(), 10, 3725.0)
    assert line == ("[train] update=7/10 timesteps=896 sps=1234 eta=1h02m05s return=-1.25 "
                    "stage=1.75 entropy=2.5 kl=0.002 clip=0.03 ev=0.512")
    line = M.format_line(_logged_record(**{"train/mean_episode_return": float("nan"),
                                               "train/approx_kl": 4e-5}), 10, float("inf"))
    assert " return=nan " in line and " kl=4e-05 " in line and " eta=? " in line
    assert M.format_duration(59.9) == "0m59s" and M.format_duration(3600) == "1h00m00s"


def test_the_train_line_fits_a_160_column_pane_with_its_widest_values():
    # The widest value of each field: 100,000 updates of 2^15 steps, a 1000-hour ETA, signed
    # values in exponent form (3 significant digits), the mean stage of a run past stage 1.
    line = M.format_line(_logged_record(**{
        "update": 99_999, "timesteps": 3_276_767_232, "train/sps": 123_456.0,
        "train/mean_episode_return": -1.23456e-5, "stats/mean_final_stage": 7.6666,
        "train/entropy": 1.23456e-5, "train/approx_kl": -1.23456e-9,
        "train/clip_fraction": 0.000123456, "train/explained_variance": -12345.6}),
        100_000, 3_599_999.0)
    assert line == ("[train] update=99999/100000 timesteps=3276767232 sps=123456 eta=999h59m59s "
                    "return=-1.23e-05 stage=7.67 entropy=1.23e-05 kl=-1.23e-09 clip=0.000123 "
                    "ev=-1.23e+04")
    assert len(line) <= M.LINE_WIDTH == 160


def test_a_window_saved_without_explained_variance_restores_it_as_undefined():
    window = M.MetricsWindow(batch_size=128)
    window.add({**{key: np.ones(2) for key in M.MEAN_KEYS}, **{
        key: np.ones((2, 15)) if key == "reward_components_sum" else np.ones(2)
        for key in M.SUM_KEYS}, "highest_stage": np.ones(2), "learning_rate": np.ones(2)}, 2)
    state = window.state(seconds=1.0)
    del state["loss_sums"]["explained_variance"]
    restored = M.MetricsWindow(batch_size=128)
    assert restored.restore(state) == 1.0
    metrics = restored.summarize()
    assert math.isnan(metrics["train/explained_variance"]) and metrics["train/entropy"] == 1.0


@pytest.mark.parametrize("values, warned", [
    ({}, []),
    ({"train/approx_kl": 0.08, "train/clip_fraction": 0.35, "train/entropy": 0.1}, []),
    ({"train/approx_kl": 0.081}, ["approx_kl 0.081 > 0.08"]),
    ({"train/clip_fraction": 0.351}, ["clip_fraction 0.351 > 0.35"]),
    ({"train/entropy": 0.0999}, ["entropy 0.0999 < 0.1"]),
    ({"train/approx_kl": 0.5, "train/clip_fraction": 0.9, "train/entropy": 0.01},
     ["approx_kl", "clip_fraction", "entropy"]),
])
def test_health_warnings_follow_the_monitoring_thresholds(values, warned):
    # specs/training.md: approx_kl > 0.08, clip_fraction > 0.35, entropy < 0.1; one line each.
    warnings = M.health_warnings(_logged_record(**values))
    assert len(warnings) == len(warned), warnings
    for warning, start in zip(warnings, warned):
        assert warning.startswith(f"[health] update=7 {start}"), warning


class _FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_bar_is_drawn_on_a_terminal_only_and_counts_updates(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    plain = M.Console(total_updates=10, start_update=2)
    assert plain.bar is None  # in a file: plain lines, no bar
    plain.print("[train] update=4/10")
    assert sys.stdout.getvalue() == "[train] update=4/10\n"
    monkeypatch.setattr(sys, "stdout", _FakeTerminal())
    assert M.Console(10, 2, force_plain=True).bar is None
    console = M.Console(total_updates=10, start_update=2)
    try:
        assert console.bar is not None and console.bar.n == 2
        console.advance(3)
        assert console.bar.n == 5
    finally:
        console.close()


def test_truncated_checkpoint_exits_6(tmp_path, capsys):
    run_dir = tmp_path / "broken"
    run_dir.mkdir()
    (run_dir / "checkpoint_3.pkl").write_bytes(b"\x80\x05\x95\x10\x00\x00")
    assert cli.main(["--resume", str(run_dir), "--no-wandb"]) == cli.EXIT_BAD_CHECKPOINT
    assert cli.main(["--resume", str(tmp_path / "missing.pkl"), "--no-wandb"]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("error: checkpoint:") for line in err) and len(err) == 2
    assert "previous checkpoint" not in err[0]  # the run has no other


def test_a_corrupt_newest_checkpoint_names_the_runs_previous_one(tmp_path, capsys):
    run_dir = tmp_path / "broken"
    run_dir.mkdir()
    for update in (1, 2, 3):
        (run_dir / f"checkpoint_{update}.pkl").write_bytes(b"\x80\x05\x95\x10\x00\x00")
    previous = f"to resume from the run's previous checkpoint: --resume {run_dir}/checkpoint_2.pkl"
    for argv in (["--resume", str(run_dir)],
                 ["--resume", "--checkpoint-dir", str(tmp_path), "--run-name", "broken"]):
        assert cli.main(argv + ["--no-wandb"]) == cli.EXIT_BAD_CHECKPOINT
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"{run_dir}/checkpoint_3.pkl" in line and line.endswith(previous)
    # Named explicitly, the file is what the user asked for: no other is suggested.
    assert cli.main(["--resume", str(run_dir / "checkpoint_3.pkl"), "--no-wandb"]) == 6
    assert "previous checkpoint" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--bogus"],
    ["--num-envs", "0"],
    ["--num-envs", "6", "--num-steps", "5", "--num-minibatches", "4"],
    ["--wandb-mode", "sometimes"],
    ["--total-timesteps", "ten"],
    ["--total-timesteps", "2.5"],
    ["--total-timesteps", "inf"],
    ["--num-devices", "0"],
    ["--num-envs", "6", "--num-devices", "4"],
    ["--num-envs", "512", "--num-minibatches", "0"],  # 0 reaches validate, not a division
])
def test_bad_flags_exit_3_with_the_reason(argv, capsys):
    assert cli.main(argv + ["--no-wandb"]) == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err.startswith("error: bad arguments:")


@pytest.mark.parametrize("text", ["5000000", "5e6", "5_000_000", "5.0e6"])
def test_total_timesteps_take_the_usual_ways_of_writing_a_large_count(text):
    assert cli.build_parser().parse_args(["--total-timesteps", text]).total_timesteps == 5_000_000


def test_more_devices_than_jax_sees_names_the_count(tmp_path, capsys):
    import jax
    assert jax.local_device_count() == 2  # started here: the count cannot change any more
    assert cli.main(["--num-envs", "8", "--num-devices", "8", "--no-wandb",
                     "--checkpoint-dir", str(tmp_path)]) == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err.strip().endswith(  # the tests' process has two
        "--num-devices 8, but JAX sees 2 cpu device(s) (on CPU at most 64)")


@pytest.mark.parametrize("available, used", [(8, 8), (6, 4), (3, 2)])
def test_an_accelerator_default_that_leaves_devices_idle_says_so(available, used):
    args = cli.build_parser().parse_args([])
    config, _, explicit = cli.fresh_config(args, "gpu", available)
    assert (config.num_envs, config.num_devices) == (2048, used)
    note = cli._idle_devices_note(config, explicit, "gpu", available)
    if used == available:
        assert note is None
    else:
        assert note == (f"[config] note: using {used} of the {available} gpu devices: the 2048 "
                        "envs and their 32 minibatches do not split evenly over more (each device "
                        "steps an equal share of the envs and of every minibatch; --num-devices "
                        "sets the count)")
    explicit_args = cli.build_parser().parse_args(["--num-devices", "2"])
    config, _, explicit = cli.fresh_config(explicit_args, "gpu", available)
    assert cli._idle_devices_note(config, explicit, "gpu", available) is None


def test_a_huge_device_count_is_refused_before_it_fills_the_memory(tmp_path):
    # JAX builds the CPU devices it is asked for when its backends start, before any check; 10**8
    # of them once took every byte of memory. Capped at 64, the count then fails validation.
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--num-envs", "9", "--num-devices", "100000000",
         "--no-wandb", "--checkpoint-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == cli.EXIT_BAD_ARGUMENTS, result.stderr
    assert "--num-envs 9 is not divisible by --num-devices 100000000" in result.stderr


def test_help_lists_every_flag_the_issue_names(capsys):
    # Each as an option of its own: "--wandb" inside "--wandb-project" does not count. That
    # every flag has help text is test_flags_fuzz's check.
    assert cli.main(["--help"]) == 0
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]\b(?!-)", capsys.readouterr().out))
    for flag in ("--total-timesteps", "--num-envs", "--num-steps", "--num-minibatches",
                 "--update-epochs", "--lr", "--anneal-lr", "--gamma", "--gae-lambda", "--clip-eps",
                 "--ent-coef", "--vf-coef", "--max-grad-norm", "--hidden-dim", "--num-layers",
                 "--seed", "--num-devices", "--checkpoint-dir", "--run-name", "--save-interval-minutes",
                 "--save-interval", "--keep-checkpoints", "--resume", "--keep-optimizer",
                 "--wandb", "--no-wandb", "--wandb-project", "--wandb-entity", "--wandb-mode",
                 "--no-artifact", "--artifact", "--log-interval", "--verbose",
                 # the architecture, schedule, reward and evaluation options
                 "--lr-schedule", "--no-anneal-lr", "--ent-coef-end", "--clip-value-loss",
                 "--no-clip-value-loss", "--torso", "--shared-torso", "--no-shared-torso",
                 "--activation", "--conv-channels", "--reward-weights", "--distance-shaping",
                 "--eval-interval", "--eval-episodes"):
        assert flag in options


def offline_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "NETRC"}
    # No credentials anywhere: the run must pick offline mode by itself and need no network.
    env.update(HOME=str(tmp_path), NETRC=str(tmp_path / "no-netrc"), WANDB_SILENT="true",
               WANDB_CACHE_DIR=str(tmp_path / "wandb-cache"),
               WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"))
    return env


def test_without_credentials_wandb_runs_offline_and_sigterm_exits_7(tmp_path, kill_if_hung):
    command = [sys.executable, str(SCRIPT), *TINY, "--total-timesteps", str(8 * 16 * 2000),
               "--checkpoint-dir", str(tmp_path), "--run-name", "offline"]
    process = kill_if_hung(subprocess.Popen(command, env=offline_env(tmp_path),
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True))
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("[train]"):
            process.send_signal(signal.SIGTERM)
            break
    lines += process.stdout.readlines()
    assert process.wait(timeout=120) == cli.EXIT_INTERRUPTED, "".join(lines)
    run_dir = tmp_path / "offline"
    assert ckpt.list_checkpoints(run_dir), "".join(lines)
    offline_runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert offline_runs, "".join(lines)
    run_id = ckpt.load_checkpoint(ckpt.newest_checkpoint(run_dir))["wandb_run_id"]
    assert offline_runs[0].name.endswith(run_id)
    # The hint syncs every session of the run (a resume logs to a folder of its own).
    assert f"`wandb sync {run_dir / 'wandb'}/offline-run-*-{run_id}`" in "".join(lines)
    # The interrupted session's checkpoint is staged as an artifact, and only it.
    staged = [p for p in (tmp_path / ".local/share/wandb/artifacts/staging").rglob("*")
              if p.is_file()]
    assert len(staged) == 2, staged  # checkpoint_N.pkl and params_N.npz


def _resized_restore(saved, num_envs, keep_optimizer):
    """`resume.restore_runner` for a checkpoint resumed with another env count, on a shape-only
    template."""
    import dataclasses

    import jax

    from hackmatrix.envs.hackmatrix_env import HackMatrixTrainingEnv as HackMatrixEnv
    from hackmatrix.training import trainer as ppo
    from hackmatrix.training.config import TrainConfig

    config = dataclasses.replace(TrainConfig.from_dict(saved["config"]), num_envs=num_envs)
    env = HackMatrixEnv()
    trainer = ppo.make_trainer(config, env, env.default_params)
    fresh = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))
    messages = []
    return resume.restore_runner(fresh, saved, config, keep_optimizer, messages.append), messages


def test_resume_with_another_num_envs_resets_the_optimizer_unless_kept(tmp_path):
    import jax

    assert train(tmp_path, "resized") == 0
    saved = ckpt.load_checkpoint(ckpt.newest_checkpoint(tmp_path / "resized"))
    saved_opt_leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(saved["opt_state"])]

    runner, messages = _resized_restore(saved, num_envs=4, keep_optimizer=False)
    assert len(messages) == 1
    assert "num_envs 8 -> 4: optimizer state reset" in messages[0]
    assert "--keep-optimizer" in messages[0] and "every env starts a new game" in messages[0]
    for restored, stored in zip(jax.tree.leaves(runner.train.params),
                                jax.tree.leaves(saved["params"])):
        np.testing.assert_array_equal(restored, stored)
    # The optimiser state is the fresh template's, and the env batch is new (4 envs).
    assert all(isinstance(leaf, jax.ShapeDtypeStruct)
               for leaf in jax.tree.leaves(runner.train.opt_state))
    assert runner.envs.episode_return.shape == (4,)
    assert float(runner.train.schedule_timesteps) == float(saved["schedule_timesteps"])

    runner, messages = _resized_restore(saved, num_envs=4, keep_optimizer=True)
    assert len(messages) == 1 and "optimizer" not in messages[0]
    assert "num_envs 8 -> 4: every env starts a new game" in messages[0]
    for restored, stored in zip(jax.tree.leaves(runner.train.opt_state), saved_opt_leaves):
        np.testing.assert_array_equal(restored, stored)


@pytest.mark.parametrize("failing, other, error, expected_code, expected_line", [
    ("_compile_chunk", "_run_init", RuntimeError("chunk compile failed\nsecond line"),
     cli.EXIT_FAILURE, "error: RuntimeError: chunk compile failed"),
    ("_run_init", "_compile_chunk", KeyboardInterrupt(), cli.EXIT_INTERRUPTED,
     "[exit] interrupted by SIGINT during set-up, before the first update: nothing to save"),
])
def test_compile_phase_errors_reach_main_as_before_after_the_other_compile_ends(
        tmp_path, capsys, monkeypatch, failing, other, error, expected_code, expected_line):
    # init and run_chunk compile in worker threads; an error in one (a SIGINT in the main
    # thread included) must give the usual one-line error and exit code, and only once the
    # other worker has finished (exiting with an XLA compile still running crashes).
    real_failing, real_other, finished = getattr(startup, failing), getattr(startup, other), []
    def fail(*args):
        real_failing(*args)
        raise error
    def record(*args):
        result = real_other(*args)
        finished.append(other)
        return result
    monkeypatch.setattr(startup, failing, fail)
    monkeypatch.setattr(startup, other, record)
    assert train(tmp_path, "failing") == expected_code
    assert finished == [other]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(expected_line), err
    assert not ckpt.list_checkpoints(tmp_path / "failing")


def test_an_interrupt_during_set_up_says_why_it_waits_for_the_compile(
        tmp_path, capsys, monkeypatch):
    real_compile = startup._compile_chunk

    def slow_compile(*args):
        time.sleep(1.0)  # still compiling when the interrupt arrives
        return real_compile(*args)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(startup, "_compile_chunk", slow_compile)
    monkeypatch.setattr(startup, "_run_init", interrupted)
    assert train(tmp_path, "waits") == cli.EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert ("[signal] an XLA compile cannot be cut short: exiting when the one running ends "
            "(signal again to exit at once)" in captured.out.splitlines())
    assert captured.err.startswith("[exit] interrupted by SIGINT during set-up")


class _ExitedAtOnce(BaseException):
    """Stands in for os._exit, which would end the test process."""


def test_a_signal_while_set_up_waits_for_a_compile_exits_at_once(monkeypatch, capsys):
    exits = []

    def exit_at_once(code):
        exits.append(code)
        raise _ExitedAtOnce

    monkeypatch.setattr(startup, "_exit_at_once", exit_at_once)
    compiling = concurrent.futures.Future()  # a compile that has not ended (and never will)
    second_signal = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    with interrupts.signals_raise():
        second_signal.start()
        with pytest.raises(_ExitedAtOnce):
            startup._wait_for_the_compile(compiling)
    assert exits == [cli.EXIT_INTERRUPTED]
    assert capsys.readouterr().err == ("[signal] exiting now, before the compile ends; nothing to "
                                       "save (earlier checkpoints are intact)\n")


def test_a_finished_compile_is_waited_for_without_exiting(monkeypatch):
    monkeypatch.setattr(startup, "_exit_at_once", lambda code: pytest.fail("exited"))
    compiled = concurrent.futures.Future()
    compiled.set_exception(RuntimeError("the compile failed"))  # its error is the caller's
    startup._wait_for_the_compile(compiled)


def test_wandb_starts_while_the_first_chunk_runs_and_an_interrupt_then_exits_7(
        tmp_path, capsys, monkeypatch):
    events = []
    real_build = startup.build_runner_and_chunk

    def build(*args):
        runner, run_chunk = real_build(*args)

        def recorded_chunk(*chunk_args):
            events.append("chunk dispatched")
            return run_chunk(*chunk_args)
        return runner, recorded_chunk

    def interrupted_wandb_start(**kwargs):
        events.append("wandb starts")
        raise KeyboardInterrupt

    monkeypatch.setattr(startup, "build_runner_and_chunk", build)
    monkeypatch.setattr(training_run, "WandbSink", interrupted_wandb_start)
    assert train(tmp_path, "early") == cli.EXIT_INTERRUPTED
    assert events == ["chunk dispatched", "wandb starts"]
    assert capsys.readouterr().err.startswith("[exit] interrupted by SIGINT during set-up")
    # Set-up ended before the run directory's: no metrics, summary or checkpoint.
    assert sorted(p.name for p in (tmp_path / "early").iterdir()) == [".lock"]


def test_the_first_windows_pace_leaves_out_wandbs_start(tmp_path, monkeypatch):
    # wandb starts while the first chunk runs; the chunk's time is when its outputs were
    # ready, not when the loop, back from wandb's start, reads them.
    class SlowStartingSink(training_run.WandbSink):
        def __init__(self, **kwargs):
            time.sleep(5.0)
            super().__init__(**{**kwargs, "mode": "disabled"})

    monkeypatch.setattr(training_run, "WandbSink", SlowStartingSink)
    assert cli.main([*TINY, *TOTAL, "--checkpoint-dir", str(tmp_path), "--run-name", "paced",
                     "--wandb-mode", "offline"]) == 0
    first = json.loads((tmp_path / "paced" / "metrics.jsonl").read_text().splitlines()[0])
    # Two tiny updates take well under the 5 s that wandb's start took here.
    assert first["timesteps"] / first["train/sps"] < 4.0


def test_conflicting_flags_say_which_one_wins(tmp_path, capsys):
    # `train` adds --no-wandb. A timer of 0 minutes would save at every logged update (2, 4).
    assert train(tmp_path, "quiet", "--wandb-mode", "online", "--save-interval", "5",
                 "--save-interval-minutes", "0") == 0
    out = capsys.readouterr().out
    assert "[config] note: --no-wandb turns wandb off: --wandb-mode online is ignored" in out
    assert ("[config] note: --save-interval 5 replaces the timer: --save-interval-minutes 0 is "
            "ignored") in out
    summary = json.loads((tmp_path / "quiet" / "summary.json").read_text())
    assert summary["wandb"]["mode"] == "disabled"
    assert sorted(p.name for p in (tmp_path / "quiet").glob("checkpoint_*.pkl")) == [
        "checkpoint_5.pkl", f"checkpoint_{UPDATES}.pkl"]


def test_runner_and_chunk_signatures_ignore_weak_types():
    import jax
    import jax.numpy as jnp

    tree = {"weak": jnp.asarray(1.0), "strong": jnp.float32(2.0),
            "shape": jax.ShapeDtypeStruct((3,), jnp.float32, weak_type=True)}
    assert tree["weak"].weak_type
    strong = startup.without_weak_types(tree)
    assert not strong["weak"].weak_type and strong["weak"].dtype == jnp.float32
    assert strong["strong"] is tree["strong"]
    assert strong["shape"] == jax.ShapeDtypeStruct((3,), jnp.float32)


def test_params_flax_returns_as_frozen_dicts_are_saved_as_plain_dicts(tmp_path):
    # The checkpoint reader loads no flax class (checkpoint_pickle.CHECKPOINT_GLOBALS).
    import flax
    flax.config.update("flax_return_frozendict", True)  # as FLAX_RETURN_FROZENDICT=true does
    try:
        assert train(tmp_path, "frozen") == 0
        checkpoint = ckpt.newest_checkpoint(tmp_path / "frozen")
        assert type(ckpt.read_checkpoint(checkpoint)["params"]) is dict
        assert cli.main(["--resume", str(checkpoint), "--total-timesteps",
                         str(8 * 16 * (UPDATES + 1)), "--no-wandb"]) == 0
    finally:
        flax.config.update("flax_return_frozendict", False)


def test_the_timer_saves_on_its_interval_and_at_0_minutes_after_every_chunk(tmp_path, capsys,
                                                                            monkeypatch):
    # The default saving rule (checkpoints on a timer): no other test lets the timer save.
    assert train(tmp_path, "every_chunk", "--save-interval-minutes", "0",
                 "--keep-checkpoints", "0") == 0
    assert [u for u, _ in ckpt.list_checkpoints(tmp_path / "every_chunk")] == [2, 4, UPDATES]
    assert capsys.readouterr().out.count("(every chunk)") == 2
    # A clock that moves 10 minutes between readings: a 5-minute timer is due at every chunk.
    readings = iter(range(0, 10**6, 600))
    monkeypatch.setattr(training_run, "time", type("Clock", (), {
        "perf_counter": staticmethod(time.perf_counter),
        "monotonic": staticmethod(lambda: float(next(readings)))}))
    assert train(tmp_path, "timed", "--save-interval-minutes", "5", "--keep-checkpoints", "0") == 0
    assert [u for u, _ in ckpt.list_checkpoints(tmp_path / "timed")] == [2, 4, UPDATES]
    assert capsys.readouterr().out.count("(every 5 minutes)") == 2


def test_a_restart_loads_every_program_from_the_compilation_cache(tmp_path):
    # A restart does not recompile: the second start, with the first one's cache,
    # must add no entry to it (every program is cached, however quickly it compiled).
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache"),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}

    def entries():
        return sorted(p.name for p in (tmp_path / "cache").iterdir()
                      if not p.name.endswith("-atime"))
    listings = []
    for run_name in ("first", "restart"):
        result = subprocess.run([sys.executable, str(SCRIPT), *TINY, *TOTAL, "--checkpoint-dir",
                                 str(tmp_path), "--run-name", run_name, "--no-wandb"],
                                env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        listings.append(entries())
    assert listings[0] and listings[1] == listings[0]


class FakeWandbRun:
    """What the trainer hands wandb: `init`'s arguments, the records and the artifacts."""

    def __init__(self, directory, **init):
        self.init, self.id, self.dir = init, init["id"], str(directory)
        self.records, self.artifacts, self.summary, self.exit_code = [], [], {}, None

    def define_metric(self, *args, **kwargs):
        pass

    def log(self, record):
        self.records.append(record)

    def log_artifact(self, artifact, aliases):
        self.artifacts.append(aliases[-1])

    def finish(self, exit_code):
        self.exit_code = exit_code


def test_a_resumed_session_continues_the_same_wandb_run_with_its_config(tmp_path, monkeypatch):
    # The same wandb run (resumed, not a new one), the config and git commit recorded,
    # the checkpoint as an artifact unless --no-artifact.
    import types

    runs = []

    def init(**kwargs):
        runs.append(FakeWandbRun(tmp_path / "wandb" / f"session-{len(runs)}" / "files", **kwargs))
        return runs[-1]

    artifact = types.SimpleNamespace(add_file=lambda path: None)
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(
        init=init, Settings=lambda **kwargs: kwargs, Artifact=lambda *a, **k: artifact))
    monkeypatch.chdir(tmp_path)  # a relative --checkpoint-dir: wandb still gets an absolute dir
    assert train(Path("runs"), "logged", "--wandb", "--wandb-mode", "offline") == 0
    assert cli.main(["--resume", "--checkpoint-dir", "runs", "--run-name", "logged",
                     "--total-timesteps", str(8 * 16 * (UPDATES + 2)), "--no-artifact"]) == 0

    first, second = runs
    assert first.init["resume"] is None and second.init["resume"] == "allow"
    assert first.init["dir"] == second.init["dir"] == str(tmp_path / "runs" / "logged")
    assert first.id == second.id == ckpt.load_checkpoint(
        ckpt.newest_checkpoint(tmp_path / "runs" / "logged"))["wandb_run_id"]
    assert first.init["name"] == second.init["name"] == "logged"
    assert first.init["project"] == "hackmatrix" and first.init["mode"] == "offline"
    assert first.init["config"]["git_commit"] == run_records.git_commit()
    assert first.init["config"]["num_envs"] == 8 and first.init["config"]["batch_size"] == 128
    assert [r["update"] for r in first.records] == [2, 4, 6]
    assert [r["update"] for r in second.records] == [8]
    # Offline, the artifact is logged once, at the session's end; --no-artifact logs none.
    assert first.artifacts == [f"update-{UPDATES}"] and second.artifacts == []
    assert first.exit_code == second.exit_code == 0
