"""Checkpoint files: saving and reading them, keep-last-K, resume discovery and policy loading.

Layout of a run directory `{checkpoint_dir}/{run_name}/`:
  checkpoint_{update}.pkl  full training state (see specs/architecture.md), NumPy leaves only
  params_{update}.npz      params only, keys are '/'-joined flax paths
  final_params.npz         params at the end of training
A run of several agents (`--num-seeds K`, K > 1) stores every array of the training state and of
the params files with the agents first (agent i's params are `array[i]`), and its params files
say so: `meta/num_seeds` = K. A file without that entry holds one agent, unstacked.
  set_aside/{why}_{time}/  files a resume or a fresh start moved out of the way (never deleted)
Every file is written to a temp file in the same directory, fsynced, then renamed
(`atomic_files`), so a kill during a save leaves the previous files intact and never a
half-written file under a real name.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import sys
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from hackmatrix.messages import error_line, shown
# The run directory's file writing and lock, under the names the trainer and tools use.
from hackmatrix.training.atomic_files import (  # noqa: F401
    atomic_write, commit, fsync_directory, temp_files, write_temp)
from hackmatrix.training.run_lock import LOCK_NAME, RunLock  # noqa: F401

FORMAT_VERSION = 1
CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)\.pkl$")
PARAMS_PATTERN = re.compile(r"^params_(\d+)\.npz$")
FINAL_PARAMS_NAME = "final_params.npz"
# The best params by evaluation during training (`training/evaluation.py`).
BEST_PARAMS_NAME = "best_params.npz"
SET_ASIDE_DIR = "set_aside"
REQUIRED_KEYS = ("format_version", "config", "network", "params", "opt_state", "rng", "env_state",
                 "env_obs", "episode_return", "episode_length", "update", "timesteps",
                 "wandb_run_id", "schedule_timesteps")
NETWORK_KEYS = ("hidden_dim", "num_layers", "obs_dim", "num_actions")


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable, corrupt or does not fit the requested run."""


# ----------------------------------------------------------------------------- params <-> npz

def flatten_params(params: dict, prefix: str = "") -> dict[str, np.ndarray]:
    """{'params': {'torso_0': {'kernel': a}}} -> {'params/torso_0/kernel': a}."""
    flat = {}
    for name, value in params.items():
        key = f"{prefix}/{name}" if prefix else str(name)
        if isinstance(value, dict) or hasattr(value, "items"):
            flat.update(flatten_params(dict(value), key))
        else:
            flat[key] = np.asarray(value)
    return flat


def unflatten_params(flat: dict[str, np.ndarray]) -> dict:
    params: dict = {}
    for key, value in flat.items():
        node = params
        *parents, leaf = key.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = np.asarray(value)
    return params


NETWORK_ENTRY = "network/"  # a params file's architecture entries: "network/torso" -> "conv"
META_ENTRY = "meta/"        # other facts about the params (e.g. the best params' update)


def save_params(path: Path, params: dict, network: dict | None = None,
                meta: dict | None = None) -> Path:
    """Params as a plain .npz, with the architecture (`network`) and any `meta` as 0-d entries
    beside them, so that a params file alone rebuilds its network."""
    return atomic_write(path, _params_writer(params, network, meta))


NUM_SEEDS_META = "num_seeds"  # `meta/num_seeds`: how many agents a params file holds


class NoSuchAgent(Exception):
    """A file holds no agent of the number asked for (the tools' `--agent`: a bad argument)."""


def run_meta(config: dict) -> dict:
    """The `meta` entries that tie a params file to its run: its env (tools make the env from
    them; a config without `env` is HackMatrix's) and, for several agents, their number. Nothing
    for a config that is not one (a corrupt state, which the checks refuse on their own terms)."""
    if not isinstance(config, dict):
        return {}
    env = config.get("env", "hackmatrix")
    num_seeds = config.get("num_seeds", 1)
    return {**({"env": env} if isinstance(env, str) else {}),
            **({NUM_SEEDS_META: num_seeds} if _count(num_seeds) and num_seeds > 1 else {})}


