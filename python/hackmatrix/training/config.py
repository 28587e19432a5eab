"""PPO training configuration, device-dependent defaults, auto-scaling and validation."""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import numpy as np

from hackmatrix.messages import shown

# Auto-scaling reference (specs/training.md): 256 envs x 128 steps, 4 minibatches x 4 epochs.
REFERENCE_BATCH_SIZE = 256 * 128
TARGET_MINIBATCH_SIZE = 8192
# Large batches keep the reference's epochs (each sample used 4 times) up to this many gradient
# steps per update: with one epoch, 2048 x 128 learned far less per env step (specs/learning.md).
MAX_GRADIENT_STEPS = 128
MAX_UPDATES_PER_CHUNK = 10
MAX_SEED = 2**32 - 1
# Counts and the batch index int32 arrays; the learning-rate schedule computes in float32.
MAX_COUNT = 2**31 - 1
MAX_FLOAT32 = float(np.finfo(np.float32).max)
# Bounds on what would take the machine's memory or days, refused before any work (exit 3): a
# trillion steps is days even at millions of steps a second; the compile grows with the layers
# (64 tiny ones take about a minute of CPU time on CPU, 100,000 would take days); 2**28
# hidden-to-hidden weights are 1 GiB of float32, 4 GiB with the gradients and Adam's moments.
MAX_TOTAL_TIMESTEPS = 10**12
MAX_NUM_LAYERS = 64
MAX_HIDDEN_WEIGHTS = 2**28
NUM_PROGRAMS = 23  # the game's programs (game/constants.py; not imported before the flags pass)


class ConfigError(ValueError):
    """Invalid flag value or combination (exit code 3)."""


@dataclass(frozen=True)
class TrainConfig:
    # The environment (`envs/registry.py`) and the algorithm (`algorithms/`).
    env: str = "hackmatrix"
    algo: str = "ppo"
    total_timesteps: int = 3_000_000
    num_envs: int = 256
    num_steps: int = 128
    num_minibatches: int = 4
    update_epochs: int = 4
    lr: float = 1e-3
    lr_schedule: str = "linear"
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    # The entropy coefficient moves linearly from ent_coef to ent_coef_end over the run;
    # None: it stays at ent_coef.
    ent_coef_end: float | None = None
    vf_coef: float = 0.5
    clip_value_loss: bool = True
    max_grad_norm: float = 0.5
    # Network (`network.py`).
    torso: str = "ego"
    shared_torso: bool = False
    activation: str = "tanh"
    hidden_dim: int = 256
    num_layers: int = 2
    conv_channels: int = 16
    # The network's compute dtype (DTYPES); params and the optimiser stay float32.
    dtype: str = "float32"
    # The reward the agent trains on (`game/reward_options.py`); evaluation always reports the
    # game's own outcomes.
    reward_weights: str = ""
    distance_shaping: str = "potential"
    program_potential: float = 0.0
    # A curriculum (`game/curriculum.py`): new games that own programs; evaluation plays the
    # rules' games.
    start_programs: int = 0
    start_programs_prob: float = 0.5
    seed: int = 0
    log_interval: int = 1
    # Devices that share the envs (data parallelism; the result depends on it).
    num_devices: int = 1
    # Independent agents trained side by side in one program, agent i from seed + i
    # (`seeds.py`); each has the batch and the run length above.
    num_seeds: int = 1

    def __post_init__(self):
        if self.ent_coef_end is None:
            object.__setattr__(self, "ent_coef_end", self.ent_coef)

    @property
    def updates_per_chunk(self) -> int:
        # Fixed for a run, so a shorter leftover chunk never recompiles; capped so that signals
        # and timed saves are handled within a few updates even with a long log interval.
        return min(self.log_interval, MAX_UPDATES_PER_CHUNK)

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    @property
    def gradient_steps_per_update(self) -> int:
        return self.num_minibatches * self.update_epochs

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def network_config(self) -> dict:
        """The architecture keys of a checkpoint's `network` dict (obs_dim and num_actions
        come from the env)."""
        return {"torso": self.torso, "shared": self.shared_torso, "activation": self.activation,
                "hidden_dim": self.hidden_dim, "num_layers": self.num_layers,
                "conv_channels": self.conv_channels if self.torso != "mlp" else 0,
                # Recorded only when not float32: a float32 network's record is the one every
                # file held before this option, and a record without it is float32.
                **({"dtype": self.dtype} if self.dtype != DEFAULT_DTYPE else {})}

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """The config a checkpoint recorded. Fields it lacks take the values its run trained
        with (`legacy_values`), not today's defaults."""
        known = {field.name for field in dataclasses.fields(cls)}
        values = {**legacy_values(values), **values}
        return cls(**{key: value for key, value in values.items() if key in known})


