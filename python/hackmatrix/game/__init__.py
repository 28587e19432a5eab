"""HackMatrix in pure JAX: the public API.

    from hackmatrix import game
    state, obs = game.reset(key)
    state, obs, reward, done, info = game.step(key, state, action)
    mask = game.valid_actions(state)            # bool[28]
    obs = game.observe(state)                   # Observation(player, programs, grid)
    print(game.render(state, color=True))
    state = game.scenario.from_dict({...})      # rules Appendix A
    env = game.HackMatrixEnv()                  # gymnax-style, auto-reset, flat observations

`step`, `valid_actions` and `render` are also the names of the modules that define them, and the
rest of the package imports those modules (`from hackmatrix.game import step`). So instead of
shadowing the modules with the functions, the modules themselves are made callable: calling
`game.step(...)` calls `game.step.step(...)`, and `game.step.reset` etc. keep working.
"""

import types

from hackmatrix.game import render, scenario, step, valid_actions
from hackmatrix.game.env import EnvObservation, EnvParams, EnvState, HackMatrixEnv
from hackmatrix.game.observation import Observation, flatten, observe
from hackmatrix.game.step import reset


class _CallableModule(types.ModuleType):
    """A module that, when called, calls its function of the same name."""

    def __call__(self, *args, **kwargs):
        return getattr(self, self.__name__.rsplit(".", 1)[-1])(*args, **kwargs)


for _module in (render, step, valid_actions):
    _module.__class__ = _CallableModule
del _module

__all__ = [
    "reset", "step", "valid_actions", "observe", "flatten", "render", "scenario", "Observation",
    "HackMatrixEnv", "EnvParams", "EnvState", "EnvObservation",
]