def _params_writer(params: dict, network: dict | None, meta: dict | None = None):
    flat = flatten_params(params)
    for prefix, entries in ((NETWORK_ENTRY, network), (META_ENTRY, meta)):
        for key, value in (entries or {}).items():
            flat[prefix + key] = np.asarray(value)
    return lambda f: np.savez(f, **flat)


def infer_network_config(params: dict) -> dict:
    """Recovers the architecture from parameter names and shapes (params files written before
    they held their architecture)."""
    from hackmatrix.training.network import infer_config
    try:
        return infer_config(params)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        raise CheckpointError("parameters do not look like an ActorCritic: they need "
                              "torso_0... (or actor_torso_0...)/kernel and actor_logits/kernel "
                              "matrices") from None


# ----------------------------------------------------------------------------- checkpoints

def checkpoint_path(run_dir: Path, update: int) -> Path:
    return Path(run_dir) / f"checkpoint_{update}.pkl"


def params_path(run_dir: Path, update: int) -> Path:
    return Path(run_dir) / f"params_{update}.npz"


def save_checkpoint(run_dir: Path, state: dict) -> Path:
    """Writes checkpoint_{update}.pkl and params_{update}.npz for a dict with REQUIRED_KEYS.
    Both are written to temp files first; the checkpoint's rename then commits the pair, and
    the params file's follows. A save that fails leaves neither; a kill between the renames
    leaves the checkpoint alone, whose params file the next resume writes from it
    (`restore_params_file`)."""
    missing = [key for key in REQUIRED_KEYS if key not in state]
    if missing:
        raise ValueError(f"checkpoint state lacks {missing}")
    update = int(state["update"])
    params_temp = write_temp(params_path(run_dir, update),
                             _params_writer(state["params"], state["network"],
                                            run_meta(state["config"])))
    try:
        checkpoint_temp = write_temp(
            checkpoint_path(run_dir, update),
            lambda f: _CheckpointPickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(state))
        path = commit(checkpoint_temp, checkpoint_path(run_dir, update))
    except BaseException:
        params_temp.unlink(missing_ok=True)
        raise
    commit(params_temp, params_path(run_dir, update))
    return path


def restore_params_file(run_dir: Path, state: dict) -> Path | None:
    """Writes params_{update}.npz from a checkpoint's state when the run directory lacks it (a
    checkpoint written before its params file, by a trainer killed in between); returns the
    path written, or None when the file was there."""
    path = params_path(run_dir, int(state["update"]))
    if path.is_file():
        return None
    return save_params(path, state["params"], state["network"], run_meta(state["config"]))


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(update, path) of every checkpoint in the run directory, oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = []
    for entry in run_dir.iterdir():
        match = CHECKPOINT_PATTERN.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found)


def prune_checkpoints(run_dir: Path, keep: int) -> list[Path]:
    """Deletes all but the newest `keep` checkpoints (and their params files); returns the kept."""
    checkpoints = list_checkpoints(run_dir)
    if keep > 0 and len(checkpoints) > keep:
        for update, path in checkpoints[:-keep]:
            # The params file first: a kill between the two leaves a checkpoint, which the next
            # rotation removes, not a params file that no rotation would ever see.
            params_path(run_dir, update).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
        checkpoints = checkpoints[-keep:]
    return [path for _, path in checkpoints]


def load_checkpoint(path: Path) -> dict:
    """A training checkpoint's state dict, checked for resuming: CheckpointError (one line) if
    it is missing, not a checkpoint, or corrupt, its training config included."""
    state = read_checkpoint(path)
    _check_resume_fields(Path(path), state)
    return state


class _Unreadable(NamedTuple):
    reason: str


