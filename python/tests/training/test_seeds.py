"""`--num-seeds K`: K agents in one program, each the one-agent run of its seed (`--seed + i`),
on CartPole-v1 (gymnax); their metrics, checkpoints and resume; the refusals (exit 3 before any
work, exit 6 on a resume that changes K); the host side of the agents' axis (`seeds.py`)."""

import json
import math
import shutil

import numpy as np
import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli, seeds
from hackmatrix.training import metrics as M
from hackmatrix.training.config import MAX_SEED
from hackmatrix.training.tensorboard_sink import read_events

from tiny_runs import assert_same_params, load_params

UPDATES = 6
CARTPOLE = ["--env", "CartPole-v1", "--num-envs", "4", "--num-steps", "16", "--log-interval",
            "2", "--total-timesteps", str(4 * 16 * UPDATES), "--no-wandb"]
SEED, AGENTS = 1, 4
# specs/training.md ("Several agents"): after 6 updates each agent's params are within this of
# its one-agent run's (measured: 6e-8; 2.4e-7 after 30 updates).
PARAMS_ATOL = 1e-6
# The rollouts are the same: the episodes' figures match exactly.
EPISODE_KEYS = ("train/mean_episode_return", "train/mean_episode_length", "train/num_episodes")


def train(checkpoint_dir, run_name, *extra):
    return cli.main([*CARTPOLE, "--checkpoint-dir", str(checkpoint_dir), "--run-name", run_name,
                     *extra])


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One run of AGENTS agents from --seed SEED, and the one-agent runs of seeds SEED + i."""
    pytest.importorskip("gymnax")
    root = tmp_path_factory.mktemp("seeds")
    assert train(root, "agents", "--seed", str(SEED), "--num-seeds", str(AGENTS)) == 0
    for agent in range(AGENTS):
        assert train(root, f"seed{SEED + agent}", "--seed", str(SEED + agent)) == 0
    return root


def test_each_agent_is_the_one_agent_run_of_its_seed(runs, capsys):
    many = load_params(runs / "agents" / "final_params.npz")
    assert many["meta/num_seeds"] == AGENTS
    logged = records(runs / "agents")
    for agent in range(AGENTS):
        one = load_params(runs / f"seed{SEED + agent}" / "final_params.npz")
        assert "meta/num_seeds" not in one
        for key in one:
            if key.startswith("params/"):
                assert many[key].shape == (AGENTS, *one[key].shape)
                np.testing.assert_allclose(many[key][agent], one[key], rtol=0, atol=PARAMS_ATOL,
                                           err_msg=key)
        for record, alone in zip(logged, records(runs / f"seed{SEED + agent}"), strict=True):
            assert record["update"] == alone["update"]
            for key in EPISODE_KEYS:
                assert record[seeds.agent_key(key, agent)] == alone[key], (agent, key)
            assert record[seeds.agent_key("train/approx_kl", agent)] == pytest.approx(
                alone["train/approx_kl"], rel=1e-2, abs=1e-7)
    leaves = [value for key, value in many.items() if key.startswith("params/")]
    assert not all(np.array_equal(leaf[0], leaf[1]) for leaf in leaves)  # the agents differ


def test_metrics_hold_the_mean_under_each_name_and_every_agents_values(runs, capsys):
    for record in records(runs / "agents"):
        for name in ("train/mean_episode_return", "train/entropy", "train/learning_rate"):
            values = [record[seeds.agent_key(name, agent)] for agent in range(AGENTS)]
            assert record[name] == pytest.approx(np.mean(values), rel=1e-12)
        assert not [key for key in record if key.startswith(f"agent/{AGENTS}/")]
    summary = json.loads((runs / "agents" / "summary.json").read_text())
    assert summary["config"]["num_seeds"] == AGENTS


def test_one_seed_is_the_run_without_the_flag(runs):
    assert train(runs, "one_seed", "--seed", str(SEED), "--num-seeds", "1") == 0
    assert_same_params(load_params(runs / f"seed{SEED}" / "final_params.npz"),
                       load_params(runs / "one_seed" / "final_params.npz"))
    for flagged, plain in zip(records(runs / "one_seed"), records(runs / f"seed{SEED}"),
                              strict=True):
        assert flagged.keys() == plain.keys()
        assert {**flagged, "train/sps": 0} == {**plain, "train/sps": 0}


def test_a_resume_continues_every_agent_and_its_part_filled_window(tmp_path, capsys):
    pytest.importorskip("gymnax")
    # Saved at update 3, between the log lines of updates 2 and 4.
    assert train(tmp_path, "straight", "--seed", "5", "--num-seeds", "2",
                 "--save-interval", "3", "--tensorboard") == 0
    straight = tmp_path / "straight"
    # TensorBoard gets each agent's values too, under metrics.jsonl's names.
    logged_tags = {value.tag for path in (straight / "tensorboard").glob("events.out.tfevents.*")
                   for event in read_events(path) for value in event.summary.value}
    assert {"train/mean_episode_return", "agent/0/train/mean_episode_return",
            "agent/1/train/mean_episode_return"} <= logged_tags
    saved = ckpt.load_checkpoint(straight / "checkpoint_3.pkl")
    assert saved["config"]["num_seeds"] == 2
    assert saved["rng"].shape == (2, 2) and np.shape(saved["schedule_timesteps"]) == (2,)
    assert saved["episode_return"].shape == (2, 4)
    assert len(saved["metrics_window"]["agents"]) == 2

    branch = tmp_path / "branch"
    shutil.copytree(straight, branch)
    assert cli.main(["--resume", str(branch / "checkpoint_3.pkl"), "--no-wandb"]) == 0
    assert_same_params(load_params(straight / "final_params.npz"),
                       load_params(branch / "final_params.npz"))
    resumed = records(branch)
    assert [record["update"] for record in resumed] == [2, 4, 6]
    ignored = {"train/sps": 0, "resumed_at_update": 0, "resumed_at_timesteps": 0}
    for before, after in zip(records(straight), resumed, strict=True):
        assert {**before, **ignored} == {**after, **ignored}

    capsys.readouterr()
    assert cli.main(["--resume", str(branch), "--num-seeds", "3",
                     "--total-timesteps", str(4 * 16 * 8), "--no-wandb"]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: checkpoint: ")
    assert "--num-seeds 3 but the checkpoint's run trains 2 agent(s)" in err

    # A count of steps per agent: one for all is a corrupt checkpoint of two agents.
    saved["schedule_timesteps"] = np.float32(saved["schedule_timesteps"][0])
    corrupt = tmp_path / "corrupt"
    ckpt.save_checkpoint(corrupt, saved)
    assert cli.main(["--resume", str(corrupt), "--no-wandb"]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is corrupt: schedule_timesteps is" in err


# HackMatrix's (the default env), refused before its env is even made.
SHAPE = ["--num-envs", "4", "--num-steps", "16", "--total-timesteps", "384", "--no-wandb"]


@pytest.mark.parametrize("flags, message", [
    (["--num-seeds", "0"], "--num-seeds must be >= 1, got 0"),
    (["--num-seeds", "2", "--num-devices", "2"], "--num-seeds 2 trains its agents on one device"),
    (["--num-seeds", "2", "--seed", str(MAX_SEED)],
     f"agent i trains seed --seed + i, so --seed must be at most {MAX_SEED - 1}"),
    (["--num-seeds", str(2**31 // 64)], "steps per update make"),
    (["--num-seeds", "2", "--eval-interval", "2"],
     "--eval-interval evaluates one agent: with --num-seeds 2 use evaluate.py --agent I"),
])
def test_bad_agent_counts_are_refused_in_one_line_before_any_work(flags, message, tmp_path,
                                                                  capsys):
    assert cli.main([*SHAPE, *flags, "--checkpoint-dir", str(tmp_path), "--run-name", "r"]) == \
        cli.EXIT_BAD_ARGUMENTS
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: bad arguments: ") and message in err
    assert not (tmp_path / "r").exists()


def test_on_an_accelerator_several_agents_default_to_one_device_and_say_so():
    args = cli.build_parser().parse_args(["--num-seeds", "4"])
    config, _, explicit = cli.fresh_config(args, "gpu", 8)
    assert (config.num_seeds, config.num_devices) == (4, 1)
    assert cli._idle_devices_note(config, explicit, "gpu", 8) == (
        "[config] note: using 1 of the 8 gpu devices: the 4 agents of --num-seeds train on one "
        "device")


# ----------------------------------------------------------------------------- the host side

def test_mean_and_std_leave_out_the_agents_without_a_value():
    assert seeds.mean_and_std([1.0, 3.0]) == (2.0, 1.0)
    assert seeds.mean_and_std([1.0, math.nan, 3.0]) == (2.0, 1.0)
    assert all(math.isnan(value) for value in seeds.mean_and_std([math.nan, math.nan]))


def _record(agent_values: dict) -> dict:
    """A logged record whose agents' values of each name are `agent_values[name]`."""
    record = {"update": 7, "timesteps": 896, "train/sps": 1234.4}
    for name, values in agent_values.items():
        record[name] = seeds.mean_and_std(values)[0]
        record.update({seeds.agent_key(name, agent): value for agent, value in enumerate(values)})
    return record


