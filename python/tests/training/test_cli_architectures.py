"""The trainer's command line end to end with the network and evaluation options (in-process,
as test_cli.py runs it): an egocentric (the default torso), a conv and a shared MLP run load as
the same policy from every file they wrote; `--eval-interval` logs eval/* metrics, deterministically, keeps best_params.npz
across a resume, and changes no training result; a resume refuses another architecture.

Tiny: 8 envs x 16 steps, one hidden layer of 16, no wandb.
"""

import json
import shutil

import jax
import numpy as np
import pytest

from hackmatrix.tools.policy import load_policy
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli
from hackmatrix.training.evaluation import BEST_PARAMS_NAME

from tiny_runs import assert_same_params, load_params

TINY = ["--num-envs", "8", "--num-steps", "16", "--hidden-dim", "16", "--num-layers", "1",
        "--log-interval", "1", "--seed", "3", "--save-interval", "1", "--no-wandb"]
EVAL = ["--eval-interval", "1", "--eval-episodes", "4"]
# A learning rate at which the evaluations of the first updates differ (measured: sampled mean
# stage 1.25 after update 1, 1.5 after update 2), so that the best update is a choice.
EVAL_LR = ["--lr", "0.003"]
EVAL_KEYS = {f"eval/{prefix}{name}" for prefix in ("", "greedy_")
             for name in ("mean_return", "mean_stage", "win_rate", "mean_score", "siphon_frac",
                          "program_frac")} | {"eval/seconds", "eval/best_mean_stage"}


def total(updates):
    return ["--total-timesteps", str(8 * 16 * updates)]


def train(checkpoint_dir, run_name, updates, *extra):
    return cli.main([*TINY, *total(updates), "--checkpoint-dir", str(checkpoint_dir),
                     "--run-name", run_name, *extra])


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def best_meta(run_dir):
    with np.load(run_dir / BEST_PARAMS_NAME, allow_pickle=False) as data:
        return int(data["meta/update"]), float(data["meta/mean_stage"])


def params_arrays(path):
    return {key: value for key, value in load_params(path).items() if key.startswith("params/")}


# ----------------------------------------------------------------------------- architectures

ARCHITECTURES = {
    # The default torso, with fewer channels than its default.
    "ego": (["--conv-channels", "4"],
            {"torso": "ego", "shared": False, "activation": "tanh", "hidden_dim": 16,
             "num_layers": 1, "conv_channels": 4, "obs_dim": 1545, "num_actions": 28},
            {"actor_cell_embed", "actor_torso_0", "critic_cell_embed", "critic_torso_0",
             "actor_logits", "critic_value"},
            "network=separate(ego4+1x16 tanh)"),
    "conv": (["--torso", "conv", "--conv-channels", "4"],
             {"torso": "conv", "shared": False, "activation": "tanh", "hidden_dim": 16,
              "num_layers": 1, "conv_channels": 4, "obs_dim": 1545, "num_actions": 28},
             {"actor_conv_0", "actor_conv_1", "actor_torso_0", "critic_conv_0", "critic_conv_1",
              "critic_torso_0", "actor_logits", "critic_value"},
             "network=separate(conv4x2+1x16 tanh)"),
    # The legacy architecture: one MLP torso for both heads.
    "shared": (["--torso", "mlp", "--shared-torso"],
               {"torso": "mlp", "shared": True, "activation": "tanh", "hidden_dim": 16,
                "num_layers": 1, "conv_channels": 0, "obs_dim": 1545, "num_actions": 28},
               {"torso_0", "actor_logits", "critic_value"},
               "network=shared(1x16 tanh)"),
}


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_each_architecture_trains_and_every_file_loads_the_same_policy(tmp_path, capsys, name):
    flags, network, layers, text = ARCHITECTURES[name]
    assert train(tmp_path, name, 2, *flags) == 0
    assert f"[config] env=hackmatrix algo=ppo {text} " in capsys.readouterr().out
    run_dir = tmp_path / name
    state = ckpt.load_checkpoint(run_dir / "checkpoint_2.pkl")
    assert state["network"] == network
    assert set(state["params"]["params"]) == layers
    sources = [run_dir, run_dir / "final_params.npz", run_dir / "checkpoint_2.pkl",
               run_dir / "params_2.npz"]
    features = jax.random.normal(jax.random.key(0), (5, 1545))
    outputs = []
    for source in sources:
        loaded = load_policy(source)
        assert loaded.network_config == network, source
        assert (loaded.network.torso, loaded.network.shared) == (network["torso"],
                                                                 network["shared"])
        outputs.append([np.asarray(x) for x in loaded.network.apply(loaded.params, features)])
    for other in outputs[1:]:
        np.testing.assert_array_equal(other[0], outputs[0][0])  # logits
        np.testing.assert_array_equal(other[1], outputs[0][1])  # values
    # Trained: the params moved from update 1's.
    assert any((a != b).any() for a, b in zip(params_arrays(run_dir / "params_1.npz").values(),
                                              params_arrays(run_dir / "params_2.npz").values()))
    # A resume keeps the architecture without being told, and refuses another one (exit 6).
    refused = {"ego": ["--torso", "conv"], "conv": ["--torso", "mlp"],
               "shared": ["--no-shared-torso"]}[name]
    assert cli.main(["--resume", str(run_dir), *total(3), "--no-wandb", *refused]) == \
        cli.EXIT_BAD_CHECKPOINT
    assert "architecture mismatch" in capsys.readouterr().err
    assert [u for u, _ in ckpt.list_checkpoints(run_dir)] == [1, 2]  # nothing written


# ----------------------------------------------------------------------------- evaluation

