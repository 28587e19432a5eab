"""Seeded fuzz of the trainer's command line: whatever the arguments, `cli.main(argv)` either
reaches its compile with the config the docs promise, or stops before any work with a documented
exit code and one line on stderr, never a traceback, writing nothing it should not.

The flags come from the parser (`build_parser()._actions`), so a new flag is fuzzed too, and the
oracle must know its rule (`test_every_flag_is_kebab_case_documented_and_known_to_the_oracle`).
Values, by the flag's type: valid, zero, negative, huge (10**30 and a 401-digit number), a float
for an int and an int for a float, NaN/inf, 1e39 (beyond float32), seeds at 2**32 - 1 and 2**32,
empty, spaces, line breaks, unicode, an undecodable byte (as Python passes one on), a path
component over 255 bytes, path separators, `.`, `..`, paths to runs, a checkpoint, a params
file, a text file, a missing file, a place that cannot be written (/proc), bad --wandb-mode
choices. Spellings: whole, a unique or an ambiguous prefix (refused: allow_abbrev is off),
`--flag=value`, repeated (the last wins), the value missing (last on the line), a value given
to a switch; unknown and snake_case flags, a stray word, `--`; `--help` and `-h`. The cases
(Random(SEED)):
  - sweeps: every flag with every value, alone on a valid base: a fresh auto-scaled run on two
    devices, and `--resume` of a saved run (each rule then meets its own case);
  - NUM_CASES random command lines: a run shape (tiny, auto-scaled, the spec's odd batches),
    often `--resume [PATH]`, and a few flags in any order.
Every case runs in a copy of a workspace (the cwd, so the default --checkpoint-dir is in it)
holding two runs with synthetic checkpoints (written by `checkpoint.save_checkpoint`, valid to
`load_checkpoint`; their arrays are never read, the run stops first), a run with params only, an
empty run directory and text files. The compiles (`startup.build_runner_and_chunk`) are replaced by
a stop, ReachedCompile, that records the config; `cli.run_options` is spied for the run options;
`make_env` is memoised. Some 1,900 cases take about 8 s on the 2-core CPU.

The oracle is written from README ("Exit codes"), specs/training.md ("Resume", "Auto-scaling",
"Defaults" and its validation paragraph) and --help, not from arguments.py or cli.py:
  - any argparse error (unknown, ambiguous, missing or badly typed values, a value given to a
    switch) -> 3; with --help first -> 0 (help on stdout) unless a prefix is ambiguous;
  - else every documented rule the case breaks adds its exit code (3 bad argument, 6 checkpoint:
    which one is reported first is not documented, so any of them is accepted), and when one rule
    alone is broken the message must name it ("--gamma", "divisible", "--run-name", ...);
  - else a resume with no whole update left -> 0, "nothing to do", no file touched;
  - else the run reaches the compile with exactly the documented CPU defaults, the flags given
    (on resume: over the checkpoint's config and run options; --seed ignored), auto-scaling
    only of what no session set, and the run directory it names.
For every case: no exception escapes; an error is one line on stderr, `error: bad arguments:`
(3) or `error: checkpoint:` (6); a run that reaches the compile prints nothing on stderr and no
warning; nothing is written but, for a run that reaches the compile, its run directory (with
missing parents) and `.lock`, or a `.lock` in a run directory that exists (README lists it).

Inputs the fuzz found mishandled once (a huge env count, a name too long for the system on
resume, line breaks in a quoted path or name, values beyond float32) have tests of their own at
the end.
"""


import argparse
import contextlib
import dataclasses
import functools
import io
import math
import os
import random
import re
import shutil
import signal
import stat
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli, params_files, startup
from hackmatrix.training.arguments import RESUME_NEWEST
from hackmatrix.training.config import TrainConfig
from hackmatrix.training.run_lock import LOCK_NAME

SEED = 20260527
NUM_CASES = 600
CASE_TIME_LIMIT_S = 10

# ----------------------------------------------------------------------------- the documented rules

# specs/training.md "Defaults" (the CPU column and "Shared"); the tests run on CPU.
CPU_DEFAULTS = {
    "env": "hackmatrix", "algo": "ppo", "total_timesteps": 3_000_000, "num_envs": 256, "num_steps": 128, "num_minibatches": 4,
    "update_epochs": 4, "lr": 1e-3, "lr_schedule": "linear", "gamma": 0.99, "gae_lambda": 0.95,
    "clip_eps": 0.2, "ent_coef": 0.01, "ent_coef_end": 0.01, "vf_coef": 0.5,
    "clip_value_loss": True, "max_grad_norm": 0.5, "torso": "ego", "shared_torso": False,
    "activation": "tanh", "hidden_dim": 256, "num_layers": 2, "conv_channels": 16,
    "reward_weights": "", "distance_shaping": "potential", "program_potential": 0.0,
    "start_programs": 0, "start_programs_prob": 0.5, "seed": 0,
    "log_interval": 1, "num_devices": 1, "dtype": "float32", "num_seeds": 1}
# The fields of a checkpoint written before the network, schedule and reward options, and what
# --help says such a run trained with ("legacy" values: a shared tanh MLP, the rules' reward,
# a learning rate annealed linearly or held constant by its anneal_lr, a constant entropy
# coefficient). num_devices came later still: absent, the run had one device. Such a config's
# conv_channels (which an MLP does not use) is today's default.
OLD_FIELDS = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "lr",
              "anneal_lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef",
              "max_grad_norm", "hidden_dim", "num_layers", "seed", "log_interval", "num_devices")


def legacy_filled(stored: dict) -> dict:
    """The config a checkpoint's stored config stands for."""
    if "lr_schedule" in stored:
        return {**CPU_DEFAULTS, **stored}
    filled = {**CPU_DEFAULTS, "num_devices": 1, "ent_coef_end": stored["ent_coef"],
              "clip_value_loss": True, "torso": "mlp", "shared_torso": True,
              "activation": "tanh", "reward_weights": "", "distance_shaping": "rules",
              "program_potential": 0.0, "start_programs": 0, "start_programs_prob": 0.5,
              "lr_schedule": "linear" if stored["anneal_lr"] else "constant"}
    return {**filled, **{k: v for k, v in stored.items() if k != "anneal_lr"}}


# --help and specs/training.md "Resume": the run options that are not config.
OPTION_DEFAULTS = {"save_interval_minutes": 10.0, "save_interval": None, "keep_checkpoints": 5,
                   "wandb": True, "wandb_mode": None, "wandb_project": "hackmatrix",
                   "wandb_entity": None, "no_artifact": False, "eval_interval": 0,
                   "eval_episodes": 256, "tensorboard": False}