# The only globals a checkpoint's pickle refers to: NumPy's arrays, scalars and dtypes (the
# trainer stores every leaf as NumPy, in plain dicts, lists and tuples), and what older pickle
# protocols name for sets and bytes (builtins, and `_codecs.encode` for bytes below protocol 3).
# A pickle runs whatever its globals name while it loads, so any other name marks a crafted or
# foreign file. `_CheckpointPickler` keeps the trainer's own checkpoints within these.
_CHECKPOINT_GLOBALS = frozenset({
    ("numpy", "dtype"), ("numpy", "ndarray"),
    # NumPy 2's names, and NumPy 1's for the same functions (NumPy 2 reads those too).
    *((f"{package}.{module}", name) for package in ("numpy._core", "numpy.core")
      for module, name in (("numeric", "_frombuffer"), ("multiarray", "_reconstruct"),
                           ("multiarray", "scalar"))),
    ("_codecs", "encode"),
    *((module, name) for module in ("builtins", "__builtin__")
      for name in ("set", "frozenset", "bytes", "bytearray"))})


class _ForeignGlobal(pickle.UnpicklingError):
    pass


class _CheckpointPickler(pickle.Pickler):
    """Refuses, before the file is replaced, any object that the reader would refuse: NumPy
    arrays, scalars and dtypes, and Python's plain values and containers, pickle without other
    globals (pickle asks `reducer_override` about every object but None, booleans and exact
    ints, floats, bytes, str, dict, set, frozenset, list and tuple)."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray or isinstance(obj, (np.generic, np.dtype, bytearray)):
            return NotImplemented  # pickled as usual
        # The functions and classes those values pickle through, each saved by its name.
        if (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)) in \
                _CHECKPOINT_GLOBALS:
            return NotImplemented
        raise TypeError(f"a checkpoint cannot hold a {type(obj).__module__}."
                        f"{type(obj).__qualname__}: its reader loads only NumPy values and plain "
                        "containers (store it as those)")


class _CheckpointUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _CHECKPOINT_GLOBALS:
            raise _ForeignGlobal(f"{module}.{name}")
        return super().find_class(module, name)


def _unpickled(file) -> Any:
    """The object pickled in `file`, or _Unreadable. Only the globals of `_CHECKPOINT_GLOBALS`
    load: a pickle naming any other is refused before it runs anything.
    pickle raises many types on truncated or foreign files; the error is dropped here, with the
    hook that prints what the interpreter reports meanwhile: freeing a bytearray that a corrupt
    BYTEARRAY8 opcode sized past memory prints a SystemError line (CPython 3.11-3.13), which
    would break the one-line error."""
    excepthook, sys.excepthook = sys.excepthook, lambda *report: None
    try:
        with file:
            return _CheckpointUnpickler(file).load()
    except _ForeignGlobal as error:
        return _Unreadable(f"not loaded: it names {error}, which no checkpoint does (a crafted "
                           "or foreign pickle)")
    except Exception as error:  # `error` and its frames are freed right here
        return _Unreadable(f"truncated, or not a checkpoint ({type(error).__name__})")
    finally:
        sys.excepthook = excepthook


def read_checkpoint(path: Path) -> dict:
    """A training checkpoint's state dict, checked as far as reading its policy needs (its
    network and counters; not the training config, which older versions checked less
    strictly): CheckpointError (one line) if it is missing, not a checkpoint, or corrupt."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.suffix == ".npz":
        raise CheckpointError(f"{path} holds params only (for inference): resuming needs a "
                              "checkpoint_{update}.pkl or a run directory")
    try:
        f = open(path, "rb")
    except OSError as error:
        raise CheckpointError(f"cannot open checkpoint {path}: {error.strerror}") from None
    state = _unpickled(f)
    if isinstance(state, _Unreadable):
        raise CheckpointError(f"cannot read checkpoint {path}: {state.reason}")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a HackMatrix training checkpoint")
    missing = [key for key in REQUIRED_KEYS if key not in state]
    if len(missing) > len(REQUIRED_KEYS) // 2:
        raise CheckpointError(f"{path} is not a HackMatrix training checkpoint ({len(missing)} of "
                              f"its {len(REQUIRED_KEYS)} keys are missing)")
    if missing:
        raise CheckpointError(f"{path} is not a HackMatrix training checkpoint (missing {missing})")
    version = state["format_version"]
    if not (isinstance(version, int) and not isinstance(version, bool)
            and version == FORMAT_VERSION):
        raise CheckpointError(f"{path} has format version {shown(version)}, "
                              f"this code reads version {FORMAT_VERSION}")
    _check_fields(path, state)
    return state


