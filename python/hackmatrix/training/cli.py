"""`train_purejaxrl.py`: a training session from its flags to its exit code: set-up, the chunk
loop, metrics, checkpoints and signals.

The parts it calls on: the flags and run options (`arguments.py`), a resume's config and restored
state (`resume.py`), the run directory's lock and housekeeping (`run_directory.py`), and the
runner and compiled chunk (`startup.py`).

Exit codes: 0 done; 2 any other failure (one line); 3 bad arguments; 6 checkpoint load failure;
7 interrupted by SIGINT/SIGTERM (after saving a checkpoint, once training has begun).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from hackmatrix import xla_options
from hackmatrix.shell import compilation_cache, frame_stack, interrupts, jax_backend, stdout_reader
from hackmatrix.shell.exit_codes import (
    EXIT_BAD_ARGUMENTS, EXIT_BAD_CHECKPOINT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK)
from hackmatrix.messages import error_line, one_line
from hackmatrix.training import arguments, devices, resume, run_directory, seeds, startup
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files
from hackmatrix.training import metrics as M
from hackmatrix.training.arguments import UsageError, build_parser, run_options
from hackmatrix.training.config import ConfigError, TrainConfig, run_defaults, validate
from hackmatrix.training.wandb_sink import WandbSink, new_run_id, resolve_mode


class RunDirectoryGone(OSError):
    """The run directory this session locked is no longer where it was: writing on would
    create an unlocked one."""


class NonFiniteLoss(Exception):
    pass


# ----------------------------------------------------------------------------- helpers

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


def make_env(env_id: str = "hackmatrix"):
    """(env, its default params) of `--env env_id` (`envs/registry.py`); ConfigError (exit 3)
    when it cannot be made here."""
    from hackmatrix.envs.registry import EnvError
    from hackmatrix.envs.registry import make_env as make
    try:
        env = make(env_id)
    except EnvError as error:
        raise ConfigError(str(error)) from None
    return env, env.default_params


def training_env_params(env_params, config: TrainConfig):
    """The env params with the reward options (`game/reward_options.py`) and the curriculum
    (`game/curriculum.py`) of `config`; other envs than HackMatrix train on their own."""
    from hackmatrix.game import reward_options
    if env_params is None or config.env != "hackmatrix":
        return env_params
    return reward_options.env_params(
        config.reward_weights, config.distance_shaping, config.program_potential,
        base=env_params).replace(start_programs=config.start_programs,
                                 start_programs_prob=config.start_programs_prob)


def fresh_config(args, backend: str, available_devices: int) -> tuple[TrainConfig, dict, set]:
    """(config, auto-scaled changes, the config fields the user set)."""
    explicit = arguments.explicit_values(args)
    defaults = run_defaults(backend, explicit.get("env", "hackmatrix"), explicit.get("algo", "ppo"))
    config = TrainConfig(**{**defaults, **explicit})
    # Several agents train on one device (`config.validate`).
    counts = ([config.num_devices] if "num_devices" in explicit or backend == "cpu"
              or config.num_seeds > 1 else range(available_devices, 0, -1))
    config, scaled = devices.fit_device_count(config, counts, frozenset(explicit))
    return config, scaled, set(explicit)


def _idle_devices_note(config: TrainConfig, explicit: set, backend: str,
                       available_devices: int) -> str | None:
    """What a fresh run's default device count leaves idle on an accelerator, or None."""
    if backend == "cpu" or "num_devices" in explicit or config.num_devices == available_devices:
        return None
    if config.num_seeds > 1:
        return (f"[config] note: using 1 of the {available_devices} {backend} devices: the "
                f"{config.num_seeds} agents of --num-seeds train on one device")
    return (f"[config] note: using {config.num_devices} of the {available_devices} {backend} "
            f"devices: the {config.num_envs} envs and their {config.num_minibatches} minibatches "
            "do not split evenly over more (each device steps an equal share of the envs and of "
            "every minibatch; --num-devices sets the count)")


class _RunStart(NamedTuple):
    """Which run a session trains, with what config, from where."""
    run_dir: Path
    run_name: str
    config: TrainConfig
    scaled: dict              # auto-scaled changes: name -> (before, after)
    explicit_config: set      # the config fields the user set (in any session of the run)
    update: int
    timesteps: int
    forks_now: bool           # a checkpoint of another run, going on as this directory's run
    forked_from: dict | None  # where the run branched off (kept in its checkpoints)


