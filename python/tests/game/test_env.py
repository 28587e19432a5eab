"""The gymnax-style environment: observations, auto-reset, truncation, jit/vmap, no re-tracing.

The full game step takes long to compile, so the module compiles it once: `BATCH_STEP_BOTH`, a
vmapped pair of the auto-resetting step and the plain step_env on the same step key (XLA shares
the work). Single-env tests run through it on a replicated batch. It is wrapped in
`chex.assert_max_traces(n=1)`, so every test here also checks that nothing re-traces.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import action_mask, observation, scenario, spawning
from hackmatrix.game.env import EnvParams, EnvState, HackMatrixEnv

import compiled

ENV = HackMatrixEnv()
PARAMS = ENV.default_params
RESET = jax.jit(ENV.reset_env)
BATCH_RESET = jax.jit(ENV.batch_reset)
KEY = jax.random.PRNGKey(0)
UP, LEFT, RIGHT = 0, 2, 3
BATCH = 4


def _step_and_step_env(key, state, action, params):
    """(ENV.step, ENV.step_env) of the same step: step_env gets the key half that step uses."""
    step_key, _ = spawning.split_key(key, 2)
    return ENV.step(key, state, action, params), ENV.step_env(step_key, state, action, params)


@jax.jit
@chex.assert_max_traces(n=1)
def BATCH_STEP_BOTH(keys, states, actions, params):
    return jax.vmap(_step_and_step_env, in_axes=(0, 0, 0, None))(keys, states, actions, params)


def _single(key, state, action, params):
    def replicate(x):
        return jnp.broadcast_to(x, (BATCH,) + jnp.shape(x))

    batched = BATCH_STEP_BOTH(replicate(key), jax.tree_util.tree_map(replicate, state),
                              replicate(jnp.asarray(action, jnp.int32)), params)
    return jax.tree_util.tree_map(lambda x: x[0], batched)


def STEP(key, state, action, params):
    return _single(key, state, action, params)[0]


def STEP_ENV(key, state, action, params):
    """step_env with a key that makes it equal to the inner step of STEP(key, ...)."""
    return _single(key, state, action, params)[1]


def env_state(d, time=0):
    return EnvState(game=scenario.from_dict(d), time=jnp.asarray(time, jnp.int32))


def expected_observation(game):
    return (np.asarray(observation.flatten(observation.observe(game))),
            np.asarray(action_mask.valid_actions(game)))


def assert_features_equal(actual, expected):
    # Jitted and eager code may divide differently (x / 3 versus x * (1 / 3)): 1 ulp apart.
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=0)


def assert_trees_equal(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def without_history_buffer(state: EnvState):
    return state.replace(game=state.game.replace(history=None))


def test_static_facts():
    assert ENV.observation_size == 1545 and ENV.num_actions == 28
    assert ENV.name == "HackMatrix"
    assert PARAMS.max_steps_in_episode == 2000


def _shapes(tree):
    return jax.tree.structure(tree), [(leaf.shape, leaf.dtype, leaf.weak_type)
                                      for leaf in jax.tree.leaves(tree)]


def test_reset_shapes_are_those_of_a_reset():
    # The trainer lowers its update against these instead of tracing a reset: any difference
    # would make the compiled update reject the real runner.
    assert _shapes(ENV.reset_shapes(PARAMS)) == _shapes(jax.eval_shape(ENV.reset_env, KEY, PARAMS))


def test_reset_observation_matches_the_game():
    obs, state = RESET(KEY, PARAMS)
    assert obs.features.shape == (1545,) and obs.features.dtype == jnp.float32
    assert obs.action_mask.shape == (28,) and obs.action_mask.dtype == jnp.bool_
    features, mask = expected_observation(state.game)
    assert_features_equal(obs.features, features)
    np.testing.assert_array_equal(obs.action_mask, mask)
    assert int(state.time) == 0


def test_get_obs_of_a_reset_state_is_the_resets_observation():
    obs, state = RESET(KEY, PARAMS)
    assert_trees_equal(jax.jit(ENV.get_obs)(state), obs)
    # A state built by hand from a scenario starts there, as a gymnax user would start one.
    built = env_state({"player": {"row": 0, "col": 0, "dataSiphons": 1}})
    features, mask = expected_observation(built.game)
    got = ENV.get_obs(built)
    assert_features_equal(got.features, features)
    np.testing.assert_array_equal(got.action_mask, mask)
    # A siphon charge makes siphon valid; a move off the board is not.
    assert bool(got.action_mask[C.ACTION_SIPHON]) and not bool(got.action_mask[LEFT])


def test_step_env_plain_move():
    obs, state, reward, done, info = STEP_ENV(KEY, env_state({"player": {"row": 3, "col": 3}}),
                                              UP, PARAMS)
    assert (int(state.game.core.player_row), int(state.game.core.player_col)) == (4, 3)
    assert int(state.time) == 1 and not bool(done)
    expected = np.zeros(C.NUM_REWARD_COMPONENTS, np.float32)
    expected[C.REWARD_COMPONENTS.index("step_penalty")] = -0.01
    expected[C.REWARD_COMPONENTS.index("distance")] = 0.05
    np.testing.assert_allclose(info["reward_components"], expected, atol=1e-7)
    assert float(reward) == pytest.approx(0.04)
    assert float(info["reward_components"].sum()) == pytest.approx(float(reward))
    assert not bool(info["truncated"]) and not bool(info["invalid_action"])
    features, mask = expected_observation(state.game)
    assert_features_equal(obs.features, features)
    np.testing.assert_array_equal(obs.action_mask, mask)


def test_step_without_done_does_not_reset():
    state = env_state({"player": {"row": 3, "col": 3}}, time=5)
    auto = STEP(KEY, state, UP, PARAMS)
    plain = STEP_ENV(KEY, state, UP, PARAMS)
    assert_trees_equal(auto, plain)


def test_invalid_action_auto_resets_and_reports_the_taken_step():
    state = env_state({"player": {"row": 3, "col": 3, "score": 7}, "stage": 4}, time=9)
    obs, new_state, reward, done, info = STEP(KEY, state, 5 + C.CRASH, PARAMS)  # not owned
    assert bool(done) and float(reward) == 0.0
    assert bool(info["invalid_action"]) and not bool(info["truncated"])
    assert int(info["stage"]) == 4 and int(info["score"]) == 7
    assert not bool(info["death"]) and not bool(info["won"])
    np.testing.assert_array_equal(info["reward_components"], np.zeros(15, np.float32))
    # The returned state is the new episode drawn with the reset half of the key.
    reset_obs, reset_state = RESET(spawning.split_key(KEY, 2)[1], PARAMS)
    assert int(new_state.time) == 0 and int(new_state.game.history_size) == 0
    assert_trees_equal(without_history_buffer(new_state), without_history_buffer(reset_state))
    assert_features_equal(obs.features, reset_obs.features)
    np.testing.assert_array_equal(obs.action_mask, reset_obs.action_mask)


def test_death_ends_the_episode_with_terminal_info():
    state = env_state({"player": {"row": 3, "col": 3, "hp": 0}, "stage": 3})
    _, new_state, reward, done, info = STEP(KEY, state, UP, PARAMS)
    assert bool(done) and bool(info["death"]) and not bool(info["invalid_action"])
    assert int(info["stage"]) == 3 and not bool(info["stage_complete"])
    components = dict(zip(C.REWARD_COMPONENTS, np.asarray(info["reward_components"])))
    assert components["death"] == pytest.approx(-1.5)
    assert float(reward) == pytest.approx(-1.51)
    assert int(new_state.time) == 0


def test_victory_ends_the_episode_with_terminal_info():
    state = env_state({"player": {"row": 5, "col": 4, "score": 3}, "stage": 8})
    _, new_state, reward, done, info = STEP(KEY, state, RIGHT, PARAMS)
    assert bool(done) and bool(info["won"]) and bool(info["stage_complete"])
    assert int(info["stage"]) == 8
    assert int(info["score"]) == 3
    assert float(reward) == pytest.approx(-0.01 + 64 + 0.05 + 500 + 300, rel=1e-6)
    assert int(new_state.time) == 0 and int(new_state.game.stage) == 1


def test_truncation_counts_as_done():
    params = EnvParams(max_steps_in_episode=3)
    state = env_state({"player": {"row": 3, "col": 3}}, time=2)
    _, stepped, _, done, info = STEP_ENV(KEY, state, UP, params)
    assert bool(done) and bool(info["truncated"]) and int(stepped.time) == 3
    _, reset_state, _, done, info = STEP(KEY, state, UP, params)
    assert bool(done) and bool(info["truncated"]) and int(reset_state.time) == 0
    # One step earlier nothing happens.
    _, _, _, done, info = STEP(KEY, env_state({"player": {"row": 3, "col": 3}}, time=1), UP,
                               params)
    assert not bool(done) and not bool(info["truncated"])


def test_a_game_ending_step_at_the_limit_is_not_truncated():
    params = EnvParams(max_steps_in_episode=1)
    _, _, _, done, info = STEP(KEY, env_state({"player": {"row": 3, "col": 3}}), 5, params)
    assert bool(done) and bool(info["invalid_action"]) and not bool(info["truncated"])


def test_jit_and_vmap_batch_without_retracing():
    keys = jax.random.split(KEY, BATCH)
    obs, states = jax.jit(jax.vmap(ENV.reset_env, in_axes=(0, None)))(keys, PARAMS)
    assert obs.features.shape == (BATCH, 1545) and obs.action_mask.shape == (BATCH, 28)
    # Several steps with changing states, actions and params values compile once.
    for i, actions in enumerate([[0, 1, 2, 3], [4, 10, 27, 5], [3, 2, 1, 0]]):
        keys = jax.random.split(jax.random.PRNGKey(i + 1), BATCH)
        (obs, states, reward, done, info), _ = BATCH_STEP_BOTH(
            keys, states, jnp.asarray(actions, jnp.int32), EnvParams(max_steps_in_episode=9 + i))
    assert obs.features.shape == (BATCH, 1545) and reward.shape == (BATCH,)
    assert done.shape == (BATCH,) and info["reward_components"].shape == (BATCH, 15)
    for i in range(BATCH):
        game = jax.tree_util.tree_map(lambda x, i=i: x[i], states.game)
        features, mask = expected_observation(game)
        assert_features_equal(obs.features[i], features)
        np.testing.assert_array_equal(obs.action_mask[i], mask)
    # A batch of scenario states (a different origin of the same shapes) reuses the compilation.
    scenario_states = jax.tree_util.tree_map(
        lambda *xs: jnp.stack(xs),
        *[env_state({"player": {"row": 0, "col": i}, "stage": 1 + i}, time=i)
          for i in range(BATCH)])
    (_, stepped, _, done, _), _ = BATCH_STEP_BOTH(keys, scenario_states,
                                                  jnp.full((BATCH,), UP, jnp.int32), PARAMS)
    assert not np.asarray(done).any()
    np.testing.assert_array_equal(stepped.game.core.player_row, [1] * BATCH)
    np.testing.assert_array_equal(stepped.time, [1, 2, 3, 4])


def test_single_generation_step_matches_step_and_reset():
    """The auto-resetting step generates one stage: the completed stage's successor, or a new
    game on done. Either way it equals the raw game step, then the reset drawn from the reset
    half of the key."""
    step_key, reset_key = spawning.split_key(KEY, 2)
    reset_obs, reset_state = RESET(reset_key, PARAMS)

    # Stage completion: not done, the generated next stage is returned as the raw step makes it.
    state = env_state({"player": {"row": 5, "col": 4}, "stage": 2}, time=4)
    obs, stepped, reward, done, info = STEP(KEY, state, RIGHT, PARAMS)
    game, game_obs, game_reward, game_done, game_info = compiled.STEP(step_key, state.game, RIGHT)
    assert bool(game_info["stage_complete"]) and not bool(done) and not bool(game_done)
    assert bool(info["stage_complete"]) and not bool(info["won"])
    assert int(stepped.game.stage) == 3 and int(stepped.time) == 5
    assert_trees_equal(stepped.game, game)
    assert_trees_equal((obs, stepped, reward, done, info), STEP_ENV(KEY, state, RIGHT, PARAMS))
    assert_features_equal(obs.features, observation.flatten(game_obs))
    assert float(reward) == float(game_reward)
    np.testing.assert_array_equal(
        info["reward_components"],
        [game_info["reward_components"][name] for name in C.REWARD_COMPONENTS])

    # Death: the step's terminal reward and info, then exactly the reset of the reset key.
    state = env_state({"player": {"row": 3, "col": 3, "hp": 0}, "stage": 3}, time=4)
    obs, new_state, reward, done, info = STEP(KEY, state, UP, PARAMS)
    _, _, env_reward, env_done, env_info = STEP_ENV(KEY, state, UP, PARAMS)
    assert bool(done) and bool(env_done) and bool(info["death"])
    assert float(reward) == float(env_reward)
    assert_trees_equal(info, env_info)
    assert int(new_state.time) == 0
    assert_trees_equal(without_history_buffer(new_state), without_history_buffer(reset_state))
    assert_features_equal(obs.features, reset_obs.features)
    np.testing.assert_array_equal(obs.action_mask, reset_obs.action_mask)

    # A stage completed on the truncating step: the new game replaces the generated stage.
    state = env_state({"player": {"row": 5, "col": 4}, "stage": 2}, time=2)
    obs, new_state, _, done, info = STEP(KEY, state, RIGHT, EnvParams(max_steps_in_episode=3))
    assert bool(done) and bool(info["truncated"]) and int(new_state.game.stage) == 1
    assert_trees_equal(without_history_buffer(new_state), without_history_buffer(reset_state))
    assert_features_equal(obs.features, reset_obs.features)


def test_raw_game_step_traces_once_for_reset_stepped_and_scenario_states():
    """New games, stepped games and scenario states share one abstract type (no weak types)."""
    from hackmatrix import game

    @jax.jit
    @chex.assert_max_traces(n=1)
    def raw_step(key, state, action):
        return game.step(key, state, action)

    new_game, _ = jax.jit(game.reset)(KEY)
    stepped, *_ = raw_step(KEY, new_game, jnp.int32(0))
    raw_step(KEY, stepped, jnp.int32(1))
    raw_step(KEY, scenario.from_dict({"player": {"row": 0, "col": 0}}), jnp.int32(0))


def test_gymnax_spaces_describe_the_actions_and_features():
    actions, features_space = ENV.action_space(PARAMS), ENV.observation_space(PARAMS)
    assert actions.n == 28 and actions.shape == ()
    draws = np.asarray(jax.vmap(actions.sample)(jax.random.split(KEY, 512)))
    assert set(draws.tolist()) == set(range(28))
    assert actions.contains(27) and not actions.contains(28) and not actions.contains(-1)
    assert not actions.contains(3.7) and actions.contains(3.0)

    assert features_space.shape == (1545,) and features_space.dtype == jnp.float32
    obs, _ = BATCH_RESET(jax.random.split(KEY, BATCH), PARAMS)
    assert all(features_space.contains(features) for features in obs.features)
    # Beyond play's ranges, the uncapped features pass 1 and stay inside the space.
    features, _ = expected_observation(scenario.from_dict({
        "player": {"row": 0, "col": 0, "credits": 500, "dataSiphons": 30},
        "enemies": [{"type": "virus", "row": 1, "col": 0, "hp": 9}]}))
    enemy_hp = 33 + 6 * 42 + 4  # cell (1, 0), channel 4
    assert features[3] == 1.0 and features[6] == 3.0 and features[enemy_hp] == 3.0
    assert features_space.contains(features)
    assert not features_space.contains(features[:-1])
    assert not features_space.contains(np.where(np.arange(1545) == 33 + 7, 2.0, features))
    assert not features_space.contains(np.where(np.arange(1545) == 0, -0.2, features))
    # §15.3: a countdown a scenario set below 0 reads turnsRemaining / 4.
    features, _ = expected_observation(scenario.from_dict({
        "player": {"row": 0, "col": 0},
        "transmissions": [{"row": 2, "col": 2, "turnsRemaining": -3, "enemyType": "virus"}]}))
    assert features[33 + 14 * 42 + 36] == -0.75 and features_space.contains(features)


def test_feature_space_leaves_every_uncapped_feature_unbounded():
    """§15: attackDamage, block points and spawn count, and cell credits and energy have no cap
    and the transmission countdown no floor (a scenario may set them beyond play): the space
    must contain them past 1 and below -1."""
    features, _ = expected_observation(scenario.from_dict({
        "player": {"row": 0, "col": 0, "attackDamage": 5},
        "blocks": [{"row": 2, "col": 3, "type": "data", "points": 18, "spawnCount": 27}],
        "resources": [{"row": 4, "col": 4, "credits": 6}, {"row": 4, "col": 5, "energy": 9}],
        "transmissions": [{"row": 1, "col": 1, "turnsRemaining": -10, "enemyType": "virus"}]}))

    def cell(row, col, channel):
        return 33 + (row * 6 + col) * 42 + channel

    assert features[7] == 2.0  # (attackDamage - 1) / 2
    assert features[cell(2, 3, 10)] == 2.0 and features[cell(2, 3, 35)] == 3.0
    assert features[cell(4, 4, 37)] == 2.0 and features[cell(4, 5, 38)] == 3.0
    assert features[cell(1, 1, 36)] == -2.5  # the countdown has no lower bound either
    assert ENV.observation_space(PARAMS).contains(features)


def test_batch_reset_resets_each_env_from_its_own_key():
    keys = jax.random.split(KEY, BATCH)
    obs, states = BATCH_RESET(keys, PARAMS)
    for i, key in enumerate(keys):
        row = jax.tree_util.tree_map(lambda x, i=i: x[i], (obs, states))
        assert_trees_equal(row, RESET(key, PARAMS))
    # Independent games: no two share a board.
    assert len({np.asarray(obs.features[i]).tobytes() for i in range(BATCH)}) == BATCH
