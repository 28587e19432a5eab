"""`--resume`: the config, flags and training state of a run continued from its checkpoint."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import devices, schedules
from hackmatrix.training.arguments import (ARCHITECTURE_FIELDS, UsageError, explicit_values,
                                           run_name_problem)
from hackmatrix.training.config import ALGORITHM_DEFAULTS, TrainConfig
from hackmatrix.training.config import DEFAULT_DTYPE, LEGACY_ARCHITECTURE


def resumed_config(args, saved: dict, available_devices: int,
                   say) -> tuple[TrainConfig, dict, set]:
    """(config, auto-scaled changes, the config fields the user set in any session)."""
    explicit = explicit_values(args)
    explicit.pop("seed", None)  # the run continues from its checkpoint's random state
    # The fields set in earlier sessions (none recorded in checkpoints older than this rule).
    set_before = set(saved.get("explicit_config", ()))
    saved_config = TrainConfig.from_dict(saved["config"])
    for name in ("env", "algo"):
        if name in explicit and explicit[name] != getattr(saved_config, name):
            raise ckpt.CheckpointError(
                f"--{name} {explicit[name]} but the checkpoint's run trains "
                f"--{name} {getattr(saved_config, name)}: a run keeps its env and algorithm "
                "(start a new run for another)")
    if "num_seeds" in explicit and explicit["num_seeds"] != saved_config.num_seeds:
        raise ckpt.CheckpointError(
            f"--num-seeds {explicit['num_seeds']} but the checkpoint's run trains "
            f"{saved_config.num_seeds} agent(s): a run keeps its agents (start a new run for "
            "another number)")
    for name in ARCHITECTURE_FIELDS:
        if name in explicit and explicit[name] != getattr(saved_config, name):
            raise ckpt.CheckpointError(
                f"architecture mismatch: --{name.replace('_', '-')} {explicit[name]} but the "
                f"checkpoint has {getattr(saved_config, name)}")
    config = dataclasses.replace(saved_config, **explicit)
    user_set = set_before | set(explicit)
    rescale = None
    if config.batch_size != saved_config.batch_size:
        # A new batch size: re-derive the minibatching the user left to auto-scaling.
        defaults = TrainConfig(**ALGORITHM_DEFAULTS.get(saved_config.algo, {}))
        config = dataclasses.replace(config, **{
            name: getattr(defaults, name) for name in ("num_minibatches", "update_epochs")
            if name not in user_set})
        rescale = frozenset(user_set)
    # The count given now, else the checkpoint's if it still fits, else the most that fit.
    counts = [config.num_devices]
    if "num_devices" not in explicit:
        counts = [count for count in counts if count <= available_devices]
        counts += range(available_devices, 0, -1)
    config, scaled = devices.fit_device_count(config, counts, rescale)
    if config.num_devices != saved_config.num_devices:
        say(f"[resume] warning: num_devices {saved_config.num_devices} -> {config.num_devices}: "
            "the run continues, but not bit-identically to one that kept "
            f"{saved_config.num_devices}")
    return config, scaled, user_set


def _restore_leaves(template, leaves, what: str):
    import jax
    import jax.numpy as jnp
    template_leaves, treedef = jax.tree.flatten(template)
    if not isinstance(leaves, (list, tuple)) or len(leaves) != len(template_leaves):
        raise ckpt.CheckpointError(f"checkpoint {what} does not match this build's layout")
    try:
        saved_arrays = [np.asarray(saved) for saved in leaves]
    except (TypeError, ValueError, OverflowError) as error:  # e.g. ragged nested lists
        raise ckpt.CheckpointError(f"checkpoint {what} is corrupt ({type(error).__name__})") from None
    restored = []
    for saved, fresh in zip(saved_arrays, template_leaves):
        if saved.shape != np.shape(fresh):
            raise ckpt.CheckpointError(f"checkpoint {what} does not match this build's layout")
        # What this code saves: numbers, integers exactly where the state holds integers (not
        # text, objects, complex values, or floats or wrapped values in an integer leaf).
        exact = np.dtype(fresh.dtype).kind in "biu"
        if saved.dtype.kind not in ("biu" if exact else "biuf"):
            raise ckpt.CheckpointError(
                f"checkpoint {what} is corrupt (values of type {saved.dtype})")
        value = saved.astype(fresh.dtype)
        if exact and not np.array_equal(value, saved):
            raise ckpt.CheckpointError(f"checkpoint {what} is corrupt (values out of range)")
        restored.append(jnp.asarray(value))
    return jax.tree.unflatten(treedef, restored)


def restore_runner(fresh, saved: dict, config: TrainConfig, keep_optimizer: bool, say):
    """The RunnerState of a checkpoint, built on the structure of `fresh` (a runner, or
    `init_shapes`' ShapeDtypeStructs: leaves the checkpoint does not give stay shapes, for
    `init` to fill)."""
    import flax
    import jax
    import jax.numpy as jnp
    saved_num_envs = int(saved["config"]["num_envs"])
    batch_changes = [f"{name} {saved['config'][name]} -> {getattr(config, name)}"
                     for name in ("num_envs", "num_steps")
                     if int(saved["config"][name]) != getattr(config, name)]
    try:
        params = _restore_leaves(fresh.train.params, jax.tree.leaves(saved["params"]), "params")
    except ckpt.CheckpointError:
        recorded = {**LEGACY_ARCHITECTURE, "dtype": DEFAULT_DTYPE, **saved["network"]}
        wanted = config.network_config
        if all(recorded[key] == value for key, value in wanted.items()):
            raise  # the network fits: its params are what is wrong
        raise ckpt.CheckpointError(
            f"architecture mismatch: checkpoint network {saved['network']} does not fit "
            + " ".join(f"{key}={value}" for key, value in wanted.items())) from None
    # Training never saves these (it stops on a non-finite loss first), and a resume from them
    # would only stop on one at its first update, after compiling.
    if not all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree.leaves(params)):
        raise ckpt.CheckpointError("checkpoint params hold NaN or infinite values")
    # Saved as plain dicts; the runner's may be FrozenDicts (flax's FLAX_RETURN_FROZENDICT).
    if jax.tree.structure(saved["params"]) != jax.tree.structure(
            flax.core.unfreeze(fresh.train.params)):
        raise ckpt.CheckpointError(f"architecture mismatch: checkpoint network {saved['network']}")
    consequences = []
    if not batch_changes or keep_optimizer:
        opt_state = _restore_leaves(fresh.train.opt_state, saved["opt_state"], "optimizer state")
    else:
        opt_state = fresh.train.opt_state
        consequences.append("optimizer state reset, because Adam's moment estimates are "
                            "calibrated to the old batch size (--keep-optimizer keeps them)")
    if saved_num_envs != config.num_envs:
        consequences.append("every env starts a new game (the saved ones do not fit)")
    if consequences:
        say(f"[resume] warning: {', '.join(batch_changes)}: {'; '.join(consequences)}")
    # One count per agent with several: `checkpoint.load_checkpoint` checked its shape.
    train = fresh.train._replace(params=params, opt_state=opt_state,
                                 schedule_timesteps=jnp.float32(saved["schedule_timesteps"]))
    if saved_num_envs == config.num_envs:
        envs = fresh.envs._replace(
            env_state=_restore_leaves(fresh.envs.env_state, saved["env_state"], "env state"),
            obs=_restore_leaves(fresh.envs.obs, saved["env_obs"], "observations"),
            episode_return=_restore_leaves(fresh.envs.episode_return, [saved["episode_return"]],
                                           "episode returns"),
            episode_length=_restore_leaves(fresh.envs.episode_length, [saved["episode_length"]],
                                           "episode lengths"))
    else:
        envs = fresh.envs  # the saved env states do not fit the new env count: start new games
    rng = _restore_leaves(fresh.rng, [saved["rng"]], "random state")
    return fresh._replace(train=train, envs=envs, rng=rng)


def run_name_of(run_dir: Path) -> str:
    """A run's name is its directory's (resolved: `--resume .` from inside it names it too)."""
    return run_dir.resolve().name


def check_not_set_aside(checkpoint: Path) -> None:
    """Refuse a checkpoint in a run's set-aside folder: that folder is not a run. Resumed in
    place it would become a run nested in the original one, holding only the updates after
    its branch point."""
    branch = checkpoint.resolve().parent
    if ckpt.is_set_aside_folder(branch):
        run_dir = branch.parent.parent
        raise UsageError(f"{checkpoint} was set aside from run '{run_dir.name}' and is not a run "
                         "of its own: copy it into a new run directory and resume that "
                         f"(mkdir {run_dir.parent}/NEW && cp {checkpoint} {run_dir.parent}/NEW/, "
                         f"then --resume {run_dir.parent}/NEW)")


def check_flags(args, saved: dict, run_dir: Path, say) -> None:
    if (problem := run_name_problem(run_name_of(run_dir))) is not None:
        raise UsageError(f"the run directory {run_dir} names the run, and its name {problem}: a "
                         "run's name shows within one log line; rename the directory")
    if args.run_name and args.run_name != run_name_of(run_dir):
        raise UsageError(f"--run-name {args.run_name} but the checkpoint belongs to run "
                         f"'{run_name_of(run_dir)}' ({run_dir}): a resumed run keeps its name "
                         "and directory")
    if args.seed is not None and args.seed != saved["config"].get("seed"):
        say(f"[resume] warning: --seed {args.seed} ignored: the run continues from its "
            f"checkpoint's random state (seed {saved['config'].get('seed')})")


def schedule_note(saved_config: dict, config: TrainConfig,
                  schedule_timesteps: float) -> str | None:
    """A warning when a resume re-aims the annealed learning rate at a new total."""
    old_total = int(saved_config.get("total_timesteps", config.total_timesteps))
    if config.lr_schedule == "constant" or old_total == config.total_timesteps:
        return None
    def rate(total):
        return config.lr * schedules.decay_fraction(config.lr_schedule, schedule_timesteps / total)
    return (f"[resume] total_timesteps {old_total} -> {config.total_timesteps}: the learning rate "
            f"now anneals ({config.lr_schedule}) to 0 at {config.total_timesteps} steps, so at "
            "this update it is "
            f"{rate(config.total_timesteps):.3g} (it was {rate(old_total):.3g})")


@contextlib.contextmanager
def naming_the_checkpoint(path: Path):
    """Checkpoint errors found after loading (the arrays against this build's layout, the run
    options, the network against the env) name the file, as the loader's own errors do."""
    try:
        yield
    except ckpt.CheckpointError as error:
        if str(path) in str(error):
            raise
        raise ckpt.CheckpointError(f"{path}: {error}") from None


def earlier_checkpoint_note(given: str | None, chosen: Path) -> str:
    """For a checkpoint that `--resume` chose as a run's newest (`given` is not that file) and
    that cannot be loaded: "; ..." naming the run's previous checkpoint, else ""."""
    if given and Path(given).is_file():
        return ""
    earlier = [path for _, path in ckpt.list_checkpoints(chosen.parent) if path != chosen]
    if not earlier:
        return ""
    return f"; to resume from the run's previous checkpoint: --resume {earlier[-1]}"
