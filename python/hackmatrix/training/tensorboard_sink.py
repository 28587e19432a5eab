"""TensorBoard event files (`--tensorboard`): the scalars of metrics.jsonl under the same names,
in run_dir/tensorboard/, with the record's `timesteps` as the step (runs of different batch sizes
line up; the update is a scalar of its own).

The event files never hold a step twice, and they hold what metrics.jsonl holds. When the
trainer opens them, event files with a step past the resume point (updates logged after the
checkpoint resumed from, or an earlier run's in a fresh run's directory) are set aside, as
metrics.jsonl's later lines are; then the metrics.jsonl records past the newest step they hold are written
(records lost to a kill before a write reached the disk, or logged while the flag was off);
after that, each logged record. Writes are synchronous and flushed per record: no thread, and a
kill loses at most the record being written, which the next resume writes again.

tensorboardX is imported only when a sink opens.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
import time
from pathlib import Path
from typing import Iterator

from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training.metrics import METRICS_FILE

TENSORBOARD_DIR = "tensorboard"
STEP_KEY = "timesteps"
_EVENT_FILES = "events.out.tfevents.*"
_sinks_opened = itertools.count()


def scalars(record: dict) -> dict[str, float]:
    """The record's defined numbers, the step excepted (undefined values, NaN or JSON's null,
    are left out, as wandb leaves them out)."""
    return {key: float(value) for key, value in record.items()
            if key != STEP_KEY and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value)}


def read_events(path: Path) -> Iterator:
    """The events of one event file, up to the first record that is cut short or corrupt (a
    kill during a write)."""
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    with open(path, "rb") as handle:
        while len(header := handle.read(12)) == 12:
            length, header_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != header_crc:
                return
            data, data_crc = handle.read(length), handle.read(4)
            if len(data_crc) < 4 or masked_crc32c(data) != struct.unpack("<I", data_crc)[0]:
                return
            yield event_pb2.Event.FromString(data)


def newest_step(directory: Path) -> int | None:
    """The highest step of a scalar in the event files of `directory`, None without any."""
    steps = [event.step for path in directory.glob(_EVENT_FILES) for event in read_events(path)
             if event.HasField("summary")]
    return max(steps, default=None)


class TensorBoardSink:
    def __init__(self, directory: Path, last_step: int | None):
        from tensorboardX.event_file_writer import EventsWriter

        directory.mkdir(parents=True, exist_ok=True)
        # The name's timestamp counts seconds: the pid and a count keep two sinks that open
        # within one second (two trainers, or two in one process) from writing one file.
        self._writer = EventsWriter(str(directory / "events"),
                                    f".{os.getpid()}.{next(_sinks_opened)}")
        self.directory = directory
        self.last_step = last_step

    @classmethod
    def open(cls, run_dir: Path, resumed_timesteps: int, set_aside_as: str,
             say=print) -> "TensorBoardSink":
        """Opens run_dir/tensorboard for a start of the trainer at `resumed_timesteps` (0 for a
        fresh run), after metrics.jsonl holds only the records up to there; `set_aside_as`
        names the folder that takes event files with later steps (`checkpoint.set_aside`)."""
        directory = Path(run_dir) / TENSORBOARD_DIR
        last_step = newest_step(directory) if directory.is_dir() else None
        if last_step is not None and last_step > resumed_timesteps:
            folder = ckpt.set_aside(run_dir, [directory], set_aside_as)
            say(f"[tensorboard] {directory} held steps up to {last_step}, past the resume "
                f"point at {resumed_timesteps} timesteps: moved it to {folder}")
            last_step = None
        sink = cls(directory, last_step)
        say(f"[tensorboard] writing {directory} (view with `tensorboard --logdir {directory}`)")
        for record in _metrics_records(Path(run_dir)):
            sink.log(record)
        return sink

    def log(self, record: dict) -> None:
        """Writes the record's scalars at its step, unless the files already reach that step."""
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        step = record.get(STEP_KEY)
        if not isinstance(step, int) or isinstance(step, bool) or (
                self.last_step is not None and step <= self.last_step):
            return
        # One event per record: a kill cuts a record's scalars short all together or not at all.
        values = [Summary.Value(tag=name, simple_value=value)
                  for name, value in scalars(record).items()]
        self._writer.write_event(Event(wall_time=time.time(), step=step,
                                       summary=Summary(value=values)))
        self._writer.flush()
        self.last_step = step

    def close(self) -> None:
        self._writer.close()


def _metrics_records(run_dir: Path) -> Iterator[dict]:
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record
