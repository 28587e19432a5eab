"""A tiny learnable env with HackMatrixEnv's interface, for tests that isolate the PPO math.

Each step shows a one-hot target action; choosing it pays 1. Some actions are masked each step
(never the target). Episodes last 4..9 steps. Same obs/info layout as the real env.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from hackmatrix.game.constants import NUM_ACTIONS, NUM_REWARD_COMPONENTS

OBS_DIM = 1545


class FakeObservation(NamedTuple):
    features: jax.Array
    action_mask: jax.Array


@struct.dataclass
class FakeState:
    target: jax.Array
    time: jax.Array
    length: jax.Array


@struct.dataclass
class FakeParams:
    max_steps_in_episode: int = 100


class FakeEnv:
    default_params = FakeParams()

    def _observe(self, state: FakeState) -> FakeObservation:
        features = jnp.zeros(OBS_DIM, jnp.float32).at[state.target].set(1.0)
        mask = (jnp.arange(NUM_ACTIONS) + state.time) % 3 != 0
        return FakeObservation(features, mask.at[state.target].set(True))

    def _new_state(self, key):
        target_key, length_key = jax.random.split(key)
        return FakeState(jax.random.randint(target_key, (), 0, NUM_ACTIONS),
                         jnp.int32(0), jax.random.randint(length_key, (), 4, 10))

    def reset(self, key, params):
        state = self._new_state(key)
        return self._observe(state), state

    def step(self, key, state, action, params):
        reward = jnp.where(action == state.target, 1.0, 0.0).astype(jnp.float32)
        target_key, reset_key = jax.random.split(key)
        next_state = FakeState(jax.random.randint(target_key, (), 0, NUM_ACTIONS), state.time + 1,
                               state.length)
        done = next_state.time >= state.length
        fresh = self._new_state(reset_key)
        next_state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, next_state)
        info = {
            "reward_components": jnp.zeros(NUM_REWARD_COMPONENTS, jnp.float32).at[2].set(reward),
            "stage": 1 + state.time // 3, "score": jnp.int32(0), "won": jnp.bool_(False),
            "death": done, "invalid_action": jnp.bool_(False), "truncated": jnp.bool_(False),
        }
        return self._observe(next_state), next_state, reward, done, info
