"""The egocentric torso's window: every cell lands at its offset from the player."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.training import network as net

VECTOR = C.PLAYER_FEATURES + C.NUM_PROGRAMS
CHANNELS = 3


def _features(row: int, col: int, grid: np.ndarray) -> np.ndarray:
    features = np.zeros(net.observation_size(), np.float32)
    features[0], features[1] = row / 5.0, col / 5.0
    features[VECTOR:] = grid.reshape(-1)
    return features


class _Window(net.nn.Module):
    @net.nn.compact
    def __call__(self, features):
        return net._egocentric_cells(features, "", jnp.tanh, CHANNELS)


def _window(features):
    """The egocentric window alone, reshaped [11, 11, CHANNELS + 1], and the cell embedding."""
    module = _Window()
    variables = module.init(jax.random.PRNGKey(0), features[None])
    out = module.apply(variables, features[None])[0]
    embed = variables["params"]["cell_embed"]
    return np.asarray(out).reshape(net.EGO_SIZE, net.EGO_SIZE, CHANNELS + 1), embed


@pytest.mark.parametrize("row,col", [(0, 0), (5, 5), (2, 3), (0, 5)])
def test_window_centres_the_player_and_places_each_cell_at_its_offset(row, col):
    rng = np.random.default_rng(row * 6 + col)
    grid = rng.uniform(size=(C.BOARD_SIZE, C.BOARD_SIZE, C.GRID_CHANNELS)).astype(np.float32)
    window, embed = _window(_features(row, col, grid))
    kernel, bias = np.asarray(embed["kernel"]), np.asarray(embed["bias"])
    for k in range(net.EGO_SIZE):
        for l in range(net.EGO_SIZE):
            cell_row, cell_col = row + k - 5, col + l - 5
            if 0 <= cell_row < C.BOARD_SIZE and 0 <= cell_col < C.BOARD_SIZE:
                expected = np.append(np.tanh(grid[cell_row, cell_col] @ kernel + bias), 1.0)
            else:
                expected = np.zeros(CHANNELS + 1)
            np.testing.assert_allclose(window[k, l], expected, rtol=1e-5, atol=1e-6)


def test_ego_network_runs_on_batches_and_its_config_is_inferred():
    network = net.ActorCritic(8, 1, C.NUM_ACTIONS, torso="ego", shared=False, conv_channels=4)
    params = net.init_params(network, jax.random.PRNGKey(1), net.observation_size())
    logits, value = network.apply(params, jnp.zeros((2, 3, net.observation_size())))
    assert logits.shape == (2, 3, C.NUM_ACTIONS) and value.shape == (2, 3)
    inferred = net.infer_config(params)
    assert inferred["torso"] == "ego" and inferred["conv_channels"] == 4
    assert inferred["shared"] is False and inferred["num_layers"] == 1
