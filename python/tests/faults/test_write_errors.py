"""Writes that fail: a full disk (ENOSPC) at a chosen file of a save, once or from then on, and a
metrics.jsonl that cannot be appended to (immutable, or read-only). The error line and
summary.json say what the run directory holds; a resume, once the cause is gone, ends
bit-identical to the uninterrupted run, with each update logged once."""

import errno
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli, params_files
from hackmatrix.training import metrics as M

from conftest import drawn
from invariants import (assert_checkpoints_load, assert_consistent, assert_matches_reference,
                        assert_summary_matches_disk, records)
from tiny_runs import resume, train

SAVE_EVERY_2 = ("--save-interval", "2", "--keep-checkpoints", "3")


class FullDisk:
    """ENOSPC for the `occurrence`-th new file named `name` (its temp file cannot be created),
    or for metrics.jsonl's line of `update`; `stays_full`: every write after that fails too."""

    def __init__(self, monkeypatch, name: str, occurrence: int = 1, update: int | None = None,
                 stays_full: bool = False):
        self.name, self.occurrence, self.update = name, occurrence, update
        self.stays_full = stays_full
        self.full = False
        self.seen = 0
        mkstemp, write = tempfile.mkstemp, M.MetricsFile.write

        def creating(*args, prefix=None, **kwargs):
            if prefix == f".{self.name}.":
                self.seen += 1
                self.full |= self.seen == self.occurrence
            if self.full:
                self.full = self.stays_full
                raise OSError(errno.ENOSPC, "No space left on device")
            return mkstemp(*args, prefix=prefix, **kwargs)

        def appending(metrics_file, record):
            if self.name == M.METRICS_FILE and record["update"] == self.update:
                self.full = True
            if self.full:
                self.full = self.stays_full
                raise OSError(errno.ENOSPC, "No space left on device")
            write(metrics_file, record)

        monkeypatch.setattr(tempfile, "mkstemp", creating)
        monkeypatch.setattr(M.MetricsFile, "write", appending)


DISK_FULL = [  # (file, occurrence or the metrics line's update, stays full)
    ("checkpoint_2.pkl", 1, False), ("params_4.npz", 1, False), ("final_params.npz", 1, False),
    ("summary.json", 2, False), (M.METRICS_FILE, 4, False), ("checkpoint_4.pkl", 1, True),
    ("params_2.npz", 1, True), (M.METRICS_FILE, 6, True)]


def named_checkpoint(line: str, run_dir: Path) -> int | None:
    """The update of the checkpoint an error line names as the run's newest (None: "no
    checkpoint", or a run complete whatever its checkpoints); it must be the newest on disk."""
    if "the run is complete (final_params.npz is saved)" in line:
        assert (run_dir / params_files.FINAL_PARAMS_NAME).is_file()
        return None
    match = re.search(r"(?:the run goes on from|saved) (\S+?\.pkl)", line)
    newest = ckpt.newest_checkpoint(run_dir)
    if match is None:
        assert f"no checkpoint in {run_dir}" in line and newest is None, line
        return None
    assert Path(match.group(1)) == newest, line
    return ckpt.list_checkpoints(run_dir)[-1][0]


@pytest.mark.parametrize("name, at, stays_full", drawn(DISK_FULL, 3, "enospc"),
                         ids=lambda value: str(value))
def test_a_full_disk_is_reported_as_what_is_on_disk(name, at, stays_full, reference_run, tmp_path,
                                                    monkeypatch, capsys):
    is_metrics = name == M.METRICS_FILE
    with monkeypatch.context() as patch:
        FullDisk(patch, name, occurrence=1 if is_metrics else at,
                 update=at if is_metrics else None, stays_full=stays_full)
        assert train(tmp_path, "full", *SAVE_EVERY_2) == cli.EXIT_FAILURE
    run_dir = tmp_path / "full"
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "No space left on device" in line
    named_checkpoint(line, run_dir)
    assert_checkpoints_load(run_dir, newest_may_lack_params=True)
    if stays_full:
        assert f"{M.SUMMARY_FILE} not rewritten" in line
    else:
        # A full disk at the summary of a run whose final files are saved: the run is complete.
        complete = (name, at) == (M.SUMMARY_FILE, 2)
        summary = assert_summary_matches_disk(run_dir)
        assert summary["status"] == ("completed" if complete else "failed")
        assert "No space left" in summary["error"]
    # Space again: the run goes on from its newest checkpoint (or anew, with none).
    resumed = resume(tmp_path, "--run-name", "full") if ckpt.list_checkpoints(run_dir) else \
        train(tmp_path, "full", *SAVE_EVERY_2)
    assert resumed == 0
    assert_matches_reference(run_dir, reference_run)


def _immutable(path: Path, on: bool) -> bool:
    """chattr +i / -i; False where the file system or the user cannot."""
    try:
        return subprocess.run(["chattr", "+i" if on else "-i", str(path)],
                              capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.parametrize("update", drawn([2, 4], 1, "immutable metrics"))
def test_a_metrics_file_that_turns_immutable_loses_no_line(update, reference_run, tmp_path,
                                                           monkeypatch, capsys):
    # Its line is saved with the checkpoint written after the error, and written by the resume:
    # the line is neither lost nor merged into the next one.
    run_dir = tmp_path / "frozen"
    write = M.MetricsFile.write
    frozen = []
    def freezing(metrics_file, record):
        if record["update"] == update:
            frozen.append(_immutable(metrics_file.path, True))
            if not frozen[-1]:  # no chattr here: the same refusal, injected
                raise PermissionError(errno.EPERM, "Operation not permitted")
        write(metrics_file, record)
    with monkeypatch.context() as patch:
        patch.setattr(M.MetricsFile, "write", freezing)
        try:
            assert train(tmp_path, "frozen", "--save-interval", "3",
                         "--keep-checkpoints", "0") == cli.EXIT_FAILURE
        finally:
            if frozen and frozen[-1]:
                _immutable(run_dir / M.METRICS_FILE, False)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(f"saved {run_dir / f'checkpoint_{update}.pkl'} first")
    assert_consistent(run_dir)
    assert [record["update"] for record in records(run_dir)] == list(range(2, update, 2))
    assert resume(tmp_path, "--run-name", "frozen") == 0
    assert_matches_reference(run_dir, reference_run)
