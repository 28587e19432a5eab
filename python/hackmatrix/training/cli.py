"""`train_purejaxrl.py`: flags, the chunk loop, checkpoints, signals and exit codes.

Exit codes: 0 done; 2 any other failure (one line); 3 bad arguments; 6 checkpoint load failure;
7 interrupted by SIGINT/SIGTERM after saving a checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path

import numpy as np

from hackmatrix import xla_options
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import devices
from hackmatrix.training import metrics as M
from hackmatrix.training.config import (ConfigError, TrainConfig, auto_scale_for_batch_size,
                                        device_defaults, device_split_error, validate)
from hackmatrix.training.wandb_sink import MODES, WandbSink, new_run_id, resolve_mode

EXIT_OK = 0
EXIT_FAILURE = 2
EXIT_BAD_ARGS = 3
EXIT_CHECKPOINT = 6
EXIT_INTERRUPTED = 7

ARCHITECTURE_FIELDS = ("hidden_dim", "num_layers")
CONFIG_FIELDS = tuple(field.name for field in dataclasses.fields(TrainConfig))


class UsageError(Exception):
    """Bad command line (exit code 3)."""


class NonFiniteLoss(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would exit 2; bad arguments are exit 3 here
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="train_purejaxrl.py",
        description="Train an action-masked PPO agent on the pure-JAX HackMatrix environment. "
                    "Defaults suit the device: on CPU a few-minute run that visibly learns; on "
                    "GPU/TPU 2048 envs x 128 steps. Exit codes: 0 done, 2 failure, 3 bad "
                    "arguments, 6 checkpoint load failure, 7 interrupted (checkpoint saved).",
        epilog="On CPU the game compiles in a fast-compile mode (~25% quicker to compile, ~10% "
               "slower to run); for a long CPU run set HACKMATRIX_CPU_COMPILE=throughput "
               "(hackmatrix/xla_options.py).")
    run = parser.add_argument_group("run size")
    run.add_argument("--total-timesteps", type=int, help="env steps for the whole run, resumes "
                     "included (CPU default 3,000,000; accelerator 200,000,000)")
    run.add_argument("--num-envs", type=int, help="parallel environments (CPU 256; accelerator 2048)")
    run.add_argument("--num-steps", type=int, help="rollout length per env per update (default 128)")
    run.add_argument("--num-devices", type=int,
                     help="devices that share the envs, each stepping its share and averaging "
                          "gradients (default: on GPU/TPU every local device that splits the envs "
                          "and minibatches evenly; on CPU 1, and N > 1 splits the CPU into N "
                          "devices so that N cores step the game at once); a resume keeps the "
                          "checkpoint's count when it can")

    ppo = parser.add_argument_group("PPO")
    ppo.add_argument("--num-minibatches", type=int, help="minibatches per epoch (default 4; "
                     "auto-scaled for batches above 32,768 unless given)")
    ppo.add_argument("--update-epochs", type=int, help="epochs per update (default 4; auto-scaled "
                     "for batches above 32,768 unless given)")
    ppo.add_argument("--lr", type=float, help="Adam learning rate (default 1e-3)")
    ppo.add_argument("--anneal-lr", action=argparse.BooleanOptionalAction, default=None,
                     help="anneal the learning rate linearly to 0 over --total-timesteps (default on)")
    ppo.add_argument("--gamma", type=float, help="discount (default 0.99)")
    ppo.add_argument("--gae-lambda", type=float, help="GAE lambda (default 0.95)")
    ppo.add_argument("--clip-eps", type=float, help="PPO ratio and value clip (default 0.2)")
    ppo.add_argument("--ent-coef", type=float, help="entropy bonus coefficient (default 0.01)")
    ppo.add_argument("--vf-coef", type=float, help="value loss coefficient (default 0.5)")
    ppo.add_argument("--max-grad-norm", type=float, help="global gradient norm clip (default 0.5)")

    net = parser.add_argument_group("network")
    net.add_argument("--hidden-dim", type=int, help="units per hidden layer (default 256)")
    net.add_argument("--num-layers", type=int, help="hidden layers per actor/critic MLP (default 2)")
    net.add_argument("--seed", type=int, help="random seed (default 0)")

    checkpoints = parser.add_argument_group("checkpoints")
    checkpoints.add_argument("--checkpoint-dir", default="checkpoints",
                             help="parent of run directories (default: checkpoints)")
    checkpoints.add_argument("--run-name", help="run directory name (default: ppo_<timestamp>)")
    checkpoints.add_argument("--save-interval-minutes", type=float, default=10.0,
                             help="save a checkpoint every this many minutes (default 10)")
    checkpoints.add_argument("--save-interval", type=int, metavar="N",
                             help="save every N updates instead of on the timer")
    checkpoints.add_argument("--keep-checkpoints", type=int, default=5, metavar="K",
                             help="keep the newest K checkpoints (default 5; 0 keeps all)")
    checkpoints.add_argument("--resume", nargs="?", const="", metavar="PATH",
                             help="continue a run from a checkpoint .pkl or run directory; "
                                  "without PATH: the newest checkpoint of --run-name, else of the "
                                  "newest run in --checkpoint-dir")
    checkpoints.add_argument("--keep-optimizer", action="store_true",
                             help="on resume with a different --num-envs, keep the Adam state "
                                  "instead of resetting it")

    wandb = parser.add_argument_group("Weights & Biases")
    wandb.add_argument("--wandb", action=argparse.BooleanOptionalAction, default=True,
                       help="log to wandb (default on: online with credentials, else offline)")
    wandb.add_argument("--wandb-project", default="hackmatrix", help="project (default hackmatrix)")
    wandb.add_argument("--wandb-entity", help="entity (team or user; default: your default)")
    wandb.add_argument("--wandb-mode", choices=MODES,
                       help="force a mode (default: online with credentials, else offline)")
    wandb.add_argument("--no-artifact", action="store_true",
                       help="do not upload checkpoints as wandb artifacts")

    output = parser.add_argument_group("output")
    output.add_argument("--log-interval", type=int,
                        help="updates per log line (CPU default 1; accelerator 5)")
    output.add_argument("--verbose", action="store_true",
                        help="print devices, cache directory and tracebacks on errors")
    return parser


# ----------------------------------------------------------------------------- helpers

def enable_compilation_cache() -> str:
    """The persistent compilation cache, so a restart loads compiled code instead of compiling."""
    import jax
    directory = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not directory:
        cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        directory = str(Path(cache_home) / "hackmatrix" / "jax_compilation_cache")
    jax.config.update("jax_compilation_cache_dir", directory)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return directory


def git_commit() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent,
                                capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


def make_env():
    from hackmatrix.game.env import HackMatrixEnv
    env = HackMatrixEnv()
    return env, env.default_params


def _explicit_values(args) -> dict:
    return {name: getattr(args, name) for name in CONFIG_FIELDS if getattr(args, name) is not None}


def _fresh_config(args, backend: str, available_devices: int) -> tuple[TrainConfig, dict]:
    explicit = _explicit_values(args)
    config, scaled = auto_scale_for_batch_size(
        TrainConfig(**{**device_defaults(backend), **explicit}), frozenset(explicit))
    if "num_devices" not in explicit and backend != "cpu":
        config = devices.most_devices_that_fit(config, available_devices)
    return config, scaled


def _resumed_config(args, saved: dict, available_devices: int, say) -> tuple[TrainConfig, dict]:
    explicit = _explicit_values(args)
    saved_config = TrainConfig.from_dict(saved["config"])
    for name in ARCHITECTURE_FIELDS:
        if name in explicit and explicit[name] != getattr(saved_config, name):
            raise ckpt.CheckpointError(
                f"architecture mismatch: --{name.replace('_', '-')} {explicit[name]} but the "
                f"checkpoint has {getattr(saved_config, name)}")
    config, scaled = dataclasses.replace(saved_config, **explicit), {}
    if config.batch_size != saved_config.batch_size:
        # A new batch size: re-derive minibatching from the defaults unless given now.
        defaults = TrainConfig()
        config = dataclasses.replace(config, **{
            name: explicit.get(name, getattr(defaults, name))
            for name in ("num_minibatches", "update_epochs")})
        config, scaled = auto_scale_for_batch_size(config, frozenset(explicit))
    if "num_devices" not in explicit and (
            config.num_devices > available_devices
            or device_split_error(config, config.num_devices) is not None):
        config = devices.most_devices_that_fit(config, available_devices)
    if config.num_devices != saved_config.num_devices:
        say(f"[resume] warning: num_devices {saved_config.num_devices} -> {config.num_devices}: "
            "the run continues, but not bit-identically to one that kept "
            f"{saved_config.num_devices}")
    return config, scaled


def _network_config(config: TrainConfig, obs_dim: int, num_actions: int) -> dict:
    return {"hidden_dim": config.hidden_dim, "num_layers": config.num_layers,
            "obs_dim": obs_dim, "num_actions": num_actions}


def _restore_leaves(template, leaves, what: str):
    import jax
    import jax.numpy as jnp
    template_leaves, treedef = jax.tree.flatten(template)
    if len(leaves) != len(template_leaves) or any(
            np.shape(saved) != np.shape(fresh) for saved, fresh in zip(leaves, template_leaves)):
        raise ckpt.CheckpointError(f"checkpoint {what} does not match this build's layout")
    return jax.tree.unflatten(treedef, [jnp.asarray(saved, dtype=fresh.dtype)
                                        for saved, fresh in zip(leaves, template_leaves)])


def _restore_runner(fresh, saved: dict, config: TrainConfig, keep_optimizer: bool, say):
    """The RunnerState of a checkpoint, built on the structure of a freshly initialised one."""
    import jax
    import jax.numpy as jnp
    saved_num_envs = int(saved["config"]["num_envs"])
    try:
        params = _restore_leaves(fresh.train.params, jax.tree.leaves(saved["params"]), "params")
    except ckpt.CheckpointError:
        raise ckpt.CheckpointError(
            f"architecture mismatch: checkpoint network {saved['network']} does not fit "
            f"hidden_dim={config.hidden_dim} num_layers={config.num_layers}") from None
    if jax.tree.structure(saved["params"]) != jax.tree.structure(fresh.train.params):
        raise ckpt.CheckpointError(f"architecture mismatch: checkpoint network {saved['network']}")
    if saved_num_envs == config.num_envs or keep_optimizer:
        opt_state = _restore_leaves(fresh.train.opt_state, saved["opt_state"], "optimizer state")
    else:
        opt_state = fresh.train.opt_state
        say(f"[resume] warning: num_envs {saved_num_envs} -> {config.num_envs}: optimizer state "
            "reset, because Adam's moment estimates are calibrated to the old batch size "
            "(--keep-optimizer keeps them)")
    train = fresh.train._replace(params=params, opt_state=opt_state,
                                 schedule_timesteps=jnp.float32(saved["schedule_timesteps"]))
    if saved_num_envs == config.num_envs:
        envs = fresh.envs._replace(
            env_state=_restore_leaves(fresh.envs.env_state, saved["env_state"], "env state"),
            obs=_restore_leaves(fresh.envs.obs, saved["env_obs"], "observations"),
            episode_return=jnp.asarray(saved["episode_return"], jnp.float32),
            episode_length=jnp.asarray(saved["episode_length"], jnp.int32))
    else:
        envs = fresh.envs  # the saved env states do not fit the new env count: start new games
    rng = jnp.asarray(saved["rng"], dtype=fresh.rng.dtype)
    return fresh._replace(train=train, envs=envs, rng=rng)


def _without_weak_types(tree):
    """`tree` with weakly typed leaves (from Python scalars) made strong: a fresh runner, a
    restored one (checkpoint leaves are strongly typed) and the chunk's own output then all have
    the one signature `run_chunk` is compiled for. Works on arrays and on ShapeDtypeStructs."""
    import jax

    def strong(leaf):
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
        if getattr(leaf, "weak_type", False):
            return jax.lax.convert_element_type(leaf, leaf.dtype)
        return leaf
    return jax.tree.map(strong, tree)


def _run_init(traced_init, key, cancelled):
    """The fresh RunnerState, or None when `cancelled` was set during init's XLA compile."""
    import jax
    compiled = traced_init.lower().compile()
    return None if cancelled.is_set() else jax.block_until_ready(compiled(key))


