"""The fault harness's shared pieces: the trainer's one tiny run shape (tests/training/tiny_runs.py,
so that every run here loads the same compiled program from the persistent cache), the
uninterrupted reference run that every faulted run must end up matching, and the moments at
which faults strike, drawn from a seed.

HACKMATRIX_FAULTS=all runs every moment of every fault; by default each fault runs a few,
drawn with HACKMATRIX_FAULT_SEED (default 0; the drawn moments are in the test ids)."""

import os
import random
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

from tiny_runs import train  # noqa: E402

ALL_MOMENTS = os.environ.get("HACKMATRIX_FAULTS") == "all"
FAULT_SEED = int(os.environ.get("HACKMATRIX_FAULT_SEED", "0"))


def drawn(moments: list, count: int, salt: str) -> list:
    """`count` of `moments` drawn with the fault seed (each fault draws apart, by `salt`), or
    all of them with HACKMATRIX_FAULTS=all."""
    if ALL_MOMENTS or count >= len(moments):
        return list(moments)
    return random.Random(f"{FAULT_SEED}/{salt}").sample(list(moments), count)


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Path:
    """The uninterrupted run that every faulted run must match bit for bit once resumed."""
    checkpoint_dir = tmp_path_factory.mktemp("reference")
    assert train(checkpoint_dir, "reference", "--save-interval", "2",
                 "--keep-checkpoints", "0") == 0
    return checkpoint_dir / "reference"


@pytest.fixture
def finished_copy(reference_run, tmp_path) -> Path:
    """A copy of the finished reference run that a test may change."""
    return Path(shutil.copytree(reference_run, tmp_path / "done"))
