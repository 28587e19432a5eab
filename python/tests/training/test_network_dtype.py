"""`--dtype float32|bfloat16`, the network's compute dtype: a bfloat16 network keeps float32
params (and gradients) and returns float32 logits and values close to the float32 network's;
the trainer records the dtype in its checkpoints and params files, a resume keeps it and refuses
another, the tools rebuild it; a record without a dtype (every file written before the option,
and every float32 one) is float32.

Tiny: 8 envs x 16 steps, one hidden layer of 16, 4 channels per cell, no wandb.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.tools.policy import load_policy
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli, params_files
from hackmatrix.training import network as net
from hackmatrix.training.config import TrainConfig

OBS = net.observation_size()
ACTIONS = 28
TINY = ["--num-envs", "8", "--num-steps", "16", "--hidden-dim", "16", "--num-layers", "1",
        "--conv-channels", "4", "--log-interval", "1", "--seed", "3", "--save-interval", "1",
        "--no-wandb"]


def total(updates):
    return ["--total-timesteps", str(8 * 16 * updates)]


def network(torso, shared, dtype):
    config = TrainConfig(torso=torso, shared_torso=shared, hidden_dim=32, num_layers=2,
                         conv_channels=4, dtype=dtype).network_config
    return net.network_from_config({**config, "num_actions": ACTIONS})


def features(batch=6):
    # Observation-like: the player's position among the board's 6 x 6 cells, the rest in [0, 1].
    x = jax.random.uniform(jax.random.key(1), (batch, OBS))
    position = jax.random.randint(jax.random.key(2), (batch, 2), 0, 6) / 5
    return x.at[:, :2].set(position)


# ----------------------------------------------------------------------------- the network

@pytest.mark.parametrize("torso, shared", [("mlp", True), ("ego", False), ("conv", False)])
def test_a_bfloat16_network_keeps_float32_params_and_outputs_close_to_float32(torso, shared):
    bf16, f32 = network(torso, shared, "bfloat16"), network(torso, shared, "float32")
    assert (bf16.dtype, f32.dtype) == ("bfloat16", "float32")
    params = net.init_params(bf16, jax.random.key(0), obs_dim=OBS)
    # The same params as the float32 network's, all float32.
    assert (jax.tree_util.tree_map(np.shape, params)
            == jax.tree_util.tree_map(np.shape, net.init_params(f32, jax.random.key(0), OBS)))
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(params)} == {jnp.dtype(jnp.float32)}
    x = features()
    logits, value = bf16.apply(params, x)
    logits_32, value_32 = f32.apply(params, x)
    assert (logits.dtype, value.dtype) == (jnp.float32, jnp.float32)
    assert (logits.shape, value.shape) == ((6, ACTIONS), (6,))
    for low, full in ((logits, logits_32), (value, value_32)):
        difference = float(jnp.max(jnp.abs(low - full)))
        # bfloat16 keeps 8 bits of mantissa (relative error ~0.4% a rounding): within a few
        # percent of the outputs' scale, and not equal (it did compute in bfloat16).
        assert 0 < difference <= 0.03 * float(jnp.max(jnp.abs(full))), (difference, full)
    # The gradients, which the optimiser reads, are float32 too.
    grads = jax.grad(lambda p: jnp.sum(bf16.apply(p, x)[1]) + jnp.sum(bf16.apply(p, x)[0]))(params)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(grads)} == {jnp.dtype(jnp.float32)}
    assert all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree_util.tree_leaves(grads))


def test_a_record_without_dtype_is_float32_and_float32_is_not_recorded():
    # A network record written before the option (and every float32 one): no dtype key.
    old = {"hidden_dim": 8, "num_layers": 1, "obs_dim": OBS, "num_actions": ACTIONS}
    assert net.network_from_config(old).dtype == "float32"
    assert net.network_from_config({**old, "torso": "ego", "shared": False,
                                    "conv_channels": 4}).dtype == "float32"
    assert "dtype" not in TrainConfig().network_config
    assert TrainConfig(dtype="bfloat16").network_config["dtype"] == "bfloat16"
    # A config written before the option trained in float32.
    stored = {k: v for k, v in TrainConfig().to_dict().items() if k != "dtype"}
    assert TrainConfig.from_dict(stored).dtype == "float32"
    # A record naming another dtype is refused by name.
    assert net.architecture_problem({**old, "dtype": "float16"}) == (
        "dtype must be one of float32, bfloat16, got 'float16'")
    with pytest.raises(ValueError, match="dtype must be one of"):
        net.network_from_config({**old, "dtype": "float64"})


def test_an_old_params_file_without_dtype_loads_as_float32(tmp_path):
    f32 = network("mlp", True, "float32")
    params = jax.tree_util.tree_map(np.asarray, net.init_params(f32, jax.random.key(0), OBS))
    path = params_files.save_params(tmp_path / "final_params.npz", params,
                                    {"hidden_dim": 32, "num_layers": 2, "obs_dim": OBS,
                                     "num_actions": ACTIONS})
    loaded = load_policy(path)
    assert loaded.network.dtype == "float32" and "dtype" not in loaded.network_config


# ----------------------------------------------------------------------------- the trainer

def test_dtype_float16_is_refused_as_a_bad_argument(tmp_path, capsys):
    code = cli.main([*TINY, *total(1), "--checkpoint-dir", str(tmp_path), "--run-name", "half",
                     "--dtype", "float16"])
    assert code == cli.EXIT_BAD_ARGUMENTS
    err = capsys.readouterr().err
    assert "--dtype must be one of float32, bfloat16, got 'float16'" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "half").exists()


def test_a_bfloat16_run_trains_records_its_dtype_and_resumes_with_it(tmp_path, capsys):
    run_dir = tmp_path / "bf16"
    assert cli.main([*TINY, *total(2), "--checkpoint-dir", str(tmp_path), "--run-name", "bf16",
                     "--dtype", "bfloat16"]) == 0
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in records] == [1, 2]
    for record in records:
        for key in ("train/pg_loss", "train/value_loss", "train/entropy", "train/approx_kl"):
            assert np.isfinite(record[key]), (key, record[key])
    state = ckpt.load_checkpoint(run_dir / "checkpoint_2.pkl")
    assert state["config"]["dtype"] == "bfloat16" and state["network"]["dtype"] == "bfloat16"
    # The params and the optimiser state are float32.
    assert {np.asarray(leaf).dtype for leaf in jax.tree_util.tree_leaves(state["params"])} == {
        np.dtype(np.float32)}
    assert {np.asarray(leaf).dtype for leaf in state["opt_state"]
            if np.asarray(leaf).dtype.kind == "f"} == {np.dtype(np.float32)}
    # Every policy file rebuilds the bfloat16 network, with the same outputs.
    x = features(5)
    outputs = []
    for source in (run_dir / "final_params.npz", run_dir / "checkpoint_2.pkl", run_dir):
        loaded = load_policy(source)
        assert loaded.network.dtype == "bfloat16" and loaded.network_config["dtype"] == "bfloat16"
        logits, value = loaded.network.apply(loaded.params, x)
        assert (logits.dtype, value.dtype) == (jnp.float32, jnp.float32)
        outputs.append((np.asarray(logits), np.asarray(value)))
    for other in outputs[1:]:
        np.testing.assert_array_equal(other[0], outputs[0][0])
        np.testing.assert_array_equal(other[1], outputs[0][1])
    capsys.readouterr()
    # Another dtype is an architecture change: refused before anything is written (exit 6).
    assert cli.main(["--resume", str(run_dir), *total(3), "--no-wandb", "--dtype",
                     "float32"]) == cli.EXIT_BAD_CHECKPOINT
    assert ("architecture mismatch: --dtype float32 but the checkpoint has bfloat16"
            in capsys.readouterr().err)
    assert [u for u, _ in ckpt.list_checkpoints(run_dir)] == [1, 2]
    # A resume without the flag keeps it.
    assert cli.main(["--resume", str(run_dir), *total(3), "--no-wandb"]) == 0
    state = ckpt.load_checkpoint(run_dir / "checkpoint_3.pkl")
    assert state["config"]["dtype"] == "bfloat16" and state["network"]["dtype"] == "bfloat16"
    assert load_policy(run_dir / "final_params.npz").network.dtype == "bfloat16"
