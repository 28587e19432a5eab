"""Shared fixtures for the tools tests: a tiny real training run and in-process script loading.

The scripts run in-process (not as subprocesses) so that jitted functions compile once per test
run and the suite stays fast on CI's two cores.
"""

import io
import pathlib
import runpy

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def load_script(name: str):
    """The `main(argv) -> exit code` of python/scripts/<name>."""
    return runpy.run_path(str(SCRIPTS / name), run_name="tools_test")["main"]


class ReaderLeavesAfter(io.StringIO):
    """A stdout whose reader goes away (`| head`) after `writes` writes: later ones raise
    BrokenPipeError. (print writes its text and its line end separately.)"""

    def __init__(self, writes):
        super().__init__()
        self.writes_left = writes

    def write(self, text):
        self.writes_left -= 1
        if self.writes_left < 0:
            raise BrokenPipeError
        return super().write(text)


# The same flags as the end-to-end run of tests/training/test_cli.py: identical shapes give an
# identical compiled program, so whichever suite runs second in a test worker loads it from
# that worker's persistent compilation cache instead of compiling again.
TINY_TRAINING = ["--num-envs", "8", "--num-steps", "16", "--hidden-dim", "32", "--num-layers", "2",
                 "--log-interval", "2", "--seed", "1", "--total-timesteps", str(8 * 16 * 6),
                 "--save-interval", "2", "--keep-checkpoints", "2", "--no-wandb"]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> pathlib.Path:
    """A run directory from a real 6-update training run (8 envs x 16 steps, separate ego torsos, 2 x 32)."""
    from hackmatrix.training import cli as train_cli

    checkpoint_dir = tmp_path_factory.mktemp("checkpoints")
    exit_code = train_cli.main([*TINY_TRAINING, "--checkpoint-dir", str(checkpoint_dir),
                                "--run-name", "tiny"])
    assert exit_code == 0
    run_dir = checkpoint_dir / "tiny"
    assert (run_dir / "final_params.npz").is_file()
    return run_dir