def _count(value) -> bool:
    """A whole number >= 0 (bool is an int in Python: True must not read as update 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_fields(path: Path, state: dict) -> None:
    """The fields every reader uses: a corrupt value is a CheckpointError here rather than a
    stray TypeError later."""
    def text_keyed(tree) -> bool:  # nested dicts with text keys down to the arrays
        return not isinstance(tree, dict) or all(
            isinstance(key, str) and text_keyed(value) for key, value in tree.items())

    if not isinstance(state["params"], dict) or not text_keyed(state["params"]):
        raise CheckpointError(f"{path} is corrupt: its params are not dicts of named arrays")
    network = state["network"]
    if not isinstance(network, dict) or not all(_count(network.get(key)) for key in NETWORK_KEYS):
        raise CheckpointError(f"{path} is corrupt: its network must give {', '.join(NETWORK_KEYS)}")
    if not isinstance(state["config"], dict):
        raise CheckpointError(f"{path} is corrupt: its config is not a dict")
    for key in ("update", "timesteps"):
        if not _count(state[key]):
            raise CheckpointError(f"{path} is corrupt: {key} is {shown(state[key])}")


def _check_resume_fields(path: Path, state: dict) -> None:
    """The fields a resume reads before it builds anything (the arrays are checked against the
    fresh runner's layout when it is built)."""
    import dataclasses

    from hackmatrix.training.config import LEGACY_FIELDS, ConfigError, TrainConfig, validate
    from hackmatrix.training.config import DEFAULT_DTYPE, LEGACY_ARCHITECTURE

    # A missing field would take today's default, which need not be the one the run trained
    # with (lr's default has changed). num_devices came later: absent, the run had one device.
    missing = sorted({field.name for field in dataclasses.fields(TrainConfig)}
                     - set(state["config"]) - LEGACY_FIELDS - {"lr_schedule"})
    if "lr_schedule" not in state["config"] and "anneal_lr" not in state["config"]:
        missing.append("lr_schedule")
    if missing:
        raise CheckpointError(f"{path} is corrupt: its config lacks {', '.join(missing)}")
    try:
        validate(TrainConfig.from_dict(state["config"]))
    except (ConfigError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} is corrupt: its config is invalid ({error_line(error)})") from None
    # A resume builds the network from the config, the other tools from `network`: they agree.
    network = {**LEGACY_ARCHITECTURE, "dtype": DEFAULT_DTYPE, **state["network"]}
    configured = {"dtype": DEFAULT_DTYPE, **TrainConfig.from_dict(state["config"]).network_config}
    disagree = [f"{key} {network[key]} in its network, {value} in its config"
                for key, value in configured.items() if network[key] != value]
    if disagree:
        raise CheckpointError(f"{path} is corrupt: {'; '.join(disagree)}")
    explicit = state.get("explicit_config", [])
    if not (isinstance(explicit, (list, tuple)) and all(isinstance(name, str) for name in explicit)):
        raise CheckpointError(f"{path} is corrupt: explicit_config is {shown(explicit)}")
    if not isinstance(state.get("run_name"), (str, type(None))):
        raise CheckpointError(f"{path} is corrupt: run_name is {shown(state['run_name'])}")
    unwritten = state.get("unwritten_metrics_lines", [])
    if not (isinstance(unwritten, list)
            and all(_line_of_update(line, state["update"]) for line in unwritten)):
        raise CheckpointError(f"{path} is corrupt: unwritten_metrics_lines is {shown(unwritten)}")
    # One count per agent with several (each has trained as many steps), else a scalar.
    num_seeds = TrainConfig.from_dict(state["config"]).num_seeds
    if not _finite_numbers(state["schedule_timesteps"], () if num_seeds == 1 else (num_seeds,)):
        raise CheckpointError(f"{path} is corrupt: schedule_timesteps is "
                              f"{shown(state['schedule_timesteps'])}")


def _line_of_update(line, update: int) -> bool:
    """Whether `line` is a metrics.jsonl line of an update up to `update`."""
    try:
        logged = json.loads(line).get("update") if isinstance(line, str) else None
    except (ValueError, AttributeError):
        return False
    return isinstance(logged, int) and not isinstance(logged, bool) and 0 < logged <= update


def _finite_numbers(value, shape: tuple) -> bool:
    """Finite ints or floats in an array of `shape`, or for shape () a Python or NumPy
    scalar (a 0-d array included)."""
    try:
        if np.shape(value) != shape:
            return False
        items = np.asarray(value).ravel().tolist()
    except (TypeError, ValueError):  # ragged nested lists
        return False
    try:
        return all(isinstance(item, (int, float)) and math.isfinite(item) for item in items)
    except OverflowError:  # an int too large for a float
        return False


def newest_checkpoint(run_dir: Path) -> Path | None:
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1][1] if checkpoints else None


