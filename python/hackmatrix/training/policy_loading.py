"""Reading a trained policy: one agent's params and architecture out of a checkpoint .pkl, a
params .npz or a run directory (the tools' way in is `tools/policy.py`, which adds the checks
against the env)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hackmatrix.messages import error_line, shown
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files


class NoSuchAgent(Exception):
    """A file holds no agent of the number asked for (the tools' `--agent`: a bad argument)."""


class PolicyParams(NamedTuple):
    params: dict     # one agent's: the flax variables dict for `ActorCritic.apply`
    network: dict    # hidden_dim, num_layers, obs_dim, num_actions and the other architecture keys
    num_agents: int  # how many agents the file holds (`--num-seeds`)


def load_policy_params(path, agent: int = 0) -> tuple[dict, dict]:
    """(params, network_config) of agent `agent` (`read_policy`)."""
    policy = read_policy(path, agent)
    return policy.params, policy.network


def read_policy(path, agent: int = 0) -> PolicyParams:
    """Agent `agent`'s policy from a checkpoint .pkl, a params .npz or a run directory
    (`resolve_policy_file`). A file of one agent holds agent 0 only; NoSuchAgent for an agent
    the file does not hold."""
    path = resolve_policy_file(path)
    if path.suffix == ".pkl":
        state = ckpt.read_checkpoint(path)
        num_agents = state["config"].get("num_seeds", 1)
        return PolicyParams(_agent_params(path, state["params"], num_agents, agent),
                            dict(state["network"]), num_agents)
    if path.suffix == ".npz":
        if not path.is_file():
            raise ckpt.CheckpointError(f"params file not found: {path}")
        if not zipfile.is_zipfile(path):
            raise ckpt.CheckpointError(f"{path} is not a params file: truncated, or not an .npz "
                                       "archive")
        try:
            # No pickled objects: a params file holds plain arrays only.
            with np.load(path, allow_pickle=False) as data:
                network = {key[len(params_files.NETWORK_ENTRY):]: data[key].item() for key in data.files
                           if key.startswith(params_files.NETWORK_ENTRY)}
                num_agents = (data[params_files.META_ENTRY + params_files.NUM_SEEDS_META].item()
                              if params_files.META_ENTRY + params_files.NUM_SEEDS_META in data.files else 1)
                params = params_files.unflatten_params({key: data[key] for key in data.files if not
                                              key.startswith((params_files.NETWORK_ENTRY, params_files.META_ENTRY))})
        except Exception as error:
            raise ckpt.CheckpointError(f"cannot read params {path}: {error_line(error)}") from None
        params = _agent_params(path, params, num_agents, agent)
        try:
            return PolicyParams(params, {**infer_network_config(params), **network}, num_agents)
        except ckpt.CheckpointError as error:
            raise ckpt.CheckpointError(f"{path}: {error}") from None
    raise ckpt.CheckpointError("expected a .pkl checkpoint, a .npz params file or a run "
                               f"directory: {path}")


def _agent_params(path: Path, params: dict, num_agents, agent: int) -> dict:
    """Agent `agent`'s params out of a file's params of `num_agents` agents (stacked when
    more than one)."""
    if not (isinstance(num_agents, int) and not isinstance(num_agents, bool) and num_agents >= 1):
        raise ckpt.CheckpointError(f"{path} is corrupt: it says it holds {shown(num_agents)} "
                                   "agents")
    if not 0 <= agent < num_agents:
        held = "one agent, 0" if num_agents == 1 else f"{num_agents} agents, 0 to {num_agents - 1}"
        raise NoSuchAgent(f"agent {agent} is not in {path}: it holds {held}")
    if num_agents == 1:
        return params

    def pick(tree):
        if isinstance(tree, dict):
            return {name: pick(value) for name, value in tree.items()}
        array = np.asarray(tree)
        if array.shape[:1] != (num_agents,):
            raise ckpt.CheckpointError(f"{path} is corrupt: it holds {num_agents} agents, but an "
                                       f"array of shape {array.shape}")
        return array[agent]
    return pick(params)


def resolve_policy_file(path) -> Path:
    """The file `load_policy_params(path)` reads: `path` itself, or for a run directory its
    newest policy file (`checkpoint.newest_policy_file`)."""
    path = Path(path)
    if not path.is_dir():
        return path
    newest = ckpt.newest_policy_file(path)
    if newest is None:
        raise ckpt.CheckpointError(f"no final_params.npz, checkpoint_*.pkl or params_*.npz in "
                                   f"{path}")
    return newest


def infer_network_config(params: dict) -> dict:
    """Recovers the architecture from parameter names and shapes (params files written before
    they held their architecture)."""
    from hackmatrix.training.network import infer_config
    try:
        return infer_config(params)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        raise ckpt.CheckpointError("parameters do not look like an ActorCritic: they need "
                                   "torso_0... (or actor_torso_0...)/kernel and "
                                   "actor_logits/kernel matrices") from None

