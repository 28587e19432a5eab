"""Params files and checkpoint records across architectures and formats.

`params_files.save_params` writes a params .npz with the architecture as `network/<key>` 0-d
entries (and any `meta/<key>` facts) beside the `params/...` arrays; `load_policy_params` rebuilds
the network record from them and ignores `meta/`. Files written before those entries existed hold
shared-MLP names only (`torso_i`, `actor_logits`, `critic_value`) and load by inference as shared
tanh MLPs; checkpoints written before the new config fields (no lr_schedule, `anneal_lr`
instead) load with the values their runs trained with.
"""

import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.tools import policy as tool_policy
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files, policy_loading
from hackmatrix.training import network as net
from hackmatrix.training.config import TrainConfig

OBS = 1545
HIDDEN, LAYERS, CHANNELS = 8, 2, 3


def record(torso, shared, activation="tanh"):
    """A checkpoint's network record for one architecture of this game."""
    return {"torso": torso, "shared": shared, "activation": activation, "hidden_dim": HIDDEN,
            "num_layers": LAYERS, "conv_channels": CHANNELS if torso == "conv" else 0,
            "obs_dim": OBS, "num_actions": C.NUM_ACTIONS}


def numpy_params(network_record, seed=0):
    network = net.network_from_config(network_record)
    return jax.tree_util.tree_map(
        np.asarray, net.init_params(network, jax.random.key(seed), obs_dim=OBS))


def same_trees(a, b):
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def outputs(network_record, params, features):
    network = net.network_from_config(network_record)
    return network.apply(jax.tree_util.tree_map(jnp.asarray, params), features)


FEATURES = jax.random.normal(jax.random.key(9), (3, OBS))
ARCHITECTURES = [("mlp", True, "tanh"), ("mlp", False, "relu"), ("conv", True, "gelu"),
                 ("conv", False, "silu")]


@pytest.mark.parametrize("torso, shared, activation", ARCHITECTURES)
def test_each_architecture_round_trips_through_a_params_file(tmp_path, torso, shared,
                                                             activation):
    network = record(torso, shared, activation)
    params = numpy_params(network)
    path = params_files.save_params(tmp_path / "params_3.npz", params, network,
                                    meta={"update": 3, "mean_stage": 1.75})
    with np.load(path, allow_pickle=False) as data:
        files = set(data.files)
        entries = {key: data[key] for key in files if not key.startswith("params/")}
    # The record and the meta facts are 0-d entries beside the flat params.
    assert files == set(params_files.flatten_params(params)) | {
        f"network/{key}" for key in network} | {"meta/update", "meta/mean_stage"}
    assert all(value.shape == () for value in entries.values())
    assert entries["network/torso"].item() == torso and entries["meta/mean_stage"] == 1.75

    loaded, loaded_network = policy_loading.load_policy_params(path)
    assert loaded_network == network  # meta/ is not part of it
    assert type(loaded_network["shared"]) is bool
    assert type(loaded_network["hidden_dim"]) is int
    assert type(loaded_network["torso"]) is str
    same_trees(loaded, params)
    assert "meta" not in loaded and set(loaded) == {"params"}
    # The record rebuilds the same network: the same outputs, bit for bit.
    expected_logits, expected_value = outputs(network, params, FEATURES)
    logits, value = outputs(loaded_network, loaded, FEATURES)
    np.testing.assert_array_equal(logits, expected_logits)
    np.testing.assert_array_equal(value, expected_value)
    # The tools load it as such too.
    loaded_policy = tool_policy.load_policy(path)
    assert loaded_policy.network == net.network_from_config(network)
    assert loaded_policy.network.activation == activation


@pytest.mark.parametrize("torso, shared, activation", ARCHITECTURES)
def test_a_params_file_without_its_record_infers_all_but_the_activation(tmp_path, torso, shared,
                                                                        activation):
    network = record(torso, shared, activation)
    path = params_files.save_params(tmp_path / "params_1.npz", numpy_params(network),
                                    meta={"update": 1})
    _, inferred = policy_loading.load_policy_params(path)
    # No shape shows the activation: without the record it reads as tanh.
    assert inferred == {**network, "activation": "tanh"}


