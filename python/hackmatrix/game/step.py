"""reset / step: one game step in the order of rules §5, invalid actions (§4.4), done (§13.2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from hackmatrix.game import actions
from hackmatrix.game import constants as C
from hackmatrix.game import enemy_turn
from hackmatrix.game import observation
from hackmatrix.game import reward
from hackmatrix.game import state as S
from hackmatrix.game import worldgen


def reset(key):
    """A new game (§13.1) and its observation."""
    state = worldgen.new_game(key)
    return state, observation.observe(state)


def step(key, state: S.GameState, action):
    """One step (§5); returns (state, observation, reward, done, info)."""
    action = jnp.asarray(action, jnp.int32)
    resolve_key, stage_key, enemy_key = jax.random.split(key, 3)

    start = reward.before(state)                                               # §5.1
    resolved, outcome = actions.resolve(resolve_key, state, action)            # §5.2
    valid = ~outcome.failed
    stage_completed = valid & outcome.exit_reached
    staged, won = worldgen.complete_stage(stage_key, resolved, stage_completed)  # §5.3
    enemy_turn_follows = valid & outcome.enemy_turn_follows & ~stage_completed
    after = enemy_turn.run(enemy_key, staged, enemy_turn_follows)               # §5.4

    # §5.5 reward and done. An invalid action scores exactly 0 and leaves the state as it was:
    # `resolve` returns it unchanged, and neither stage completion nor the enemy turn runs.
    values = jnp.where(valid, reward.components(start, after, outcome, action, stage_completed,
                                                won), 0.0)
    won = valid & won
    death = valid & (after.core.hp == 0)
    done = ~valid | death | won
    info = {
        "reward_components": {name: values[i] for i, name in enumerate(C.REWARD_COMPONENTS)},
        "invalid_action": ~valid,
        "stage": after.stage,
        "score": after.core.score,
        "stage_complete": stage_completed,
        "death": death,
        "won": won,
    }
    return after, observation.observe(after), reward.total(values), done, info
