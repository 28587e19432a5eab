"""UNDO history (§7.15) as a fixed-capacity ring buffer of compact `Core` snapshots.

The rules' stack is unbounded; here it holds the newest HISTORY_CAPACITY snapshots and the oldest
drops when a push finds it full. UNDO is valid exactly while `history_size > 0`.

Snapshots store per-cell and per-entity integers as int16 (scalars stay int32) so that a batch of
thousands of envs, and a checkpoint of them, stays small. Push and pop touch one slot, never the
whole buffer, so they cost O(snapshot) per step under vmap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from hackmatrix.game import constants as C
from hackmatrix.game import state as S

_STORAGE_INT = jnp.int16


def _to_storage(x):
    if x.dtype == jnp.int32 and x.ndim > 0:
        return x.astype(_STORAGE_INT)
    return x


def _from_storage(stored, like):
    return stored.astype(like.dtype)


def empty_history() -> S.Core:
    one = jax.tree_util.tree_map(_to_storage, S.empty_core())
    return jax.tree_util.tree_map(
        lambda x: jnp.zeros((C.HISTORY_CAPACITY,) + x.shape, x.dtype), one)


def push(state: S.GameState, do_push) -> S.GameState:
    """Snapshot `state.core` onto the history when `do_push` (end of a full enemy turn)."""
    slot = (state.history_top + 1) % C.HISTORY_CAPACITY
    snapshot = jax.tree_util.tree_map(_to_storage, state.core)

    def write(buffer, value):
        current = buffer[slot]
        return buffer.at[slot].set(jnp.where(do_push, value, current))

    history = jax.tree_util.tree_map(write, state.history, snapshot)
    return state.replace(
        history=history,
        history_top=jnp.where(do_push, slot, state.history_top),
        history_size=jnp.where(do_push, jnp.minimum(state.history_size + 1, C.HISTORY_CAPACITY),
                               state.history_size),
    )


def top(state: S.GameState) -> S.Core:
    """The newest snapshot as a live `Core`, with the origin flags cleared (§7.15).

    Only meaningful when `history_size > 0`.
    """
    slot = jnp.maximum(state.history_top, 0)
    stored = jax.tree_util.tree_map(lambda buffer: buffer[slot], state.history)
    core = jax.tree_util.tree_map(_from_storage, stored, state.core)
    enemies = core.enemies.replace(from_siphon=jnp.zeros_like(core.enemies.from_siphon),
                                   from_scheduled=jnp.zeros_like(core.enemies.from_scheduled))
    transmissions = core.transmissions.replace(
        from_siphon=jnp.zeros_like(core.transmissions.from_siphon),
        from_scheduled=jnp.zeros_like(core.transmissions.from_scheduled))
    return core.replace(enemies=enemies, transmissions=transmissions)


def pop(state: S.GameState, do_pop) -> S.GameState:
    """Restore and drop the newest snapshot when `do_pop`; the buffer itself is not rewritten."""
    restored = top(state)
    core = jax.tree_util.tree_map(lambda new, old: jnp.where(do_pop, new, old), restored,
                                  state.core)
    return state.replace(
        core=core,
        history_top=jnp.where(do_pop, (state.history_top - 1) % C.HISTORY_CAPACITY,
                              state.history_top),
        history_size=jnp.where(do_pop, state.history_size - 1, state.history_size),
    )
