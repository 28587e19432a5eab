"""A discrete-action gymnax environment under the env contract (`contract.py`).

gymnax is an optional dependency (`pip install -e "python[gymnax]"`), imported only when such
an env is made. Its `step` returns six values, terminated and truncated apart; an episode ends
on either, so `done` is their union, and `info` keeps both. Observations of any shape are
flattened to float32 features, and every action is valid.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from hackmatrix.envs.contract import NO_METRICS, EnvError, EnvObservation


def _gymnax():
    try:
        import gymnax
    except ImportError:
        return None
    return gymnax


def gymnax_ids() -> list[str] | None:
    """The ids gymnax registers, or None without gymnax."""
    gymnax = _gymnax()
    return None if gymnax is None else sorted(gymnax.registered_envs)


class GymnaxEnv:
    metrics = NO_METRICS

    def __init__(self, env_id: str):
        gymnax = _gymnax()
        if gymnax is None:
            raise EnvError(f"--env {env_id} needs gymnax, an optional dependency: "
                           'pip install -e "python[gymnax]"')
        if env_id not in gymnax.registered_envs:
            raise EnvError(f"unknown --env {env_id}: use hackmatrix or a gymnax id "
                           f"({', '.join(sorted(gymnax.registered_envs))})")
        self.env_id = env_id
        try:
            self._env, self.default_params = gymnax.make(env_id)
        except Exception as error:  # noqa: BLE001  (e.g. a dataset it cannot download here)
            raise EnvError(f"--env {env_id}: gymnax could not make it "
                           f"({type(error).__name__}: {error})") from None
        space = self._env.action_space(self.default_params)
        if not hasattr(space, "n"):
            raise EnvError(f"--env {env_id} has a continuous action space; the trainer's "
                           "policies choose among discrete actions")
        self.num_actions = int(space.n)
        shape = self._env.observation_space(self.default_params).shape
        self.observation_size = math.prod(shape)

    def _observation(self, obs) -> EnvObservation:
        features = jnp.reshape(obs, (-1,)).astype(jnp.float32)
        return EnvObservation(features, jnp.ones(self.num_actions, bool))

    def _reset(self, key, params):
        obs, state = self._env.reset(key, params)
        return self._observation(obs), state

    def _step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, _ = self._env.step(key, state, action, params)
        info = {"terminated": terminated, "truncated": truncated}
        return (self._observation(obs), state, jnp.asarray(reward, jnp.float32),
                terminated | truncated, info)

    def batch_reset(self, keys, params=None):
        params = self.default_params if params is None else params
        return jax.vmap(self._reset, in_axes=(0, None))(keys, params)

    def batch_step(self, keys, states, actions, params=None):
        params = self.default_params if params is None else params
        return jax.vmap(self._step, in_axes=(0, 0, 0, None))(keys, states, actions, params)

    def reset(self, key, params=None):
        """One env's reset (the tools play one game at a time)."""
        return self._reset(key, self.default_params if params is None else params)

    def step(self, key, state, action, params=None):
        """One env's auto-resetting step: (obs, state, reward, done, info)."""
        return self._step(key, state, action, self.default_params if params is None else params)
