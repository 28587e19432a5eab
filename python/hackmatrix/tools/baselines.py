"""Built-in baseline policies, pure JAX and vmappable.

Every tools policy acts as `act(params, key, game_state, features, action_mask) -> action int32`
(unbatched; vmap it for a batch; the baselines have no params) and returns a valid action
whenever one exists.

- `random`: uniform over the valid actions.
- `exit-runner`: walks a shortest path to the exit and attacks what stands in the way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from hackmatrix.game import constants as C
from hackmatrix.game import state as S
from hackmatrix.tools.evaluation import Policy

_UNREACHABLE = jnp.int32(10_000)
_CRASH_ACTION = C.FIRST_PROGRAM_ACTION + C.CRASH

# exit-runner preferences, highest first; ties go to the lowest action index.
_PREFER_PATH_STEP = 4      # the direction that follows a shortest path to the exit
_PREFER_ATTACK = 3         # a direction with an enemy or transmission on the next cell
_PREFER_CRASH = 2          # CRASH clears the blocks around the player when no path exists
_PREFER_OTHER_MOVE = 1     # any other direction: wandering may open a path
_PREFER_ANY_VALID = 0      # anything else that is valid


def random_policy(params, key, game_state, features, action_mask):
    """Uniform over valid actions."""
    del params, game_state, features
    any_valid = jnp.any(action_mask)
    logits = jnp.where(action_mask | ~any_valid, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def _shift(grid, delta_row: int, delta_col: int, fill):
    """value at (r, c) := grid[r + delta_row, c + delta_col]; `fill` off the board."""
    padded = jnp.pad(grid, 1, constant_values=fill)
    size = C.BOARD_SIZE
    return jax.lax.dynamic_slice(padded, (1 + delta_row, 1 + delta_col), (size, size))


def exit_distance_field(game_state: S.GameState) -> jax.Array:
    """int32[6,6]: orthogonal-step distance from each cell to the exit through cells without a
    block (the exit has none); _UNREACHABLE where no such path exists. Enemies and transmissions
    are ignored, because the runner attacks them instead of walking around them."""
    content = game_state.core.cells.content
    passable = ~C.is_block(content)
    rows, cols = jnp.meshgrid(jnp.arange(C.BOARD_SIZE), jnp.arange(C.BOARD_SIZE), indexing="ij")
    at_exit = (rows == game_state.exit_row) & (cols == game_state.exit_col)
    distance = jnp.where(at_exit, 0, _UNREACHABLE).astype(jnp.int32)

    def relax(_, distance):
        nearest_neighbour = _UNREACHABLE
        for delta_row, delta_col in C.DIRECTION_DELTAS:
            nearest_neighbour = jnp.minimum(
                nearest_neighbour, _shift(distance, int(delta_row), int(delta_col), _UNREACHABLE))
        relaxed = jnp.where(passable, jnp.minimum(distance, nearest_neighbour + 1), distance)
        return jnp.minimum(relaxed, _UNREACHABLE)

    # A shortest path visits each of the 36 cells at most once: 35 relaxations always suffice.
    return jax.lax.fori_loop(0, C.NUM_CELLS - 1, relax, distance)


def _occupied_cells(game_state: S.GameState) -> jax.Array:
    """bool[6,6]: cells holding an active enemy or transmission."""
    core = game_state.core
    flat = jnp.zeros((C.NUM_CELLS,), jnp.bool_)
    for items in (core.enemies, core.transmissions):
        index = items.row * C.BOARD_SIZE + items.col
        flat = flat.at[jnp.where(items.active, index, C.NUM_CELLS)].set(True, mode="drop")
    return flat.reshape(C.BOARD_SIZE, C.BOARD_SIZE)


def exit_runner_policy(params, key, game_state, features, action_mask):
    """Shortest path to the exit; moving along it attacks whatever the line of fire meets first
    (§6.1), so an enemy or transmission on the path is attacked until it is gone. Without a path
    it attacks an adjacent enemy or transmission, else uses CRASH, else moves anywhere valid,
    else takes the first valid action."""
    del params, key, features
    core = game_state.core
    distance = exit_distance_field(game_state)
    occupied = _occupied_cells(game_state)
    content = core.cells.content

    preference = jnp.full((C.NUM_ACTIONS,), _PREFER_ANY_VALID, jnp.int32)
    neighbour_distances = []
    for direction, (delta_row, delta_col) in enumerate(C.DIRECTION_DELTAS):
        row, col = core.player_row + int(delta_row), core.player_col + int(delta_col)
        on_board = (row >= 0) & (row < C.BOARD_SIZE) & (col >= 0) & (col < C.BOARD_SIZE)
        safe_row = jnp.clip(row, 0, C.BOARD_SIZE - 1)
        safe_col = jnp.clip(col, 0, C.BOARD_SIZE - 1)
        is_block = C.is_block(content[safe_row, safe_col])
        neighbour_distances.append(
            jnp.where(on_board & ~is_block, distance[safe_row, safe_col], _UNREACHABLE))
        attack = on_board & occupied[safe_row, safe_col]
        preference = preference.at[direction].set(
            jnp.where(attack, _PREFER_ATTACK, _PREFER_OTHER_MOVE))
    neighbour_distances = jnp.stack(neighbour_distances)
    nearest = jnp.min(neighbour_distances)
    path_step = (neighbour_distances == nearest) & (nearest < _UNREACHABLE)
    preference = preference.at[:C.NUM_DIRECTIONS].set(
        jnp.where(path_step, _PREFER_PATH_STEP, preference[:C.NUM_DIRECTIONS]))
    preference = preference.at[_CRASH_ACTION].set(_PREFER_CRASH)

    # Invalid actions rank below everything; argmax picks the first of the best valid ones.
    any_valid = jnp.any(action_mask)
    ranked = jnp.where(action_mask | ~any_valid, preference, -1)
    return jnp.argmax(ranked).astype(jnp.int32)


BASELINES = {"random": random_policy, "exit-runner": exit_runner_policy}


def baseline(name: str) -> Policy:
    return Policy(name=name, act=BASELINES[name], params=None)
