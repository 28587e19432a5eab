"""Test-wide settings: CPU only, no network for wandb, persistent compilation cache, two CPU
devices (for the data-parallel trainer's tests; everything else runs on the first), and the
package's CPU compile mode set before any test starts JAX's backends (as in the CLIs)."""

import os
import pathlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    str(pathlib.Path(__file__).resolve().parents[2] / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

import hackmatrix  # noqa: E402,F401  (sets XLA_FLAGS: hackmatrix/xla_options.py)
from hackmatrix.training import devices  # noqa: E402

TEST_CPU_DEVICES = 2
devices.request_cpu_devices(TEST_CPU_DEVICES)
