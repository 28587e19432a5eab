"""Seeded fuzz of checkpoint and params loading: a missing, corrupt or architecture-mismatched
checkpoint gives one line on stderr naming the file and exit 6, never a traceback or another code.

One real tiny run (tiny_runs.train) gives the original checkpoint_6.pkl and params_6.npz. From
them, deterministically (SEED), come some 430 variants (some 360 of them checkpoints):
  - bytes: truncations at many offsets (zero-length included), XOR flips of the pickle's opcodes
    and short arguments and of its array data, flips anywhere in the .npz, a text file, a
    directory, a FIFO, dangling and looping symlinks where a file is expected, a run directory
    whose newest file is broken, a folder of runs;
  - structure (unpickled, changed, pickled again): each key missing, an extra key, each key set
    to each of ODD_VALUES, params and optimizer/env leaves of other shapes, dtypes, counts and
    Python types, NaN/inf params, counters out of range, another format_version, configs and
    network records that are invalid or describe another architecture, pickles of unrelated
    objects, of a module or a class that does not exist (no pickle here runs code);
  - params files: each array missing, extra arrays and members, other dtypes and shapes, object
    arrays, a zip with no arrays, another architecture, the `network/` architecture entries
    missing (the old format), changed or extra, and `meta/` entries.
Each variant is loaded by
  - the trainer: `cli.main(["--resume", PATH, ...])` in-process, two updates more than the
    original so that the arrays are checked too. `resume.restore_runner` (the last check before the
    compiles) is wrapped to stop an accepted run there (ResumeAccepted) and the compiles raise
    CompileStarted, so nothing compiles: a bad checkpoint must be refused before that point.
    `make_env` and `ppo.make_trainer` are memoised, so that JAX traces the fresh runner's layout
    once per config instead of once per variant (0.5 s each); the checks are the trainer's own;
  - the tools: watch_jax_agent.py and evaluate.py main() in-process, with the playing and the
    evaluating replaced by PolicyAccepted, so an accepted policy stops there.
"Refused" means exit 6 with exactly one line on stderr and no traceback; that line must name
the file given (a run directory: the directory or a file in it).

Decisions on what is accepted (README "Exit codes", specs/training.md "Resume",
specs/agent-tools.md):
  - unknown keys anywhere (a checkpoint, its network record, its config, its run options, an
    unused array under params/ of an .npz) and a missing optional key (those that newer versions
    added: run_name, forked_from, run_options, explicit_config, metrics_window,
    unwritten_metrics_lines, saved_at);
  - NaN and inf params are refused by all (training never saves them: it stops on a non-finite
    loss first), NaN and inf optimizer state is not (a resume of one then stops with the
    documented exit 2 "non-finite loss" at its first update);
  - the tools read the policy only (network record, counters, params): broken optimizer, env or
    training-config fields load, so a config that an older version accepted still loads for
    watching and evaluation (specs/training.md); a params .npz of any ActorCritic that fits this
    game loads;
  - the trainer builds its network from `config`, the tools from the network record: a record
    whose hidden_dim or num_layers disagrees with the config is refused by the trainer too;
    the trainer casts leaves of another real numeric dtype to the run's (int and bool params
    included, which the tools refuse: they ask for real floating-point params), except where
    the cast is not exact: floats, or integers out of range, in an integer leaf; text, object
    and complex leaves are refused, as by the tools (they are not numbers);
  - a checkpoint's config must give every field (a missing one would take today's default),
    but num_devices, which came later;
  - a huge update count resumes; timesteps past the total leave nothing to train (exit 0 before
    compiling); bytes after the pickle's STOP are ignored; any pickle protocol loads;
  - a pickle that names any global but NumPy's array, scalar and dtype constructors is refused
    before that global is looked up, so a crafted checkpoint runs nothing (an OrderedDict, which
    the trainer never writes, is refused too);
  - a flipped byte may land in array data and change only values: a flip is refused or accepted.
"""

import contextlib
import functools
import io
import math
import os
import pickle
import pickletools
import random
import runpy
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import pytest

from hackmatrix.shell.exit_codes import EXIT_BAD_CHECKPOINT
from hackmatrix.game import constants as C
from hackmatrix.tools import evaluation, viewer
from hackmatrix.tools.policy import OBS_DIM
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import checkpoint_pickle, cli, params_files, resume, startup
from hackmatrix.training import trainer as ppo
from hackmatrix.training import network as net

from tiny_runs import UPDATES, train

SEED = 20240611
RUN_NAME = "fuzz"
CHECKPOINT_NAME = f"checkpoint_{UPDATES}.pkl"
PARAMS_NAME = f"params_{UPDATES}.npz"
TWO_MORE_UPDATES = ["--total-timesteps", str(8 * 16 * (UPDATES + 2))]
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

REFUSED = "refused"  # exit 6, one line on stderr, no traceback
ACCEPTED = "accepted"  # the trainer restored its runner; a tool got its policy
NOTHING_TO_DO = "nothing to do"  # the trainer exited 0 before compiling
REFUSED_OR_ACCEPTED = "refused or accepted"

# Put in place of each key of a checkpoint (SWEEP).
ODD_VALUES = {"text": "x", "none": None, "list": [], "dict": {}, "float": 1.5, "negative": -1,
              "huge": 10**30, "nan": math.nan}
EVERY_ODD_VALUE = frozenset(ODD_VALUES)
# key: ({odd value: the trainer's outcome}, odd values the tools accept); the rest is refused.
SWEEP = {
    "format_version": ({}, set()),
    "config": ({}, {"dict"}),
    "network": ({}, set()),
    "params": ({}, set()),
    "opt_state": ({}, EVERY_ODD_VALUE),
    "rng": ({}, EVERY_ODD_VALUE),
    "env_state": ({}, EVERY_ODD_VALUE),
    "env_obs": ({}, EVERY_ODD_VALUE),
    "episode_return": ({}, EVERY_ODD_VALUE),
    "episode_length": ({}, EVERY_ODD_VALUE),
    "update": ({"huge": ACCEPTED}, {"huge"}),
    "timesteps": ({"huge": NOTHING_TO_DO}, {"huge"}),
    "wandb_run_id": (dict.fromkeys(ODD_VALUES, ACCEPTED), EVERY_ODD_VALUE),
    "schedule_timesteps": (dict.fromkeys(["float", "negative", "huge"], ACCEPTED), EVERY_ODD_VALUE),
    "run_name": (dict.fromkeys(["text", "none"], ACCEPTED), EVERY_ODD_VALUE),
    "explicit_config": ({"list": ACCEPTED}, EVERY_ODD_VALUE),
    "run_options": ({"dict": ACCEPTED}, EVERY_ODD_VALUE),
    "metrics_window": ({"none": ACCEPTED}, EVERY_ODD_VALUE),
    "unwritten_metrics_lines": ({"list": ACCEPTED}, EVERY_ODD_VALUE),
    "forked_from": (dict.fromkeys(ODD_VALUES, ACCEPTED), EVERY_ODD_VALUE),
    "saved_at": (dict.fromkeys(ODD_VALUES, ACCEPTED), EVERY_ODD_VALUE),
}
OPTIONAL_KEYS = sorted(set(SWEEP) - set(ckpt.REQUIRED_KEYS))