# What a checkpoint's `network` without these keys was trained with: the only architecture there
# was then (`network.py`).
LEGACY_ARCHITECTURE = {"torso": "mlp", "shared": True, "activation": "tanh", "conv_channels": 0}

# The network's compute dtypes (`--dtype`); a `network` record without `dtype` is float32.
DTYPES = ("float32", "bfloat16")
DEFAULT_DTYPE = "float32"

# Options that came after the first checkpoints: what a config without them trained with.
LEGACY_FIELDS = frozenset({"env", "algo", "num_devices", "num_seeds", "lr_schedule", "ent_coef_end", "clip_value_loss",
                           "torso", "shared_torso", "activation", "conv_channels", "dtype",
                           "reward_weights", "distance_shaping", "program_potential",
                           "start_programs", "start_programs_prob"})


def legacy_values(values: dict) -> dict:
    legacy = {"env": "hackmatrix", "algo": "ppo", "num_devices": 1, "num_seeds": 1, "ent_coef_end": values.get("ent_coef", TrainConfig.ent_coef),
              "clip_value_loss": True, "torso": "mlp", "shared_torso": True, "activation": "tanh",
              "conv_channels": TrainConfig.conv_channels, "dtype": DEFAULT_DTYPE, "reward_weights": "",
              "distance_shaping": "rules", "program_potential": 0.0, "start_programs": 0,
              "start_programs_prob": TrainConfig.start_programs_prob}
    if "anneal_lr" in values:
        legacy["lr_schedule"] = "linear" if values["anneal_lr"] else "constant"
    return legacy


LR_SCHEDULES = ("constant", "linear", "cosine")


# CPU: a first run of a few minutes that visibly learns. GPU/TPU: wide batches keep the device busy.
DEVICE_DEFAULTS = {
    "cpu": {"num_envs": 256, "num_steps": 128, "total_timesteps": 3_000_000, "log_interval": 1},
    "accelerator": {"num_envs": 2048, "num_steps": 128, "total_timesteps": 200_000_000,
                    "log_interval": 5},
}


def device_defaults(backend: str) -> dict:
    return DEVICE_DEFAULTS["cpu" if backend == "cpu" else "accelerator"]


ALGOS = ("ppo", "a2c")
# What `--algo` changes when the flags leave it: A2C as Stable-Baselines3 sets it (short
# rollouts, one gradient step per rollout on the whole batch, full n-step returns, constant lr).
ALGORITHM_DEFAULTS = {
    "ppo": {},
    "a2c": {"num_steps": 5, "lr": 7e-4, "lr_schedule": "constant", "gae_lambda": 1.0,
            "num_minibatches": 1, "update_epochs": 1},
}
# Another env than HackMatrix has no board for the grid torsos and no reward options: the
# PureJaxRL network (two dense layers of 64, tanh) and the env's own reward.
OTHER_ENV_DEFAULTS = {"torso": "mlp", "hidden_dim": 64, "distance_shaping": "rules"}