def old_format_npz(path, params):
    """A params file as the trainer wrote it before it recorded the architecture."""
    with open(path, "wb") as file:
        np.savez(file, **params_files.flatten_params(params))
    return path


def test_an_old_format_params_file_loads_as_a_shared_tanh_mlp(tmp_path):
    # What ActorCritic was: one tanh torso `torso_i` feeding both heads.
    legacy_record = {"hidden_dim": HIDDEN, "num_layers": LAYERS, "obs_dim": OBS,
                     "num_actions": C.NUM_ACTIONS}
    legacy = net.ActorCritic(hidden_dim=HIDDEN, num_layers=LAYERS, num_actions=C.NUM_ACTIONS)
    params = jax.tree_util.tree_map(
        np.asarray, net.init_params(legacy, jax.random.key(4), obs_dim=OBS))
    assert set(params["params"]) == {"torso_0", "torso_1", "actor_logits", "critic_value"}
    path = old_format_npz(tmp_path / "final_params.npz", params)
    with np.load(path) as data:
        assert not any(key.startswith(("network/", "meta/")) for key in data.files)

    loaded, network = policy_loading.load_policy_params(path)
    assert network == {**legacy_record, "torso": "mlp", "shared": True, "activation": "tanh",
                       "conv_channels": 0}
    same_trees(loaded, params)
    built = net.network_from_config(network)
    assert (built.torso, built.shared, built.activation) == ("mlp", True, "tanh")
    # The legacy record alone (what an old checkpoint's `network` holds) builds the same module.
    assert net.network_from_config(legacy_record) == built
    expected = legacy.apply(jax.tree_util.tree_map(jnp.asarray, params), FEATURES)
    got = built.apply(jax.tree_util.tree_map(jnp.asarray, loaded), FEATURES)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    # Its logits are the shared tanh MLP's, computed here by hand.
    layers = params["params"]
    x = np.asarray(FEATURES, np.float64)
    for i in range(LAYERS):
        x = np.tanh(x @ layers[f"torso_{i}"]["kernel"] + layers[f"torso_{i}"]["bias"])
    np.testing.assert_allclose(got[0], x @ layers["actor_logits"]["kernel"]
                               + layers["actor_logits"]["bias"], rtol=1e-4, atol=1e-5)
    assert tool_policy.load_policy(path).network == built


def test_a_record_that_does_not_fit_the_params_is_refused_by_the_tools(tmp_path):
    params = numpy_params(record("mlp", False))
    # The record says shared: the params are separate torsos' (actor_torso_i, critic_torso_i).
    path = params_files.save_params(tmp_path / "params_2.npz", params, record("mlp", True))
    with pytest.raises(tool_policy.PolicyLoadError, match="parameters do not fit the network"):
        tool_policy.load_policy(path)
    path = params_files.save_params(tmp_path / "params_3.npz", params,
                                    {**record("mlp", False), "torso": "transformer"})
    with pytest.raises(tool_policy.PolicyLoadError, match="torso must be one of"):
        tool_policy.load_policy(path)


# ----------------------------------------------------------------------------- checkpoints

# TrainConfig's fields before the network, schedule and reward options (and num_devices, which
# came later still, absent).
OLD_CONFIG = {"total_timesteps": 768, "num_envs": 8, "num_steps": 16, "num_minibatches": 4,
              "update_epochs": 4, "lr": 1e-3, "anneal_lr": False, "gamma": 0.99,
              "gae_lambda": 0.95, "clip_eps": 0.2, "ent_coef": 0.02, "vf_coef": 0.5,
              "max_grad_norm": 0.5, "hidden_dim": HIDDEN, "num_layers": LAYERS, "seed": 1,
              "log_interval": 2}


