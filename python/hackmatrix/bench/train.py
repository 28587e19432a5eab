"""`benchmark.py train`: compile time and steady-state PPO training SPS at several num_envs (and
device counts: `--num-devices 1,2`).

For each num_envs it also measures a network-only bound: the same PPO update (same code, same
shapes) fed with stored observations by a replay env whose step is a table lookup, so the
difference to the real run is the cost of stepping the game. The timed chunks of the real run
and the bound alternate (in a round, each times one chunk; every other round in reverse order),
so the shared machine's slow spells hit both. The rollout overhead is the median of the rounds'
own ratios (a real chunk and the bound's chunk timed next to it), with their quartiles beside
it: a ratio of the two medians would pair chunks from different spells of the machine.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix import xla_options
from hackmatrix.shell import jax_backend
from hackmatrix.envs.hackmatrix_env import HACKMATRIX_METRICS
from hackmatrix.bench.arguments import (add_count_list, add_update_shape, network_options,
                                        positive_int)
from hackmatrix.bench.timing import lower_and_compile, quartiles
from hackmatrix.tools.cli import ArgumentParser
from hackmatrix.training import devices, distribution
from hackmatrix.training.config import (ConfigError, TrainConfig, auto_scale_for_batch_size,
                                        validate)

REPLAY_LENGTH = 256


@dataclasses.dataclass(frozen=True)
class ReplayEnv:
    """Replays REPLAY_LENGTH recorded observations (with their rewards and dones) in a loop."""
    metrics = HACKMATRIX_METRICS  # its info carries HackMatrix's keys
    features: np.ndarray
    action_mask: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    reward_components: np.ndarray

    @property
    def observation_size(self) -> int:
        return self.features.shape[-1]

    @property
    def num_actions(self) -> int:
        return self.action_mask.shape[-1]

    def _observation(self, index):
        from hackmatrix.game.env import EnvObservation
        return EnvObservation(jnp.asarray(self.features)[index], jnp.asarray(self.action_mask)[index])

    def reset(self, key, params):
        index = jax.random.randint(key, (), 0, REPLAY_LENGTH)
        return self._observation(index), index

    def batch_reset(self, keys, params):
        return jax.vmap(self.reset, in_axes=(0, None))(keys, params)

    def batch_step(self, keys, indices, actions, params):
        return jax.vmap(self.step, in_axes=(0, 0, 0, None))(keys, indices, actions, params)

    def step(self, key, index, action, params):
        following = (index + 1) % REPLAY_LENGTH
        info = {"reward_components": jnp.asarray(self.reward_components)[following],
                "stage": jnp.int32(1), "score": jnp.int32(0), "won": jnp.bool_(False),
                "death": jnp.asarray(self.done)[following], "invalid_action": jnp.bool_(False),
                "truncated": jnp.bool_(False)}
        return (self._observation(following), following, jnp.asarray(self.reward)[following],
                jnp.asarray(self.done)[following], info)


def record_replay(env, env_params, seed: int = 0) -> ReplayEnv:
    """Plays REPLAY_LENGTH steps of the real game with uniformly random valid actions."""
    def play(carry, key):
        obs, state = carry
        action_key, step_key = jax.random.split(key)
        action = distribution.sample(action_key, jnp.zeros(obs.action_mask.shape), obs.action_mask)
        next_obs, state, reward, done, info = env.step(step_key, state, action, env_params)
        return (next_obs, state), (next_obs, reward, done, info["reward_components"])

    reset_key, play_key = jax.random.split(jax.random.PRNGKey(seed))
    first = env.reset(reset_key, env_params)
    _, (obs, reward, done, components) = jax.jit(lambda c, k: jax.lax.scan(play, c, k))(
        first, jax.random.split(play_key, REPLAY_LENGTH))
    return ReplayEnv(np.asarray(obs.features), np.asarray(obs.action_mask), np.asarray(reward),
                     np.asarray(done), np.asarray(components))


def benchmark_config(num_envs: int, num_steps: int, hidden_dim: int, num_layers: int,
                     log_interval: int, num_devices: int = 1,
                     explicit: dict | None = None) -> TrainConfig:
    """The trainer's config for a benchmark, with the minibatches and epochs not in `explicit`
    auto-scaled as the CLI does (ConfigError if the combination is invalid)."""
    explicit = explicit or {}
    base = TrainConfig(num_envs=num_envs, num_steps=num_steps, hidden_dim=hidden_dim,
                       num_layers=num_layers, log_interval=log_interval, total_timesteps=10**9,
                       num_devices=num_devices, **explicit)
    config, _ = auto_scale_for_batch_size(base, frozenset(explicit))
    validate(config)
    return config


class CompiledChunk(NamedTuple):
    """The trainer's update chunk for one config and env, compiled as the benchmarks time it."""
    runner: Any            # the trainer's initial state (key 0)
    schedule: Any
    run_chunk: Callable    # compiled: (runner, num_active, schedule) -> (runner, metrics)
    trace_lower_s: float   # the chunk's tracing and lowering
    xla_compile_s: float   # the chunk's XLA compile


