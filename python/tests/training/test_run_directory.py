"""What the trainer does with a run directory over a run's life: resuming from an earlier
checkpoint, a finished run, leftovers of a run that died early, a second trainer, options that
persist across resumes, corrupt checkpoints, and which file the tools load."""

import json
import os
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import arguments, cli, params_files, policy_loading, run_directory, startup
from hackmatrix.training import run_records, training_run
from hackmatrix.training import resume as resuming
from hackmatrix.training import metrics as M
from hackmatrix.training.config import TrainConfig
from hackmatrix.training.run_lock import RunLock

from tiny_runs import TINY, TOTAL, UPDATES, assert_same_params, load_params, resume, train


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished tiny run that kept every checkpoint: 2, 4 and 6 (--save-interval 2)."""
    checkpoint_dir = tmp_path_factory.mktemp("finished")
    assert train(checkpoint_dir, "done", "--save-interval", "2", "--keep-checkpoints", "0") == 0
    return checkpoint_dir / "done"


@pytest.fixture
def run_copy(finished_run, tmp_path):
    """A copy of the finished run that a test may change."""
    return shutil.copytree(finished_run, tmp_path / "done")


def signal_as_training_starts(monkeypatch):
    """A SIGTERM as if it came the moment training starts, before the first chunk."""
    start_training = cli._Signals.start_training
    def signalled_at_once(self, say, exit_at_once):
        start_training(self, say, exit_at_once)
        self.signal_name = "SIGTERM"
    monkeypatch.setattr(cli._Signals, "start_training", signalled_at_once)


def updates_in(metrics_path):
    return [json.loads(line)["update"] for line in metrics_path.read_text().splitlines()]


def test_resume_from_an_earlier_checkpoint_sets_the_later_files_aside(run_copy, capsys):
    leftover_temp = run_copy / ".checkpoint_4.pkl.x1y2.tmp"  # from a save that a kill cut short
    leftover_temp.write_bytes(b"partial")
    finished_params = load_params(run_copy / "final_params.npz")

    # No --save-interval: the run keeps the one it started with (2), and its --seed is ignored.
    assert resume(run_copy.parent, str(run_copy / "checkpoint_2.pkl"), "--seed", "5") == 0
    out = capsys.readouterr().out
    assert "--seed 5 ignored" in out
    assert "moved checkpoint_4.pkl, checkpoint_6.pkl, params_4.npz, params_6.npz, " \
           "final_params.npz, the metrics.jsonl lines of 2 later updates to" in out

    (aside,) = (run_copy / ckpt.SET_ASIDE_DIR).iterdir()
    assert aside.name.startswith("after_update_2_")
    assert sorted(p.name for p in aside.iterdir()) == [
        "checkpoint_4.pkl", "checkpoint_6.pkl", "final_params.npz", "metrics.jsonl",
        "params_4.npz", "params_6.npz"]
    assert updates_in(aside / "metrics.jsonl") == [4, 6]
    assert updates_in(run_copy / "metrics.jsonl") == [2, 4, 6]
    assert [update for update, _ in ckpt.list_checkpoints(run_copy)] == [2, 4, 6]
    assert not leftover_temp.exists()
    # Same config and the exact state of update 2: the new branch retraces the old one.
    assert_same_params(load_params(aside / "final_params.npz"),
                       load_params(run_copy / "final_params.npz"))
    assert_same_params(finished_params, load_params(run_copy / "final_params.npz"))
    newest = ckpt.load_checkpoint(ckpt.newest_checkpoint(run_copy))
    assert newest["config"]["seed"] == 1 and newest["run_options"]["save_interval"] == 2

    # The set-aside branch is not a run: resuming it in place is refused, with the way out.
    for path in (aside, aside / "checkpoint_4.pkl"):
        assert resume(run_copy.parent, str(path)) == cli.EXIT_BAD_ARGUMENTS
        err = capsys.readouterr().err
        assert f"was set aside from run '{run_copy.name}' and is not a run of its own" in err
        assert err.count("\n") == 1
    assert sorted(p.name for p in aside.iterdir()) == [
        "checkpoint_4.pkl", "checkpoint_6.pkl", "final_params.npz", "metrics.jsonl",
        "params_4.npz", "params_6.npz"]
    # The way out: the checkpoint copied into a run directory of its own goes on from there.
    branch = run_copy.parent / "branch"
    branch.mkdir()
    shutil.copy(aside / "checkpoint_4.pkl", branch)
    assert resume(run_copy.parent, str(branch)) == 0
    assert "it goes on as run 'branch'" in capsys.readouterr().out
    assert updates_in(branch / "metrics.jsonl") == [6]
    assert_same_params(load_params(aside / "final_params.npz"),
                       load_params(branch / "final_params.npz"))


def test_set_aside_folders_are_told_from_a_checkpoint_dir_that_a_user_named_set_aside(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    folders = []
    for why in ("after_update_12", "earlier_run"):
        (run_dir / "metrics.jsonl").write_text("{}\n")
        folders.append(ckpt.set_aside(run_dir, [run_dir / "metrics.jsonl"], why))
    # A second folder in the same second gets a suffix.
    folders.append(folders[1].with_name(folders[1].name + "_2"))
    for folder in folders:
        assert ckpt.is_set_aside_folder(folder)
        with pytest.raises(arguments.UsageError, match="was set aside from run 'run'"):
            resuming.check_not_set_aside(folder / "checkpoint_3.pkl")
    # --checkpoint-dir set_aside --run-name x: an ordinary run.
    assert not ckpt.is_set_aside_folder(tmp_path / ckpt.SET_ASIDE_DIR / "x")
    resuming.check_not_set_aside(tmp_path / ckpt.SET_ASIDE_DIR / "x" / "checkpoint_3.pkl")
    assert not ckpt.is_set_aside_folder(tmp_path / "after_update_12_20260101-000000")


def test_a_checkpoint_saved_inside_a_log_window_keeps_its_episodes(tmp_path, monkeypatch,
                                                                    capsys):
    # Saved at update 3 with log lines every 2 updates: update 3's episodes belong to line 4.
    # A resume from there (after a kill, or a branch) logged line 4 without them.
    assert train(tmp_path, "odd", "--save-interval", "3", "--keep-checkpoints", "0") == 0
    run_dir = tmp_path / "odd"
    straight = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert resume(tmp_path, str(run_dir / "checkpoint_3.pkl")) == 0
    resumed = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in resumed] == [2, 4, 6]
    # The first line after the resume also says where it resumed.
    assert (resumed[1].pop("resumed_at_update"), resumed[1].pop("resumed_at_timesteps")) == (3, 384)
    for before, after in zip(straight, resumed):
        del before["train/sps"], after["train/sps"]
        assert after == before

    # A signal before the resumed run's first update logs the saved episodes (no pace measured
    # yet: the ETA is "?"; it once divided by zero there) and exits 7.
    signal_as_training_starts(monkeypatch)
    capsys.readouterr()
    assert resume(tmp_path, str(run_dir / "checkpoint_3.pkl")) == cli.EXIT_INTERRUPTED
    out = capsys.readouterr().out
    assert re.search(r"^\[train\] update=3/6 .* eta=\? ", out, re.MULTILINE), out
    assert "[exit] interrupted by SIGTERM" in out


@pytest.mark.parametrize("interrupted_step", ["compile", "wandb start"])
def test_a_resume_interrupted_during_set_up_leaves_the_run_directory_as_it_was(
        run_copy, monkeypatch, capsys, interrupted_step):
    # E.g. resuming an earlier checkpoint by mistake, then Ctrl-C during the compile, or during
    # wandb's start (up to 2 s probing the server), the last step of set-up.
    before = sorted(p.name for p in run_copy.iterdir())
    metrics = (run_copy / "metrics.jsonl").read_text()
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    if interrupted_step == "compile":
        monkeypatch.setattr(startup, "build_runner_and_chunk", interrupted)
    else:
        monkeypatch.setattr(training_run, "WandbSink", interrupted)
    assert resume(run_copy.parent, str(run_copy / "checkpoint_2.pkl")) == cli.EXIT_INTERRUPTED
    assert sorted(p.name for p in run_copy.iterdir()) == before
    assert (run_copy / "metrics.jsonl").read_text() == metrics
    assert "interrupted by SIGINT during set-up" in capsys.readouterr().err


def test_a_resume_with_fewer_envs_continues_the_runs_timestep_count(run_copy, monkeypatch,
                                                                     capsys):
    # checkpoint_2 is at 2 updates of 8 x 16 = 256 timesteps: with 4 envs, the remaining 512 of
    # the run's 768 take 8 updates of 64 (stopped before compiling).
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(startup, "build_runner_and_chunk", interrupted)
    assert resume(run_copy.parent, str(run_copy / "checkpoint_2.pkl"),
                  "--num-envs", "4") == cli.EXIT_INTERRUPTED
    assert f"[config] updates=2->10 total_timesteps={8 * 16 * UPDATES} " in capsys.readouterr().out


def test_new_games_after_a_change_of_env_count_come_from_the_runs_random_state(
        run_copy, monkeypatch, capsys):
    # The games of the fresh envs: from the checkpoint's carried key, not from the seed's,
    # which would replay the games the run began with at update 0.
    import jax

    class Stop(Exception):
        pass

    init_keys = []
    def recording_init(trainer, key, cancelled):
        init_keys.append(np.asarray(key))
        raise Stop
    monkeypatch.setattr(startup, "_run_init", recording_init)
    monkeypatch.setattr(startup, "_compile_chunk", lambda lowered, cancelled: None)
    for update in (2, 4):
        assert resume(run_copy.parent, str(run_copy / f"checkpoint_{update}.pkl"),
                      "--num-envs", "4") == cli.EXIT_FAILURE
    capsys.readouterr()
    seed_key = np.asarray(jax.random.PRNGKey(1))
    for update, key in zip((2, 4), init_keys):
        carried = ckpt.load_checkpoint(run_copy / f"checkpoint_{update}.pkl")["rng"]
        np.testing.assert_array_equal(key, np.asarray(jax.random.split(carried)[1]))
        assert not np.array_equal(key, seed_key)
    assert not np.array_equal(*init_keys)


def test_a_finished_run_resumed_has_nothing_to_do_and_changes_nothing(run_copy, capsys):
    before = {path.name: path.stat().st_mtime_ns for path in run_copy.iterdir()}
    assert resume(run_copy.parent, "--run-name", "done") == 0
    out = capsys.readouterr().out
    assert f"[done] run done: checkpoint_{UPDATES}.pkl is at update {UPDATES}" in out
    assert "nothing to do" in out
    assert "[compile]" not in out
    assert {path.name: path.stat().st_mtime_ns for path in run_copy.iterdir()} == before


def test_resuming_the_newest_checkpoint_drops_the_copy_of_its_params_in_final_params(
        run_copy, capsys, monkeypatch):
    # Extending a finished run: its final_params.npz is params_6.npz again, and no longer final,
    # and while it trains its summary no longer says completed (a SIGKILL would leave it so).
    statuses_while_training = []
    format_line = M.format_line
    def reading_format_line(record, *args):
        summary = json.loads((run_copy / "summary.json").read_text())
        statuses_while_training.append((summary["status"], summary["update"]))
        return format_line(record, *args)
    monkeypatch.setattr(M, "format_line", reading_format_line)
    assert resume(run_copy.parent, "--run-name", "done", "--total-timesteps",
                  str(8 * 16 * (UPDATES + 2)), "--lr", "0") == 0
    assert statuses_while_training == [("running", UPDATES)]
    assert json.loads((run_copy / "summary.json").read_text())["status"] == "completed"
    out = capsys.readouterr().out
    assert ("[resume] total_timesteps 768 -> 1024: the learning rate now anneals (linear) to 0 "
            "at 1024") in out
    assert not (run_copy / ckpt.SET_ASIDE_DIR).exists()
    assert [update for update, _ in ckpt.list_checkpoints(run_copy)] == [2, 4, 6, 8]
    # --lr 0: the params did not move, so the new final params are those of update 6.
    assert_same_params(load_params(run_copy / "params_6.npz"),
                       load_params(run_copy / "final_params.npz"))


def test_a_resume_sets_aside_a_final_params_that_is_not_its_checkpoints_params(run_copy, capsys):
    # Update 6's checkpoint and params deleted by hand: final_params.npz (update 6's) is not a
    # copy of params_4.npz, so a resume from update 4 moves it aside rather than deleting it.
    (run_copy / "checkpoint_6.pkl").unlink()
    (run_copy / "params_6.npz").unlink()
    finished_params = load_params(run_copy / "final_params.npz")
    assert resume(run_copy.parent, str(run_copy / "checkpoint_4.pkl")) == 0
    assert "moved final_params.npz, the metrics.jsonl lines of 1 later updates to" in \
        capsys.readouterr().out
    (aside,) = (run_copy / ckpt.SET_ASIDE_DIR).iterdir()
    assert_same_params(finished_params, load_params(aside / "final_params.npz"))


def test_non_finite_loss_keeps_the_last_good_checkpoint_and_records_the_failure(run_copy, capsys):
    assert resume(run_copy.parent, "--run-name", "done", "--total-timesteps",
                  str(8 * 16 * (UPDATES + 4)), "--lr", "1e30") == cli.EXIT_FAILURE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "non-finite loss within updates 7-8" in line
    assert f"last good checkpoint: {run_copy / 'checkpoint_6.pkl'}" in line
    assert [update for update, _ in ckpt.list_checkpoints(run_copy)] == [2, 4, 6]
    summary = json.loads((run_copy / "summary.json").read_text())
    assert summary["status"] == "failed" and "non-finite loss" in summary["error"]
    assert ckpt.load_checkpoint(run_copy / "checkpoint_6.pkl")["update"] == 6


def test_a_run_file_that_cannot_be_written_saves_a_checkpoint_before_exit_2(run_copy, monkeypatch,
                                                                            capsys):
    # metrics.jsonl on a full disk at update 8 (its log line comes before its interval save):
    # the updates since checkpoint_6 are saved before the run gives up.
    write = M.MetricsFile.write
    def disk_full_at_8(self, record):
        if record["update"] == 8:
            raise OSError(28, "No space left on device")
        write(self, record)
    monkeypatch.setattr(M.MetricsFile, "write", disk_full_at_8)
    assert resume(run_copy.parent, "--run-name", "done", "--total-timesteps",
                  str(8 * 16 * (UPDATES + 4))) == cli.EXIT_FAILURE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"error: OSError: [Errno 28] No space left on device; saved "
                    f"{run_copy / 'checkpoint_8.pkl'} first")
    assert ckpt.load_checkpoint(run_copy / "checkpoint_8.pkl")["update"] == 8
    summary = json.loads((run_copy / "summary.json").read_text())
    assert summary["status"] == "failed" and "No space left" in summary["error"]


def test_a_run_directory_deleted_during_the_run_is_not_written_anew(run_copy, monkeypatch,
                                                                     capsys):
    # Re-created by the next save, it would hold no lock: a second trainer could resume it
    # beside this one and prune its checkpoints.
    write = M.MetricsFile.write
    def deleted_after_logging_8(self, record):
        write(self, record)
        if record["update"] == 8:
            shutil.rmtree(run_copy)
    monkeypatch.setattr(M.MetricsFile, "write", deleted_after_logging_8)
    assert resume(run_copy.parent, "--run-name", "done", "--total-timesteps",
                  str(8 * 16 * (UPDATES + 4))) == cli.EXIT_FAILURE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"error: the run directory {run_copy} was deleted, renamed or replaced "
                    "during the run (its .lock is gone): not saving update 8 into it")
    assert not run_copy.exists()


def test_a_summary_that_cannot_be_rewritten_after_a_signal_keeps_exit_7(run_copy, monkeypatch,
                                                                         capsys):
    signal_as_training_starts(monkeypatch)
    write_summary = M.write_summary
    def read_only_when_interrupted(run_dir, summary):
        if summary["status"] == "interrupted":
            raise PermissionError(1, "Operation not permitted")
        write_summary(run_dir, summary)
    monkeypatch.setattr(M, "write_summary", read_only_when_interrupted)
    assert resume(run_copy.parent, str(run_copy / "checkpoint_4.pkl")) == cli.EXIT_INTERRUPTED
    out = capsys.readouterr().out
    assert ("[exit] warning: could not rewrite summary.json (PermissionError: [Errno 1] "
            "Operation not permitted); the checkpoint is saved") in out
    assert f"[exit] interrupted by SIGTERM; resume with --resume {run_copy}" in out


def test_resuming_a_run_that_a_trainer_writes_before_its_first_save_says_so(tmp_path, capsys):
    run_dir = tmp_path / "busy"
    writer = RunLock(run_dir)
    assert writer.acquire()  # the other trainer, still compiling or before its first save
    try:
        assert resume(tmp_path, "--run-name", "busy") == cli.EXIT_BAD_CHECKPOINT
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.endswith(f"another trainer (pid {os.getpid()}) is writing this run and has "
                             "not saved a checkpoint yet; resume once it has saved one or ended")
    finally:
        writer.release()
    assert not RunLock(run_dir).held_elsewhere()
    assert resume(tmp_path, "--run-name", "busy") == cli.EXIT_BAD_CHECKPOINT
    assert "another trainer" not in capsys.readouterr().err


def test_a_fresh_run_sets_aside_the_metrics_of_a_run_that_saved_no_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "again"
    run_dir.mkdir()
    earlier = '{"update": 1}\n{"update": 2}\n'
    (run_dir / "metrics.jsonl").write_text(earlier)
    # Resuming it has nothing to load, and says what to do instead.
    for where in (["--run-name", "again"], [str(run_dir)]):
        assert resume(tmp_path, *where) == cli.EXIT_BAD_CHECKPOINT
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.endswith("the run there stopped before its first save; without --resume it "
                             "starts over, setting its metrics aside")
    assert train(tmp_path, "again") == 0
    assert "held the metrics of an earlier run that saved no checkpoint" in capsys.readouterr().out
    assert updates_in(run_dir / "metrics.jsonl") == [2, 4, 6]
    (aside,) = (run_dir / ckpt.SET_ASIDE_DIR).iterdir()
    assert (aside / "metrics.jsonl").read_text() == earlier


def test_a_run_with_params_files_but_no_checkpoint_gets_no_advice_to_start_over(tmp_path,
                                                                                 capsys):
    # A fresh start would refuse that directory (its params files), so none is suggested.
    run_dir = tmp_path / "kept"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"update": 2}\n')
    (run_dir / "params_2.npz").write_bytes(b"")
    assert resume(tmp_path, "--run-name", "kept") == cli.EXIT_BAD_CHECKPOINT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(f"no checkpoint to resume for run 'kept' in {tmp_path}")


def test_a_fresh_run_never_writes_over_the_params_files_of_an_earlier_run(tmp_path, capsys):
    run_dir = tmp_path / "kept"
    run_dir.mkdir()
    (run_dir / "final_params.npz").write_bytes(b"mine")
    (run_dir / "params_6.npz").write_bytes(b"mine too")
    assert train(tmp_path, "kept") == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.endswith("already holds the params of an earlier run (final_params.npz, "
                         "params_6.npz): choose another --run-name, or move them away")
    assert "[config]" not in captured.out  # no description of a run that is refused
    assert (run_dir / "final_params.npz").read_bytes() == b"mine"
    assert (run_dir / "params_6.npz").read_bytes() == b"mine too"
    assert sorted(p.name for p in run_dir.iterdir()) == [".lock", "final_params.npz",
                                                          "params_6.npz"]


def test_a_fresh_run_refused_for_many_params_files_names_the_first_three(tmp_path):
    for name in ("params_2.npz", "params_4.npz", "params_6.npz", "final_params.npz"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(arguments.UsageError, match=r"\(final_params\.npz, params_2\.npz, "
                       r"params_4\.npz and 1 more\)"):
        run_directory.check_fresh(tmp_path)


def test_a_second_trainer_on_the_same_run_exits_3_at_once(tmp_path, capsys):
    lock = RunLock(tmp_path / "busy")
    assert lock.acquire()
    try:
        assert train(tmp_path, "busy") == cli.EXIT_BAD_ARGUMENTS
    finally:
        lock.release()
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.endswith(f"another trainer (pid {os.getpid()}) is writing {tmp_path / 'busy'}; "
                         "wait for it to end, or choose another --run-name")
    assert "[config]" not in captured.out
    assert not (tmp_path / "busy" / "metrics.jsonl").exists()


def test_a_resume_of_a_run_another_trainer_writes_only_says_wait(run_copy, capsys):
    """A resume continues that directory's run: another --run-name is no way out."""
    lock = RunLock(run_copy)
    assert lock.acquire()
    try:
        assert resume(run_copy.parent, str(run_copy / "checkpoint_2.pkl")) == \
            cli.EXIT_BAD_ARGUMENTS
    finally:
        lock.release()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(f"another trainer (pid {os.getpid()}) is writing {run_copy}; wait for "
                         "it to end")