def files_after(run_dir: Path, update: int) -> list[Path]:
    """The checkpoints and params files of `run_dir` from updates after `update`, and
    final_params.npz: what a run resumed at `update` will write anew."""
    run_dir = Path(run_dir)
    later = [path for found, path in list_checkpoints(run_dir) if found > update]
    later += [entry for entry in run_dir.iterdir()
              if (match := PARAMS_PATTERN.match(entry.name)) and int(match.group(1)) > update]
    final = run_dir / FINAL_PARAMS_NAME
    best = run_dir / BEST_PARAMS_NAME
    best_later = best.is_file() and (params_meta(best).get("update", update + 1) > update)
    return sorted(later) + ([final] if final.is_file() else []) + ([best] if best_later else [])


def params_meta(path: Path) -> dict:
    """The `meta/` entries of a params file, as Python numbers ({} if it cannot be read)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key[len(META_ENTRY):]: data[key].item() for key in data.files
                    if key.startswith(META_ENTRY)}
    except Exception:  # noqa: BLE001  (a damaged file has no usable meta)
        return {}


# set_aside's folders: {why}_{stamp}, with _2, _3, ... when the stamp is taken.
_SET_ASIDE_STAMP = "%Y%m%d-%H%M%S"
_SET_ASIDE_FOLDER = re.compile(r"\w+?_\d{8}-\d{6}(_\d+)?")


def set_aside(run_dir: Path, paths: list[Path], why: str) -> Path:
    """Moves `paths` into a new folder run_dir/set_aside/{why}_{time}/ and returns it: files a
    run would otherwise overwrite or mix with its own are kept, out of the way of resume
    discovery, pruning and the tools (which look only at the run directory itself)."""
    stamp = datetime.now().strftime(_SET_ASIDE_STAMP)
    base = Path(run_dir) / SET_ASIDE_DIR / f"{why}_{stamp}"
    folder, suffix = base, 1
    while folder.exists():
        suffix += 1
        folder = base.with_name(f"{base.name}_{suffix}")
    folder.mkdir(parents=True)
    for path in paths:
        os.replace(path, folder / Path(path).name)
    fsync_directory(Path(run_dir))
    return folder


def is_set_aside_folder(path: Path) -> bool:
    """Whether `path` is a folder that `set_aside` made (by its name and its parent's, so that
    a checkpoint directory that a user happened to call set_aside is not one)."""
    path = Path(path)
    return path.parent.name == SET_ASIDE_DIR and _SET_ASIDE_FOLDER.fullmatch(path.name) is not None


def remove_temp_files(run_dir: Path) -> None:
    """Deletes `temp_files` (only the run's own writer may call this: see RunLock)."""
    for path in temp_files(run_dir):
        path.unlink(missing_ok=True)


def find_resume_checkpoint(resume: str | None, checkpoint_dir: Path, run_name: str | None) -> Path:
    """The checkpoint `--resume [PATH]` means.

    PATH may be a .pkl or a run directory. Without PATH: the newest checkpoint of `run_name`, or
    else of the run directory in `checkpoint_dir` whose newest checkpoint is the most recent.
    A path the system refuses to look at (a name too long, a loop of links) is a
    CheckpointError too.
    """
    try:
        return _find_resume_checkpoint(resume, checkpoint_dir, run_name)
    except OSError as error:
        where = error.filename if error.filename is not None else resume or checkpoint_dir
        raise CheckpointError(f"cannot look for a checkpoint at {where}: "
                              f"{error.strerror or error}") from None


def _find_resume_checkpoint(resume, checkpoint_dir, run_name) -> Path:
    if resume:
        target = Path(resume)
        if target.is_dir():
            found = newest_checkpoint(target)
            if found is None:
                raise CheckpointError(f"no checkpoint_*.pkl in {target}{_never_saved_note(target)}")
            return found
        if not target.is_file():
            raise CheckpointError(f"checkpoint not found: {target}")
        return target
    checkpoint_dir = Path(checkpoint_dir)
    if run_name:
        found = newest_checkpoint(checkpoint_dir / run_name)
        if found is None:
            raise CheckpointError(f"no checkpoint to resume for run '{run_name}' in {checkpoint_dir}"
                                  f"{_never_saved_note(checkpoint_dir / run_name)}")
        return found
    candidates = [newest_checkpoint(d) for d in checkpoint_dir.iterdir()] if checkpoint_dir.is_dir() else []
    candidates = [c for c in candidates if c is not None]
    if not candidates:
        raise CheckpointError(f"no checkpoint to resume in {checkpoint_dir}")
    # Ties (a run copied with `cp -a` keeps its times) go to the run directory's name, so that
    # the choice never depends on the order of the directory listing.
    return max(candidates, key=lambda c: (c.stat().st_mtime_ns, c.parent.name))


def _never_saved_note(run_dir: Path) -> str:
    """What to add when a run directory has no checkpoints: that a trainer is writing it and has
    not saved yet; or, when it holds a run's metrics and no params files, that the run stopped
    before its first save. (With params files a fresh start is refused:
    `run_directory.check_fresh`, by the same `is_policy_file`.)"""
    lock = RunLock(run_dir)
    if lock.held_elsewhere():
        return (f": another trainer (pid {lock.holder()}) is writing this run and has not saved "
                "a checkpoint yet; resume once it has saved one or ended")
    if not (run_dir / "metrics.jsonl").is_file() or any(
            is_policy_file(entry.name) for entry in run_dir.iterdir()):
        return ""
    return (": the run there stopped before its first save; without --resume it starts over, "
            "setting its metrics aside")


# ----------------------------------------------------------------------------- policy loading

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
        state = read_checkpoint(path)
        num_agents = state["config"].get("num_seeds", 1)
        return PolicyParams(_agent_params(path, state["params"], num_agents, agent),
                            dict(state["network"]), num_agents)
    if path.suffix == ".npz":
        if not path.is_file():
            raise CheckpointError(f"params file not found: {path}")
        if not zipfile.is_zipfile(path):
            raise CheckpointError(f"{path} is not a params file: truncated, or not an .npz "
                                  "archive")
        try:
            # No pickled objects: a params file holds plain arrays only.
            with np.load(path, allow_pickle=False) as data:
                network = {key[len(NETWORK_ENTRY):]: data[key].item() for key in data.files
                           if key.startswith(NETWORK_ENTRY)}
                num_agents = (data[META_ENTRY + NUM_SEEDS_META].item()
                              if META_ENTRY + NUM_SEEDS_META in data.files else 1)
                params = unflatten_params({key: data[key] for key in data.files if not
                                           key.startswith((NETWORK_ENTRY, META_ENTRY))})
        except Exception as error:
            raise CheckpointError(f"cannot read params {path}: {error_line(error)}") from None
        params = _agent_params(path, params, num_agents, agent)
        try:
            return PolicyParams(params, {**infer_network_config(params), **network}, num_agents)
        except CheckpointError as error:
            raise CheckpointError(f"{path}: {error}") from None
    raise CheckpointError(f"expected a .pkl checkpoint, a .npz params file or a run directory: {path}")


def _agent_params(path: Path, params: dict, num_agents, agent: int) -> dict:
    """Agent `agent`'s params out of a file's params of `num_agents` agents (stacked when
    more than one)."""
    if not (_count(num_agents) and num_agents >= 1):
        raise CheckpointError(f"{path} is corrupt: it says it holds {shown(num_agents)} agents")
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
            raise CheckpointError(f"{path} is corrupt: it holds {num_agents} agents, but an "
                                  f"array of shape {array.shape}")
        return array[agent]
    return pick(params)


def is_policy_file(name: str) -> bool:
    """Whether a file name is one a policy loads from: checkpoint_N.pkl, params_N.npz or
    final_params.npz."""
    return bool(CHECKPOINT_PATTERN.match(name) or PARAMS_PATTERN.match(name)
                or name == FINAL_PARAMS_NAME)


def params_files_equal(first: Path, second: Path) -> bool:
    """Whether two params files hold the same arrays (False if either cannot be read)."""
    try:
        with np.load(first) as a, np.load(second) as b:
            return set(a.files) == set(b.files) and all(
                np.array_equal(a[key], b[key]) for key in a.files)
    except Exception:  # an unreadable file is not a copy of anything
        return False


def resolve_policy_file(path) -> Path:
    """The file `load_policy_params(path)` reads: `path` itself, or for a run directory its
    final_params.npz if nothing was saved after it, else its newest checkpoint or params file
    by update (the full checkpoint at equal update)."""
    path = Path(path)
    return _newest_policy_file(path) if path.is_dir() else path


def policy_files(run_dir: Path) -> list[Path]:
    """A run directory's checkpoints and params files, oldest first by update (at equal update
    the params file first); final_params.npz is not among them."""
    candidates = list_checkpoints(run_dir)
    for entry in Path(run_dir).iterdir():
        match = PARAMS_PATTERN.match(entry.name)
        if match:
            candidates.append((int(match.group(1)), entry))
    return [path for _, path in sorted(candidates, key=lambda c: (c[0], c[1].suffix == ".pkl"))]


def _newest_policy_file(run_dir: Path) -> Path:
    candidates = policy_files(run_dir)
    newest = candidates[-1] if candidates else None
    final = run_dir / FINAL_PARAMS_NAME
    # final_params.npz is written right after the run's last checkpoint. A resumed run moves it
    # aside, or, when it is a copy of the resumed update's params (a finished run extended),
    # deletes it once it has saved a newer checkpoint (`run_directory.prepare`). A kill in
    # between, or a directory from before that rule, leaves a stale one beside the newer
    # checkpoints: those win then.
    if final.is_file() and (newest is None or final.stat().st_mtime >= newest.stat().st_mtime):
        return final
    if newest is None:
        raise CheckpointError(f"no final_params.npz, checkpoint_*.pkl or params_*.npz in {run_dir}")
    return newest