class ResumeAccepted(BaseException):
    """The trainer restored its runner from the checkpoint: every check before compiling passed."""


class CompileStarted(BaseException):
    """The trainer began a compile: a bad checkpoint must be refused before."""


class PolicyAccepted(BaseException):
    """A tool loaded the policy and was about to play or evaluate it."""


@dataclass(frozen=True)
class Original:
    state: dict
    checkpoint_bytes: bytes
    params: dict  # the arrays of params_6.npz by key
    params_bytes: bytes


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[Path, Original], Path]  # writes it in a run directory; returns what to load
    trainer: str | None  # the outcome of --resume; None: not something --resume is given
    tools: str


@dataclass(frozen=True)
class Outcome:
    source: Path
    exit_code: int | None  # None: accepted (the program reached its stand-in)
    stderr: str

    def result(self) -> str:
        """REFUSED, ACCEPTED, NOTHING_TO_DO or what happened instead."""
        lines = self.stderr.strip().splitlines()
        if self.exit_code is None:
            return ACCEPTED
        if self.exit_code == 0:
            return NOTHING_TO_DO
        if self.exit_code == 6 and len(lines) == 1 and "Traceback" not in self.stderr:
            return REFUSED
        return f"exit {self.exit_code}, stderr {self.stderr.strip()!r}"


# ----------------------------------------------------------------------------- builders

def checkpoint_file(make: Callable[[Original], bytes], name=CHECKPOINT_NAME):
    """A file `name` in the run directory holding make(original)."""
    def build(run_dir, original):
        path = run_dir / name
        path.write_bytes(make(original))
        return path
    return build


def params_file(make: Callable[[Original], bytes]):
    return checkpoint_file(make, PARAMS_NAME)


def checkpoint_state(change: Callable[[dict], object], protocol=pickle.HIGHEST_PROTOCOL):
    """A checkpoint holding the pickle of change(the original state)."""
    return checkpoint_file(lambda original: pickle.dumps(change(original.state), protocol))


def params_arrays(change: Callable[[dict], dict], save=np.savez):
    """A params file holding save(change(the original arrays by key))."""
    def build(run_dir, original):
        path = run_dir / PARAMS_NAME
        with open(path, "wb") as file:
            save(file, **change(dict(original.params)))
        return path
    return build


def params_zip(members: Callable[[dict], dict]):
    """A params file that is a zip of members(the original arrays): {member name: bytes}."""
    def build(run_dir, original):
        path = run_dir / PARAMS_NAME
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in members(original.params).items():
                archive.writestr(name, data)
        return path
    return build


def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


REMOVE = object()


def edited(tree, path: tuple, make: Callable):
    """A copy of `tree` (nested dicts and lists; the other nodes shared) whose node at `path` is
    make(that node, None where there is none), or is removed where make gives REMOVE."""
    head, *rest = path
    copy = list(tree) if isinstance(tree, list) else dict(tree)
    if rest:
        copy[head] = edited(tree[head], tuple(rest), make)
    elif (value := make(copy.get(head) if isinstance(copy, dict) else copy[head])) is REMOVE:
        del copy[head]
    else:
        copy[head] = value
    return copy


def edit(*path, make: Callable):
    return lambda state: edited(state, path, make)


def put(*path, value):
    return edit(*path, make=lambda _: value)


def every_leaf(key: str, make: Callable):
    """Each leaf of the state's `key` (a list of arrays, or the params tree) as make(leaf)."""
    return lambda state: {**state, key: jax.tree.map(make, state[key])}


def flipped(data: bytes, offset: int, mask: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ mask]) + data[offset + 1:]


def structure_offsets(data: bytes) -> list[int]:
    """The offsets of a pickle's opcodes and short arguments: every byte but array data."""
    ops = list(pickletools.genops(data))
    in_data = np.zeros(len(data), bool)
    for (_, arg, _), (_, _, next_position) in zip(ops, ops[1:]):
        if isinstance(arg, bytes) and len(arg) > 64:
            in_data[next_position - len(arg):next_position] = True
    return np.flatnonzero(~in_data).tolist()


def renamed_global(old: bytes, new: bytes):
    """The original state with an OrderedDict as wandb_run_id, pickled with the module or class
    name `old` of that OrderedDict renamed `new`: a reference to something that does not
    exist (unpickling it imports `new` or looks it up; it calls nothing)."""
    def make(original):
        data = pickle.dumps({**original.state, "wandb_run_id": OrderedDict()}, protocol=4)
        assert len(old) == len(new) and data.count(old) == 1
        return data.replace(old, new)
    return make


ARCHITECTURE_16x3 = {"hidden_dim": 16, "num_layers": 3, "obs_dim": OBS_DIM,
                     "num_actions": C.NUM_ACTIONS}


def architecture_16x3() -> dict:
    """Params of a 3 x 16 ActorCritic for this game, as NumPy arrays."""
    network = net.ActorCritic(hidden_dim=16, num_layers=3, num_actions=C.NUM_ACTIONS)
    params = net.init_params(network, jax.random.key(0), obs_dim=OBS_DIM)
    return jax.tree.map(np.asarray, params)


THE_ORIGINAL = checkpoint_file(lambda original: original.checkpoint_bytes)


def a_text_file(name: str):
    return checkpoint_file(lambda original: b"hello, I am not a checkpoint\n", name)


def a_directory(name: str):
    def build(run_dir, original):
        (run_dir / name).mkdir()
        return run_dir / name
    return build