def test_a_final_save_cut_short_by_a_kill_is_finished_by_the_next_resume(run_copy, capsys,
                                                                          monkeypatch):
    # Killed after checkpoint_6.pkl was written, before its params, the rotation, final_params
    # and summary: a resume has nothing to train, but must not call the run done as it is.
    for name in ("params_6.npz", "final_params.npz", "summary.json"):
        (run_copy / name).unlink()
    (run_copy / ".params_6.npz.abcd1234.tmp").write_bytes(b"partial")
    monkeypatch.chdir(run_copy.parent)  # relative paths given: summary.json's are absolute
    assert resume(Path("."), run_copy.name, "--keep-checkpoints", "2") == 0
    out = capsys.readouterr().out
    assert "its final save at update 6 was cut short" in out and "nothing to do" not in out
    assert [update for update, _ in ckpt.list_checkpoints(run_copy)] == [4, 6]
    assert not list(run_copy.glob(".*.tmp"))
    # Both written from checkpoint_6's params: the finished run's, not update 4's.
    final = load_params(run_copy / "final_params.npz")
    assert_same_params(final, load_params(run_copy / "params_6.npz"))
    assert any((final[key] != value).any()
               for key, value in load_params(run_copy / "params_4.npz").items())
    summary = json.loads((run_copy / "summary.json").read_text())
    assert (summary["status"], summary["update"]) == ("completed", 6)
    assert summary["final_metrics"]["update"] == 6
    paths = [Path(summary[key]) for key in ("run_dir", "final_params")]
    paths += [Path(path) for path in summary["checkpoints"]]
    assert all(path.is_absolute() for path in paths)
    assert [path.resolve() for path in paths] == [
        (run_copy / name).resolve()
        for name in (".", "final_params.npz", "checkpoint_4.pkl", "checkpoint_6.pkl")]
    # Finished now: resumed again (with fewer checkpoints to keep, too, which is no sign of a
    # kill), nothing changes and nothing is said about it.
    before = {p.name: p.stat().st_mtime_ns for p in run_copy.iterdir() if p.is_file()}
    assert resume(run_copy.parent, str(run_copy), "--keep-checkpoints", "1") == 0
    assert "cut short" not in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in run_copy.iterdir() if p.is_file()} == before


