"""Trained policies for the tools: finding and loading a checkpoint of any env, masked action
selection.

A policy never picks a masked (invalid) action: both argmax and sampling run over the logits with
every invalid action masked as in training. Probabilities shown to users are those of this masked
distribution, so they sum to 1 over the valid actions.
"""

from __future__ import annotations

import functools
import pathlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import observation
from hackmatrix.messages import error_line
from hackmatrix.tools import cli, policy_env
from hackmatrix.tools.evaluation import Policy
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import distribution, policy_loading
from hackmatrix.training import network as net
from hackmatrix.training.config import LEGACY_ARCHITECTURE

OBS_DIM = observation.FLAT_SIZE  # the env's flat features


class PolicyLoadError(cli.ToolError):
    """The checkpoint is missing, unreadable or does not fit this game (exit code 6)."""

    def __init__(self, message: str):
        super().__init__(message, cli.EXIT_BAD_CHECKPOINT)


class LoadedPolicy(NamedTuple):
    source: pathlib.Path   # the file or run directory the user named
    file: pathlib.Path     # the file actually loaded (a run directory resolved)
    network: net.ActorCritic
    params: dict
    network_config: dict
    env_id: str = policy_env.HACKMATRIX   # the env it was trained on (policy_env.py)
    agent: int = 0        # which of the file's agents (`--agent`)
    num_agents: int = 1   # how many the file holds (the trainer's `--num-seeds`)

    @property
    def architecture(self) -> str:
        """e.g. "separate ego(16) + 2 x 256 tanh" or, for older files, "shared 2 x 256 tanh"."""
        config = {**LEGACY_ARCHITECTURE, **self.network_config}
        grid = f"{config['torso']}({config['conv_channels']}) + " if config["torso"] != "mlp" else ""
        dtype = f" {config['dtype']}" if config.get("dtype", "float32") != "float32" else ""
        return (f"{'shared' if config['shared'] else 'separate'} {grid}{config['num_layers']} x "
                f"{config['hidden_dim']} {config['activation']}{dtype}")

    @property
    def description(self) -> str:
        """The architecture, and which agent of a file of several (", agent 1 of 4")."""
        agent = f", agent {self.agent} of {self.num_agents}" if self.num_agents > 1 else ""
        return self.architecture + agent


def latest_checkpoint(checkpoint_dir: str | pathlib.Path) -> pathlib.Path:
    """`--latest`: the newest policy file (checkpoint_*.pkl, params_*.npz, final_params.npz)
    directly in `checkpoint_dir` or in one of its run folders, by `checkpoint.newest_file`: each
    folder's newest as for a run directory named to the tools, then the one of those modified
    last (ties to the folder's name). The trainer's `--resume` without a path applies the same
    rule to the run folders' full checkpoints only, so after a run that ended with
    final_params.npz the two agree on the run but not on the file."""
    if not str(checkpoint_dir):  # most often an unset shell variable
        raise PolicyLoadError("--checkpoint-dir is empty: name a directory ('.' for the "
                              "current one)")
    root = pathlib.Path(checkpoint_dir)
    if not root.is_dir():
        raise PolicyLoadError(f"--checkpoint-dir {root} is not a directory" if root.exists()
                              else f"checkpoint directory not found: {root}")
    newest = ckpt.newest_file([root, *root.iterdir()])
    if newest is None:
        raise PolicyLoadError(f"no checkpoint_*.pkl, params_*.npz or final_params.npz under {root}")
    return newest


def resolve_policy_file(source: str | pathlib.Path) -> pathlib.Path:
    """The file that `load_policy(source)` loads: `source` itself, or the one file a run
    directory resolves to (`policy_loading.resolve_policy_file`)."""
    path = pathlib.Path(source)
    if not path.exists():
        raise PolicyLoadError(f"checkpoint not found: {path}")
    if path.is_dir():
        _reject_folder_of_runs(path)
    try:
        return policy_loading.resolve_policy_file(path)
    except ckpt.CheckpointError as error:
        raise PolicyLoadError(str(error)) from None


