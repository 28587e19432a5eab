"""How many devices share the envs (data parallelism, `TrainConfig.num_devices`).

On a GPU or TPU machine every local device is a device; by default a run uses the most of them
that split its envs and minibatches evenly. On CPU, XLA shows one device unless asked for more
before JAX starts its backends: each CPU device then runs its share of a sharded program on its
own thread, so N devices step N shares of the game at once. The game's small kernels use one core
each, so on CPU this speeds up the rollout; the network's large kernels already use every core.
Several CPU devices are not bit-reproducible from run to run (XLA:CPU's multi-device
execution; specs/training.md, "Data parallelism"), so the CPU default is one.
"""

from __future__ import annotations

import dataclasses

from hackmatrix.training.config import (TrainConfig, auto_scale_for_batch_size,
                                        device_split_error)


# JAX builds every CPU device it is asked for when its backends start, before any check of the
# count could run (4096 of them take ~600 MB, 10**8 fill the memory); more than a few per core
# only slow the program down.
MAX_CPU_DEVICES = 64


def request_cpu_devices(count: int) -> None:
    """Have JAX's CPU backend show `count` devices (at least; at most MAX_CPU_DEVICES), if its
    backends have not started yet; afterwards the count is fixed and this does nothing."""
    import jax
    count = min(count, MAX_CPU_DEVICES)
    if count <= 1:
        return
    try:
        jax.config.update("jax_num_cpu_devices", max(count, jax.config.jax_num_cpu_devices))
    except RuntimeError:  # JAX refuses a new count once its backends have started
        pass


def missing_devices_error(requested: int) -> str | None:
    """Why `requested` devices cannot be used here (more than JAX sees), or None."""
    import jax
    available = jax.local_device_count()
    if requested <= available:
        return None
    backend = jax.default_backend()
    limit = f" (on CPU at most {MAX_CPU_DEVICES})" if backend == "cpu" else ""
    return f"--num-devices {requested}, but JAX sees {available} {backend} device(s){limit}"


def fit_device_count(config: TrainConfig, counts,
                     user_set: frozenset[str] | None = None) -> tuple[TrainConfig, dict]:
    """(`config` on the first of `counts` that splits its envs and minibatches evenly, or on the
    last one tried if none does, which `validate` then reports; the auto-scaled changes).

    With `user_set` (the config fields the user set), the minibatches are auto-scaled for each
    count tried, since `auto_scale_for_batch_size` splits each device's share: count and
    minibatches then fit together. Without it they stay as they are."""
    for count in counts:
        candidate = dataclasses.replace(config, num_devices=count)
        candidate, changes = ((candidate, {}) if user_set is None
                              else auto_scale_for_batch_size(candidate, user_set))
        if device_split_error(candidate, count) is None:
            break
    return candidate, changes


def device_memory_bytes() -> int | None:
    """One local device's memory: an accelerator's allocator limit, else (CPU) the host's
    physical memory; None when neither is known."""
    import os

    import jax
    stats = jax.local_devices()[0].memory_stats() or {}
    if "bytes_limit" in stats:
        return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def rollout_memory_error(config: TrainConfig, obs_dim: int,
                         memory_bytes: int | None) -> str | None:
    """Why the update surely cannot fit in one device's memory, or None. Its largest buffer is
    the rollout's float32 observations (every agent's envs and steps, each device its share);
    the update needs more than that, so this only refuses what cannot run at all, before XLA
    would fail to allocate."""
    per_device = config.num_seeds * config.batch_size // config.num_devices * obs_dim * 4
    if memory_bytes is None or per_device <= memory_bytes:
        return None
    gib = 2 ** 30
    return (f"--num-envs {config.num_envs} x --num-steps {config.num_steps}"
            + (f" x --num-seeds {config.num_seeds}" if config.num_seeds > 1 else "")
            + f" store {per_device / gib:.1f} GiB of observations per device, over the device's "
            f"{memory_bytes / gib:.1f} GiB: lower --num-envs or --num-steps")
