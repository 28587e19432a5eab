"""A finished run extended by a session that saves nothing (a non-finite loss at its first
update): the finished run stays whole (final_params.npz kept, summary.json listing what is on
disk), and the next resume finds nothing to do rather than a final save "cut short"."""

import json

from hackmatrix.training import cli, params_files

from invariants import assert_consistent, assert_same_params, params_arrays
from tiny_runs import UPDATES, resume


def test_a_failed_extension_leaves_the_finished_run_whole(finished_copy, reference_run, capsys):
    run_dir = finished_copy
    files = sorted(path.name for path in run_dir.iterdir())
    assert resume(run_dir.parent, "--run-name", run_dir.name, "--total-timesteps",
                  str(8 * 16 * (UPDATES + 4)), "--lr", "1e30") == cli.EXIT_FAILURE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(f"last good checkpoint: {run_dir / f'checkpoint_{UPDATES}.pkl'} "
                         f"(update {UPDATES}))")
    assert sorted(path.name for path in run_dir.iterdir()) == files
    assert_same_params(params_arrays(reference_run / params_files.FINAL_PARAMS_NAME),
                       params_arrays(run_dir / params_files.FINAL_PARAMS_NAME))
    assert_consistent(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["update"]) == ("failed", UPDATES)
    assert summary["final_params"] is not None

    before = {path.name: path.stat().st_mtime_ns for path in run_dir.iterdir()}
    assert resume(run_dir.parent, "--run-name", run_dir.name) == 0
    out = capsys.readouterr().out
    assert "nothing to do" in out and "cut short" not in out
    assert {path.name: path.stat().st_mtime_ns for path in run_dir.iterdir()} == before


def test_a_resume_writes_the_params_file_a_checkpoint_lacks(reference_run, tmp_path, capsys):
    # A checkpoint without its params file: from a trainer killed between the two renames.
    import shutil
    run_dir = shutil.copytree(reference_run, tmp_path / "lacking")
    for name in ("checkpoint_6.pkl", "params_6.npz", "params_4.npz", "final_params.npz"):
        (run_dir / name).unlink()
    assert resume(tmp_path, "--run-name", "lacking") == 0
    assert "[resume] restored params_4.npz from checkpoint_4.pkl" in capsys.readouterr().out
    assert_same_params(params_arrays(reference_run / "params_4.npz"),
                       params_arrays(run_dir / "params_4.npz"))
