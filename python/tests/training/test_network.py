"""The actor-critic MLP on tiny inputs: its layers, its init gains (specs/training.md), its
forward pass, and the module a checkpoint's `network` dict builds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.training import network as net

OBS_DIM, HIDDEN, LAYERS, ACTIONS = 12, 8, 3, 5


def tiny_params():
    network = net.ActorCritic(hidden_dim=HIDDEN, num_layers=LAYERS, num_actions=ACTIONS)
    return network, net.init_params(network, jax.random.key(0), obs_dim=OBS_DIM)


def test_init_is_orthogonal_with_sqrt2_torso_001_policy_and_1_value_gains_and_zero_biases():
    _, variables = tiny_params()
    assert set(variables) == {"params"}
    layers = jax.tree_util.tree_map(np.asarray, variables["params"])
    assert set(layers) == {*(f"torso_{i}" for i in range(LAYERS)), "actor_logits", "critic_value"}
    shapes = {name: layer["kernel"].shape for name, layer in layers.items()}
    assert shapes == {"torso_0": (OBS_DIM, HIDDEN), "torso_1": (HIDDEN, HIDDEN),
                      "torso_2": (HIDDEN, HIDDEN), "actor_logits": (HIDDEN, ACTIONS),
                      "critic_value": (HIDDEN, 1)}
    gains = {"actor_logits": 0.01, "critic_value": 1.0,
             **{f"torso_{i}": np.sqrt(2.0) for i in range(LAYERS)}}
    for name, layer in layers.items():
        kernel = layer["kernel"].astype(np.float64)
        # Orthogonal columns (each kernel has no more columns than rows), each of norm `gain`.
        np.testing.assert_allclose(kernel.T @ kernel, gains[name] ** 2 * np.eye(kernel.shape[1]),
                                   atol=1e-5 * gains[name] ** 2, err_msg=name)
        assert not layer["bias"].any(), name


def test_apply_is_one_shared_tanh_torso_feeding_both_heads():
    network, variables = tiny_params()
    # Nonzero biases and large weights, so that a missing bias or activation shows.
    leaves, tree = jax.tree_util.tree_flatten(variables)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    variables = jax.tree_util.tree_unflatten(
        tree, [jax.random.normal(key, leaf.shape) for key, leaf in zip(keys, leaves)])
    features = jax.random.normal(jax.random.key(2), (2, 3, OBS_DIM))
    logits, value = network.apply(variables, features)
    assert logits.shape == (2, 3, ACTIONS) and value.shape == (2, 3)

    layers = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), variables["params"])
    x = np.asarray(features, np.float64)
    for i in range(LAYERS):
        x = np.tanh(x @ layers[f"torso_{i}"]["kernel"] + layers[f"torso_{i}"]["bias"])
    expected_logits = x @ layers["actor_logits"]["kernel"] + layers["actor_logits"]["bias"]
    expected_value = x @ layers["critic_value"]["kernel"][:, 0] + layers["critic_value"]["bias"][0]
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value, expected_value, rtol=1e-4, atol=1e-4)


def test_a_fresh_policy_is_near_uniform_and_its_value_is_of_order_one():
    network, variables = tiny_params()
    features = jax.random.normal(jax.random.key(3), (64, OBS_DIM))
    logits, value = network.apply(variables, features)
    assert float(jnp.max(jnp.abs(logits))) < 0.05
    assert 0.1 < float(jnp.std(value)) < 3.0


@pytest.mark.parametrize("hidden_dim, num_layers, num_actions", [(16, 3, 7), (4, 1, 2)])
def test_network_from_config_reads_each_field(hidden_dim, num_layers, num_actions):
    network = net.network_from_config({"hidden_dim": np.int64(hidden_dim),
                                       "num_layers": str(num_layers), "num_actions": num_actions})
    assert (network.hidden_dim, network.num_layers, network.num_actions) == (
        hidden_dim, num_layers, num_actions)
    assert all(isinstance(v, int) for v in (network.hidden_dim, network.num_layers,
                                            network.num_actions))
    layers = net.init_params(network, jax.random.key(0), obs_dim=OBS_DIM)["params"]
    assert len([name for name in layers if name.startswith("torso_")]) == num_layers
    assert layers["actor_logits"]["kernel"].shape == (hidden_dim, num_actions)