def run_defaults(backend: str, env: str = "hackmatrix", algo: str = "ppo") -> dict:
    """The defaults of a fresh run, before the user's flags: the device's, the algorithm's
    (of a known one) and the env's."""
    env_defaults = {} if env == "hackmatrix" else OTHER_ENV_DEFAULTS
    return {**device_defaults(backend), **ALGORITHM_DEFAULTS.get(algo, {}), **env_defaults}


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def auto_scale_for_batch_size(config: TrainConfig,
                              explicit: frozenset[str] = frozenset()) -> tuple[TrainConfig, dict]:
    """Scales num_minibatches and update_epochs for batches above the 32,768 reference.

    num_minibatches: among the counts that split each device's share of the batch evenly, never
        below the configured value, and whose minibatches hold 4,096-16,384 samples, the one
        closest (in log scale) to batch_size / 8192, so minibatches stay ~8,192 samples; if there
        is none (an awkward batch size such as a prime), the configured value is kept.
    update_epochs: max(1, min(configured, 128 // num_minibatches)), so each sample is trained
        on as often as in the reference (4 epochs) while an update takes at most 128 gradient
        steps; beyond 128 minibatches (a batch above ~1M samples), 1 epoch.
    Values named in `explicit` (set by the user) are never changed. Returns the new config and a
    {field: (old, new)} dict of what changed.
    """
    if (config.algo != "ppo"  # one gradient step on the whole batch
            or not REFERENCE_BATCH_SIZE < config.batch_size <= MAX_COUNT):  # `validate` refuses
        return config, {}
    changes = {}
    num_minibatches = config.num_minibatches
    if "num_minibatches" not in explicit:
        target = config.batch_size / TARGET_MINIBATCH_SIZE
        share = config.batch_size // max(config.num_devices, 1)
        candidates = [d for d in _divisors(share) if d >= config.num_minibatches
                      and TARGET_MINIBATCH_SIZE / 2 <= config.batch_size / d <= TARGET_MINIBATCH_SIZE * 2]
        if candidates:
            num_minibatches = min(candidates, key=lambda d: (abs(math.log(d / target)), d))
    update_epochs = config.update_epochs
    if "update_epochs" not in explicit and num_minibatches >= 1:  # else `validate` reports it
        update_epochs = max(1, min(config.update_epochs, MAX_GRADIENT_STEPS // num_minibatches))
    if num_minibatches != config.num_minibatches:
        changes["num_minibatches"] = (config.num_minibatches, num_minibatches)
    if update_epochs != config.update_epochs:
        changes["update_epochs"] = (config.update_epochs, update_epochs)
    scaled = dataclasses.replace(config, num_minibatches=num_minibatches, update_epochs=update_epochs)
    return scaled, changes


def device_split_error(config: TrainConfig, num_devices: int) -> str | None:
    """Why `num_devices` cannot share `config`'s envs and minibatches evenly; None if they can
    (or if a count is below 1, which `validate` reports)."""
    if min(num_devices, config.num_envs, config.num_minibatches) < 1:
        return None
    if config.num_envs % num_devices:
        return (f"--num-envs {config.num_envs} is not divisible by --num-devices {num_devices}: "
                "each device steps an equal share of the envs")
    if (config.batch_size // num_devices) % config.num_minibatches:
        return (f"each of the {num_devices} devices' share of the batch "
                f"({config.batch_size // num_devices} steps) is not divisible by num_minibatches "
                f"{config.num_minibatches}")
    return None


def validate(config: TrainConfig) -> None:
    """Raises ConfigError with the reason for any invalid value or combination."""
    # Types first: a checkpoint's config (or an API caller's) may hold 2.0 or True for a count,
    # which the arithmetic below would accept and a shape or a slice later would not.
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        is_bool = isinstance(value, (bool, np.bool_))
        expected = {"str": (isinstance(value, str), "text"),
                    "bool": (is_bool, "true or false"),
                    "int": (isinstance(value, numbers.Integral) and not is_bool, "an integer"),
                    "float": (isinstance(value, numbers.Real) and not is_bool, "a number")}
        # An optional field has its value by now (`__post_init__`).
        valid, description = expected[field.type.removesuffix(" | None")]
        if not valid:
            raise ConfigError(f"{field.name} must be {description}, got {value!r}")
    positive_ints = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs",
                     "hidden_dim", "num_layers", "log_interval", "num_devices", "conv_channels",
                     "num_seeds")
    for name in positive_ints:
        if getattr(config, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(config, name)}")
        limit = {"total_timesteps": MAX_TOTAL_TIMESTEPS,
                 "num_layers": MAX_NUM_LAYERS}.get(name, MAX_COUNT)
        if getattr(config, name) > limit:
            raise ConfigError(f"--{name.replace('_', '-')} must be at most {limit:,}, got "
                              f"{shown(getattr(config, name))}")
    # As for the batch: a larger array is more than XLA's 32-bit indices can address.
    if config.hidden_dim ** 2 > MAX_COUNT:
        raise ConfigError(f"--hidden-dim {config.hidden_dim} makes hidden weight matrices of "
                          f"{config.hidden_dim ** 2} entries, over {MAX_COUNT}: at most "
                          f"{math.isqrt(MAX_COUNT)}")
    torsos = 1 if config.shared_torso else 2
    hidden_weights = torsos * (config.num_layers - 1) * config.hidden_dim ** 2
    if hidden_weights > MAX_HIDDEN_WEIGHTS:
        raise ConfigError(f"--hidden-dim {config.hidden_dim} with --num-layers "
                          f"{config.num_layers} makes {hidden_weights:,} hidden weights in "
                          f"{torsos} torso(s), over the {MAX_HIDDEN_WEIGHTS:,} that train "
                          "within memory")
    if config.algo not in ALGOS:
        raise ConfigError(f"--algo must be one of {', '.join(ALGOS)}, got {config.algo!r}")
    if config.algo == "a2c" and (config.num_minibatches, config.update_epochs) != (1, 1):
        raise ConfigError(f"--algo a2c takes one gradient step per rollout: --num-minibatches "
                          f"and --update-epochs must be 1, got {config.num_minibatches} and "
                          f"{config.update_epochs}")
    if not config.env.isprintable() or not config.env.strip():
        raise ConfigError(f"--env must be printable text, got {config.env!r}")
    if config.env != "hackmatrix" and (config.reward_weights or config.distance_shaping != "rules"
                                       or config.program_potential):
        raise ConfigError(f"--reward-weights, --distance-shaping and --program-potential shape "
                          f"HackMatrix's reward: --env {config.env} trains on its own")
    if config.env != "hackmatrix" and config.start_programs:
        raise ConfigError(f"--start-programs starts HackMatrix games with programs: --env "
                          f"{config.env} has none")
    if not 0 <= config.start_programs <= NUM_PROGRAMS:
        raise ConfigError(f"--start-programs must be in [0, {NUM_PROGRAMS}] (the game's "
                          f"programs), got {config.start_programs}")
    if config.env != "hackmatrix" and config.torso != "mlp":
        raise ConfigError(f"--torso {config.torso} reads HackMatrix's board: --env {config.env} "
                          "takes --torso mlp")
    # Imported here: the flags are checked before JAX is imported.
    from hackmatrix.game import reward_options
    from hackmatrix.training.network import architecture_problem, first_layer_inputs
    grid_inputs = first_layer_inputs(config.network_config, 0)  # 0 for an mlp torso
    if max(9 * config.conv_channels ** 2, grid_inputs * config.hidden_dim) > MAX_COUNT:
        raise ConfigError(f"--conv-channels {config.conv_channels} with --hidden-dim "
                          f"{config.hidden_dim} makes weight matrices of over {MAX_COUNT} entries")
    if config.batch_size > MAX_COUNT:
        raise ConfigError(f"batch size {config.batch_size} (num_envs {config.num_envs} x num_steps "
                          f"{config.num_steps}) is over {MAX_COUNT}")
    if config.batch_size % config.num_minibatches:
        raise ConfigError(f"batch size {config.batch_size} (num_envs {config.num_envs} x num_steps "
                          f"{config.num_steps}) is not divisible by num_minibatches "
                          f"{config.num_minibatches}: choose --num-minibatches among its "
                          f"divisors, or another --num-envs or --num-steps")
    if config.minibatch_size < 2:
        # Advantages are normalised within each minibatch: a lone sample's becomes 0.
        raise ConfigError(f"--num-minibatches {config.num_minibatches} makes minibatches of one "
                          "sample, whose normalised advantage is 0 (no policy gradient): at most "
                          f"{config.batch_size // 2} for a batch of {config.batch_size}")
    reason = device_split_error(config, config.num_devices)
    if reason:
        raise ConfigError(reason)
    if config.num_seeds > 1 and config.num_devices > 1:
        raise ConfigError(f"--num-seeds {config.num_seeds} trains its agents on one device: "
                          f"--num-devices must be 1, got {config.num_devices}")
    # The agents' rollouts are arrays of one program, sized like one larger batch.
    if config.num_seeds * config.batch_size > MAX_COUNT:
        raise ConfigError(f"--num-seeds {config.num_seeds} agents of {config.batch_size} steps "
                          f"per update make {config.num_seeds * config.batch_size} steps, over "
                          f"{MAX_COUNT}")
    if config.total_timesteps < config.batch_size:
        raise ConfigError(f"--total-timesteps {config.total_timesteps} is less than one update's "
                          f"batch of {config.batch_size} steps")
    for name in ("gamma", "gae_lambda", "start_programs_prob"):
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise ConfigError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(config, name)}")
    # Finite in float32, the precision the update computes in.
    for name in ("lr", "ent_coef", "ent_coef_end", "vf_coef"):
        value = getattr(config, name)
        if not 0.0 <= value <= MAX_FLOAT32:
            raise ConfigError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {value}")
    # 0 would freeze the policy: every ratio clipped, or every gradient scaled to nothing.
    for name in ("clip_eps", "max_grad_norm"):
        value = getattr(config, name)
        if not 0.0 < value <= MAX_FLOAT32:
            raise ConfigError(f"--{name.replace('_', '-')} must be a finite number > 0, got {value}")
    if config.lr_schedule not in LR_SCHEDULES:
        raise ConfigError(f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)}, got "
                          f"{config.lr_schedule!r}")
    problem = architecture_problem(config.network_config)
    if problem:
        raise ConfigError(f"--{problem}")
    try:
        reward_options.env_params(config.reward_weights, config.distance_shaping,
                                  config.program_potential)
    except reward_options.RewardOptionError as error:
        raise ConfigError(str(error)) from None
    if not 0 <= config.seed <= MAX_SEED:
        raise ConfigError(f"--seed must be in [0, {MAX_SEED}] (JAX's PRNGKey takes 32 bits), "
                          f"got {config.seed}")
    if config.seed + config.num_seeds - 1 > MAX_SEED:
        raise ConfigError(f"--seed {config.seed} with --num-seeds {config.num_seeds}: agent i "
                          f"trains seed --seed + i, so --seed must be at most "
                          f"{MAX_SEED - config.num_seeds + 1}")