def test_a_resume_sets_aside_metrics_lines_logged_after_its_newest_checkpoint(run_copy, capsys):
    # Killed after logging update 6 but before saving it: no file to move, yet the line of
    # update 6 goes aside, so that the resumed run's own line 6 is the only one.
    for name in ("checkpoint_6.pkl", "params_6.npz", "final_params.npz"):
        (run_copy / name).unlink()
    assert resume(run_copy.parent, str(run_copy)) == 0
    assert "moved the metrics.jsonl lines of 1 later updates to" in capsys.readouterr().out
    assert updates_in(run_copy / "metrics.jsonl") == [2, 4, 6]
    (aside,) = (run_copy / ckpt.SET_ASIDE_DIR).iterdir()
    assert updates_in(aside / "metrics.jsonl") == [6]


def test_a_cut_short_final_save_rewrites_a_summary_completed_at_an_earlier_update(run_copy,
                                                                                  capsys):
    # The summary of the session before (completed at update 4), the final save of update 6 cut
    # short after its checkpoint: the summary finished from it says update 6.
    for name in ("params_6.npz", "final_params.npz"):
        (run_copy / name).unlink()
    summary = json.loads((run_copy / "summary.json").read_text())
    (run_copy / "summary.json").write_text(json.dumps({**summary, "update": 4}))
    assert resume(run_copy.parent, str(run_copy)) == 0
    assert "its final save at update 6 was cut short" in capsys.readouterr().out
    summary = json.loads((run_copy / "summary.json").read_text())
    assert (summary["status"], summary["update"]) == ("completed", 6)


