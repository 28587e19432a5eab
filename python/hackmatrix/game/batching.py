"""Running rarely needed per-env work on only the envs of a batch that need it.

Under `vmap` every env computes every branch of a step, even the ones it does not take. Some
parts are both costly and rarely needed: running a program (a few envs in a thousand per step
under random play), the siphon quality (siphons only, ~1.5%), placing transmissions (~10%) and
generating a stage (a few in a hundred). `compacted_map` gathers the
envs that need such a branch into fixed-size chunks, runs the branch on the chunks only, and
scatters the results back. The number of chunks is a batch-level loop count (not under `vmap`),
so it is exact for any number of needy envs: usually one chunk, more when many envs need it,
none when nobody does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# The chunk holds num_envs // CHUNK_DIVISOR envs (at least one).
CHUNK_DIVISOR = 16


def chunk_size(num_envs: int) -> int:
    """The static chunk size used for a batch of `num_envs` envs."""
    return max(1, num_envs // CHUNK_DIVISOR)


def compacted_map(fn, needed, args, fallback, size: int, fallback_is_input: bool = False):
    """Row i of the result is `fn(*row i of args)` where `needed[i]`, else row i of `fallback`.

    `fn` is an unbatched function; it runs vmapped over chunks of `size` rows of needy envs, in
    as many rounds as there are full or partial chunks. `fallback` must have the structure, shapes
    and dtypes of `fn`'s batched output.

    With `fallback_is_input`, `fn` also receives row i of `fallback` as its last argument. The
    rows are read from the results being built, where a needy row is still its fallback until
    its own chunk writes it: XLA can then build the results in `fallback`'s buffers when nothing
    else reads them later, instead of copying every array of it first.
    """
    num_rows = needed.shape[0]
    needed = needed.astype(jnp.bool_)
    count = jnp.sum(needed, dtype=jnp.int32)
    # needy_rows[j] = the row of the j-th needy env; padding rows hold num_rows (out of bounds:
    # their results are dropped by the scatter).
    rank = jnp.cumsum(needed, dtype=jnp.int32) - 1
    needy_rows = jnp.full((num_rows + size,), num_rows, jnp.int32).at[
        jnp.where(needed, rank, num_rows + size)].set(jnp.arange(num_rows, dtype=jnp.int32),
                                                      mode="drop")

    def one_chunk(chunk, results):
        rows = jax.lax.dynamic_slice_in_dim(needy_rows, chunk * size, size)
        read = jnp.minimum(rows, num_rows - 1)
        # Both index arrays are non-negative (`rows` holds rows and the out-of-bounds num_rows),
        # so no negative-index wrapping: it adds three operations per array to trace and lower.
        def gather(x):
            return x.at[read].get(mode="promise_in_bounds", wrap_negative_indices=False)

        inputs = jax.tree_util.tree_map(gather, args)
        if fallback_is_input:
            inputs = (*inputs, jax.tree_util.tree_map(gather, results))
        outputs = jax.vmap(fn)(*inputs)
        return jax.tree_util.tree_map(
            lambda out, new: out.at[rows].set(new, mode="drop", wrap_negative_indices=False),
            results, outputs)

    return jax.lax.fori_loop(0, (count + size - 1) // size, one_chunk, fallback)
