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


# ----------------------------------------------------------------------------- the architectures
# Each architecture against a NumPy re-implementation written here from network.py's docstring:
# a conv torso reads the 33 player and program features as a vector and the rest as the 6x6x42
# grid (row-major, channel last), runs two 3x3 SAME convolutions over the grid, then its dense
# layers over [vector, flattened grid]; a shared torso feeds both heads, separate ones are named
# actor_... and critic_....

GRID_HIDDEN, GRID_LAYERS, GRID_CHANNELS_OUT, GRID_ACTIONS = 8, 2, 3, 5
VECTOR = 33
OBS = VECTOR + 6 * 6 * 42  # 1545
ARCHITECTURES = [(torso, shared) for torso in ("mlp", "conv") for shared in (True, False)]


def np_activation(name):
    return {"tanh": np.tanh,
            "relu": lambda x: np.maximum(x, 0.0),
            # flax's gelu is the tanh approximation by default
            "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi)
                                                       * (x + 0.044715 * x ** 3))),
            "silu": lambda x: x / (1.0 + np.exp(-x))}[name]


def np_conv_same(grid, kernel, bias):
    """grid [B, 6, 6, Cin], kernel [3, 3, Cin, Cout]: a 3x3 cross-correlation with zero padding
    of one cell on every side (SAME), plus the bias."""
    batch, rows, cols, _ = grid.shape
    padded = np.zeros((batch, rows + 2, cols + 2, grid.shape[-1]))
    padded[:, 1:-1, 1:-1] = grid
    out = np.zeros((batch, rows, cols, kernel.shape[-1]))
    for row in range(rows):
        for col in range(cols):
            window = padded[:, row:row + 3, col:col + 3, :]  # [B, 3, 3, Cin]
            out[:, row, col] = np.einsum("bijc,ijco->bo", window, kernel)
    return out + bias


def np_torso(layers, prefix, torso, activation, features):
    act = np_activation(activation)
    x = features
    if torso == "conv":
        batch_shape = features.shape[:-1]
        vector = features[..., :VECTOR]
        grid = features[..., VECTOR:].reshape(-1, 6, 6, 42)
        for j in range(2):
            conv = layers[f"{prefix}conv_{j}"]
            grid = act(np_conv_same(grid, conv["kernel"], conv["bias"]))
        x = np.concatenate([vector, grid.reshape(batch_shape + (-1,))], axis=-1)
    for i in range(GRID_LAYERS):
        dense = layers[f"{prefix}torso_{i}"]
        x = act(x @ dense["kernel"] + dense["bias"])
    return x


def np_forward(variables, torso, shared, activation, features):
    layers = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), variables["params"])
    features = np.asarray(features, np.float64)
    if shared:
        actor = critic = np_torso(layers, "", torso, activation, features)
    else:
        actor = np_torso(layers, "actor_", torso, activation, features)
        critic = np_torso(layers, "critic_", torso, activation, features)
    logits = actor @ layers["actor_logits"]["kernel"] + layers["actor_logits"]["bias"]
    value = critic @ layers["critic_value"]["kernel"][:, 0] + layers["critic_value"]["bias"][0]
    return logits, value


def expected_layer_shapes(torso, shared):
    prefixes = [""] if shared else ["actor_", "critic_"]
    first_input = VECTOR + 6 * 6 * GRID_CHANNELS_OUT if torso == "conv" else OBS
    shapes = {"actor_logits": (GRID_HIDDEN, GRID_ACTIONS), "critic_value": (GRID_HIDDEN, 1)}
    for prefix in prefixes:
        shapes[f"{prefix}torso_0"] = (first_input, GRID_HIDDEN)
        shapes[f"{prefix}torso_1"] = (GRID_HIDDEN, GRID_HIDDEN)
        if torso == "conv":
            shapes[f"{prefix}conv_0"] = (3, 3, 42, GRID_CHANNELS_OUT)
            shapes[f"{prefix}conv_1"] = (3, 3, GRID_CHANNELS_OUT, GRID_CHANNELS_OUT)
    return shapes


def grid_network(torso, shared, activation="tanh"):
    return net.network_from_config({
        "torso": torso, "shared": shared, "activation": activation, "hidden_dim": GRID_HIDDEN,
        "num_layers": GRID_LAYERS, "num_actions": GRID_ACTIONS,
        "conv_channels": GRID_CHANNELS_OUT if torso == "conv" else 0})