MAX_EVAL_EPISODES = 65_536  # --help
# What a session is, besides its config and options.
SESSION_DESTS = {"help", "checkpoint_dir", "run_name", "resume", "keep_optimizer", "verbose"}
# Flags that spell a config field another way: --[no-]anneal-lr is --lr-schedule linear|constant.
ALIAS_DESTS = {"anneal_lr"}
# The validation paragraph of specs/training.md.
COUNTS = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs",
          "hidden_dim", "num_layers", "log_interval", "num_devices", "conv_channels", "num_seeds")
UNIT_INTERVAL = ("gamma", "gae_lambda", "start_programs_prob")
# --help: how many of the game's 23 programs a curriculum game starts with.
PROGRAM_COUNTS = ("start_programs",)
FINITE_NON_NEGATIVE = ("lr", "ent_coef", "ent_coef_end", "vf_coef")
FINITE_POSITIVE = ("clip_eps", "max_grad_norm")
FINITE = ("program_potential",)
# Fields whose every value the parser checks (choices, switches) or that have rules of their own.
CHOSEN = ("env", "algo", "dtype", "lr_schedule", "clip_value_loss", "torso", "shared_torso", "activation",
          "distance_shaping")
# Flags whose other values change the defaults and rules of a run as a whole (another env's
# network, A2C's rollout): tests/training/test_cli_envs.py checks them; the fuzz leaves them out.
TESTED_APART = {"env", "algo"}
# --help's {a,b,...} metavars: values that the parser takes as text and validation checks (exit
# 3, the message naming the option: the flag, or the reward options' own words).
LISTED_VALUES = {"torso": (("mlp", "conv", "ego"), "--torso"),
                 "activation": (("tanh", "relu", "gelu", "silu"), "--activation"),
                 "distance_shaping": (("rules", "potential", "none"), "distance shaping"),
                 "dtype": (("float32", "bfloat16"), "--dtype")}
# --help: "kept by a resume" (a resume that gives another value is an architecture mismatch).
ARCHITECTURE = ("torso", "shared_torso", "activation", "hidden_dim", "num_layers",
                "conv_channels", "dtype")
# game/reward_options.py's docstring and --help: the components a weight list may name.
REWARD_COMPONENTS = ("step_penalty", "stage", "score", "kills", "dataSiphon", "distance",
                     "victory", "death", "resourceGain", "resourceHolding", "damagePenalty",
                     "hpRecovery", "siphonQuality", "programWaste", "siphonDeathPenalty")
MAX_SEED = 2**32 - 1
# specs/training.md "Auto-scaling".
REFERENCE_BATCH, TARGET_MINIBATCH, MAX_GRADIENT_STEPS = 32_768, 8192, 128
CHECKPOINT_FILE = re.compile(r"^checkpoint_\d+\.pkl$")
PARAMS_FILE = re.compile(r"^(params_\d+|final_params)\.npz$")
TIMESTAMPED_RUN = re.compile(r"^ppo_\d{8}-\d{6}$")
MAX_NAME_BYTES = 255  # a path component longer than this cannot exist (Linux)
FLOAT32_MAX = float(np.finfo(np.float32).max)
INT32_MAX = 2**31 - 1
# --help: what would exhaust memory or time.
UPPER_BOUNDS = {"total_timesteps": 10**12, "num_layers": 64}
MAX_HIDDEN_WEIGHTS = 2**28
OBSERVATION_BYTES = 1545 * 4  # one HackMatrix observation, float32
HOST_MEMORY_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
# argparse reads a token that starts with '-' as a value only if it looks like a negative number.
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
UNWRITABLE = "/proc/hackmatrix-flags-fuzz"


def flag_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


# ----------------------------------------------------------------------------- flags and values

@dataclasses.dataclass(frozen=True)
class Flag:
    action: argparse.Action
    option: str  # one of the action's spellings

    @property
    def dest(self) -> str:
        return self.action.dest

    @property
    def takes_value(self) -> bool:
        return self.action.nargs != 0


def parser_flags() -> list[Flag]:
    return [Flag(action, option) for action in cli.build_parser()._actions
            for option in action.option_strings]


