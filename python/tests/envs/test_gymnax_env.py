"""The gymnax adapter under the env contract (`envs/gymnax_env.py`) and the `--env` registry
(`envs/registry.py`): shapes and dtypes, masks, done = terminated | truncated with the
auto-reset, determinism, and the registry's refusals."""

import subprocess
import sys

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.envs import gymnax_env, registry
from hackmatrix.envs.contract import EnvError, EnvObservation
from hackmatrix.envs.registry import env_id_problem, gymnax_ids, make_env

BATCH = 5


def keys(seed, n=BATCH):
    return jax.random.split(jax.random.PRNGKey(seed), n)


@pytest.fixture(scope="module")
def cartpole():
    return make_env("CartPole-v1")


@pytest.fixture(scope="module")
def breakout():
    return make_env("Breakout-MinAtar")


def test_cartpole_sizes_shapes_and_dtypes(cartpole):
    assert (cartpole.env_id, cartpole.observation_size, cartpole.num_actions) == (
        "CartPole-v1", 4, 2)
    assert cartpole.default_params.max_steps_in_episode == 500
    obs, states = cartpole.batch_reset(keys(0))
    assert isinstance(obs, EnvObservation)
    assert obs.features.shape == (BATCH, 4) and obs.features.dtype == jnp.float32
    assert obs.action_mask.shape == (BATCH, 2) and obs.action_mask.dtype == jnp.bool_
    assert bool(obs.action_mask.all())
    # The gymnax state's own variables, as CartPole observes them: a fresh pole within 0.05.
    np.testing.assert_array_equal(
        obs.features, np.stack([states.x, states.x_dot, states.theta, states.theta_dot], 1))
    assert np.abs(np.asarray(obs.features)).max() <= 0.05
    actions = jnp.array([0, 1, 0, 1, 1], jnp.int32)
    next_obs, next_states, reward, done, info = cartpole.batch_step(keys(1), states, actions)
    assert next_obs.features.shape == (BATCH, 4) and next_obs.features.dtype == jnp.float32
    assert bool(next_obs.action_mask.all()) and next_obs.action_mask.shape == (BATCH, 2)
    assert reward.shape == (BATCH,) and reward.dtype == jnp.float32
    assert done.shape == (BATCH,) and done.dtype == jnp.bool_
    np.testing.assert_array_equal(reward, np.ones(BATCH, np.float32))
    assert not bool(done.any())
    np.testing.assert_array_equal(next_states.time, np.ones(BATCH))
    # The push moves the cart: action 1 to the right (x_dot grows), action 0 to the left.
    pushed = np.sign(np.asarray(next_states.x_dot - states.x_dot))
    np.testing.assert_array_equal(pushed, np.where(np.asarray(actions) == 1, 1, -1))


def test_a_minatar_observation_of_three_dimensions_is_flattened_to_float32(breakout):
    assert (breakout.observation_size, breakout.num_actions) == (10 * 10 * 4, 3)
    env, params = gymnax.make("Breakout-MinAtar")
    key = jax.random.PRNGKey(3)
    raw, _ = env.reset(key, params)
    assert raw.shape == (10, 10, 4)
    obs, state = breakout.reset(key)
    assert obs.features.shape == (400,) and obs.features.dtype == jnp.float32
    assert obs.action_mask.shape == (3,) and bool(obs.action_mask.all())
    # Row-major: features[(row * 10 + column) * 4 + channel] is raw[row, column, channel].
    np.testing.assert_array_equal(obs.features, np.asarray(raw, np.float32).reshape(-1))
    assert set(np.unique(obs.features)) <= {0.0, 1.0} and 0 < float(obs.features.sum()) < 400
    batch_obs, batch_states = breakout.batch_reset(keys(4, 3))
    assert batch_obs.features.shape == (3, 400) and batch_obs.action_mask.shape == (3, 3)
    next_obs, _, reward, done, _ = breakout.batch_step(keys(5, 3), batch_states,
                                                       jnp.array([0, 1, 2], jnp.int32))
    assert next_obs.features.shape == (3, 400) and next_obs.features.dtype == jnp.float32
    assert reward.dtype == jnp.float32 and done.dtype == jnp.bool_


def test_an_integer_observation_becomes_float32_features():
    # FourRooms observes int32 positions.
    env = make_env("FourRooms-misc")
    raw, _ = gymnax.make("FourRooms-misc")[0].reset(jax.random.PRNGKey(0))
    assert raw.dtype == jnp.int32
    obs, _ = env.reset(jax.random.PRNGKey(0))
    assert obs.features.dtype == jnp.float32
    np.testing.assert_array_equal(obs.features, np.asarray(raw, np.float32))


def test_truncation_at_the_time_limit_ends_the_episode_and_returns_a_reset_observation(cartpole):
    limit = cartpole.default_params.max_steps_in_episode
    threshold = cartpole.default_params.theta_threshold_radians
    # Env 0 upright one step before the limit (truncated), env 1 upright earlier (goes on),
    # env 2 one step before the limit with a pole that falls past the threshold in this step
    # (terminated and truncated), env 3 the same earlier (terminated).
    _, states = cartpole.batch_reset(keys(7, 4))
    falling = [False, False, True, True]
    states = states.replace(
        time=jnp.array([limit - 1, 10, limit - 1, 10], states.time.dtype),
        theta=jnp.where(jnp.array(falling), threshold - 0.01, 0.0).astype(states.theta.dtype),
        theta_dot=jnp.where(jnp.array(falling), 2.0, 0.0).astype(states.theta_dot.dtype))
    obs, next_states, reward, done, info = cartpole.batch_step(keys(8, 4), states,
                                                               jnp.ones(4, jnp.int32))
    np.testing.assert_array_equal(info["truncated"], [True, False, True, False])
    np.testing.assert_array_equal(info["terminated"], [False, False, True, True])
    np.testing.assert_array_equal(done, [True, False, True, True])
    np.testing.assert_array_equal(done, info["terminated"] | info["truncated"])
    # An ended episode's next observation is the next episode's first: time 0, a fresh pole.
    np.testing.assert_array_equal(next_states.time, [0, 11, 0, 0])
    np.testing.assert_array_equal(
        obs.features, np.stack([next_states.x, next_states.x_dot, next_states.theta,
                                next_states.theta_dot], 1))
    assert np.abs(np.asarray(obs.features)[np.asarray(done)]).max() <= 0.05
    # The going-on env stepped from its own state: the pole kept its angle, the push to the
    # right sped the cart up.
    assert float(obs.features[1, 2]) == 0.0 and float(obs.features[1, 1]) > 0.1
    # CartPole pays 1 for every step from a standing pole, the last one too.
    np.testing.assert_array_equal(reward, np.ones(4, np.float32))