def _fresh_run(args, backend: str, available_devices: int, say) -> _RunStart:
    if args.keep_optimizer:
        say("[config] note: --keep-optimizer only applies with --resume: ignored")
    config, scaled, explicit_config = fresh_config(args, backend, available_devices)
    run_name = args.run_name or datetime.now().strftime("ppo_%Y%m%d-%H%M%S")
    return _RunStart(Path(args.checkpoint_dir) / run_name, run_name, config, scaled,
                     explicit_config, update=0, timesteps=0, forks_now=False, forked_from=None)


def _resumed_run(args, saved: dict, resume_path: Path, available_devices: int,
                 say) -> _RunStart:
    run_dir = resume_path.parent
    resume.check_flags(args, saved, run_dir, say)
    config, scaled, explicit_config = resume.resumed_config(args, saved, available_devices, say)
    # A run is its directory. A checkpoint that another run wrote (the directory was copied,
    # to branch it, or renamed) goes on as this directory's run, in a wandb run of its own:
    # resuming the old wandb run would write the branch's updates into the original's.
    run_name = resume.run_name_of(run_dir)
    forks_now = saved.get("run_name") not in (None, run_name)
    forked_from = ({"run_name": saved["run_name"], "update": int(saved["update"]),
                    "wandb_run_id": saved.get("wandb_run_id")} if forks_now
                   else saved.get("forked_from"))
    if forks_now:
        say(f"[resume] note: this checkpoint was written by run '{saved['run_name']}'; in "
            f"{run_dir} (a copy or a rename) it goes on as run '{run_name}', a run of its "
            f"own in wandb too (run '{saved['run_name']}' is left as it was)")
    return _RunStart(run_dir, run_name, config, scaled, explicit_config,
                     update=int(saved["update"]), timesteps=int(saved["timesteps"]),
                     forks_now=forks_now, forked_from=forked_from)


def _network_config(config: TrainConfig, obs_dim: int, num_actions: int) -> dict:
    return {**config.network_config, "obs_dim": obs_dim, "num_actions": num_actions}


def _network_text(config: TrainConfig) -> str:
    grid = {"conv": f"conv{config.conv_channels}x2+", "ego": f"ego{config.conv_channels}+"}
    dtype = {"bfloat16": " bf16"}.get(config.dtype, "")
    torso = (grid.get(config.torso, "")
             + f"{config.num_layers}x{config.hidden_dim} {config.activation}{dtype}")
    return f"{'shared' if config.shared_torso else 'separate'}({torso})"


def _reward_text(config: TrainConfig) -> str:
    """The training reward in a few words; the rules' reward is named as such."""
    if config.env != "hackmatrix":
        return "the env's own"
    if (not config.reward_weights and config.distance_shaping == "rules"
            and not config.program_potential):
        return "rules"
    parts = [f"distance_shaping={config.distance_shaping}"]
    if config.program_potential:
        parts.append(f"program_potential={config.program_potential:g}")
    if config.reward_weights:
        parts.append(f"weights={config.reward_weights}")
    return f"{' '.join(parts)} (not the rules' reward; evaluation reports the game's outcomes)"


