"""Vmapped fuzz: thousands of random valid actions from random scenarios, checking invariants.

Scenarios start from a generated stage and add random credits, energy, data siphons, hp, owned
programs, enemies, transmissions and an UNDO snapshot, so every program gets drawn.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.bench.env import random_valid_action
from hackmatrix.game import constants as C
from hackmatrix.game import action_mask, history, transition, worldgen
from hackmatrix.game import state as S

NUM_ENVS = 64
NUM_STEPS = 128
NUM_ROUNDS = 2


def _random_list(key, items, max_count, **fields):
    """Fill a random-length prefix of `items` with the given per-slot random fields."""
    count = jax.random.randint(key, (), 0, max_count + 1)
    active = jnp.arange(items.active.shape[0]) < count
    return items.replace(active=active, **{
        name: jnp.where(active, value, getattr(items, name)) for name, value in fields.items()})


def random_scenario(key):
    keys = jax.random.split(key, 16)
    state = worldgen.new_game(keys[0])
    capacity = C.MAX_ENEMIES
    kind = jax.random.randint(keys[1], (capacity,), 0, C.NUM_ENEMY_TYPES)
    enemies = _random_list(
        keys[2], state.core.enemies, 6, kind=kind,
        row=jax.random.randint(keys[3], (capacity,), 0, C.BOARD_SIZE),
        col=jax.random.randint(keys[4], (capacity,), 0, C.BOARD_SIZE),
        hp=jax.random.randint(keys[5], (capacity,), 1, 4) % (jnp.asarray(C.ENEMY_MAX_HP)[kind] + 1),
        stunned=jax.random.bernoulli(keys[6], 0.2, (capacity,)),
        disabled_turns=jax.random.bernoulli(keys[7], 0.2, (capacity,)).astype(jnp.int32))
    transmissions = state.core.transmissions
    count = jnp.sum(transmissions.active)
    extra = _random_list(
        keys[8], transmissions, 3,
        row=jax.random.randint(keys[9], (capacity,), 0, C.BOARD_SIZE),
        col=jax.random.randint(keys[10], (capacity,), 0, C.BOARD_SIZE),
        turns_remaining=jax.random.randint(keys[11], (capacity,), 1, 4),
        enemy_type=jax.random.randint(keys[12], (capacity,), 0, C.NUM_ENEMY_TYPES))
    # Keep the generated transmissions and append the random ones after them.
    shifted = jax.tree_util.tree_map(lambda x: jnp.roll(x, count), extra)
    transmissions = jax.tree_util.tree_map(
        lambda generated, added: jnp.where(transmissions.active, generated, added),
        transmissions, shifted)
    resources = jax.random.randint(keys[13], (4,), 0, 26)
    core = state.core.replace(
        credits=resources[0], energy=resources[1], data_siphons=resources[2] % 4,
        hp=1 + resources[3] % 3, owned=jax.random.bernoulli(keys[14], 0.5, (C.NUM_PROGRAMS,)),
        enemies=enemies, transmissions=transmissions)
    state = state.replace(core=core)
    return history.push(state, jax.random.bernoulli(keys[15], 0.5))


def _is_block(content):
    return (content >= C.DATA_BLOCK) & (content <= C.QUESTION_BLOCK)


def _generated_blocks_consistent(state):
    cells = state.core.cells
    data = (cells.content == C.DATA_BLOCK) | ((cells.content == C.QUESTION_BLOCK)
                                               & (cells.program < 0))
    program = _is_block(cells.content) & ~data
    spawn_cost = jnp.asarray(C.PROGRAM_SPAWN_COST)[jnp.maximum(cells.program, 0)]
    return (jnp.all(~data | (cells.points == cells.spawn_count))
            & jnp.all(~program | (cells.spawn_count == spawn_cost)))


def _invariants(state):
    # "No two blocks share a cell" needs no check: a cell holds one content (state.Cells), so the
    # state cannot express two blocks on it.
    core = state.core
    cells = core.cells
    open_cell = ~_is_block(cells.content)

    def is_prefix(items):
        return jnp.all(items.active == (jnp.arange(items.active.shape[0]) < jnp.sum(items.active)))

    return {
        "hp in 0..3": (core.hp >= 0) & (core.hp <= 3),
        "lists are prefixes": is_prefix(core.enemies) & is_prefix(core.transmissions),
        "no block data on open cells": jnp.all(~open_cell | ((cells.points == 0)
                                                             & (cells.program == C.NO_PROGRAM)
                                                             & (cells.spawn_count == 0))),
        "no question block on a siphoned cell": jnp.all(
            ~((cells.content == C.QUESTION_BLOCK) & cells.siphoned)),
        "counters non-negative": (core.credits >= 0) & (core.energy >= 0)
        & (core.data_siphons >= 0) & (core.score >= 0),
        "stage in 1..8": (state.stage >= 1) & (state.stage <= C.MAX_STAGE),
        # New pieces go only on free cells, so play never fills a list: a full one would mean
        # a spawn bug (and the next spawn would have no slot).
        "enemy and transmission counts below capacity":
            (jnp.sum(core.enemies.active) < C.MAX_ENEMIES)
            & (jnp.sum(core.transmissions.active) < C.MAX_TRANSMISSIONS),
    }


def _fuzz_step(carry, key):
    """Reset finished games to fresh random scenarios, then take one random valid action."""
    state, needs_reset = carry
    action_key, step_key, reset_key = jax.random.split(key, 3)
    state = jax.tree_util.tree_map(lambda a, b: jnp.where(needs_reset, a, b),
                                   random_scenario(reset_key), state)
    mask = action_mask.valid_actions(state)
    action = random_valid_action(action_key, mask)
    new_state, obs, reward, done, info = transition.step(step_key, state, action)
    components = jnp.stack([info["reward_components"][n] for n in C.REWARD_COMPONENTS])
    finite = (jnp.isfinite(reward) & jnp.all(jnp.isfinite(components))
              & jnp.all(jnp.isfinite(obs.grid)) & jnp.all(jnp.isfinite(obs.player)))
    fresh_stage = needs_reset | (info["stage_complete"] & ~info["won"])
    checks = {
        "an action was valid": jnp.any(mask),
        "a valid action never fails": ~info["invalid_action"],
        "done only on death or victory": done == (info["death"] | info["won"]),
        "not done leaves a valid action": done | jnp.any(action_mask.valid_actions(new_state)),
        "nothing NaN": finite,
        "components sum to the reward": jnp.abs(jnp.sum(components) - reward) < 1e-3,
        # Checked on every fresh scenario and on every newly generated stage.
        "generated blocks keep spawn counts": ((~needs_reset | _generated_blocks_consistent(state))
                                               & (~fresh_stage | needs_reset
                                                  | _generated_blocks_consistent(new_state))),
        **_invariants(new_state),
    }
    return (new_state, done), (action, checks)


@jax.jit
def _fuzz(key):
    # Every env starts by resetting inside the scan, so scenario generation is traced once.
    blank = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (NUM_ENVS,) + x.shape),
                                   S.empty_state())
    step_keys = jax.random.split(key, NUM_STEPS * NUM_ENVS).reshape(NUM_STEPS, NUM_ENVS, -1)
    _, (actions, checks) = jax.lax.scan(
        lambda carry, k: jax.vmap(_fuzz_step)(carry, k),
        (blank, jnp.ones((NUM_ENVS,), bool)), step_keys)
    return actions, checks


@pytest.fixture(scope="module")
def fuzz_runs():
    return [jax.device_get(_fuzz(jax.random.PRNGKey(seed))) for seed in range(NUM_ROUNDS)]


def test_invariants_hold_after_every_step(fuzz_runs):
    for _, checks in fuzz_runs:
        for name, ok in checks.items():
            bad = np.argwhere(~ok)
            assert ok.all(), f"{name}: violated at (step, env) {bad[:5].tolist()}"


def test_every_action_gets_drawn(fuzz_runs):
    taken = np.zeros(C.NUM_ACTIONS, int)
    for actions, _ in fuzz_runs:
        assert actions.shape == (NUM_STEPS, NUM_ENVS)
        assert ((actions >= 0) & (actions < C.NUM_ACTIONS)).all()
        taken += np.bincount(actions.ravel(), minlength=C.NUM_ACTIONS)
    missing = [C.ACTION_NAMES[a] for a in np.flatnonzero(taken == 0)]
    assert not missing, f"never drawn: {missing}"
