"""SIGINT once (a checkpoint, exit 7) and twice (an exit at once, whose code and message say
what the run directory holds), then a resume that ends bit-identical to the uninterrupted run."""

import os
import signal

import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli
from hackmatrix.training import metrics as M

from conftest import drawn
from invariants import (assert_checkpoints_load, assert_consistent, assert_matches_reference,
                        assert_summary_matches_disk)
from test_kill import moment_id, strike
from tiny_runs import resume, train

# A checkpoint every 3 updates, a line every 2: the save at update 3 falls inside a log window.
SAVE_EVERY_3 = ("--save-interval", "3", "--keep-checkpoints", "0")


@pytest.mark.parametrize("update", drawn([2, 4], 1, "sigint once"))
def test_a_sigint_saves_the_update_reached_and_the_resume_matches(update, reference_run, tmp_path,
                                                                   monkeypatch):
    format_line = M.format_line
    def interrupting(record, *args):
        if record["update"] == update:
            os.kill(os.getpid(), signal.SIGINT)
        return format_line(record, *args)
    monkeypatch.setattr(M, "format_line", interrupting)
    assert train(tmp_path, "interrupted", *SAVE_EVERY_3) == cli.EXIT_INTERRUPTED
    monkeypatch.setattr(M, "format_line", format_line)
    run_dir = tmp_path / "interrupted"
    assert_consistent(run_dir)
    assert ckpt.list_checkpoints(run_dir)[-1][0] == update
    assert assert_summary_matches_disk(run_dir)["status"] == "interrupted"
    assert resume(tmp_path, "--run-name", "interrupted") == 0
    assert_matches_reference(run_dir, reference_run)


# The second SIGINT, during the save that the first one (at update 4) asked for: its
# checkpoint_4.pkl is committed from the rename of that file on.
SECOND_SIGNALS = [{"file": name, "when": when} for name in ("checkpoint_4.pkl", "params_4.npz")
                  for when in ("before", "after")]


@pytest.mark.parametrize("fault", drawn(SECOND_SIGNALS, 2, "sigint twice"), ids=moment_id)
def test_a_second_sigint_during_the_save_says_what_is_saved(fault, reference_run, tmp_path):
    ended = strike({"signal": "SIGINT", "first_sigint_at_update": 4, **fault}, tmp_path, "twice",
                   *SAVE_EVERY_3)
    run_dir = tmp_path / "twice"
    committed = fault != {"file": "checkpoint_4.pkl", "when": "before"}
    (line,) = [line for line in ended.stderr.splitlines() if line.startswith("[signal]")]
    if committed:
        assert ended.returncode == cli.EXIT_INTERRUPTED, ended.stderr
        assert f"{run_dir / 'checkpoint_4.pkl'} holds update 4, the last one trained" in line
    else:
        assert ended.returncode == cli.EXIT_FAILURE, ended.stderr
        assert line.endswith(f"exiting now without saving update 4; the run goes on from "
                             f"{run_dir / 'checkpoint_3.pkl'} (update 3)")
    assert assert_checkpoints_load(run_dir, newest_may_lack_params=True)[-1] == \
        (4 if committed else 3)
    summary = assert_summary_matches_disk(run_dir)
    assert summary["status"] == ("interrupted" if committed else "failed")
    assert summary["error"] == line.removeprefix("[signal] ")
    assert resume(tmp_path, "--run-name", "twice") == 0
    assert_matches_reference(run_dir, reference_run)
