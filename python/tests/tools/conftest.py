"""Shared fixtures for the tools tests: a tiny real training run and in-process script loading.

The scripts run in-process (not as subprocesses) so that jitted functions compile once per test
session and the suite stays fast on CI's two cores.
"""

import pathlib
import runpy

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def load_script(name: str):
    """The `main(argv) -> exit code` of python/scripts/<name>."""
    return runpy.run_path(str(SCRIPTS / name), run_name="tools_test")["main"]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> pathlib.Path:
    """A run directory from a real 2-update training run (4 envs x 8 steps, one 16-unit layer)."""
    from hackmatrix.training import cli as train_cli

    checkpoint_dir = tmp_path_factory.mktemp("checkpoints")
    exit_code = train_cli.main([
        "--total-timesteps", "64", "--num-envs", "4", "--num-steps", "8", "--hidden-dim", "16",
        "--num-layers", "1", "--save-interval", "1", "--no-wandb",
        "--checkpoint-dir", str(checkpoint_dir), "--run-name", "tiny"])
    assert exit_code == 0
    run_dir = checkpoint_dir / "tiny"
    assert (run_dir / "final_params.npz").is_file()
    return run_dir