def test_a_newest_checkpoint_with_one_update_left_to_train_is_not_a_cut_short_final_save(
        run_copy):
    # A run stopped (killed, or SIGINT) one update before its end, its newest checkpoint that of
    # the update before the last: the resume trains that update; nothing is "finished" for it.
    for name in ("checkpoint_6.pkl", "params_6.npz", "final_params.npz", "summary.json"):
        (run_copy / name).unlink()
    newest = ckpt.newest_checkpoint(run_copy)
    saved = ckpt.load_checkpoint(newest)
    batch_size = TrainConfig.from_dict(saved["config"]).batch_size
    saved["timesteps"] = TrainConfig.from_dict(saved["config"]).total_timesteps - batch_size
    said = []
    assert not run_directory.finish_a_cut_short_final_save(
        run_copy, "done", saved, newest, {"keep_checkpoints": 0}, said.append)
    assert said == [] and not (run_copy / "final_params.npz").exists()


def test_a_copied_run_directory_goes_on_as_its_own_run_with_its_own_wandb_run(
        finished_run, tmp_path, capsys):
    # Copying a run to branch it must not resume the original's wandb run: the branch's
    # updates would be written into the original's history.
    branch = shutil.copytree(finished_run, tmp_path / "branch")
    original = ckpt.load_checkpoint(finished_run / "checkpoint_4.pkl")
    assert resume(tmp_path, str(branch / "checkpoint_4.pkl")) == 0
    out = capsys.readouterr().out
    assert (f"[resume] note: this checkpoint was written by run 'done'; in {branch} (a copy or "
            "a rename) it goes on as run 'branch', a run of its own in wandb too (run 'done' "
            "is left as it was)") in out
    assert "[config] run=branch " in out
    newest = ckpt.load_checkpoint(branch / "checkpoint_6.pkl")
    assert newest["run_name"] == "branch"
    assert newest["wandb_run_id"] not in (None, original["wandb_run_id"])
    origin = {"run_name": "done", "update": 4, "wandb_run_id": original["wandb_run_id"]}
    summary = json.loads((branch / "summary.json").read_text())
    assert (summary["run_name"], summary["forked_from"]) == ("branch", origin)
    # Its own checkpoints are the branch's: resumed from them (from inside the directory, too),
    # it keeps its name, its new wandb run and its origin.
    cwd = os.getcwd()
    os.chdir(branch)
    try:
        assert resume(".", "checkpoint_6.pkl", "--total-timesteps",
                      str(8 * 16 * (UPDATES + 2))) == 0
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "written by run" not in out and "[config] run=branch " in out
    newer = ckpt.load_checkpoint(branch / "checkpoint_8.pkl")
    assert newer["wandb_run_id"] == newest["wandb_run_id"] and newer["forked_from"] == origin
    assert json.loads((branch / "summary.json").read_text())["forked_from"] == origin


