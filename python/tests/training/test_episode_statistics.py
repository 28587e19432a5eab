"""Every logged episode statistic against a reference recomputed from the whole trajectory.

The trainer's CLI (`cli.main`, its chunk loop, log windows and checkpoints as they are) trains
on `ScriptedEnv`, a toy env whose episode lengths follow a fixed table and which writes every
step it takes (action, reward, done, reward components, stage, outcome, invalid action) into its
own state; the final checkpoint holds that state, so the test reads back the full per-step
trajectory the trainer saw. The reference walks it env by env, cuts it into episodes and log
windows by itself and recomputes each logged value of `metrics.jsonl`: train/{mean_episode_return,
mean_episode_length, num_episodes, mean_reward}, reward/<component>, actions/*_frac and stats/*.
It never sees the trainer's sums or accumulators.

Run shape: 4 envs x 5 steps, log every 3 updates (3 updates per chunk), a checkpoint every 4,
11 updates: chunks of 3, 1, 2, 2, 1 and 2 updates (the last one short, as at the end of a run),
log lines at updates 3, 6, 9 and 11, checkpoints inside the second and third windows. The
episode table makes episodes of 1 to 47 steps that end on and across update, chunk, checkpoint
and window boundaries, one that runs from the first window into the fourth, and a third window
in which no episode ends (its per-episode values must be NaN, null in JSON). All rewards are
multiples of 1/4, so the float32 sums on the device are exact and every value must match exactly.
The real env is not run here: its trainer's program takes ~20 s to trace and load, and the
statistics code is the same for any env.

A resume from the checkpoint inside the second window (its part-filled window saved and
restored) must log the lines the reference computes from its own trajectory.
"""

import json
import math
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game.constants import (
    ACTION_SIPHON, FIRST_PROGRAM_ACTION, NUM_REWARD_COMPONENTS, REWARD_COMPONENTS)
from hackmatrix.envs.hackmatrix_env import HACKMATRIX_METRICS
from hackmatrix.game.env import EnvObservation
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli
from hackmatrix.training import metrics as M

NUM_ENVS, NUM_STEPS, LOG_INTERVAL, SAVE_INTERVAL, NUM_UPDATES = 4, 5, 3, 4, 11
RUN_STEPS = NUM_STEPS * NUM_UPDATES  # steps each env takes in the run
LOGGED_UPDATES = (3, 6, 9, 11)
RESUMED_FROM = 4
FLAGS = ["--num-envs", str(NUM_ENVS), "--num-steps", str(NUM_STEPS), "--num-minibatches", "2",
         "--update-epochs", "1", "--hidden-dim", "8", "--num-layers", "1", "--log-interval",
         str(LOG_INTERVAL), "--save-interval", str(SAVE_INTERVAL), "--keep-checkpoints", "0",
         "--total-timesteps", str(NUM_ENVS * RUN_STEPS), "--seed", "0", "--no-wandb",
         # ScriptedEnv's observation is not HackMatrix's board, and its rewards are its script's
         # (no env params, so no reward options): the dense torso and the rules' reward.
         "--torso", "mlp", "--distance-shaping", "rules"]

# Episode lengths per env, in order; the last entry of each row outlasts the run. Env steps
# 1-15 are the first log window, 16-30 the second, 31-45 the third, 46-55 the fourth; updates
# end at multiples of 5. Episodes end at steps:
#   env 0: 3, 4, 10, 17, 30, 48, 52      env 1: 7, 14, 26, 50, 55 (the run's last step)
#   env 2: 15, 20, 28, 46                env 3: 47 (from the first window into the fourth)
EPISODE_LENGTHS = ((3, 1, 6, 7, 13, 18, 4, 99), (7, 7, 12, 24, 5, 99, 99, 99),
                   (15, 5, 8, 18, 99, 99, 99, 99), (47, 99, 99, 99, 99, 99, 99, 99))
EPISODES_ENDED_PER_WINDOW = [6, 5, 0, 6]
LOSS_KEYS = ("pg_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "total_loss",
             "grad_norm", "explained_variance")
PER_UPDATE_KEYS = (*LOSS_KEYS, "learning_rate")


class StepRecord(NamedTuple):
    """One env step as the env produced it; every leaf is [num_envs, RUN_STEPS(, ...)]."""
    action: jax.Array
    reward: jax.Array
    done: jax.Array
    reward_components: jax.Array
    stage: jax.Array
    won: jax.Array
    death: jax.Array
    truncated: jax.Array
    invalid_action: jax.Array


