"""What the trainer and the algorithms share: the training state, a rollout step as learning
sees it, and one gradient step."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax


class TrainState(NamedTuple):
    params: Any
    opt_state: Any
    # Timesteps trained so far as float32: drives LR annealing; carried so resume continues it.
    schedule_timesteps: jax.Array


class Transition(NamedTuple):
    """One env step as learning sees it: `obs` is the observation `action` was chosen from."""
    obs: Any
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array


class Batch(NamedTuple):
    """A rollout flattened to rows: its transitions, GAE advantages and value targets."""
    transitions: Transition
    advantages: jax.Array
    targets: jax.Array


class Coefficients(NamedTuple):
    """Scheduled values of this update (float32 scalars)."""
    lr: jax.Array
    ent_coef: jax.Array


class DeviceShare(NamedTuple):
    """This device's part of a data-parallel update: its rows of the batch, and the collectives
    (identities on one device)."""
    batch_size: int
    minibatch_size: int
    mean: Callable[[Any], Any]            # the mean over devices
    key: Callable[[jax.Array], jax.Array]  # this device's key from a key all devices hold


class Algorithm(NamedTuple):
    """An algorithm: pure functions the trainer calls once per update.

    make_optimizer(config) -> optax transformation, without the learning rate (the trainer
        applies the scheduled rate, so that the schedule survives an optimiser reset)
    learn(config, network, optimizer, train, batch, coefficients, key, share)
        -> (TrainState, diagnostics): dict of arrays whose means are logged as train/<name>;
        every algorithm reports pg_loss, value_loss, entropy, approx_kl, clip_fraction,
        total_loss and grad_norm.
    """
    make_optimizer: Callable
    learn: Callable


def gradient_step(optimizer: optax.GradientTransformation, train: TrainState, grads,
                  lr: jax.Array, share: DeviceShare) -> tuple[TrainState, jax.Array]:
    """Averages `grads` over devices and applies them at rate `lr`; returns the new state and
    the gradient's global norm before clipping.

    The grads are each device's own because the trainer's shard_map runs with check_vma=False;
    with it on, JAX would already sum them over the devices, and the right form would be the
    grad of share.mean(loss)."""
    grads = share.mean(grads)
    updates, opt_state = optimizer.update(grads, train.opt_state, train.params)
    params = optax.apply_updates(train.params, jax.tree.map(lambda u: -lr * u, updates))
    return TrainState(params, opt_state, train.schedule_timesteps), optax.tree.norm(grads)


def approx_kl(log_ratio: jax.Array) -> jax.Array:
    """The k3 estimator of KL(old || new) from log(new/old) of the sampled actions."""
    return (jnp.exp(log_ratio) - 1.0 - log_ratio).mean()