def a_fifo(name: str):
    def build(run_dir, original):
        os.mkfifo(run_dir / name)
        return run_dir / name
    return build


def a_dangling_symlink(run_dir, original):
    (run_dir / CHECKPOINT_NAME).symlink_to(run_dir / "nowhere.pkl")
    return run_dir / CHECKPOINT_NAME


def a_symlink_loop(run_dir, original):
    (run_dir / CHECKPOINT_NAME).symlink_to(run_dir / CHECKPOINT_NAME)
    return run_dir / CHECKPOINT_NAME


def a_symlink_to_the_original(run_dir, original):
    (run_dir / "checkpoint_7.pkl").symlink_to(THE_ORIGINAL(run_dir, original))
    return run_dir / "checkpoint_7.pkl"


def nothing_there(run_dir, original):
    return run_dir / CHECKPOINT_NAME


def an_empty_run_dir(run_dir, original):
    return run_dir


def a_folder_of_runs(run_dir, original):
    THE_ORIGINAL(run_dir, original)
    return run_dir.parent


def run_dir_with_newest(name: str, make_newest: Callable[[Path, Original], None]):
    """A run directory with the original checkpoint and a newer file `name`."""
    def build(run_dir, original):
        THE_ORIGINAL(run_dir, original)
        make_newest(run_dir / name, original)
        return run_dir
    return build


# ----------------------------------------------------------------------------- the variants

def byte_variants(rng: random.Random) -> list[Variant]:
    variants = []
    fractions = [0.0, 1e-5, 1e-4, 1e-3, 0.01, 0.5, 0.999, 0.99999] + [
        rng.random() for _ in range(12)]
    for number, fraction in enumerate(fractions):
        def cut(data, fraction=fraction):
            return data[:min(int(fraction * len(data)), len(data) - 1)]
        variants += [
            Variant(f"checkpoint_truncated_{number:02}",
                    checkpoint_file(lambda original, cut=cut: cut(original.checkpoint_bytes)),
                    REFUSED, REFUSED),
            Variant(f"npz_truncated_{number:02}",
                    params_file(lambda original, cut=cut: cut(original.params_bytes)),
                    None, REFUSED)]
    for number in range(40):
        def flip(original, fraction=rng.random(), mask=rng.randrange(1, 256)):
            offsets = structure_offsets(original.checkpoint_bytes)
            return flipped(original.checkpoint_bytes, offsets[int(fraction * len(offsets))], mask)
        variants.append(Variant(f"checkpoint_opcode_flip_{number:02}", checkpoint_file(flip),
                                REFUSED_OR_ACCEPTED, REFUSED_OR_ACCEPTED))

    def flip_anywhere_in(field: str):
        def flip(original, fraction=rng.random(), mask=rng.randrange(1, 256)):
            data = getattr(original, field)
            return flipped(data, int(fraction * len(data)), mask)
        return flip
    variants += [Variant(f"checkpoint_flip_{number:02}",
                         checkpoint_file(flip_anywhere_in("checkpoint_bytes")),
                         REFUSED_OR_ACCEPTED, REFUSED_OR_ACCEPTED) for number in range(4)]
    variants += [Variant(f"npz_flip_{number:02}", params_file(flip_anywhere_in("params_bytes")),
                         None, REFUSED_OR_ACCEPTED) for number in range(24)]
    return variants + [
        Variant("checkpoint_with_bytes_after_its_stop",
                checkpoint_file(lambda original: original.checkpoint_bytes + b"\0junk"),
                ACCEPTED, ACCEPTED),
        Variant("checkpoint_holding_params",
                checkpoint_file(lambda original: original.params_bytes), REFUSED, REFUSED),
        Variant("npz_holding_a_checkpoint",
                params_file(lambda original: original.checkpoint_bytes), None, REFUSED),
        Variant("checkpoint_a_text_file", a_text_file(CHECKPOINT_NAME), REFUSED, REFUSED),
        Variant("npz_a_text_file", a_text_file(PARAMS_NAME), None, REFUSED),
        Variant("checkpoint_a_directory", a_directory(CHECKPOINT_NAME), REFUSED, REFUSED),
        Variant("npz_a_directory", a_directory(PARAMS_NAME), None, REFUSED),
        Variant("checkpoint_a_fifo", a_fifo(CHECKPOINT_NAME), REFUSED, REFUSED),
        Variant("npz_a_fifo", a_fifo(PARAMS_NAME), None, REFUSED),
        Variant("checkpoint_a_dangling_symlink", a_dangling_symlink, REFUSED, REFUSED),
        Variant("checkpoint_a_symlink_loop", a_symlink_loop, REFUSED, REFUSED),
        Variant("checkpoint_a_symlink_to_the_original", a_symlink_to_the_original,
                ACCEPTED, ACCEPTED),
        Variant("checkpoint_missing", nothing_there, REFUSED, REFUSED),
        Variant("run_dir_empty", an_empty_run_dir, REFUSED, REFUSED),
        Variant("run_dir_newest_checkpoint_truncated", run_dir_with_newest(
            "checkpoint_9.pkl",
            lambda path, original: path.write_bytes(original.checkpoint_bytes[:999])),
            REFUSED, REFUSED),
        Variant("run_dir_newest_checkpoint_a_directory", run_dir_with_newest(
            "checkpoint_9.pkl", lambda path, original: path.mkdir()), REFUSED, REFUSED),
        # --resume takes checkpoints only; the tools take the newest policy file, params_9.npz.
        Variant("run_dir_newest_params_a_fifo", run_dir_with_newest(
            "params_9.npz", lambda path, original: os.mkfifo(path)), ACCEPTED, REFUSED),
        Variant("folder_of_runs", a_folder_of_runs, REFUSED, REFUSED),
        Variant("npz_given_to_resume", params_arrays(lambda arrays: arrays),
                REFUSED, ACCEPTED),
        Variant("pickle_of_an_unknown_module",
                checkpoint_file(lambda original: b"\x80\x02cno_such_module_hm\nThing\n)\x81."),
                REFUSED, REFUSED),
        Variant("pickle_of_an_unknown_class",
                checkpoint_file(lambda original: b"\x80\x02ccollections\nNoSuchClassHm\n)\x81."),
                REFUSED, REFUSED),
        Variant("pickle_of_an_impossible_bytearray",
                checkpoint_file(lambda original: b"\x80\x05\x96" + (2**62).to_bytes(8, "little")
                                + b"."),
                REFUSED, REFUSED),  # CPython prints a SystemError freeing it: silenced
        Variant("checkpoint_holding_an_unknown_module",
                checkpoint_file(renamed_global(b"collections", b"collectionz")), REFUSED, REFUSED),
        Variant("checkpoint_holding_an_unknown_class",
                checkpoint_file(renamed_global(b"OrderedDict", b"OrderedDicz")), REFUSED, REFUSED),
    ]


