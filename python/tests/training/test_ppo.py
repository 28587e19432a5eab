"""GAE against a hand computation; transition alignment on the real env (lr 0 => KL exactly 0)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game.constants import NUM_REWARD_COMPONENTS
from hackmatrix.envs.hackmatrix_env import HACKMATRIX_METRICS, HackMatrixTrainingEnv as HackMatrixEnv
from hackmatrix.training import distribution
from hackmatrix.training.config import ConfigError, TrainConfig
from hackmatrix.training.trainer import compute_gae, explained_variance, make_schedule, make_trainer


def test_gae_matches_hand_computation():
    # env 0: values .5, 1, -.5; rewards 1, 0, 2; the episode ends at step 1; bootstrap value .3.
    # gamma .9, lambda .8:
    #   t2: delta = 2 + .9*.3 + .5 = 2.77                 A2 = 2.77
    #   t1: delta = 0 - 1 (done: no bootstrap) = -1       A1 = -1 (done: no carry)
    #   t0: delta = 1 + .9*1 - .5 = 1.4                   A0 = 1.4 + .9*.8*(-1) = .68
    # env 1: no dones, all rewards 1, values 0, bootstrap 0:
    #   A2 = 1, A1 = 1 + .72*1 = 1.72, A0 = 1 + .72*1.72 = 2.2384
    values = jnp.array([[0.5, 1.0, -0.5], [0.0, 0.0, 0.0]])
    rewards = jnp.array([[1.0, 0.0, 2.0], [1.0, 1.0, 1.0]])
    dones = jnp.array([[False, True, False], [False, False, False]])
    advantages, targets = compute_gae(values, rewards, dones, jnp.array([0.3, 0.0]), 0.9, 0.8)
    np.testing.assert_allclose(advantages, [[0.68, -1.0, 2.77], [2.2384, 1.72, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(targets, [[1.18, 0.0, 2.27], [2.2384, 1.72, 1.0]], rtol=1e-6)


def test_explained_variance_matches_hand_computation():
    # targets 1, 2, 3, 4: mean 2.5, variance (2.25 + .25 + .25 + 2.25) / 4 = 1.25.
    # values 1, 2, 3, 3: residuals 0, 0, 0, 1, mean .25, variance (3 * .0625 + .5625) / 4 = .1875.
    # 1 - .1875 / 1.25 = .85.
    targets = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    values = jnp.array([[1.0, 2.0], [3.0, 3.0]])
    assert float(explained_variance(values, targets)) == pytest.approx(0.85, rel=1e-6)
    assert float(explained_variance(targets, targets)) == 1.0
    assert float(explained_variance(jnp.full((2, 2), 2.5), targets)) == 0.0  # just the mean
    assert np.isnan(explained_variance(values, jnp.ones((2, 2))))  # nothing to explain
    # Split over two devices (rows), averaging moments over them gives the whole batch's value.
    per_device = jax.vmap(lambda v, t: explained_variance(v, t, lambda x: jax.lax.pmean(x, "d")),
                          axis_name="d")(values, targets)
    np.testing.assert_allclose(per_device, [0.85, 0.85], rtol=1e-6)


def test_each_transition_pairs_the_action_with_the_observation_it_was_chosen_from():
    # With lr 0 the params never change, so recomputed log-probs equal the stored ones bit for
    # bit only if every stored observation is the one its action was sampled from. A trainer
    # that stores the observation after the step gets approx_kl ~0.04 and clip_fraction ~0.18.
    # The shape of test_cli's runs, so the compiled program is shared through the cache.
    config = TrainConfig(total_timesteps=8 * 16 * 4, num_envs=8, num_steps=16, num_minibatches=4,
                         update_epochs=4, lr=0.0, hidden_dim=32, num_layers=2, log_interval=2)
    env = HackMatrixEnv()
    trainer = make_trainer(config, env, env.default_params)
    runner = jax.jit(trainer.init)(jax.random.PRNGKey(3))
    params_before = runner.train.params
    metrics = []
    for _ in range(2):
        runner, chunk_metrics = trainer.run_chunk(runner, jnp.int32(2), make_schedule(config))
        metrics.append(chunk_metrics)
    metrics = jax.tree.map(lambda *m: np.concatenate(m), *metrics)
    assert np.all(np.asarray(metrics["approx_kl"]) == 0.0)
    assert np.all(np.asarray(metrics["clip_fraction"]) == 0.0)
    assert np.all(np.asarray(metrics["entropy"]) > 0.0)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a, b), params_before, runner.train.params)


def _shapes(tree):
    return jax.tree.structure(tree), [(leaf.shape, leaf.dtype, leaf.weak_type)
                                      for leaf in jax.tree.leaves(tree)]


def test_init_shapes_are_those_of_init_with_and_without_the_envs_reset_shapes():
    # The CLI lowers the update chunk against init_shapes before init itself is traced.
    key = jax.random.PRNGKey(0)
    # CountingEnv has no reset_shapes, and no board: the default (egocentric) torso on the game,
    # the dense one on it.
    for env, torso in ((HackMatrixEnv(), "ego"), (CountingEnv(), "mlp")):
        config = TrainConfig(num_envs=8, num_steps=16, num_minibatches=4, hidden_dim=32,
                             num_layers=2, torso=torso)
        trainer = make_trainer(config, env, getattr(env, "default_params", None))
        assert _shapes(trainer.init_shapes(key)) == _shapes(jax.eval_shape(trainer.init, key))


class CountingEnv:
    """A deterministic env: each env counts up from a start drawn from its reset key and ends its
    episode at 5. The observation, the valid actions (two or three of four) and the reward
    follow the count and the action, so the data depends on the keys only through the actions
    taken. Its 4 features are no HackMatrix board: configs for it take `torso="mlp"`."""
    observation_size = 4
    num_actions = 4
    metrics = HACKMATRIX_METRICS  # its info carries HackMatrix's keys
    MASKS = ((True, True, False, True), (False, True, True, True), (False, False, True, True),
             (True, False, True, False), (True, True, True, False))

    def _observation(self, count):
        from hackmatrix.game.env import EnvObservation
        features = jnp.stack([count, count * count, jnp.ones_like(count), -count], -1) / 5.0
        return EnvObservation(features.astype(jnp.float32), jnp.asarray(self.MASKS)[count])

    def batch_reset(self, keys, params):
        count = jax.vmap(lambda key: jax.random.randint(key, (), 0, 4))(keys)
        return self._observation(count), count

    def batch_step(self, keys, count, action, params):
        reward = (count - 1.5 * (action == 1) + 0.5 * action).astype(jnp.float32)
        done = count + 1 >= 5
        count = jnp.where(done, 0, count + 1)
        false = jnp.zeros(count.shape, bool)
        info = {"reward_components": jnp.zeros(count.shape + (NUM_REWARD_COMPONENTS,)),
                "stage": count, "won": false, "death": done, "truncated": false,
                "invalid_action": false}
        return self._observation(count), count, reward, done, info


def test_two_devices_learn_what_one_device_learns_from_the_same_data(monkeypatch):
    # Each device steps half the envs and averages its gradient with the other's. With the same
    # data (the last valid action is always taken, so the keys do not matter) and one minibatch
    # per epoch, two devices take the same Adam steps as one, up to the order of float sums; the
    # losses see several valid actions, so the policy gradient, the entropy and the advantage
    # normalisation (over the whole minibatch, not each device's half) all count.
    monkeypatch.setattr(distribution, "sample", lambda key, logits, mask: (
        mask.shape[-1] - 1 - jnp.argmax(mask[..., ::-1], axis=-1)).astype(jnp.int32))
    env = CountingEnv()
    results = []
    for num_devices in (1, 2):
        config = TrainConfig(total_timesteps=10**6, num_envs=8, num_steps=10, num_minibatches=1,
                             update_epochs=2, hidden_dim=16, num_layers=1, log_interval=3,
                             lr=3e-3, num_devices=num_devices, torso="mlp")
        trainer = make_trainer(config, env, None)
        runner = jax.jit(trainer.init, out_shardings=trainer.runner_sharding)(jax.random.PRNGKey(0))
        runner, metrics = trainer.run_chunk(runner, jnp.int32(3), make_schedule(config))
        results.append((runner, metrics))
    (one, one_metrics), (two, two_metrics) = results
    assert len(two.envs.episode_return.sharding.device_set) == 2
    for name in ("num_episodes", "episode_length_sum", "highest_stage", "move_count"):
        np.testing.assert_array_equal(one_metrics[name], two_metrics[name], err_msg=name)
    assert int(one_metrics["num_episodes"].sum()) > 0
    assert np.all(np.asarray(one_metrics["entropy"]) > 0.1)
    assert np.all(np.asarray(one_metrics["pg_loss"]) != 0.0)
    # The gradient norm catches a sum over devices where the mean belongs (Adam would hide it).
    for name in ("reward_sum", "value_loss", "total_loss", "grad_norm", "learning_rate",
                 "pg_loss", "entropy", "approx_kl"):
        np.testing.assert_allclose(one_metrics[name], two_metrics[name], rtol=1e-4, atol=1e-7,
                                   err_msg=name)
    np.testing.assert_array_equal(one_metrics["clip_fraction"], two_metrics["clip_fraction"])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                 one.train.params, two.train.params)
    # Replicated parameters stay identical on every device, bit for bit.
    for leaf in jax.tree.leaves(two.train.params):
        first, second = (np.asarray(shard.data) for shard in leaf.addressable_shards)
        np.testing.assert_array_equal(first, second)


def test_update_composes_into_a_vmapped_train_over_seeds_as_purejaxrl_does():
    # Trainer.update, not jitted, scanned and vmapped by the caller: each seed takes the actions
    # a single run of that seed takes (the rewards depend on them) and ends with its params, up
    # to the last bits of float sums.
    config = TrainConfig(total_timesteps=10**6, num_envs=8, num_steps=10, num_minibatches=2,
                         update_epochs=2, hidden_dim=16, num_layers=1, log_interval=3, lr=3e-3,
                         torso="mlp")
    trainer = make_trainer(config, CountingEnv(), None)
    schedule = make_schedule(config)

    def train(key):
        return jax.lax.scan(lambda runner, _: trainer.update(runner, schedule), trainer.init(key),
                            length=3)

    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    runners, metrics = jax.jit(jax.vmap(train))(keys)
    assert metrics["pg_loss"].shape == (2, 3)
    for seed, key in enumerate(keys):
        single = jax.jit(trainer.init, out_shardings=trainer.runner_sharding)(key)
        single, single_metrics = trainer.run_chunk(single, jnp.int32(3), schedule)
        np.testing.assert_allclose(metrics["reward_sum"][seed], single_metrics["reward_sum"],
                                   rtol=1e-6)
        np.testing.assert_allclose(metrics["pg_loss"][seed], single_metrics["pg_loss"],
                                   rtol=1e-4, atol=1e-7)
        jax.tree.map(lambda vmapped, alone: np.testing.assert_allclose(
            vmapped[seed], alone, rtol=1e-5, atol=1e-6), runners.train.params, single.train.params)
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(runners.train.params)]
    assert not all(np.array_equal(leaf[0], leaf[1]) for leaf in leaves)  # the seeds differ


def test_make_trainer_refuses_an_invalid_config_before_tracing():
    config = TrainConfig(num_envs=8, num_steps=10, num_minibatches=3, hidden_dim=16, torso="mlp")
    with pytest.raises(ConfigError, match="num_minibatches"):
        make_trainer(config, CountingEnv(), None)


def test_update_says_it_runs_on_one_device():
    config = TrainConfig(num_envs=8, num_steps=10, num_minibatches=1, hidden_dim=16,
                         num_devices=2, torso="mlp")
    trainer = make_trainer(config, CountingEnv(), None)
    with pytest.raises(ValueError, match="Trainer.update runs on one device; with num_devices=2"):
        trainer.update(None, make_schedule(config))
