"""The trainer's command line: its flags, the run options kept in checkpoints, and their checks.

Flags that set a `TrainConfig` field default to None, so that a resume and auto-scaling can tell
the values the user gave from the defaults (`explicit_values`). Bad values raise `UsageError`
(exit 3).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training.config import (ALGOS, DTYPES, LR_SCHEDULES, MAX_HIDDEN_WEIGHTS,
                                        MAX_NUM_LAYERS, MAX_TOTAL_TIMESTEPS, TrainConfig)
from hackmatrix.training.wandb_sink import MODES


MAX_EVAL_EPISODES = 65_536
# The network and reward flags' values are checked by `config.validate` (exit 3), which imports
# the game and the network only then: the flags are parsed before JAX is imported.
ARCHITECTURE_FIELDS = ("torso", "shared_torso", "activation", "hidden_dim", "num_layers",
                       "conv_channels", "dtype")


CONFIG_FIELDS = tuple(field.name for field in dataclasses.fields(TrainConfig))


# `--resume` given without PATH (an empty PATH is an error: most often an unset shell variable).
RESUME_NEWEST = True


class UsageError(Exception):
    """Bad command line (exit code 3)."""


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
        description="Train an action-masked PPO or A2C agent on the pure-JAX HackMatrix "
                    "environment, or on a gymnax environment. Defaults suit the device: on CPU a few-minute run that visibly learns; on "
                    "GPU/TPU 2048 envs x 128 steps. Exit codes: 0 done, 2 failure, 3 bad "
                    "arguments, 6 checkpoint load failure, 7 interrupted (a checkpoint saved once "
                    "training has begun).",
        epilog="On CPU the game compiles in a fast-compile mode (~25% quicker to compile, ~10% "
               "slower to run); for a long CPU run set HACKMATRIX_CPU_COMPILE=throughput "
               "(hackmatrix/xla_options.py).")
    task = parser.add_argument_group("environment and algorithm (kept by a resume)")
    task.add_argument("--env", help="hackmatrix (default) or a discrete-action gymnax id such "
                      "as CartPole-v1, Acrobot-v1 or Breakout-MinAtar (needs gymnax: pip "
                      "install -e \"python[gymnax]\"); other envs train a 64x2 mlp by default")
    task.add_argument("--algo", choices=ALGOS, help="ppo (default) or a2c: one gradient step "
                      "per rollout, RMSprop, with Stable-Baselines3's defaults (5-step rollouts, "
                      "lr 7e-4 constant, gae-lambda 1.0)")
    run = parser.add_argument_group("run size")
    run.add_argument("--total-timesteps", type=_whole_number, help="env steps for the whole run, "
                     f"resumes included, e.g. 5e6, at most {MAX_TOTAL_TIMESTEPS:,} (CPU "
                     "default 3,000,000; accelerator 200,000,000)")
    run.add_argument("--num-envs", type=int, help="parallel environments (CPU 256; accelerator 2048)")
    run.add_argument("--num-steps", type=int, help="rollout length per env per update (default 128)")
    run.add_argument("--num-devices", type=int,
                     help="devices that share the envs, each stepping its share and averaging "
                          "gradients (default: on GPU/TPU the most local devices that split the "
                          "envs and minibatches evenly; on CPU 1, and N > 1 (at most 64) splits "
                          "the CPU into N devices so that N cores step the game at once, but not "
                          "bit-reproducibly); a resume keeps the checkpoint's count when it can")
    run.add_argument("--num-seeds", type=int, metavar="K",
                     help="train K independent agents in one program, agent i from seed "
                          "--seed + i, each with the batch and --total-timesteps above; stdout "
                          "shows their mean and std, metrics.jsonl each agent's values too; one "
                          "device; kept by a resume (default 1)")

    ppo = parser.add_argument_group("optimisation (PPO's defaults; --algo a2c sets its own)")
    ppo.add_argument("--num-minibatches", type=int, help="minibatches per epoch (default 4; "
                     "auto-scaled for batches above 32,768 unless given)")
    ppo.add_argument("--update-epochs", type=int, help="epochs per update (default 4; auto-scaled "
                     "for batches above 32,768 unless given)")
    ppo.add_argument("--lr", type=float, help="Adam learning rate (default 1e-3)")
    ppo.add_argument("--lr-schedule", choices=LR_SCHEDULES,
                     help="learning rate over the run: constant, or annealed to 0 at "
                          "--total-timesteps linearly or on a cosine (default linear)")
    ppo.add_argument("--anneal-lr", action=argparse.BooleanOptionalAction, default=None,
                     help="the same as --lr-schedule linear; --no-anneal-lr as constant")
    ppo.add_argument("--gamma", type=float, help="discount (default 0.99)")
    ppo.add_argument("--gae-lambda", type=float, help="GAE lambda (default 0.95)")
    ppo.add_argument("--clip-eps", type=float, help="PPO ratio and value clip (default 0.2)")
    ppo.add_argument("--ent-coef", type=float, help="entropy bonus coefficient at the start "
                     "(default 0.01)")
    ppo.add_argument("--ent-coef-end", type=float, help="entropy coefficient at the end of the "
                     "run, reached linearly (default: --ent-coef, i.e. constant)")
    ppo.add_argument("--vf-coef", type=float, help="value loss coefficient (default 0.5)")
    ppo.add_argument("--clip-value-loss", action=argparse.BooleanOptionalAction, default=None,
                     help="clip the value loss around the rollout's values by --clip-eps "
                          "(default on)")
    ppo.add_argument("--max-grad-norm", type=float, help="global gradient norm clip (default 0.5)")

    net = parser.add_argument_group("network (kept by a resume)")
    net.add_argument("--torso", metavar="{mlp,conv,ego}",
                     help="mlp: dense layers over the flat observation; conv: two 3x3 "
                          "convolutions over the 6x6 grid, then the dense layers; ego: the "
                          "board re-centred on the player, each cell embedded, then the dense "
                          "layers (default ego)")
    net.add_argument("--shared-torso", action=argparse.BooleanOptionalAction, default=None,
                     help="one torso for the policy and value heads (default: separate ones)")
    net.add_argument("--activation", metavar="{tanh,relu,gelu,silu}",
                     help="hidden activation (default tanh)")
    net.add_argument("--hidden-dim", type=int, help="units per hidden layer (default 256)")
    net.add_argument("--num-layers", type=int, help="hidden dense layers per torso: at most "
                     f"{MAX_NUM_LAYERS}, with at most {MAX_HIDDEN_WEIGHTS:,} weights between "
                     "hidden layers in all (default 2)")
    net.add_argument("--conv-channels", type=int,
                     help="channels per cell of the grid torsos: each convolution's (conv), "
                          "the cell embedding's (ego) (default 16)")
    net.add_argument("--dtype", metavar="{" + ",".join(DTYPES) + "}",
                     help="the network's compute dtype: bfloat16 computes the torsos in "
                          "bfloat16 over float32 params (the heads, logits, value, losses and "
                          "optimiser stay float32); meant for accelerators: CPU emulates it, "
                          "slower than float32 (default float32)")

    reward = parser.add_argument_group("training reward (evaluation always reports the game's "
                                       "own outcomes)")
    reward.add_argument("--reward-weights", metavar="NAME=W,...",
                        help="weights of the rules' reward components (step_penalty, stage, "
                             "score, kills, dataSiphon, distance, victory, death, resourceGain, "
                             "resourceHolding, damagePenalty, hpRecovery, siphonQuality, "
                             "programWaste, siphonDeathPenalty); unnamed ones keep 1")
    reward.add_argument("--distance-shaping", metavar="{rules,potential,none}",
                        help="rules: 0.05 per cell closer to the exit, nothing for a step away "
                             "(farmable by pacing); potential: 0.05 x the signed change, so "
                             "pacing earns nothing; none (default: potential)")
    reward.add_argument("--program-potential", type=float, metavar="R",
                        help="reward per program owned, paid when one is acquired (and taken "
                             "back if UNDO removes it); the rules pay nothing (default 0)")
    reward.add_argument("--start-programs", type=int, metavar="K",
                        help="curriculum: new training games own K random programs (0-23; "
                             "default 0, the rules' start); evaluation plays the rules' games")
    reward.add_argument("--start-programs-prob", type=float, metavar="P",
                        help="the share of new training games that --start-programs applies to "
                             "(default 0.5)")
    net.add_argument("--seed", type=int, help="random seed (default 0)")

    checkpoints = parser.add_argument_group("checkpoints")
    checkpoints.add_argument("--checkpoint-dir", default="checkpoints",
                             help="parent of run directories (default: checkpoints)")
    checkpoints.add_argument("--run-name", help="run directory name: printable, not blank, "
                                                 "no '/' (default: ppo_<timestamp>)")
    checkpoints.add_argument("--save-interval-minutes", type=float,
                             help="save a checkpoint every this many minutes (default 10; 0: "
                                  "after every chunk of updates)")
    checkpoints.add_argument("--save-interval", type=int, metavar="N",
                             help="save every N updates instead of on the timer")
    checkpoints.add_argument("--keep-checkpoints", type=int, metavar="K",
                             help="keep the newest K checkpoints (default 5; 0 keeps all)")
    checkpoints.add_argument("--resume", nargs="?", const=RESUME_NEWEST, metavar="PATH",
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

    evaluation = parser.add_argument_group("evaluation during training")
    evaluation.add_argument("--eval-interval", type=int, metavar="N",
                            help="every N updates (and at the end), play --eval-episodes games "
                                 "on fixed boards, sampled and greedy, log eval/* and keep the "
                                 "best params by sampled mean stage as best_params.npz "
                                 "(default 0: off)")
    evaluation.add_argument("--eval-episodes", type=int, metavar="N",
                            help=f"games per evaluation (default 256, at most {MAX_EVAL_EPISODES})")

    output = parser.add_argument_group("output")
    output.add_argument("--log-interval", type=int,
                        help="updates per log line (CPU default 1; accelerator 5)")
    output.add_argument("--tensorboard", action=argparse.BooleanOptionalAction,
                        help="also write the metrics.jsonl scalars as TensorBoard event files "
                             "into RUN_DIR/tensorboard, step = timesteps (default off; a resume "
                             "keeps the run's choice)")
    output.add_argument("--verbose", action="store_true",
                        help="print devices, cache directory and tracebacks on errors")
    return parser


def explicit_values(args) -> dict:
    """The config fields given on the command line. `--anneal-lr` names an lr schedule, and a
    lone `--ent-coef` sets a constant coefficient."""
    values = {name: getattr(args, name) for name in CONFIG_FIELDS
              if getattr(args, name, None) is not None}
    anneal = getattr(args, "anneal_lr", None)
    if anneal is not None:
        if "lr_schedule" in values and (values["lr_schedule"] == "constant") == anneal:
            raise UsageError(f"--{'' if anneal else 'no-'}anneal-lr contradicts --lr-schedule "
                             f"{values['lr_schedule']}")
        values.setdefault("lr_schedule", "linear" if anneal else "constant")
    if "ent_coef" in values:
        values.setdefault("ent_coef_end", values["ent_coef"])
    return values


# Options of a run that are not part of its TrainConfig (they change no result): a resume keeps
# them from the checkpoint unless given again.
RUN_OPTION_DEFAULTS = {"save_interval_minutes": 10.0, "save_interval": None, "keep_checkpoints": 5,
                       "wandb": True, "wandb_mode": None, "wandb_project": "hackmatrix",
                       "wandb_entity": None, "no_artifact": False, "eval_interval": 0,
                       "eval_episodes": 256, "tensorboard": False}


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
    if not (whole(options["eval_interval"]) and options["eval_interval"] >= 0):
        return f"--eval-interval must be a whole number >= 0, got {options['eval_interval']!r}"
    episodes = options["eval_episodes"]
    if not (whole(episodes) and 1 <= episodes <= MAX_EVAL_EPISODES):
        return f"--eval-episodes must be a whole number in [1, {MAX_EVAL_EPISODES}], got {episodes!r}"
    interval = options["save_interval"]
    if interval is not None and not (whole(interval) and interval >= 1):
        return f"--save-interval must be a whole number >= 1, got {interval!r}"
    for name in ("wandb", "no_artifact", "tensorboard"):
        if not isinstance(options[name], bool):
            return f"{name} must be true or false, got {options[name]!r}"
    if options["wandb_mode"] not in (None, *MODES):
        return f"--wandb-mode must be one of {', '.join(MODES)}, got {options['wandb_mode']!r}"
    for name in ("wandb_project", "wandb_entity"):
        if not (isinstance(options[name], str) or (name == "wandb_entity" and options[name] is None)):
            return f"--{name.replace('_', '-')} must be text, got {options[name]!r}"
    return None


def run_name_problem(name: str) -> str | None:
    """Why `name` cannot name a run, or None. Log lines, summary.json and wandb show the name
    within one line: it must not hold line breaks, tabs or other unprintable characters, nor
    be blank."""
    if not name.isprintable():
        return "holds a line break, tab or other unprintable character"
    if not name.strip():
        return "is blank"
    return None


def check_run_location(args) -> None:
    name = args.run_name
    if name is not None and (not name or name in (".", "..") or "/" in name or os.sep in name):
        raise UsageError(f"--run-name {name!r} must be a plain directory name (no path "
                         "separators, not '.' or '..'): runs live in --checkpoint-dir")
    if name is not None and (problem := run_name_problem(name)) is not None:
        raise UsageError(f"--run-name {name!r} {problem}: a run's name shows within one log "
                         "line")
    # An empty value is most often an unset shell variable; '.' says the current directory.
    if not args.checkpoint_dir:
        raise UsageError("--checkpoint-dir is empty: name a directory ('.' for the current one)")
    if args.resume == "":
        raise UsageError("--resume PATH is empty: name a checkpoint or run directory, or give "
                         "--resume alone for the newest run")
