"""Helpers that keep vmapped code in few XLA:CPU kernels (fewer kernels: less compile time and
less per-kernel overhead at run time).

`jnp.stack` of n scalars under `vmap` becomes n tiny [batch, 1] kernels and a concatenation, as
XLA:CPU does not fuse the scalar computations into the concatenation; a stack of arrays along a
new last axis is one kernel but interleaves its operands, which the older emitters of the fast
CPU compile mode run as a branch per element. A chain of selects on an index vector computes
the same array in one elementwise kernel.

XLA:CPU also copies a cheap producer into every kernel that reads it: a per-env flag read by
the select of each of the ~40 state arrays is recomputed ~40 times unless it is materialised
(`computed_once`).
"""

from __future__ import annotations

import jax.numpy as jnp

from hackmatrix.game import bitboard as bb


def stack_last(values, dtype=None) -> jnp.ndarray:
    """`jnp.stack(values, axis=-1)` for values of one shape (0-d ones too; after vmap, [batch]
    arrays), as one fused elementwise kernel of selects."""
    values = [jnp.asarray(value) for value in values]
    dtype = jnp.result_type(*values) if dtype is None else dtype
    index = jnp.arange(len(values))
    stacked = jnp.zeros(values[0].shape + (len(values),), dtype)
    for i, value in enumerate(values):
        stacked = jnp.where(index == i, value.astype(dtype)[..., None], stacked)
    return stacked


def computed_once(*values):
    """The 0-d `values` (after vmap: [batch] arrays) unchanged, computed into one buffer that
    their readers load instead of each recomputing them (`bitboard.materialize`)."""
    dtype = jnp.result_type(*values)
    # Every entry of the buffer evaluates every value (a chain of selects), so no more than
    # the two entries `materialize` needs.
    buffer = bb.materialize(stack_last(list(values) * (2 if len(values) == 1 else 1), dtype))
    return tuple(buffer[i].astype(jnp.asarray(value).dtype) for i, value in enumerate(values))
