"""`train_purejaxrl.py`: flags, the chunk loop, checkpoints, signals and exit codes.

Exit codes: 0 done; 2 any other failure (one line); 3 bad arguments; 6 checkpoint load failure;
7 interrupted by SIGINT/SIGTERM (after saving a checkpoint, once training has begun).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path

import numpy as np

from hackmatrix import compilation_cache, gc_pause, interrupts, stdout_reader, xla_options
from hackmatrix.exit_codes import (
    EXIT_BAD_ARGUMENTS, EXIT_BAD_CHECKPOINT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK)
from hackmatrix.messages import error_line, one_line
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import devices
from hackmatrix.training import metrics as M
from hackmatrix.training.config import ConfigError, TrainConfig, device_defaults, validate
from hackmatrix.training.wandb_sink import MODES, WandbSink, new_run_id, resolve_mode

ARCHITECTURE_FIELDS = ("hidden_dim", "num_layers")
CONFIG_FIELDS = tuple(field.name for field in dataclasses.fields(TrainConfig))


class UsageError(Exception):
    """Bad command line (exit code 3)."""


class NonFiniteLoss(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def __init__(self, **kwargs):
        # Full flag names only: an abbreviation (--checkpoint for --checkpoint-dir) would change
        # meaning, or stop working, whenever a flag is added.
        super().__init__(allow_abbrev=False, **kwargs)

    def error(self, message):  # argparse would exit 2; bad arguments are exit 3 here
        raise UsageError(message)


def _whole_number(text: str) -> int:
    """An integer, also written as 1e6 or 1_000_000 (step counts are)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="train_purejaxrl.py",
        description="Train an action-masked PPO agent on the pure-JAX HackMatrix environment. "
                    "Defaults suit the device: on CPU a few-minute run that visibly learns; on "
                    "GPU/TPU 2048 envs x 128 steps. Exit codes: 0 done, 2 failure, 3 bad "
                    "arguments, 6 checkpoint load failure, 7 interrupted (a checkpoint saved once "
                    "training has begun).",
        epilog="On CPU the game compiles in a fast-compile mode (~25% quicker to compile, ~10% "
               "slower to run); for a long CPU run set HACKMATRIX_CPU_COMPILE=throughput "
               "(hackmatrix/xla_options.py).")
    run = parser.add_argument_group("run size")
    run.add_argument("--total-timesteps", type=_whole_number, help="env steps for the whole run, "
                     "resumes included, e.g. 5e6 (CPU default 3,000,000; accelerator 200,000,000)")
    run.add_argument("--num-envs", type=int, help="parallel environments (CPU 256; accelerator 2048)")
    run.add_argument("--num-steps", type=int, help="rollout length per env per update (default 128)")
    run.add_argument("--num-devices", type=int,
                     help="devices that share the envs, each stepping its share and averaging "
                          "gradients (default: on GPU/TPU the most local devices that split the "
                          "envs and minibatches evenly; on CPU 1, and N > 1 (at most 64) splits "
                          "the CPU into N devices so that N cores step the game at once, but not "
                          "bit-reproducibly); a resume keeps the checkpoint's count when it can")

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
    net.add_argument("--num-layers", type=int,
                     help="hidden layers of the torso shared by the policy and value heads "
                          "(default 2)")
    net.add_argument("--seed", type=int, help="random seed (default 0)")

    checkpoints = parser.add_argument_group("checkpoints")
    checkpoints.add_argument("--checkpoint-dir", default="checkpoints",
                             help="parent of run directories (default: checkpoints)")
    checkpoints.add_argument("--run-name", help="run directory name (default: ppo_<timestamp>)")
    checkpoints.add_argument("--save-interval-minutes", type=float,
                             help="save a checkpoint every this many minutes (default 10; 0: "
                                  "after every chunk of updates)")
    checkpoints.add_argument("--save-interval", type=int, metavar="N",
                             help="save every N updates instead of on the timer")
    checkpoints.add_argument("--keep-checkpoints", type=int, metavar="K",
                             help="keep the newest K checkpoints (default 5; 0 keeps all)")
    checkpoints.add_argument("--resume", nargs="?", const="", metavar="PATH",
                             help="continue a run from a checkpoint .pkl or run directory; "
                                  "without PATH: the newest checkpoint of --run-name, else of the "
                                  "newest run in --checkpoint-dir. The run keeps its config and "
                                  "the options of its checkpoint and wandb groups; flags given "
                                  "now override them (not --hidden-dim/--num-layers/--seed). A "
                                  "new --total-timesteps re-aims the annealed learning rate")
    checkpoints.add_argument("--keep-optimizer", action="store_true",
                             help="on resume with a different batch (--num-envs or --num-steps), "
                                  "keep the Adam state instead of resetting it")

    wandb = parser.add_argument_group("Weights & Biases")
    wandb.add_argument("--wandb", action=argparse.BooleanOptionalAction,
                       help="log to wandb (default on: online with credentials, else offline)")
    wandb.add_argument("--wandb-project", help="project (default hackmatrix)")
    wandb.add_argument("--wandb-entity", help="entity (team or user; default: your default)")
    wandb.add_argument("--wandb-mode", choices=MODES,
                       help="force a mode (default: WANDB_MODE if set, else online when you "
                            "have credentials and the server answers within 2 s, else offline)")
    wandb.add_argument("--no-artifact", action="store_true", default=None,
                       help="do not upload checkpoints as wandb artifacts")
    wandb.add_argument("--artifact", dest="no_artifact", action="store_false", default=None,
                       help="upload checkpoints as artifacts (the default; on a resume, undoes "
                            "the run's --no-artifact)")

    output = parser.add_argument_group("output")
    output.add_argument("--log-interval", type=int,
                        help="updates per log line (CPU default 1; accelerator 5)")
    output.add_argument("--verbose", action="store_true",
                        help="print devices, cache directory and tracebacks on errors")
    return parser


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


