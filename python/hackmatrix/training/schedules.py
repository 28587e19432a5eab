"""The learning-rate and entropy-coefficient schedules, as functions of training progress.

Progress is timesteps trained / total timesteps, both traced (`trainer.Schedule`), so that a resume
with a new `--total-timesteps` re-aims a schedule without recompiling; that is why these are
written over progress rather than as optax step-count schedules, whose lengths are static.

- learning rate: `lr × decay_fraction(lr_schedule, progress)`, with "constant" (1), "linear"
  (1 − p) or "cosine" (½(1 + cos πp)), reaching 0 at the end of the run;
- entropy coefficient: linear from `ent_coef` to `ent_coef_end`.
"""

from __future__ import annotations

import math

import jax.numpy as jnp


def decay_fraction(kind: str, progress):
    """The learning rate's factor at `progress` (clipped to [0, 1]); a float for a float."""
    if kind == "constant":
        return 1.0
    if isinstance(progress, (int, float)):
        p = min(max(float(progress), 0.0), 1.0)
        return 1.0 - p if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * p))
    p = jnp.clip(progress, 0.0, 1.0)
    return 1.0 - p if kind == "linear" else 0.5 * (1.0 + jnp.cos(jnp.pi * p))


def entropy_coefficient(start: float, end: float, progress):
    """Linear from `start` at progress 0 to `end` at 1."""
    if start == end:
        return start
    return start + (end - start) * jnp.clip(progress, 0.0, 1.0)