def randomised(variables, seed, scale=0.3):
    """Every leaf (biases included) redrawn, so that a missing bias or a swapped layer shows."""
    leaves, tree = jax.tree_util.tree_flatten(variables)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return jax.tree_util.tree_unflatten(
        tree, [scale * jax.random.normal(key, leaf.shape) for key, leaf in zip(keys, leaves)])


@pytest.mark.parametrize("activation", ["tanh", "relu", "gelu"])
@pytest.mark.parametrize("torso, shared", ARCHITECTURES)
def test_each_architecture_matches_a_numpy_forward_pass(torso, shared, activation):
    network = grid_network(torso, shared, activation)
    assert (network.torso, network.shared, network.activation) == (torso, shared, activation)
    variables = net.init_params(network, jax.random.key(0), obs_dim=OBS)
    shapes = {name: layer["kernel"].shape for name, layer in variables["params"].items()}
    assert shapes == expected_layer_shapes(torso, shared)
    variables = randomised(variables, seed=1)
    # Leading batch dimensions (2, 3), and one unbatched observation.
    features = jax.random.normal(jax.random.key(2), (2, 3, OBS))
    logits, value = network.apply(variables, features)
    assert logits.shape == (2, 3, GRID_ACTIONS) and value.shape == (2, 3)
    expected_logits, expected_value = np_forward(variables, torso, shared, activation, features)
    np.testing.assert_allclose(logits, expected_logits, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(value, expected_value, rtol=2e-4, atol=2e-4)
    single_logits, single_value = network.apply(variables, features[1, 2])
    assert single_logits.shape == (GRID_ACTIONS,) and single_value.shape == ()
    np.testing.assert_allclose(single_logits, expected_logits[1, 2], rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(single_value, expected_value[1, 2], rtol=2e-4, atol=2e-4)
    # The heads read different torsos when they are separate: changing the critic's first layer
    # leaves the logits exactly as they were and moves the value.
    if not shared:
        layers = dict(variables["params"])
        layers["critic_torso_0"] = {**layers["critic_torso_0"],
                                    "bias": layers["critic_torso_0"]["bias"] + 1.0}
        moved_logits, moved_value = network.apply({"params": layers}, features)
        np.testing.assert_array_equal(moved_logits, logits)
        assert not np.allclose(moved_value, value)


def test_the_conv_torso_reads_the_grid_cells_where_the_observation_puts_them():
    # One feature set: cell (row 2, col 4), channel 7 of the flat grid. With a 3x3 kernel, after
    # two convolutions only the cells within two steps of it (Chebyshev) can differ.
    network = grid_network("conv", True)
    variables = randomised(net.init_params(network, jax.random.key(0), obs_dim=OBS), seed=3)
    layers = variables["params"]

    def conv_output(features):
        grid = features[VECTOR:].reshape(1, 6, 6, 42).astype(np.float64)
        for j in range(2):
            conv = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), layers[f"conv_{j}"])
            grid = np.tanh(np_conv_same(grid, conv["kernel"], conv["bias"]))
        return grid[0]

    base = np.zeros(OBS, np.float32)
    poked = base.copy()
    poked[VECTOR + (2 * 6 + 4) * 42 + 7] = 1.0
    changed = np.abs(conv_output(poked) - conv_output(base)).max(axis=-1) > 0
    rows, cols = np.nonzero(changed)
    assert set(zip(rows.tolist(), cols.tolist())) <= {
        (r, c) for r in range(6) for c in range(6) if max(abs(r - 2), abs(c - 4)) <= 2}
    assert changed[2, 4] and changed[0, 2] and not changed[2, 1]
    # The network's output moves with that one cell too.
    logits_base, _ = network.apply(variables, base)
    logits_poked, _ = network.apply(variables, poked)
    assert not np.allclose(logits_base, logits_poked)


