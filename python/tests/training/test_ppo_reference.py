"""One PPO update of the trainer against an independent reference written here.

The trainer runs one update (`run_chunk`) on `RecordingEnv`, a deterministic toy env that also
writes every action it is given into its state. The reference takes as given only the
parameters before the update, the actions the trainer sampled (read from the env's state
afterwards) and the shuffle permutations (drawn from the carried key as the trainer draws them;
the key it ends with must be the trainer's). It replays the rollout through the env and redoes
the update by the book in its own code: stored log-probs and values from its own MLP forward pass
(one torso shared by both heads, or an actor and a critic torso) and masked log-softmax, GAE, each epoch's minibatches as slices of that epoch's permutation of
the env-major flat batch (row = env * num_steps + step), per-minibatch advantage normalisation,
the clipped surrogate, the clipped (or, switched off, plain) value loss and the masked entropy
bonus at its scheduled coefficient (differentiated with jax.grad), global-norm clipping and Adam
(eps 1e-5) in float64 NumPy, at the learning rate annealed (linearly or on a cosine) from the
timesteps done before the update. Two variants: the legacy shared tanh torso with a constant
entropy coefficient and the clipped value loss; separate relu torsos with an annealed entropy
coefficient, a cosine learning rate and no value clip. The new parameters and every loss metric
(means over all minibatches of all epochs, grad_norm before clipping) must match. In this
update each clip decides for some samples (or minibatches) and not for others (checked), so
dropping or misplacing one shows.
"""

from typing import NamedTuple

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game.constants import NUM_REWARD_COMPONENTS
from hackmatrix.envs.hackmatrix_env import HACKMATRIX_METRICS
from hackmatrix.game.env import EnvObservation
from hackmatrix.training.config import TrainConfig
from hackmatrix.training.trainer import make_schedule, make_trainer

# A large lr and a small clip_eps and max_grad_norm, so that within 2 x 2 Adam steps the ratio
# clip, the value clip and the gradient clip all bind for some samples or minibatches.
# CONFIG's rollout and batch shapes are every variant's.
CONFIG = TrainConfig(total_timesteps=4 * 32, num_envs=4, num_steps=8, num_minibatches=2,
                     update_epochs=2, lr=0.03, gamma=0.9, gae_lambda=0.8, clip_eps=0.1,
                     ent_coef=0.05, ent_coef_end=0.05, vf_coef=0.5, max_grad_norm=0.4,
                     hidden_dim=8, num_layers=2, log_interval=1, torso="mlp", shared_torso=True,
                     lr_schedule="linear", clip_value_loss=True, activation="tanh")


class Variant(NamedTuple):
    config: TrainConfig
    timesteps_before: int  # the schedule's timesteps when the update starts
    activation: object     # the reference's own activation
    lr: float              # the learning rate at timesteps_before, by hand
    ent_coef: float        # the entropy coefficient at timesteps_before, by hand


VARIANTS = {
    # The update is the run's third: its learning rate is lr * (1 - 64/128), not lr * (1 - 96/128).
    "shared_tanh": Variant(CONFIG, 2 * CONFIG.batch_size, np.tanh, 0.03 * (1.0 - 0.5), 0.05),
    # The run's second update (progress 1/4): the cosine's lr * (1 + cos(pi/4)) / 2, not the
    # linear lr * 3/4, and the coefficient a quarter of the way from 0.05 to 0.01.
    "separate_relu": Variant(
        CONFIG.__class__(**{**CONFIG.to_dict(), "shared_torso": False, "activation": "relu",
                            "lr_schedule": "cosine", "ent_coef_end": 0.01,
                            "clip_value_loss": False}),
        CONFIG.batch_size, lambda x: np.maximum(x, 0.0),
        0.03 * 0.5 * (1.0 + math.cos(math.pi * 0.25)), 0.05 + (0.01 - 0.05) * 0.25),
}
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-5
LOSS_METRICS = ("pg_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "total_loss",
                "grad_norm")


