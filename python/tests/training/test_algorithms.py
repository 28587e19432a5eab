"""The algorithms (`training/algorithms/`): A2C's loss and gradient step against a NumPy
computation written here, the registry of algorithms, and the config rules for A2C and for envs
other than HackMatrix. PPO's update against its own reference is test_ppo_reference.py."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.envs.contract import EnvObservation
from hackmatrix.training import config as C
from hackmatrix.training.algorithms import ALGORITHMS, a2c
from hackmatrix.training.algorithms.base import (Batch, Coefficients, DeviceShare, TrainState,
                                                 Transition)
from hackmatrix.training.config import ConfigError, TrainConfig

ROWS, OBS, ACTIONS = 6, 3, 3
VF_COEF, ENT_COEF, LR = 0.5, 0.05, 0.01


class LinearNetwork:
    """A network whose forward pass the reference redoes exactly: linear logits and value."""

    @staticmethod
    def apply(params, features):
        return (features @ params["pi_w"] + params["pi_b"],
                features @ params["v_w"] + params["v_b"])


def tiny_problem():
    """(params, batch) in float32; row 4 cannot take action 2. The advantages have a mean far
    from 0 and unequal spread, so normalising them would change the step."""
    rng = np.random.default_rng(0)
    params = {"pi_w": rng.normal(0, 0.5, (OBS, ACTIONS)), "pi_b": rng.normal(0, 0.1, ACTIONS),
              "v_w": rng.normal(0, 0.5, OBS), "v_b": np.array(0.3)}
    params = {name: np.asarray(value, np.float32) for name, value in params.items()}
    features = rng.normal(0, 1, (ROWS, OBS)).astype(np.float32)
    mask = np.ones((ROWS, ACTIONS), bool)
    mask[4, 2] = False
    action = np.array([0, 2, 1, 1, 0, 2], np.int32)
    advantages = np.array([1.5, -0.5, 2.0, 0.7, 3.0, -1.2], np.float32)
    targets = rng.normal(1, 1, ROWS).astype(np.float32)
    old_log_prob = reference_log_probs(params, features, mask)[np.arange(ROWS), action]
    transitions = Transition(obs=EnvObservation(jnp.asarray(features), jnp.asarray(mask)),
                             action=jnp.asarray(action),
                             log_prob=jnp.asarray(old_log_prob, jnp.float32),
                             value=jnp.zeros(ROWS), reward=jnp.zeros(ROWS),
                             done=jnp.zeros(ROWS, bool))
    batch = Batch(transitions, jnp.asarray(advantages), jnp.asarray(targets))
    return params, batch, (features, mask, action, advantages, targets, old_log_prob)


# ------------------------------------------------------------------ the NumPy reference (float64)
def reference_log_probs(params, features, mask):
    logits = features.astype(np.float64) @ params["pi_w"] + params["pi_b"]
    masked = np.where(mask, logits, -np.inf)
    top = masked.max(1, keepdims=True)
    log_z = top + np.log(np.exp(masked - top).sum(1, keepdims=True))
    return np.where(mask, logits - log_z, -np.inf)


def reference_loss_and_grads(params, data):
    """A2C's loss terms and the gradient of pg_loss + vf * value_loss - ent * entropy, by hand:
    the policy gradient of the raw advantages, the squared value error, the masked entropy."""
    features, mask, action, advantages, targets, _ = data
    x = features.astype(np.float64)
    log_p = reference_log_probs(params, features, mask)
    p = np.where(mask, np.exp(log_p), 0.0)
    safe_log_p = np.where(mask, log_p, 0.0)
    entropy_rows = -(p * safe_log_p).sum(1)
    value = x @ params["v_w"] + params["v_b"]
    taken = log_p[np.arange(ROWS), action]
    pg_loss = -(advantages * taken).mean()
    value_loss = np.square(targets - value).mean()
    entropy = entropy_rows.mean()
    total = pg_loss + VF_COEF * value_loss - ENT_COEF * entropy

    one_hot = np.eye(ACTIONS)[action]
    d_logits = -(advantages[:, None] / ROWS) * (one_hot - p)        # d pg_loss
    # dH/dz_j = -p_j (log p_j + H) for a valid action j (0 for a masked one: p_j = 0).
    d_logits += (ENT_COEF / ROWS) * p * (safe_log_p + entropy_rows[:, None])
    d_value = VF_COEF * -2.0 * (targets - value) / ROWS
    grads = {"pi_w": x.T @ d_logits, "pi_b": d_logits.sum(0),
             "v_w": x.T @ d_value, "v_b": d_value.sum()}
    terms = {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": entropy,
             "total_loss": total}
    return terms, grads


def reference_steps(params, data, max_grad_norm, steps):
    """`steps` gradient steps as PyTorch's RMSprop after clip_grad_norm_ (SB3's A2C): the
    square average starts at 0 and decays by 0.99, eps 1e-5 is added to its square root."""
    params = {name: value.astype(np.float64) for name, value in params.items()}
    square_avg = {name: np.zeros_like(value) for name, value in params.items()}
    records = []
    for _ in range(steps):
        terms, grads = reference_loss_and_grads(params, data)
        norm = np.sqrt(sum(np.square(g).sum() for g in grads.values()))
        scale = 1.0 if norm < max_grad_norm else max_grad_norm / norm
        for name, grad in grads.items():
            grad = grad * scale
            square_avg[name] = 0.99 * square_avg[name] + 0.01 * np.square(grad)
            params[name] = params[name] - LR * grad / (np.sqrt(square_avg[name]) + 1e-5)
        # approx_kl after the step: the k3 estimator from the rollout's log-probs to the new.
        features, mask, action, _, _, old_log_prob = data
        new_log_prob = reference_log_probs(params, features, mask)[np.arange(ROWS), action]
        log_ratio = new_log_prob - old_log_prob
        records.append({**terms, "grad_norm": norm,
                        "approx_kl": (np.exp(log_ratio) - 1.0 - log_ratio).mean()})
    return params, records


# ------------------------------------------------------------------ the tests
def test_a2c_loss_is_the_policy_gradient_of_raw_advantages_plus_value_error_minus_entropy():
    params, batch, data = tiny_problem()
    config = TrainConfig(algo="a2c", num_minibatches=1, update_epochs=1, vf_coef=VF_COEF)
    total, terms = a2c.loss(params, LinearNetwork(), config, batch, jnp.float32(ENT_COEF))
    grads = jax.grad(lambda p: a2c.loss(p, LinearNetwork(), config, batch,
                                        jnp.float32(ENT_COEF))[0])(params)
    expected_terms, expected_grads = reference_loss_and_grads(params, data)
    for name, value in expected_terms.items():
        np.testing.assert_allclose(terms[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(total, expected_terms["total_loss"], rtol=1e-5)
    for name, value in expected_grads.items():
        np.testing.assert_allclose(grads[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    # The advantages enter unnormalised: normalised ones would give another policy gradient.
    normalized = (data[3] - data[3].mean()) / data[3].std()
    other, _ = reference_loss_and_grads(params, data[:3] + (normalized,) + data[4:])
    assert abs(other["pg_loss"] - expected_terms["pg_loss"]) > 0.1


@pytest.mark.parametrize("max_grad_norm", [0.1, 100.0], ids=["clipped", "unclipped"])
def test_a2c_step_is_rmsprop_after_global_norm_clipping_as_pytorch_and_sb3(max_grad_norm):
    params, batch, data = tiny_problem()
    config = TrainConfig(algo="a2c", num_minibatches=1, update_epochs=1, vf_coef=VF_COEF,
                         max_grad_norm=max_grad_norm)
    optimizer = a2c.make_optimizer(config)
    train = TrainState(jax.tree.map(jnp.asarray, params), optimizer.init(params),
                       jnp.float32(0.0))
    share = DeviceShare(ROWS, ROWS, lambda x: x, lambda key: key)
    coefficients = Coefficients(jnp.float32(LR), jnp.float32(ENT_COEF))
    expected_params, expected_records = reference_steps(params, data, max_grad_norm, steps=3)
    for step, expected in enumerate(expected_records):
        train, diagnostics = a2c.learn(config, LinearNetwork(), optimizer, train, batch,
                                       coefficients, jax.random.PRNGKey(step), share)
        for name, value in expected.items():
            np.testing.assert_allclose(diagnostics[name], value, rtol=2e-4, atol=1e-6,
                                       err_msg=f"step {step}: {name}")
        assert float(diagnostics["clip_fraction"]) == 0.0
    # The clip binds in every step of the first case and in none of the second.
    norms = [record["grad_norm"] for record in expected_records]
    assert all(norm > max_grad_norm for norm in norms) or all(norm < max_grad_norm
                                                               for norm in norms)
    assert (norms[0] > max_grad_norm) == (max_grad_norm == 0.1)
    for name, value in expected_params.items():
        np.testing.assert_allclose(train.params[name], value, rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    assert float(train.schedule_timesteps) == 0.0  # the trainer counts the timesteps
    # The steps moved the params by more than the tolerance: a missing step would show.
    assert max(np.abs(expected_params[name] - params[name]).max() for name in params) > 0.02


def test_every_algorithm_has_a_module_and_defaults():
    assert tuple(ALGORITHMS) == C.ALGOS == ("ppo", "a2c")
    assert set(C.ALGORITHM_DEFAULTS) == set(C.ALGOS)
    for algorithm in ALGORITHMS.values():
        assert callable(algorithm.make_optimizer) and callable(algorithm.learn)


def test_a2c_defaults_are_sb3s_and_validate():
    assert C.ALGORITHM_DEFAULTS["a2c"] == {
        "num_steps": 5, "lr": 7e-4, "lr_schedule": "constant", "gae_lambda": 1.0,
        "num_minibatches": 1, "update_epochs": 1}
    C.validate(TrainConfig(algo="a2c", **C.ALGORITHM_DEFAULTS["a2c"]))
    assert C.run_defaults("cpu", "CartPole-v1", "a2c") == {
        "num_envs": 256, "num_steps": 5, "total_timesteps": 3_000_000, "log_interval": 1,
        "lr": 7e-4, "lr_schedule": "constant", "gae_lambda": 1.0, "num_minibatches": 1,
        "update_epochs": 1, "torso": "mlp", "hidden_dim": 64, "distance_shaping": "rules"}
    assert C.run_defaults("cpu") == C.device_defaults("cpu")
    assert C.run_defaults("gpu", "hackmatrix", "a2c") == {**C.device_defaults("gpu"),
                                                         **C.ALGORITHM_DEFAULTS["a2c"]}
    # Another env's defaults make a valid config on their own, for either algorithm.
    for algo in C.ALGOS:
        C.validate(TrainConfig(env="CartPole-v1", algo=algo,
                               **C.run_defaults("cpu", "CartPole-v1", algo)))


@pytest.mark.parametrize("values", [{"num_minibatches": 4}, {"update_epochs": 4},
                                    {"num_minibatches": 2, "update_epochs": 2}])
def test_a2c_takes_one_gradient_step_per_rollout(values):
    config = TrainConfig(algo="a2c", **{**C.ALGORITHM_DEFAULTS["a2c"], **values})
    expected = (values.get("num_minibatches", 1), values.get("update_epochs", 1))
    with pytest.raises(ConfigError) as raised:
        C.validate(config)
    assert str(raised.value) == (
        "--algo a2c takes one gradient step per rollout: --num-minibatches and "
        f"--update-epochs must be 1, got {expected[0]} and {expected[1]}")


def test_an_unknown_algorithm_is_refused():
    with pytest.raises(ConfigError, match="--algo must be one of ppo, a2c, got 'sac'"):
        C.validate(TrainConfig(algo="sac"))


REWARD_OPTIONS_REFUSED = ("--reward-weights, --distance-shaping and --program-potential shape "
                          "HackMatrix's reward: --env CartPole-v1 trains on its own")


@pytest.mark.parametrize("values, reason", [
    ({"reward_weights": "kills=2"}, REWARD_OPTIONS_REFUSED),
    ({"distance_shaping": "potential"}, REWARD_OPTIONS_REFUSED),
    ({"program_potential": 1.0}, REWARD_OPTIONS_REFUSED),
    ({"start_programs": 2}, "--start-programs starts HackMatrix games with programs: --env "
                            "CartPole-v1 has none"),
    ({"torso": "ego"}, "--torso ego reads HackMatrix's board: --env CartPole-v1 takes --torso mlp"),
    ({"torso": "conv"},
     "--torso conv reads HackMatrix's board: --env CartPole-v1 takes --torso mlp"),
])
def test_hackmatrix_options_are_refused_for_another_env(values, reason):
    config = TrainConfig(**{"env": "CartPole-v1", **C.run_defaults("cpu", "CartPole-v1"),
                            **values})
    with pytest.raises(ConfigError) as raised:
        C.validate(config)
    assert str(raised.value) == reason


def test_auto_scaling_leaves_a2c_alone():
    # A batch above the 32,768 reference: PPO's minibatches are scaled, A2C's one step is not.
    shape = {"num_envs": 8192, "num_steps": 5, "num_minibatches": 1, "update_epochs": 1}
    ppo = TrainConfig(**{**shape, "num_minibatches": 4, "update_epochs": 4})
    scaled, changes = C.auto_scale_for_batch_size(ppo)
    assert changes == {"num_minibatches": (4, 5)} and scaled.num_minibatches == 5
    config = TrainConfig(algo="a2c", **shape)
    assert config.batch_size > C.REFERENCE_BATCH_SIZE
    assert C.auto_scale_for_batch_size(config) == (config, {})
    C.validate(config)
    bigger = dataclasses.replace(config, num_envs=2 ** 16)
    assert C.auto_scale_for_batch_size(bigger) == (bigger, {})