def make_env():
    from hackmatrix.game.env import HackMatrixEnv
    env = HackMatrixEnv()
    return env, env.default_params


def _explicit_values(args) -> dict:
    return {name: getattr(args, name) for name in CONFIG_FIELDS if getattr(args, name) is not None}


def _fresh_config(args, backend: str, available_devices: int) -> tuple[TrainConfig, dict, set]:
    """(config, auto-scaled changes, the config fields the user set)."""
    explicit = _explicit_values(args)
    config = TrainConfig(**{**device_defaults(backend), **explicit})
    counts = ([config.num_devices] if "num_devices" in explicit or backend == "cpu"
              else range(available_devices, 0, -1))
    config, scaled = devices.fit_device_count(config, counts, frozenset(explicit))
    return config, scaled, set(explicit)


def _idle_devices_note(config: TrainConfig, explicit: set, backend: str,
                       available_devices: int) -> str | None:
    """What a fresh run's default device count leaves idle on an accelerator, or None."""
    if backend == "cpu" or "num_devices" in explicit or config.num_devices == available_devices:
        return None
    return (f"[config] note: using {config.num_devices} of the {available_devices} {backend} "
            f"devices: the {config.num_envs} envs and their {config.num_minibatches} minibatches "
            "do not split evenly over more (each device steps an equal share of the envs and of "
            "every minibatch; --num-devices sets the count)")


def _resumed_config(args, saved: dict, available_devices: int,
                    say) -> tuple[TrainConfig, dict, set]:
    """(config, auto-scaled changes, the config fields the user set in any session)."""
    explicit = _explicit_values(args)
    explicit.pop("seed", None)  # the run continues from its checkpoint's random state
    # The fields set in earlier sessions (none recorded in checkpoints older than this rule).
    set_before = set(saved.get("explicit_config", ()))
    saved_config = TrainConfig.from_dict(saved["config"])
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
        defaults = TrainConfig()
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


def _network_config(config: TrainConfig, obs_dim: int, num_actions: int) -> dict:
    return {"hidden_dim": config.hidden_dim, "num_layers": config.num_layers,
            "obs_dim": obs_dim, "num_actions": num_actions}


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


def _restore_runner(fresh, saved: dict, config: TrainConfig, keep_optimizer: bool, say):
    """The RunnerState of a checkpoint, built on the structure of a freshly initialised one."""
    import jax
    import jax.numpy as jnp
    saved_num_envs = int(saved["config"]["num_envs"])
    batch_changes = [f"{name} {saved['config'][name]} -> {getattr(config, name)}"
                     for name in ("num_envs", "num_steps")
                     if int(saved["config"][name]) != getattr(config, name)]
    try:
        params = _restore_leaves(fresh.train.params, jax.tree.leaves(saved["params"]), "params")
    except ckpt.CheckpointError:
        recorded = (saved["network"]["hidden_dim"], saved["network"]["num_layers"])
        if recorded == (config.hidden_dim, config.num_layers):
            raise  # the network fits: its params are what is wrong
        raise ckpt.CheckpointError(
            f"architecture mismatch: checkpoint network {saved['network']} does not fit "
            f"hidden_dim={config.hidden_dim} num_layers={config.num_layers}") from None
    if jax.tree.structure(saved["params"]) != jax.tree.structure(fresh.train.params):
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