def sweep_variants() -> list[Variant]:
    """Each key missing, and set to each of ODD_VALUES, with the outcomes SWEEP gives."""
    variants = []
    for key, (trainer_outcomes, tools_accept) in SWEEP.items():
        missing = ACCEPTED if key in OPTIONAL_KEYS else REFUSED
        variants.append(Variant(f"{key}_missing", checkpoint_state(put(key, value=REMOVE)),
                                missing, missing))
        for value_name, value in ODD_VALUES.items():
            variants.append(Variant(
                f"{key}_is_{value_name}", checkpoint_state(put(key, value=value)),
                trainer_outcomes.get(value_name, REFUSED),
                ACCEPTED if value_name in tools_accept else REFUSED))
    return variants


def fewer_rows(leaf):
    return leaf[:-1]


def with_nan(leaf):
    leaf = np.array(leaf)
    leaf.flat[0] = np.nan
    return leaf


# The tiny run's network: separate egocentric actor and critic torsos (the trainer's default).
KERNEL_0 = ("params", "params", "actor_torso_0", "kernel")
LOGITS_BIAS = ("params", "params", "actor_logits", "bias")
# (name, change of the state, the trainer's outcome, the tools' outcome)
STATE_CHANGES = [
    ("extra_key", put("from_the_future", value=np.zeros(3)), ACCEPTED, ACCEPTED),
    ("every_optional_key_missing",
     lambda state: {k: v for k, v in state.items() if k not in OPTIONAL_KEYS}, ACCEPTED, ACCEPTED),
    ("pickle_of_an_int", lambda state: 1, REFUSED, REFUSED),
    ("pickle_of_a_string", lambda state: "checkpoint", REFUSED, REFUSED),
    ("pickle_of_none", lambda state: None, REFUSED, REFUSED),
    ("pickle_of_an_array", lambda state: np.zeros(3), REFUSED, REFUSED),
    ("pickle_of_its_items", lambda state: list(state.items()), REFUSED, REFUSED),
    ("pickle_of_its_keys", lambda state: set(state), REFUSED, REFUSED),
    ("pickle_of_three_keys", lambda state: {k: state[k] for k in ckpt.REQUIRED_KEYS[:3]},
     REFUSED, REFUSED),
    ("pickle_of_a_dict_of_numbers", lambda state: {1: 2}, REFUSED, REFUSED),
    # A dict subclass is a global beyond NumPy's: refused (checkpoint_pickle.CHECKPOINT_GLOBALS).
    ("pickle_of_an_ordered_dict", OrderedDict, REFUSED, REFUSED),
    ("format_version_2", put("format_version", value=2), REFUSED, REFUSED),
    ("format_version_0", put("format_version", value=0), REFUSED, REFUSED),
    ("format_version_text", put("format_version", value="1"), REFUSED, REFUSED),
    ("format_version_an_array", put("format_version", value=np.array([1, 1])), REFUSED, REFUSED),
    ("update_true", put("update", value=True), REFUSED, REFUSED),
    ("update_a_whole_float", put("update", value=6.0), REFUSED, REFUSED),
    ("timesteps_true", put("timesteps", value=True), REFUSED, REFUSED),
    # The config: the trainer validates it, the tools do not read it.
    ("config_seed_negative", put("config", "seed", value=-1), REFUSED, ACCEPTED),
    ("config_num_envs_text", put("config", "num_envs", value="8"), REFUSED, ACCEPTED),
    ("config_lr_nan", put("config", "lr", value=math.nan), REFUSED, ACCEPTED),
    ("config_total_timesteps_true", put("config", "total_timesteps", value=True),
     REFUSED, ACCEPTED),
    ("config_lr_schedule_unknown", put("config", "lr_schedule", value="exponential"),
     REFUSED, ACCEPTED),
    ("config_lr_schedule_true", put("config", "lr_schedule", value=True), REFUSED, ACCEPTED),
    ("config_lr_schedule_missing", put("config", "lr_schedule", value=REMOVE), REFUSED, ACCEPTED),
    # What a checkpoint written before --lr-schedule holds instead: a constant learning rate.
    ("config_anneal_lr_false_for_lr_schedule", lambda state: {**state, "config": {
        **{k: v for k, v in state["config"].items() if k != "lr_schedule"}, "anneal_lr": False}},
     ACCEPTED, ACCEPTED),
    ("config_anneal_lr_text_beside_lr_schedule", put("config", "anneal_lr", value="yes"),
     ACCEPTED, ACCEPTED),  # an unknown field beside the one that counts: ignored
    ("config_torso_unknown", put("config", "torso", value="transformer"), REFUSED, ACCEPTED),
    ("config_activation_unknown", put("config", "activation", value="sigmoid"),
     REFUSED, ACCEPTED),
    ("config_reward_weights_bad", put("config", "reward_weights", value="kills"),
     REFUSED, ACCEPTED),
    ("config_distance_shaping_unknown", put("config", "distance_shaping", value="manhattan"),
     REFUSED, ACCEPTED),
    ("config_ent_coef_end_negative", put("config", "ent_coef_end", value=-0.1),
     REFUSED, ACCEPTED),
    # Missing, the architecture fields take the legacy values (a shared tanh MLP): they then
    # disagree with the network record (separate torsos), so the trainer refuses.
    ("config_shared_torso_missing", put("config", "shared_torso", value=REMOVE),
     REFUSED, ACCEPTED),
    ("config_shared_torso_true", put("config", "shared_torso", value=True), REFUSED, ACCEPTED),
    ("config_activation_relu", put("config", "activation", value="relu"), REFUSED, ACCEPTED),
    ("config_reward_fields_missing", lambda state: {**state, "config": {
        k: v for k, v in state["config"].items()
        if k not in ("reward_weights", "distance_shaping", "ent_coef_end", "clip_value_loss")}},
     ACCEPTED, ACCEPTED),
    ("config_num_devices_0", put("config", "num_devices", value=0), REFUSED, ACCEPTED),
    ("config_batch_not_divisible", put("config", "num_minibatches", value=5), REFUSED, ACCEPTED),
    ("config_num_devices_missing", put("config", "num_devices", value=REMOVE), ACCEPTED, ACCEPTED),
    ("config_extra_field", put("config", "from_the_future", value=1), ACCEPTED, ACCEPTED),
    ("config_num_envs_not_the_arrays", put("config", "num_envs", value=16), REFUSED, ACCEPTED),
    ("config_hidden_dim_64", put("config", "hidden_dim", value=64), REFUSED, ACCEPTED),
    ("config_num_layers_3", put("config", "num_layers", value=3), REFUSED, ACCEPTED),
    # The network record: the tools build from it, the trainer from the config.
    ("network_obs_dim_1000", put("network", "obs_dim", value=1000), REFUSED, REFUSED),
    ("network_num_actions_27", put("network", "num_actions", value=27), REFUSED, REFUSED),
    ("network_hidden_dim_64", put("network", "hidden_dim", value=64), REFUSED, REFUSED),
    ("network_obs_dim_missing", put("network", "obs_dim", value=REMOVE), REFUSED, REFUSED),
    ("network_num_actions_text", put("network", "num_actions", value="28"), REFUSED, REFUSED),
    ("network_num_layers_missing", put("network", "num_layers", value=REMOVE), REFUSED, REFUSED),
    ("network_hidden_dim_text", put("network", "hidden_dim", value="32"), REFUSED, REFUSED),
    ("network_hidden_dim_true", put("network", "hidden_dim", value=True), REFUSED, REFUSED),
    ("network_extra_field", put("network", "from_the_future", value=1), ACCEPTED, ACCEPTED),
    # The architecture keys: the trainer wants them to agree with the config; the tools build
    # what they say, which must fit the params.
    ("network_torso_unknown", put("network", "torso", value="transformer"), REFUSED, REFUSED),
    ("network_shared_true", put("network", "shared", value=True), REFUSED, REFUSED),
    ("network_shared_text", put("network", "shared", value="no"), REFUSED, REFUSED),
    ("network_torso_conv", put("network", "torso", value="conv"), REFUSED, REFUSED),
    ("network_activation_relu", put("network", "activation", value="relu"), REFUSED, ACCEPTED),
    # A record from before the other architectures: a shared MLP, which these params are not.
    ("network_architecture_keys_missing", lambda state: {**state, "network": {
        k: v for k, v in state["network"].items()
        if k not in ("torso", "shared", "activation", "conv_channels")}}, REFUSED, REFUSED),
    ("network_and_params_of_another_architecture",
     lambda state: {**state, "network": ARCHITECTURE_16x3, "params": architecture_16x3()},
     REFUSED, ACCEPTED),
    # Params.
    ("params_kernel_one_row_fewer", edit(*KERNEL_0, make=fewer_rows), REFUSED, REFUSED),
    ("params_logits_bias_longer", put(*LOGITS_BIAS, value=np.zeros(29, np.float32)),
     REFUSED, REFUSED),
    ("params_critic_bias_missing", put("params", "params", "critic_value", "bias", value=REMOVE),
     REFUSED, REFUSED),
    ("params_extra_leaf", put("params", "params", "actor_torso_0", "scale", value=np.ones(32)),
     REFUSED, ACCEPTED),
    ("params_extra_layer",
     put("params", "params", "actor_torso_2", value={"kernel": np.ones((32, 32), np.float32),
                                                     "bias": np.ones(32, np.float32)}),
     REFUSED, ACCEPTED),
    # A layer name that is not text (a flipped byte made one once): jax cannot sort the keys.
    ("params_a_tuple_key",
     put("params", "params", ("actor_torso_0", 1), value={"kernel": np.ones((2, 2), np.float32)}),
     REFUSED, REFUSED),
    ("params_an_int_key", put("params", "params", 7, value=np.ones(2, np.float32)),
     REFUSED, REFUSED),
    ("params_without_their_collection",
     lambda state: {**state, "params": state["params"]["params"]}, REFUSED, REFUSED),
    ("params_kernel_a_nested_list", edit(*KERNEL_0, make=lambda leaf: leaf.tolist()),
     REFUSED, REFUSED),
    ("params_kernel_a_float", put(*KERNEL_0, value=0.5), REFUSED, REFUSED),
    ("params_kernel_none", put(*KERNEL_0, value=None), REFUSED, REFUSED),
    ("params_float64", every_leaf("params", lambda leaf: leaf.astype(np.float64)),
     ACCEPTED, ACCEPTED),
    ("params_float16", every_leaf("params", lambda leaf: leaf.astype(np.float16)),
     ACCEPTED, ACCEPTED),
    ("params_int32", every_leaf("params", lambda leaf: leaf.astype(np.int32)), ACCEPTED, REFUSED),
    ("params_complex", every_leaf("params", lambda leaf: leaf.astype(np.complex64)),
     REFUSED, REFUSED),
    ("params_text", every_leaf("params", lambda leaf: leaf.astype(str)), REFUSED, REFUSED),
    ("params_objects", every_leaf("params", lambda leaf: leaf.astype(object)), REFUSED, REFUSED),
    ("params_one_nan", edit(*KERNEL_0, make=with_nan), REFUSED, REFUSED),
    ("params_all_inf", every_leaf("params", lambda leaf: np.full_like(leaf, np.inf)),
     REFUSED, REFUSED),
    # Optimizer state, env state and the other arrays: the trainer's only.
    ("opt_state_a_leaf_fewer", edit("opt_state", make=lambda leaves: leaves[:-1]),
     REFUSED, ACCEPTED),
    ("opt_state_a_leaf_more", edit("opt_state", make=lambda leaves: leaves + [np.zeros(3)]),
     REFUSED, ACCEPTED),
    ("opt_state_leaf_transposed", edit("opt_state", 2, make=np.transpose), REFUSED, ACCEPTED),
    ("opt_state_a_tuple", edit("opt_state", make=tuple), ACCEPTED, ACCEPTED),
    ("opt_state_float64", every_leaf("opt_state", lambda leaf: leaf.astype(np.float64)),
     REFUSED, ACCEPTED),  # Adam's step count among them: a float in an integer leaf
    ("opt_state_leaf_text", edit("opt_state", 1, make=lambda leaf: leaf.astype(str)),
     REFUSED, ACCEPTED),
    ("opt_state_count_none", put("opt_state", 0, value=None), REFUSED, ACCEPTED),
    ("opt_state_count_beyond_int32", put("opt_state", 0, value=2**40), REFUSED, ACCEPTED),
    ("opt_state_leaf_ragged", put("opt_state", 1, value=[[1.0, 2.0], [3.0]]), REFUSED, ACCEPTED),
    ("opt_state_leaf_nan", edit("opt_state", 2, make=with_nan), ACCEPTED, ACCEPTED),
    ("env_state_a_leaf_fewer", edit("env_state", make=lambda leaves: leaves[:-1]),
     REFUSED, ACCEPTED),
    ("env_state_a_leaf_more", edit("env_state", make=lambda leaves: leaves + [np.zeros(8)]),
     REFUSED, ACCEPTED),
    ("env_state_leaf_one_env_fewer", edit("env_state", 0, make=fewer_rows), REFUSED, ACCEPTED),
    ("env_state_leaf_float32", edit("env_state", 0, make=lambda leaf: leaf.astype(np.float32)),
     REFUSED, ACCEPTED),
    ("env_state_leaf_text", put("env_state", 0, value=["x"] * 8), REFUSED, ACCEPTED),
    ("env_state_leaf_beyond_int32", put("env_state", 0, value=[2**40] + [0] * 7),
     REFUSED, ACCEPTED),
    ("env_obs_swapped", edit("env_obs", make=lambda leaves: leaves[::-1]), REFUSED, ACCEPTED),
    ("env_obs_float64", edit("env_obs", 0, make=lambda leaf: leaf.astype(np.float64)),
     ACCEPTED, ACCEPTED),
    ("rng_three_words", put("rng", value=np.zeros(3, np.uint32)), REFUSED, ACCEPTED),
    ("rng_negative", put("rng", value=[-1, 0]), REFUSED, ACCEPTED),
    ("rng_uint64", edit("rng", make=lambda leaf: leaf.astype(np.uint64)), ACCEPTED, ACCEPTED),
    ("episode_return_three_envs", put("episode_return", value=np.zeros(3, np.float32)),
     REFUSED, ACCEPTED),
    ("episode_length_float", edit("episode_length", make=lambda leaf: leaf.astype(float)),
     REFUSED, ACCEPTED),
    # The optional fields a resume reads.
    ("metrics_window_updates_negative", put("metrics_window", "updates", value=-1),
     REFUSED, ACCEPTED),
    ("metrics_window_learning_rate_text", put("metrics_window", "learning_rate", value="x"),
     REFUSED, ACCEPTED),
    ("metrics_window_extra_field", put("metrics_window", "from_the_future", value=1),
     ACCEPTED, ACCEPTED),
    ("metrics_window_updates_inf", put("metrics_window", "updates", value=math.inf),
     REFUSED, ACCEPTED),
    ("metrics_window_seconds_huge", put("metrics_window", "seconds", value=10**400),
     REFUSED, ACCEPTED),
    ("metrics_window_sums_an_array", put("metrics_window", "sums", value=np.zeros(3)),
     REFUSED, ACCEPTED),
    # Lines its session could not write: metrics.jsonl lines of updates up to the checkpoint's.
    ("unwritten_metrics_line_of_its_update",
     put("unwritten_metrics_lines", value=['{"update": 6, "timesteps": 768}']), ACCEPTED, ACCEPTED),
    ("unwritten_metrics_line_of_a_later_update",
     put("unwritten_metrics_lines", value=['{"update": 7}']), REFUSED, ACCEPTED),
    ("unwritten_metrics_line_cut_short",
     put("unwritten_metrics_lines", value=['{"upd']), REFUSED, ACCEPTED),
    ("run_options_keep_negative", put("run_options", "keep_checkpoints", value=-1),
     REFUSED, ACCEPTED),
    ("run_options_wandb_mode_unknown", put("run_options", "wandb_mode", value="sometimes"),
     REFUSED, ACCEPTED),
    ("run_options_wandb_text", put("run_options", "wandb", value="yes"), REFUSED, ACCEPTED),
    ("run_options_save_interval_0", put("run_options", "save_interval", value=0),
     REFUSED, ACCEPTED),
    ("run_options_extra_field", put("run_options", "from_the_future", value=1),
     ACCEPTED, ACCEPTED),
    ("run_options_minutes_huge", put("run_options", "save_interval_minutes", value=10**400),
     ACCEPTED, ACCEPTED),
    ("explicit_config_a_number", put("explicit_config", value=["num_envs", 5]), REFUSED, ACCEPTED),
    ("explicit_config_a_tuple", edit("explicit_config", make=tuple), ACCEPTED, ACCEPTED),
]


