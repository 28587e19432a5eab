"""The batched env step: `compacted_map` and `HackMatrixEnv.batch_step` == `vmap(step)`, bit for
bit.

With 8 envs the chunk holds one env, so every step with two or more programs, siphons,
placements or generations runs several chunks; random scenarios own programs, so programs, stage
completions and deaths all occur.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.bench.env import random_valid_action
from hackmatrix.game import action_mask, batching
from hackmatrix.game import constants as C
from hackmatrix.game.env import EnvParams, EnvState, HackMatrixEnv
from test_fuzz import random_scenario

ENV = HackMatrixEnv()
NUM_ENVS = 8
NUM_STEPS = 24


def test_compacted_map_runs_fn_exactly_on_needed_rows():
    calls = []

    def fn(x, y):
        calls.append(None)  # traced once: vmapped over a chunk
        return x * 10 + y, -x

    @jax.jit
    def run(needed, x, y):
        fallback = (jnp.full_like(x, -1), jnp.zeros_like(x))
        return batching.compacted_map(fn, needed, (x, y), fallback, size=3)

    x = jnp.arange(10, dtype=jnp.int32)
    y = jnp.arange(10, 20, dtype=jnp.int32)
    for needed in ([0, 1, 1, 0, 1, 1, 1, 0, 1, 1],   # 7 needed: three chunks of 3
                   [0] * 10,                         # none: no chunk runs
                   [1] * 10,                         # all
                   [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],   # one: a partial chunk
                   [1, 1, 0, 1, 0, 0, 1, 1, 0, 1]):  # 6 needed: exactly two full chunks
        needed = np.asarray(needed, bool)
        mapped, negated = run(jnp.asarray(needed), x, y)
        np.testing.assert_array_equal(mapped, np.where(needed, x * 10 + y, -1))
        np.testing.assert_array_equal(negated, np.where(needed, -x, 0))
    assert len(calls) == 1
    assert batching.chunk_size(1) == 1 and batching.chunk_size(1024) == 1024 // 16


def test_compacted_map_with_fallback_as_input_reads_each_rows_own_fallback():
    """`fallback_is_input`: fn gets row i of the fallback, never a row an earlier chunk wrote,
    also when the last row is needy and later chunks' padding reads it."""
    def fn(x, fallback_row):
        first, second = fallback_row
        return first * 100 + x, second - x

    @jax.jit
    def run(needed, x, fallback):
        return batching.compacted_map(fn, needed, (x,), fallback, size=3, fallback_is_input=True)

    x = jnp.arange(10, dtype=jnp.int32)
    fallback = (jnp.arange(10, dtype=jnp.int32) + 7, jnp.arange(10, dtype=jnp.int32) * 3)
    for needed in ([1, 0, 1, 1, 0, 1, 0, 1, 1, 1],   # 7 needed, the last row too: three chunks
                   [0] * 10, [1] * 10, [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]):
        needed = np.asarray(needed, bool)
        first, second = run(jnp.asarray(needed), x, fallback)
        np.testing.assert_array_equal(first, np.where(needed, (np.arange(10) + 7) * 100
                                                      + np.arange(10), np.arange(10) + 7))
        np.testing.assert_array_equal(second, np.where(needed, np.arange(10) * 2,
                                                       np.arange(10) * 3))


@jax.jit
@chex.assert_max_traces(n=1)
def _both_steps(keys, states, actions, params):
    return (jax.vmap(ENV.step, in_axes=(0, 0, 0, None))(keys, states, actions, params),
            ENV.batch_step(keys, states, actions, params))


def test_batch_step_equals_vmapped_step_bit_for_bit():
    games = jax.jit(jax.vmap(random_scenario))(jax.random.split(jax.random.PRNGKey(3), NUM_ENVS))
    states = EnvState(game=games, time=jnp.zeros((NUM_ENVS,), jnp.int32))
    masks = jax.vmap(action_mask.valid_actions)(games)
    key = jax.random.PRNGKey(5)
    programs = siphons = placements = generations = 0
    for _ in range(NUM_STEPS):
        key, action_key, step_key = jax.random.split(key, 3)
        actions = random_valid_action(action_key, masks).astype(jnp.int32)
        plain, batched = _both_steps(jax.random.split(step_key, NUM_ENVS), states, actions,
                                     ENV.default_params)
        for a, b in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(batched),
                        strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        obs, next_states, _, done, _ = batched
        programs += int(jnp.sum(actions >= C.FIRST_PROGRAM_ACTION))
        siphons += int(jnp.sum(actions == C.ACTION_SIPHON))
        placements += int(jnp.sum(jnp.sum(next_states.game.core.transmissions.active, axis=1)
                                  > jnp.sum(states.game.core.transmissions.active, axis=1)))
        generations += int(jnp.sum(done | (next_states.game.stage != states.game.stage)))
        states, masks = next_states, obs.action_mask
    # The comparison covered every compacted branch, several at once in some steps.
    assert programs >= 2 * NUM_STEPS // 4 and generations >= 2
    assert siphons >= NUM_STEPS // 4 and placements >= NUM_STEPS // 4, (siphons, placements)


def test_batch_step_truncates_with_the_given_params():
    """`max_steps_in_episode` is a traced param: the batch truncates (and auto-resets) the envs
    that reach it, as `vmap(step)` does, with the same compiled step."""
    games = jax.jit(jax.vmap(random_scenario))(jax.random.split(jax.random.PRNGKey(4), NUM_ENVS))
    times = jnp.asarray([0, 1, 2, 3, 4, 5, 6, 7], jnp.int32)
    states = EnvState(game=games, time=times)
    actions = jnp.full((NUM_ENVS,), C.ACTION_WAIT, jnp.int32)
    plain, batched = _both_steps(jax.random.split(jax.random.PRNGKey(6), NUM_ENVS), states,
                                 actions, EnvParams(max_steps_in_episode=5))
    for a, b in zip(jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(batched),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    _, next_states, _, done, info = batched
    game_over = np.asarray(info["death"] | info["won"] | info["invalid_action"])
    np.testing.assert_array_equal(info["truncated"], (np.asarray(times) >= 4) & ~game_over)
    np.testing.assert_array_equal(done, (np.asarray(times) >= 4) | game_over)
    np.testing.assert_array_equal(next_states.time, np.where(done, 0, np.asarray(times) + 1))
