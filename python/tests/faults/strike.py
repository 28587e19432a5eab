"""Runs the trainer (`cli.main`) in this process with a fault that strikes at a chosen moment of
its file writes, for the harness's subprocesses: a SIGKILL, or a SIGINT.

    python strike.py '{"signal": "SIGKILL", "file": "checkpoint_4.pkl", "when": "before"}' ARGS...

"file" is the name of a file the trainer replaces (`atomic_files.atomic_write`: its temp file
is written and fsynced "before" the rename, which is "after"), or "metrics.jsonl", whose lines
are appended ("after" a given "update"'s line). "occurrence" (default 1) picks a later write of
the same name. "first_sigint_at_update": a SIGINT once that update's line is logged, first."""

import json
import os
import signal
import sys
import time

from hackmatrix.shell.launch import exit_process


def main() -> int:
    fault, argv = json.loads(sys.argv[1]), sys.argv[2:]
    from hackmatrix.training import cli
    from hackmatrix.training import metrics as M

    signum = getattr(signal, fault["signal"])
    seen = {"count": 0}

    def strike():
        os.kill(os.getpid(), signum)
        time.sleep(30)  # the signal's handler ends the process meanwhile
        raise AssertionError("the process outlived its signal")

    def is_target(name):
        if name != fault["file"]:
            return False
        seen["count"] += 1
        return seen["count"] == fault.get("occurrence", 1)

    replace = os.replace
    def replacing(source, destination, *args, **kwargs):
        target = is_target(os.path.basename(destination))
        if target and fault["when"] == "before":
            strike()
        replace(source, destination, *args, **kwargs)
        if target:
            strike()
    os.replace = replacing

    write = M.MetricsFile.write
    def writing(self, record):
        write(self, record)
        if fault["file"] == M.METRICS_FILE and record["update"] == fault["update"]:
            strike()
    M.MetricsFile.write = writing

    if "first_sigint_at_update" in fault:
        format_line = M.format_line
        def signalling(record, *args):
            if record["update"] == fault["first_sigint_at_update"]:
                os.kill(os.getpid(), signal.SIGINT)
            return format_line(record, *args)
        M.format_line = signalling
    return cli.main(argv)


if __name__ == "__main__":
    exit_process(main())