def test_resume_with_another_run_name_exits_3(finished_run, capsys):
    code = resume(finished_run.parent, str(finished_run), "--run-name", "other")
    assert code == cli.EXIT_BAD_ARGUMENTS
    assert "a resumed run keeps its name" in capsys.readouterr().err


def _corrupt(state, key, value):
    state = dict(state)
    if value is KeyError:
        del state[key]
    elif key == "lr":
        state["config"] = {**state["config"], "lr": value}
    elif key == "num_actions":
        state["network"] = {k: v for k, v in state["network"].items() if k != key}
    elif key == "hidden_dim":  # the network record alone edited: the params still fit the config
        state["network"] = {**state["network"], key: value}
    else:
        state[key] = value
    return state


@pytest.mark.parametrize("key, value, message", [
    ("schedule_timesteps", KeyError, "missing ['schedule_timesteps']"),
    ("config", "x", "its config is not a dict"),
    ("lr", "x", "its config is invalid"),
    ("num_actions", None, "its network must give"),
    ("hidden_dim", 7, "hidden_dim 7 in its network, 32 in its config"),
    ("update", -1, "update is -1"),
    ("update", True, "update is True"),  # a bool is an int to Python: it read as update 1
    ("metrics_window", {"updates": 2}, "its metrics window"),
    ("metrics_window", {"updates": 1, "steps": 128, "seconds": 0.5, "sums": {}, "loss_sums": {},
                        "highest_stage": 1, "learning_rate": 0.001}, "its metrics window"),
    ("run_options", ["x"], "its run options are not a dict"),
    ("run_options", {"keep_checkpoints": "5"},
     "its run options say --keep-checkpoints must be a whole number >= 0, got '5'"),
    ("explicit_config", 5, "explicit_config is 5"),
    ("schedule_timesteps", "x", "schedule_timesteps is 'x'"),
    ("schedule_timesteps", 10**400, "schedule_timesteps is 1000"),
    ("episode_return", np.zeros(3, np.float32), "episode returns does not match"),
    ("rng", np.zeros(3, np.uint32), "random state does not match"),
])
def test_a_corrupt_checkpoint_field_exits_6_with_one_line(finished_run, tmp_path, capsys,
                                                          key, value, message):
    state = ckpt.load_checkpoint(finished_run / "checkpoint_6.pkl")
    path = tmp_path / "run" / "checkpoint_6.pkl"
    path.parent.mkdir()
    path.write_bytes(pickle.dumps(_corrupt(state, key, value)))
    # Two more updates to run, so that the arrays are checked too (before compiling).
    more = ["--total-timesteps", str(8 * 16 * (UPDATES + 2))]
    assert resume(tmp_path, str(path), *more) == cli.EXIT_BAD_CHECKPOINT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line


