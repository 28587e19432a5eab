"""Test-wide settings: CPU only, no network for wandb, persistent compilation cache, two CPU
devices (for the data-parallel trainer's tests; everything else runs on the first), and the
package's CPU compile mode set before any test starts JAX's backends (as in the CLIs).

The test files run in pytest-xdist worker processes (python/pyproject.toml). Each worker has a
compilation cache folder of its own: JAX writes a cache entry in place, not through a temporary
file, so a worker reading an entry that another one is still writing would get it cut off, warn
on stderr (which some tests compare line for line) and compile again."""

import os
import pathlib
import threading

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("WANDB_SILENT", "true")
TEST_CACHE_ROOT = pathlib.Path(__file__).resolve().parents[2] / ".jax_cache"
# The workers inherit the environment of pytest's main process, which has already chosen its own
# folder here: a folder under TEST_CACHE_ROOT is replaced, one the user chose is kept.
_cache_dir = pathlib.Path(os.environ.get("JAX_COMPILATION_CACHE_DIR", TEST_CACHE_ROOT))
if TEST_CACHE_ROOT in (_cache_dir, *_cache_dir.parents):
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(
        TEST_CACHE_ROOT / os.environ.get("PYTEST_XDIST_WORKER", "main"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

from hackmatrix import xla_options  # noqa: E402

# The CPU compile mode, set as the command-line programs set it at their start (launch.py).
xla_options.configure_cpu_compiler()

from hackmatrix.training import devices  # noqa: E402

TEST_CPU_DEVICES = 2
devices.request_cpu_devices(TEST_CPU_DEVICES)


@pytest.fixture(scope="session", autouse=True)
def wandb_files_in_a_temporary_folder(tmp_path_factory):
    """wandb stages artifact files and keeps caches under the user's home folder: the tests'
    offline runs keep them in pytest's temporary folder instead."""
    folder = tmp_path_factory.mktemp("wandb_files")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_ARTIFACT_DIR"):
            patch.setenv(name, str(folder / name.lower()))
        yield


@pytest.fixture
def kill_if_hung():
    """`kill_if_hung(process, seconds)`: kills a subprocess still running after `seconds`, so
    that a test reading its output line by line (no timeout of its own) fails when the child
    hangs, instead of holding its test worker until CI's time limit."""
    timers = []

    def watch(process, seconds=300):
        timer = threading.Timer(seconds, process.kill)
        timer.daemon = True
        timer.start()
        timers.append(timer)
        return process

    yield watch
    for timer in timers:
        timer.cancel()
