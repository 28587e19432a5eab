"""Which env a policy file was trained on, and that env made for the tools.

A full checkpoint records its env in its training config (`config["env"]`; a checkpoint from
before `--env` trained on HackMatrix). A params .npz records it as its `meta/env` entry where
the trainer writes one; otherwise the run's summary.json beside it (written when the run
starts, with the run's config) says. A params file with neither, copied out of its run, is
taken for HackMatrix, as every such file before `--env` was; `--env ID` names another env.
"""

from __future__ import annotations

import json
import pathlib

from hackmatrix.tools import cli
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files

HACKMATRIX = "hackmatrix"  # the trainer's default `--env` (envs/registry.py)
# training.metrics.SUMMARY_FILE, spelled out: that module imports JAX, which plot_metrics.py
# never needs (a test checks that the two agree).
SUMMARY_FILE = "summary.json"


def recorded_env(path: pathlib.Path) -> str | None:
    """The env id that the policy file `path` records, or None when it records none."""
    if path.suffix == ".pkl":
        config = ckpt.read_checkpoint(path)["config"]
        # A config from before `--env` has no such field: those runs trained on HackMatrix.
        return str(config.get("env", HACKMATRIX))
    meta_env = params_files.params_meta(path).get("env")
    if isinstance(meta_env, str) and meta_env:
        return meta_env
    return summary_env(path.parent)


def summary_env(run_dir: pathlib.Path) -> str | None:
    """The env of the run whose directory is `run_dir`, from its summary.json; None without a
    readable one."""
    try:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    config = summary.get("config") if isinstance(summary, dict) else None
    if not isinstance(config, dict):
        return None
    env = config.get("env", HACKMATRIX)  # a run from before `--env`
    return env if isinstance(env, str) and env else None


def policy_env_id(path: pathlib.Path, env_flag: str | None) -> tuple[str, bool]:
    """(env id, whether it is known rather than assumed) for the policy file `path`: the one
    it records, which `--env` (`env_flag`) must agree with (exit 3), else `--env`, else
    HackMatrix, assumed."""
    recorded = recorded_env(path)
    if recorded is not None and env_flag is not None and recorded != env_flag:
        raise cli.ToolError(f"--env {env_flag}: {path} was trained on {recorded}",
                            cli.EXIT_BAD_ARGUMENTS)
    if recorded is not None:
        return recorded, True
    if env_flag is not None:
        return env_flag, True
    return HACKMATRIX, False


def make_tool_env(env_id: str):
    """The env of `env_id` under the env contract (envs/contract.py). One it cannot make here
    (gymnax missing, an unknown id, continuous actions) is the registry's one-line message,
    exit 3."""
    from hackmatrix.envs.registry import EnvError, make_env
    try:
        return make_env(env_id)
    except EnvError as error:
        raise cli.ToolError(str(error), cli.EXIT_BAD_ARGUMENTS) from None


def episode_limit(env, fallback: int) -> int:
    """The env's own episode limit (gymnax params' `max_steps_in_episode`), else `fallback`;
    never over the tools' cap."""
    limit = getattr(env.default_params, "max_steps_in_episode", None)
    try:
        limit = int(limit)
    except (TypeError, ValueError):
        limit = fallback
    return max(1, min(limit, cli.MAX_EPISODE_STEPS))