def _reject_folder_of_runs(folder: pathlib.Path) -> None:
    """A folder without policy files of its own whose subfolders have some is a checkpoint
    directory, not a run (e.g. `checkpoints` instead of `checkpoints/first`): say how to name
    one of its runs."""
    def has_policy_files(directory: pathlib.Path) -> bool:
        return any(ckpt.is_policy_file(entry.name) for entry in directory.iterdir())

    if has_policy_files(folder):
        return
    runs = sorted(entry.name for entry in folder.iterdir()
                  if entry.is_dir() and has_policy_files(entry))
    if runs:
        shown = ", ".join(runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise PolicyLoadError(
            f"{folder} is a folder of runs ({shown}), not a run: name one, e.g. "
            f"{folder / runs[0]}, or use --latest --checkpoint-dir {folder}")


def _other_policy_note(source: pathlib.Path, chosen: pathlib.Path) -> str:
    """For a run directory whose newest policy file cannot be read: "; ..." naming the newest of
    its other ones (the params file of the same update, if any), else ""."""
    try:
        others = ([path for path in ckpt.policy_files(source) if path != chosen]
                  if source.is_dir() else [])
    except OSError:  # the directory went unreadable meanwhile: the error itself says enough
        return ""
    return f"; the run's next newest policy file: {others[-1]}" if others else ""


def load_policy(source: str | pathlib.Path, path: pathlib.Path | None = None,
                env_id: str | None = None, agent: int = 0) -> LoadedPolicy:
    """Loads agent `agent` (`--agent`; a file of one agent holds agent 0 only, any other is a
    bad argument, exit 3) of a .pkl checkpoint, a params .npz or a run directory and checks
    that the network fits its env (observation size and action count) by running it once.
    `path`, if given, is the file `resolve_policy_file(source)` chose earlier (a run may save a
    newer one since).
    The env is the one the file records (`policy_env.py`); `env_id` (the tools' `--env`) names
    it for a file that records none, and must agree with one that does (exit 3)."""
    source = pathlib.Path(source)
    path = resolve_policy_file(source) if path is None else path
    try:
        params, network_config, num_agents = policy_loading.read_policy(path, agent)
        env_id, env_known = policy_env.policy_env_id(path, env_id)
    except policy_loading.NoSuchAgent as error:
        raise cli.ToolError(f"--agent: {error}", cli.EXIT_BAD_ARGUMENTS) from None
    except ckpt.CheckpointError as error:
        raise PolicyLoadError(f"{error}{_other_policy_note(source, path)}") from None
    obs_dim = int(network_config.get("obs_dim", OBS_DIM))
    num_actions = int(network_config.get("num_actions", -1))
    if env_id == policy_env.HACKMATRIX:
        env_obs_dim, env_actions, env_name = OBS_DIM, C.NUM_ACTIONS, "this game"
    else:
        env = policy_env.make_tool_env(env_id)
        env_obs_dim, env_actions, env_name = env.observation_size, env.num_actions, env_id
    if obs_dim != env_obs_dim or num_actions != env_actions:
        # A params file copied out of its run records no env and is taken for HackMatrix's.
        hint = "" if env_known else "; a policy of another env: give --env ID"
        raise PolicyLoadError(
            f"{path}: network expects {obs_dim} features and {num_actions} actions, "
            f"{env_name} has {env_obs_dim} and {env_actions}{hint}")
    dtypes = {np.asarray(leaf).dtype for leaf in jax.tree_util.tree_leaves(params)}
    if not all(np.issubdtype(dtype, np.floating) for dtype in dtypes):
        raise PolicyLoadError(f"{path}: parameters must be real floating-point arrays, found "
                              f"{', '.join(sorted(str(dtype) for dtype in dtypes))}")
    # Training never saves these (it stops on a non-finite loss first): a damaged or foreign
    # file, whose policy would show NaN probabilities.
    if not all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree_util.tree_leaves(params)):
        raise PolicyLoadError(f"{path}: parameters hold NaN or infinite values")
    try:
        network = net.network_from_config(network_config)
        params = jax.tree_util.tree_map(jnp.asarray, params)
        logits, value = network.apply(params, jnp.zeros((env_obs_dim,), jnp.float32))
    except Exception as error:  # noqa: BLE001  (flax reports shape mismatches in many types)
        raise PolicyLoadError(f"{path}: parameters do not fit the network: "
                              f"{error_line(error)}") from None
    if logits.shape != (env_actions,) or value.shape != ():
        raise PolicyLoadError(f"{path}: network outputs have shapes {logits.shape}, {value.shape}")
    return LoadedPolicy(source=source, file=path, network=network, params=params,
                        network_config=dict(network_config), env_id=env_id, agent=agent,
                        num_agents=num_agents)


def masked_logits(logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    """The training distribution's masking (invalid actions get the dtype's minimum: their
    probability is exactly 0). With no valid action at all the logits stay as they are, so the
    distribution is still defined (any action then ends the episode as invalid, §4.4)."""
    any_valid = jnp.any(action_mask, axis=-1, keepdims=True)
    return distribution.mask_logits(logits, action_mask | ~any_valid)


def select_action(key: jax.Array, logits: jax.Array, action_mask: jax.Array,
                  deterministic: bool) -> jax.Array:
    """Argmax or a sample of the masked distribution; always a valid action when one exists."""
    masked = masked_logits(logits, action_mask)
    if deterministic:
        return jnp.argmax(masked, axis=-1).astype(jnp.int32)
    return jax.random.categorical(key, masked, axis=-1).astype(jnp.int32)


def network_policy(loaded: LoadedPolicy, deterministic: bool, name: str | None = None) -> Policy:
    """The checkpoint as a tools policy; its params travel as a traced argument, so one
    compilation serves every checkpoint of the same architecture."""
    return Policy(name=name or str(loaded.source),
                  act=network_act(loaded.network, deterministic), params=loaded.params)


@functools.lru_cache(maxsize=None)
def network_act(network: net.ActorCritic, deterministic: bool):
    """The network's `act` (argmax or a sample of its masked distribution), one per network."""
    def act(params, key, game_state, features, action_mask):
        del game_state  # the network sees only the observation
        logits, _ = network.apply(params, features)
        return select_action(key, logits, action_mask, deterministic)

    return act


def top_actions(probabilities: np.ndarray, action_mask: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k most probable valid actions as (action, probability), most probable first."""
    valid = np.flatnonzero(np.asarray(action_mask))
    ranked = sorted(valid, key=lambda a: (-float(probabilities[a]), a))
    return [(int(a), float(probabilities[a])) for a in ranked[:k]]
