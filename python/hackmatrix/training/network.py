"""Actor-critic networks for HackMatrix PPO.

An architecture is a small dict (`network_config`, kept in every checkpoint and params file):

- `torso`: "mlp" (dense layers over the flat 1545 features), "conv" (two 3×3 convolutions over
  the 6×6×42 grid, flattened and joined with the 33 player and program features, then the dense
  layers: the convolution shares its weights over the board, so what it learns about a cell
  applies to every cell) or "ego" (each cell embedded by one shared dense layer, then the board
  re-centred on the player in an 11×11 window before the dense layers: "an enemy right above
  me" is then one input wherever the player stands, where the flat features make the network
  combine the player's two coordinates with every cell);
- `shared`: one torso feeding both heads (half the compute), or separate actor and critic torsos
  as in PureJaxRL, so that the value loss does not pull at the policy's features;
- `hidden_dim` × `num_layers` dense layers, `activation` ("tanh", "relu", "gelu", "silu"),
  `conv_channels` (the grid torsos' channels per cell: each convolution's, or the embedding's);
- `dtype`: the torsos' compute dtype, "float32" or "bfloat16" (absent: float32). The params stay
  float32 (so do the gradients and the optimiser); each torso casts its inputs to the compute
  dtype and its layers compute in it; the torsos' outputs are cast back to float32 for the two
  heads, so the logits (for the masked distribution) and the value are float32. A float32
  network computes exactly as before the option;
- `obs_dim`, `num_actions`: the env's sizes.

Orthogonal init as in the PPO implementation-details literature: sqrt(2) gain for hidden layers,
0.01 for the policy head (near-uniform initial policy), 1.0 for the value head. The network
returns raw logits; masking invalid actions is the distribution's job. Parameter names: a shared
torso's layers are `torso_i` (the names of every checkpoint written before the other
architectures existed, which load as `shared` tanh MLPs), separate ones `actor_torso_i` and
`critic_torso_i`, convolutions `<torso>_conv_j`, the cell embedding `<torso>_cell_embed`; the heads are `actor_logits` and `critic_value`.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.training.config import DEFAULT_DTYPE, DTYPES, LEGACY_ARCHITECTURE

HIDDEN_GAIN = float(np.sqrt(2.0))
POLICY_HEAD_GAIN = 0.01
VALUE_HEAD_GAIN = 1.0

TORSOS = ("mlp", "conv", "ego")
ACTIVATIONS = {"tanh": jnp.tanh, "relu": nn.relu, "gelu": nn.gelu, "silu": nn.silu}
CONV_LAYERS = 2
_VECTOR_FEATURES = C.PLAYER_FEATURES + C.NUM_PROGRAMS


def _dense(features: int, gain: float, name: str, dtype=jnp.float32) -> nn.Dense:
    """A dense layer computing in `dtype` over float32 params."""
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(gain),
                    bias_init=nn.initializers.zeros, dtype=dtype, param_dtype=jnp.float32,
                    name=name)


def _torso(features: jax.Array, prefix: str, kind: str, hidden_dim: int, num_layers: int,
           activation: str, conv_channels: int, dtype=jnp.float32) -> jax.Array:
    """Features f32[..., 1545] -> dtype[..., hidden_dim], from layers named `prefix...`. Called
    inside `ActorCritic.__call__`, so the layers are the ActorCritic's own (flat names)."""
    act = ACTIVATIONS[activation]
    x = features.astype(dtype)  # float32: the features themselves
    if kind == "conv":
        batch_shape = features.shape[:-1]
        vector = x[..., :_VECTOR_FEATURES]
        grid = x[..., _VECTOR_FEATURES:].reshape(
            (-1, C.BOARD_SIZE, C.BOARD_SIZE, C.GRID_CHANNELS))
        for layer in range(CONV_LAYERS):
            grid = act(nn.Conv(conv_channels, (3, 3), padding="SAME",
                               kernel_init=nn.initializers.orthogonal(HIDDEN_GAIN),
                               bias_init=nn.initializers.zeros, dtype=dtype,
                               param_dtype=jnp.float32, name=f"{prefix}conv_{layer}")(grid))
        x = jnp.concatenate([vector, grid.reshape(batch_shape + (-1,))], axis=-1)
    elif kind == "ego":
        x = jnp.concatenate([x[..., :_VECTOR_FEATURES],
                             _egocentric_cells(features, prefix, act, conv_channels, dtype)],
                            axis=-1)
    for layer in range(num_layers):
        x = act(_dense(hidden_dim, HIDDEN_GAIN, f"{prefix}torso_{layer}", dtype)(x))
    return x