def test_the_tools_load_a_checkpoint_whose_config_older_versions_accepted(finished_run, tmp_path):
    # A seed of -1 passed before seeds were checked: such a run cannot resume, but its policy
    # still loads for watching and evaluation.
    state = ckpt.load_checkpoint(finished_run / "checkpoint_6.pkl")
    path = tmp_path / "checkpoint_6.pkl"
    path.write_bytes(pickle.dumps({**state, "config": {**state["config"], "seed": -1}}))
    params, network = policy_loading.load_policy_params(path)
    assert network == state["network"]
    # The params file beside it holds the same params, and the same network record as 0-d
    # `network/` entries.
    saved = load_params(finished_run / "params_6.npz")
    assert_same_params({key: value for key, value in saved.items()
                        if key.startswith("params/")}, params_files.flatten_params(params))
    assert {key[len("network/"):]: value.item() for key, value in saved.items()
            if key.startswith("network/")} == state["network"]
    with pytest.raises(ckpt.CheckpointError, match="its config is invalid"):
        ckpt.load_checkpoint(path)


def test_resume_from_a_params_file_says_it_holds_params_only(finished_run, capsys):
    assert resume(finished_run.parent, str(finished_run / "params_6.npz")) == cli.EXIT_BAD_CHECKPOINT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "holds params only" in line


def test_a_run_directory_resolves_to_final_params_unless_something_was_saved_after_it(tmp_path):
    for name in ("checkpoint_4.pkl", "params_4.npz", "params_8.npz", "final_params.npz"):
        (tmp_path / name).write_bytes(b"")
    os.utime(tmp_path / "params_8.npz", (1_000, 1_000))
    os.utime(tmp_path / "final_params.npz", (2_000, 2_000))
    assert policy_loading.resolve_policy_file(tmp_path) == tmp_path / "final_params.npz"
    # A resumed run that was interrupted saved update 8 after the old final params.
    os.utime(tmp_path / "params_8.npz", (3_000, 3_000))
    assert policy_loading.resolve_policy_file(tmp_path) == tmp_path / "params_8.npz"
    (tmp_path / "final_params.npz").unlink()
    (tmp_path / "checkpoint_8.pkl").write_bytes(b"")
    assert policy_loading.resolve_policy_file(tmp_path) == tmp_path / "checkpoint_8.pkl"


def _args(*argv):
    return arguments.build_parser().parse_args(list(argv))


def test_run_options_come_from_the_command_line_then_the_checkpoint_then_the_defaults():
    saved = {"run_options": {**arguments.RUN_OPTION_DEFAULTS, "save_interval": 20,
                             "keep_checkpoints": 2, "wandb_project": "mine", "no_artifact": True}}
    assert arguments.run_options(_args(), None) == arguments.RUN_OPTION_DEFAULTS
    kept = arguments.run_options(_args(), saved)
    assert (kept["save_interval"], kept["keep_checkpoints"], kept["wandb_project"],
            kept["no_artifact"]) == (20, 2, "mine", True)
    # A timer asked for now replaces the saved update interval.
    timer = arguments.run_options(_args("--save-interval-minutes", "5"), saved)
    assert (timer["save_interval"], timer["save_interval_minutes"]) == (None, 5.0)
    assert arguments.run_options(_args("--keep-checkpoints", "7"), saved)["keep_checkpoints"] == 7


def test_wandb_and_artifact_flags_given_on_resume_override_the_saved_ones():
    saved = {"run_options": {**arguments.RUN_OPTION_DEFAULTS, "wandb": False, "no_artifact": True}}
    assert arguments.run_options(_args("--wandb-mode", "offline"), saved)["wandb"] is True
    assert arguments.run_options(_args("--wandb-mode", "disabled"), saved)["wandb"] is False
    assert arguments.run_options(_args("--no-wandb", "--wandb-mode", "offline"), saved)["wandb"] is False
    assert arguments.run_options(_args("--artifact"), saved)["no_artifact"] is False
    assert arguments.run_options(_args(), saved)["no_artifact"] is True


