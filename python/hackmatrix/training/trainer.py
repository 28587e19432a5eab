"""The training loop's device side, in the PureJaxRL style: rollouts, GAE, and the update of
an algorithm (`algorithms/`), jitted in chunks of updates.

`make_trainer(config, env, env_params)` returns pure functions. `env` follows the env contract
(`envs/contract.py`): the batched pair `batch_reset(keys, params) -> (obs, states)` /
`batch_step(keys, states, actions, params) -> (obs, states, reward, done, info)`, the static
sizes `observation_size` (of `obs.features`) and `num_actions`, its `metrics`, and optionally
`reset_shapes(params)`, the shapes of one env's reset, for `init_shapes`. Its per-env step keys
are raw uint32[2] keys from the game's hash splitter (`spawning.split_key`). The algorithm is
`config.algo`'s (`algorithms.ALGORITHMS`); nothing here depends on which.
  init(key) -> RunnerState: not jitted. The CLI jits it with
      `out_shardings=trainer.runner_sharding`; a runner made or restored otherwise goes through
      `jax.device_put(runner, trainer.runner_sharding)` before its first `run_chunk`: on another
      sharding it is another input type, and the chunk compiles a second time.
  init_shapes(key) -> `jax.eval_shape(init, key)`, without tracing the envs' reset when it can
  run_chunk(runner, num_active, schedule) -> (runner, metrics): `config.updates_per_chunk`
      updates in one jitted `lax.scan`; only the first `num_active` (an int32 array; a Python
      int is another input type) run, and the rest pass the state through with metrics of 0,
      so a leftover count never recompiles. `schedule` (lr, total_timesteps) is traced, so
      changing either on resume reuses the compiled program. Metrics are stacked per update,
      shape [updates_per_chunk]: read the first `num_active`.
  update(runner, schedule) -> (runner, metrics): one update, not jitted, on one device, for the
      caller to scan, vmap and jit as PureJaxRL does (specs/training.md, "From Python", shows a
      whole run vmapped over seeds, and how far a seed matches a single run).
Update k depends only on the carried RunnerState (RNG included), so how updates are grouped into
chunks, and whether a run was interrupted and resumed in between, never changes the result.

Several agents (`config.num_seeds` = K > 1, one device): each function above maps the one-agent
function over a leading agent axis (`jax.vmap`), PureJaxRL's way of training seeds side by side:
`init` takes K keys (`seeds.agent_keys`), every leaf of the runner has K first, and the metrics
of `run_chunk` are [updates_per_chunk, K] (those of `update`, [K]). Agent i computes what a
one-agent run of its key computes, up to the last bits of float sums (specs/training.md).

Data parallelism: per-env data (env state, observations, episode accumulators, rollout
transitions) has num_envs as its leading axis; parameters and optimiser state live in TrainState,
apart from per-env data. With `config.num_devices` > 1 the chunk runs under `jax.shard_map`: each
device steps its share of the envs with its own random keys (the carried key folded with the
device index) and shuffles its share of the batch; gradients, loss diagnostics and the
advantage normalisation are averaged over devices, so the parameters stay replicated. A
minibatch is then the union of one shard-local minibatch per device. With one device the
program has no collectives and is the single-device program.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from hackmatrix import xla_options
from hackmatrix.game.spawning import split_key
from hackmatrix.training import distribution, schedules
from hackmatrix.training.algorithms import ALGORITHMS
from hackmatrix.training.algorithms.base import (Batch, Coefficients, DeviceShare, TrainState,
                                                 Transition)
from hackmatrix.training.config import ConfigError, TrainConfig, validate
from hackmatrix.training.network import (ActorCritic, init_params, network_from_config,
                                         observation_size)


ENV_AXIS = "envs"  # the mesh axis that per-env data is split over


class EnvBatch(NamedTuple):
    """Everything per env; every leaf has num_envs as its leading axis."""
    env_state: Any
    obs: Any                      # EnvObservation the next action will be chosen from
    episode_return: jax.Array     # f32[num_envs] return of the running episode so far
    episode_length: jax.Array     # i32[num_envs]


class RunnerState(NamedTuple):
    train: TrainState
    envs: EnvBatch
    rng: jax.Array


class StepStats(NamedTuple):
    """Per-step values for metrics only."""
    ended_return: jax.Array  # return of the episode that ended at this step, else 0
    ended_length: jax.Array
    env: dict                # the env's own (`env.metrics.step_stats`)


class Schedule(NamedTuple):
    """Traced learning-rate schedule inputs (float32 scalars)."""
    lr: jax.Array
    total_timesteps: jax.Array


def make_schedule(config: TrainConfig) -> Schedule:
    return Schedule(jnp.float32(config.lr), jnp.float32(config.total_timesteps))


def progress(schedule: Schedule, schedule_timesteps: jax.Array) -> jax.Array:
    return schedule_timesteps / schedule.total_timesteps


def learning_rate(config: TrainConfig, schedule: Schedule, schedule_timesteps: jax.Array) -> jax.Array:
    return schedule.lr * schedules.decay_fraction(config.lr_schedule,
                                                  progress(schedule, schedule_timesteps))


def compute_gae(values: jax.Array, rewards: jax.Array, dones: jax.Array, last_value: jax.Array,
                gamma: float, gae_lambda: float) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over [num_envs, num_steps] arrays.

    `dones[:, t]` means the episode ended at step t, so step t does not bootstrap from t+1 (whose
    observation already belongs to the next episode). Returns (advantages, value targets).
    """
    def backward(carry, step):
        next_advantage, next_value = carry
        value, reward, done = step
        not_done = 1.0 - done.astype(jnp.float32)
        delta = reward + gamma * next_value * not_done - value
        advantage = delta + gamma * gae_lambda * not_done * next_advantage
        return (advantage, value), advantage

    time_major = (values.T, rewards.T, dones.T)
    _, advantages = jax.lax.scan(backward, (jnp.zeros_like(last_value), last_value), time_major,
                                 reverse=True)
    advantages = advantages.T
    return advantages, advantages + values