EGO_SIZE = 2 * C.BOARD_SIZE - 1  # 11: every cell of the board at any offset from the player


def _egocentric_cells(features: jax.Array, prefix: str, act, channels: int,
                      dtype=jnp.float32) -> jax.Array:
    """The board as the player sees it, flattened: each cell's 42 channels embedded to
    `channels` by one dense layer shared by all cells, plus an on-board flag, in an 11×11
    window centred on the player (cells off the board are zeros). The player's own position is
    in the features only as two numbers (§15.1); here it becomes where everything is. The cells
    are computed in `dtype`; the position is read from the float32 features."""
    batch_shape = features.shape[:-1]
    grid = features[..., _VECTOR_FEATURES:].astype(dtype).reshape(
        (-1, C.BOARD_SIZE, C.BOARD_SIZE, C.GRID_CHANNELS))
    cells = act(_dense(channels, HIDDEN_GAIN, f"{prefix}cell_embed", dtype)(grid))
    cells = jnp.concatenate([cells, jnp.ones(cells.shape[:-1] + (1,), cells.dtype)], axis=-1)
    # Each window cell's source cell as a flat index (36: off the board, a row of zeros), then
    # one gather: a fraction of the time of a per-sample slice or of one-hot products on CPU.
    cells = cells.reshape(-1, C.NUM_CELLS, channels + 1)
    cells = jnp.concatenate([cells, jnp.zeros_like(cells[:, :1])], axis=1)
    position = features[..., :2].reshape(-1, 2) * (C.BOARD_SIZE - 1)
    row_col = jnp.clip(jnp.round(position), 0, C.BOARD_SIZE - 1).astype(jnp.int32)
    offsets = jnp.arange(EGO_SIZE) - (C.BOARD_SIZE - 1)                  # -5 .. 5
    rows, cols = row_col[:, 0, None] + offsets, row_col[:, 1, None] + offsets
    on_board = (((rows >= 0) & (rows < C.BOARD_SIZE))[:, :, None]
                & ((cols >= 0) & (cols < C.BOARD_SIZE))[:, None, :])
    source = jnp.where(on_board, rows[:, :, None] * C.BOARD_SIZE + cols[:, None, :], C.NUM_CELLS)
    window = jnp.take_along_axis(cells, source.reshape(-1, EGO_SIZE * EGO_SIZE, 1), axis=1)
    return window.reshape(batch_shape + (-1,))


class ActorCritic(nn.Module):
    hidden_dim: int
    num_layers: int
    num_actions: int
    torso: str = "mlp"
    shared: bool = True
    activation: str = "tanh"
    conv_channels: int = 0
    dtype: str = DEFAULT_DTYPE  # the compute dtype's name (DTYPES)

    def _torso(self, features: jax.Array, prefix: str) -> jax.Array:
        return _torso(features, prefix, self.torso, self.hidden_dim, self.num_layers,
                      self.activation, self.conv_channels, jnp.dtype(self.dtype))

    @nn.compact
    def __call__(self, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        """features f32[..., obs_dim] -> (logits f32[..., num_actions], value f32[...]), float32
        whatever the compute dtype."""
        if self.shared:
            actor_features = critic_features = self._torso(features, "")
        else:
            actor_features = self._torso(features, "actor_")
            critic_features = self._torso(features, "critic_")
        # The heads compute in float32 whatever the torsos' dtype (a fraction of the work): a
        # bfloat16 value of ~100 would be rounded to a multiple of 0.5, noise in every advantage.
        logits = _dense(self.num_actions, POLICY_HEAD_GAIN, "actor_logits")(
            actor_features.astype(jnp.float32))
        value = _dense(1, VALUE_HEAD_GAIN, "critic_value")(critic_features.astype(jnp.float32))
        return logits, jnp.squeeze(value, axis=-1)


def architecture_problem(network_config: dict) -> str | None:
    """What is wrong with an architecture's torso, sharing, activation, channels or dtype; None
    if nothing (sizes are checked where they are read)."""
    config = {**LEGACY_ARCHITECTURE, **network_config}
    if config["torso"] not in TORSOS:
        return f"torso must be one of {', '.join(TORSOS)}, got {config['torso']!r}"
    if config["activation"] not in ACTIVATIONS:
        return f"activation must be one of {', '.join(ACTIVATIONS)}, got {config['activation']!r}"
    if not isinstance(config["shared"], (bool, np.bool_)):
        return f"shared must be true or false, got {config['shared']!r}"
    channels = config["conv_channels"]
    if config["torso"] != "mlp" and not (isinstance(channels, (int, np.integer)) and channels >= 1):
        return f"conv-channels must be >= 1 for a {config['torso']} torso, got {channels!r}"
    dtype = config.get("dtype", DEFAULT_DTYPE)
    if not (isinstance(dtype, str) and dtype in DTYPES):
        return f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}"
    return None