def _checkpoint_state(runner, *, config, network, run_name, update, timesteps, wandb_run_id,
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


def _resume_point(run_dir: Path, label: str) -> str:
    """"{label} {newest checkpoint} (update N)", or that the run directory holds none: what
    is on disk, whatever the session believes it saved."""
    checkpoints = ckpt.list_checkpoints(run_dir)
    if not checkpoints:
        return f"no checkpoint in {run_dir}"
    update, path = checkpoints[-1]
    return f"{label} {path} (update {update})"


class _DispatchedChunk(NamedTuple):
    outputs: tuple       # (runner, metrics), still being computed when dispatched
    num_active: int      # the updates it runs
    start: float         # perf_counter at dispatch
    ready_at: Callable[[], float]  # perf_counter when its outputs were ready (waits for them)


def _watch_readiness(outputs) -> Callable[[], float]:
    """ready_at: a thread waits for `outputs`, so that the time they became ready is known even
    while the main thread is busy with something else (wandb's start), which is then not counted
    as training time. A computation's error is left to the main thread, which meets it when it
    reads the outputs. Not a daemon thread: one blocked in XLA while the interpreter shuts down
    could abort it; at a normal exit the interpreter joins it (the chunk ends first), and an
    interrupted session ends with `os._exit` (`launch.exit_process`), which waits for nothing."""
    import jax
    ready = []

    def wait():
        try:
            jax.block_until_ready(outputs)
        except Exception:  # noqa: BLE001  (raised again where the outputs are read)
            pass
        ready.append(time.perf_counter())

    watcher = threading.Thread(target=wait, name="first-chunk")
    watcher.start()

    def ready_at() -> float:
        watcher.join()
        return ready[0]
    return ready_at


class _Signals:
    """SIGINT and SIGTERM, from set-up to exit (`handle` is the handler, installed by
    `interrupts.signals_raise`).

    During set-up (before the first update) a signal interrupts at once: nothing exists yet that
    a checkpoint would add to; a compile already running is waited out, with a line saying so
    (`startup.build_runner_and_chunk`). Once training runs (`start_training`), the first signal
    asks for a checkpoint at the next chunk boundary and an exit 7 (during the run's last chunk,
    the run finishes as usual, exit 0); a second one ends the process at once: with the exit code
    already decided once the session's end is saved (`outcome_saved`: 7 after the interrupted
    run's checkpoint, 0 once a completed run's final files are written, say while wandb
    finishes), else with the exit code and message of `exit_at_once`, which looks at what the
    run directory holds (a save in progress may have committed its checkpoint already; every
    file is replaced atomically) and records that end in summary.json."""

    def __init__(self):
        self.signal_name = None
        self.say = None
        self.exit_at_once = None  # signal name -> (exit code, message)
        self.saved_outcome = None  # (exit code, what is saved), once the session's end is saved

    def start_training(self, say, exit_at_once) -> None:
        if self.signal_name is not None:  # a set-up signal whose exception a callback swallowed
            raise interrupts.Interrupted(self.signal_name)
        self.say = say
        self.exit_at_once = exit_at_once

    def outcome_saved(self, exit_code: int, saved: str) -> None:
        """The session's end is saved (`saved` says what): a signal from now on exits at once
        with `exit_code`."""
        self.saved_outcome = (exit_code, saved)

    def handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.say is None:
            self.signal_name = name
            raise interrupts.Interrupted(name)
        if self.signal_name is None and self.saved_outcome is None:
            self.signal_name = name
            self.say(f"[signal] {name}: saving a checkpoint after the current chunk, then "
                     "exiting (signal again to exit at once, without waiting for the save)")
            return
        code = EXIT_FAILURE
        try:  # whatever happens here (a print into a write it interrupted), the process ends
            if self.saved_outcome is not None:
                code, saved = self.saved_outcome
                message = f"{saved}; exiting now"
            else:
                code, message = self.exit_at_once(name)
            again = "" if self.signal_name is None else " again"
            print(f"[signal] {name}{again}: {message}", file=sys.stderr, flush=True)
            sys.stdout.flush()
        finally:
            os._exit(code)


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(f"error: bad arguments: {one_line(str(error))}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    except SystemExit as exit_request:  # --help
        return int(exit_request.code or 0)
    # The product is the run directory: a reader that goes away (`| head`, a pager quit) does
    # not end the run; its lines are in metrics.jsonl too.
    with stdout_reader.standard_streams():
        stdout_reader.keep_working_if_stdout_closes()
        return frame_stack.with_room(_main, args)  # room for JAX's tracing


def _main(args) -> int:
    signals = _Signals()
    try:
        with interrupts.signals_raise(signals.handle), contextlib.ExitStack() as cleanup:
            return _train(args, signals, cleanup)
    except (UsageError, ConfigError) as error:
        print(f"error: bad arguments: {one_line(str(error))}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    except ckpt.CheckpointError as error:
        print(f"error: checkpoint: {one_line(str(error))}", file=sys.stderr)
        return EXIT_BAD_CHECKPOINT
    except KeyboardInterrupt:
        print(f"[exit] interrupted by {signals.signal_name or 'SIGINT'} during set-up, before "
              "the first update: nothing to save (earlier checkpoints are intact)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        if args.verbose:
            traceback.print_exc()
        hint = "" if args.verbose else " (--verbose shows the traceback)"
        print(f"error: {error_line(error)}{hint}", file=sys.stderr)
        return EXIT_FAILURE


def _train(args, signals: _Signals, cleanup: contextlib.ExitStack) -> int:
    session_start = time.perf_counter()
    say = print
    arguments.check_run_location(args)
    saved = resume_path = None
    if args.resume is not None:
        given = None if args.resume is arguments.RESUME_NEWEST else args.resume
        resume_path = ckpt.find_resume_checkpoint(given, Path(args.checkpoint_dir), args.run_name)
        resume.check_not_set_aside(resume_path)
        try:
            saved = ckpt.load_checkpoint(resume_path)
        except ckpt.CheckpointError as error:
            raise ckpt.CheckpointError(
                f"{error}{resume.earlier_checkpoint_note(given, resume_path)}") from None
        cleanup.enter_context(resume.naming_the_checkpoint(resume_path))
    options = run_options(args, saved)
    if options["tensorboard"] and importlib.util.find_spec("tensorboardX") is None:
        raise UsageError("--tensorboard needs the tensorboardX package (pip install -r "
                         "requirements.txt)")
    if args.wandb is False and args.wandb_mode in ("online", "offline"):
        say(f"[config] note: --no-wandb turns wandb off: --wandb-mode {args.wandb_mode} is "
            "ignored")
    if args.save_interval is not None and args.save_interval_minutes is not None:
        say(f"[config] note: --save-interval {args.save_interval} replaces the timer: "
            f"--save-interval-minutes {args.save_interval_minutes:g} is ignored")
    cache_dir = compilation_cache.enable(lambda message: say(f"[config] warning: {message}"))
    import jax
    import jax.numpy as jnp

    from hackmatrix.training.trainer import make_schedule, make_trainer

    # Before JAX starts its backends, which fixes how many devices the CPU shows.
    devices.request_cpu_devices(args.num_devices or int(
        (saved or {}).get("config", {}).get("num_devices", 1)))
    backend = jax_backend.start()
    if jax.process_count() > 1:
        raise ConfigError(f"JAX runs {jax.process_count()} processes (several hosts): training "
                          "over several hosts is not supported yet; train on one host")
    available_devices = jax.local_device_count()
    if saved is not None:
        start = _resumed_run(args, saved, resume_path, available_devices, say)
    else:
        start = _fresh_run(args, backend, available_devices, say)
    run_dir, run_name, config = start.run_dir, start.run_name, start.config
    start_update, start_timesteps = start.update, start.timesteps
    validate(config)
    if (error := devices.missing_devices_error(config.num_devices)) is not None:
        raise ConfigError(error)
    env, env_params = make_env(config.env)
    if (error := devices.rollout_memory_error(config, env.observation_size,
                                              devices.device_memory_bytes())) is not None:
        raise ConfigError(error)
    if options["eval_interval"] and config.env != "hackmatrix":
        raise ConfigError(f"--eval-interval plays HackMatrix boards against its baselines; "
                          f"for --env {config.env} use evaluate.py on the run")
    if options["eval_interval"] and config.num_seeds > 1:
        raise ConfigError(f"--eval-interval evaluates one agent: with --num-seeds "
                          f"{config.num_seeds} use evaluate.py --agent I on the run")
    if saved is None and (note := _idle_devices_note(config, start.explicit_config, backend,
                                                     available_devices)):
        say(note)
    remaining_steps = config.total_timesteps - start_timesteps
    num_updates = start_update + max(0, remaining_steps // config.batch_size)
    if num_updates == start_update:  # a resume: `validate` gives a fresh run an update
        if not run_directory.finish_a_cut_short_final_save(run_dir, run_name, saved,
                                                           resume_path, options, say):
            say(f"[done] run {run_name}: {resume_path.name} is at update {start_update} "
                f"({start_timesteps} timesteps): --total-timesteps {config.total_timesteps} "
                f"leaves no update of "
                f"{config.batch_size} steps to run; nothing to do (raise --total-timesteps to "
                "continue)")
        return EXIT_OK
    # Before the [config] lines, which would describe a run that is then refused.
    lock = run_directory.acquire_lock(run_dir, resuming=saved is not None)
    cleanup.callback(lock.release)
    if saved is None:
        # Under the lock: no other trainer can write it meanwhile.
        run_directory.check_fresh(run_dir)
    end_timesteps = start_timesteps + (num_updates - start_update) * config.batch_size
    scaled_text = ("yes (" + ", ".join(f"{k} {a}->{b}" for k, (a, b) in start.scaled.items())
                   + ")" if start.scaled else "no")
    say(f"[config] run={run_name} device={backend}{xla_options.cpu_compile_label(backend)} "
        f"num_devices={config.num_devices} num_envs={config.num_envs} "
        f"num_steps={config.num_steps} batch_size={config.batch_size} "
        f"minibatch_size={config.minibatch_size} num_minibatches={config.num_minibatches} "
        f"update_epochs={config.update_epochs} gradient_steps={config.gradient_steps_per_update} "
        f"auto_scaled={scaled_text}")
    say(f"[config] updates={start_update}->{num_updates} total_timesteps={config.total_timesteps} "
        f"lr={config.lr} lr_schedule={config.lr_schedule} {seeds.seed_text(config)} "
        f"run_dir={run_dir}")
    say(f"[config] env={config.env} algo={config.algo} network={_network_text(config)} ent_coef={config.ent_coef}->"
        f"{config.ent_coef_end} clip_value_loss={config.clip_value_loss} "
        f"reward={_reward_text(config)}"
        + (f" curriculum=start_programs={config.start_programs}@{config.start_programs_prob:g}"
           if config.start_programs else ""))
    if backend == "cpu" and config.num_devices > 1:
        say(f"[config] warning: {config.num_devices} CPU devices: runs are not bit-reproducible "
            "(XLA:CPU's multi-device runs vary from run to run with the same seed), so a resumed "
            "run only approximately matches an uninterrupted one; one device is exact "
            "(specs/training.md, Data parallelism)")
    if end_timesteps != config.total_timesteps:
        say(f"[config] note: the run stops at update {num_updates}, {end_timesteps} timesteps: "
            f"whole updates of {config.batch_size} steps only")
    # With several agents, one count per agent: they have all trained the same steps.
    if saved is not None and (note := resume.schedule_note(
            saved["config"], config, float(np.max(saved["schedule_timesteps"])))):
        say(note)
    if args.verbose:
        say(f"[config] devices={jax.devices()} compilation_cache={cache_dir} "
            f"updates_per_chunk={config.updates_per_chunk}")

    env_params = training_env_params(env_params, config)
    obs_dim, num_actions = env.observation_size, env.num_actions
    network = _network_config(config, obs_dim, num_actions)
    if saved is not None and (saved["network"].get("obs_dim"), saved["network"].get("num_actions")) \
            != (obs_dim, num_actions):
        raise ckpt.CheckpointError(f"architecture mismatch: checkpoint network {saved['network']} "
                                   f"but the env has obs_dim={obs_dim} num_actions={num_actions}")
    trainer = make_trainer(config, env, env_params)
    # The log window a checkpoint saved part-filled (saved off a log boundary): its episodes
    # go into the first line after the resume.
    window, window_seconds = seeds.metrics_window(config, env.metrics), 0.0
    if saved is not None and saved.get("metrics_window") is not None:
        try:
            window_seconds = window.restore(saved["metrics_window"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError,
                OverflowError) as error:
            raise ckpt.CheckpointError(f"{resume_path} is corrupt: its metrics window "
                                       f"({error})") from None

    compile_start = time.perf_counter()
    schedule = make_schedule(config)
    runner, run_chunk = startup.build_runner_and_chunk(
        trainer, schedule, seeds.agent_keys(config), saved, config, args.keep_optimizer,
        say)
    compile_seconds = time.perf_counter() - compile_start
    say(f"[compile] {compile_seconds:.1f}s (updates_per_chunk={config.updates_per_chunk})")

    update, timesteps = start_update, start_timesteps
    save_interval = options["save_interval"]
    eval_interval = options["eval_interval"]

    def dispatch_chunk(watched: bool = False) -> _DispatchedChunk:
        """Starts the next chunk (JAX returns at once; XLA computes on its own threads): its
        updates end at the next log line, checkpoint interval or the run's end. `watched`: its
        end is timed by a watcher thread (`_watch_readiness`), not when the loop reads it."""
        next_log = (update // config.log_interval + 1) * config.log_interval
        boundaries = [num_updates, next_log, update + config.updates_per_chunk]
        if save_interval:
            boundaries.append((update // save_interval + 1) * save_interval)
        if eval_interval:
            boundaries.append((update // eval_interval + 1) * eval_interval)
        num_active = min(boundaries) - update
        start_time = time.perf_counter()
        outputs = run_chunk(runner, jnp.int32(num_active), schedule)
        ready_at = _watch_readiness(outputs) if watched else time.perf_counter
        return _DispatchedChunk(outputs, num_active, start_time, ready_at)

    # wandb's start (Python work: its import, service and init) runs while the first chunk
    # computes, instead of before it.
    first_chunk = dispatch_chunk(watched=True)
    continues_wandb_run = saved is not None and not start.forks_now
    wandb_run_id = (saved.get("wandb_run_id") if continues_wandb_run else None) or new_run_id()
    wandb_config = {**config.to_dict(), "run_name": run_name, "network": network,
                    "git_commit": git_commit(), "batch_size": config.batch_size,
                    "minibatch_size": config.minibatch_size}
    if start.forked_from:
        wandb_config["forked_from"] = start.forked_from
    sink = WandbSink(mode=resolve_mode(options["wandb"], options["wandb_mode"], say),
                     project=options["wandb_project"], entity=options["wandb_entity"],
                     run_name=run_name, run_id=wandb_run_id, config=wandb_config,
                     directory=run_dir, resuming=continues_wandb_run,
                     upload_artifacts=not options["no_artifact"],
                     online_requested=options["wandb_mode"] == "online", warn=say)

    def finish_wandb(error_type, error, trace) -> bool:
        """The training loop's `finally` finishes wandb's run (then this does nothing); this
        covers a session that ends before the loop (a signal in the rest of set-up), whose exit
        7 runs no atexit hook that would finish it."""
        interrupted = error_type is not None and issubclass(error_type, KeyboardInterrupt)
        sink.finish(exit_code=EXIT_INTERRUPTED if interrupted else EXIT_FAILURE)
        return False  # an exception goes on

    cleanup.push(finish_wandb)

    last_checkpoint, last_saved_update = resume_path, (start_update if saved else None)
    # Lines of log_window that metrics.jsonl did not take: the next checkpoint carries them.
    unwritten_metrics_lines: list[str] = []
    extended_final = None  # set by `run_directory.prepare`

    def save_checkpoint(reason: str, session_end: bool = False) -> Path:
        nonlocal last_checkpoint, last_saved_update, extended_final
        if update != last_saved_update:  # else e.g. a signal right after an interval save
            if not lock.still_in_place():
                raise RunDirectoryGone(
                    f"the run directory {run_dir} was deleted, renamed or replaced during the "
                    f"run (its .lock is gone): not saving update {update} into it")
            state = _checkpoint_state(runner, config=config, network=network, run_name=run_name,
                                      update=update, timesteps=timesteps,
                                      wandb_run_id=wandb_run_id, options=options,
                                      explicit_config=start.explicit_config,
                                      metrics_window=window.state(window_seconds),
                                      unwritten_metrics_lines=unwritten_metrics_lines,
                                      forked_from=start.forked_from)
            path = ckpt.save_checkpoint(run_dir, state)
            last_checkpoint, last_saved_update = path, update
            if extended_final is not None:  # the finished run's end is no longer the newest
                extended_final.unlink(missing_ok=True)
                extended_final = None
            ckpt.prune_checkpoints(run_dir, options["keep_checkpoints"])
            console.print(f"[checkpoint] update={update} saved {path} ({reason})")
        if last_checkpoint != resume_path:  # that one was logged by the session that saved it
            sink.log_checkpoint([last_checkpoint, params_files.params_path(run_dir, update)],
                                update, session_end=session_end)
        return last_checkpoint

    def summary(status: str) -> dict:
        session_steps = (timesteps - start_timesteps) * config.num_seeds  # all agents' steps
        return {
            "status": status, "run_name": run_name, "run_dir": os.path.abspath(run_dir),
            "config": config.to_dict(), "network": network, "update": update,
            "timesteps": timesteps, "final_metrics": last_record,
            "wall_time_seconds": time.perf_counter() - session_start,
            "train_seconds": train_seconds, "compile_seconds": compile_seconds,
            "backend": backend,
            "cpu_compile": xla_options.cpu_compile_mode(backend),
            "sps": session_steps / train_seconds if train_seconds > 0 else None,
            **run_directory.files_on_disk(run_dir),
            "resumed_from": os.path.abspath(resume_path) if resume_path else None,
            "forked_from": start.forked_from,
            "wandb": {"mode": sink.mode if sink.active else "disabled", "run_id": wandb_run_id,
                      "dir": sink.run_directory},
            "tensorboard": os.path.abspath(tensorboard.directory) if tensorboard else None,
        }

    def log_window() -> None:
        nonlocal last_record, window_seconds
        record = {"update": update, "timesteps": timesteps, **resume_mark,
                  "train/sps": window.steps / window_seconds,
                  **window.summarize(), **pending_eval}
        pending_eval.clear()
        resume_mark.clear()
        # A signal can end a resumed run before its first update, with the checkpoint's
        # part-filled window to log: no pace measured yet, so the ETA is unknown ("?").
        updates_run = update - start_update
        seconds_per_update = train_seconds / updates_run if updates_run else math.inf
        console.print(seeds.format_line(record, num_updates,
                                        (num_updates - update) * seconds_per_update,
                                        config.num_seeds))
        for warning in seeds.health_warnings(record, config.num_seeds):
            console.print(warning)
        try:
            metrics_file.write(record)
        except OSError:
            # The line leaves the window all the same: the checkpoint saved after this error
            # carries it for the resume to write, which then logs each update once.
            unwritten_metrics_lines.append(json.dumps(M.json_safe(record)))  # as write() does
            raise
        finally:
            last_record = record
            window.reset()
            window_seconds = 0.0
        sink.log(record)
        if tensorboard:
            tensorboard.log(record)

    console = M.Console(num_updates, start_update)
    last_record: dict = {}
    train_seconds = 0.0
    last_save_time = time.monotonic()
    save_every_seconds = None if save_interval else options["save_interval_minutes"] * 60
    exit_code = EXIT_OK
    run_complete = False  # its final params are saved: an error after that loses nothing
    # Only now, at the end of set-up (the compile and wandb's start done): a mistaken --resume
    # interrupted during set-up must leave the run directory as it was.
    metrics_file = M.MetricsFile(run_dir)
    extended_final = run_directory.prepare(run_dir, saved, start_update, metrics_file, say)
    # The first record logged after a resume says where it resumed (plot_metrics.py marks it).
    resume_mark = ({"resumed_at_update": start_update, "resumed_at_timesteps": start_timesteps}
                   if saved is not None else {})
    tensorboard = None
    if options["tensorboard"]:  # after `prepare`: it mirrors what metrics.jsonl holds now
        from hackmatrix.training.tensorboard_sink import TensorBoardSink
        tensorboard = TensorBoardSink.open(
            run_dir, start_timesteps, f"after_update_{start_update}" if saved else "earlier_run",
            say)
        cleanup.callback(tensorboard.close)
    evaluator, pending_eval = None, {}
    if eval_interval:  # after `prepare`, which sets aside a best_params.npz of later updates
        from hackmatrix.training.evaluation import InTrainingEvaluator
        evaluator = InTrainingEvaluator(trainer.network, network, options["eval_episodes"],
                                        config.seed, run_dir)
        say(evaluator.baseline_line())
    # Replaced when the session ends; a summary still "running" tells whoever reads it after a
    # SIGKILL that this session never finished (not that an earlier one completed).
    M.write_summary(run_dir, summary("running"))

    def exit_at_once(signal_name: str) -> tuple[int, str]:
        """A second signal before the session's end is saved: exit 7 if the run directory holds
        a checkpoint of the update reached (a save in progress may have committed it), as
        after a first signal; else exit 2, naming the newest checkpoint the run goes on from."""
        checkpoints = ckpt.list_checkpoints(run_dir)
        if checkpoints and checkpoints[-1][0] == update:
            code, status = EXIT_INTERRUPTED, "interrupted"
            message = (f"{checkpoints[-1][1]} holds update {update}, the last one trained; "
                       f"exiting now (resume with --resume {run_dir})")
        else:
            code, status = EXIT_FAILURE, "failed"
            message = (f"exiting now without saving update {update}; "
                       f"{_resume_point(run_dir, 'the run goes on from')}")
        M.write_summary(run_dir, {**summary(status), "error": f"{signal_name} again: {message}"})
        return code, message

    signals.start_training(console.print, exit_at_once)
    try:
        while update < num_updates and signals.signal_name is None:
            chunk = first_chunk or dispatch_chunk()
            first_chunk = None
            new_runner, chunk_metrics = chunk.outputs
            num_active = chunk.num_active
            chunk_metrics = jax.device_get(chunk_metrics)
            elapsed = chunk.ready_at() - chunk.start
            if not M.losses_are_finite(chunk_metrics, num_active):
                raise NonFiniteLoss(f"non-finite loss within updates {update + 1}-"
                                    f"{update + num_active}")
            runner = new_runner
            update += num_active
            timesteps += num_active * config.batch_size
            train_seconds += elapsed
            window_seconds += elapsed
            window.add(chunk_metrics, num_active)
            console.advance(num_active)
            if evaluator and (update % eval_interval == 0 or update == num_updates):
                eval_metrics, eval_line = evaluator.evaluate(runner.train.params, update)
                console.print(eval_line)
                pending_eval.update(eval_metrics)

            if update % config.log_interval == 0 or update == num_updates:
                log_window()
            if update < num_updates:
                if save_interval and update % save_interval == 0:
                    save_checkpoint(f"every {save_interval} updates")
                    last_save_time = time.monotonic()
                elif (save_every_seconds is not None
                      and time.monotonic() - last_save_time >= save_every_seconds):
                    minutes = options["save_interval_minutes"]
                    save_checkpoint(f"every {minutes:g} minutes" if minutes else "every chunk")
                    last_save_time = time.monotonic()

        if signals.signal_name is not None and update < num_updates:
            if window.updates:
                log_window()  # the episodes of a part-finished log window
            save_checkpoint(signals.signal_name, session_end=True)
            signals.outcome_saved(EXIT_INTERRUPTED, "the checkpoint is saved")
            try:
                M.write_summary(run_dir, summary("interrupted"))
            except OSError as error:  # the checkpoint is saved: still an exit 7
                console.print(f"[exit] warning: could not rewrite {M.SUMMARY_FILE} "
                              f"({error_line(error)}); the checkpoint is saved")
            console.print(f"[exit] interrupted by {signals.signal_name}; resume with --resume "
                          f"{run_dir}")
            exit_code = EXIT_INTERRUPTED
            return exit_code
        if signals.signal_name is not None:
            console.print(f"[signal] {signals.signal_name} came during the last chunk: the run "
                          "is complete, so it finishes as usual (exit 0, nothing to resume)")
        save_checkpoint("final", session_end=True)
        params_files.save_params(run_dir / params_files.FINAL_PARAMS_NAME,
                                 jax.device_get(runner.train.params), network,
                                 params_files.run_meta(config.to_dict()))
        run_complete = True
        final = summary("completed")
        M.write_summary(run_dir, final)
        signals.outcome_saved(EXIT_OK, "the run is complete")
        console.print(f"[done] update={update} timesteps={timesteps} "
                      f"sps={final['sps'] or 0:.0f} compile={compile_seconds:.1f}s "
                      f"wall={M.format_duration(final['wall_time_seconds'])} "
                      f"summary={run_dir / M.SUMMARY_FILE}")
        return EXIT_OK
    except NonFiniteLoss as error:
        M.write_summary(run_dir, {**summary("failed"), "error": str(error)})
        print(f"error: {one_line(str(error))}; stopped without saving "
              f"({_resume_point(run_dir, 'last good checkpoint:')})", file=sys.stderr)
        exit_code = EXIT_FAILURE
        return exit_code
    except OSError as error:
        # A file of the run that could not be written (metrics.jsonl, summary.json, a full
        # disk): the updates since the last save are still in memory, so save them before
        # giving up, if the run directory takes a checkpoint at all. A run directory that is
        # gone gets nothing more: writing would create it anew, unlocked.
        exit_code = EXIT_FAILURE
        gone = not lock.still_in_place()
        message = error_line(error)
        if isinstance(error, RunDirectoryGone):
            message, kept = str(error), ""  # it says what happened and what was not saved
        elif gone:
            kept = (f"; the run directory {run_dir} was deleted, renamed or replaced during the "
                    "run: nothing more saved")
        else:
            # What the run directory holds decides the message: a save that failed part-way
            # may have committed nothing, or its checkpoint.
            saved_now, kept = None, ""
            if update != last_saved_update:
                try:
                    saved_now = save_checkpoint("after the error", session_end=True)
                except Exception as save_error:  # noqa: BLE001  (the first error is reported)
                    kept = f"; update {update} could not be saved either ({error_line(save_error)})"
            if run_complete:
                kept = f"; the run is complete ({params_files.FINAL_PARAMS_NAME} is saved)"
            else:
                kept = (f"; saved {saved_now} first" if saved_now
                        else f"{kept}; {_resume_point(run_dir, 'the run goes on from')}")
            try:
                M.write_summary(run_dir, {**summary("completed" if run_complete else "failed"),
                                          "error": message})
            except OSError as summary_error:
                kept += f"; {M.SUMMARY_FILE} not rewritten ({error_line(summary_error)})"
        if args.verbose:
            traceback.print_exc()
        print(f"error: {one_line(message)}{kept}", file=sys.stderr)
        return exit_code
    except BaseException:
        exit_code = EXIT_FAILURE
        raise
    finally:
        console.close()
        sink.finish(summary=last_record, exit_code=exit_code)
