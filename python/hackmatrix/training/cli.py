"""`train_purejaxrl.py`: a training session from its flags to its exit code: set-up (the run
it starts, fresh or resumed, and its config), signals, and the exit code of any failure.

The parts it calls on: the flags and run options (`arguments.py`), a resume's config and restored
state (`resume.py`), the run directory's lock and housekeeping (`run_directory.py`), the
runner and compiled chunk (`startup.py`), and the started run's chunk loop, metrics and
checkpoints (`training_run.py`).

Exit codes: 0 done; 2 any other failure (one line); 3 bad arguments; 6 checkpoint load failure;
7 interrupted by SIGINT/SIGTERM (after saving a checkpoint, once training has begun).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hackmatrix import xla_options
from hackmatrix.shell import compilation_cache, frame_stack, interrupts, jax_backend, stdout_reader
from hackmatrix.shell.exit_codes import (
    EXIT_BAD_ARGUMENTS, EXIT_BAD_CHECKPOINT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK)
from hackmatrix.messages import error_line, one_line
from hackmatrix.training import arguments, devices, resume, run_directory, seeds, startup
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training.arguments import UsageError, build_parser, run_options
from hackmatrix.training.config import ConfigError, TrainConfig, run_defaults, validate
from hackmatrix.training.training_run import TrainingRun


# ----------------------------------------------------------------------------- helpers

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
    finishes), else with the exit code and message of `exit_at_once`
    (`TrainingRun.exit_at_once`), which looks at what the run directory holds (a save in
    progress may have committed its checkpoint already; every file is replaced atomically) and
    records that end in summary.json."""

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

    return TrainingRun(
        verbose=args.verbose, signals=signals, cleanup=cleanup, say=say,
        session_start=session_start, saved=saved, resume_path=resume_path, options=options,
        backend=backend, start=start, num_updates=num_updates, lock=lock, network=network,
        trainer=trainer, window=window, window_seconds=window_seconds, schedule=schedule,
        runner=runner, run_chunk=run_chunk, compile_seconds=compile_seconds).run()
