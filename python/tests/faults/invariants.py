"""What must hold in a run directory after any fault: every kept checkpoint loads, with its
params file beside it; summary.json lists what is on disk; metrics.jsonl holds each update once;
and a run resumed to its end matches the uninterrupted one bit for bit."""

import json
from pathlib import Path

import numpy as np

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import params_files
from hackmatrix.training import metrics as M
from hackmatrix.training.atomic_files import temp_files

# Record keys that differ between an interrupted and an uninterrupted run by design.
UNCOMPARED_KEYS = ("train/sps", "resumed_at_update", "resumed_at_timesteps")


def records(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / M.METRICS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def params_arrays(path: Path) -> dict:
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def assert_same_params(expected: dict, actual: dict) -> None:
    assert expected.keys() == actual.keys()
    for key in expected:
        np.testing.assert_array_equal(expected[key], actual[key], err_msg=key)


def assert_checkpoints_load(run_dir: Path, newest_may_lack_params: bool = False) -> list[int]:
    """Every checkpoint loads for resuming and has its params file, holding its params; returns
    their updates. `newest_may_lack_params`: after a kill or an exit at once between the
    renames of a save (the next resume writes the params file from the checkpoint)."""
    updates = []
    checkpoints = ckpt.list_checkpoints(run_dir)
    for update, path in checkpoints:
        state = ckpt.load_checkpoint(path)
        assert state["update"] == update
        updates.append(update)
        params_file = params_files.params_path(run_dir, update)
        if newest_may_lack_params and path == checkpoints[-1][1] and not params_file.is_file():
            continue
        assert params_file.is_file(), f"{path.name} has no {params_file.name}"
        saved = {key: value for key, value in params_arrays(params_file).items()
                 if not key.startswith((params_files.NETWORK_ENTRY, params_files.META_ENTRY))}
        assert_same_params(params_files.flatten_params(state["params"]), saved)
    return updates


def assert_summary_matches_disk(run_dir: Path) -> dict:
    summary = json.loads((Path(run_dir) / M.SUMMARY_FILE).read_text())
    on_disk = [str(path.resolve()) for _, path in ckpt.list_checkpoints(run_dir)]
    assert [str(Path(path).resolve()) for path in summary["checkpoints"]] == on_disk
    final = Path(run_dir) / params_files.FINAL_PARAMS_NAME
    listed = summary["final_params"]
    assert (Path(listed).resolve() if listed else None) == (final.resolve() if final.is_file()
                                                            else None)
    assert summary["status"] != "running", "no session runs now"
    return summary


def assert_each_update_logged_once(run_dir: Path) -> list[int]:
    updates = [record["update"] for record in records(run_dir)]
    assert updates == sorted(set(updates)), f"metrics.jsonl updates {updates}"
    return updates


def assert_consistent(run_dir: Path) -> None:
    """The invariants that hold whenever no trainer runs, however the last one ended (a kill -9
    aside, which leaves summary.json saying "running" until the next session)."""
    assert_checkpoints_load(run_dir)
    assert_summary_matches_disk(run_dir)
    assert_each_update_logged_once(run_dir)
    assert not temp_files(run_dir)


def assert_matches_reference(run_dir: Path, reference: Path) -> None:
    """The run, finished, ends where the uninterrupted one did: the same final params, bit for
    bit, and the same metrics lines (episode counts and all), each update once."""
    assert_consistent(run_dir)
    summary = assert_summary_matches_disk(run_dir)
    assert summary["status"] == "completed"
    assert_same_params(params_arrays(reference / params_files.FINAL_PARAMS_NAME),
                       params_arrays(run_dir / params_files.FINAL_PARAMS_NAME))
    def compared(run):
        return [{key: value for key, value in record.items() if key not in UNCOMPARED_KEYS}
                for record in records(run)]
    assert compared(run_dir) == compared(reference)