def structure_variants() -> list[Variant]:
    return sweep_variants() + [
        Variant(name, checkpoint_state(change), trainer, tools)
        for name, change, trainer, tools in STATE_CHANGES] + [
        Variant("state_pickled_with_protocol_2", checkpoint_state(lambda state: state, 2),
                ACCEPTED, ACCEPTED)]


# The tiny run's layers: the trainer's default architecture, separate egocentric torsos (each
# with its cell embedding).
LAYERS = ("actor_cell_embed", "actor_torso_0", "actor_torso_1", "critic_cell_embed",
          "critic_torso_0", "critic_torso_1", "actor_logits", "critic_value")
NETWORK_KEYS = ("torso", "shared", "activation", "hidden_dim", "num_layers", "conv_channels",
                "obs_dim", "num_actions")


def params_only(change):
    """`change` applied to the params/ arrays alone; the network/ entries kept as they are."""
    def changed(arrays):
        params = {k: v for k, v in arrays.items() if k.startswith("params/")}
        return {**{k: v for k, v in arrays.items() if not k.startswith("params/")},
                **change(params)}
    return changed
PARAMS_KEYS = [f"params/{layer}/{kind}" for layer in LAYERS for kind in ("kernel", "bias")]
# (name, change of the arrays by key, the tools' outcome)
ARRAY_CHANGES = [
    *[(f"npz_{key.replace('/', '_')}_missing", lambda arrays, key=key: {
        k: v for k, v in arrays.items() if k != key}, REFUSED) for key in PARAMS_KEYS],
    ("npz_extra_array", lambda arrays: {**arrays, "params/actor_torso_0/scale": np.ones(32)},
     ACCEPTED),
    ("npz_extra_collection", lambda arrays: {**arrays, "junk": np.ones(3)}, REFUSED),
    ("npz_a_key_inside_an_array",
     lambda arrays: {**arrays, "params/actor_torso_0/kernel/x": np.ones(3)}, REFUSED),
    ("npz_keys_without_collection",
     lambda arrays: {(k.split("/", 1)[1] if k.startswith("params/") else k): v
                     for k, v in arrays.items()}, REFUSED),
    ("npz_none", lambda arrays: {}, REFUSED),
    ("npz_of_another_architecture",
     lambda arrays: params_files.flatten_params(architecture_16x3()), ACCEPTED),
    # An unused third actor layer: the network record (2 layers) decides what is built.
    ("npz_a_third_layer", lambda arrays: {
        **arrays, "params/actor_torso_2/kernel": np.ones((32, 32), np.float32),
        "params/actor_torso_2/bias": np.ones(32, np.float32)}, ACCEPTED),
    ("npz_for_1000_features",
     lambda arrays: {**arrays, "params/actor_torso_0/kernel":
                     arrays["params/actor_torso_0/kernel"][:1000]},
     REFUSED),
    ("npz_for_27_actions", lambda arrays: {
        **arrays, "params/actor_logits/kernel": arrays["params/actor_logits/kernel"][:, :27],
        "params/actor_logits/bias": arrays["params/actor_logits/bias"][:27]}, REFUSED),
    ("npz_kernel_a_vector",
     lambda arrays: {**arrays, "params/actor_torso_0/kernel": np.ones(32)}, REFUSED),
    ("npz_kernel_3d",
     lambda arrays: {**arrays, "params/actor_torso_1/kernel": np.ones((32, 32, 1))}, REFUSED),
    *[(f"npz_{dtype}", params_only(lambda arrays, dtype=dtype: {
        k: v.astype(dtype) for k, v in arrays.items()}), outcome)
      for dtype, outcome in [("float64", ACCEPTED), ("float16", ACCEPTED), ("int32", REFUSED),
                             ("bool", REFUSED), ("complex64", REFUSED), ("str", REFUSED)]],
    ("npz_with_nan", params_only(lambda arrays: {k: with_nan(v) for k, v in arrays.items()}),
     REFUSED),
    ("npz_all_inf", params_only(lambda arrays: {k: np.full_like(v, np.inf)
                                                for k, v in arrays.items()}), REFUSED),
    # The network/ entries (the architecture) and meta/ entries of a params file.
    ("npz_network_entries_missing", lambda arrays: {
        k: v for k, v in arrays.items() if not k.startswith("network/")}, ACCEPTED),
    # Each missing entry is inferred from the params' names and shapes (the activation reads
    # as tanh, which these are).
    *[(f"npz_network_{key}_missing", lambda arrays, key=key: {
        k: v for k, v in arrays.items() if k != f"network/{key}"}, ACCEPTED)
      for key in NETWORK_KEYS],
    ("npz_network_torso_unknown", lambda arrays: {
        **arrays, "network/torso": np.asarray("transformer")}, REFUSED),
    ("npz_network_torso_conv", lambda arrays: {**arrays, "network/torso": np.asarray("conv"),
                                               "network/conv_channels": np.asarray(4)}, REFUSED),
    ("npz_network_shared_true", lambda arrays: {**arrays, "network/shared": np.asarray(True)},
     REFUSED),
    ("npz_network_shared_text", lambda arrays: {**arrays, "network/shared": np.asarray("no")},
     REFUSED),
    ("npz_network_activation_relu", lambda arrays: {
        **arrays, "network/activation": np.asarray("relu")}, ACCEPTED),
    ("npz_network_activation_unknown", lambda arrays: {
        **arrays, "network/activation": np.asarray("sigmoid")}, REFUSED),
    ("npz_network_hidden_dim_64", lambda arrays: {
        **arrays, "network/hidden_dim": np.asarray(64)}, REFUSED),
    ("npz_network_num_actions_27", lambda arrays: {
        **arrays, "network/num_actions": np.asarray(27)}, REFUSED),
    ("npz_network_entry_an_array", lambda arrays: {
        **arrays, "network/hidden_dim": np.ones(3)}, REFUSED),
    ("npz_network_extra_entry", lambda arrays: {
        **arrays, "network/from_the_future": np.asarray(1)}, ACCEPTED),
    ("npz_meta_entries", lambda arrays: {
        **arrays, "meta/update": np.asarray(6), "meta/mean_stage": np.asarray(1.5),
        "meta/note": np.asarray("best")}, ACCEPTED),
]


