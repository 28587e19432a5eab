"""`--env` ids: `hackmatrix` (the default) or any discrete-action gymnax id."""

from __future__ import annotations

from hackmatrix.envs.contract import EnvError
from hackmatrix.envs.gymnax_env import GymnaxEnv, gymnax_ids
from hackmatrix.envs.hackmatrix_env import ENV_ID as HACKMATRIX, HackMatrixTrainingEnv

__all__ = ["HACKMATRIX", "EnvError", "make_env", "env_id_problem", "gymnax_ids"]


def make_env(env_id: str = HACKMATRIX):
    """The env of `env_id` under the env contract; EnvError when it cannot be made here."""
    if env_id == HACKMATRIX:
        return HackMatrixTrainingEnv()
    return GymnaxEnv(env_id)


def env_id_problem(env_id: str) -> str | None:
    """Why `env_id` cannot be made here, or None; cheap for HackMatrix."""
    if env_id == HACKMATRIX:
        return None
    try:
        GymnaxEnv(env_id)
    except EnvError as error:
        return str(error)
    return None