def test_an_old_config_takes_the_values_its_run_trained_with():
    config = TrainConfig.from_dict(OLD_CONFIG)
    assert config.lr_schedule == "constant"  # anneal_lr: False
    assert (config.torso, config.shared_torso, config.activation) == ("mlp", True, "tanh")
    assert config.ent_coef_end == config.ent_coef == 0.02  # a constant coefficient
    assert config.clip_value_loss is True and config.num_devices == 1
    assert (config.reward_weights, config.distance_shaping) == ("", "rules")
    assert config.network_config == {"torso": "mlp", "shared": True, "activation": "tanh",
                                     "hidden_dim": HIDDEN, "num_layers": LAYERS,
                                     "conv_channels": 0}
    assert TrainConfig.from_dict({**OLD_CONFIG, "anneal_lr": True}).lr_schedule == "linear"
    # Fields a config gives are kept, whatever the legacy values.
    assert TrainConfig.from_dict({**OLD_CONFIG, "shared_torso": False,
                                  "lr_schedule": "cosine"}).shared_torso is False
    assert TrainConfig.from_dict({**OLD_CONFIG, "lr_schedule": "cosine"}).lr_schedule == "cosine"
    # Today's defaults are not the legacy values: a fresh config trains separate torsos.
    assert TrainConfig().shared_torso is False and TrainConfig().lr_schedule == "linear"


def old_checkpoint_state(params, **changes):
    """A checkpoint as the trainer wrote it before the network options: its config without
    the new fields and its network record with sizes only. Its arrays are placeholders (the
    readers checked here do not read them)."""
    state = {
        "format_version": ckpt.FORMAT_VERSION, "run_name": "old", "config": dict(OLD_CONFIG),
        "network": {"hidden_dim": HIDDEN, "num_layers": LAYERS, "obs_dim": OBS,
                    "num_actions": C.NUM_ACTIONS},
        "params": params, "opt_state": [], "rng": np.zeros(2, np.uint32), "env_state": [],
        "env_obs": [], "episode_return": np.zeros(8, np.float32),
        "episode_length": np.zeros(8, np.int32), "update": 6, "timesteps": 768,
        "wandb_run_id": "old", "schedule_timesteps": 768.0, "explicit_config": []}
    return {**state, **changes}


def test_an_old_checkpoint_loads_for_resuming_and_for_the_tools(tmp_path):
    legacy = net.ActorCritic(hidden_dim=HIDDEN, num_layers=LAYERS, num_actions=C.NUM_ACTIONS)
    params = jax.tree_util.tree_map(
        np.asarray, net.init_params(legacy, jax.random.key(6), obs_dim=OBS))
    path = tmp_path / "checkpoint_6.pkl"
    path.write_bytes(pickle.dumps(old_checkpoint_state(params)))

    state = ckpt.load_checkpoint(path)  # every check a resume makes before building anything
    config = TrainConfig.from_dict(state["config"])
    assert config.lr_schedule == "constant" and config.shared_torso is True
    loaded, network = policy_loading.load_policy_params(path)
    assert network == old_checkpoint_state(params)["network"]  # as recorded
    built = net.network_from_config(network)
    assert (built.torso, built.shared, built.activation) == ("mlp", True, "tanh")
    same_trees(loaded, params)
    loaded_policy = tool_policy.load_policy(path)
    assert loaded_policy.network == built
    np.testing.assert_array_equal(
        loaded_policy.network.apply(loaded_policy.params, FEATURES)[0],
        legacy.apply(jax.tree_util.tree_map(jnp.asarray, params), FEATURES)[0])


@pytest.mark.parametrize("change, message", [
    # Neither anneal_lr nor lr_schedule: which schedule the run had is unknown.
    (lambda state: {**state, "config": {k: v for k, v in state["config"].items()
                                        if k != "anneal_lr"}}, "its config lacks lr_schedule"),
    # A field that was always there is still required.
    (lambda state: {**state, "config": {k: v for k, v in state["config"].items()
                                        if k != "gamma"}}, "its config lacks gamma"),
    # The record says separate torsos, the config (legacy: shared) does not.
    (lambda state: {**state, "network": {**state["network"], "shared": False}},
     "shared False in its network, True in its config"),
    (lambda state: {**state, "config": {**state["config"], "torso": "conv"}},
     "torso mlp in its network, conv in its config"),
    (lambda state: {**state, "config": {**state["config"], "lr_schedule": "stepwise"}},
     "--lr-schedule must be one of"),
])
def test_an_old_checkpoint_with_a_missing_or_contradicting_field_is_refused(tmp_path, change,
                                                                            message):
    path = tmp_path / "checkpoint_6.pkl"
    path.write_bytes(pickle.dumps(change(old_checkpoint_state({"params": {}}))))
    with pytest.raises(ckpt.CheckpointError, match=message):
        ckpt.load_checkpoint(path)