def compile_chunk(config: TrainConfig, env, env_params) -> CompiledChunk:
    """Make the trainer, run its `init` and compile its update chunk."""
    from hackmatrix.training.trainer import make_schedule, make_trainer
    trainer = make_trainer(config, env, env_params)
    runner = jax.block_until_ready(jax.jit(
        trainer.init, compiler_options=xla_options.compiler_options(),
        out_shardings=trainer.runner_sharding)(jax.random.PRNGKey(0)))
    schedule = make_schedule(config)
    compiled, trace_lower_s, xla_compile_s = lower_and_compile(
        trainer.run_chunk, runner, jnp.int32(0), schedule)
    return CompiledChunk(runner, schedule, compiled, trace_lower_s, xla_compile_s)


class _Prepared:
    """One config compiled for one env, ready to time update chunks."""

    def __init__(self, config: TrainConfig, env, env_params):
        self.config = config
        start = time.perf_counter()
        self.runner, self.schedule, self.run_chunk, _, _ = compile_chunk(config, env, env_params)
        self.compile_s = time.perf_counter() - start
        self.runner, metrics = self.run_chunk(self.runner, jnp.int32(1), self.schedule)
        jax.block_until_ready(metrics)
        self.first_update_s = time.perf_counter() - start
        self.sps = []

    def time_chunk(self):
        start = time.perf_counter()
        self.runner, metrics = self.run_chunk(self.runner, jnp.int32(self.config.updates_per_chunk),
                                              self.schedule)
        jax.block_until_ready(metrics)
        self.sps.append(self.config.updates_per_chunk * self.config.batch_size
                        / (time.perf_counter() - start))


def measure(configs: list[TrainConfig], env, env_params, repeats: int, replay=None):
    """Per config: compile seconds, first-update seconds and median steady-state SPS, for the
    real env and (if given) the replay env. The timed chunks of all of them alternate, so a slow
    spell of the shared machine hits each and the ratios between them stay meaningful."""
    runs = [[_Prepared(config, env, env_params)]
            + ([_Prepared(config, replay, env_params)] if replay is not None else [])
            for config in configs]
    ordered = [run for pair in runs for run in pair]
    for round_index in range(repeats):
        # Reversed every other round, so that no run always follows the same one.
        for run in ordered if round_index % 2 == 0 else reversed(ordered):
            run.time_chunk()
    return [[{"compile_s": run.compile_s, "first_update_s": run.first_update_s,
              "sps": statistics.median(run.sps), "sps_all": run.sps} for run in pair]
            for pair in runs]