def read_whole_number(text: str) -> int:
    """--total-timesteps: "e.g. 5e6" (--help) or 5_000_000 (README)."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
    if not value.is_integer():
        raise ValueError(text)
    return int(value)


READERS = {"int": int, "float": float, "_whole_number": read_whole_number}


def read(action: argparse.Action, text: str):
    """The value `text` gives the flag, or ValueError."""
    if action.choices is not None and text not in action.choices:
        raise ValueError(text)
    return text if action.type is None else READERS[action.type.__name__](text)


def switch_value(flag: Flag):
    if isinstance(flag.action, argparse.BooleanOptionalAction):
        return not flag.option.startswith("--no-")
    return flag.action.const


HUGE, HUGER = str(10**30), "1" + "0" * 400
INT_TEXTS = (["1", "2", "4", "8", "16", "128", "1000"],
             ["0", "-1", "-8", HUGE, HUGER, "2.5", "8.0", "1e3", "nan", "inf", "", " 8 ", "1_6",
              "ten", "\u0668", "0x10", str(MAX_SEED), str(MAX_SEED + 1)])
WHOLE_TEXTS = (["128", "256", "512", "1024", "1e3", "1_024", "2.56e2", "1e6", "2e8"],
               INT_TEXTS[1] + ["1e30", "1e400", "-1e3", "1e39"])
FLOAT_TEXTS = (["0.5", "0.1", "0.99", "1", "1e-3", "0.9"],
               ["0", "-0.0", "-0.5", "1e30", "1e39", "nan", "inf", "-inf", "", "abc", "1.5",
                " 0.5 ", "2"])
RUN_NAMES = ["run_a", "run_b", "params_only", "empty_run", "new_run"]
PATHS = ["checkpoints", "{ws}/checkpoints", "checkpoints/run_a", "checkpoints/run_b",
         "checkpoints/run_a/checkpoint_2.pkl", "checkpoints/run_a/params_2.npz",
         "checkpoints/params_only", "checkpoints/empty_run", "checkpoints/notes.txt", "notes.txt",
         "missing.pkl", "new_parent/deeper", "../beside", UNWRITABLE]
ODD_TEXTS = ["", " ", "two words", "\u00fc\u4e2d\U0001f642", "line\nbreak", "cr\rhere",
             "tab\there", "a/b", ".", "..", "x" * 300, "-dash", "=eq", "\udcff"]
BAD_CHOICES = ["ONLINE", "", "dryrun"]
TEXT_POOLS = {"int": INT_TEXTS, "_whole_number": WHOLE_TEXTS, "float": FLOAT_TEXTS}
# Run shapes that are valid as they stand, so that the fuzzed flags around them decide the
# outcome: a tiny one, two above the auto-scaling reference (1000 x 100 is the spec's odd batch),
# the spec's 331 x 127 that no minibatch count splits (exit 3 unless --num-minibatches 1), one
# below the reference that 4 minibatches do not split (not auto-scaled: exit 3), and a total
# that the saved runs have reached (a resume then has nothing to do).
RUN_SHAPES = [
    {"--num-envs": "8", "--num-steps": "16", "--total-timesteps": "1024", "--hidden-dim": "32"},
    {"--num-envs": "1024", "--num-steps": "128", "--total-timesteps": "1e6"},
    {"--num-envs": "1000", "--num-steps": "100", "--total-timesteps": "5_000_000"},
    {"--num-envs": "331", "--num-steps": "127", "--total-timesteps": "1e6"},
    {"--num-envs": "6", "--num-steps": "5003", "--total-timesteps": "1e6"},
    {"--total-timesteps": "256"},
]
STRAY = [["--bogus"], ["--num_envs", "8"], ["--Num-Envs", "8"], ["-x"]]


WEIGHT_TEXTS = (["", "kills=2", "score=0.5,kills=0", "distance=0", " stage = 1e-3 , victory=0 ,",
                 "siphonDeathPenalty=-1"],
                ["kills", "bogus=1", "Kills=1", "=1", "kills=x", "kills=", "kills=inf",
                 "kills=nan", "kills=1e400", "kills=1,kills=2", "distance=2", ",", " ", "-dash",
                 "kills=1_0"])


def listed_values(action: argparse.Action) -> list[str] | None:
    """The values a `{a,b,...}` metavar lists, or None."""
    match = re.fullmatch(r"\{([^{}]+)\}", action.metavar or "")
    return match.group(1).split(",") if match else None


def text_pools(action: argparse.Action) -> tuple[list[str], list[str]]:
    """(valid-looking texts, odd ones) for a flag that takes a value."""
    if action.dest == "reward_weights":
        return WEIGHT_TEXTS
    listed = listed_values(action)
    if listed is not None:
        return listed, BAD_CHOICES + [listed[0].upper(), f" {listed[0]} ", "run_a", "line\nbreak"]
    if action.choices is not None:
        return list(action.choices), BAD_CHOICES
    if action.type is None:
        return RUN_NAMES + PATHS, ODD_TEXTS
    return TEXT_POOLS[action.type.__name__]


@dataclasses.dataclass
class Group:
    """Consecutive tokens of one flag (or of junk), with what the parser must make of them."""
    tokens: list[str]
    flag: Flag | None = None
    value: object = None
    error: str | None = None  # a parse error: what its message names
    ambiguous: bool = False

    @property
    def dest(self) -> str | None:
        return self.flag.dest if self.flag else None


class Fuzzer:
    def __init__(self, rng: random.Random, workspace: Path):
        self.rng, self.workspace = rng, workspace
        self.options = {flag.option for flag in parser_flags()}
        self.flags = [flag for flag in parser_flags() if flag.dest not in TESTED_APART]
        self.allow_abbrev = cli.build_parser().allow_abbrev

    def text(self, action) -> str:
        valid, odd = text_pools(action)
        return self.rng.choice(valid if self.rng.random() < 0.6 else odd)

    def spelling(self, flag: Flag, whole: bool) -> tuple[str, str | None, bool]:
        """(how the flag is written, the parse error that causes or None, ambiguous)."""
        prefixes = [flag.option[:n] for n in range(3, len(flag.option))
                    if flag.option.startswith("--") and flag.option[:n] not in self.options]
        if whole or not prefixes or self.rng.random() < 0.9:
            return flag.option, None, False
        prefix = self.rng.choice(prefixes)
        matches = [option for option in self.options if option.startswith(prefix)]
        if not self.allow_abbrev:
            return prefix, "unrecognized arguments", False
        if len(matches) > 1:
            return prefix, "ambiguous option", True
        return prefix, None, False

    def with_value(self, spelling: str, text: str) -> list[str]:
        dash = text.startswith("-") and not NEGATIVE_NUMBER.match(text)
        return [f"{spelling}={text}"] if dash or self.rng.random() < 0.2 else [spelling, text]

    def group(self, flag: Flag, text: str | None = None, valueless: bool = False,
              whole: bool = False) -> Group:
        """`flag` with a value (`text`, else a random one), or without one if `valueless`;
        spelled whole if `whole`, else now and then abbreviated."""
        spelling, error, ambiguous = self.spelling(flag, whole)
        action, named = flag.action, "argument " + flag.action.option_strings[0]
        group = Group([spelling], flag, error=error, ambiguous=ambiguous)
        if not flag.takes_value:
            group.value = switch_value(flag)
            if flag.dest != "help" and not whole and self.rng.random() < 0.1:
                group.tokens = [f"{spelling}=1"]
                group.error = error or "ignored explicit argument"
        elif valueless:
            group.value = action.const
            if action.nargs is None:
                group.error = error or named
        else:
            text = (self.text(action) if text is None else text).replace("{ws}",
                                                                         str(self.workspace))
            group.tokens = self.with_value(spelling, text)
            try:
                group.value = read(action, text)
            except ValueError:
                group.error = error or named
        return group

    def random_group(self) -> Group:
        return self.group(self.rng.choice([flag for flag in self.flags if flag.dest != "help"]))

    def sweep(self, base: list[tuple[str, str | None]]) -> list[list[Group]]:
        """`base` ((option, text) pairs), then every flag with every text of its pools, or as a
        switch with and without `=1`: one case each."""
        by_option = {flag.option: flag for flag in self.flags}
        cases = []
        for flag in self.flags:
            if flag.dest == "help":
                continue
            if not flag.takes_value:
                variants = [self.group(flag, whole=True), Group([f"{flag.option}=1"], flag,
                                                               error="ignored explicit argument")]
            else:
                valid, odd = text_pools(flag.action)
                variants = [self.group(flag, text, whole=True) for text in valid + odd]
            cases += [[*(self.group(by_option[option], text, valueless=text is None, whole=True)
                         for option, text in base), variant] for variant in variants]
        return cases

    def case(self) -> list[Group]:
        rng, by_option = self.rng, {flag.option: flag for flag in self.flags}
        kind = rng.choices(["fresh", "resume", "anything", "help"], [45, 35, 15, 5])[0]
        groups = []
        if kind == "help":
            groups.append(self.group(by_option[rng.choice(["--help", "-h"])]))
        if kind == "fresh" or (kind == "resume" and rng.random() < 0.3):
            groups += [self.group(by_option[option], text)
                       for option, text in rng.choice(RUN_SHAPES).items()]
        if kind == "resume":
            resume = by_option["--resume"]
            groups.append(self.group(resume, valueless=True) if rng.random() < 0.5
                          else self.group(resume, self.text(resume.action)))
        groups += [self.random_group() for _ in range(rng.randint(0, 6 if kind == "anything"
                                                                  else 3))]
        given = [group for group in groups if group.flag and group.flag.takes_value]
        if given and rng.random() < 0.2:  # a flag given twice: the last one wins
            groups.append(self.group(rng.choice(given).flag))
        rng.shuffle(groups)
        if kind == "help":  # first, so that no conversion error comes before it
            groups.sort(key=lambda group: group.dest != "help")
        if rng.random() < 0.1:
            groups.insert(rng.randint(0, len(groups)), Group(rng.choice(STRAY),
                                                             error="unrecognized arguments"))
        ending = rng.random()
        if ending < 0.05:  # a stray word first: after a `--resume` it would be its PATH
            groups.insert(0, Group(["stray"], error="unrecognized arguments"))
        elif ending < 0.1:
            groups.append(Group(["--"], error="unrecognized arguments"))
        elif ending < 0.2:
            flag = rng.choice([flag for flag in self.flags if flag.dest != "help"])
            groups.append(self.group(flag, valueless=True))
        return groups


# ----------------------------------------------------------------------------- the workspace

@dataclasses.dataclass(frozen=True)
class SavedRun:
    """A run directory of the workspace (under checkpoints/) with one synthetic checkpoint."""
    directory: str
    saved_name: str  # the run name in the checkpoint (another: the directory is a copy)
    update: int
    stored_config: dict  # as the checkpoint holds it (an old one lacks the newer fields)
    explicit_config: tuple[str, ...]
    run_options: dict | None  # None: saved before run options were kept
    mtime_ns: int

    @property
    def config(self) -> dict:
        """The config the run trained with."""
        return legacy_filled(self.stored_config)

    @property
    def network(self) -> dict:
        """The checkpoint's network record, without the env's sizes; an old one has sizes only."""
        config = self.stored_config
        if "lr_schedule" not in config:
            return {"hidden_dim": config["hidden_dim"], "num_layers": config["num_layers"]}
        return {"torso": config["torso"], "shared": config["shared_torso"],
                "activation": config["activation"], "hidden_dim": config["hidden_dim"],
                "num_layers": config["num_layers"],
                # The grid torsos' channels (conv and ego); an MLP has none.
                "conv_channels": config["conv_channels"] if config["torso"] != "mlp" else 0,
                # Recorded only when not float32.
                **({"dtype": config["dtype"]} if config.get("dtype", "float32") != "float32"
                   else {})}

    @property
    def timesteps(self) -> int:
        return self.update * self.config["num_envs"] * self.config["num_steps"]

    @property
    def checkpoint(self) -> str:
        return f"checkpoints/{self.directory}/checkpoint_{self.update}.pkl"


SAVED_RUNS = (
    SavedRun("run_a", "run_a", 2,
             {**CPU_DEFAULTS, "num_envs": 8, "num_steps": 16, "total_timesteps": 768,
              "hidden_dim": 32, "log_interval": 2, "seed": 1, "lr_schedule": "cosine",
              "ent_coef": 0.02, "ent_coef_end": 0.005, "reward_weights": "kills=2",
              "distance_shaping": "potential"},
             ("hidden_dim", "log_interval", "num_envs", "num_steps", "seed", "total_timesteps"),
             {**OPTION_DEFAULTS, "save_interval": 2, "keep_checkpoints": 3, "wandb": False,
              "wandb_project": "fuzz", "no_artifact": True},
             1_700_000_000 * 10**9),
    # Written before the network, schedule and reward options: a shared tanh MLP with a
    # constant learning rate (anneal_lr false).
    SavedRun("run_b", "run_b_before_a_copy", 4,
             {**{k: v for k, v in CPU_DEFAULTS.items() if k in OLD_FIELDS}, "anneal_lr": False,
              "num_envs": 16, "num_steps": 8, "total_timesteps": 1280, "hidden_dim": 64,
              "num_layers": 1, "num_minibatches": 2, "update_epochs": 1, "num_devices": 2,
              "seed": 7},
             ("num_devices", "num_envs", "num_minibatches", "num_steps"), None,
             1_700_000_100 * 10**9),
)
# The flag checks come before any array of a checkpoint is read (`resume.restore_runner`, stopped).
PLACEHOLDER_PARAMS = {"params": {"torso_0": {"kernel": np.zeros((1, 1), np.float32)}}}


def checkpoint_state(run: SavedRun, obs_dim: int, num_actions: int) -> dict:
    state = {
        "format_version": ckpt.FORMAT_VERSION, "run_name": run.saved_name,
        "config": run.stored_config,
        "network": {**run.network, "obs_dim": obs_dim, "num_actions": num_actions},
        "params": PLACEHOLDER_PARAMS, "opt_state": [], "rng": np.zeros(2, np.uint32),
        "env_state": [], "env_obs": [], "episode_return": np.zeros(1, np.float32),
        "episode_length": np.zeros(1, np.int32), "update": run.update,
        "timesteps": run.timesteps, "wandb_run_id": f"fuzz{run.update}",
        "schedule_timesteps": float(run.timesteps),
        "explicit_config": list(run.explicit_config)}
    if run.run_options is not None:
        state["run_options"] = run.run_options
    return state


memoised_make_env = functools.cache(cli.make_env)


@pytest.fixture(scope="module")
def workspace_template(tmp_path_factory) -> Path:
    """root/ws/: checkpoints/{run_a, run_b, params_only, empty_run, notes.txt} and notes.txt."""
    root = tmp_path_factory.mktemp("flags_fuzz_template")
    env, _ = memoised_make_env()
    runs = root / "ws" / "checkpoints"
    for run in SAVED_RUNS:
        ckpt.save_checkpoint(runs / run.directory,
                             checkpoint_state(run, env.observation_size, env.num_actions))
        os.utime(root / "ws" / run.checkpoint, ns=(run.mtime_ns, run.mtime_ns))
    params_files.save_params(runs / "params_only" / "params_1.npz", PLACEHOLDER_PARAMS)
    (runs / "empty_run").mkdir()
    for text_file in (runs / "notes.txt", root / "ws" / "notes.txt"):
        text_file.write_text("not a checkpoint\n")
    return root


def enter_fresh_workspace(template: Path, root: Path) -> Path:
    """A fresh copy of the template at `root`; the cwd is its ws/, which it returns."""
    os.chdir(root.parent)
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(template, root)  # with the template's times
    os.chdir(root / "ws")
    return root / "ws"


def snapshot(root: Path) -> dict[str, tuple]:
    """{path relative to root: (is a directory, size, mtime)} of everything under root."""
    entries = {}
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(directory, name)
            status = os.lstat(path)
            entries[os.path.relpath(path, root)] = (stat.S_ISDIR(status.st_mode),
                                                    status.st_size, status.st_mtime_ns)
    return entries


# ----------------------------------------------------------------------------- the oracle

REACHED_COMPILE = "reached the compile"


@dataclasses.dataclass
class Expected:
    codes: set  # exit codes, or REACHED_COMPILE
    reasons: list[str] = dataclasses.field(default_factory=list)  # one per broken rule
    config: dict | None = None  # for a run that reaches the compile, and:
    options: dict | None = None
    keep_optimizer: bool = False
    run_dir: Path | None = None  # None: a new timestamped directory in `parent`
    parent: Path | None = None
    resumed: bool = False


def name_too_long(path: Path) -> bool:
    return any(len(os.fsencode(part)) > MAX_NAME_BYTES for part in path.parts)


def creatable(directory: Path) -> bool:
    if str(directory).startswith(UNWRITABLE) or name_too_long(directory):
        return False
    prefixes = [Path(*directory.parts[:end]) for end in range(1, len(directory.parts) + 1)]
    return not any(os.path.lexists(prefix) and not os.path.isdir(prefix) for prefix in prefixes)


def newest_checkpoint_in(directory: Path) -> Path | None:
    if not os.path.isdir(directory):
        return None
    found = [(int(name[len("checkpoint_"):-len(".pkl")]), name)
             for name in os.listdir(directory) if CHECKPOINT_FILE.match(name)]
    return directory / max(found)[1] if found else None


def resume_target(ws: Path, path: str, checkpoint_dir: str, run_name: str | None):
    """The SavedRun `--resume [PATH]` names (--help), or None."""
    if path:
        target = ws / path
        found = newest_checkpoint_in(target) if os.path.isdir(target) else (
            target if os.path.isfile(target) else None)
    elif run_name:
        found = newest_checkpoint_in(ws / checkpoint_dir / run_name)
    else:
        runs = ws / checkpoint_dir
        newest = [newest_checkpoint_in(runs / name)
                  for name in (os.listdir(runs) if os.path.isdir(runs) else [])]
        newest = [found for found in newest if found is not None]
        found = max(newest, key=lambda found: (os.stat(found).st_mtime_ns, found.parent.name),
                    default=None)
    by_path = {os.path.realpath(ws / run.checkpoint): run for run in SAVED_RUNS}
    return by_path.get(os.path.realpath(found)) if found is not None else None


def batch_of(config: dict) -> int:
    return config["num_envs"] * config["num_steps"]


def auto_scaled(config: dict, user_set: set) -> dict:
    """specs/training.md "Auto-scaling": among the minibatch sizes of 4,096-16,384 samples, the
    counts that split each device's share, not below the configured one, nearest batch/8192."""
    batch, minibatches = batch_of(config), config["num_minibatches"]
    if batch <= REFERENCE_BATCH:
        return config
    if "num_minibatches" not in user_set:
        share = batch // max(config["num_devices"], 1)
        sizes = [size for size in range(TARGET_MINIBATCH // 2, TARGET_MINIBATCH * 2 + 1)
                 if batch % size == 0 and share % (batch // size) == 0
                 and batch // size >= minibatches]
        if sizes:  # |log(count / (batch / 8192))| is |log(8192 / size)|
            minibatches = batch // min(sizes, key=lambda size: (
                abs(math.log(TARGET_MINIBATCH / size)), batch // size))
    epochs = config["update_epochs"]
    if "update_epochs" not in user_set and minibatches >= 1:
        epochs = max(1, min(epochs, MAX_GRADIENT_STEPS // minibatches))
    return {**config, "num_minibatches": minibatches, "update_epochs": epochs}


def splits_evenly(config: dict) -> bool:
    envs, devices, minibatches = (config[name] for name in ("num_envs", "num_devices",
                                                            "num_minibatches"))
    if min(envs, devices, minibatches, config["num_steps"]) < 1:
        return True  # validation reports it
    return envs % devices == 0 and (batch_of(config) // devices) % minibatches == 0


def resumed_config(saved: SavedRun, explicit: dict, available: int) -> dict:
    """The config, by specs/training.md "Resume": the checkpoint's config under the flags given;
    a new batch re-derives the minibatching that no session set; the checkpoint's device count
    if it still fits, else the most that fit."""
    config = {**saved.config, **explicit}
    user_set = set(saved.explicit_config) | set(explicit)
    rescale = batch_of(config) != batch_of(saved.config)
    if rescale:
        config.update({name: CPU_DEFAULTS[name] for name in ("num_minibatches", "update_epochs")
                       if name not in user_set})
    counts = [config["num_devices"]]
    if "num_devices" not in explicit:
        counts = [count for count in counts if count <= available]
        counts += range(available, 0, -1)
    for count in counts:
        candidate = {**config, "num_devices": count}
        candidate = auto_scaled(candidate, user_set) if rescale else candidate
        if splits_evenly(candidate):
            break
    return candidate


def config_problems(config: dict, available: int) -> list[tuple[int, str]]:
    """The validation paragraph of specs/training.md, and the devices JAX sees."""
    problems = [(3, flag_name(name)) for name in COUNTS if config[name] < 1]
    # int32 array sizes, and the bounds on memory and time of --help
    problems += [(3, flag_name(name)) for name in COUNTS
                 if config[name] > UPPER_BOUNDS.get(name, INT32_MAX)]
    if batch_of(config) > INT32_MAX:
        problems.append((3, "batch size"))
    if not problems:
        torsos = 1 if config["shared_torso"] else 2
        if torsos * (config["num_layers"] - 1) * config["hidden_dim"] ** 2 > MAX_HIDDEN_WEIGHTS:
            problems.append((3, "hidden weights"))
        batch, devices = batch_of(config), config["num_devices"]
        if (batch % config["num_minibatches"] or config["num_envs"] % devices
                or (batch // devices) % config["num_minibatches"]):
            problems.append((3, "divisible"))
        elif batch // config["num_minibatches"] < 2:  # a lone sample's normalised advantage is 0
            problems.append((3, "minibatches of one sample"))
        if config["total_timesteps"] < batch:
            problems.append((3, "--total-timesteps"))
        if devices > available:
            problems.append((3, "--num-devices"))
        # specs/training.md: one device's share of the rollout's float32 observations must fit
        # in its memory (on CPU, the host's).
        if config["num_seeds"] * batch // devices * OBSERVATION_BYTES > HOST_MEMORY_BYTES:
            problems.append((3, "observations per device"))
        # specs/training.md "Several agents": on one device, and their batches within int32.
        if config["num_seeds"] > 1 and devices > 1:
            problems.append((3, "--num-seeds"))
        if config["num_seeds"] * batch > INT32_MAX:
            problems.append((3, "--num-seeds"))
        if config["seed"] + config["num_seeds"] - 1 > MAX_SEED:  # agent i trains seed + i
            problems.append((3, "--seed"))
    problems += [(3, flag_name(name)) for name in UNIT_INTERVAL if not 0 <= config[name] <= 1]
    problems += [(3, flag_name(name)) for name in FINITE_NON_NEGATIVE
                 if not 0 <= config[name] <= FLOAT32_MAX]
    problems += [(3, flag_name(name)) for name in FINITE_POSITIVE
                 if not 0 < config[name] <= FLOAT32_MAX]
    problems += [(3, flag_name(name)) for name in FINITE if not abs(config[name]) <= FLOAT32_MAX]
    problems += [(3, flag_name(name)) for name in PROGRAM_COUNTS if not 0 <= config[name] <= 23]
    if not 0 <= config["seed"] <= MAX_SEED:
        problems.append((3, "--seed"))
    problems += [(3, named) for name, (values, named) in LISTED_VALUES.items()
                 if config[name] not in values]
    if config["distance_shaping"] in LISTED_VALUES["distance_shaping"][0]:
        problems += reward_problems(config["reward_weights"], config["distance_shaping"])
    return problems


def reward_problems(weights: str, shaping: str) -> list[tuple[int, str]]:
    """--help and game/reward_options.py: comma-separated NAME=VALUE items (blank ones skipped),
    each NAME a reward component given once, each VALUE a finite number; a distance shaping
    other than the rules' replaces the distance component, which must not be weighted then."""
    named = set()
    for item in (part.strip() for part in weights.split(",")):
        if not item:
            continue
        name, equals, value = item.partition("=")
        if not equals or name.strip() not in REWARD_COMPONENTS:
            return [(3, "reward weight")]
        try:
            number = float(value)
        except ValueError:
            return [(3, "reward weight")]
        if not math.isfinite(number) or name.strip() in named:
            return [(3, "reward weight")]
        named.add(name.strip())
    if shaping != "rules" and "distance" in named:
        return [(3, "replaces the 'distance' component")]
    return []


def run_options(given: dict, saved: SavedRun | None) -> dict:
    """--help and specs/training.md "Resume": given now, else the checkpoint's, else the defaults;
    a timer given now replaces a saved --save-interval; --wandb-mode online|offline turns wandb
    on unless --no-wandb is given too."""
    now = {name: given[name] for name in OPTION_DEFAULTS if name in given}
    if "save_interval_minutes" in now and "save_interval" not in now:
        now["save_interval"] = None
    if now.get("wandb_mode") in ("online", "offline") and "wandb" not in now:
        now["wandb"] = True
    return {**OPTION_DEFAULTS, **((saved and saved.run_options) or {}), **now}


def option_problems(options: dict) -> list[tuple[int, str]]:
    """--help: minutes "0: after every chunk", K "0 keeps all", "every N updates"."""
    minutes, interval = options["save_interval_minutes"], options["save_interval"]
    problems = []
    if not (minutes >= 0 and math.isfinite(minutes)):
        problems.append((3, "--save-interval-minutes"))
    if options["keep_checkpoints"] < 0:
        problems.append((3, "--keep-checkpoints"))
    if interval is not None and interval < 1:
        problems.append((3, "--save-interval"))
    if options["eval_interval"] < 0:
        problems.append((3, "--eval-interval"))
    if not 1 <= options["eval_episodes"] <= MAX_EVAL_EPISODES:
        problems.append((3, "--eval-episodes"))
    return problems


def fresh_run_dir_problems(run_dir: Path, named: bool) -> list[tuple[int, str]]:
    """README "Exit codes": an output that cannot be written or that would replace a checkpoint
    or params file is a bad argument; specs/training.md: "add --resume", "move them away"."""
    if not creatable(run_dir):
        return [(3, "cannot write")]
    names = os.listdir(run_dir) if named and os.path.isdir(run_dir) else []
    if any(CHECKPOINT_FILE.match(name) for name in names):
        return [(3, "--resume")]
    if any(PARAMS_FILE.match(name) for name in names):
        return [(3, "params")]
    return []


def expect(groups: list[Group], ws: Path, available: int) -> Expected:
    if any(group.dest == "help" and not group.error for group in groups):
        ambiguous = [group.error for group in groups if group.ambiguous]
        return Expected({3}, ambiguous) if ambiguous else Expected({0})
    errors = [group.error for group in groups if group.error]
    if errors:
        return Expected({3}, errors)
    given = {group.dest: group.value for group in groups if group.flag}
    return expect_parsed(given, ws, available)


def expect_parsed(given: dict, ws: Path, available: int) -> Expected:
    """What the documented rules say about flags that parsed."""
    checkpoint_dir, run_name = given.get("checkpoint_dir", "checkpoints"), given.get("run_name")
    explicit = {name: given[name] for name in CPU_DEFAULTS if name in given}
    problems, saved = [], None
    # --help: --anneal-lr is --lr-schedule linear, --no-anneal-lr constant; one that contradicts
    # a --lr-schedule given with it is a bad argument. A lone --ent-coef is constant.
    if "anneal_lr" in given:
        schedule = "linear" if given["anneal_lr"] else "constant"
        if "lr_schedule" in explicit and (explicit["lr_schedule"] == "constant") == given["anneal_lr"]:
            problems.append((3, "contradicts --lr-schedule"))
        explicit.setdefault("lr_schedule", schedule)
    if "ent_coef" in explicit:
        explicit.setdefault("ent_coef_end", explicit["ent_coef"])
    if run_name is not None and (run_name in ("", ".", "..") or "/" in run_name
                                 or not run_name.isprintable() or not run_name.strip()):
        problems.append((3, "--run-name"))
    if checkpoint_dir == "":
        problems.append((3, "--checkpoint-dir"))
    if given.get("resume") == "":  # specs/training.md: an empty PATH, not the newest run
        problems.append((3, "--resume"))
    elif "resume" in given:
        path = None if given["resume"] is RESUME_NEWEST else given["resume"]  # --resume alone
        saved = resume_target(ws, path, checkpoint_dir, run_name)
        if saved is None:
            problems.append((6, "checkpoint"))
    options = run_options(given, saved)
    problems += option_problems(options)
    if saved:
        run_dir = Path(os.path.realpath(ws / saved.checkpoint)).parent
        if run_name and run_name != run_dir.name:
            problems.append((3, "--run-name"))
        explicit.pop("seed", None)  # ignored on resume, with a warning
        if any(explicit.get(name, saved.config[name]) != saved.config[name]
               for name in ARCHITECTURE):
            problems.append((6, "architecture"))
        if explicit.get("num_seeds", saved.config["num_seeds"]) != saved.config["num_seeds"]:
            problems.append((6, "--num-seeds"))  # a run keeps its agents
        config = resumed_config(saved, explicit, available)
    else:
        config = auto_scaled({**CPU_DEFAULTS, **explicit}, set(explicit))
    problems += config_problems(config, available)
    if config["num_seeds"] > 1 and options["eval_interval"]:  # it evaluates one agent
        problems.append((3, "--eval-interval"))
    if saved is None and not problems:
        run_dir = ws / checkpoint_dir / (run_name or "ppo_20260101-000000")
        problems += fresh_run_dir_problems(run_dir, named=run_name is not None)
    if problems:
        return Expected({code for code, _ in problems}, [reason for _, reason in problems])
    if saved and config["total_timesteps"] - saved.timesteps < batch_of(config):
        return Expected({0})  # "nothing to do"
    return Expected({REACHED_COMPILE}, config=config, options=options,
                    keep_optimizer=given.get("keep_optimizer", False),
                    run_dir=run_dir if saved or run_name is not None else None,
                    parent=ws / checkpoint_dir, resumed=saved is not None)


# ----------------------------------------------------------------------------- running a case

class ReachedCompile(BaseException):
    """Raised in place of the compiles: the run was accepted."""

    def __init__(self, config: TrainConfig, keep_optimizer: bool, options: dict):
        super().__init__()
        self.config, self.keep_optimizer, self.options = config, keep_optimizer, options


class TimedOut(BaseException):
    pass


@pytest.fixture
def stopped_at_compile(monkeypatch) -> int:
    """cli.main stops where it would compile; returns the number of devices JAX sees."""
    import jax
    options_seen = []
    real_run_options = cli.run_options

    def recording_run_options(args, saved):
        options_seen.append(real_run_options(args, saved))
        return options_seen[-1]

    def stop(trainer, schedule, key, saved, config, keep_optimizer, say):
        raise ReachedCompile(config, keep_optimizer, options_seen[-1])

    monkeypatch.setattr(cli, "run_options", recording_run_options)
    monkeypatch.setattr(startup, "build_runner_and_chunk", stop)
    monkeypatch.setattr(cli, "make_env", memoised_make_env)
    monkeypatch.chdir(os.getcwd())  # put back after the cases' chdirs
    return jax.local_device_count()  # started now: the count is fixed from here on


@dataclasses.dataclass
class Outcome:
    code: object  # the exit code, or REACHED_COMPILE
    stdout: str
    stderr: str
    warnings: list
    reached: ReachedCompile | None = None
    escaped: BaseException | None = None


@contextlib.contextmanager
def time_limit(seconds: float):
    def expire(signum, frame):
        raise TimedOut(f"no outcome within {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str], seconds: float = CASE_TIME_LIMIT_S) -> Outcome:
    stdout, stderr = io.StringIO(), io.StringIO()
    outcome = Outcome(None, "", "", [])
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stdout), \
            contextlib.redirect_stderr(stderr):
        warnings.simplefilter("always")
        try:
            with time_limit(seconds):
                outcome.code = cli.main(argv)
        except ReachedCompile as reached:
            outcome.code, outcome.reached = REACHED_COMPILE, reached
        except (Exception, TimedOut) as error:  # the contract: never
            outcome.escaped = error
    outcome.stdout, outcome.stderr, outcome.warnings = stdout.getvalue(), stderr.getvalue(), caught
    return outcome


def allowed_writes(expected: Expected, new: set[str], root: Path) -> set[str]:
    """The run directory of a run that reaches the compile, its missing parents and `.lock`."""
    run_dir = expected.run_dir
    if run_dir is None:
        made = [root / path for path in new if TIMESTAMPED_RUN.match(os.path.basename(path))
                and os.path.dirname(root / path) == os.path.normpath(expected.parent)]
        if len(made) != 1:
            return set()
        run_dir = made[0]
    return {os.path.relpath(directory, root) for directory in [run_dir, *run_dir.parents]} | {
        os.path.relpath(run_dir / LOCK_NAME, root)}


def breaches_of_contract(expected: Expected, outcome: Outcome, before: dict, after: dict,
                         root: Path) -> list[str]:
    if outcome.escaped is not None:
        return [f"{type(outcome.escaped).__name__} escaped: {outcome.escaped}"]
    breaches = []
    if outcome.code not in expected.codes:
        breaches.append(f"outcome {outcome.code!r}, expected one of "
                        f"{sorted(map(str, expected.codes))} for {expected.reasons}; "
                        f"stderr {outcome.stderr!r}")
    if outcome.code in (cli.EXIT_BAD_ARGUMENTS, cli.EXIT_BAD_CHECKPOINT):
        prefix = ("error: bad arguments: " if outcome.code == cli.EXIT_BAD_ARGUMENTS
                  else "error: checkpoint: ")
        one_line = outcome.stderr.count("\n") == 1 and outcome.stderr.endswith("\n") and (
            "\r" not in outcome.stderr)
        if not outcome.stderr.startswith(prefix):
            breaches.append(f"stderr {outcome.stderr!r} does not start with {prefix!r}")
        if not one_line:
            breaches.append(f"stderr is not one line: {outcome.stderr!r}")
        reasons = set(expected.reasons)
        if len(reasons) == 1 and outcome.code in expected.codes and (
                reasons.pop() not in outcome.stderr):
            breaches.append(f"stderr {outcome.stderr!r} does not name {expected.reasons[0]!r}")
    elif outcome.code in (cli.EXIT_OK, REACHED_COMPILE) and outcome.stderr:
        breaches.append(f"stderr {outcome.stderr!r} on success")
    if outcome.code == cli.EXIT_OK and not ("usage:" in outcome.stdout
                                            or "nothing to do" in outcome.stdout):
        breaches.append("exit 0 with neither the help nor `nothing to do`")
    if outcome.warnings:
        breaches.append(f"warnings: {[str(warning.message) for warning in outcome.warnings]}")
    if outcome.reached is not None and outcome.code in expected.codes:
        reached = outcome.reached
        if reached.config.to_dict() != expected.config:
            changed = {name: (value, expected.config[name])
                       for name, value in reached.config.to_dict().items()
                       if value != expected.config[name]}
            breaches.append(f"config differs (got, expected): {changed}")
        if reached.options != expected.options:
            breaches.append(f"options {reached.options} != {expected.options}")
        if reached.keep_optimizer != expected.keep_optimizer:
            breaches.append(f"keep_optimizer {reached.keep_optimizer}")
    new, removed = after.keys() - before.keys(), before.keys() - after.keys()
    changed = {path for path in before.keys() & after.keys()
               if not before[path][0] and before[path] != after[path]}
    made_run = outcome.code == REACHED_COMPILE
    allowed = allowed_writes(expected, new, root) if made_run and expected.config else {
        path for path in new if os.path.basename(path) == LOCK_NAME
        and os.path.dirname(path) in before}
    if new - allowed or removed or changed:
        breaches.append(f"files: new {sorted(new - allowed)}, removed {sorted(removed)}, "
                        f"changed {sorted(changed)}")
    return breaches


def outcome_class(expected: Expected, outcome: Outcome) -> str:
    if outcome.code == REACHED_COMPILE:
        return "reached the compile, " + ("resumed" if expected.resumed else "fresh")
    if outcome.code == cli.EXIT_OK:
        return "help" if "usage:" in outcome.stdout else "nothing to do"
    return f"exit {outcome.code}"


# ----------------------------------------------------------------------------- tests

def test_every_flag_is_kebab_case_documented_and_known_to_the_oracle(capsys):
    assert cli.main(["--help"]) == cli.EXIT_OK
    help_text = capsys.readouterr().out
    config_fields = {field.name for field in dataclasses.fields(TrainConfig)}
    assert set(CPU_DEFAULTS) == config_fields
    assert set(COUNTS + UNIT_INTERVAL + FINITE_NON_NEGATIVE + FINITE_POSITIVE + FINITE
               + PROGRAM_COUNTS + CHOSEN) | {
        "seed", "reward_weights"} == config_fields
    assert set(ARCHITECTURE) <= config_fields and set(OLD_FIELDS) - config_fields == ALIAS_DESTS
    for flag in parser_flags():
        assert re.fullmatch(r"--[a-z0-9]+(-[a-z0-9]+)*|-h", flag.option), flag.option
        assert re.search(rf"(?<![\w-]){re.escape(flag.option)}(?![\w-])", help_text), flag.option
        assert flag.action.help, flag.option
        assert flag.dest in (config_fields | set(OPTION_DEFAULTS) | SESSION_DESTS
                             | ALIAS_DESTS), flag.dest
        if flag.takes_value and flag.action.type is not None:
            assert flag.action.type.__name__ in READERS, flag.option
        if listed_values(flag.action) is not None:
            assert tuple(listed_values(flag.action)) == LISTED_VALUES[flag.dest][0], flag.option


def breaches_and_tally(cases: list[list[Group]], template: Path, root: Path, available: int):
    """Runs every case in a fresh workspace at `root`: (breaches, Counter of outcomes)."""
    breaches, tally = [], Counter()
    pristine = after = snapshot(template)
    ws = enter_fresh_workspace(template, root)
    for groups in cases:
        argv = [token for group in groups for token in group.tokens]
        if after != pristine:  # else the copy is as it was
            ws = enter_fresh_workspace(template, root)
        expected = expect(groups, ws, available)
        outcome = run_cli(argv)
        after = snapshot(root)
        breaches += [f"{argv!r}: {breach}" for breach in breaches_of_contract(
            expected, outcome, pristine, after, root)]
        tally[outcome_class(expected, outcome)] += 1
    return breaches, tally


def assert_no_breaches(breaches: list[str]) -> None:
    assert not breaches, f"{len(breaches)} breaches:\n" + "\n".join(breaches[:40])


@pytest.mark.parametrize("base, kind", [
    # On the tests' two CPU devices (conftest.py), so that every value meets the device split too.
    ([*RUN_SHAPES[1].items(), ("--num-devices", "2")], "fresh"),
    ([("--resume", "checkpoints/run_a")], "resumed"),
], ids=["fresh_auto_scaled_run_on_two_devices", "resumed_run"])
def test_every_flag_with_every_value_meets_the_contract(base, kind, tmp_path,
                                                        workspace_template, stopped_at_compile):
    fuzzer = Fuzzer(random.Random(SEED), tmp_path / "case" / "ws")
    breaches, tally = breaches_and_tally(fuzzer.sweep(base), workspace_template,
                                         tmp_path / "case", stopped_at_compile)
    assert_no_breaches(breaches)
    assert {"exit 3", "exit 6", "reached the compile, " + kind} <= tally.keys(), dict(tally)
    assert kind == "fresh" or "nothing to do" in tally, dict(tally)


def test_random_command_lines_meet_the_contract(tmp_path, workspace_template, stopped_at_compile):
    fuzzer = Fuzzer(random.Random(SEED), tmp_path / "case" / "ws")
    breaches, tally = breaches_and_tally([fuzzer.case() for _ in range(NUM_CASES)],
                                         workspace_template, tmp_path / "case", stopped_at_compile)
    assert_no_breaches(breaches)
    for kind, least in [("reached the compile, fresh", 40), ("reached the compile, resumed", 10),
                        ("help", 10), ("exit 3", 100), ("exit 6", 20)]:
        assert tally[kind] >= least, (kind, dict(tally))


# ----------------------------------------------------------------------------- found once

def assert_refused(outcome: Outcome, code: int) -> None:
    assert outcome.escaped is None, outcome.escaped
    assert outcome.code == code, outcome.stderr
    assert outcome.stderr.count("\n") == 1 and "\r" not in outcome.stderr, outcome.stderr


def test_a_huge_env_count_is_refused_at_once(tmp_path, stopped_at_compile):
    os.chdir(tmp_path)
    # Milliseconds normally; 5 s leaves room for a busy machine and still catches any work that
    # grows with the count.
    assert_refused(run_cli(["--num-envs", HUGE], seconds=5), cli.EXIT_BAD_ARGUMENTS)


@pytest.mark.parametrize("argv", [["--resume", "x" * 300],
                                  ["--resume", "--checkpoint-dir", "x" * 300],
                                  ["--resume", "--run-name", "x" * 300, "--checkpoint-dir", "."]])
def test_resuming_from_a_too_long_name_is_a_missing_checkpoint(argv, tmp_path, stopped_at_compile):
    os.chdir(tmp_path)
    assert_refused(run_cli(argv), cli.EXIT_BAD_CHECKPOINT)


def test_an_empty_resume_path_is_refused_not_read_as_the_newest_run(
        tmp_path, workspace_template, stopped_at_compile):
    # The workspace has runs that `--resume` alone would pick; `--resume "$UNSET"` must not.
    enter_fresh_workspace(workspace_template, tmp_path / "case")
    assert run_cli(["--resume"]).code == REACHED_COMPILE
    outcome = run_cli(["--resume", ""])
    assert_refused(outcome, cli.EXIT_BAD_ARGUMENTS)
    assert "--resume PATH is empty" in outcome.stderr


TINY_SHAPE = [token for option, text in RUN_SHAPES[0].items() for token in (option, text)]


@pytest.mark.parametrize("argv, code", [
    (["--resume", "no\nsuch.pkl"], cli.EXIT_BAD_CHECKPOINT),
    (["--resume", "--run-name", "a\nb"], cli.EXIT_BAD_ARGUMENTS),
    (["--resume", "checkpoints/run_a", "--run-name", "a\nb"], cli.EXIT_BAD_ARGUMENTS),
    ([*TINY_SHAPE, "--checkpoint-dir", "notes.txt/a\nb"], cli.EXIT_BAD_ARGUMENTS),
    (["stray\nword"], cli.EXIT_BAD_ARGUMENTS),
])
def test_an_error_quoting_a_line_break_stays_on_one_line(argv, code, tmp_path, workspace_template,
                                                         stopped_at_compile):
    enter_fresh_workspace(workspace_template, tmp_path / "case")
    assert_refused(run_cli(argv), code)


@pytest.mark.parametrize("argv, codes", [
    (["--lr", "1e39"], {cli.EXIT_BAD_ARGUMENTS}),
    (["--total-timesteps", HUGER], {cli.EXIT_BAD_ARGUMENTS}),
])
def test_a_value_beyond_float32_is_refused(argv, codes, tmp_path, stopped_at_compile):
    os.chdir(tmp_path)
    outcome = run_cli([*TINY_SHAPE, "--run-name", "r", *argv])
    assert outcome.code in codes and not outcome.warnings, (outcome.stderr, outcome.warnings)
    assert not os.path.exists("checkpoints"), "the run directory was made before the check"