def params_variants() -> list[Variant]:
    return [Variant(name, params_arrays(change), None, tools)
            for name, change, tools in ARRAY_CHANGES] + [
        Variant("npz_compressed", params_arrays(lambda arrays: arrays, np.savez_compressed),
                None, ACCEPTED),
        Variant("npz_an_empty_zip", params_zip(lambda arrays: {}), None, REFUSED),
        Variant("npz_with_a_text_member", params_zip(lambda arrays: {
            **{f"{k}.npy": npy(v) for k, v in arrays.items()}, "notes.txt": b"hi"}),
            None, REFUSED),
        Variant("npz_with_a_pickled_array", params_zip(lambda arrays: {
            **{f"{k}.npy": npy(v) for k, v in arrays.items()},
            "params/torso_0/kernel.npy": npy(np.array([None, 1.0], dtype=object))}),
            None, REFUSED),
    ]


VARIANTS = byte_variants(random.Random(SEED)) + structure_variants() + params_variants()


# ----------------------------------------------------------------------------- running them

class Runner:
    """Builds each variant once per program and keeps what the program made of it."""

    def __init__(self, original: Original, folder: Path):
        self.original, self.folder = original, folder
        self.resumed: dict[str, Outcome] = {}
        self.loaded: dict[str, list[Outcome]] = {}  # by watch_jax_agent.py, then evaluate.py

    def source(self, variant: Variant, program: str) -> Path:
        run_dir = self.folder / program / variant.name / RUN_NAME
        run_dir.mkdir(parents=True)
        return variant.build(run_dir, self.original)

    def resume(self, variant: Variant) -> Outcome:
        if variant.name not in self.resumed:
            source = self.source(variant, "trainer")
            self.resumed[variant.name] = run(
                lambda: cli.main(["--resume", str(source), "--no-wandb", *TWO_MORE_UPDATES]),
                source, ResumeAccepted)
        return self.resumed[variant.name]

    def tools(self, variant: Variant) -> list[Outcome]:
        if variant.name not in self.loaded:
            source = self.source(variant, "tools")
            self.loaded[variant.name] = [
                run(lambda: WATCH([str(source), "--delay", "0"]), source, PolicyAccepted),
                run(lambda: EVALUATE([str(source), "--baselines", "none", "--episodes", "1"]),
                    source, PolicyAccepted)]
        return self.loaded[variant.name]