class RecordedState(NamedTuple):
    count: jax.Array    # i32[num_envs]
    step: jax.Array     # i32[num_envs]: steps taken since reset
    actions: jax.Array  # i32[num_envs, num_steps]: the action given at each step


class RecordingEnv:
    """Each env counts up from a start drawn from its reset key and ends its episode at 5; the
    observation, the valid actions (two to four of four) and the reward follow the count and the
    action. The state records the actions, so the test learns which ones the trainer sampled."""
    observation_size = 4
    num_actions = 4
    metrics = HACKMATRIX_METRICS  # its info carries HackMatrix's keys
    MASKS = ((True, True, False, True), (False, True, True, True), (True, True, True, True),
             (True, False, True, False), (False, True, True, False))

    def __init__(self, num_steps):
        self.num_steps = num_steps

    def observation(self, count):
        features = jnp.stack([count, count * count, jnp.ones_like(count), count % 2], -1) / 5.0
        return EnvObservation(features.astype(jnp.float32), jnp.asarray(self.MASKS)[count])

    def batch_reset(self, keys, params):
        count = jax.vmap(lambda key: jax.random.randint(key, (), 0, 4))(keys)
        actions = jnp.zeros(count.shape + (self.num_steps,), jnp.int32)
        return self.observation(count), RecordedState(count, jnp.zeros_like(count), actions)

    def batch_step(self, keys, state, action, params):
        count = state.count
        actions = state.actions.at[jnp.arange(count.shape[0]), state.step].set(action)
        reward = ((count - 1.5 * (action == 1) + 0.5 * action) / 10).astype(jnp.float32)
        done = count + 1 >= 5
        count = jnp.where(done, 0, count + 1)
        false = jnp.zeros(count.shape, bool)
        info = {"reward_components": jnp.zeros(count.shape + (NUM_REWARD_COMPONENTS,)),
                "stage": count, "won": false, "death": done, "truncated": false,
                "invalid_action": false}
        state = RecordedState(count, state.step + 1, actions)
        return self.observation(count), state, reward, done, info


class Rollout(NamedTuple):
    """Env-major [num_envs, num_steps(, ...)] NumPy arrays, as the reference replayed them."""
    features: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray


@pytest.fixture(scope="module")
def env():
    return RecordingEnv(CONFIG.num_steps)


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request):
    return VARIANTS[request.param]


@pytest.fixture(scope="module")
def trainer_update(env, variant):
    """(runner before, runner after, metrics) of the trainer's one update."""
    trainer = make_trainer(variant.config, env, None)
    before = jax.jit(trainer.init)(jax.random.PRNGKey(7))
    before = before._replace(train=before.train._replace(
        schedule_timesteps=jnp.float32(variant.timesteps_before)))
    after, metrics = trainer.run_chunk(before, jnp.int32(1), make_schedule(variant.config))
    return before, after, jax.tree.map(lambda m: np.asarray(m[0]), metrics)


def replay(env, before, actions):
    """The rollout from the envs' state before the update with the given actions; also returns
    the observation and env state it ends with."""
    obs, state = before.envs.obs, before.envs.env_state
    steps = []
    for step in range(CONFIG.num_steps):
        next_obs, state, reward, done, _ = env.batch_step(None, state, actions[:, step], None)
        steps.append((obs.features, obs.action_mask, reward, done))
        obs = next_obs
    features, masks, rewards, dones = (np.stack(column, axis=1) for column in zip(*steps))
    return Rollout(features, masks, actions, rewards, dones), obs, state


def shuffle_permutations(rng):
    """The trainer's draws from its carried key: a split in three per rollout step (the carry,
    the actions' key, the envs' key), then a split in two (the carry, the epochs' key) whose
    second half splits into one permutation key per epoch. Returns (permutations, carry)."""
    for _ in range(CONFIG.num_steps):
        rng, _, _ = jax.random.split(rng, 3)
    rng, epochs_key = jax.random.split(rng)
    permutations = [np.asarray(jax.random.permutation(key, CONFIG.batch_size))
                    for key in jax.random.split(epochs_key, CONFIG.update_epochs)]
    return permutations, rng


