"""Checkpoint files: saving and reading them, keep-last-K, setting files aside, resume
discovery and which of a run's files is the newest (`newest_file`).

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
half-written file under a real name. What a checkpoint's pickle may hold is
`training/checkpoint_pickle.py`; the params files' format, `training/params_files.py`; reading a
policy out of any of these files, `training/policy_loading.py`.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
from datetime import datetime
from pathlib import Path

import numpy as np

from hackmatrix.messages import error_line, shown
from hackmatrix.training import checkpoint_pickle, params_files
from hackmatrix.training.atomic_files import commit, fsync_directory, temp_files, write_temp
from hackmatrix.training.run_lock import RunLock

FORMAT_VERSION = 1
CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)\.pkl$")
SET_ASIDE_DIR = "set_aside"
REQUIRED_KEYS = ("format_version", "config", "network", "params", "opt_state", "rng", "env_state",
                 "env_obs", "episode_return", "episode_length", "update", "timesteps",
                 "wandb_run_id", "schedule_timesteps")
NETWORK_KEYS = ("hidden_dim", "num_layers", "obs_dim", "num_actions")


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable, corrupt or does not fit the requested run."""
# ----------------------------------------------------------------------------- checkpoints

def checkpoint_path(run_dir: Path, update: int) -> Path:
    return Path(run_dir) / f"checkpoint_{update}.pkl"


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
    params_temp = write_temp(params_files.params_path(run_dir, update),
                             params_files.params_writer(state["params"], state["network"],
                                                        params_files.run_meta(state["config"])))
    try:
        checkpoint_temp = write_temp(
            checkpoint_path(run_dir, update),
            lambda f: checkpoint_pickle.CheckpointPickler(
                f, protocol=pickle.HIGHEST_PROTOCOL).dump(state))
        path = commit(checkpoint_temp, checkpoint_path(run_dir, update))
    except BaseException:
        params_temp.unlink(missing_ok=True)
        raise
    commit(params_temp, params_files.params_path(run_dir, update))
    return path


def restore_params_file(run_dir: Path, state: dict) -> Path | None:
    """Writes params_{update}.npz from a checkpoint's state when the run directory lacks it (a
    checkpoint written before its params file, by a trainer killed in between); returns the
    path written, or None when the file was there."""
    path = params_files.params_path(run_dir, int(state["update"]))
    if path.is_file():
        return None
    return params_files.save_params(path, state["params"], state["network"],
                                    params_files.run_meta(state["config"]))


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
            params_files.params_path(run_dir, update).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
        checkpoints = checkpoints[-keep:]
    return [path for _, path in checkpoints]


def load_checkpoint(path: Path) -> dict:
    """A training checkpoint's state dict, checked for resuming: CheckpointError (one line) if
    it is missing, not a checkpoint, or corrupt, its training config included."""
    state = read_checkpoint(path)
    _check_resume_fields(Path(path), state)
    return state


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
    state = checkpoint_pickle.unpickled(f)
    if isinstance(state, checkpoint_pickle.Unreadable):
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


def files_after(run_dir: Path, update: int) -> list[Path]:
    """The checkpoints and params files of `run_dir` from updates after `update`, and
    final_params.npz: what a run resumed at `update` will write anew."""
    run_dir = Path(run_dir)
    later = [path for found, path in list_checkpoints(run_dir) if found > update]
    later += [entry for entry in run_dir.iterdir()
              if (match := params_files.PARAMS_PATTERN.match(entry.name))
              and int(match.group(1)) > update]
    final = run_dir / params_files.FINAL_PARAMS_NAME
    best = run_dir / params_files.BEST_PARAMS_NAME
    best_later = best.is_file() and (
        params_files.params_meta(best).get("update", update + 1) > update)
    return sorted(later) + ([final] if final.is_file() else []) + ([best] if best_later else [])


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
    found = (newest_file(checkpoint_dir.iterdir(), checkpoints_only=True)
             if checkpoint_dir.is_dir() else None)
    if found is None:
        raise CheckpointError(f"no checkpoint to resume in {checkpoint_dir}")
    return found


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


# ----------------------------------------------------------------------------- newest file

def is_policy_file(name: str) -> bool:
    """Whether a file name is one a policy loads from: checkpoint_N.pkl, params_N.npz or
    final_params.npz."""
    return bool(CHECKPOINT_PATTERN.match(name) or params_files.PARAMS_PATTERN.match(name)
                or name == params_files.FINAL_PARAMS_NAME)


def policy_files(run_dir: Path) -> list[Path]:
    """A run directory's checkpoints and params files, oldest first by update (at equal update
    the params file first); final_params.npz is not among them."""
    candidates = list_checkpoints(run_dir)
    for entry in Path(run_dir).iterdir():
        match = params_files.PARAMS_PATTERN.match(entry.name)
        if match:
            candidates.append((int(match.group(1)), entry))
    return [path for _, path in sorted(candidates, key=lambda c: (c[0], c[1].suffix == ".pkl"))]


def newest_file(folders, checkpoints_only: bool = False) -> Path | None:
    """The newest file of `folders`: the one rule for which checkpoint or policy file is the
    newest, behind `--resume` without a path, a run directory named to the tools and their
    `--latest` (None if the folders hold none; entries of `folders` that are not directories
    hold none).

    In one folder (a run directory) files are ordered by update, the full checkpoint after the
    params file of the same update; final_params.npz, unless `checkpoints_only`, comes after
    them all unless one of them was modified after it (final_params.npz is written right after
    the run's last checkpoint; a resumed run moves it aside, or deletes it once it has saved a
    newer checkpoint when it copies the resumed update's params (`run_directory.prepare`). A
    kill in between, or a directory from before that rule, leaves a stale one beside newer
    checkpoints: those win then). Across folders the newest is the folder's newest file that
    was modified last, ties (a run copied with `cp -a` keeps its times) going to the folder's
    name, so that the choice never depends on the order of a directory listing."""
    folders = [Path(folder) for folder in folders]
    if len(folders) == 1:  # one run directory: its files' times matter only beside final_params
        return _newest_in_folder(folders[0], checkpoints_only)
    newest = [found for folder in folders
              if (found := _newest_in_folder(folder, checkpoints_only)) is not None]
    return max(newest, key=lambda path: (path.stat().st_mtime_ns, path.parent.name),
               default=None)


def _newest_in_folder(folder: Path, checkpoints_only: bool) -> Path | None:
    if not folder.is_dir():
        return None
    ordered = [path for _, path in list_checkpoints(folder)] if checkpoints_only else \
        policy_files(folder)
    newest = ordered[-1] if ordered else None
    final = folder / params_files.FINAL_PARAMS_NAME
    if not checkpoints_only and final.is_file() and (
            newest is None or final.stat().st_mtime_ns >= newest.stat().st_mtime_ns):
        return final
    return newest


def newest_checkpoint(run_dir: Path) -> Path | None:
    """The run directory's newest checkpoint_*.pkl (`newest_file`), the one to resume."""
    return newest_file([run_dir], checkpoints_only=True)


def newest_policy_file(run_dir: Path) -> Path | None:
    """The run directory's newest policy file (`newest_file`), the one a tool loads."""
    return newest_file([run_dir])