def test_metrics_lines_a_resume_cannot_place_are_set_aside_not_dropped(tmp_path):
    metrics_file = M.MetricsFile(tmp_path)
    metrics_file.path.write_text('{"update": 2}\n{"update": null}\n[4]\n{"update": 1.5}\n'
                                 '{"update": "1"}\n{"update": true}\n{"update": 4}\n{"upd\n')
    kept, later = metrics_file.split_after(2)
    assert kept == ['{"update": 2}']
    assert later == ['{"update": null}', "[4]", '{"update": 1.5}', '{"update": "1"}',
                     '{"update": true}', '{"update": 4}', '{"upd']


@pytest.mark.parametrize("argv, reason", [
    (["--save-interval-minutes", "nan"], "--save-interval-minutes must be a finite number >= 0"),
    (["--save-interval-minutes", "-1"], "--save-interval-minutes must be a finite number >= 0"),
    (["--keep-checkpoints", "-1"], "--keep-checkpoints must be a whole number >= 0"),
    (["--save-interval", "0"], "--save-interval must be a whole number >= 1"),
])
def test_bad_run_options_are_usage_errors(argv, reason):
    with pytest.raises(arguments.UsageError, match=reason):
        arguments.run_options(_args(*argv), None)


def test_a_new_total_on_resume_is_reported_with_the_learning_rate_it_gives():
    config = TrainConfig(lr=1e-3, total_timesteps=2000, lr_schedule="linear")
    note = resuming.schedule_note({"total_timesteps": 1000}, config, 500.0)
    assert note == ("[resume] total_timesteps 1000 -> 2000: the learning rate now anneals "
                    "(linear) to 0 at 2000 steps, so at this update it is 0.00075 (it was 0.0005)")
    assert resuming.schedule_note({"total_timesteps": 2000}, config, 500.0) is None
    assert resuming.schedule_note({"total_timesteps": 1000},
                              TrainConfig(total_timesteps=2000, lr_schedule="constant"),
                              500.0) is None
    # A cosine: 1e-3 * (1 + cos(pi / 4)) / 2 = 0.000854 at a quarter, 1e-3 / 2 at half of the run.
    cosine = TrainConfig(lr=1e-3, total_timesteps=2000, lr_schedule="cosine")
    assert resuming.schedule_note({"total_timesteps": 1000}, cosine, 500.0) == (
        "[resume] total_timesteps 1000 -> 2000: the learning rate now anneals (cosine) to 0 at "
        "2000 steps, so at this update it is 0.000854 (it was 0.0005)")


def test_a_signal_during_set_up_interrupts_and_a_second_one_in_training_exits_at_once(
        monkeypatch, capsys):
    signals = cli._Signals()
    with pytest.raises(KeyboardInterrupt):
        signals.handle(cli.signal.SIGTERM, None)
    assert signals.signal_name == "SIGTERM"
    # Had a callback swallowed that exception, set-up would go on: training must not start.
    with pytest.raises(KeyboardInterrupt):
        signals.start_training(print, print)

    said, exits, second_signals = [], [], []
    def exit_at_once(name):  # the trainer's looks at the run directory (tests/faults)
        second_signals.append(name)
        return cli.EXIT_FAILURE, "exiting now without saving update 3"
    signals = cli._Signals()
    signals.start_training(said.append, exit_at_once)
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    signals.handle(cli.signal.SIGINT, None)
    assert signals.signal_name == "SIGINT" and exits == [] and second_signals == []
    assert said == ["[signal] SIGINT: saving a checkpoint after the current chunk, then exiting "
                    "(signal again to exit at once, without waiting for the save)"]
    signals.handle(cli.signal.SIGINT, None)
    assert exits == [cli.EXIT_FAILURE] and second_signals == ["SIGINT"]
    assert "SIGINT again: exiting now without saving update 3" in capsys.readouterr().err
    # Once the interrupted run's checkpoint is saved, a second signal (say, while wandb
    # finishes) exits at once, as interrupted: nothing is lost (the summary says interrupted).
    signals.outcome_saved(cli.EXIT_INTERRUPTED, "the checkpoint is saved")
    signals.handle(cli.signal.SIGTERM, None)
    assert exits == [cli.EXIT_FAILURE, cli.EXIT_INTERRUPTED] and len(second_signals) == 1
    assert "SIGTERM again: the checkpoint is saved; exiting now" in capsys.readouterr().err


def test_a_signal_once_a_completed_run_is_saved_exits_0_and_leaves_its_summary(
        monkeypatch, capsys):
    # Say while wandb uploads the final checkpoint: the run is complete, and stays so.
    exits, second_signals = [], []
    signals = cli._Signals()
    signals.start_training(print, second_signals.append)
    signals.outcome_saved(cli.EXIT_OK, "the run is complete")
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    signals.handle(cli.signal.SIGINT, None)
    assert exits == [cli.EXIT_OK] and second_signals == []
    assert capsys.readouterr().err == "[signal] SIGINT: the run is complete; exiting now\n"


def test_the_second_signals_exit_happens_even_if_its_message_cannot_be_written(monkeypatch):
    exits = []
    signals = cli._Signals()
    signals.start_training(print, lambda name: (cli.EXIT_FAILURE, "exiting now"))
    signals.signal_name = "SIGINT"
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    monkeypatch.setattr(cli, "print", lambda *args, **kwargs: (_ for _ in ()).throw(
        RuntimeError("reentrant call inside <_io.BufferedWriter>")), raising=False)
    with pytest.raises(RuntimeError):
        signals.handle(cli.signal.SIGINT, None)
    assert exits == [cli.EXIT_FAILURE]


