"""What a training session records about its run besides its metrics: the state a checkpoint
holds, the commit the code ran from (wandb's config), and where the run goes on from."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import numpy as np

from hackmatrix.training import checkpoint as ckpt


def git_commit(directory: Path = Path(__file__).parent) -> str | None:
    """The commit the code runs from, with "-dirty" when tracked files differ from it (the run
    then used code that no commit holds); None outside a git checkout."""
    def git(*args) -> str | None:
        try:
            result = subprocess.run(["git", *args], cwd=directory, capture_output=True,
                                    text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def checkpoint_state(runner, *, config, network, run_name, update, timesteps, wandb_run_id,
                      options, explicit_config, metrics_window, unwritten_metrics_lines,
                      forked_from) -> dict:
    import flax
    import jax
    host = jax.device_get(runner)
    return {
        "format_version": ckpt.FORMAT_VERSION,
        "run_name": run_name,
        "config": config.to_dict(),
        "network": network,
        # Plain dicts (flax can be set to return FrozenDicts): the reader loads no other class.
        "params": jax.tree.map(np.asarray, flax.core.unfreeze(host.train.params)),
        "opt_state": [np.asarray(leaf) for leaf in jax.tree.leaves(host.train.opt_state)],
        "schedule_timesteps": np.asarray(host.train.schedule_timesteps),
        "rng": np.asarray(host.rng),
        "env_state": [np.asarray(leaf) for leaf in jax.tree.leaves(host.envs.env_state)],
        "env_obs": [np.asarray(leaf) for leaf in jax.tree.leaves(host.envs.obs)],
        "episode_return": np.asarray(host.envs.episode_return),
        "episode_length": np.asarray(host.envs.episode_length),
        "update": int(update),
        "timesteps": int(timesteps),
        "wandb_run_id": wandb_run_id,
        "forked_from": forked_from,
        "run_options": dict(options),
        "explicit_config": sorted(explicit_config),
        "metrics_window": metrics_window,
        # Logged lines that metrics.jsonl did not take (`run_directory.write_unwritten_metrics`).
        "unwritten_metrics_lines": list(unwritten_metrics_lines),
        "saved_at": datetime.now().isoformat(timespec="seconds"),
    }


def resume_point(run_dir: Path, label: str) -> str:
    """"{label} {newest checkpoint} (update N)", or that the run directory holds none: what
    is on disk, whatever the session believes it saved."""
    checkpoints = ckpt.list_checkpoints(run_dir)
    if not checkpoints:
        return f"no checkpoint in {run_dir}"
    update, path = checkpoints[-1]
    return f"{label} {path} (update {update})"
