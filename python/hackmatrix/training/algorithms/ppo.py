"""Proximal policy optimisation with a clipped surrogate: `update_epochs` passes over the batch
in `num_minibatches` shuffled minibatches, advantages normalised per minibatch, the value loss
clipped like the policy ratio unless `clip_value_loss` is off, Adam with global-norm clipping."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from hackmatrix.training import distribution
from hackmatrix.training.algorithms.base import (Algorithm, Batch, approx_kl, gradient_step)


def make_optimizer(config) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.scale_by_adam(eps=1e-5))


def loss(params, network, config, minibatch: Batch, normalized, ent_coef):
    transitions, _, targets = minibatch
    logits, value = network.apply(params, transitions.obs.features)
    mask = transitions.obs.action_mask
    new_log_prob = distribution.log_prob(logits, mask, transitions.action)
    entropy = distribution.entropy(logits, mask).mean()

    value_loss = jnp.square(value - targets)
    if config.clip_value_loss:
        value_clipped = transitions.value + jnp.clip(value - transitions.value,
                                                     -config.clip_eps, config.clip_eps)
        value_loss = jnp.maximum(value_loss, jnp.square(value_clipped - targets))
    value_loss = 0.5 * value_loss.mean()

    log_ratio = new_log_prob - transitions.log_prob
    ratio = jnp.exp(log_ratio)
    pg_loss = -jnp.minimum(ratio * normalized,
                           jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
                           * normalized).mean()
    total_loss = pg_loss + config.vf_coef * value_loss - ent_coef * entropy
    return total_loss, {
        "pg_loss": pg_loss, "value_loss": value_loss, "entropy": entropy,
        "approx_kl": approx_kl(log_ratio),
        "clip_fraction": (jnp.abs(ratio - 1.0) > config.clip_eps).astype(jnp.float32).mean(),
        "total_loss": total_loss,
    }


def learn(config, network, optimizer, train, batch: Batch, coefficients, key, share):
    def update_minibatch(train, rows):
        # Gathered from the flat batch here, not shuffled as a whole first: one copy of the
        # observations per epoch instead of two.
        minibatch = jax.tree.map(lambda x: x[rows], batch)
        # Normalised over the whole minibatch, on every device alike.
        mean = share.mean(minibatch.advantages.mean())
        std = jnp.sqrt(share.mean(jnp.square(minibatch.advantages - mean).mean()))
        normalized = (minibatch.advantages - mean) / (std + 1e-8)
        grads, diagnostics = jax.grad(loss, has_aux=True)(
            train.params, network, config, minibatch, normalized, coefficients.ent_coef)
        train, grad_norm = gradient_step(optimizer, train, grads, coefficients.lr, share)
        return train, {**share.mean(diagnostics), "grad_norm": grad_norm}

    def update_epoch(train, shuffle_key):
        permutation = jax.random.permutation(share.key(shuffle_key), share.batch_size)
        return jax.lax.scan(update_minibatch, train,
                            permutation.reshape(config.num_minibatches, share.minibatch_size))

    return jax.lax.scan(update_epoch, train, jax.random.split(key, config.update_epochs))


ALGORITHM = Algorithm(make_optimizer=make_optimizer, learn=learn)