def network_from_config(network_config: dict) -> ActorCritic:
    """Builds the module from a checkpoint's `network` dict; keys it lacks take the legacy
    architecture's values (a shared tanh MLP, float32)."""
    config = {**LEGACY_ARCHITECTURE, **network_config}
    problem = architecture_problem(config)
    if problem:
        raise ValueError(problem)
    return ActorCritic(hidden_dim=int(config["hidden_dim"]), num_layers=int(config["num_layers"]),
                       num_actions=int(config["num_actions"]), torso=str(config["torso"]),
                       shared=bool(config["shared"]), activation=str(config["activation"]),
                       conv_channels=int(config["conv_channels"]) if config["torso"] != "mlp"
                       else 0, dtype=str(config.get("dtype", DEFAULT_DTYPE)))


def infer_config(params: dict) -> dict:
    """The architecture that parameter shapes and names show (activation and dtype excepted,
    which no shape shows: tanh, and no `dtype` key, i.e. float32). Raises
    KeyError/IndexError/ValueError for params of no ActorCritic."""
    layers = params.get("params", params)
    shared = "torso_0" in layers
    prefix = "" if shared else "actor_"
    hidden = sorted((k for k in layers if k.startswith(f"{prefix}torso_")
                     and k[len(prefix) + 6:].isdigit()), key=lambda k: int(k.rsplit("_", 1)[1]))
    first_kernel = np.shape(layers[hidden[0]]["kernel"])
    logits_kernel = np.shape(layers["actor_logits"]["kernel"])
    if len(first_kernel) != 2 or len(logits_kernel) != 2:
        raise ValueError("kernels are matrices")
    config = {"hidden_dim": int(first_kernel[1]), "num_layers": len(hidden),
              "obs_dim": int(first_kernel[0]), "num_actions": int(logits_kernel[1]),
              "torso": "mlp", "shared": shared, "activation": "tanh", "conv_channels": 0}
    for torso, first_layer in (("conv", "conv_0"), ("ego", "cell_embed")):
        if f"{prefix}{first_layer}" in layers:
            config["torso"] = torso
            config["conv_channels"] = int(np.shape(layers[prefix + first_layer]["kernel"])[-1])
            config["obs_dim"] = observation_size()
    return config


def first_layer_inputs(network_config: dict, obs_dim: int) -> int:
    """How many inputs the first dense layer of a torso takes."""
    channels = network_config.get("conv_channels", 0)
    return {"conv": _VECTOR_FEATURES + C.NUM_CELLS * channels,
            "ego": _VECTOR_FEATURES + EGO_SIZE * EGO_SIZE * (channels + 1)}.get(
                network_config["torso"], obs_dim)


def observation_size() -> int:
    return _VECTOR_FEATURES + C.NUM_CELLS * C.GRID_CHANNELS


def init_params(network: ActorCritic, key: jax.Array, obs_dim: int) -> dict:
    """The full flax variables dict ({'params': ...}), ready for `network.apply`."""
    return network.init(key, jnp.zeros((1, obs_dim), jnp.float32))
