"""Masked categorical distribution over the 28 actions.

Invalid actions get the dtype's minimum finite logit, never -inf: exp(min - max) underflows to
exactly 0 so they are never sampled, while log-probs stay finite and gradients never see
0 * inf = NaN. Entropy only sums over valid actions for the same reason. Logits of a narrower
type than float32 (bfloat16, float16) are computed in float32: bfloat16's 8-bit mantissa ties
the sampler's Gumbel-perturbed logits often enough to favour low action numbers. A row with no
valid action samples action 0 (every logit is then the minimum): play never reaches such a
state, but a scenario can build one (`tools.policy.masked_logits` samples the raw logits then).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def mask_logits(logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    """The logits (at least float32) with every invalid action at the dtype's minimum."""
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
    return jnp.where(action_mask, logits, jnp.finfo(logits.dtype).min)


def log_probs(logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    """Log-probabilities of every action under the mask; masked entries are the dtype minimum."""
    masked = mask_logits(logits, action_mask)
    normalized = jax.nn.log_softmax(masked, axis=-1)
    return jnp.where(action_mask, normalized, jnp.finfo(masked.dtype).min)


def sample(key: jax.Array, logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    """int32 actions, never a masked one (as long as each row has a valid action)."""
    return jax.random.categorical(key, mask_logits(logits, action_mask), axis=-1).astype(jnp.int32)


def log_prob(logits: jax.Array, action_mask: jax.Array, action: jax.Array) -> jax.Array:
    all_log_probs = log_probs(logits, action_mask)
    return jnp.take_along_axis(all_log_probs, action[..., None], axis=-1)[..., 0]


def entropy(logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    all_log_probs = log_probs(logits, action_mask)
    probs = jnp.exp(all_log_probs)
    return -jnp.sum(jnp.where(action_mask, probs * all_log_probs, 0.0), axis=-1)