def _rollout_overhead(train_sps: list[float], bound_sps: list[float]):
    """(median, 25th, 75th percentile) of the rounds' own overheads, `bound / train - 1` for the
    chunks of one round."""
    per_round = [bound / train - 1.0 for train, bound in zip(train_sps, bound_sps, strict=True)]
    return (statistics.median(per_round), *quartiles(per_round))


def main(argv=None) -> int:
    parser = ArgumentParser(prog="benchmark.py train", description=__doc__)
    add_count_list(parser, "--num-envs", [64, 256, 1024], "env counts")
    add_update_shape(parser)
    parser.add_argument("--num-minibatches", type=positive_int, help="default: auto-scaled from 4")
    parser.add_argument("--update-epochs", type=positive_int, help="default: auto-scaled from 4")
    parser.add_argument("--updates", type=positive_int, default=2,
                        help="updates per timed chunk (default 2; at most 10, the trainer's "
                             "largest chunk: a larger value times chunks of 10)")
    parser.add_argument("--repeats", type=positive_int, default=4,
                        help="timed rounds, every other one in reverse order (an even count "
                             "gives both orders as many); medians are shown (default 4)")
    add_count_list(parser, "--num-devices", [1],
                   "counts of devices that share the envs, measured interleaved (on CPU, N makes "
                   "JAX show N CPU devices: hackmatrix/training/devices.py)")
    parser.add_argument("--use-cache", action="store_true",
                        help="allow the persistent compilation cache (default off: cold compiles)")
    parser.add_argument("--skip-network-only", action="store_true",
                        help="measure the real training only, without the network-only bound")
    args = parser.parse_args(argv)
    devices.request_cpu_devices(max(args.num_devices))
    explicit = {name: getattr(args, name) for name in ("num_minibatches", "update_epochs")
                if getattr(args, name) is not None}
    explicit.update(network_options(args))
    configs = {}  # num_envs -> its configs, one per device count
    for num_envs in args.num_envs:
        for num_devices in args.num_devices:
            try:
                config = benchmark_config(num_envs, args.num_steps, args.hidden_dim,
                                          args.num_layers, args.updates, num_devices, explicit)
            except ConfigError as error:
                parser.error(str(error))
            configs.setdefault(num_envs, []).append(config)
    if not args.use_cache:
        jax.config.update("jax_enable_compilation_cache", False)
    backend = jax_backend.start()
    if (error := devices.missing_devices_error(max(args.num_devices))) is not None:
        parser.error(error)

    from hackmatrix.envs.hackmatrix_env import HackMatrixTrainingEnv as HackMatrixEnv
    env = HackMatrixEnv()
    env_params = env.default_params
    replay = None if args.skip_network_only else record_replay(env, env_params)
    print(f"backend={backend}{xla_options.cpu_compile_label(backend)} "
          f"devices={jax.local_device_count()} "
          f"network={configs[args.num_envs[0]][0].network_config} num_steps={args.num_steps}")
    print(f"{'num_envs':>8} {'dev':>3} {'batch':>8} {'mb':>3} {'ep':>3} {'compile_s':>9} "
          f"{'first_upd_s':>11} {'train_sps':>10} {'net_only_sps':>12} {'rollout_overhead':>16} "
          f"{'per_round_p25-p75':>17}")
    for same_envs in configs.values():
        for config, results in zip(same_envs,
                                   measure(same_envs, env, env_params, args.repeats, replay)):
            full = results[0]
            line = (f"{config.num_envs:>8} {config.num_devices:>3} {config.batch_size:>8} "
                    f"{config.num_minibatches:>3} {config.update_epochs:>3} "
                    f"{full['compile_s']:>9.1f} {full['first_update_s']:>11.1f} {full['sps']:>10.0f}")
            if replay is not None:
                bound = results[1]
                overhead, low, high = _rollout_overhead(full["sps_all"], bound["sps_all"])
                line += f" {bound['sps']:>12.0f} {overhead:>15.1%} {f'{low:.1%}-{high:.1%}':>17}"
            print(line, flush=True)
    return 0