def run(main: Callable[[], int], source: Path, accepted: type[BaseException]) -> Outcome:
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        try:
            code = main()
        except accepted:
            code = None
    return Outcome(source, code, stderr.getvalue())


WATCH = runpy.run_path(str(SCRIPTS / "watch_jax_agent.py"), run_name="fuzz_test")["main"]
EVALUATE = runpy.run_path(str(SCRIPTS / "evaluate.py"), run_name="fuzz_test")["main"]


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Original:
    checkpoint_dir = tmp_path_factory.mktemp("original")
    assert train(checkpoint_dir, RUN_NAME) == 0
    run_dir = checkpoint_dir / RUN_NAME
    with np.load(run_dir / PARAMS_NAME) as data:
        params = {key: data[key] for key in data.files}
    return Original(state=ckpt.load_checkpoint(run_dir / CHECKPOINT_NAME),
                    checkpoint_bytes=(run_dir / CHECKPOINT_NAME).read_bytes(),
                    params=params, params_bytes=(run_dir / PARAMS_NAME).read_bytes())


@pytest.fixture(scope="module")
def runner(original, tmp_path_factory):
    """A Runner, with the trainer stopped once it has restored its runner (or at a compile) and
    the tools once they have a policy; set up after `original`, whose run compiles for real."""
    restore_runner = resume.restore_runner

    def restore_then_stop(*args, **kwargs):
        restore_runner(*args, **kwargs)
        raise ResumeAccepted

    def compile_started(*args, **kwargs):
        raise CompileStarted

    def policy_accepted(*args, **kwargs):
        raise PolicyAccepted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resume, "restore_runner", restore_then_stop)
        patch.setattr(startup, "_run_init", compile_started)
        patch.setattr(startup, "_compile_chunk", compile_started)
        patch.setattr(cli, "make_env", functools.cache(cli.make_env))
        patch.setattr(ppo, "make_trainer", functools.cache(ppo.make_trainer))
        patch.setattr(viewer, "watch", policy_accepted)
        patch.setattr(evaluation, "run_episodes", policy_accepted)
        yield Runner(original, tmp_path_factory.mktemp("variants"))