@pytest.mark.parametrize("name", ["", ".", "..", "../escape", "a/b", "/abs"])
def test_a_run_name_must_be_a_plain_directory_name(tmp_path, capsys, name):
    assert train(tmp_path, name) == cli.EXIT_BAD_ARGUMENTS
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "must be a plain directory name" in line
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_dir_that_is_a_file_exits_3_before_compiling(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    assert cli.main([*TINY, *TOTAL, "--checkpoint-dir", str(tmp_path / "afile"),
                     "--run-name", "r", "--no-wandb"]) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert f"cannot write the run directory {tmp_path / 'afile' / 'r'}" in line
    assert "[compile]" not in captured.out


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_an_empty_checkpoint_dir_exits_3_before_anything(tmp_path, monkeypatch, capsys, resume):
    """An empty --checkpoint-dir (typically an unset shell variable) is refused rather than
    read as the current directory, with or without --resume."""
    monkeypatch.chdir(tmp_path)
    assert cli.main([*TINY, *TOTAL, "--checkpoint-dir", "", *resume,
                     "--no-wandb"]) == cli.EXIT_BAD_ARGUMENTS
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--checkpoint-dir is empty" in line
    assert list(tmp_path.iterdir()) == []


def test_a_resume_with_a_new_batch_keeps_the_minibatching_the_user_set_before(tmp_path):
    saved = {"config": TrainConfig(num_envs=8, num_steps=16, num_minibatches=2, update_epochs=1,
                                   total_timesteps=10**6).to_dict(),
             "explicit_config": ["num_envs", "num_minibatches", "num_steps", "update_epochs"]}
    config, scaled, user_set = resuming.resumed_config(
        _args("--num-envs", "16"), saved, available_devices=1, say=print)
    assert (config.num_envs, config.num_minibatches, config.update_epochs) == (16, 2, 1)
    assert scaled == {} and {"num_minibatches", "update_epochs"} <= user_set
    # Left to auto-scaling, they are derived anew for the new batch: 512 x 128 -> 8 minibatches.
    saved["explicit_config"] = ["num_envs", "num_steps"]
    config, scaled, _ = resuming.resumed_config(
        _args("--num-envs", "512", "--num-steps", "128"), saved, available_devices=1, say=print)
    assert (config.num_minibatches, config.update_epochs) == (8, 4)
    assert scaled == {"num_minibatches": (4, 8)}



def test_the_recorded_commit_says_when_the_code_differs_from_it(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    git("init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = run_records.git_commit(repo)
    assert len(commit) == 40
    (repo / "notes.txt").write_text("untracked files do not count\n")
    assert run_records.git_commit(repo) == commit
    (repo / "code.py").write_text("x = 2\n")
    assert run_records.git_commit(repo) == commit + "-dirty"
    assert run_records.git_commit(tmp_path) is None  # not a checkout


def test_resume_without_a_path_breaks_a_tie_in_times_by_the_run_name(tmp_path):
    # `cp -a` keeps a run's times: the choice must not depend on the directory listing's order.
    for name in ("orig", "acopy", "zcopy"):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "checkpoint_3.pkl"
        path.write_bytes(b"")
        os.utime(path, ns=(10**18, 10**18))
    assert ckpt.find_resume_checkpoint(None, tmp_path, None) == tmp_path / "zcopy" / "checkpoint_3.pkl"


def test_resume_a_run_directory_and_latest_follow_one_rule_for_the_newest_file(tmp_path):
    # In a run, files go by update (final_params.npz last unless something was saved after it);
    # across runs, the run whose newest file was modified last.
    from hackmatrix.tools import policy

    first, second = tmp_path / "first", tmp_path / "second"
    for run, names in ((first, ("checkpoint_4.pkl", "params_4.npz", "params_8.npz",
                                "final_params.npz")),
                       (second, ("checkpoint_2.pkl", "params_2.npz"))):
        run.mkdir()
        for name in names:
            (run / name).write_bytes(b"")
    times = {first / "params_8.npz": 1_000, first / "final_params.npz": 2_000,
             second / "checkpoint_2.pkl": 1_500, second / "params_2.npz": 1_500}
    for path, seconds in times.items():
        os.utime(path, (seconds, seconds))
    # checkpoint_4.pkl and params_4.npz were modified last, but update 8 and the final params
    # came after them in the run: the run means its final params (modified at 2 000).
    assert policy_loading.resolve_policy_file(first) == first / "final_params.npz"
    assert policy.latest_checkpoint(tmp_path) == first / "final_params.npz"
    assert ckpt.newest_checkpoint(first) == first / "checkpoint_4.pkl"
    assert ckpt.find_resume_checkpoint(None, tmp_path, None) == first / "checkpoint_4.pkl"
    # At equal update the full checkpoint; and a run saved after another's final params wins.
    os.utime(second / "checkpoint_2.pkl", (3_000, 3_000))
    assert policy_loading.resolve_policy_file(second) == second / "checkpoint_2.pkl"
    assert policy.latest_checkpoint(tmp_path) == second / "checkpoint_2.pkl"


def test_a_rotation_deletes_the_params_file_before_its_checkpoint(tmp_path, monkeypatch):
    # A kill between the two deletions must leave the checkpoint (which the next rotation
    # removes), never a params file that no rotation would see again.
    for update in (1, 2, 3):
        ckpt.checkpoint_path(tmp_path, update).write_bytes(b"")
        params_files.params_path(tmp_path, update).write_bytes(b"")
    order = []
    real_unlink = type(tmp_path).unlink
    monkeypatch.setattr(type(tmp_path), "unlink",
                        lambda self, missing_ok=False: (order.append(self.name),
                                                        real_unlink(self, missing_ok=missing_ok)))
    kept = ckpt.prune_checkpoints(tmp_path, 1)
    assert order == ["params_1.npz", "checkpoint_1.pkl", "params_2.npz", "checkpoint_2.pkl"]
    assert kept == [ckpt.checkpoint_path(tmp_path, 3)]
