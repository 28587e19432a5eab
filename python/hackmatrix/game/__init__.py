"""HackMatrix in pure JAX: the public API.

    from hackmatrix import game
    state, obs = game.reset(key)
    state, obs, reward, done, info = game.step(key, state, action)
    mask = game.valid_actions(state)            # bool[28]
    obs = game.observe(state)                   # Observation(player, programs, grid)
    print(game.render(state, color=True))
    state = game.scenario.from_dict({...}, key) # rules Appendix A
    env = game.HackMatrixEnv()                  # gymnax-style, auto-reset, flat observations
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