def _compile_chunk(lowered_chunk, cancelled):
    """The compiled `run_chunk`, or None when `cancelled` was set before its XLA compile began."""
    return None if cancelled.is_set() else lowered_chunk.compile()


def _wait_through_interrupts(future) -> None:
    """Wait for `future` however often SIGINT arrives. An XLA compile cannot be cut short, and
    the interpreter must not exit while one runs: that crashes it (SIGSEGV), and a SIGINT while
    it joined a still-running worker at exit would print a traceback."""
    while True:
        try:
            future.exception()
            return
        except KeyboardInterrupt:
            continue


def _build_runner_and_chunk(trainer, schedule, key, saved, config, keep_optimizer, say):
    """(runner, compiled run_chunk). `init` is traced for the runner's shapes and `run_chunk` is
    traced and lowered against them; then two worker threads compile both at once (XLA compiles
    outside the GIL), one lowering and running `init` too, while the other compiles the chunk.
    The chunk's tracing comes first, alone: Python work beside an XLA compile gets only part
    of a core on a 2-core machine (measured: 3.2 s beside `init`'s compile, 1.7 s alone), and
    the chunk's compile is the long pole that everything waits for. A checkpoint is checked
    against those shapes before any compile starts, so a bad one fails at once. The compiles
    run off the main thread because there SIGINT would abandon a compile still running (exiting
    then crashes); instead an exception (SIGINT's KeyboardInterrupt included) reaches the caller
    as itself once no compile runs."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import jax
    import jax.numpy as jnp

    init = jax.jit(trainer.init, out_shardings=trainer.runner_sharding,
                   compiler_options=xla_options.compiler_options(run_once=True)).trace(key)
    template = _without_weak_types(init.out_info)
    restored = (None if saved is None
                else _restore_runner(template, saved, config, keep_optimizer, say))
    # A resume takes from `init` only what the checkpoint cannot give (new envs, a reset optimizer).
    needs_init = restored is None or any(
        isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(restored))
    lowered_chunk = trainer.run_chunk.lower(template, jnp.int32(0), schedule)
    cancelled = threading.Event()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="compile")
    jobs = []
    try:
        if needs_init:
            jobs.append(pool.submit(_run_init, init, key, cancelled))
        jobs.append(pool.submit(_compile_chunk, lowered_chunk, cancelled))
        results = [job.result() for job in jobs]  # init's failure first, as when run in turn
    except BaseException:  # e.g. SIGINT: skip what has not begun, wait out what has
        cancelled.set()
        for job in jobs:
            _wait_through_interrupts(job)
        raise
    finally:
        pool.shutdown(wait=False)
    run_chunk, runner = results[-1], restored
    if needs_init:
        runner = results[0] if restored is None else jax.tree.map(
            lambda kept, fresh: fresh if isinstance(kept, jax.ShapeDtypeStruct) else kept,
            restored, results[0])
    return jax.device_put(_without_weak_types(runner), trainer.runner_sharding), run_chunk


def _checkpoint_state(runner, *, config, network, run_name, update, timesteps, wandb_run_id) -> dict:
    import jax
    host = jax.device_get(runner)
    return {
        "format_version": ckpt.FORMAT_VERSION,
        "run_name": run_name,
        "config": config.to_dict(),
        "network": network,
        "params": jax.tree.map(np.asarray, host.train.params),
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
        "saved_at": datetime.now().isoformat(timespec="seconds"),
    }


class _StopRequest:
    """SIGINT/SIGTERM set a flag; the loop saves at the next chunk boundary and exits 7.
    A second signal interrupts at once (the previous checkpoint stays intact)."""

    def __init__(self, say):
        self.signal_name = None
        self.say = say
        self.previous = {}

    def __enter__(self):
        for signum in (signal.SIGINT, signal.SIGTERM):
            self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.signal_name is not None:
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        self.say(f"[signal] {self.signal_name}: saving a checkpoint after the current chunk, "
                 "then exiting (signal again to abort without saving)")

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        return False


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(f"error: bad arguments: {error}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except SystemExit as exit_request:  # --help
        return int(exit_request.code or 0)
    try:
        return _train(args)
    except (UsageError, ConfigError) as error:
        print(f"error: bad arguments: {error}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except ckpt.CheckpointError as error:
        print(f"error: checkpoint: {error}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except KeyboardInterrupt:
        print("error: interrupted outside a chunk boundary; nothing saved (earlier checkpoints "
              "are intact)", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as error:
        if args.verbose:
            traceback.print_exc()
        message = str(error).splitlines()[0] if str(error) else ""
        print(f"error: {type(error).__name__}: {message}", file=sys.stderr)
        return EXIT_FAILURE


def _train(args) -> int:
    session_start = time.perf_counter()
    for name, minimum in (("save_interval_minutes", 0.0), ("keep_checkpoints", 0)):
        if getattr(args, name) < minimum:
            raise UsageError(f"--{name.replace('_', '-')} must be >= {minimum}")
    if args.save_interval is not None and args.save_interval < 1:
        raise UsageError("--save-interval must be >= 1")
    cache_dir = enable_compilation_cache()
    import jax
    import jax.numpy as jnp

    from hackmatrix.training.ppo import make_schedule, make_trainer

    say = print
    saved = resume_path = None
    if args.resume is not None:
        resume_path = ckpt.find_resume_checkpoint(args.resume or None, Path(args.checkpoint_dir),
                                                  args.run_name)
        saved = ckpt.load_checkpoint(resume_path)
    # Before JAX starts its backends, which fixes how many devices the CPU shows.
    devices.request_cpu_devices(args.num_devices or int(
        (saved or {}).get("config", {}).get("num_devices", 1)))
    backend = jax.default_backend()
    available_devices = jax.local_device_count()
    if saved is not None:
        config, scaled = _resumed_config(args, saved, available_devices, say)
        run_name = saved.get("run_name") or resume_path.parent.name
        run_dir = resume_path.parent
        start_update, start_timesteps = int(saved["update"]), int(saved["timesteps"])
    else:
        config, scaled = _fresh_config(args, backend, available_devices)
        run_name = args.run_name or datetime.now().strftime("ppo_%Y%m%d-%H%M%S")
        run_dir = Path(args.checkpoint_dir) / run_name
        if ckpt.list_checkpoints(run_dir):
            raise UsageError(f"{run_dir} already holds checkpoints: add --resume to continue it, "
                             "or choose another --run-name")
        start_update, start_timesteps = 0, 0
    validate(config)
    if (error := devices.missing_devices_error(config.num_devices)) is not None:
        raise ConfigError(error)
    remaining_steps = config.total_timesteps - start_timesteps
    num_updates = start_update + max(0, remaining_steps // config.batch_size)
    scaled_text = ("yes (" + ", ".join(f"{k} {a}->{b}" for k, (a, b) in scaled.items()) + ")"
                   if scaled else "no")
    say(f"[config] run={run_name} device={backend}{xla_options.cpu_compile_label(backend)} "
        f"num_devices={config.num_devices} num_envs={config.num_envs} "
        f"num_steps={config.num_steps} batch_size={config.batch_size} "
        f"minibatch_size={config.minibatch_size} num_minibatches={config.num_minibatches} "
        f"update_epochs={config.update_epochs} gradient_steps={config.gradient_steps_per_update} "
        f"auto_scaled={scaled_text}")
    say(f"[config] updates={start_update}->{num_updates} total_timesteps={config.total_timesteps} "
        f"lr={config.lr} anneal_lr={config.anneal_lr} hidden_dim={config.hidden_dim} "
        f"num_layers={config.num_layers} seed={config.seed} run_dir={run_dir}")
    if args.verbose:
        say(f"[config] devices={jax.devices()} compilation_cache={cache_dir} "
            f"updates_per_chunk={config.updates_per_chunk}")

    env, env_params = make_env()
    obs_dim, num_actions = env.observation_size, env.num_actions
    network = _network_config(config, obs_dim, num_actions)
    if saved is not None and (saved["network"].get("obs_dim"), saved["network"].get("num_actions")) \
            != (obs_dim, num_actions):
        raise ckpt.CheckpointError(f"architecture mismatch: checkpoint network {saved['network']} "
                                   f"but the env has obs_dim={obs_dim} num_actions={num_actions}")
    trainer = make_trainer(config, env, env_params)

    compile_start = time.perf_counter()
    schedule = make_schedule(config)
    runner, run_chunk = _build_runner_and_chunk(trainer, schedule, jax.random.PRNGKey(config.seed),
                                                saved, config, args.keep_optimizer, say)
    compile_seconds = time.perf_counter() - compile_start
    say(f"[compile] {compile_seconds:.1f}s (updates_per_chunk={config.updates_per_chunk})")

    wandb_run_id = (saved or {}).get("wandb_run_id") or new_run_id()
    wandb_config = {**config.to_dict(), "run_name": run_name, "network": network,
                    "git_commit": git_commit(), "batch_size": config.batch_size,
                    "minibatch_size": config.minibatch_size}
    sink = WandbSink(mode=resolve_mode(args.wandb, args.wandb_mode), project=args.wandb_project,
                     entity=args.wandb_entity, run_name=run_name, run_id=wandb_run_id,
                     config=wandb_config, directory=run_dir, resuming=saved is not None,
                     upload_artifacts=not args.no_artifact,
                     online_requested=args.wandb_mode == "online", warn=say)
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics_file = M.MetricsFile(run_dir, start_update if saved is not None else None)

    update, timesteps = start_update, start_timesteps
    saved_paths: list[Path] = []
    last_checkpoint = resume_path

    def save_checkpoint(reason: str) -> Path:
        state = _checkpoint_state(runner, config=config, network=network, run_name=run_name,
                                  update=update, timesteps=timesteps, wandb_run_id=wandb_run_id)
        path = ckpt.save_checkpoint(run_dir, state)
        saved_paths[:] = ckpt.prune_checkpoints(run_dir, args.keep_checkpoints)
        sink.log_checkpoint([path, ckpt.params_path(run_dir, update)], update)
        console.print(f"[checkpoint] update={update} saved {path} ({reason})")
        return path

    def summary(status: str) -> dict:
        session_steps = timesteps - start_timesteps
        return {
            "status": status, "run_name": run_name, "run_dir": str(run_dir),
            "config": config.to_dict(), "network": network, "update": update,
            "timesteps": timesteps, "final_metrics": last_record,
            "wall_time_seconds": time.perf_counter() - session_start,
            "train_seconds": train_seconds, "compile_seconds": compile_seconds,
            "backend": backend,
            "cpu_compile": xla_options.cpu_compile_mode(backend),
            "sps": session_steps / train_seconds if train_seconds > 0 else None,
            "checkpoints": [str(p) for p in saved_paths],
            "final_params": str(run_dir / ckpt.FINAL_PARAMS_NAME) if status == "completed" else None,
            "resumed_from": str(resume_path) if resume_path else None,
            "wandb": {"mode": sink.mode if sink.active else "disabled", "run_id": wandb_run_id,
                      "dir": sink.run_directory},
        }

    console = M.Console(num_updates, start_update)
    window = M.MetricsWindow(config.batch_size)
    last_record: dict = {}
    train_seconds = window_seconds = 0.0
    last_save_time = time.monotonic()
    save_every_seconds = None if args.save_interval else args.save_interval_minutes * 60
    exit_code = EXIT_OK
    try:
        with _StopRequest(console.print) as stop:
            while update < num_updates and stop.signal_name is None:
                next_log = (update // config.log_interval + 1) * config.log_interval
                boundaries = [num_updates, next_log, update + config.updates_per_chunk]
                if args.save_interval:
                    boundaries.append((update // args.save_interval + 1) * args.save_interval)
                num_active = min(boundaries) - update

                chunk_start = time.perf_counter()
                new_runner, chunk_metrics = run_chunk(runner, jnp.int32(num_active), schedule)
                chunk_metrics = jax.device_get(chunk_metrics)
                elapsed = time.perf_counter() - chunk_start
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

                if update % config.log_interval == 0 or update == num_updates:
                    record = {"update": update, "timesteps": timesteps,
                              "train/sps": window.updates * config.batch_size / window_seconds,
                              **window.summarize()}
                    seconds_per_update = train_seconds / (update - start_update)
                    console.print(M.format_line(record, num_updates,
                                                (num_updates - update) * seconds_per_update))
                    for warning in M.health_warnings(record):
                        console.print(warning)
                    metrics_file.write(record)
                    sink.log(record, step=update)
                    last_record = record
                    window.reset()
                    window_seconds = 0.0

                due_by_updates = args.save_interval and update % args.save_interval == 0
                due_by_timer = (save_every_seconds is not None
                                and time.monotonic() - last_save_time >= save_every_seconds)
                if (due_by_updates or due_by_timer) and update < num_updates:
                    last_checkpoint = save_checkpoint("interval")
                    last_save_time = time.monotonic()

            if stop.signal_name is not None:
                last_checkpoint = save_checkpoint(stop.signal_name)
                M.write_summary(run_dir, summary("interrupted"))
                console.print(f"[exit] interrupted by {stop.signal_name}; resume with --resume "
                              f"{run_dir}")
                exit_code = EXIT_INTERRUPTED
                return exit_code
            last_checkpoint = save_checkpoint("final")
            ckpt.save_params(run_dir / ckpt.FINAL_PARAMS_NAME,
                             jax.device_get(runner.train.params))
            final = summary("completed")
            M.write_summary(run_dir, final)
            console.print(f"[done] update={update} timesteps={timesteps} "
                          f"sps={final['sps'] or 0:.0f} compile={compile_seconds:.1f}s "
                          f"wall={M.format_duration(final['wall_time_seconds'])} "
                          f"summary={run_dir / M.SUMMARY_FILE}")
            return EXIT_OK
    except NonFiniteLoss as error:
        kept = f"last good checkpoint: {last_checkpoint}" if last_checkpoint else "no checkpoint saved yet"
        print(f"error: {error}; stopped without saving ({kept})", file=sys.stderr)
        exit_code = EXIT_FAILURE
        return exit_code
    except BaseException:
        exit_code = EXIT_FAILURE
        raise
    finally:
        console.close()
        sink.finish(summary=last_record, exit_code=exit_code)
