"""The device helpers called directly: the CPU device request, the missing-device message and
the changes that come with the fitted device count (specs/training.md, "Data parallelism")."""

import dataclasses

import jax
import pytest

from hackmatrix.training import devices
from hackmatrix.training.config import TrainConfig, auto_scale_for_batch_size


@pytest.fixture
def cpu_requests(monkeypatch):
    """The `jax.config.update` calls `request_cpu_devices` makes, as if JAX's backends had not
    started yet; `set_current` sets the count JAX was already asked for."""
    calls = []
    monkeypatch.setattr(jax.config, "update", lambda name, value: calls.append((name, value)))

    def set_current(count):
        monkeypatch.setattr(type(jax.config), "jax_num_cpu_devices", property(lambda _: count))
    set_current(-1)
    return calls, set_current


@pytest.mark.parametrize("count, asked", [(0, None), (1, None), (2, 2), (5, 5), (64, 64),
                                          (65, 64), (10**8, 64)])
def test_cpu_devices_are_requested_from_two_up_to_the_cap(cpu_requests, count, asked):
    calls, _ = cpu_requests
    devices.request_cpu_devices(count)
    assert calls == ([] if asked is None else [("jax_num_cpu_devices", asked)])


def test_a_cpu_request_never_lowers_an_earlier_one(cpu_requests):
    calls, set_current = cpu_requests
    set_current(8)
    devices.request_cpu_devices(4)
    devices.request_cpu_devices(16)
    assert calls == [("jax_num_cpu_devices", 8), ("jax_num_cpu_devices", 16)]


def test_a_cpu_request_after_the_backends_started_does_nothing():
    count = jax.device_count()  # the backends are running
    devices.request_cpu_devices(count + 6)
    assert (jax.config.jax_num_cpu_devices, jax.device_count()) == (count, count)


def test_missing_devices_are_named_only_past_the_count_jax_sees(monkeypatch):
    available = jax.local_device_count()  # 2 in the tests (conftest.py)
    assert devices.missing_devices_error(1) is None
    assert devices.missing_devices_error(available) is None
    assert devices.missing_devices_error(available + 1) == (
        f"--num-devices {available + 1}, but JAX sees {available} cpu device(s) "
        f"(on CPU at most {devices.MAX_CPU_DEVICES})")
    assert devices.MAX_CPU_DEVICES == 64
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert devices.missing_devices_error(available + 1) == (
        f"--num-devices {available + 1}, but JAX sees {available} gpu device(s)")


def test_the_fitted_count_comes_with_its_own_auto_scaled_changes():
    # 768 envs: 3 devices need 16 minibatches (not the 12 one device would take).
    config = TrainConfig(num_envs=768, num_steps=128, total_timesteps=10**9)
    fitted, changes = devices.fit_device_count(config, range(3, 0, -1), frozenset())
    expected, expected_changes = auto_scale_for_batch_size(
        dataclasses.replace(config, num_devices=3), frozenset())
    assert fitted == expected and fitted.num_devices == 3
    assert changes == expected_changes and changes["num_minibatches"] == (4, 16)
    # Without the user's fields nothing is auto-scaled.
    fitted, changes = devices.fit_device_count(config, range(3, 0, -1))
    assert (fitted.num_devices, fitted.num_minibatches, changes) == (3, 4, {})


def test_a_count_fits_when_its_auto_scaled_minibatches_split_its_share():
    # 297 x 135 steps on 3 devices: 13,365 each, which the default 4 minibatches do not split
    # but the 5 auto-scaled for that share do, so all 3 devices are used.
    config = TrainConfig(num_envs=297, num_steps=135, total_timesteps=10**9)
    fitted, changes = devices.fit_device_count(config, range(3, 0, -1), frozenset())
    assert (fitted.num_devices, fitted.num_minibatches) == (3, 5)
    assert changes == {"num_minibatches": (4, 5)}


def test_a_rollout_whose_observations_outgrow_a_device_is_refused():
    config = TrainConfig(num_envs=1024, num_steps=128, num_devices=2)
    share = 1024 * 128 // 2 * 1545 * 4  # one device's float32 observations
    assert devices.rollout_memory_error(config, 1545, share) is None
    assert devices.rollout_memory_error(config, 1545, None) is None  # unknown: not refused
    assert devices.rollout_memory_error(config, 1545, share - 1) == (
        "--num-envs 1024 x --num-steps 128 store 0.4 GiB of observations per device, over the "
        "device's 0.4 GiB: lower --num-envs or --num-steps")
    agents = TrainConfig(num_envs=1024, num_steps=128, num_seeds=3)
    assert devices.rollout_memory_error(agents, 1545, 2 ** 30).startswith(
        "--num-envs 1024 x --num-steps 128 x --num-seeds 3 store 2.3 GiB")
    assert devices.device_memory_bytes() > 2 ** 30
