"""kill -9 at each file of a save: the run directory stays consistent, and a resume (or, before
the first checkpoint, a fresh start) ends bit-identical to the uninterrupted run.

A save's files, for the tiny run (a line every 2 updates, a checkpoint every 2, 6 updates):
summary.json ("running") as a session starts; at updates 2 and 4 the metrics line, then
checkpoint_N.pkl and params_N.npz (both written, then renamed in that order); at update 6
those, then final_params.npz and summary.json. Each is killed just before its rename (its temp
file written) and just after, and the metrics lines just after they are appended."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hackmatrix.training import checkpoint as ckpt

from conftest import drawn
from invariants import assert_checkpoints_load, assert_matches_reference
from tiny_runs import TINY, TOTAL, resume, train

STRIKE = Path(__file__).with_name("strike.py")
SAVE_FILES = [(f"{kind}_{update}.{suffix}", 1) for update in (2, 4, 6)
              for kind, suffix in (("checkpoint", "pkl"), ("params", "npz"))]
SAVE_FILES += [("final_params.npz", 1), ("summary.json", 1), ("summary.json", 2)]
KILLS = [{"file": name, "occurrence": occurrence, "when": when}
         for name, occurrence in SAVE_FILES for when in ("before", "after")]
KILLS += [{"file": "metrics.jsonl", "update": update, "when": "after"} for update in (2, 4, 6)]


def strike(fault: dict, checkpoint_dir: Path, run_name: str, *extra) -> subprocess.CompletedProcess:
    """The tiny run in a process of its own, with `fault` (strike.py) striking it."""
    command = [sys.executable, str(STRIKE), json.dumps(fault), *TINY, *TOTAL,
               "--checkpoint-dir", str(checkpoint_dir), "--run-name", run_name, "--no-wandb",
               *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def moment_id(fault: dict) -> str:
    what = fault["file"] + (f"#{fault['occurrence']}" if fault.get("occurrence", 1) > 1 else "")
    return f"{fault['when']}-{what}" + (f"-{fault['update']}" if "update" in fault else "")


@pytest.mark.parametrize("fault", drawn(KILLS, 3, "kill"), ids=moment_id)
def test_a_kill_during_a_save_loses_nothing_a_resume_cannot_redo(fault, reference_run, tmp_path):
    killed = strike({"signal": "SIGKILL", **fault}, tmp_path, "killed",
                    "--save-interval", "2", "--keep-checkpoints", "0")
    assert killed.returncode == -9, killed.stderr
    run_dir = tmp_path / "killed"
    # As the kill left it: every checkpoint complete, whatever else was cut short.
    assert_checkpoints_load(run_dir, newest_may_lack_params=True)
    if ckpt.list_checkpoints(run_dir):
        assert resume(tmp_path, "--run-name", "killed") == 0
    else:  # killed before its first checkpoint: a fresh start takes the directory over
        assert train(tmp_path, "killed", "--save-interval", "2", "--keep-checkpoints", "0") == 0
    assert_matches_reference(run_dir, reference_run)