def test_the_train_line_shows_mean_and_std_over_the_agents_within_160_columns():
    line = seeds.format_line(_record({"train/mean_episode_return": [20.0, 22.0],
                                      "train/entropy": [0.5, math.nan]}), 10, 60.0, 2)
    assert line == ("[train] update=7/10 timesteps=896 sps=1234 eta=1m00s return=21±1 "
                    "entropy=0.5±0")
    assert seeds.format_line(_record({"train/mean_episode_return": [math.nan] * 2}), 10, 60.0,
                             2).endswith(" return=nan")
    # The widest one-agent values of test_cli.py, each ± 0.99 of itself over four agents: the
    # fields from the first that would pass 160 columns are left out.
    widest = {"train/mean_episode_return": -1.23456e-5, "stats/mean_final_stage": 7.6666,
              "train/entropy": 1.23456e-5, "train/approx_kl": -1.23456e-9,
              "train/clip_fraction": 0.000123456, "train/explained_variance": -12345.6}
    record = {**_record({name: [value * 0.01, value * 1.99] * 2
                         for name, value in widest.items()}),
              "update": 99_999, "timesteps": 3_276_767_232, "train/sps": 123_456.0}
    line = seeds.format_line(record, 100_000, 3_599_999.0, 4)
    assert line == ("[train] update=99999/100000 timesteps=3276767232 sps=123456 eta=999h59m59s "
                    "return=-1.23e-05±1.2e-05 stage=7.67±7.6 entropy=1.23e-05±1.2e-05 "
                    "kl=-1.23e-09±1.2e-09")
    assert len(line) <= M.LINE_WIDTH == 160


def test_health_warnings_name_the_agent():
    record = _record({"train/approx_kl": [0.0, 0.1], "train/clip_fraction": [0.0, 0.0],
                      "train/entropy": [0.05, 0.5]})
    assert seeds.health_warnings(record, 2) == [
        "[health] update=7 agent=0 entropy 0.0500 < 0.1: policy collapsing to deterministic "
        "(raise --ent-coef)",
        "[health] update=7 agent=1 approx_kl 0.100 > 0.08: policy updates too large (lower "
        "--lr or --update-epochs)"]


def test_a_window_of_another_number_of_agents_is_refused():
    from hackmatrix.envs.hackmatrix_env import HACKMATRIX_METRICS
    windows = seeds.AgentWindows(2, 128, HACKMATRIX_METRICS)
    state = windows.state(1.5)
    assert seeds.AgentWindows(2, 128, HACKMATRIX_METRICS).restore(state) == 1.5
    with pytest.raises(ValueError, match="not one of 3 agents"):
        seeds.AgentWindows(3, 128, HACKMATRIX_METRICS).restore(state)
    with pytest.raises(KeyError):  # a one-agent window
        windows.restore(M.MetricsWindow(128).state(1.5))