def assert_outcome(outcome: Outcome, expected: str) -> None:
    allowed = {REFUSED, ACCEPTED} if expected == REFUSED_OR_ACCEPTED else {expected}
    result = outcome.result()
    assert result in allowed, f"{outcome.source}: {result}, not {expected}"


def each(variants):
    return [pytest.param(variant, id=variant.name) for variant in variants]


# ----------------------------------------------------------------------------- the tests

def test_the_sweep_covers_every_key_of_a_checkpoint(original):
    assert set(SWEEP) == set(original.state)
    assert len({variant.name for variant in VARIANTS}) == len(VARIANTS)
    # The params file's arrays are the ones ARRAY_CHANGES names: every layer's, and the
    # architecture record, as the checkpoint's network record gives it.
    assert {k for k in original.params if k.startswith("params/")} == set(PARAMS_KEYS)
    assert {k[len("network/"):]: original.params[k].item() for k in original.params
            if k.startswith("network/")} == original.state["network"]
    assert set(original.state["network"]) == set(NETWORK_KEYS)
    assert set(original.params) == (set(PARAMS_KEYS) | {f"network/{k}" for k in NETWORK_KEYS}
                                    | {"meta/env"})
    assert original.params["meta/env"].item() == "hackmatrix"


@pytest.mark.parametrize("variant", each(variant for variant in VARIANTS if variant.trainer))
def test_resume_refuses_before_compiling_or_accepts_each_variant(variant, runner):
    assert_outcome(runner.resume(variant), variant.trainer)


@pytest.mark.parametrize("variant", each(variant for variant in VARIANTS
                                         if variant.trainer == REFUSED))
def test_resume_errors_name_the_file(variant, runner):
    outcome = runner.resume(variant)
    assert str(outcome.source) in outcome.stderr, outcome.stderr


@pytest.mark.parametrize("variant", each(VARIANTS))
def test_the_tools_refuse_naming_the_file_or_accept_each_variant(variant, runner):
    for outcome in runner.tools(variant):
        assert_outcome(outcome, variant.tools)
        if outcome.result() == REFUSED:
            assert str(outcome.source) in outcome.stderr, outcome.stderr


def test_a_checkpoint_that_would_run_code_is_refused_before_it_runs(tmp_path, capsys):
    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self):
            return (Path.touch, (marker,))

    crafted = tmp_path / "checkpoint_1.pkl"
    crafted.write_bytes(pickle.dumps({"format_version": ckpt.FORMAT_VERSION, "x": RunsCode()}))
    with pytest.raises(ckpt.CheckpointError, match=r"names pathlib\S*\.Path\.touch"):
        ckpt.read_checkpoint(crafted)
    assert cli.main(["--resume", str(crafted), "--no-wandb"]) == EXIT_BAD_CHECKPOINT
    assert not marker.exists()
    assert capsys.readouterr().err.count("\n") == 1


def test_saving_refuses_what_the_reader_would_refuse_and_keeps_the_last_checkpoint(tmp_path):
    state = {key: np.zeros(1) for key in ckpt.REQUIRED_KEYS} | {
        "update": 3, "params": {"params": {"dense": {"kernel": np.zeros((2, 2))}}}}
    saved = ckpt.save_checkpoint(tmp_path, state)
    for stray in (Path("runs"), OrderedDict(), np.ma.masked_array([1.0])):
        with pytest.raises(TypeError, match=r"^a checkpoint cannot hold a \S+: its reader loads "):
            ckpt.save_checkpoint(tmp_path, state | {"wandb_run_id": stray})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_3.pkl", "params_3.npz"]
    assert checkpoint_pickle.unpickled(open(saved, "rb"))["update"] == 3
