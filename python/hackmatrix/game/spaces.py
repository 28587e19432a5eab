"""Gymnax-style spaces for `HackMatrixEnv.action_space` and `observation_space`.

Code written against gymnax environments sizes its networks with `env.action_space(params).n`
and `env.observation_space(params).shape`. These two small classes give that interface without
importing gymnax.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import observation


@dataclass(frozen=True)
class Discrete:
    """The integers 0..n-1."""

    n: int
    shape: tuple = ()
    dtype: type = jnp.int32

    def sample(self, key) -> jax.Array:
        """A uniform draw over all n values. Use the action mask to draw valid actions only."""
        return jax.random.randint(key, self.shape, 0, self.n, self.dtype)

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.all((x >= 0) & (x < self.n) & (x == jnp.trunc(x)))  # 3.7 is no action


@dataclass(frozen=True, eq=False)
class Box:
    """Arrays of `shape` whose elements lie in [low, high] (numpy arrays; high may be inf)."""

    low: np.ndarray
    high: np.ndarray
    shape: tuple
    dtype: type = jnp.float32

    def contains(self, x) -> jax.Array:
        x = jnp.asarray(x)
        if x.shape != self.shape:
            return jnp.asarray(False)
        return jnp.all((x >= self.low) & (x <= self.high))


def _feature_bounds() -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of each of the 1545 flat features (§15). Every feature but one is >= 0:
    the transmission countdown reads turnsRemaining / 4, which a scenario may set below 0
    (§15.3). Most are at most 1; the rules leave some uncapped, and scenarios can set the
    counts behind others beyond what play produces, so those have no upper bound."""
    player_high = np.ones(C.PLAYER_FEATURES, np.float32)
    player_high[[6, 7]] = np.inf  # dataSiphons / 10, (attackDamage - 1) / 2: not capped (§15.1)
    grid_high = np.ones(C.GRID_CHANNELS, np.float32)
    # Enemy hp, block points and spawn count, and cell credits and energy: hp / 3 is not capped
    # (§15.3), and a scenario may put any count in the others.
    grid_high[[4, 10, 35, 37, 38]] = np.inf
    grid_low = np.zeros(C.GRID_CHANNELS, np.float32)
    grid_low[36] = -np.inf  # transmission countdown
    high = np.concatenate([player_high, np.ones(C.NUM_PROGRAMS, np.float32),
                           np.tile(grid_high, C.NUM_CELLS)])
    low = np.concatenate([np.zeros(C.PLAYER_FEATURES + C.NUM_PROGRAMS, np.float32),
                          np.tile(grid_low, C.NUM_CELLS)])
    assert high.shape == low.shape == (observation.FLAT_SIZE,)
    return low, high


def action_space() -> Discrete:
    return Discrete(C.NUM_ACTIONS)


def feature_space() -> Box:
    """The space of `EnvObservation.features` (the flat §15 observation)."""
    low, high = _feature_bounds()
    return Box(low, high, (observation.FLAT_SIZE,), jnp.float32)