def explained_variance(values: jax.Array, targets: jax.Array,
                       mean: Callable[[jax.Array], jax.Array] = lambda x: x) -> jax.Array:
    """1 - Var(targets - values) / Var(targets) over every element: 1 when the value head
    predicts its targets exactly, 0 when it does no better than their mean, negative when worse;
    NaN when the targets do not vary. `mean` averages a per-device mean over the devices."""
    def variance(x):
        centre = mean(x.mean())
        return mean(jnp.square(x - centre).mean())

    target_variance = variance(targets)
    return jnp.where(target_variance > 0,
                     1.0 - variance(targets - values) / target_variance, jnp.nan)


class Trainer(NamedTuple):
    network: ActorCritic
    optimizer: optax.GradientTransformation
    init: Callable[[jax.Array], RunnerState]
    init_shapes: Callable[[jax.Array], RunnerState]  # init's output shapes, traced cheaply
    run_chunk: Callable[[RunnerState, jax.Array, Schedule], tuple[RunnerState, dict]]
    runner_sharding: Any  # RunnerState prefix of NamedShardings: per-env data split, rest replicated
    # One update, not jitted, for one device: the PureJaxRL building block (module docstring).
    update: Callable[[RunnerState, Schedule], tuple[RunnerState, dict]]


def make_trainer(config: TrainConfig, env, env_params) -> Trainer:
    """The first `config.num_devices` local devices share the envs. Raises ConfigError for an
    invalid config (`config.validate`), before anything is traced."""
    validate(config)
    obs_dim, num_actions = env.observation_size, env.num_actions
    if config.torso != "mlp" and obs_dim != observation_size():
        raise ConfigError(f"--torso {config.torso} reads HackMatrix's board from the observation; "
                          f"this env's has {obs_dim} features: use --torso mlp")
    network = network_from_config({**config.network_config, "num_actions": num_actions})
    algorithm = ALGORITHMS[config.algo]
    optimizer = algorithm.make_optimizer(config)
    env_metrics = env.metrics
    num_devices = config.num_devices
    devices = jax.local_devices()[:num_devices]
    if len(devices) != num_devices:
        raise ValueError(f"num_devices={num_devices}, but JAX sees {len(devices)} local devices")
    mesh = jax.sharding.Mesh(np.array(devices), (ENV_AXIS,))
    # Inside the chunk each device sees its own share of the envs and of the batch.
    num_envs, num_steps = config.num_envs // num_devices, config.num_steps
    batch_size = config.batch_size // num_devices
    minibatch_size = config.minibatch_size // num_devices

    def device_mean(x):
        return x if num_devices == 1 else jax.lax.pmean(x, ENV_AXIS)

    def device_key(key):
        """This device's key from a key every device holds: its envs and shuffles differ."""
        return key if num_devices == 1 else jax.random.fold_in(key, jax.lax.axis_index(ENV_AXIS))

    # Sequential under vmap: batched, the orthogonal initialisers' QR decompositions become
    # batched LAPACK calls that can deadlock XLA:CPU's thread pool (jaxlib 0.10.2, 2 cores).
    # Unbatched (the CLI) it is the plain call.
    @jax.custom_batching.sequential_vmap
    def new_params(key: jax.Array):
        return init_params(network, key, obs_dim)

    def init_train_state(key: jax.Array) -> TrainState:
        params = new_params(key)
        return TrainState(params, optimizer.init(params), jnp.float32(0.0))

    def make_init(batch_reset) -> Callable[[jax.Array], RunnerState]:
        def init(key: jax.Array) -> RunnerState:
            rng, params_key, env_key = jax.random.split(key, 3)
            obs, env_state = batch_reset(jax.random.split(env_key, config.num_envs), env_params)
            envs = EnvBatch(env_state, obs, jnp.zeros(config.num_envs, jnp.float32),
                            jnp.zeros(config.num_envs, jnp.int32))
            return RunnerState(init_train_state(params_key), envs, rng)
        return init

    def over_agents(function: Callable, in_axes=0, out_axes=0) -> Callable:
        """`function` mapped over the agents' leading axis; itself for one agent."""
        if config.num_seeds == 1:
            return function
        return jax.vmap(function, in_axes=in_axes, out_axes=out_axes)

    init = over_agents(make_init(env.batch_reset))

    def init_shapes(key: jax.Array) -> RunnerState:
        """`jax.eval_shape(init, key)`. An env with `reset_shapes(params)` (the shapes of one
        env's reset) spares tracing its reset here: the HackMatrix reset generates a stage, whose
        tracing the CLI would otherwise do before it can lower the update chunk."""
        reset_shapes = getattr(env, "reset_shapes", None)
        if reset_shapes is None:
            return jax.eval_shape(init, key)

        def blank_reset(keys, params):
            return jax.tree.map(lambda leaf: jnp.zeros(keys.shape[:1] + leaf.shape, leaf.dtype),
                                reset_shapes(params))
        return jax.eval_shape(over_agents(make_init(blank_reset)), key)

    # ---------------------------------------------------------------- rollout
    def env_step(carry, step):
        params, envs, rng, observations = carry
        rng, action_key, step_key = jax.random.split(rng, 3)
        action_key, step_key = device_key(action_key), device_key(step_key)
        logits, value = network.apply(params, envs.obs.features)
        action = distribution.sample(action_key, logits, envs.obs.action_mask)
        action_log_prob = distribution.log_prob(logits, envs.obs.action_mask, action)
        # The game's hash splitter: jax.random.split's threefry is a loop of ~200 small kernels
        # per step on CPU, which the envs' keys do not need.
        next_obs, env_state, reward, done, info = env.batch_step(
            split_key(step_key, num_envs), envs.env_state, action, env_params)

        episode_return = envs.episode_return + reward
        episode_length = envs.episode_length + 1
        observations = jax.tree.map(
            lambda stored, obs: jax.lax.dynamic_update_index_in_dim(stored, obs, step, 1),
            observations, envs.obs)
        transition = Transition(None, action, action_log_prob, value, reward, done)
        stats = StepStats(ended_return=jnp.where(done, episode_return, 0.0),
                          ended_length=jnp.where(done, episode_length, 0),
                          env=env_metrics.step_stats(info, action))
        envs = EnvBatch(env_state, next_obs, jnp.where(done, 0.0, episode_return),
                        jnp.where(done, 0, episode_length))
        return (params, envs, rng, observations), (transition, stats)

    def rollout(params, envs: EnvBatch, rng):
        # Rollout data is env-major, so num_envs leads like all per-env data. The observations
        # go straight into place: stacked time first by the scan and swapped afterwards, they
        # would be copied once more per update.
        observations = jax.tree.map(
            lambda obs: jnp.zeros((num_envs, num_steps) + obs.shape[1:], obs.dtype), envs.obs)
        (_, envs, rng, observations), (transitions, stats) = jax.lax.scan(
            env_step, (params, envs, rng, observations), jnp.arange(num_steps))
        env_major = lambda tree: jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), tree)
        return envs, rng, env_major(transitions)._replace(obs=observations), env_major(stats)

    # ---------------------------------------------------------------- the update
    share = DeviceShare(batch_size, minibatch_size, device_mean, device_key)

    def train_update(runner: RunnerState, schedule: Schedule):
        train = runner.train
        envs, rng, transitions, stats = rollout(train.params, runner.envs, runner.rng)
        _, last_value = network.apply(train.params, envs.obs.features)
        advantages, targets = compute_gae(transitions.value, transitions.reward, transitions.done,
                                          last_value, config.gamma, config.gae_lambda)

        lr = learning_rate(config, schedule, train.schedule_timesteps)
        ent_coef = schedules.entropy_coefficient(config.ent_coef, config.ent_coef_end,
                                                 progress(schedule, train.schedule_timesteps))
        rng, learn_key = jax.random.split(rng)
        flat = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]),
                            Batch(transitions, advantages, targets))
        train, diagnostics = algorithm.learn(config, network, optimizer, train, flat,
                                             Coefficients(lr, jnp.float32(ent_coef)), learn_key,
                                             share)
        train = train._replace(
            schedule_timesteps=train.schedule_timesteps + jnp.float32(config.batch_size))

        metrics = {name: value.mean() for name, value in diagnostics.items()}
        # The rollout's values against the GAE targets, before this update trains on them.
        metrics["explained_variance"] = explained_variance(transitions.value, targets,
                                                           device_mean)
        metrics.update(over_devices(rollout_metrics(transitions, stats, env_metrics)))
        metrics["learning_rate"] = lr
        metrics["ent_coef"] = jnp.float32(ent_coef)
        return RunnerState(train, envs, rng), metrics

    def run_chunk(runner: RunnerState, num_active: jax.Array, schedule: Schedule):
        def maybe_update(runner, index):
            def skip(runner, schedule):
                _, metrics = jax.eval_shape(train_update, runner, schedule)
                return runner, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics)
            return jax.lax.cond(index < num_active, train_update, skip, runner, schedule)

        return jax.lax.scan(maybe_update, runner, jnp.arange(config.updates_per_chunk))

    def over_devices(sums: dict) -> dict:
        """Rollout sums and maxima of all devices' envs."""
        if num_devices == 1:
            return sums
        return {name: (jax.lax.pmax if name in env_metrics.max_keys else jax.lax.psum)(
            value, ENV_AXIS) for name, value in sums.items()}

    replicated = PartitionSpec()
    # Several agents run on one device (`validate`), where their leading axis stays whole.
    per_env = PartitionSpec(ENV_AXIS) if config.num_seeds == 1 else replicated
    runner_specs = RunnerState(train=replicated, envs=per_env, rng=replicated)
    # Updates lead the metrics, as with one agent: a chunk's first `num_active` are read.
    chunk = over_agents(run_chunk, in_axes=(0, None, None), out_axes=(0, 1))
    if num_devices > 1:
        # check_vma off: the game's loop carries start device-invariant and become per-device,
        # which the replication check rejects. Every collective above is written out instead.
        chunk = jax.shard_map(run_chunk, mesh=mesh, in_specs=(runner_specs, replicated, replicated),
                              out_specs=(runner_specs, replicated), check_vma=False)
    runner_sharding = jax.tree.map(lambda spec: NamedSharding(mesh, spec), runner_specs,
                                   is_leaf=lambda x: isinstance(x, PartitionSpec))
    everywhere = NamedSharding(mesh, replicated)
    # Explicit shardings: host arrays (a restored checkpoint) are placed on the mesh as they come.
    chunk = jax.jit(chunk, in_shardings=(runner_sharding, everywhere, everywhere),
                    out_shardings=(runner_sharding, everywhere),
                    compiler_options=xla_options.compiler_options())

    def update(runner: RunnerState, schedule: Schedule):
        if num_devices > 1:
            raise ValueError(f"Trainer.update runs on one device; with num_devices={num_devices} "
                             "the devices share the envs inside run_chunk")
        return over_agents(train_update, in_axes=(0, None))(runner, schedule)

    return Trainer(network, optimizer, init, init_shapes, chunk, runner_sharding, update)


def rollout_metrics(transitions: Transition, stats: StepStats, env_metrics) -> dict:
    """Sums and maxima over one rollout; the host divides sums over its logging window."""
    done = transitions.done
    return {
        "reward_sum": transitions.reward.sum(),
        "episode_return_sum": stats.ended_return.sum(),
        "episode_length_sum": stats.ended_length.sum(),
        "num_episodes": done.sum(dtype=jnp.int32),
        **env_metrics.rollout_sums(stats.env, done, transitions.action),
    }