@pytest.fixture(scope="module")
def eval_runs(tmp_path_factory):
    """Two runs of 2 updates with evaluation at every update, the same seed, and one without."""
    root = tmp_path_factory.mktemp("eval_runs")
    for name, extra in (("first", EVAL), ("second", EVAL), ("plain", [])):
        assert train(root, name, 2, *EVAL_LR, *extra) == 0
    return root


def test_every_evaluation_is_logged_with_the_run_metrics(eval_runs):
    logged = records(eval_runs / "first")
    assert [r["update"] for r in logged] == [1, 2]
    for record in logged:
        assert EVAL_KEYS <= set(record), sorted(EVAL_KEYS - set(record))
        assert 1.0 <= record["eval/mean_stage"] <= 8.0
        assert 0.0 <= record["eval/win_rate"] <= 1.0
    stages = [r["eval/mean_stage"] for r in logged]
    assert logged[-1]["eval/best_mean_stage"] == max(stages)
    assert logged[0]["eval/best_mean_stage"] == stages[0]
    assert not any(key.startswith("eval/") for r in records(eval_runs / "plain") for key in r)
    assert not (eval_runs / "plain" / BEST_PARAMS_NAME).exists()


def test_evaluation_is_deterministic_and_changes_no_training_result(eval_runs):
    first, second = records(eval_runs / "first"), records(eval_runs / "second")
    for a, b in zip(first, second, strict=True):
        assert {k: v for k, v in a.items() if k.startswith("eval/") and k != "eval/seconds"} == \
            {k: v for k, v in b.items() if k.startswith("eval/") and k != "eval/seconds"}
    assert best_meta(eval_runs / "first") == best_meta(eval_runs / "second")
    # Evaluation reads the params only: the run without it ends with the same params.
    assert_same_params(load_params(eval_runs / "plain" / "final_params.npz"),
                       load_params(eval_runs / "first" / "final_params.npz"))
    for a, b in zip(first, records(eval_runs / "plain"), strict=True):
        for key in ("train/pg_loss", "train/value_loss", "train/entropy",
                    "train/mean_episode_return"):
            assert a[key] == b[key] or (np.isnan(a[key]) and np.isnan(b[key])), key


def test_best_params_are_the_params_of_the_best_update(eval_runs):
    run_dir = eval_runs / "first"
    update, stage = best_meta(run_dir)
    stages = {r["update"]: r["eval/mean_stage"] for r in records(run_dir)}
    assert len(set(stages.values())) > 1, stages  # the premise: the evaluations differ
    assert stage == max(stages.values())
    assert update == min(u for u, s in stages.items() if s == stage)  # the first to reach it
    # The params saved at that update (every update is saved here), with the architecture.
    assert_same_params(params_arrays(run_dir / f"params_{update}.npz"),
                       params_arrays(run_dir / BEST_PARAMS_NAME))
    loaded = load_policy(run_dir / BEST_PARAMS_NAME)
    assert loaded.network_config == load_policy(run_dir).network_config


def test_the_best_params_survive_a_resume_and_never_get_worse(eval_runs, tmp_path, capsys):
    run_dir = tmp_path / "first"
    shutil.copytree(eval_runs / "first", run_dir)
    before_update, before_stage = best_meta(run_dir)
    # The run's evaluation options are kept by the resume without being given again.
    assert cli.main(["--resume", str(run_dir), *total(4), "--no-wandb"]) == 0
    out = capsys.readouterr().out
    assert out.count("[eval] update=") == 2 and "[eval] update=4 " in out
    logged = records(run_dir)
    assert [r["update"] for r in logged] == [1, 2, 3, 4]
    update, stage = best_meta(run_dir)
    assert stage >= before_stage
    assert stage == max(r["eval/mean_stage"] for r in logged)
    assert all(r["eval/best_mean_stage"] >= before_stage for r in logged[2:])
    if stage == before_stage:
        assert update == before_update  # a tie is not a new best
    assert_same_params(params_arrays(run_dir / f"params_{update}.npz"),
                       params_arrays(run_dir / BEST_PARAMS_NAME))


def test_a_branch_from_an_earlier_checkpoint_keeps_no_best_params_from_the_set_aside_updates(
        eval_runs, tmp_path):
    # Resumed from checkpoint_1 (checkpoint_2, params_2 and final_params are set aside) with
    # --lr 0, the run's update 2 is a new one whose params are update 1's. The best params of
    # the set-aside update 2, here made the best any run could reach (mean stage 8), are no
    # longer in the run's history: they must not stay as its best_params.npz, which must hold
    # params that this run kept.
    run_dir = tmp_path / "first"
    shutil.copytree(eval_runs / "first", run_dir)
    stale = load_params(run_dir / "params_2.npz")
    with open(run_dir / BEST_PARAMS_NAME, "wb") as file:
        np.savez(file, **stale, **{"meta/update": np.asarray(2), "meta/mean_stage": np.asarray(8.0)})
    assert cli.main(["--resume", str(run_dir / "checkpoint_1.pkl"), "--lr", "0",
                     "--no-wandb"]) == 0
    assert_same_params(params_arrays(run_dir / "params_1.npz"),
                       params_arrays(run_dir / "params_2.npz"))  # lr 0: a new update 2
    assert (run_dir / BEST_PARAMS_NAME).is_file()
    update, stage = best_meta(run_dir)
    assert update <= 2
    assert_same_params(params_arrays(run_dir / f"params_{update}.npz"),
                       params_arrays(run_dir / BEST_PARAMS_NAME))
    logged = {r["update"]: r["eval/mean_stage"] for r in records(run_dir)}
    assert stage == max(logged.values())
