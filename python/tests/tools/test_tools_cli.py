"""tools/cli.py: the --delay type, the up-front output check, interrupts (exit 7), a reader
that goes away (stdout_reader), and scenario files."""

import argparse
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ReaderLeavesAfter, load_script
from hackmatrix.shell import stdout_reader
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
    ("under_a_file", "{tmp}/old.gif is not a directory"),
    ("a_directory", "is a directory"),
    ("proc", "cannot create a file in /proc"),
    ("a_pipe", "is not a regular file (a device, pipe or socket)"),
    ("a_device", "is not a regular file (a device, pipe or socket)"),
])
def test_check_output_file_rejects_unwritable_paths_with_exit_3(case, reason, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "old.gif").write_bytes(b"a file, not a folder")
    path = {"missing_directory": f"{tmp_path}/absent/out.json", "a_directory": str(tmp_path),
            "under_a_file": f"{tmp_path}/old.gif/deeper/out.json",
            "proc": "/proc/out.json", "a_pipe": str(tmp_path / "fifo"),
            "a_device": os.devnull}[case]
    with pytest.raises(cli.ToolError) as error:
        cli.check_output_file(path, "--json")
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
    assert str(error.value).startswith(f"--json {path}: {reason.format(tmp=tmp_path)}")


@pytest.mark.parametrize("name", ["checkpoint_16.pkl", "params_3.npz", "final_params.npz",
                                  "metrics.jsonl", "summary.json"])
def test_check_output_file_never_replaces_a_training_runs_file(name, tmp_path):
    # A typo such as `--gif run/checkpoint_16.pkl` must not turn the checkpoint into a GIF.
    # A new file under such a name would pass for the run's newest checkpoint or params file
    # (and break --resume and the tools' run-directory lookup): refused too.
    with pytest.raises(cli.ToolError, match="would pose as a file of a training run") as error:
        cli.check_output_file(str(tmp_path / name), "--gif")
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
    assert not (tmp_path / name).exists()
    (tmp_path / name).write_bytes(b"run file")
    with pytest.raises(cli.ToolError, match="would replace a file of a training run") as error:
        cli.check_output_file(str(tmp_path / name), "--gif")
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
    assert (tmp_path / name).read_bytes() == b"run file"


def test_check_output_file_never_replaces_a_file_the_command_reads(tmp_path):
    policy_file = tmp_path / "mine.npz"  # a policy under a name of the user's
    policy_file.write_bytes(b"params")
    with pytest.raises(cli.ToolError, match="which this command reads") as error:
        cli.check_output_file(str(policy_file), "--gif", inputs=(str(policy_file), None))
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS
    assert cli.check_output_file(str(tmp_path / "new.gif"), "--gif", inputs=(str(policy_file),))


def test_check_output_file_rejects_an_empty_path(tmp_path):
    with pytest.raises(cli.ToolError, match="^--gif: the path is empty$") as error:
        cli.check_output_file("", "--gif")
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS


@pytest.mark.parametrize("ending, exit_code, stderr", [
    ("pass", cli.EXIT_OK, b""),
    ("raise cli.ToolError('no checkpoint', 6)", 6, b"tool.py: error: no checkpoint\n"),
])
def test_a_reader_that_goes_away_leaves_the_exit_code_and_stderr_as_they_were(ending, exit_code,
                                                                             stderr):
    # Block-buffered stdout (no PYTHONUNBUFFERED), as in `tool.py | head -1`: a short output
    # stays in the buffer until the interpreter's last flush, which would fail outside run_main
    # (exit 120, "Exception ignored ... BrokenPipeError"), on success and on failure alike.
    program = ("import sys, time\nfrom hackmatrix.tools import cli\ntime.sleep(0.5)\n"
               f"def body():\n    print('the table')\n    {ending}\n"
               "sys.exit(cli.run_main('tool.py', body))")
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=environment)
    child.stdout.close()
    error = child.stderr.read()
    assert (child.wait(timeout=60), error) == (exit_code, stderr)


def test_a_tool_started_without_stdout_still_works(monkeypatch):
    # `tool.py >&-` (e.g. from cron): Python sets sys.stdout to None; print() accepts that, but
    # the viewer's sys.stdout.isatty() did not.
    monkeypatch.setattr(sys, "stdout", None)
    finished = []

    def body():
        stdout_reader.keep_working_if_stdout_closes()
        print("nobody reads this")
        finished.append(sys.stdout.isatty())
    assert cli.run_main("tool.py", body) == cli.EXIT_OK and finished == [False]
    assert sys.stdout is None  # run_main put it back


