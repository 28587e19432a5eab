"""Advantage actor-critic in the form Stable-Baselines3 users know: one gradient step per
rollout on the whole batch, the policy gradient of the GAE advantages (not normalised), no
ratio clipping, a squared value error, an entropy bonus, RMSprop (decay 0.99, eps 1e-5 outside
the square root, as PyTorch's) after global-norm clipping.

Its defaults (`config.ALGORITHM_DEFAULTS`) follow SB3's A2C: 5-step rollouts, lr 7e-4 constant,
gae_lambda 1.0 (n-step returns), vf_coef 0.5, max_grad_norm 0.5; the entropy coefficient is
0.01 where SB3's is 0 (specs/training.md, "Algorithms").

approx_kl is measured after the step, between the rollout's policy and the updated one, on the
batch it learned from; nothing is clipped, so clip_fraction is 0."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from hackmatrix.training import distribution
from hackmatrix.training.algorithms.base import (Algorithm, Batch, approx_kl, gradient_step)

RMSPROP_DECAY = 0.99
RMSPROP_EPS = 1e-5


def make_optimizer(config) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.scale_by_rms(decay=RMSPROP_DECAY, eps=RMSPROP_EPS,
                                          eps_in_sqrt=False))


def loss(params, network, config, batch: Batch, ent_coef):
    transitions = batch.transitions
    logits, value = network.apply(params, transitions.obs.features)
    mask = transitions.obs.action_mask
    log_prob = distribution.log_prob(logits, mask, transitions.action)
    entropy = distribution.entropy(logits, mask).mean()
    pg_loss = -(jax.lax.stop_gradient(batch.advantages) * log_prob).mean()
    value_loss = jnp.square(batch.targets - value).mean()
    total_loss = pg_loss + config.vf_coef * value_loss - ent_coef * entropy
    return total_loss, {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": entropy,
                        "total_loss": total_loss}


def learn(config, network, optimizer, train, batch: Batch, coefficients, key, share):
    grads, diagnostics = jax.grad(loss, has_aux=True)(train.params, network, config, batch,
                                                      coefficients.ent_coef)
    train, grad_norm = gradient_step(optimizer, train, grads, coefficients.lr, share)
    transitions = batch.transitions
    logits, _ = network.apply(train.params, transitions.obs.features)
    new_log_prob = distribution.log_prob(logits, transitions.obs.action_mask, transitions.action)
    diagnostics = {**share.mean(diagnostics),
                   "approx_kl": share.mean(approx_kl(new_log_prob - transitions.log_prob)),
                   "clip_fraction": jnp.float32(0.0), "grad_norm": grad_norm}
    return train, diagnostics


ALGORITHM = Algorithm(make_optimizer=make_optimizer, learn=learn)
