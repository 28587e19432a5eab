"""Auto-scaling math, config validation and the default device count."""

import dataclasses

import pytest

from hackmatrix.training.config import (ConfigError, TrainConfig, auto_scale_for_batch_size,
                                        validate)
from hackmatrix.training import cli
from hackmatrix.training.devices import fit_device_count


def scaled(num_envs, num_steps=128, explicit=frozenset(), **values):
    config = TrainConfig(num_envs=num_envs, num_steps=num_steps, total_timesteps=10**9, **values)
    return auto_scale_for_batch_size(config, explicit)


def test_reference_batch_and_smaller_are_unchanged():
    for num_envs in (8, 64, 256):
        config, changes = scaled(num_envs)
        assert (config.num_minibatches, config.update_epochs, changes) == (4, 4, {})


def test_2048_envs_go_to_32_minibatches_and_keep_4_epochs():
    config, changes = scaled(2048)
    assert (config.num_minibatches, config.update_epochs) == (32, 4)
    assert config.minibatch_size == 8192 and config.gradient_steps_per_update == 128
    assert changes == {"num_minibatches": (4, 32)}


@pytest.mark.parametrize("num_envs, minibatches, epochs", [
    (512, 8, 4), (1024, 16, 4), (4096, 64, 2), (8192, 128, 1), (16384, 256, 1)])
def test_minibatch_size_and_gradient_steps_stay_near_targets(num_envs, minibatches, epochs):
    config, _ = scaled(num_envs)
    assert (config.num_minibatches, config.update_epochs) == (minibatches, epochs)


def test_epochs_shrink_to_keep_at_most_128_gradient_steps():
    config, changes = scaled(6144)  # 786,432 steps: 96 minibatches of 8,192
    # 128 / 96 = 1.33 epochs: 1 (96 gradient steps), not 2 (192).
    assert (config.num_minibatches, config.update_epochs) == (96, 1)
    assert changes == {"num_minibatches": (4, 96), "update_epochs": (4, 1)}


def test_auto_scaling_never_goes_below_the_configured_minibatches():
    # 2048 x 128 with 64 minibatches configured (not set by the user): 32 would be nearer the
    # 8,192 target, but auto-scaling only ever raises the count.
    config, changes = scaled(2048, num_minibatches=64)
    assert (config.num_minibatches, config.update_epochs) == (64, 2)
    assert changes == {"update_epochs": (4, 2)}


def test_odd_batch_gets_a_divisor_near_the_target():
    config, _ = scaled(1000, 100)  # 100,000 steps: target ~12.2 minibatches
    assert config.batch_size % config.num_minibatches == 0
    assert 10 <= config.num_minibatches <= 16
    validate(config)


def test_explicit_values_are_never_changed():
    config, changes = scaled(2048, num_minibatches=8, explicit=frozenset({"num_minibatches"}))
    assert config.num_minibatches == 8 and config.update_epochs == 4 and "num_minibatches" not in changes
    config, _ = scaled(2048, update_epochs=3, explicit=frozenset({"update_epochs"}))
    assert (config.num_minibatches, config.update_epochs) == (32, 3)


@pytest.mark.parametrize("values, reason", [
    ({"num_envs": 6, "num_steps": 5, "num_minibatches": 4}, "not divisible"),
    ({"num_envs": 0}, "--num-envs"),
    ({"total_timesteps": 10}, "less than one update"),
    ({"gamma": 1.5}, "--gamma"),
    ({"lr": float("nan")}, "--lr"),
    ({"num_devices": 0}, "--num-devices"),
    ({"hidden_dim": 46341}, "weight matrices of 2147488281 entries, over 2147483647: at most 46340"),
    ({"num_envs": 12, "num_devices": 8}, "not divisible by --num-devices 8"),
    # 8 envs x 3 steps on 2 devices: 12 steps each, not 8 minibatches' worth.
    ({"num_envs": 8, "num_steps": 3, "num_minibatches": 8, "num_devices": 2}, "share of the batch"),
])
def test_validation_reports_the_reason(values, reason):
    with pytest.raises(ConfigError, match=reason):
        validate(TrainConfig(**values))


def test_the_widest_addressable_network_is_valid():
    validate(TrainConfig(hidden_dim=46340, num_layers=1))


