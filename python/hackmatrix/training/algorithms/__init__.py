"""Learning algorithms, one module of pure functions each (`base.Algorithm`): `ppo` and `a2c`.

The trainer (`training/trainer.py`) collects the rollout and its GAE advantages; an algorithm
turns that batch into new parameters. Adding one is a module here and a line in ALGORITHMS."""

from hackmatrix.training.algorithms import a2c, ppo
from hackmatrix.training.algorithms.base import Algorithm

ALGORITHMS: dict[str, Algorithm] = {"ppo": ppo.ALGORITHM, "a2c": a2c.ALGORITHM}