def test_done_is_terminated_or_truncated_over_a_random_rollout(cartpole):
    _, states = cartpole.batch_reset(keys(9, 16))

    def step(states, key):
        action_key, step_key = jax.random.split(key)
        actions = jax.random.randint(action_key, (16,), 0, 2, jnp.int32)
        _, states, reward, done, info = cartpole.batch_step(jax.random.split(step_key, 16),
                                                            states, actions)
        return states, (reward, done, info["terminated"], info["truncated"], states.time)

    _, (reward, done, terminated, truncated, time) = jax.lax.scan(
        step, states, jax.random.split(jax.random.PRNGKey(10), 200))
    np.testing.assert_array_equal(done, terminated | truncated)
    assert int(done.sum()) > 16  # random play drops the pole within ~20 steps
    np.testing.assert_array_equal(np.asarray(time)[np.asarray(done)], 0)
    assert reward.dtype == jnp.float32 and set(np.unique(reward)) == {1.0}


def test_the_same_keys_give_the_same_batch_and_other_keys_another(cartpole):
    obs_a, states_a = cartpole.batch_reset(keys(11))
    obs_b, states_b = cartpole.batch_reset(keys(11))
    obs_c, _ = cartpole.batch_reset(keys(12))
    jax.tree.map(np.testing.assert_array_equal, (obs_a, states_a), (obs_b, states_b))
    assert not np.array_equal(obs_a.features, obs_c.features)
    actions = jnp.array([1, 0, 1, 0, 1], jnp.int32)
    step_a = cartpole.batch_step(keys(13), states_a, actions)
    step_b = cartpole.batch_step(keys(13), states_b, actions)
    jax.tree.map(np.testing.assert_array_equal, step_a, step_b)
    # Jitted alike, and the batch is the one-env step of each env (to the last bits of the
    # pole's sines and cosines, which XLA may vectorise differently).
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    jax.tree.map(close, step_a, jax.jit(cartpole.batch_step)(keys(13), states_a, actions))
    one = cartpole.step(keys(13)[2], jax.tree.map(lambda x: x[2], states_a), actions[2])
    jax.tree.map(lambda alone, batch: close(alone, batch[2]), one, step_a)


def test_the_registry_makes_hackmatrix_and_gymnax_envs():
    hackmatrix = make_env()
    assert hackmatrix.env_id == "hackmatrix" == registry.HACKMATRIX
    assert make_env("hackmatrix").num_actions == 28
    assert make_env("Acrobot-v1").num_actions == 3
    assert "CartPole-v1" in gymnax_ids() and gymnax_ids() == sorted(gymnax_ids())
    assert env_id_problem("hackmatrix") is None and env_id_problem("CartPole-v1") is None


def test_an_unknown_id_is_refused_with_the_ids_there_are():
    with pytest.raises(EnvError) as raised:
        make_env("Nope-v0")
    message = str(raised.value)
    assert message.startswith("unknown --env Nope-v0: use hackmatrix or a gymnax id (")
    for env_id in ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar"):
        assert env_id in message
    assert "\n" not in message
    assert env_id_problem("Nope-v0") == message
    assert env_id_problem("cartpole-v1").startswith("unknown --env cartpole-v1")  # ids are exact


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCarContinuous-v0"])
def test_a_continuous_action_space_is_refused(env_id):
    with pytest.raises(EnvError, match=f"--env {env_id} has a continuous action space"):
        make_env(env_id)
    assert "continuous action space" in env_id_problem(env_id)


def test_without_gymnax_a_gymnax_id_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnax", None)  # `import gymnax` raises ImportError
    with pytest.raises(EnvError) as raised:
        make_env("CartPole-v1")
    assert str(raised.value) == ('--env CartPole-v1 needs gymnax, an optional dependency: '
                                 'pip install -e "python[gymnax]"')
    assert gymnax_ids() is None
    assert env_id_problem("CartPole-v1") == str(raised.value)
    assert env_id_problem("hackmatrix") is None
    assert make_env("hackmatrix").env_id == "hackmatrix"
    with pytest.raises(EnvError, match="needs gymnax"):
        gymnax_env.GymnaxEnv("Nope-v0")


def test_importing_the_registry_does_not_import_gymnax_until_a_gymnax_env_is_made():
    probe = ("import sys\n"
             "import hackmatrix.envs.registry as registry\n"
             "assert 'gymnax' not in sys.modules, 'import'\n"
             "registry.make_env('hackmatrix')\n"
             "assert registry.env_id_problem('hackmatrix') is None\n"
             "assert 'gymnax' not in sys.modules, 'hackmatrix'\n"
             "registry.make_env('CartPole-v1')\n"
             "assert 'gymnax' in sys.modules, 'CartPole-v1'\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
