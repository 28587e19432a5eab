"""GAE against a hand computation; transition alignment on the real env (lr 0 => KL exactly 0)."""

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game.env import HackMatrixEnv
from hackmatrix.training.config import TrainConfig
from hackmatrix.training.ppo import compute_gae, make_schedule, make_trainer


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
