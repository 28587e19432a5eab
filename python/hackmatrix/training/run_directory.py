"""The run directory around a training session: its lock, what a session clears before writing,
and a run that must not be written over or whose final save was cut short."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import metrics as M
from hackmatrix.training.arguments import UsageError
from hackmatrix.training.config import TrainConfig


def prepare(run_dir: Path, saved: dict | None, start_update: int,
            metrics_file: M.MetricsFile, say) -> None:
    """Clears the way for this session's writes without deleting anything it did not write:
    the temp files of a killed save are removed; a resume moves what was saved after its update
    (an abandoned branch, or a stale final_params.npz) and the metrics lines logged after it
    into run_dir/set_aside/, and deletes a final_params.npz that is a copy of the resumed
    update's params (a finished run resumed to extend it); a fresh run moves aside the metrics
    and summary of an earlier run that died before its first checkpoint."""
    ckpt.remove_temp_files(run_dir)
    if saved is not None:
        later = ckpt.files_after(run_dir, start_update)
        final = run_dir / ckpt.FINAL_PARAMS_NAME
        if later == [final] and ckpt.params_files_equal(final, ckpt.params_path(run_dir, start_update)):
            final.unlink()  # the finished run's final params, also saved as params_{update}.npz
            later = []
        kept_lines, later_lines = metrics_file.split_after(start_update)
        if later or later_lines:
            folder = ckpt.set_aside(run_dir, later, f"after_update_{start_update}")
            if later_lines:  # the copy first: an interruption between the two loses nothing
                M.write_lines(folder / M.METRICS_FILE, later_lines)
                metrics_file.rewrite(kept_lines)
            moved = [p.name for p in later] + (
                [f"the {M.METRICS_FILE} lines of {len(later_lines)} later updates"]
                if later_lines else [])
            say(f"[resume] the run had gone past update {start_update}: moved "
                f"{', '.join(moved)} to {folder}")
        return
    leftovers = [run_dir / name for name in (M.METRICS_FILE, M.SUMMARY_FILE)
                 if (run_dir / name).is_file()]
    if leftovers:
        folder = ckpt.set_aside(run_dir, leftovers, "earlier_run")
        say(f"[run] warning: {run_dir} held the metrics of an earlier run that saved no "
            f"checkpoint: moved them to {folder}")


def acquire_lock(run_dir: Path, resuming: bool) -> ckpt.RunLock:
    """The run directory's lock, held: one trainer writes a run at a time (UsageError if another
    holds it, or if the directory cannot be written)."""
    lock = ckpt.RunLock(run_dir)
    try:
        acquired = lock.acquire()
    except OSError as error:  # e.g. --checkpoint-dir is a file, or not writable
        raise UsageError(f"cannot write the run directory {run_dir}: "
                         f"{error.strerror or error}") from None
    if not acquired:
        # A resume continues this directory's run: another --run-name is no way out then.
        way_out = "" if resuming else ", or choose another --run-name"
        raise UsageError(f"another trainer (pid {lock.holder()}) is writing {run_dir}; wait for "
                         f"it to end{way_out}")
    return lock


def finish_a_cut_short_final_save(run_dir: Path, run_name: str, saved: dict,
                                  resume_path: Path, options: dict, say) -> bool:
    """A kill during a run's final save, after checkpoint_{N}.pkl was written but before the rest
    (params_{N}.npz, rotation, final_params.npz, summary.json), leaves a run that has nothing
    left to train, yet is not finished: finish its save from the checkpoint. Nothing happens for
    a finished run, or for a checkpoint that is not the run's newest or did not reach the run's
    own total. Returns whether it finished one."""
    saved_config = TrainConfig.from_dict(saved["config"])
    update, timesteps = int(saved["update"]), int(saved["timesteps"])
    if (saved_config.total_timesteps - timesteps >= saved_config.batch_size
            or ckpt.newest_checkpoint(run_dir) != resume_path):
        return False
    summary_path = run_dir / M.SUMMARY_FILE
    try:
        summary = json.loads(summary_path.read_text())
        finished = summary.get("status") == "completed" and summary.get("update") == update
    except (OSError, ValueError, AttributeError):
        finished = False
    params_file = ckpt.params_path(run_dir, update)
    final = run_dir / ckpt.FINAL_PARAMS_NAME
    # The rotation is part of finishing, not a sign of a kill: a finished run resumed with a
    # smaller --keep-checkpoints is simply finished.
    if finished and params_file.is_file() and final.is_file() and not ckpt.temp_files(run_dir):
        return False
    lock = acquire_lock(run_dir, resuming=True)
    try:
        ckpt.remove_temp_files(run_dir)
        for path in (params_file, final):
            if not path.is_file():
                ckpt.save_params(path, saved["params"], saved["network"])
        kept = ckpt.prune_checkpoints(run_dir, options["keep_checkpoints"])
        if not finished:
            lines = M.MetricsFile(run_dir).split_after(update)[0]
            M.write_summary(run_dir, {
                "status": "completed", "run_name": run_name, "run_dir": os.path.abspath(run_dir),
                "config": saved["config"], "network": saved["network"], "update": update,
                "timesteps": timesteps,
                "final_metrics": json.loads(lines[-1]) if lines else {},
                "checkpoints": [os.path.abspath(p) for p in kept],
                "final_params": os.path.abspath(final),
                "note": "the final save was cut short; a later --resume finished it"})
    finally:
        lock.release()
    say(f"[done] run {run_name}: its final save at update {update} was cut short (killed during "
        f"it, or the directory holds its final checkpoint alone, e.g. copied); finished it from "
        f"{resume_path.name} (params, final_params.npz, rotation, summary): the run is complete "
        "(raise --total-timesteps to continue it)")
    return True


def check_fresh(run_dir: Path) -> None:
    """A new run never writes over an earlier run's checkpoints or params files."""
    if ckpt.list_checkpoints(run_dir):
        raise UsageError(f"{run_dir} already holds checkpoints: add --resume to continue it, "
                         "or choose another --run-name")
    held = sorted(entry.name for entry in run_dir.iterdir() if ckpt.is_policy_file(entry.name))
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise UsageError(f"{run_dir} already holds the params of an earlier run ({shown}): "
                         "choose another --run-name, or move them away")