@pytest.mark.parametrize("values, reason", [
    ({"num_layers": 65}, "--num-layers must be at most 64, got 65"),
    ({"total_timesteps": 10**12 + 1}, "--total-timesteps must be at most 1,000,000,000,000"),
    ({"hidden_dim": 46340}, "makes 4,294,791,200 hidden weights in 2 torso"),
    ({"hidden_dim": 16385, "num_layers": 2, "shared_torso": True},
     "makes 268,468,225 hidden weights in 1 torso"),
])
def test_sizes_that_would_exhaust_memory_or_time_are_refused(values, reason):
    with pytest.raises(ConfigError, match=reason):
        validate(TrainConfig(**values))
    # The largest of each still passes.
    validate(TrainConfig(num_layers=64, total_timesteps=10**12))
    validate(TrainConfig(hidden_dim=16384, shared_torso=True, torso="mlp"))


@pytest.mark.parametrize("num_envs, num_steps, available, expected", [
    (2048, 128, 8, 8),   # a TPU VM's 8 chips
    (2048, 128, 1, 1),
    (12, 128, 8, 6),     # the most that split 12 envs
    (8, 3, 8, 2),        # 4 minibatches of each share: 12 steps on 2, not 6 on 4 or 3 on 8
    (7, 128, 4, 1),
])
def test_default_device_count_is_the_most_that_split_the_batch(num_envs, num_steps, available,
                                                                expected):
    config = TrainConfig(num_envs=num_envs, num_steps=num_steps, total_timesteps=10**9)
    fitted, _ = fit_device_count(config, range(available, 0, -1))
    assert fitted.num_devices == expected
    validate(fitted)


def test_auto_scaled_minibatches_split_each_devices_share():
    # 768 envs on 3 devices: 32,768 steps each. 12 minibatches (the plain target) would not split
    # a share evenly; 16 of 6,144 do.
    config, _ = scaled(768, num_devices=3)
    assert config.num_minibatches == 16 and config.minibatch_size == 6144
    validate(config)


def test_an_awkward_batch_keeps_the_configured_minibatches_and_is_rejected_with_a_hint():
    # 331 x 127: its only divisors near the target give minibatches of 331 or 127 samples.
    config, changes = scaled(331, 127)
    assert (config.num_minibatches, changes.get("num_minibatches")) == (4, None)
    with pytest.raises(ConfigError, match="choose --num-minibatches among its divisors"):
        validate(config)


def test_minibatches_of_one_sample_are_refused():
    # A lone sample's normalised advantage is 0: the policy would never learn.
    config = TrainConfig(num_envs=4, num_steps=2, num_minibatches=8, total_timesteps=10**6)
    with pytest.raises(ConfigError, match="makes minibatches of one sample.*at most 4 for a "
                                          "batch of 8"):
        validate(config)
    validate(dataclasses.replace(config, num_minibatches=4))


def test_no_device_count_fits_minibatches_that_do_not_split_the_batch():
    config = TrainConfig(num_envs=8, num_steps=16, num_minibatches=3, total_timesteps=10**9)
    fitted, _ = fit_device_count(config, range(8, 0, -1))
    assert fitted.num_devices == 1
    with pytest.raises(ConfigError, match="not divisible by num_minibatches 3"):
        validate(fitted)


def test_a_fresh_runs_default_device_count_and_minibatches_fit_together():
    # 768 envs on a 3-GPU box: auto-scaling for one device would pick 12 minibatches, which
    # split no 3-way share; chosen together, all 3 devices run 16 minibatches of 6,144.
    args = cli.build_parser().parse_args(["--num-envs", "768"])
    config, scaled, _ = cli.fresh_config(args, "gpu", 3)
    assert (config.num_devices, config.num_minibatches, config.update_epochs) == (3, 16, 4)
    assert scaled == {"num_minibatches": (4, 16)}
    validate(config)


@pytest.mark.parametrize("values, reason", [
    ({"clip_eps": 0.0}, "--clip-eps must be a finite number > 0"),
    ({"max_grad_norm": 0.0}, "--max-grad-norm must be a finite number > 0"),
    ({"seed": -1}, r"--seed must be in \[0, 4294967295\]"),
    ({"seed": 2**32}, r"--seed must be in \[0, 4294967295\]"),
])
def test_values_that_freeze_learning_or_wrap_the_seed_are_rejected(values, reason):
    with pytest.raises(ConfigError, match=reason):
        validate(TrainConfig(**values))
