"""What resolving one player action reports to the step (§5 step 2)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class ActionOutcome(NamedTuple):
    failed: jax.Array                 # bool: the action failed (§4.4); the step discards its state
    exit_reached: jax.Array           # bool: moved or WARPed onto the exit (§12.1)
    enemy_turn_follows: jax.Array     # bool: move/attack not reaching the exit, siphon, WAIT
    kills: jax.Array                  # int32: kills that pay a reward (§6.1, §7)
    data_siphon_collected: jax.Array  # bool: walked onto a data-siphon pickup
    siphon_quality: jax.Array         # float32: reward component 13 (§14.4); 0 unless siphon


def no_outcome() -> ActionOutcome:
    false = jnp.asarray(False)
    return ActionOutcome(failed=false, exit_reached=false, enemy_turn_follows=false,
                         kills=jnp.asarray(0, jnp.int32), data_siphon_collected=false,
                         siphon_quality=jnp.asarray(0.0, jnp.float32))
