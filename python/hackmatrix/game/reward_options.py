"""Training reward options, as `EnvParams`: per-component weights and the distance shaping.

The game itself always computes the rules' fifteen components (§14.1); these options only choose
how the env adds them into the reward a learner sees. Written as text so that a command line and
a checkpoint carry them:

- weights: `"name=value,name=value"` over the names of `C.REWARD_COMPONENTS`; components not
  named keep weight 1. `""` is the rules' reward.
- distance shaping: `"rules"` pays §14.2's 0.05 × max(0, Δ) (closer steps pay, steps away are
  free, so walking back and forth earns reward); `"potential"` pays 0.05 × Δ in both directions
  instead (the `distance` component's weight becomes 0), so over a stage the shaping adds up to
  0.05 × the distance from the start to the exit, however the player walks; `"none"` pays no
  distance reward at all.
- program potential: a reward per program owned, paid on each change in the number of owned
  programs (potential-based, like `"potential"`: acquiring a program pays it, UNDO taking one
  back costs it). The rules pay nothing for acquiring a program; a learner only meets the
  programs' worth after siphoning a program block, which spawns enemies (§6.2).
"""

from __future__ import annotations

from hackmatrix.game import constants as C
from hackmatrix.game.env import DISTANCE_REWARD_PER_CELL, EnvParams

DISTANCE_SHAPINGS = ("rules", "potential", "none")
FLOAT32_MAX = 3.4028234663852886e38
_DISTANCE_INDEX = C.REWARD_COMPONENTS.index("distance")


class RewardOptionError(ValueError):
    """A malformed weight list or an unknown shaping (a bad argument)."""


def parse_weights(text: str) -> dict[str, float]:
    """`"kills=1,score=0.5"` -> {"kills": 1.0, "score": 0.5}; `""` -> {}."""
    weights = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, separator, value = item.partition("=")
        name = name.strip()
        if not separator or name not in C.REWARD_COMPONENTS:
            raise RewardOptionError(
                f"reward weight {item!r} is not NAME=VALUE with NAME one of "
                f"{', '.join(C.REWARD_COMPONENTS)}")
        try:
            weight = float(value)
        except ValueError:
            raise RewardOptionError(f"reward weight {item!r}: {value.strip()!r} is not a number")
        if not abs(weight) < float("inf"):
            raise RewardOptionError(f"reward weight {item!r} must be finite")
        if name in weights:
            raise RewardOptionError(f"reward weight for {name!r} is given twice")
        weights[name] = weight
    return weights


def env_params(weights: str = "", distance_shaping: str = "rules", program_potential: float = 0.0,
               base: EnvParams | None = None) -> EnvParams:
    """`base` (default `EnvParams()`) with the reward that these options describe."""
    if distance_shaping not in DISTANCE_SHAPINGS:
        raise RewardOptionError(f"--distance-shaping: distance shaping must be one of "
                                f"{', '.join(DISTANCE_SHAPINGS)}, got {distance_shaping!r}")
    named = parse_weights(weights)
    values = [named.get(name, 1.0) for name in C.REWARD_COMPONENTS]
    if distance_shaping != "rules":
        if "distance" in named:
            raise RewardOptionError(f"--distance-shaping {distance_shaping} replaces the "
                                    "'distance' component: do not weight it as well")
        values[_DISTANCE_INDEX] = 0.0
    if not abs(program_potential) <= FLOAT32_MAX:
        raise RewardOptionError(f"--program-potential must be a finite float32, got "
                                f"{program_potential}")
    potential = DISTANCE_REWARD_PER_CELL if distance_shaping == "potential" else 0.0
    base = EnvParams() if base is None else base
    return base.replace(reward_weights=tuple(values), distance_potential=potential,
                        program_potential=float(program_potential))