class ScriptedState(NamedTuple):
    env_index: jax.Array
    step: jax.Array          # steps taken in the run
    episode: jax.Array       # episodes ended
    episode_step: jax.Array  # steps taken in the running episode
    trajectory: StepRecord


class ScriptedEnv:
    """Episodes end by `EPISODE_LENGTHS`, whatever the actions. The reward, the reward
    components and the invalid-action flag depend on the step, the env and the action; the stage
    cycles through 1-8 with the episode's step (so the last window's highest stage is below the
    third's); each ended episode is won, lost, truncated or none of these by its env and number.
    All actions are valid: moves, the siphon and two programs."""
    observation_size = 4
    num_actions = FIRST_PROGRAM_ACTION + 2
    metrics = HACKMATRIX_METRICS  # its info carries HackMatrix's keys

    def observation(self, state):
        features = jnp.stack([state.episode_step / 10, state.step / RUN_STEPS,
                              state.env_index / NUM_ENVS, jnp.ones(state.step.shape)], -1)
        mask = jnp.ones(state.step.shape + (self.num_actions,), bool)
        return EnvObservation(features.astype(jnp.float32), mask)

    def batch_reset(self, keys, params):
        num_envs = keys.shape[0]
        zeros = jnp.zeros(num_envs, jnp.int32)
        trajectory = StepRecord(*(
            jnp.zeros((num_envs, RUN_STEPS) + shape, dtype) for shape, dtype in (
                ((), jnp.int32), ((), jnp.float32), ((), bool),
                ((NUM_REWARD_COMPONENTS,), jnp.float32), ((), jnp.int32), ((), bool), ((), bool),
                ((), bool), ((), bool))))
        state = ScriptedState(jnp.arange(num_envs, dtype=jnp.int32), zeros, zeros, zeros,
                              trajectory)
        return self.observation(state), state

    def batch_step(self, keys, state, action, params):
        step, env_index = state.step, state.env_index
        done = state.episode_step + 1 == jnp.asarray(EPISODE_LENGTHS)[env_index, state.episode]
        reward = 0.25 * ((3 * step + 5 * env_index + action) % 9 - 4).astype(jnp.float32)
        component = jnp.arange(NUM_REWARD_COMPONENTS)
        reward_components = (
            jnp.where(component == ((step + action) % NUM_REWARD_COMPONENTS)[:, None],
                      reward[:, None], 0.0)
            + jnp.where(component == (NUM_REWARD_COMPONENTS - 1 - env_index)[:, None], 0.5, 0.0))
        outcome = (env_index + state.episode) % 4
        stage = 1 + (state.episode_step // 4) % 8
        record = StepRecord(action, reward, done, reward_components, stage,
                            done & (outcome == 0), done & (outcome == 1), done & (outcome == 2),
                            (action + step) % 3 == 0)
        rows = jnp.arange(step.shape[0])
        trajectory = jax.tree.map(lambda recorded, value: recorded.at[rows, step].set(value),
                                  state.trajectory, record)
        state = ScriptedState(env_index, step + 1, state.episode + done,
                              jnp.where(done, 0, state.episode_step + 1), trajectory)
        info = {"reward_components": reward_components, "stage": record.stage, "won": record.won,
                "death": record.death, "truncated": record.truncated,
                "invalid_action": record.invalid_action}
        return self.observation(state), state, reward, done, info


class Episode(NamedTuple):
    last_step: int  # index into the run's steps of the step the episode ended at
    episode_return: float
    length: int
    stage: int
    won: bool
    death: bool
    truncated: bool


def ended_episodes(trajectory: StepRecord) -> tuple[list[Episode], np.ndarray, np.ndarray]:
    """(every ended episode, the running episodes' returns and lengths at the end), in float64."""
    episodes, running_returns, running_lengths = [], [], []
    for env in range(NUM_ENVS):
        start = 0
        for step in np.flatnonzero(trajectory.done[env]):
            episodes.append(Episode(
                int(step), float(np.sum(trajectory.reward[env, start:step + 1], dtype=np.float64)),
                int(step + 1 - start), int(trajectory.stage[env, step]),
                bool(trajectory.won[env, step]), bool(trajectory.death[env, step]),
                bool(trajectory.truncated[env, step])))
            start = step + 1
        running_returns.append(np.sum(trajectory.reward[env, start:], dtype=np.float64))
        running_lengths.append(RUN_STEPS - start)
    return episodes, np.array(running_returns), np.array(running_lengths)


def reference_window(trajectory: StepRecord, first_update: int, last_update: int) -> dict:
    """The logged values of the window of updates first_update..last_update (from 1)."""
    steps = slice((first_update - 1) * NUM_STEPS, last_update * NUM_STEPS)
    window = jax.tree.map(lambda column: np.asarray(column)[:, steps], trajectory)
    env_steps = window.done.size
    episodes = [episode for episode in ended_episodes(trajectory)[0]
                if steps.start <= episode.last_step < steps.stop]

    def per_episode(value):
        return (math.fsum(value(episode) for episode in episodes) / len(episodes) if episodes
                else None)  # NaN, which metrics.jsonl writes as null

    def per_step(values):
        return float(np.sum(values, dtype=np.float64)) / env_steps

    expected = {
        "train/num_episodes": len(episodes),
        "train/mean_episode_return": per_episode(lambda episode: episode.episode_return),
        "train/mean_episode_length": per_episode(lambda episode: episode.length),
        "train/mean_reward": per_step(window.reward),
        "actions/move_frac": per_step(window.action < ACTION_SIPHON),
        "actions/siphon_frac": per_step(window.action == ACTION_SIPHON),
        "actions/program_frac": per_step(window.action >= FIRST_PROGRAM_ACTION),
        "stats/highest_stage": int(window.stage.max()),
        "stats/mean_final_stage": per_episode(lambda episode: episode.stage),
        "stats/win_rate": per_episode(lambda episode: episode.won),
        "stats/death_rate": per_episode(lambda episode: episode.death),
        "stats/truncation_rate": per_episode(lambda episode: episode.truncated),
        "stats/invalid_action_frac": per_step(window.invalid_action),
    }
    for index, name in enumerate(REWARD_COMPONENTS):
        expected[f"reward/{name}"] = per_step(window.reward_components[..., index])
    return expected


def reference_log(trajectory: StepRecord) -> dict[int, dict]:
    """{logged update: its expected values}."""
    first_updates = (1,) + tuple(update + 1 for update in LOGGED_UPDATES[:-1])
    return {last: reference_window(trajectory, first, last)
            for first, last in zip(first_updates, LOGGED_UPDATES)}


class Run(NamedTuple):
    run_dir: Path
    chunk_sizes: list[int]  # updates per chunk
    per_update: dict        # {loss key or "learning_rate": float64[updates run]}, as trained
    records: dict           # {update: metrics.jsonl record}
    trajectory: StepRecord  # NumPy, from the final checkpoint's env state
    final_checkpoint: dict


def train_on_scripted_env(*argv: str) -> tuple[list[int], dict]:
    """`cli.main(argv)` on ScriptedEnv; returns the active updates of each chunk, as the CLI
    gave them to its log window, and the per-update losses and learning rates it gave it."""
    chunk_sizes, per_update = [], {key: [] for key in PER_UPDATE_KEYS}
    add = M.MetricsWindow.add

    def recording_add(window, chunk_metrics, num_active):
        chunk_sizes.append(num_active)
        for key in PER_UPDATE_KEYS:
            per_update[key].extend(np.asarray(chunk_metrics[key][:num_active], np.float64))
        add(window, chunk_metrics, num_active)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "make_env", lambda env_id: (ScriptedEnv(), None))
        patch.setattr(M.MetricsWindow, "add", recording_add)
        assert cli.main(list(argv)) == 0
    return chunk_sizes, {key: np.array(values) for key, values in per_update.items()}