def test_a_tool_that_keeps_working_drops_output_after_the_reader_goes(monkeypatch):
    stdout = ReaderLeavesAfter(1)
    monkeypatch.setattr(sys, "stdout", stdout)
    finished = []

    def body():
        stdout_reader.keep_working_if_stdout_closes()
        print("first")
        print("dropped")
        finished.append(True)
    assert cli.run_main("tool.py", body) == cli.EXIT_OK
    assert finished == [True] and stdout.getvalue() == "first"
    assert sys.stdout is stdout  # run_main put it back


def test_a_scenario_file_that_is_not_text_exits_3(tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(cli.ToolError, match="not a JSON text file") as error:
        cli.load_scenario(str(path))
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS


def test_seeds_take_the_trainers_32_bit_range():
    assert cli.seed("0") == 0 and cli.seed("4294967295") == 2**32 - 1
    for bad in ("4294967296", "-1", "1.5", "seven"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.seed(bad)


def test_a_scenario_nested_too_deeply_exits_3(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(cli.ToolError, match="nested too deeply") as error:
        cli.load_scenario(str(path))
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS


def test_a_tool_started_without_stdin_sees_the_end_of_input(monkeypatch):
    # `play.py <&-`: Python's sys.stdin is None, and readline() failed with AttributeError.
    monkeypatch.setattr(sys, "stdin", None)
    lines = []
    assert cli.run_main("tool.py", lambda: lines.append(sys.stdin.readline())) == cli.EXIT_OK
    assert lines == [""] and sys.stdin is None


def test_a_scenario_file_with_a_repeated_key_exits_3_naming_it(tmp_path):
    path = tmp_path / "twice.json"
    path.write_text('{"player": {"row": 3, "col": 1, "row": 4}}')
    with pytest.raises(cli.ToolError, match=r"twice.json: row: appears twice") as error:
        cli.load_scenario(str(path))
    assert error.value.exit_code == cli.EXIT_BAD_ARGUMENTS


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



@pytest.mark.parametrize("code", [0, 2])
def test_a_signal_during_the_teardown_changes_neither_the_exit_code_nor_the_output(code):
    # A second Ctrl-C a moment after the first used to land in JAX's atexit clean-up, with a
    # traceback ("Exception ignored in atexit callback") on stderr.
    program = ("import atexit, os, signal, time\nfrom hackmatrix.shell.launch import exit_process\n"
               "def teardown():\n    os.kill(os.getpid(), signal.SIGINT)\n"
               "    os.kill(os.getpid(), signal.SIGTERM)\n    time.sleep(0.2)\n"
               f"atexit.register(teardown)\nexit_process({code})")
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
    assert (finished.returncode, finished.stderr) == (code, b"")


def test_an_interrupted_tool_exits_7_at_once_with_its_output_flushed():
    # Without the interpreter's teardown, which crashed (exit 139) under an XLA compile that the
    # interrupt had cut short only on the Python side; here a thread stands for that compile.
    program = ("import threading, time\nfrom hackmatrix.shell.launch import exit_process\n"
               "threading.Thread(target=time.sleep, args=(60,)).start()\n"
               "print('the rows so far')\nexit_process(7)")
    started = time.monotonic()
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
    assert (finished.returncode, finished.stdout) == (cli.EXIT_INTERRUPTED, b"the rows so far\n")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("script, argv", [
    ("watch_jax_agent.py", ["no/such/checkpoint.pkl"]),
    ("evaluate.py", ["no/such/checkpoint.pkl"]),
    ("play.py", ["--scenario", "no/such/scenario.json"]),
])
def test_the_game_tools_turn_the_compilation_cache_on_before_reading_their_inputs(
        monkeypatch, capsys, script, argv):
    # Stopped where JAX starts (the cache, then the backends): a tool that read its (missing)
    # input first would exit 6 instead.
    calls = []

    def stop(prog):
        calls.append(prog)
        raise cli.ToolError("stopped where JAX starts", cli.EXIT_FAILURE)

    monkeypatch.setattr(cli, "start_jax", stop)
    assert load_script(script)(argv) == cli.EXIT_FAILURE
    assert calls == [script]
    assert capsys.readouterr().err == f"{script}: error: stopped where JAX starts\n"


@pytest.mark.parametrize("script", ["train_purejaxrl.py", "evaluate.py", "play.py"])
def test_a_backend_that_cannot_start_is_a_one_line_error_that_says_why(script, tmp_path):
    # JAX itself says only "AssertionError" for a JAX_PLATFORMS whose plugin is not installed.
    scripts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
    result = subprocess.run([sys.executable, os.path.join(scripts, script)], cwd=tmp_path,
                            env={**os.environ, "JAX_PLATFORMS": "cuda"}, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == cli.EXIT_FAILURE, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "JAX could not start a backend (JAX_PLATFORMS='cuda')" in lines[0]
    assert "is the matching jax extra installed (README: GPU or TPU)?" in lines[0]