def forward(variant, params, features):
    """The actor-critic MLP: torso layers (one torso `torso_i`, or `actor_torso_i` and
    `critic_torso_i`), then the logits and the value heads."""
    layers = params["params"]
    activation = jnp.tanh if variant.activation is np.tanh else jax.nn.relu

    def torso(prefix):
        x = features
        for layer in range(CONFIG.num_layers):
            name = f"{prefix}torso_{layer}"
            x = activation(x @ layers[name]["kernel"] + layers[name]["bias"])
        return x

    if variant.config.shared_torso:
        actor = critic = torso("")
    else:
        actor, critic = torso("actor_"), torso("critic_")
    logits = actor @ layers["actor_logits"]["kernel"] + layers["actor_logits"]["bias"]
    value = critic @ layers["critic_value"]["kernel"][:, 0] + layers["critic_value"]["bias"][0]
    return logits, value


def masked_log_softmax(logits, masks):
    """Log-probabilities normalised over the valid actions only; finite (and meaningless) for
    the invalid ones, so nothing downstream meets inf."""
    valid_max = jnp.max(jnp.where(masks, logits, -jnp.inf), axis=-1, keepdims=True)
    shifted = logits - jax.lax.stop_gradient(valid_max)
    valid_exp = jnp.exp(jnp.where(masks, shifted, -jnp.inf))
    return shifted - jnp.log(jnp.sum(valid_exp, axis=-1, keepdims=True))


def ppo_loss(variant, params, minibatch):
    """PPO's loss on one minibatch (CleanRL's form); aux: the diagnostics, and for each clip the
    samples whose loss term it decided (zero gradient)."""
    features, masks, actions, old_log_probs, old_values, advantages, targets = minibatch
    eps = CONFIG.clip_eps
    logits, values = forward(variant, params, features)
    log_probs = masked_log_softmax(logits, masks)
    log_ratio = jnp.take_along_axis(log_probs, actions[:, None], axis=-1)[:, 0] - old_log_probs
    ratio = jnp.exp(log_ratio)
    surrogate = -advantages * ratio
    clipped_surrogate = -advantages * jnp.clip(ratio, 1.0 - eps, 1.0 + eps)
    pg_loss = jnp.mean(jnp.maximum(surrogate, clipped_surrogate))
    value_error = jnp.square(values - targets)
    clipped_values = old_values + jnp.clip(values - old_values, -eps, eps)
    clipped_value_error = jnp.square(clipped_values - targets)
    if variant.config.clip_value_loss:
        value_loss = 0.5 * jnp.mean(jnp.maximum(value_error, clipped_value_error))
    else:
        value_loss = 0.5 * jnp.mean(value_error)
    entropy = jnp.mean(-jnp.sum(jnp.where(masks, jnp.exp(log_probs) * log_probs, 0.0), axis=-1))
    total_loss = pg_loss + CONFIG.vf_coef * value_loss - variant.ent_coef * entropy
    diagnostics = {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": entropy,
                   "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
                   "clip_fraction": jnp.mean(jnp.abs(ratio - 1.0) > eps),
                   "total_loss": total_loss}
    clip_decisions = {"ratio_clip": jnp.sum(clipped_surrogate > surrogate),
                      "value_clip": jnp.sum(clipped_value_error > value_error)}
    return total_loss, (diagnostics, clip_decisions)


def gae(values, rewards, dones, last_value):
    """Advantages and value targets, [num_envs, num_steps]; no bootstrap past an episode end."""
    advantages = np.zeros_like(values)
    next_advantage, next_value = 0.0, last_value
    for step in reversed(range(CONFIG.num_steps)):
        continues = 1.0 - dones[:, step]
        delta = rewards[:, step] + CONFIG.gamma * next_value * continues - values[:, step]
        next_advantage = delta + CONFIG.gamma * CONFIG.gae_lambda * continues * next_advantage
        advantages[:, step] = next_advantage
        next_value = values[:, step]
    return advantages, advantages + values


