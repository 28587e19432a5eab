"""tools/cli.py: the --delay type, the up-front output check, and interrupts (exit 7)."""

import argparse
import os
import signal
import time

import pytest

from hackmatrix.tools import cli


@pytest.mark.parametrize("text, expected", [("0", 0.0), ("0.25", 0.25), ("600", 600.0)])
def test_seconds_accepts_finite_pauses(text, expected):
    assert cli.seconds(text) == expected


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "-0.1", "600.5", "1e300", "", "soon"])
def test_seconds_rejects_everything_else(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cli.seconds(text)


def test_check_output_file_accepts_a_new_or_existing_file_and_leaves_nothing(tmp_path):
    existing = tmp_path / "old.gif"
    existing.write_bytes(b"keep me")
    for path in (tmp_path / "new.gif", existing, tmp_path / "no_extension"):
        assert cli.check_output_file(str(path), "--gif") == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.gif"]  # the probe is gone
    assert existing.read_bytes() == b"keep me"


@pytest.mark.parametrize("case, reason", [
    ("missing_directory", "directory {tmp}/absent does not exist"),
    ("a_directory", "is a directory"),
    ("proc", "cannot create a file in /proc"),
])
def test_check_output_file_rejects_unwritable_paths_with_exit_3(case, reason, tmp_path):
    path = {"missing_directory": f"{tmp_path}/absent/out.json", "a_directory": str(tmp_path),
            "proc": "/proc/out.json"}[case]
    with pytest.raises(cli.ToolError) as error:
        cli.check_output_file(path, "--json")
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
    assert str(error.value).startswith(f"--json {path}: {reason.format(tmp=tmp_path)}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_exits_7_with_one_line(signum, capsys):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def body():
        os.kill(os.getpid(), signum)
        time.sleep(30)  # the handler interrupts this at once
        raise AssertionError("the signal did not interrupt the body")

    started = time.monotonic()
    assert cli.run_main("tool.py", body) == cli.EXIT_INTERRUPTED
    assert time.monotonic() - started < 10
    assert capsys.readouterr().err == f"tool.py: interrupted by {signal.Signals(signum).name}\n"
    assert {s: signal.getsignal(s) for s in before} == before  # handlers restored
