"""Actor-critic MLP for HackMatrix PPO.

One shared tanh MLP torso feeding a policy head and a value head. Sharing halves the compute of
separate actor and critic trunks (the 1545-wide first layer dominates), which is what makes CPU
training fast. Orthogonal init as in the PPO implementation-details literature: sqrt(2) gain for
hidden layers, 0.01 for the policy head (near-uniform initial policy), 1.0 for the value head.
The network returns raw logits; masking invalid actions is the distribution's job.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

HIDDEN_GAIN = float(np.sqrt(2.0))
POLICY_HEAD_GAIN = 0.01
VALUE_HEAD_GAIN = 1.0


class ActorCritic(nn.Module):
    hidden_dim: int
    num_layers: int
    num_actions: int

    @nn.compact
    def __call__(self, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        """features f32[..., obs_dim] -> (logits f32[..., num_actions], value f32[...])."""
        x = features
        for layer in range(self.num_layers):
            x = nn.Dense(self.hidden_dim, kernel_init=nn.initializers.orthogonal(HIDDEN_GAIN),
                         bias_init=nn.initializers.zeros, name=f"torso_{layer}")(x)
            x = jnp.tanh(x)
        logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(POLICY_HEAD_GAIN),
                          bias_init=nn.initializers.zeros, name="actor_logits")(x)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(VALUE_HEAD_GAIN),
                         bias_init=nn.initializers.zeros, name="critic_value")(x)
        return logits, jnp.squeeze(value, axis=-1)


def network_from_config(network_config: dict) -> ActorCritic:
    """Builds the module from a checkpoint's `network` dict (hidden_dim, num_layers, num_actions)."""
    return ActorCritic(hidden_dim=int(network_config["hidden_dim"]),
                       num_layers=int(network_config["num_layers"]),
                       num_actions=int(network_config["num_actions"]))


def init_params(network: ActorCritic, key: jax.Array, obs_dim: int) -> dict:
    """The full flax variables dict ({'params': ...}), ready for `network.apply`."""
    return network.init(key, jnp.zeros((1, obs_dim), jnp.float32))
