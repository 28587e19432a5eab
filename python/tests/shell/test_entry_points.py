"""The command-line programs' start: each console script of python/pyproject.toml runs, and the
launcher they share applies what the programs opt in to (hackmatrix/shell/launch.py)."""

import importlib
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tomllib

import pytest

from hackmatrix import xla_options
from hackmatrix.shell import entry_points

PYPROJECT = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
PROGRAMS = {"hackmatrix-train": "hackmatrix.training.cli",
            "hackmatrix-watch": "hackmatrix.programs.watch",
            "hackmatrix-eval": "hackmatrix.programs.evaluate",
            "hackmatrix-play": "hackmatrix.programs.play",
            "hackmatrix-plot": "hackmatrix.programs.plot",
            "hackmatrix-bench": "hackmatrix.programs.benchmark"}


def _console_scripts() -> dict[str, str]:
    with open(PYPROJECT, "rb") as file:
        return tomllib.load(file)["project"]["scripts"]


def test_each_console_script_runs_its_program_through_the_launcher(monkeypatch):
    started = []
    monkeypatch.setattr(entry_points, "run", started.append)
    scripts = _console_scripts()
    assert set(scripts) == set(PROGRAMS)
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        getattr(importlib.import_module(module), function)()
        assert started[-1] == PROGRAMS[name]
        assert callable(importlib.import_module(PROGRAMS[name]).main)


def _installed(name: str) -> str:
    """The console script's path: beside this interpreter, else on PATH."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install -e python)")
    return path


def test_every_installed_console_script_shows_its_help():
    # All at once: each start imports JAX, a second or two of CPU.
    runs = {name: subprocess.Popen([_installed(name), "--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            for name in PROGRAMS}
    for name, process in runs.items():
        out, err = process.communicate(timeout=300)
        assert (process.returncode, err) == (0, ""), name
        assert out.startswith("usage: "), name


PROBE_PROGRAM = """
import os
import jax
import jax.numpy as jnp
from hackmatrix import xla_options


def main():
    # XLA's newer emitters wrap a lone iota in a fusion of its own, the older ones do not.
    compiled = jax.jit(lambda x: (jnp.arange(8), x * 2)).lower(jnp.ones(8)).compile()
    print(os.environ.get("XLA_FLAGS"), xla_options.cpu_compile_mode(),
          "wrapped_iota" not in compiled.as_text())
    return 5
"""


@pytest.mark.parametrize("requested, fast", [(None, True), ("throughput", False)])
def test_a_program_started_by_the_launcher_compiles_in_the_requested_cpu_mode(
        tmp_path, requested, fast):
    (tmp_path / "probe_program.py").write_text(PROBE_PROGRAM)
    env = {key: value for key, value in os.environ.items()
           if key not in ("XLA_FLAGS", xla_options.CPU_COMPILE_VARIABLE)}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(tmp_path))
    if requested is not None:
        env[xla_options.CPU_COMPILE_VARIABLE] = requested
    result = subprocess.run(
        [sys.executable, "-c", "from hackmatrix.shell import launch; launch.run('probe_program')"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 5, result.stderr  # main's exit code
    flags = xla_options.FAST_COMPILE_XLA_FLAG if fast else "None"
    assert result.stdout.split() == [flags, "fast" if fast else "throughput", str(fast)]



def test_the_scripts_import_their_program_before_jax_is_imported():
    # python/scripts/*.py import their program's main (the tests call it) before the launcher
    # starts: importing it must not import JAX, or the CPU compile mode could no longer be set.
    programs = [module for module in PROGRAMS.values() if module.startswith("hackmatrix.programs.")]
    check = f"import sys\nfor name in {programs!r}:\n    __import__(name)\nprint('jax' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, "False\n", "")
