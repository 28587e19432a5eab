"""The start-with-programs curriculum (game/curriculum.py, `EnvParams.start_programs` and
`start_programs_prob`): the default start is the rules' one bit for bit; with k > 0 a new game,
from a reset or an auto-reset, owns exactly k programs with the given probability; a game in
progress keeps what it owns; the auto-reset's new game is `reset_env`'s of the same key."""

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import spawning
from hackmatrix.game.env import EnvParams, HackMatrixEnv

ENV = HackMatrixEnv()
GAMES = 256
BATCH_RESET = jax.jit(ENV.batch_reset)
BATCH_STEP = jax.jit(ENV.batch_step)
RESET = jax.jit(jax.vmap(ENV.reset_env, in_axes=(0, None)))
KEYS = jax.random.split(jax.random.PRNGKey(5), GAMES)
# Not owned at the start of a rules' game: an invalid action, which ends the episode (§4.4).
CRASH = C.FIRST_PROGRAM_ACTION + C.CRASH
UP = 0


def owned_counts(states) -> np.ndarray:
    return np.asarray(states.game.core.owned.sum(axis=-1))


def test_the_default_start_is_the_rules_start_bit_for_bit():
    rules = BATCH_RESET(KEYS, EnvParams(start_programs=0, start_programs_prob=1.0))
    default = BATCH_RESET(KEYS, EnvParams())
    for a, b in zip(jax.tree_util.tree_leaves(rules), jax.tree_util.tree_leaves(default),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert owned_counts(default[1]).max() == 0


def test_new_games_own_k_programs_with_the_given_probability():
    _, every = BATCH_RESET(KEYS, EnvParams(start_programs=3, start_programs_prob=1.0))
    assert set(owned_counts(every)) == {3}
    _, none = BATCH_RESET(KEYS, EnvParams(start_programs=3, start_programs_prob=0.0))
    assert set(owned_counts(none)) == {0}
    _, half = BATCH_RESET(KEYS, EnvParams(start_programs=3, start_programs_prob=0.5))
    counts = owned_counts(half)
    assert set(counts) == {0, 3}
    # 256 fair coins: 128 +- 8 (std); 3.5 std either side.
    assert 100 <= (counts == 3).sum() <= 156, (counts == 3).sum()
    # The programs are drawn among all 23, and the rest of the game is the rules' start.
    _, one = BATCH_RESET(KEYS, EnvParams(start_programs=1, start_programs_prob=1.0))
    assert np.asarray(one.game.core.owned).any(axis=0).all()
    rules = BATCH_RESET(KEYS, EnvParams())[1].game
    for a, b in zip(jax.tree_util.tree_leaves(rules.replace(core=rules.core.replace(owned=None))),
                    jax.tree_util.tree_leaves(one.game.replace(
                        core=one.game.core.replace(owned=None))), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_an_auto_reset_starts_the_curriculum_game_that_reset_env_starts():
    params = EnvParams(start_programs=2, start_programs_prob=0.5)
    _, states = BATCH_RESET(KEYS, EnvParams())
    # Half the games end at once (an invalid action), half walk on with nothing owned.
    ends = np.arange(GAMES) % 2 == 0
    actions = jnp.where(ends, CRASH, UP)
    step_keys = jax.random.split(jax.random.PRNGKey(6), GAMES)
    _, after, _, done, info = BATCH_STEP(step_keys, states, actions, params)
    assert np.asarray(info["invalid_action"])[ends].all()
    # UP ends a game too where the edge or a block stops it (§4.4): the others walk on.
    walked = ~np.asarray(done)
    assert walked.sum() > GAMES // 8 and owned_counts(after)[walked].max() == 0
    reset_keys = jax.vmap(lambda key: spawning.split_key(key, 2)[1])(step_keys)
    _, fresh = RESET(reset_keys, params)
    np.testing.assert_array_equal(np.asarray(after.game.core.owned)[ends],
                                  np.asarray(fresh.game.core.owned)[ends])
    assert set(owned_counts(after)[ends]) == {0, 2}
