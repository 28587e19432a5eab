"""Jitted game functions shared by the game tests, so each compiles once per test session."""

import jax

from hackmatrix.game import action_mask, actions, programs, transition

STEP = jax.jit(transition.step)
VALID_ACTIONS = jax.jit(action_mask.valid_actions)
RESOLVE = jax.jit(actions.resolve)
APPLY_PROGRAM = jax.jit(programs.apply)
