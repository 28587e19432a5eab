"""The learning-rate and entropy-coefficient schedules (training/schedules.py): their values by
hand at chosen progresses, float and traced inputs alike, the command line's spellings of them,
and the values the trainer's update reports (`learning_rate`, `ent_coef`) at chosen updates."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.training import arguments, cli, schedules
from hackmatrix.training.config import ConfigError, TrainConfig, validate
from hackmatrix.training.trainer import Schedule, make_schedule, make_trainer

from test_ppo import CountingEnv

COS_QUARTER = 0.5 * (1.0 + math.cos(math.pi / 4))  # 0.8535533905932737
COS_THREE_QUARTERS = 0.5 * (1.0 + math.cos(3 * math.pi / 4))  # 0.14644660940672627

# progress -> factor, written out by hand (progress is clipped to [0, 1])
DECAY = {
    "constant": {-0.5: 1.0, 0.0: 1.0, 0.25: 1.0, 0.5: 1.0, 0.75: 1.0, 1.0: 1.0, 1.5: 1.0},
    "linear": {-0.5: 1.0, 0.0: 1.0, 0.25: 0.75, 0.5: 0.5, 0.75: 0.25, 1.0: 0.0, 1.5: 0.0},
    "cosine": {-0.5: 1.0, 0.0: 1.0, 0.25: COS_QUARTER, 0.5: 0.5, 0.75: COS_THREE_QUARTERS,
               1.0: 0.0, 1.5: 0.0},
}


@pytest.mark.parametrize("kind", sorted(DECAY))
def test_decay_fraction_at_chosen_progresses(kind):
    for progress, expected in DECAY[kind].items():
        value = schedules.decay_fraction(kind, progress)
        assert isinstance(value, float), (kind, progress, value)
        assert value == pytest.approx(expected, abs=1e-15), (kind, progress)
    # The ends are exact.
    assert schedules.decay_fraction(kind, 0.0) == 1.0
    assert schedules.decay_fraction(kind, 2.0) == (1.0 if kind == "constant" else 0.0)


@pytest.mark.parametrize("kind", sorted(DECAY))
def test_decay_fraction_of_a_traced_progress_agrees_with_the_float_one(kind):
    progresses = np.array(sorted(DECAY[kind]), np.float32)
    eager = np.array([schedules.decay_fraction(kind, jnp.float32(p)) for p in progresses])
    jitted = np.asarray(jax.jit(jax.vmap(
        lambda p: jnp.asarray(schedules.decay_fraction(kind, p), jnp.float32)))(progresses))
    expected = np.array([DECAY[kind][float(p)] for p in progresses])
    np.testing.assert_allclose(eager, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jitted, expected, rtol=1e-6, atol=1e-7)
    # Where the value is exact in float32 (cos(pi / 2) in float32 is not 0), it is exact.
    for p, value in zip(progresses, jitted):
        if float(p) in (-0.5, 0.0, 1.0, 1.5) or kind != "cosine":
            assert value == np.float32(DECAY[kind][float(p)]), (kind, p)


@pytest.mark.parametrize("start, end, progress, expected", [
    (0.05, 0.01, 0.0, 0.05),
    (0.05, 0.01, 0.25, 0.04),
    (0.05, 0.01, 0.5, 0.03),
    (0.05, 0.01, 1.0, 0.01),
    (0.05, 0.01, 1.5, 0.01),   # past the end: stays at `end`
    (0.05, 0.01, -1.0, 0.05),  # before the start: stays at `start`
    (0.0, 0.02, 0.75, 0.015),  # rising works too
])
def test_entropy_coefficient_is_linear_from_start_to_end(start, end, progress, expected):
    # A float32 (a jnp value) for a float progress too: the update computes in float32.
    assert float(schedules.entropy_coefficient(start, end, progress)) == pytest.approx(
        expected, rel=1e-6)
    traced = jax.jit(lambda p: schedules.entropy_coefficient(start, end, p))(jnp.float32(progress))
    np.testing.assert_allclose(np.asarray(traced), expected, rtol=1e-6)


def test_an_equal_start_and_end_is_the_constant_itself():
    assert schedules.entropy_coefficient(0.01, 0.01, jnp.float32(0.3)) == 0.01
    assert schedules.entropy_coefficient(0.01, 0.01, 7.0) == 0.01


# ----------------------------------------------------------------------------- the config and CLI

def explicit(*argv):
    return arguments.explicit_values(cli.build_parser().parse_args(list(argv)))


@pytest.mark.parametrize("argv, values", [
    (["--lr-schedule", "cosine"], {"lr_schedule": "cosine"}),
    (["--anneal-lr"], {"lr_schedule": "linear"}),
    (["--no-anneal-lr"], {"lr_schedule": "constant"}),
    (["--anneal-lr", "--lr-schedule", "cosine"], {"lr_schedule": "cosine"}),
    (["--no-anneal-lr", "--lr-schedule", "constant"], {"lr_schedule": "constant"}),
    # A lone --ent-coef is a constant coefficient; with --ent-coef-end it anneals.
    (["--ent-coef", "0.05"], {"ent_coef": 0.05, "ent_coef_end": 0.05}),
    (["--ent-coef", "0.05", "--ent-coef-end", "0.0"], {"ent_coef": 0.05, "ent_coef_end": 0.0}),
    (["--ent-coef-end", "0.002"], {"ent_coef_end": 0.002}),
])
def test_the_command_line_spells_the_schedules(argv, values):
    assert explicit(*argv) == values


@pytest.mark.parametrize("argv", [["--anneal-lr", "--lr-schedule", "constant"],
                                  ["--no-anneal-lr", "--lr-schedule", "linear"],
                                  ["--no-anneal-lr", "--lr-schedule", "cosine"]])
def test_an_anneal_flag_that_contradicts_the_schedule_is_a_usage_error(argv):
    with pytest.raises(arguments.UsageError, match="contradicts --lr-schedule"):
        explicit(*argv)


def test_validation_refuses_an_unknown_schedule_and_a_bad_end_coefficient():
    validate(TrainConfig(lr_schedule="cosine", ent_coef_end=0.0))
    with pytest.raises(ConfigError, match="--lr-schedule must be one of constant, linear, cosine"):
        validate(TrainConfig(lr_schedule="exponential"))
    for value in (-0.1, math.inf, math.nan):
        with pytest.raises(ConfigError, match="--ent-coef-end"):
            validate(TrainConfig(ent_coef_end=value))


def test_a_config_built_in_code_keeps_its_entropy_coefficient_unless_told_where_it_ends():
    assert TrainConfig().ent_coef_end == TrainConfig().ent_coef
    assert TrainConfig(ent_coef=0.05).ent_coef_end == 0.05
    assert TrainConfig(ent_coef=0.05, ent_coef_end=0.0).ent_coef_end == 0.0
    assert TrainConfig.from_dict(TrainConfig(ent_coef=0.3).to_dict()).ent_coef_end == 0.3


# ----------------------------------------------------------------------------- in the trainer

NUM_ENVS, NUM_STEPS = 8, 16
BATCH = NUM_ENVS * NUM_STEPS
UPDATES = 4  # the run's length; the schedules reach their ends after it
LR, ENT_START, ENT_END = 2e-3, 0.05, 0.01


def tiny_config(lr_schedule):
    # CountingEnv's observation is not HackMatrix's board: the dense torso.
    return TrainConfig(total_timesteps=UPDATES * BATCH, num_envs=NUM_ENVS, num_steps=NUM_STEPS,
                       num_minibatches=2, update_epochs=1, hidden_dim=8, num_layers=1,
                       torso="mlp",
                       lr=LR, lr_schedule=lr_schedule, ent_coef=ENT_START,
                       ent_coef_end=ENT_END)


@pytest.mark.parametrize("lr_schedule", ["constant", "linear", "cosine"])
def test_the_update_reports_the_scheduled_learning_rate_and_entropy_coefficient(lr_schedule):
    # Update k (from 0) starts at k * BATCH timesteps: progress k / 4. The sixth update runs
    # past the total, where both schedules stay at their ends.
    config = tiny_config(lr_schedule)
    trainer = make_trainer(config, CountingEnv(), None)
    traces = []

    def update(runner, schedule):
        traces.append(None)
        return trainer.update(runner, schedule)

    update = jax.jit(update)
    runner = jax.jit(trainer.init)(jax.random.PRNGKey(0))
    schedule = make_schedule(config)
    reported = []
    for _ in range(UPDATES + 2):
        runner, metrics = update(runner, schedule)
        reported.append((float(metrics["learning_rate"]), float(metrics["ent_coef"])))
    progresses = [min(k / UPDATES, 1.0) for k in range(UPDATES + 2)]
    expected_lr = [LR * DECAY[lr_schedule][p] for p in progresses]
    expected_ent = [ENT_START + (ENT_END - ENT_START) * p for p in progresses]
    np.testing.assert_allclose([lr for lr, _ in reported], expected_lr, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose([ent for _, ent in reported], expected_ent, rtol=1e-6)
    assert float(runner.train.schedule_timesteps) == (UPDATES + 2) * BATCH

    # A resume that re-aims the schedule at four times the total reuses the compiled update:
    # the 6 updates done are then 6 / 16 of the way.
    longer = Schedule(jnp.float32(LR), jnp.float32(4 * UPDATES * BATCH))
    _, metrics = update(runner, longer)
    progress = (UPDATES + 2) / (4 * UPDATES)  # 0.375
    decay = {"constant": 1.0, "linear": 1.0 - progress,
             "cosine": 0.5 * (1.0 + math.cos(math.pi * progress))}[lr_schedule]
    np.testing.assert_allclose(float(metrics["learning_rate"]), LR * decay, rtol=1e-6)
    np.testing.assert_allclose(float(metrics["ent_coef"]),
                               ENT_START + (ENT_END - ENT_START) * progress, rtol=1e-6)
    assert len(traces) == 1


def test_a_constant_entropy_coefficient_is_reported_unchanged():
    config = TrainConfig(**{**tiny_config("linear").to_dict(), "ent_coef_end": ENT_START})
    trainer = make_trainer(config, CountingEnv(), None)
    runner = jax.jit(trainer.init)(jax.random.PRNGKey(1))
    update = jax.jit(trainer.update)
    reported = []
    for _ in range(3):
        runner, metrics = update(runner, make_schedule(config))
        reported.append((metrics["ent_coef"], metrics["learning_rate"]))
    ent_coefs, lrs = (np.asarray(column) for column in zip(*reported))
    np.testing.assert_array_equal(ent_coefs, np.float32(ENT_START))
    np.testing.assert_allclose(lrs, [LR, LR * 0.75, LR * 0.5], rtol=1e-6)
