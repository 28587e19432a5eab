"""Params files (.npz): the params of a policy as plain arrays, keys '/'-joined flax paths,
with the architecture (`network/...`) and facts about the run (`meta/...`) as 0-d entries
beside them, so that a params file alone rebuilds its network.

A run directory holds params_{update}.npz beside each checkpoint, final_params.npz at the end
of training and best_params.npz (the best by evaluation, `training/evaluation.py`). A file of
several agents (`--num-seeds K`, K > 1) stores every array with the agents first and says so:
`meta/num_seeds` = K. Reading a policy out of these files is `training/policy_loading.py`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from hackmatrix.training.atomic_files import atomic_write

PARAMS_PATTERN = re.compile(r"^params_(\d+)\.npz$")
FINAL_PARAMS_NAME = "final_params.npz"
# The best params by evaluation during training (`training/evaluation.py`).
BEST_PARAMS_NAME = "best_params.npz"
NETWORK_ENTRY = "network/"  # a params file's architecture entries: "network/torso" -> "conv"
META_ENTRY = "meta/"        # other facts about the params (e.g. the best params' update)
NUM_SEEDS_META = "num_seeds"  # `meta/num_seeds`: how many agents a params file holds


def params_path(run_dir: Path, update: int) -> Path:
    return Path(run_dir) / f"params_{update}.npz"


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


def save_params(path: Path, params: dict, network: dict | None = None,
                meta: dict | None = None) -> Path:
    """Params as a plain .npz, with the architecture (`network`) and any `meta` as 0-d entries
    beside them, so that a params file alone rebuilds its network."""
    return atomic_write(path, params_writer(params, network, meta))


def run_meta(config: dict) -> dict:
    """The `meta` entries that tie a params file to its run: its env (tools make the env from
    them; a config without `env` is HackMatrix's) and, for several agents, their number. Nothing
    for a config that is not one (a corrupt state, which the checks refuse on their own terms)."""
    if not isinstance(config, dict):
        return {}
    env = config.get("env", "hackmatrix")
    num_seeds = config.get("num_seeds", 1)
    return {**({"env": env} if isinstance(env, str) else {}),
            **({NUM_SEEDS_META: num_seeds} if isinstance(num_seeds, int)
               and not isinstance(num_seeds, bool) and num_seeds > 1 else {})}


def params_writer(params: dict, network: dict | None, meta: dict | None = None):
    """What writes the params file of `params`, `network` and `meta` to an open file (for
    `atomic_files.atomic_write` and `write_temp`)."""
    flat = flatten_params(params)
    for prefix, entries in ((NETWORK_ENTRY, network), (META_ENTRY, meta)):
        for key, value in (entries or {}).items():
            flat[prefix + key] = np.asarray(value)
    return lambda f: np.savez(f, **flat)


def params_meta(path: Path) -> dict:
    """The `meta/` entries of a params file, as Python numbers ({} if it cannot be read)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key[len(META_ENTRY):]: data[key].item() for key in data.files
                    if key.startswith(META_ENTRY)}
    except Exception:  # noqa: BLE001  (a damaged file has no usable meta)
        return {}


def params_files_equal(first: Path, second: Path) -> bool:
    """Whether two params files hold the same arrays (False if either cannot be read)."""
    try:
        with np.load(first) as a, np.load(second) as b:
            return set(a.files) == set(b.files) and all(
                np.array_equal(a[key], b[key]) for key in a.files)
    except Exception:  # an unreadable file is not a copy of anything
        return False