def _run_init(trainer, key, cancelled):
    """The fresh RunnerState (traced, lowered, compiled once and run), or None when `cancelled`
    was set before its XLA compile ended."""
    import jax
    with gc_pause.paused():
        lowered = jax.jit(trainer.init, out_shardings=trainer.runner_sharding,
                          compiler_options=xla_options.compiler_options(run_once=True)
                          ).trace(key).lower()
    compiled = None if cancelled.is_set() else lowered.compile()
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
    """(runner, compiled run_chunk). `run_chunk` is traced and lowered against the runner's
    shapes (`trainer.init_shapes`, which does not trace the envs' reset); then two worker threads
    run at once, one compiling the chunk (XLA compiles outside the GIL) while the other traces,
    lowers, compiles and runs `init`. The chunk's tracing comes first, alone: Python work beside
    an XLA compile gets only part of a core on a 2-core machine (measured: 3.2 s beside `init`'s
    compile, 1.7 s alone), and the chunk's compile is the long pole that everything waits for;
    `init`'s tracing fits beside its first, single-threaded phase (XLA's HLO passes). A
    checkpoint is checked against those shapes before any compile starts, so a bad one fails at
    once. The compiles run off the main thread because there SIGINT would abandon a compile
    still running (exiting then crashes); instead an exception (SIGINT's KeyboardInterrupt
    included) reaches the caller as itself once no compile runs."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import jax
    import jax.numpy as jnp

    with gc_pause.paused():
        template = _without_weak_types(trainer.init_shapes(key))
    restored = (None if saved is None
                else _restore_runner(template, saved, config, keep_optimizer, say))
    # A resume takes from `init` only what the checkpoint cannot give (new envs, a reset optimizer).
    needs_init = restored is None or any(
        isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(restored))
    with gc_pause.paused():
        lowered_chunk = trainer.run_chunk.lower(template, jnp.int32(0), schedule)
    cancelled = threading.Event()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="compile")
    jobs = []
    try:
        jobs.append(pool.submit(_compile_chunk, lowered_chunk, cancelled))
        if needs_init:
            jobs.append(pool.submit(_run_init, trainer, key, cancelled))
        results = [job.result() for job in reversed(jobs)]  # init's failure first
    except BaseException as error:  # e.g. SIGINT: skip what has not begun, wait out what has
        cancelled.set()
        if isinstance(error, KeyboardInterrupt) and not all(job.done() for job in jobs):
            say("[signal] an XLA compile cannot be cut short: exiting when the one running ends")
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


def _checkpoint_state(runner, *, config, network, run_name, update, timesteps, wandb_run_id,
                      options, explicit_config, metrics_window, forked_from) -> dict:
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
        "forked_from": forked_from,
        "run_options": dict(options),
        "explicit_config": sorted(explicit_config),
        "metrics_window": metrics_window,
        "saved_at": datetime.now().isoformat(timespec="seconds"),
    }


class _Signals:
    """SIGINT and SIGTERM, from set-up to exit (`handle` is the handler, installed by
    `interrupts.signals_raise`).

    During set-up (before the first update) a signal interrupts at once: nothing exists yet that
    a checkpoint would add to; a compile already running is waited out, with a line saying so
    (`_build_runner_and_chunk`, `_wait_through_interrupts`). Once
    training runs (`start_training`), the first signal asks for a checkpoint at the next chunk
    boundary and an exit 7; a second one ends the process at once: with exit 7 if that
    checkpoint is already saved, else with exit 2 and without saving, the earlier checkpoints
    being intact (every file is replaced atomically)."""

    def __init__(self):
        self.signal_name = None
        self.say = None
        self.checkpoint_saved = False

    def start_training(self, say) -> None:
        if self.signal_name is not None:  # a set-up signal whose exception a callback swallowed
            raise interrupts.Interrupted(self.signal_name)
        self.say = say

    def handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.say is None:
            self.signal_name = name
            raise interrupts.Interrupted(name)
        if self.signal_name is None:
            self.signal_name = name
            self.say(f"[signal] {name}: saving a checkpoint after the current chunk, then "
                     "exiting (signal again to exit at once without saving)")
            return
        if self.checkpoint_saved:
            message, code = "the checkpoint is saved; exiting now", EXIT_INTERRUPTED
        else:
            message, code = ("exiting now without saving; the checkpoints saved before are "
                             "intact", EXIT_FAILURE)
        print(f"[signal] {name} again: {message}", file=sys.stderr, flush=True)
        sys.stdout.flush()
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
        return _main(args)


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


# Options of a run that are not part of its TrainConfig (they change no result): a resume keeps
# them from the checkpoint unless given again.
RUN_OPTION_DEFAULTS = {"save_interval_minutes": 10.0, "save_interval": None, "keep_checkpoints": 5,
                       "wandb": True, "wandb_mode": None, "wandb_project": "hackmatrix",
                       "wandb_entity": None, "no_artifact": False}


def run_options(args, saved: dict | None) -> dict:
    """The run's options: given now, else the checkpoint's, else the defaults; validated (a bad
    saved value is a corrupt checkpoint, a bad given one a bad argument)."""
    given = {name: getattr(args, name) for name in RUN_OPTION_DEFAULTS
             if getattr(args, name) is not None}
    if "save_interval_minutes" in given and "save_interval" not in given:
        given["save_interval"] = None  # a timer asked for now replaces a saved update interval
    if given.get("wandb_mode") in ("online", "offline") and "wandb" not in given:
        given["wandb"] = True  # e.g. resuming a --no-wandb run with --wandb-mode offline
    stored = (saved or {}).get("run_options", {})
    if not isinstance(stored, dict):
        raise ckpt.CheckpointError("the checkpoint is corrupt: its run options are not a dict")
    stored = {name: value for name, value in stored.items() if name in RUN_OPTION_DEFAULTS}
    if (problem := _options_problem({**RUN_OPTION_DEFAULTS, **stored})) is not None:
        raise ckpt.CheckpointError(f"the checkpoint is corrupt: its run options say {problem}")
    options = {**RUN_OPTION_DEFAULTS, **stored, **given}
    if (problem := _options_problem(options)) is not None:
        raise UsageError(problem)
    return options


def _options_problem(options: dict) -> str | None:
    """What is wrong with a set of run options, or None."""
    def whole(value):
        return isinstance(value, int) and not isinstance(value, bool)
    minutes = options["save_interval_minutes"]
    # Compared, not math.isfinite: that overflows on a whole number too large for a float.
    if not ((whole(minutes) or isinstance(minutes, float)) and 0 <= minutes < math.inf):
        return f"--save-interval-minutes must be a finite number >= 0, got {minutes!r}"
    if not (whole(options["keep_checkpoints"]) and options["keep_checkpoints"] >= 0):
        return f"--keep-checkpoints must be a whole number >= 0, got {options['keep_checkpoints']!r}"
    interval = options["save_interval"]
    if interval is not None and not (whole(interval) and interval >= 1):
        return f"--save-interval must be a whole number >= 1, got {interval!r}"
    for name in ("wandb", "no_artifact"):
        if not isinstance(options[name], bool):
            return f"{name} must be true or false, got {options[name]!r}"
    if options["wandb_mode"] not in (None, *MODES):
        return f"--wandb-mode must be one of {', '.join(MODES)}, got {options['wandb_mode']!r}"
    for name in ("wandb_project", "wandb_entity"):
        if not (isinstance(options[name], str) or (name == "wandb_entity" and options[name] is None)):
            return f"--{name.replace('_', '-')} must be text, got {options[name]!r}"
    return None


def _run_name_of(run_dir: Path) -> str:
    """A run's name is its directory's (resolved: `--resume .` from inside it names it too)."""
    return run_dir.resolve().name


def _check_resume_flags(args, saved: dict, run_dir: Path, say) -> None:
    if args.run_name and args.run_name != _run_name_of(run_dir):
        raise UsageError(f"--run-name {args.run_name} but the checkpoint belongs to run "
                         f"'{_run_name_of(run_dir)}' ({run_dir}): a resumed run keeps its name "
                         "and directory")
    if args.seed is not None and args.seed != saved["config"].get("seed"):
        say(f"[resume] warning: --seed {args.seed} ignored: the run continues from its "
            f"checkpoint's random state (seed {saved['config'].get('seed')})")


def _schedule_note(saved_config: dict, config: TrainConfig, schedule_timesteps: float) -> str | None:
    """A warning when a resume re-aims the annealed learning rate at a new total."""
    old_total = int(saved_config.get("total_timesteps", config.total_timesteps))
    if not config.anneal_lr or old_total == config.total_timesteps:
        return None
    def rate(total):
        return config.lr * min(max(1.0 - schedule_timesteps / total, 0.0), 1.0)
    return (f"[resume] total_timesteps {old_total} -> {config.total_timesteps}: the learning rate "
            f"now anneals to 0 at {config.total_timesteps} steps, so at this update it is "
            f"{rate(config.total_timesteps):.3g} (it was {rate(old_total):.3g})")


def _prepare_run_dir(run_dir: Path, saved: dict | None, start_update: int,
                     metrics_file: M.MetricsFile, say) -> None:
    """Clears the way for this session's writes without deleting anything it did not write:
    the temp files of a killed save are removed; a resume moves what was saved after its update
    (an abandoned branch, or a stale final_params.npz) and the metrics lines logged after it
    into run_dir/set_aside/; a fresh run moves aside the metrics and summary of an earlier run
    that died before its first checkpoint."""
    ckpt.remove_temp_files(run_dir)
    if saved is not None:
        later = ckpt.files_after(run_dir, start_update)
        final = run_dir / ckpt.FINAL_PARAMS_NAME
        if later == [final] and ckpt.params_files_equal(final, ckpt.params_path(run_dir, start_update)):
            final.unlink()  # the finished run's final params, also saved as params_{update}.npz
            later = []
        kept_lines, later_lines = metrics_file.split_after(start_update)
        if later or later_lines:
            folder = ckpt.set_aside(run_dir, later, f"after_update_{start_update}")
            if later_lines:  # the copy first: an interruption between the two loses nothing
                M.write_lines(folder / M.METRICS_FILE, later_lines)
                metrics_file.rewrite(kept_lines)
            moved = [p.name for p in later] + (
                [f"the {M.METRICS_FILE} lines of {len(later_lines)} later updates"]
                if later_lines else [])
            say(f"[resume] the run had gone past update {start_update}: moved "
                f"{', '.join(moved)} to {folder}")
        return
    leftovers = [run_dir / name for name in (M.METRICS_FILE, M.SUMMARY_FILE)
                 if (run_dir / name).is_file()]
    if leftovers:
        folder = ckpt.set_aside(run_dir, leftovers, "earlier_run")
        say(f"[run] warning: {run_dir} held the metrics of an earlier run that saved no "
            f"checkpoint: moved them to {folder}")


def _lock_run_dir(run_dir: Path, resuming: bool) -> ckpt.RunLock:
    """The run directory's lock, held: one trainer writes a run at a time (UsageError if another
    holds it, or if the directory cannot be written)."""
    lock = ckpt.RunLock(run_dir)
    try:
        acquired = lock.acquire()
    except OSError as error:  # e.g. --checkpoint-dir is a file, or not writable
        raise UsageError(f"cannot write the run directory {run_dir}: "
                         f"{error.strerror or error}") from None
    if not acquired:
        # A resume continues this directory's run: another --run-name is no way out then.
        way_out = "" if resuming else ", or choose another --run-name"
        raise UsageError(f"another trainer (pid {lock.holder()}) is writing {run_dir}; wait for "
                         f"it to end{way_out}")
    return lock


def _finish_a_cut_short_final_save(run_dir: Path, run_name: str, saved: dict, resume_path: Path,
                                   options: dict, say) -> bool:
    """A kill during a run's final save, after checkpoint_{N}.pkl was written but before the rest
    (params_{N}.npz, rotation, final_params.npz, summary.json), leaves a run that has nothing
    left to train, yet is not finished: finish its save from the checkpoint. Nothing happens for
    a finished run, or for a checkpoint that is not the run's newest or did not reach the run's
    own total. Returns whether it finished one."""
    saved_config = TrainConfig.from_dict(saved["config"])
    update, timesteps = int(saved["update"]), int(saved["timesteps"])
    if (saved_config.total_timesteps - timesteps >= saved_config.batch_size
            or ckpt.newest_checkpoint(run_dir) != resume_path):
        return False
    summary_path = run_dir / M.SUMMARY_FILE
    try:
        summary = json.loads(summary_path.read_text())
        finished = summary.get("status") == "completed" and summary.get("update") == update
    except (OSError, ValueError, AttributeError):
        finished = False
    params_file = ckpt.params_path(run_dir, update)
    final = run_dir / ckpt.FINAL_PARAMS_NAME
    # The rotation is part of finishing, not a sign of a kill: a finished run resumed with a
    # smaller --keep-checkpoints is simply finished.
    if finished and params_file.is_file() and final.is_file() and not ckpt.temp_files(run_dir):
        return False
    lock = _lock_run_dir(run_dir, resuming=True)
    try:
        ckpt.remove_temp_files(run_dir)
        for path in (params_file, final):
            if not path.is_file():
                ckpt.save_params(path, saved["params"])
        kept = ckpt.prune_checkpoints(run_dir, options["keep_checkpoints"])
        if not finished:
            lines = M.MetricsFile(run_dir).split_after(update)[0]
            M.write_summary(run_dir, {
                "status": "completed", "run_name": run_name, "run_dir": str(run_dir),
                "config": saved["config"], "network": saved["network"], "update": update,
                "timesteps": timesteps,
                "final_metrics": json.loads(lines[-1]) if lines else {},
                "checkpoints": [str(p) for p in kept], "final_params": str(final),
                "note": "the final save was cut short; a later --resume finished it"})
    finally:
        lock.release()
    say(f"[done] run {run_name}: its final save at update {update} was cut short (killed during "
        f"it); finished it from {resume_path.name} (params, final_params.npz, rotation, "
        "summary): the run is complete (raise --total-timesteps to continue it)")
    return True


def _check_fresh_run_dir(run_dir: Path) -> None:
    """A new run never writes over an earlier run's checkpoints or params files."""
    if ckpt.list_checkpoints(run_dir):
        raise UsageError(f"{run_dir} already holds checkpoints: add --resume to continue it, "
                         "or choose another --run-name")
    held = sorted(entry.name for entry in run_dir.iterdir() if ckpt.is_policy_file(entry.name))
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise UsageError(f"{run_dir} already holds the params of an earlier run ({shown}): "
                         "choose another --run-name, or move them away")


