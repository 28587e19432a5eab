"""Masked categorical: masked actions are never sampled; log-prob and entropy match NumPy."""

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.training import distribution


def numpy_reference(logits, mask):
    masked = np.where(mask, logits, -np.inf)
    shifted = masked - masked.max(axis=-1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    log_probs = np.where(mask, np.log(np.where(mask, probs, 1.0)), 0.0)
    entropy = -(np.where(mask, probs * log_probs, 0.0)).sum(axis=-1)
    return probs, log_probs, entropy


def random_batch(seed, batch=64, actions=28):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 3.0, (batch, actions)).astype(np.float32)
    mask = rng.random((batch, actions)) < 0.3
    mask[np.arange(batch), rng.integers(0, actions, batch)] = True  # at least one valid action
    mask[0] = False
    mask[0, 5] = True  # a single valid action: entropy exactly 0
    return logits, mask


def test_never_samples_a_masked_action():
    logits, mask = random_batch(0)
    logits[:, :] = np.where(mask, logits, 50.0)  # masked actions would dominate if not masked
    keys = jax.random.split(jax.random.PRNGKey(0), 200)
    samples = jax.vmap(lambda k: distribution.sample(k, jnp.asarray(logits), jnp.asarray(mask)))(keys)
    samples = np.asarray(samples)
    assert mask[np.arange(len(mask))[None, :], samples].all()


def test_log_prob_and_entropy_match_numpy():
    logits, mask = random_batch(1)
    probs, log_probs, entropy = numpy_reference(logits.astype(np.float64), mask)
    actions = np.array([np.flatnonzero(row)[-1] for row in mask], np.int32)
    got_log_prob = distribution.log_prob(jnp.asarray(logits), jnp.asarray(mask), jnp.asarray(actions))
    got_entropy = distribution.entropy(jnp.asarray(logits), jnp.asarray(mask))
    np.testing.assert_allclose(got_log_prob, log_probs[np.arange(len(actions)), actions], atol=1e-5)
    np.testing.assert_allclose(got_entropy, entropy, atol=1e-5)
    assert float(got_entropy[0]) == 0.0
    assert np.isfinite(np.asarray(distribution.log_probs(jnp.asarray(logits), jnp.asarray(mask)))).all()


def test_gradients_are_finite_under_the_mask():
    logits, mask = random_batch(2)
    def loss(x):
        return (distribution.entropy(x, mask).sum()
                + distribution.log_prob(x, mask, jnp.argmax(jnp.where(mask, x, -1e9), -1)).sum())
    grads = jax.grad(loss)(jnp.asarray(logits))
    assert np.isfinite(np.asarray(grads)).all()
    assert (np.asarray(grads)[~mask] == 0).all()


def test_masked_actions_get_the_dtype_minimum_log_prob():
    logits, mask = random_batch(3)
    all_log_probs = np.asarray(distribution.log_probs(jnp.asarray(logits), jnp.asarray(mask)))
    assert (all_log_probs[~mask] == np.finfo(np.float32).min).all()
    # Row 0 allows only action 5: a masked action there has probability 0, not 1.
    actions = jnp.zeros(len(mask), jnp.int32)
    got = distribution.log_prob(jnp.asarray(logits), jnp.asarray(mask), actions)
    assert float(got[0]) == np.finfo(np.float32).min


def test_half_precision_logits_are_computed_in_float32():
    # In bfloat16 the sampler's Gumbel-perturbed logits tie often and favour low action numbers;
    # the same logits cast to float32 give the same samples, log-probs and entropy exactly.
    logits, mask = random_batch(3)
    keys = jax.random.split(jax.random.PRNGKey(4), 8)
    for dtype in (jnp.bfloat16, jnp.float16):
        narrow = jnp.asarray(logits, dtype)
        wide = narrow.astype(jnp.float32)
        for fn in (distribution.log_probs, distribution.entropy):
            result = fn(narrow, jnp.asarray(mask))
            assert result.dtype == jnp.float32
            np.testing.assert_array_equal(result, fn(wide, jnp.asarray(mask)))
        for key in keys:
            np.testing.assert_array_equal(distribution.sample(key, narrow, jnp.asarray(mask)),
                                          distribution.sample(key, wide, jnp.asarray(mask)))
