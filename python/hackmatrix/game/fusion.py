"""Helpers that keep vmapped code in few XLA:CPU kernels (fewer kernels: less compile time and
less per-kernel overhead at run time).

`jnp.stack` of n scalars under `vmap` becomes n tiny [batch, 1] kernels and a concatenation, as
XLA:CPU does not fuse the scalar computations into the concatenation. A chain of selects on an
index vector computes the same array in one elementwise kernel.
"""

from __future__ import annotations

import jax.numpy as jnp


def stack_scalars(values, dtype=None) -> jnp.ndarray:
    """`jnp.stack(values)` for 0-d values (after vmap: [batch] arrays), as one fused kernel."""
    values = [jnp.asarray(value) for value in values]
    dtype = jnp.result_type(*values) if dtype is None else dtype
    index = jnp.arange(len(values))
    stacked = jnp.zeros((len(values),), dtype)
    for i, value in enumerate(values):
        stacked = jnp.where(index == i, value.astype(dtype), stacked)
    return stacked