def read_run(run_dir: Path, chunk_sizes: list[int], per_update: dict) -> Run:
    """The run's log lines, and its final checkpoint with the trajectory in its env state."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    final = ckpt.load_checkpoint(run_dir / f"checkpoint_{NUM_UPDATES}.pkl")
    _, template = ScriptedEnv().batch_reset(jnp.zeros((NUM_ENVS, 2), jnp.uint32), None)
    state = jax.tree.unflatten(jax.tree.structure(template), final["env_state"])
    records = {record["update"]: record for record in map(json.loads, lines)}
    return Run(run_dir, chunk_sizes, per_update, records, state.trajectory, final)


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory) -> Run:
    checkpoint_dir = tmp_path_factory.mktemp("episode_statistics")
    chunk_sizes, per_update = train_on_scripted_env(
        *FLAGS, "--checkpoint-dir", str(checkpoint_dir), "--run-name", "run")
    return read_run(checkpoint_dir / "run", chunk_sizes, per_update)


@pytest.fixture(scope="module")
def resumed_run(straight_run) -> Run:
    """The straight run resumed from its checkpoint inside the second window (in place: its
    later lines and checkpoints are set aside, and written again)."""
    run_dir = straight_run.run_dir
    chunk_sizes, per_update = train_on_scripted_env(
        "--resume", str(run_dir / f"checkpoint_{RESUMED_FROM}.pkl"),
        "--checkpoint-dir", str(run_dir.parent))
    return read_run(run_dir, chunk_sizes, per_update)


def assert_logged_as_the_reference(run: Run, updates: list[int]) -> None:
    expected = reference_log(run.trajectory)
    for update in updates:
        record = run.records[update]
        for key, value in expected[update].items():
            assert record[key] == value, f"update {update}: {key}"


def test_the_run_is_the_scenario_the_table_describes(straight_run):
    assert straight_run.chunk_sizes == [3, 1, 2, 2, 1, 2]
    assert [update for update, _ in ckpt.list_checkpoints(straight_run.run_dir)] == [4, 8, 11]
    assert sorted(straight_run.records) == list(LOGGED_UPDATES)
    ended = [window["train/num_episodes"] for window in reference_log(
        straight_run.trajectory).values()]
    assert ended == EPISODES_ENDED_PER_WINDOW
    # The policy chose every kind of action, so each action fraction is tested.
    assert set(np.unique(straight_run.trajectory.action)) == set(range(ScriptedEnv.num_actions))


def test_every_logged_statistic_matches_the_reference(straight_run):
    assert_logged_as_the_reference(straight_run, list(LOGGED_UPDATES))


def test_logged_losses_are_window_means_and_the_learning_rate_is_the_windows_last(straight_run):
    # train/<loss> is the mean over the window's updates (not its steps, nor its episodes);
    # train/learning_rate is the one the window's last update used (it anneals, so each differs).
    learning_rates = straight_run.per_update["learning_rate"]
    assert len(learning_rates) == NUM_UPDATES and len(set(learning_rates)) == NUM_UPDATES
    first_updates = (1,) + tuple(update + 1 for update in LOGGED_UPDATES[:-1])
    for first, last in zip(first_updates, LOGGED_UPDATES):
        record = straight_run.records[last]
        for key in LOSS_KEYS:
            values = straight_run.per_update[key][first - 1:last]
            assert record[f"train/{key}"] == pytest.approx(math.fsum(values) / len(values),
                                                           rel=1e-12, abs=1e-300), (last, key)
        assert record["train/learning_rate"] == learning_rates[last - 1], last


def test_a_window_without_ended_episodes_logs_nan_per_episode(straight_run):
    record = straight_run.records[9]
    assert record["train/num_episodes"] == 0
    for key in ("train/mean_episode_return", "train/mean_episode_length",
                "stats/mean_final_stage", "stats/win_rate", "stats/death_rate",
                "stats/truncation_rate"):
        assert record[key] is None, key
    assert record["train/mean_reward"] is not None


def test_the_running_episodes_accumulators_are_saved_in_the_final_checkpoint(straight_run):
    _, running_returns, running_lengths = ended_episodes(straight_run.trajectory)
    np.testing.assert_array_equal(straight_run.final_checkpoint["episode_return"],
                                  running_returns)
    np.testing.assert_array_equal(straight_run.final_checkpoint["episode_length"],
                                  running_lengths)


def test_a_resume_from_a_part_filled_window_logs_what_the_reference_computes(straight_run,
                                                                            resumed_run):
    assert resumed_run.chunk_sizes == [2, 2, 1, 2]
    assert sorted(resumed_run.records) == list(LOGGED_UPDATES)
    relogged = [update for update in LOGGED_UPDATES if update > RESUMED_FROM]
    assert_logged_as_the_reference(resumed_run, relogged)
    # The first line after the resume also says where it resumed.
    resume_mark = {"resumed_at_update": RESUMED_FROM,
                   "resumed_at_timesteps": RESUMED_FROM * NUM_ENVS * NUM_STEPS}
    for update in LOGGED_UPDATES:
        straight, resumed = straight_run.records[update], resumed_run.records[update]
        mark = resume_mark if update == relogged[0] else {}
        assert {**straight, **mark, "train/sps": None} == {**resumed, "train/sps": None}, update
