"""--tensorboard: event files that hold metrics.jsonl's scalars, each step once, across resumes.

The events are read back with a TFRecord reader of this test's own (TensorBoard itself is not a
dependency) and tensorboardX's protobuf classes.
"""

import json
import math
import struct
import subprocess
import sys

import numpy as np
import pytest

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import cli
from hackmatrix.training.tensorboard_sink import TENSORBOARD_DIR, TensorBoardSink

from tiny_runs import resume, train

pytest.importorskip("tensorboardX")


def events(directory) -> list[tuple[str, int, dict]]:
    """(file name, step, {tag: value}) of every scalar event under `directory`, file by file."""
    from tensorboardX.proto.event_pb2 import Event

    found = []
    for path in sorted(directory.glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            if offset + 12 + length + 4 > len(data):
                break  # cut short
            event = Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            if event.HasField("summary"):
                found.append((path.name, event.step,
                              {value.tag: value.simple_value for value in event.summary.value}))
    return found


def as_logged(record: dict) -> dict:
    """The scalars a metrics.jsonl record should give: its numbers but the step, as float32."""
    return {key: float(np.float32(value)) for key, value in record.items()
            if key != "timesteps" and isinstance(value, (int, float))
            and not isinstance(value, bool)}


def write_metrics(run_dir, updates):
    run_dir.mkdir(parents=True, exist_ok=True)
    records = [{"update": u, "timesteps": 128 * u, "train/entropy": 1.0 / u,
                "train/mean_episode_return": None if u == 2 else -u} for u in updates]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def test_a_start_writes_what_metrics_jsonl_holds_past_the_events_newest_step(tmp_path):
    run_dir = tmp_path / "run"
    records = write_metrics(run_dir, [1, 2])
    TensorBoardSink.open(run_dir, 256, "after_update_2").close()
    # The next start of the trainer logged updates 3 and 4 into metrics.jsonl and was killed
    # before they reached the event files.
    records = write_metrics(run_dir, [1, 2, 3, 4])
    sink = TensorBoardSink.open(run_dir, 512, "after_update_4")
    sink.log({"update": 4, "timesteps": 512, "train/entropy": 9.0})  # already there: not again
    sink.log({"update": 5, "timesteps": 640, "train/entropy": 0.2, "stats/win_rate": math.nan})
    sink.close()
    logged = events(run_dir / TENSORBOARD_DIR)
    assert [step for _, step, _ in logged] == [128, 256, 384, 512, 640]
    assert len({name for name, _, _ in logged}) == 2  # a file per start
    assert [values for _, _, values in logged] == [as_logged(r) for r in records] + [
        {"update": 5.0, "train/entropy": float(np.float32(0.2))}]  # undefined values left out


def test_steps_past_the_resume_point_are_set_aside(tmp_path, capsys):
    run_dir = tmp_path / "run"
    write_metrics(run_dir, [1, 2, 3])
    TensorBoardSink.open(run_dir, 384, "after_update_3").close()
    # Resumed from update 1: metrics.jsonl's later lines were set aside before the sink opens.
    records = write_metrics(run_dir, [1])
    TensorBoardSink.open(run_dir, 128, "after_update_1").close()
    assert [(step, values) for _, step, values in events(run_dir / TENSORBOARD_DIR)] == [
        (128, as_logged(records[0]))]
    (folder,) = (run_dir / ckpt.SET_ASIDE_DIR).iterdir()
    assert ckpt.is_set_aside_folder(folder) and folder.name.startswith("after_update_1_")
    assert [step for _, step, _ in events(folder / TENSORBOARD_DIR)] == [128, 256, 384]
    assert f"held steps up to 384, past the resume point at 128 timesteps: moved it to " \
           f"{folder}" in capsys.readouterr().out


def test_a_record_cut_short_by_a_kill_is_written_again(tmp_path):
    run_dir = tmp_path / "run"
    records = write_metrics(run_dir, [1, 2])
    TensorBoardSink.open(run_dir, 256, "after_update_2").close()
    (path,) = (run_dir / TENSORBOARD_DIR).iterdir()
    path.write_bytes(path.read_bytes()[:-5])  # the last record's end never reached the disk
    TensorBoardSink.open(run_dir, 256, "after_update_2").close()
    logged = events(run_dir / TENSORBOARD_DIR)
    assert [(name == path.name, step, values) for name, step, values in logged] == [
        (True, 128, as_logged(records[0])), (False, 256, as_logged(records[1]))]


def test_training_with_tensorboard_then_resuming_from_an_earlier_checkpoint(tmp_path, capsys):
    assert train(tmp_path, "tb", "--tensorboard", "--save-interval", "2") == 0
    run_dir = tmp_path / "tb"
    assert ckpt.load_checkpoint(run_dir / "checkpoint_6.pkl")["run_options"]["tensorboard"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["tensorboard"] == str((run_dir / TENSORBOARD_DIR).resolve())
    # The run option is kept: the resume writes events without the flag.
    assert resume(tmp_path, str(run_dir / "checkpoint_4.pkl")) == 0
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in records] == [2, 4, 6]
    # The first record after the resume says where it resumed; no other does.
    assert [(r.get("resumed_at_update"), r.get("resumed_at_timesteps")) for r in records] == [
        (None, None), (None, None), (4, 512)]
    logged = events(run_dir / TENSORBOARD_DIR)
    assert [step for _, step, _ in logged] == [r["timesteps"] for r in records]
    assert [values for _, _, values in logged] == [as_logged(r) for r in records]
    (folder,) = (run_dir / ckpt.SET_ASIDE_DIR).glob("*/tensorboard")
    assert [step for _, step, _ in events(folder)] == [256, 512, 768]


def test_without_tensorboardx_the_flag_is_one_line_and_exit_3(tmp_path, monkeypatch, capsys):
    find_spec = cli.importlib.util.find_spec

    def without_tensorboardx(name, *args):
        return None if name == "tensorboardX" else find_spec(name, *args)
    monkeypatch.setattr(cli.importlib.util, "find_spec", without_tensorboardx)
    assert train(tmp_path, "no_tbx", "--tensorboard") == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err == ("error: bad arguments: --tensorboard needs the tensorboardX "
                                       "package (pip install -r requirements.txt)\n")
    assert not (tmp_path / "no_tbx").exists()


def test_importing_the_trainer_does_not_import_tensorboardx():
    code = ("import sys; import hackmatrix.training.cli, hackmatrix.training.tensorboard_sink; "
            "print('tensorboardX' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout == "False\n"
