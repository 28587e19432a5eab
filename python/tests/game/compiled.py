"""Jitted game functions shared by the game tests, so each compiles once per pytest process, and
the small helpers that drive them."""

import jax
import numpy as np
import pytest

from hackmatrix.game import action_mask, actions, programs, transition
from hackmatrix.game import constants as C

STEP = jax.jit(transition.step)
VALID_ACTIONS = jax.jit(action_mask.valid_actions)
RESOLVE = jax.jit(actions.resolve)
APPLY_PROGRAM = jax.jit(programs.apply)


def program_action(name):
    """The action number of a program, by its name in the rules' table."""
    return C.FIRST_PROGRAM_ACTION + C.PROGRAM_NAMES.index(name)


def enemy(kind, row, col, hp=None, **extra):
    """A scenario dict's enemy entry (Appendix A.2): full hp for its type unless given."""
    return {"type": kind, "row": row, "col": col,
            "hp": int(C.ENEMY_MAX_HP[C.ENEMY_TYPE_NAMES.index(kind)]) if hp is None else hp,
            **extra}


def play(state, *actions, key=jax.random.PRNGKey(0)):
    """Step through valid `actions`; returns the final (state, obs, reward, done, info)."""
    for action in actions:
        result = STEP(key, state, action)
        state = result[0]
        assert not bool(result[4]["invalid_action"]), action
    return result


def reward_components(info) -> dict:
    """A step's 15 reward components (§14.1) as Python floats, by name."""
    return {name: float(value) for name, value in info["reward_components"].items()}


def assert_components_add_up(reward, info):
    """§14.1: `info` holds exactly the 15 named components, and they add up, in table order,
    to the reward."""
    values = reward_components(info)
    assert set(values) == set(C.REWARD_COMPONENTS)
    total = np.float32(0.0)
    for name in C.REWARD_COMPONENTS:
        total = np.float32(total + np.float32(values[name]))
    assert float(reward) == pytest.approx(float(total), abs=1e-6)