@pytest.mark.parametrize("torso, shared", ARCHITECTURES)
def test_infer_config_recovers_the_architecture_from_init_params(torso, shared):
    network = grid_network(torso, shared, activation="relu")
    variables = jax.tree_util.tree_map(
        np.asarray, net.init_params(network, jax.random.key(0), obs_dim=OBS))
    inferred = net.infer_config(variables)
    # No shape shows the activation: it reads as tanh.
    assert inferred == {"hidden_dim": GRID_HIDDEN, "num_layers": GRID_LAYERS, "obs_dim": OBS,
                        "num_actions": GRID_ACTIONS, "torso": torso, "shared": shared,
                        "activation": "tanh",
                        "conv_channels": GRID_CHANNELS_OUT if torso == "conv" else 0}
    # The params without their collection infer the same, and the inferred config (with the
    # real activation) builds a network whose params have the same names and shapes.
    assert net.infer_config(variables["params"]) == inferred
    rebuilt = net.network_from_config({**inferred, "activation": "relu"})
    assert rebuilt == network
    rebuilt_params = net.init_params(rebuilt, jax.random.key(5), obs_dim=inferred["obs_dim"])
    assert (jax.tree_util.tree_map(np.shape, rebuilt_params)
            == jax.tree_util.tree_map(np.shape, variables))


def test_a_legacy_network_record_builds_the_shared_tanh_mlp_with_the_old_param_names():
    # What every checkpoint written before the other architectures holds: sizes only.
    network = net.network_from_config({"hidden_dim": 8, "num_layers": 2, "obs_dim": OBS,
                                       "num_actions": 28})
    assert (network.torso, network.shared, network.activation, network.conv_channels) == (
        "mlp", True, "tanh", 0)
    assert net.LEGACY_ARCHITECTURE == {"torso": "mlp", "shared": True, "activation": "tanh",
                                       "conv_channels": 0}
    layers = net.init_params(network, jax.random.key(0), obs_dim=OBS)["params"]
    assert set(layers) == {"torso_0", "torso_1", "actor_logits", "critic_value"}
    assert net.infer_config(layers) == {"hidden_dim": 8, "num_layers": 2, "obs_dim": OBS,
                                        "num_actions": 28, "torso": "mlp", "shared": True,
                                        "activation": "tanh", "conv_channels": 0}


def test_the_training_default_is_separate_egocentric_tanh_torsos():
    from hackmatrix.training.config import TrainConfig

    config = TrainConfig(hidden_dim=8, num_layers=1)
    assert config.network_config == {"torso": "ego", "shared": False, "activation": "tanh",
                                     "hidden_dim": 8, "num_layers": 1, "conv_channels": 16}
    network = net.network_from_config({**config.network_config, "num_actions": 28})
    layers = net.init_params(network, jax.random.key(0), obs_dim=OBS)["params"]
    assert set(layers) == {"actor_cell_embed", "actor_torso_0", "critic_cell_embed",
                           "critic_torso_0", "actor_logits", "critic_value"}
    # Each cell's 42 channels embedded to 16, plus the on-board flag, in the 11 x 11 window
    # around the player, beside the 33 player and program features.
    for torso in ("actor_", "critic_"):
        assert layers[f"{torso}cell_embed"]["kernel"].shape == (42, 16)
        assert layers[f"{torso}torso_0"]["kernel"].shape == (VECTOR + 11 * 11 * (16 + 1), 8)
    # A conv config keeps its channels; an mlp config reads 0 whatever conv_channels says.
    conv = TrainConfig(torso="conv", conv_channels=4, shared_torso=True)
    assert conv.network_config["conv_channels"] == 4 and conv.network_config["shared"] is True
    assert TrainConfig(torso="mlp", conv_channels=4).network_config["conv_channels"] == 0


@pytest.mark.parametrize("config, problem", [
    ({}, None),
    ({"torso": "conv", "conv_channels": 4}, None),
    ({"torso": "transformer"}, "torso must be one of"),
    ({"activation": "sigmoid"}, "activation must be one of"),
    ({"shared": "yes"}, "shared must be true or false"),
    ({"shared": np.bool_(False)}, None),
    ({"torso": "conv", "conv_channels": 0}, "conv-channels must be >= 1"),
    ({"torso": "conv", "conv_channels": 2.0}, "conv-channels must be >= 1"),
    ({"torso": "mlp", "conv_channels": 0}, None),
])
def test_architecture_problem_names_what_is_wrong(config, problem):
    found = net.architecture_problem(config)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem), found
        with pytest.raises(ValueError, match=problem):
            net.network_from_config({"hidden_dim": 4, "num_layers": 1, "num_actions": 3,
                                     **config})
