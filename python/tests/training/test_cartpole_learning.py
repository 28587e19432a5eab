"""Learning checks on CartPole-v1 (gymnax), on CPU: PPO with PureJaxRL's CartPole settings
reaches a mean return of at least 475 within 5e5 steps, A2C with Stable-Baselines3's settings
at least 400, and PPO with a learning rate 100x too small stays below 200 (so the checks can
fail).

How "mean return" is measured: each of the seeds 0, 1 and 2 (`jax.random.PRNGKey(seed)`, as the
trainer's `init` takes it) trains for the config's whole budget; its final policy then plays
EVAL_EPISODES (32) episodes with sampled actions (the first episode of each of as many fresh
envs, played for the env's 500-step time limit, so that every episode ends: checked); a seed's
return is the mean over its episodes, and the check's figure is the mean over the three seeds.
Training and evaluation of all seeds are one jitted program, `Trainer.update` scanned over the
updates and vmapped over the seeds as in PureJaxRL. PPO's program is compiled once for both of
its checks: the learning rate is a traced input (`Schedule`). Each seed's `init` runs on its
own, outside the vmap: vmapped, the orthogonal initialisers' QR decompositions become batched
LAPACK calls, which on a 2-core CPU can deadlock XLA's thread pool (jaxlib 0.10.2; see
`stacked_inits`).

Measured on a 2-core AMD EPYC with the suite's XLA settings (mean ± std over the three seeds):
PPO 486.1 ± 4.3, A2C 485.0 ± 12.4, PPO at lr 2.5e-6 28.6 ± 1.6; the file takes ~60 s with the
other core busy. Over 12 seeds one seed's return was 488.8 ± 13.1 for PPO (so a mean of three
falls below 475 for about one set of seeds in thirty) and 472.4 ± 31.9 for A2C.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix import xla_options
from hackmatrix.envs.registry import make_env
from hackmatrix.training import distribution
from hackmatrix.training.config import TrainConfig, run_defaults, validate
from hackmatrix.training.trainer import make_schedule, make_trainer

SEEDS = (0, 1, 2)
EVAL_EPISODES = 32

# PureJaxRL's CartPole-v1 PPO (purejaxrl/ppo.py): 4 envs x 128 steps, 4 minibatches x 4 epochs,
# lr 2.5e-4 linearly annealed, gamma 0.99, GAE lambda 0.95, clip 0.2 (the value loss too),
# entropy 0.01, value 0.5, max grad norm 0.5, separate 64x2 tanh actor and critic.
PPO = TrainConfig(env="CartPole-v1", torso="mlp", hidden_dim=64, num_envs=4, num_steps=128,
                  lr=2.5e-4, total_timesteps=500_000, distance_shaping="rules")
# SB3's A2C (`run_defaults`: 5-step rollouts, lr 7e-4 constant, gae_lambda 1.0, one gradient
# step per rollout, RMSprop) on 8 envs, as the RL Baselines3 Zoo trains CartPole-v1.
A2C = TrainConfig(env="CartPole-v1", algo="a2c", **{
    **run_defaults("cpu", "CartPole-v1", "a2c"), "num_envs": 8, "total_timesteps": 500_000})


@pytest.fixture(scope="module")
def env():
    return make_env("CartPole-v1")


def stacked_inits(trainer, keys):
    """Each seed's initial RunnerState, stacked along a leading seed axis. The inits run one by
    one: `jax.vmap(trainer.init)` batches the QR decompositions of the orthogonal initialisers,
    and XLA:CPU runs batched LAPACK calls (`ParallelBatchMap`) on the thread pool that runs the
    program; on 2 cores two independent ones can take both threads and wait on each other for
    ever (a vmapped `nn.initializers.orthogonal()` of four 64x64 matrices hangs within a few
    hundred calls with jax 0.10.2)."""
    init = jax.jit(trainer.init)
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *[init(key) for key in keys])


class Program:
    """Trains every seed of a config and evaluates its final policy, in one jitted program."""

    def __init__(self, config, env):
        validate(config)
        self.config = config
        self.trainer = trainer = make_trainer(config, env, env.default_params)
        limit = env.default_params.max_steps_in_episode

        def evaluate(params, key):
            reset_key, key = jax.random.split(key)
            obs, states = env.batch_reset(jax.random.split(reset_key, EVAL_EPISODES),
                                          env.default_params)

            def step(carry, key):
                obs, states, returns, running = carry
                action_key, step_key = jax.random.split(key)
                logits, _ = trainer.network.apply(params, obs.features)
                action = distribution.sample(action_key, logits, obs.action_mask)
                obs, states, reward, done, _ = env.batch_step(
                    jax.random.split(step_key, EVAL_EPISODES), states, action,
                    env.default_params)
                # Each env's first episode only: the env resets itself when it ends.
                returns = returns + jnp.where(running, reward, 0.0)
                return (obs, states, returns, running & ~done), None

            start = (obs, states, jnp.zeros(EVAL_EPISODES), jnp.ones(EVAL_EPISODES, bool))
            (_, _, returns, running), _ = jax.lax.scan(step, start,
                                                       jax.random.split(key, limit))
            return returns, running

        def train_and_evaluate(runner, schedule, eval_key):
            runner, _ = jax.lax.scan(lambda runner, _: trainer.update(runner, schedule), runner,
                                     length=config.num_updates)
            return evaluate(runner.train.params, eval_key)

        self._program = jax.jit(jax.vmap(train_and_evaluate, in_axes=(0, None, 0)),
                                compiler_options=xla_options.compiler_options())

    def returns_per_seed(self, lr: float) -> np.ndarray:
        """Mean evaluation return of each seed after training at learning rate `lr`."""
        runners = stacked_inits(self.trainer, [jax.random.PRNGKey(seed) for seed in SEEDS])
        eval_keys = jnp.stack([jax.random.PRNGKey(1000 + seed) for seed in SEEDS])
        schedule = make_schedule(dataclasses.replace(self.config, lr=lr))
        returns, running = self._program(runners, schedule, eval_keys)
        assert not bool(running.any()), "an evaluation episode outlasted the time limit"
        return np.asarray(returns, np.float64).mean(axis=1)


def describe(per_seed: np.ndarray) -> str:
    return (f"mean return {per_seed.mean():.1f} ± {per_seed.std():.1f} over seeds "
            f"{list(SEEDS)} (per seed {np.round(per_seed, 1).tolist()})")


@pytest.fixture(scope="module")
def ppo(env):
    return Program(PPO, env)


def test_the_ppo_config_is_purejaxrls_cartpole_config(ppo):
    expected = {"algo": "ppo", "num_envs": 4, "num_steps": 128, "num_minibatches": 4,
                "update_epochs": 4, "lr": 2.5e-4, "lr_schedule": "linear", "gamma": 0.99,
                "gae_lambda": 0.95, "clip_eps": 0.2, "clip_value_loss": True, "ent_coef": 0.01,
                "ent_coef_end": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5, "torso": "mlp",
                "shared_torso": False, "activation": "tanh", "hidden_dim": 64, "num_layers": 2,
                "total_timesteps": 500_000, "num_devices": 1}
    assert {name: getattr(PPO, name) for name in expected} == expected
    assert PPO.num_updates == 976  # 5e5 // (4 * 128): PureJaxRL's count too
    shapes = jax.eval_shape(ppo.trainer.init, jax.random.PRNGKey(0)).train.params["params"]
    assert {name: layer["kernel"].shape for name, layer in shapes.items()} == {
        "actor_torso_0": (4, 64), "actor_torso_1": (64, 64), "actor_logits": (64, 2),
        "critic_torso_0": (4, 64), "critic_torso_1": (64, 64), "critic_value": (64, 1)}


def test_ppo_reaches_475_on_cartpole_within_5e5_steps(ppo):
    per_seed = ppo.returns_per_seed(PPO.lr)
    assert per_seed.mean() >= 475, f"PPO on CartPole-v1: {describe(per_seed)}, below 475"


def test_ppo_with_a_learning_rate_100x_too_small_stays_below_200(ppo):
    # The power check: the same program and seeds at lr 2.5e-6 learn almost nothing.
    per_seed = ppo.returns_per_seed(PPO.lr / 100)
    assert per_seed.mean() < 200, f"PPO at lr {PPO.lr / 100:g}: {describe(per_seed)}, not below 200"


def test_a2c_reaches_400_on_cartpole_within_5e5_steps(env):
    assert (A2C.num_steps, A2C.lr, A2C.lr_schedule, A2C.gae_lambda, A2C.num_minibatches,
            A2C.update_epochs, A2C.num_envs) == (5, 7e-4, "constant", 1.0, 1, 1, 8)
    per_seed = Program(A2C, env).returns_per_seed(A2C.lr)
    assert per_seed.mean() >= 400, f"A2C on CartPole-v1: {describe(per_seed)}, below 400"
