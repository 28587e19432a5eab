"""The run directory around a training session: its lock, what a session clears before writing,
and a run that must not be written over or whose final save was cut short."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files
from hackmatrix.training import metrics as M
from hackmatrix.training.arguments import UsageError
from hackmatrix.training.atomic_files import temp_files
from hackmatrix.training.config import TrainConfig
from hackmatrix.training.run_lock import RunLock


def prepare(run_dir: Path, saved: dict | None, start_update: int,
            metrics_file: M.MetricsFile, say) -> Path | None:
    """Clears the way for this session's writes without deleting anything it did not write:
    the temp files of a killed save are removed; a resume moves what was saved after its update
    (an abandoned branch, or a stale final_params.npz) and the metrics lines logged after it
    into run_dir/set_aside/, writes the metrics lines its checkpoint holds unwritten
    (`unwritten_metrics_lines`) and a params file its checkpoint lacks; a fresh run moves aside
    the metrics and summary of an earlier run that died before its first checkpoint.

    Returns the final_params.npz of a finished run that this session extends (a copy of the
    resumed update's params): the session deletes it once it has saved a newer checkpoint, so
    that a session that saves nothing leaves the finished run whole. None otherwise."""
    ckpt.remove_temp_files(run_dir)
    if saved is None:
        _set_aside_an_earlier_runs_metrics(run_dir, say)
        return None
    if (restored := ckpt.restore_params_file(run_dir, saved)) is not None:
        say(f"[resume] restored {restored.name} from checkpoint_{start_update}.pkl (a save cut "
            "short between the two)")
    later = ckpt.files_after(run_dir, start_update)
    final = run_dir / params_files.FINAL_PARAMS_NAME
    extended_final = None
    if later == [final] and params_files.params_files_equal(
            final, params_files.params_path(run_dir, start_update)):
        extended_final, later = final, []
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
    write_unwritten_metrics(metrics_file, kept_lines, saved)
    return extended_final


def _set_aside_an_earlier_runs_metrics(run_dir: Path, say) -> None:
    leftovers = [run_dir / name for name in (M.METRICS_FILE, M.SUMMARY_FILE)
                 if (run_dir / name).is_file()]
    if leftovers:
        folder = ckpt.set_aside(run_dir, leftovers, "earlier_run")
        say(f"[run] warning: {run_dir} held the metrics of an earlier run that saved no "
            f"checkpoint: moved them to {folder}")


def write_unwritten_metrics(metrics_file: M.MetricsFile, kept_lines: list[str],
                            saved: dict) -> bool:
    """Appends to metrics.jsonl (`kept_lines`, its lines up to the checkpoint's update) the lines
    that the checkpoint's session could not write (a full disk, a read-only file) and that it
    is not holding yet; returns whether it wrote any."""
    logged = {_line_update(line) for line in kept_lines}
    missing = [line for line in saved.get("unwritten_metrics_lines", ())
               if _line_update(line) not in logged]
    if missing:
        metrics_file.rewrite(kept_lines + missing)
    return bool(missing)


def _line_update(line: str):
    try:
        return json.loads(line).get("update")
    except (ValueError, AttributeError):
        return None


def acquire_lock(run_dir: Path, resuming: bool) -> RunLock:
    """The run directory's lock, held: one trainer writes a run at a time (UsageError if another
    holds it, or if the directory cannot be written)."""
    lock = RunLock(run_dir)
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
    """A kill during a run's final save, after checkpoint_{N}.pkl was committed but before the
    rest (params_{N}.npz, whose rename follows the checkpoint's; final_params.npz; summary.json;
    a metrics line its session could not write), leaves a run that has nothing left to train,
    yet is not finished: finish its save from the checkpoint. What is on disk decides, not
    summary.json: a finished run that a later session extended without saving anything (it
    failed, or was interrupted) is left as it is, with the summary of that session. A summary
    still saying "running" (its session was killed) is rewritten. Nothing happens for a
    checkpoint that is not the run's newest or did not reach the run's own total. Returns
    whether it finished something."""
    saved_config = TrainConfig.from_dict(saved["config"])
    update, timesteps = int(saved["update"]), int(saved["timesteps"])
    if (saved_config.total_timesteps - timesteps >= saved_config.batch_size
            or ckpt.newest_checkpoint(run_dir) != resume_path):
        return False
    params_file = params_files.params_path(run_dir, update)
    final = run_dir / params_files.FINAL_PARAMS_NAME
    metrics_file = M.MetricsFile(run_dir)
    lines = metrics_file.split_after(update)[0]
    status = _summary_status(run_dir)
    files_whole = (params_file.is_file() and final.is_file()
                   and params_files.params_files_equal(final, params_file)
                   and not temp_files(run_dir)
                   and {_line_update(line) for line in saved.get("unwritten_metrics_lines", ())}
                   <= {_line_update(line) for line in lines})
    if files_whole and status not in (None, "running"):
        return False
    lock = acquire_lock(run_dir, resuming=True)
    try:
        ckpt.remove_temp_files(run_dir)
        if not params_file.is_file():
            params_files.save_params(params_file, saved["params"], saved["network"],
                                     params_files.run_meta(saved["config"]))
        if final.is_file() and not params_files.params_files_equal(final, params_file):
            # An earlier update's final params (the run was extended, and killed before it
            # deleted them): kept aside, as every file a session did not write.
            ckpt.set_aside(run_dir, [final], f"before_update_{update}")
        if not final.is_file():
            params_files.save_params(final, saved["params"], saved["network"],
                                     params_files.run_meta(saved["config"]))
        ckpt.prune_checkpoints(run_dir, options["keep_checkpoints"])
        if write_unwritten_metrics(metrics_file, lines, saved):
            lines = metrics_file.split_after(update)[0]
        M.write_summary(run_dir, {
            "status": "completed", "run_name": run_name, "run_dir": os.path.abspath(run_dir),
            "config": saved["config"], "network": saved["network"], "update": update,
            "timesteps": timesteps,
            "final_metrics": json.loads(lines[-1]) if lines else {},
            **files_on_disk(run_dir),
            "note": "written by a later --resume from the run's files: the session that ended "
                    "the run did not write this summary (killed, or the files were copied)"})
    finally:
        lock.release()
    if files_whole:
        said = "had no readable summary.json" if status is None else "its summary.json said " \
            "'running' (a session killed before its end, which saved nothing newer)"
        say(f"[done] run {run_name}: complete at update {update}; {said}: wrote it as completed "
            "(raise --total-timesteps to continue the run)")
    else:
        say(f"[done] run {run_name}: its final save at update {update} was cut short (killed "
            "during it, or the directory holds its final checkpoint alone, e.g. copied); "
            f"finished it from {resume_path.name} (params, final_params.npz, rotation, "
            "summary): the run is complete (raise --total-timesteps to continue it)")
    return True


def _summary_status(run_dir: Path) -> str | None:
    """The status summary.json gives, or None when there is none to read."""
    try:
        status = json.loads((run_dir / M.SUMMARY_FILE).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if isinstance(status, str) else None


def files_on_disk(run_dir: Path) -> dict:
    """summary.json's account of the run's policy files: the checkpoints and final params that
    the run directory holds now."""
    final = Path(run_dir) / params_files.FINAL_PARAMS_NAME
    return {"checkpoints": [os.path.abspath(path) for _, path in ckpt.list_checkpoints(run_dir)],
            "final_params": os.path.abspath(final) if final.is_file() else None}


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