def _check_run_location(args) -> None:
    name = args.run_name
    if name is not None and (not name or name in (".", "..") or "/" in name or os.sep in name):
        raise UsageError(f"--run-name {name!r} must be a plain directory name (no path "
                         "separators, not '.' or '..'): runs live in --checkpoint-dir")
    # An empty value is most often an unset shell variable; '.' says the current directory.
    if not args.checkpoint_dir:
        raise UsageError("--checkpoint-dir is empty: name a directory ('.' for the current one)")


@contextlib.contextmanager
def _naming_the_checkpoint(path: Path):
    """Checkpoint errors found after loading (the arrays against this build's layout, the run
    options, the network against the env) name the file, as the loader's own errors do."""
    try:
        yield
    except ckpt.CheckpointError as error:
        if str(path) in str(error):
            raise
        raise ckpt.CheckpointError(f"{path}: {error}") from None


def _train(args, signals: _Signals, cleanup: contextlib.ExitStack) -> int:
    session_start = time.perf_counter()
    say = print
    _check_run_location(args)
    saved = resume_path = None
    if args.resume is not None:
        resume_path = ckpt.find_resume_checkpoint(args.resume or None, Path(args.checkpoint_dir),
                                                  args.run_name)
        saved = ckpt.load_checkpoint(resume_path)
        cleanup.enter_context(_naming_the_checkpoint(resume_path))
    options = run_options(args, saved)
    cache_dir = compilation_cache.enable(lambda message: say(f"[config] warning: {message}"))
    import jax
    import jax.numpy as jnp

    from hackmatrix.training.ppo import make_schedule, make_trainer

    # Before JAX starts its backends, which fixes how many devices the CPU shows.
    devices.request_cpu_devices(args.num_devices or int(
        (saved or {}).get("config", {}).get("num_devices", 1)))
    try:
        backend = jax.default_backend()
    except Exception as error:  # e.g. JAX_PLATFORMS names a backend whose plugin is missing
        raise RuntimeError(f"JAX could not start a backend (JAX_PLATFORMS="
                           f"{os.environ.get('JAX_PLATFORMS', '')!r}): "
                           f"{error_line(error)}; is the "
                           "matching jax extra installed (README: GPU or TPU)?") from error
    if jax.process_count() > 1:
        raise ConfigError(f"JAX runs {jax.process_count()} processes (several hosts): training "
                          "over several hosts is not supported yet; train on one host")
    available_devices = jax.local_device_count()
    if saved is not None:
        run_dir = resume_path.parent
        _check_resume_flags(args, saved, run_dir, say)
        config, scaled, explicit_config = _resumed_config(args, saved, available_devices, say)
        # A run is its directory. A checkpoint that another run wrote (the directory was copied,
        # to branch it, or renamed) goes on as this directory's run, in a wandb run of its own:
        # resuming the old wandb run would write the branch's updates into the original's.
        run_name = _run_name_of(run_dir)
        forks_now = saved.get("run_name") not in (None, run_name)
        # Where the run branched off, kept in its checkpoints so every later session says it.
        forked_from = ({"run_name": saved["run_name"], "update": int(saved["update"]),
                        "wandb_run_id": saved.get("wandb_run_id")} if forks_now
                       else saved.get("forked_from"))
        if forks_now:
            say(f"[resume] note: this checkpoint was written by run '{saved['run_name']}'; in "
                f"{run_dir} (a copy or a rename) it goes on as run '{run_name}', a run of its "
                f"own in wandb too (run '{saved['run_name']}' is left as it was)")
        start_update, start_timesteps = int(saved["update"]), int(saved["timesteps"])
    else:
        if args.keep_optimizer:
            say("[config] note: --keep-optimizer only applies with --resume: ignored")
        config, scaled, explicit_config = _fresh_config(args, backend, available_devices)
        run_name = args.run_name or datetime.now().strftime("ppo_%Y%m%d-%H%M%S")
        forked_from, forks_now = None, False
        run_dir = Path(args.checkpoint_dir) / run_name
        start_update, start_timesteps = 0, 0
    validate(config)
    if (error := devices.missing_devices_error(config.num_devices)) is not None:
        raise ConfigError(error)
    if saved is None and (note := _idle_devices_note(config, explicit_config, backend,
                                                     available_devices)):
        say(note)
    remaining_steps = config.total_timesteps - start_timesteps
    num_updates = start_update + max(0, remaining_steps // config.batch_size)
    if num_updates == start_update:  # a resume: `validate` gives a fresh run an update
        if not _finish_a_cut_short_final_save(run_dir, run_name, saved, resume_path, options,
                                              say):
            say(f"[done] run {run_name}: {resume_path.name} is at update {start_update} "
                f"({start_timesteps} timesteps): --total-timesteps {config.total_timesteps} "
                f"leaves no update of "
                f"{config.batch_size} steps to run; nothing to do (raise --total-timesteps to "
                "continue)")
        return EXIT_OK
    # Before the [config] lines, which would describe a run that is then refused.
    lock = _lock_run_dir(run_dir, resuming=saved is not None)
    cleanup.callback(lock.release)
    if saved is None:
        _check_fresh_run_dir(run_dir)  # under the lock: no other trainer can write it meanwhile
    end_timesteps = start_timesteps + (num_updates - start_update) * config.batch_size
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
    if backend == "cpu" and config.num_devices > 1:
        say(f"[config] warning: {config.num_devices} CPU devices: runs are not bit-reproducible "
            "(XLA:CPU's multi-device runs vary from run to run with the same seed), so a resumed "
            "run only approximately matches an uninterrupted one; one device is exact "
            "(specs/training.md, Data parallelism)")
    if end_timesteps != config.total_timesteps:
        say(f"[config] note: the run stops at update {num_updates}, {end_timesteps} timesteps: "
            f"whole updates of {config.batch_size} steps only")
    if saved is not None and (note := _schedule_note(saved["config"], config,
                                                     float(saved["schedule_timesteps"]))):
        say(note)
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
    # The log window a checkpoint saved part-filled (saved off a log boundary): its episodes
    # go into the first line after the resume.
    window, window_seconds = M.MetricsWindow(config.batch_size), 0.0
    if saved is not None and saved.get("metrics_window") is not None:
        try:
            window_seconds = window.restore(saved["metrics_window"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError,
                OverflowError) as error:
            raise ckpt.CheckpointError(f"{resume_path} is corrupt: its metrics window "
                                       f"({error})") from None

    compile_start = time.perf_counter()
    schedule = make_schedule(config)
    runner, run_chunk = _build_runner_and_chunk(trainer, schedule, jax.random.PRNGKey(config.seed),
                                                saved, config, args.keep_optimizer, say)
    compile_seconds = time.perf_counter() - compile_start
    say(f"[compile] {compile_seconds:.1f}s (updates_per_chunk={config.updates_per_chunk})")
    # Only now, once set-up has succeeded: a mistaken --resume interrupted while compiling must
    # leave the run directory as it was.
    metrics_file = M.MetricsFile(run_dir)
    _prepare_run_dir(run_dir, saved, start_update, metrics_file, say)

    continues_wandb_run = saved is not None and not forks_now
    wandb_run_id = (saved.get("wandb_run_id") if continues_wandb_run else None) or new_run_id()
    wandb_config = {**config.to_dict(), "run_name": run_name, "network": network,
                    "git_commit": git_commit(), "batch_size": config.batch_size,
                    "minibatch_size": config.minibatch_size}
    if forked_from:
        wandb_config["forked_from"] = forked_from
    sink = WandbSink(mode=resolve_mode(options["wandb"], options["wandb_mode"]),
                     project=options["wandb_project"], entity=options["wandb_entity"],
                     run_name=run_name, run_id=wandb_run_id, config=wandb_config,
                     directory=run_dir, resuming=continues_wandb_run,
                     upload_artifacts=not options["no_artifact"],
                     online_requested=options["wandb_mode"] == "online", warn=say)

    update, timesteps = start_update, start_timesteps
    saved_paths: list[Path] = []
    last_checkpoint, last_saved_update = resume_path, (start_update if saved else None)

    def save_checkpoint(reason: str, session_end: bool = False) -> Path:
        nonlocal last_checkpoint, last_saved_update
        if update != last_saved_update:  # else e.g. a signal right after an interval save
            state = _checkpoint_state(runner, config=config, network=network, run_name=run_name,
                                      update=update, timesteps=timesteps,
                                      wandb_run_id=wandb_run_id, options=options,
                                      explicit_config=explicit_config,
                                      metrics_window=window.state(window_seconds),
                                      forked_from=forked_from)
            path = ckpt.save_checkpoint(run_dir, state)
            saved_paths[:] = ckpt.prune_checkpoints(run_dir, options["keep_checkpoints"])
            console.print(f"[checkpoint] update={update} saved {path} ({reason})")
            last_checkpoint, last_saved_update = path, update
        if last_checkpoint != resume_path:  # that one was logged by the session that saved it
            sink.log_checkpoint([last_checkpoint, ckpt.params_path(run_dir, update)], update,
                                session_end=session_end)
        return last_checkpoint

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
            "forked_from": forked_from,
            "wandb": {"mode": sink.mode if sink.active else "disabled", "run_id": wandb_run_id,
                      "dir": sink.run_directory},
        }

    def log_window() -> None:
        nonlocal last_record, window_seconds
        record = {"update": update, "timesteps": timesteps,
                  "train/sps": window.steps / window_seconds,
                  **window.summarize()}
        # A signal can end a resumed run before its first update, with the checkpoint's
        # part-filled window to log: no pace measured yet, so the ETA is unknown ("?").
        updates_run = update - start_update
        seconds_per_update = train_seconds / updates_run if updates_run else math.inf
        console.print(M.format_line(record, num_updates,
                                    (num_updates - update) * seconds_per_update))
        for warning in M.health_warnings(record):
            console.print(warning)
        metrics_file.write(record)
        sink.log(record)
        last_record = record
        window.reset()
        window_seconds = 0.0

    console = M.Console(num_updates, start_update)
    last_record: dict = {}
    train_seconds = 0.0
    last_save_time = time.monotonic()
    save_interval = options["save_interval"]
    save_every_seconds = None if save_interval else options["save_interval_minutes"] * 60
    exit_code = EXIT_OK
    # Replaced when the session ends; a summary still "running" tells whoever reads it after a
    # SIGKILL that this session never finished (not that an earlier one completed).
    M.write_summary(run_dir, summary("running"))
    signals.start_training(console.print)
    try:
        while update < num_updates and signals.signal_name is None:
            next_log = (update // config.log_interval + 1) * config.log_interval
            boundaries = [num_updates, next_log, update + config.updates_per_chunk]
            if save_interval:
                boundaries.append((update // save_interval + 1) * save_interval)
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
            M.write_summary(run_dir, summary("interrupted"))
            signals.checkpoint_saved = True
            console.print(f"[exit] interrupted by {signals.signal_name}; resume with --resume "
                          f"{run_dir}")
            exit_code = EXIT_INTERRUPTED
            return exit_code
        if signals.signal_name is not None:
            console.print(f"[signal] {signals.signal_name} came during the last chunk: the run "
                          "is complete, so it finishes as usual (exit 0, nothing to resume)")
        save_checkpoint("final", session_end=True)
        ckpt.save_params(run_dir / ckpt.FINAL_PARAMS_NAME, jax.device_get(runner.train.params))
        final = summary("completed")
        M.write_summary(run_dir, final)
        console.print(f"[done] update={update} timesteps={timesteps} "
                      f"sps={final['sps'] or 0:.0f} compile={compile_seconds:.1f}s "
                      f"wall={M.format_duration(final['wall_time_seconds'])} "
                      f"summary={run_dir / M.SUMMARY_FILE}")
        return EXIT_OK
    except NonFiniteLoss as error:
        kept = f"last good checkpoint: {last_checkpoint}" if last_checkpoint else "no checkpoint saved yet"
        M.write_summary(run_dir, {**summary("failed"), "error": str(error)})
        print(f"error: {one_line(str(error))}; stopped without saving ({kept})", file=sys.stderr)
        exit_code = EXIT_FAILURE
        return exit_code
    except BaseException:
        exit_code = EXIT_FAILURE
        raise
    finally:
        console.close()
        sink.finish(summary=last_record, exit_code=exit_code)
