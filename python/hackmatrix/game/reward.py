"""The 15 reward components of rules §14.1, in the order of `constants.REWARD_COMPONENTS`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import bitboard as bb
from hackmatrix.game import constants as C
from hackmatrix.game import fusion
from hackmatrix.game import outcome as O

# Death penalty by stage at death (§14.1 #8): −0.5 × (sum of the table before that stage).
_DEATH_PENALTY_BY_STAGE = np.concatenate(
    [[0.0], -0.5 * np.cumsum(C.STAGE_REWARD_TABLE[:C.MAX_STAGE - 1])]).astype(np.float32)
# Stage completion pays table[stage_after − 2]; on victory the stage stays 8, hence 64 (§14.1 #2).
_STAGE_REWARD_BY_STAGE_AFTER = np.concatenate(
    [[0.0], C.STAGE_REWARD_TABLE[:C.MAX_STAGE - 1]]).astype(np.float32)


class Before(NamedTuple):
    """Values recorded at step start (§5 step 1)."""
    score: jax.Array
    hp: jax.Array
    credits: jax.Array
    energy: jax.Array
    distance: jax.Array  # §14.2 path distance to exitPosition, 0 if unreachable


def before(state, distance) -> Before:
    """The step-start values of `state`, with its path distance `distance` (the step searches
    it together with the step end's: `pathfinding.path_distances`)."""
    core = state.core
    return Before(score=core.score, hp=core.hp, credits=core.credits, energy=core.energy,
                  distance=distance)


def _f32(x):
    return jnp.asarray(x).astype(jnp.float32)


def components(start: Before, after, outcome: O.ActionOutcome, action, stage_completed,
               won, distance_after) -> jnp.ndarray:
    """float32[15] for a valid action; `after` is the state at the very end of the step and
    `distance_after` its path distance (the step searches it together with the start's:
    `pathfinding.path_distances`)."""
    core = after.core
    stage_index = jnp.clip(after.stage - 1, 0, C.MAX_STAGE - 1)
    dead = core.hp == 0

    # §14.2: full remaining distance when the exit was reached; nothing on death.
    progress = jnp.where(stage_completed, start.distance, start.distance - distance_after)
    progress = jnp.where(dead, 0, jnp.maximum(progress, 0))

    # §14.1 #15: any orthogonally adjacent enemy spawned from a siphon, after the enemy turn.
    enemies = core.enemies
    adjacent = (jnp.abs(enemies.row - core.player_row)
                + jnp.abs(enemies.col - core.player_col)) == 1
    siphon_enemy_adjacent = jnp.any(enemies.active & adjacent & enemies.from_siphon)

    values = {
        "step_penalty": C.STEP_PENALTY,
        "stage": jnp.where(stage_completed,
                           jnp.asarray(_STAGE_REWARD_BY_STAGE_AFTER)[stage_index], 0.0),
        "score": 0.5 * _f32(core.score - start.score),
        "kills": 0.3 * _f32(outcome.kills),
        "dataSiphon": jnp.where(outcome.data_siphon_collected, 1.0, 0.0),
        "distance": 0.05 * _f32(progress),
        "victory": jnp.where(won, 500.0 + 100.0 * _f32(core.score), 0.0),
        "death": jnp.where(dead, jnp.asarray(_DEATH_PENALTY_BY_STAGE)[stage_index], 0.0),
        "resourceGain": (0.05 * _f32(core.credits - start.credits)
                         + 0.05 * _f32(core.energy - start.energy)),
        "resourceHolding": jnp.where(
            stage_completed, 0.01 * _f32(core.credits) + 0.01 * _f32(core.energy), 0.0),
        "damagePenalty": -1.0 * _f32(jnp.maximum(start.hp - core.hp, 0)),
        "hpRecovery": 1.0 * _f32(jnp.maximum(core.hp - start.hp, 0)),
        "siphonQuality": jnp.where(action == C.ACTION_SIPHON, outcome.siphon_quality, 0.0),
        "programWaste": jnp.where(
            (action == C.FIRST_PROGRAM_ACTION + C.RESET) & (start.hp == 2), -0.3, 0.0),
        "siphonDeathPenalty": jnp.where(
            outcome.enemy_turn_follows & dead & siphon_enemy_adjacent, -10.0, 0.0),
    }
    return fusion.stack_last([values[name] for name in C.REWARD_COMPONENTS], jnp.float32)


def total(values) -> jnp.ndarray:
    """The reward: the components added one by one in table order (§14.1)."""
    values = bb.materialize(values)  # else the sum recomputes every component (~200 operations)
    # One-entry slices, squeezed once at the end: with `values[i]` each term is a slice and a
    # reshape, and XLA's reshape mover then needs one simplification round per term to sink them
    # (specs/performance.md, "Levers in use").
    reward = values[..., 0:1]
    for i in range(1, C.NUM_REWARD_COMPONENTS):
        reward = reward + values[..., i:i + 1]
    return reward[..., 0]