def reference_update(variant, params, rollout, last_features, permutations):
    """(new params, metrics, grad norms, clip decisions): see `Reference`."""
    logits, values = forward(variant, params, jnp.asarray(rollout.features))
    log_probs = np.take_along_axis(np.asarray(masked_log_softmax(logits, rollout.masks)),
                                   rollout.actions[..., None], axis=-1)[..., 0]
    values = np.asarray(values, np.float64)
    last_value = np.asarray(forward(variant, params, jnp.asarray(last_features))[1], np.float64)
    advantages, targets = gae(values, rollout.rewards.astype(np.float64),
                              rollout.dones.astype(np.float64), last_value)
    flat = [x.reshape((CONFIG.batch_size,) + x.shape[2:]) for x in
            (rollout.features, rollout.masks, rollout.actions, log_probs, values, advantages,
             targets)]
    lr = variant.lr
    grad_fn = jax.jit(jax.grad(lambda p, m: ppo_loss(variant, p, m), has_aux=True))

    leaves, treedef = jax.tree.flatten(params)
    leaves = [np.asarray(leaf, np.float64) for leaf in leaves]
    first_moments = [np.zeros_like(leaf) for leaf in leaves]
    second_moments = [np.zeros_like(leaf) for leaf in leaves]
    diagnostics, grad_norms, clip_decisions = [], [], []
    minibatches = [rows for permutation in permutations
                   for rows in np.split(permutation, CONFIG.num_minibatches)]
    for adam_step, rows in enumerate(minibatches, start=1):
        features, masks, actions, old_log_probs, old_values, batch_advantages, batch_targets = (
            x[rows] for x in flat)
        normalized = ((batch_advantages - batch_advantages.mean())
                      / (batch_advantages.std() + 1e-8))
        minibatch = tuple(jnp.asarray(x, jnp.float32) if x.dtype == np.float64 else jnp.asarray(x)
                          for x in (features, masks, actions, old_log_probs, old_values,
                                    normalized, batch_targets))
        grads, (step_diagnostics, step_clip_decisions) = grad_fn(
            jax.tree.unflatten(treedef, [jnp.asarray(leaf, jnp.float32) for leaf in leaves]),
            minibatch)
        grads = [np.asarray(grad, np.float64) for grad in jax.tree.leaves(grads)]
        grad_norm = np.sqrt(sum(np.sum(np.square(grad)) for grad in grads))
        grads = [grad * min(1.0, CONFIG.max_grad_norm / grad_norm) for grad in grads]
        # Bias corrections as a float32 Adam computes them: 0.999^t rounds to a float32 ulp of 1
        # (6e-8), 3e-5 of 1 - 0.999^t at t = 1, which would dominate the difference otherwise.
        first_correction, second_correction = (1 - np.float32(b) ** np.float32(adam_step)
                                               for b in (ADAM_B1, ADAM_B2))
        for i, grad in enumerate(grads):
            first_moments[i] = ADAM_B1 * first_moments[i] + (1 - ADAM_B1) * grad
            second_moments[i] = ADAM_B2 * second_moments[i] + (1 - ADAM_B2) * np.square(grad)
            step = ((first_moments[i] / first_correction)
                    / (np.sqrt(second_moments[i] / second_correction) + ADAM_EPS))
            leaves[i] = leaves[i] - lr * step
        diagnostics.append({**step_diagnostics, "grad_norm": grad_norm})
        grad_norms.append(grad_norm)
        clip_decisions.append(step_clip_decisions)
    metrics = {name: np.mean([float(d[name]) for d in diagnostics]) for name in LOSS_METRICS}
    metrics["learning_rate"] = lr
    metrics["ent_coef"] = variant.ent_coef
    return jax.tree.unflatten(treedef, leaves), metrics, grad_norms, clip_decisions


