"""A training curriculum, as `EnvParams`: new games that start owning some programs.

The rules start every game with no program (§13.1); a learner then meets a program's worth only
after siphoning its block, which spawns enemies (§6.2), and rarely gets there. With
`start_programs` k > 0, each new game, with probability `start_programs_prob`, owns k programs
chosen uniformly at random, so that the value of owning and running programs can be learned and
then bootstrapped back to the siphons that acquire them. The rest of the game is the rules'.
With k = 0 (the default) a new game is exactly the rules' one, bit for bit.
"""

from __future__ import annotations

import jax.numpy as jnp

from hackmatrix.game import constants as C
from hackmatrix.game import spawning
from hackmatrix.game import state as S

_UNIT = 2.0 ** -24  # 24 random bits to a float in [0, 1)


def curriculum_key(new_game_key):
    """A key for the curriculum's draws beside a new game's own (`worldgen.new_game_parts`
    splits the same key in two: this is the third of three, leaving those two unchanged)."""
    return spawning.split_key(new_game_key, 3)[2]


def with_start_programs(key, game: S.GameState, count, probability) -> S.GameState:
    """`game` owning `count` more programs, chosen uniformly among all 23, with probability
    `probability`; else `game` itself. `key`: `curriculum_key` of the game's key."""
    words = spawning.random_words(key, C.NUM_PROGRAMS + 1)
    chosen = spawning.random_ranks(words[:C.NUM_PROGRAMS]) < count
    applies = (words[C.NUM_PROGRAMS] >> 8).astype(jnp.float32) * _UNIT < probability
    return game.replace(core=game.core.replace(owned=game.core.owned | (chosen & applies)))
