"""HackMatrix in pure JAX: the public API.

    import jax
    from hackmatrix import game
    reset, step = jax.jit(game.reset), jax.jit(game.step)   # see "Speed" below
    state, obs = reset(key)
    state, obs, reward, done, info = step(key, state, action)
    mask = game.valid_actions(state)            # bool[28]
    obs = game.observe(state)                   # Observation(player, programs, grid)
    print(game.render(state, color=True))
    state = game.scenario.from_dict({...}, key) # rules Appendix A
    env = game.HackMatrixEnv()                  # gymnax-style, auto-reset, flat observations

Speed: the functions are plain JAX functions, for `jax.jit` and `jax.vmap` (as in gymnax).
Called without `jit`, a step runs its thousands of operations one by one: seconds per call.
Jitted, the first call compiles (several seconds on a CPU) and later ones reuse the compiled
program; `hackmatrix.shell.compilation_cache.enable()` keeps compiled programs across processes.
Importing `hackmatrix` on a CPU-only machine sets `XLA_FLAGS` for a faster compile
(`hackmatrix/xla_options.py`; `HACKMATRIX_CPU_COMPILE=throughput` keeps XLA's defaults).
specs/game-rules.md, section 11, has the details.
"""

from hackmatrix.game import scenario
from hackmatrix.game.action_mask import valid_actions
from hackmatrix.game.env import EnvObservation, EnvParams, EnvState, HackMatrixEnv
from hackmatrix.game.observation import Observation, flatten, observe
from hackmatrix.game.renderer import render
from hackmatrix.game.transition import reset, step

__all__ = [
    "reset", "step", "valid_actions", "observe", "flatten", "render", "scenario", "Observation",
    "HackMatrixEnv", "EnvParams", "EnvState", "EnvObservation",
]