class Reference(NamedTuple):
    rollout: Rollout
    last_obs: EnvObservation   # where the replay ends
    last_state: RecordedState
    rng: jax.Array             # the carried key after the update, by the reference's draws
    params: dict
    metrics: dict
    grad_norms: list           # per minibatch, before clipping
    clip_decisions: list       # per minibatch: {clip: samples whose loss term the clip decided}


@pytest.fixture(scope="module")
def reference(env, variant, trainer_update):
    before, after, _ = trainer_update
    actions = np.asarray(after.envs.env_state.actions)
    rollout, last_obs, last_state = replay(env, before, actions)
    permutations, rng = shuffle_permutations(before.rng)
    return Reference(rollout, last_obs, last_state, rng, *reference_update(
        variant, before.train.params, rollout, last_obs.features, permutations))


def test_the_variants_params_are_named_for_their_torsos(variant, trainer_update):
    before, _, _ = trainer_update
    prefixes = [""] if variant.config.shared_torso else ["actor_", "critic_"]
    assert set(before.train.params["params"]) == {
        *(f"{prefix}torso_{i}" for prefix in prefixes for i in range(CONFIG.num_layers)),
        "actor_logits", "critic_value"}


def test_the_replayed_rollout_is_the_one_the_trainer_collected(trainer_update, reference):
    _, after, metrics = trainer_update
    np.testing.assert_array_equal(reference.last_state.count, after.envs.env_state.count)
    np.testing.assert_array_equal(reference.last_obs.features, after.envs.obs.features)
    np.testing.assert_array_equal(reference.rng, after.rng)  # so the permutations match too
    np.testing.assert_allclose(metrics["reward_sum"], reference.rollout.rewards.sum(), rtol=1e-6)
    assert metrics["num_episodes"] == reference.rollout.dones.sum() > 0
    assert set(np.unique(reference.rollout.actions)) == {0, 1, 2, 3}


def test_each_clip_decides_for_some_samples_and_not_for_others(variant, reference):
    samples = CONFIG.update_epochs * CONFIG.batch_size
    # Without the value clip its decisions are still counted (they would have decided): the
    # variant shows that the trainer ignores them.
    for clip in ("ratio_clip", "value_clip"):
        decided = sum(int(decisions[clip]) for decisions in reference.clip_decisions)
        assert 0 < decided < samples, clip
    assert min(reference.grad_norms) < CONFIG.max_grad_norm < max(reference.grad_norms)


def test_new_params_match_the_reference(variant, trainer_update, reference):
    # The reference differs from the trainer only in rounding (float32 gradients summed in
    # another order, float64 Adam): measured, the parameters agree to 8e-8, while each leaf
    # moved by more than 0.02 and each change to the update's formulas tried moved some
    # parameter by more than the tolerance (the least: Adam's eps 1e-8 for 1e-5, by 5e-6).
    before, after, _ = trainer_update
    jax.tree.map(lambda new, ref: np.testing.assert_allclose(new, ref, rtol=1e-5, atol=1e-6),
                 after.train.params, reference.params)
    largest_moves = jax.tree.map(lambda new, old: np.max(np.abs(new - old)), after.train.params,
                                 before.train.params)
    assert min(jax.tree.leaves(largest_moves)) > 0.02
    assert after.train.schedule_timesteps == variant.timesteps_before + CONFIG.batch_size


def test_metrics_match_the_reference(trainer_update, reference):
    # The absolute tolerance is for pg_loss and total_loss (means of terms of both signs: the
    # normalised advantages have mean 0) and approx_kl (a mean of differences of nearly equal
    # numbers), which lose relative precision in float32; measured, no metric is off by more
    # than 5e-8 absolute or 3e-6 relative.
    _, _, metrics = trainer_update
    for name in LOSS_METRICS + ("learning_rate", "ent_coef"):
        np.testing.assert_allclose(metrics[name], reference.metrics[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
