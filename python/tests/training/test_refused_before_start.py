"""Values refused with exit 3 before a run directory, lock or compile exists: sizes that would
exhaust memory or time, and run names that would break the one-line log format."""

import os

import pytest

from hackmatrix.training import cli

from tiny_runs import train


@pytest.mark.parametrize("argv, reason", [
    (["--num-layers", "100000"], "--num-layers must be at most 64, got 100000"),
    (["--total-timesteps", "1e30"], "--total-timesteps must be at most 1,000,000,000,000"),
    (["--hidden-dim", "20000"], "hidden weights in 2 torso(s), over the 268,435,456"),
])
def test_a_size_that_would_exhaust_memory_or_time_exits_3_before_anything(argv, reason, tmp_path,
                                                                          capsys):
    assert train(tmp_path, "huge", *argv) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert reason in line
    assert "[config]" not in captured.out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["two\nlines", "cr\rhere", "tab\there", " ", "   ", "\u00a0",
                                  "bell\x07"])
def test_a_run_name_that_breaks_a_log_line_or_is_blank_exits_3(name, tmp_path, capsys):
    assert train(tmp_path, name) == cli.EXIT_BAD_ARGUMENTS
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--run-name" in line and ("unprintable" in line or "blank" in line)
    assert list(tmp_path.iterdir()) == []


def test_a_printable_name_is_taken_and_a_renamed_directory_that_breaks_a_line_is_refused(
        tmp_path, capsys):
    name = "run \u00fc\u4e2d"
    assert train(tmp_path, name, "--total-timesteps", "128") == 0
    assert (tmp_path / name / "final_params.npz").is_file()
    # Renamed, its directory would name the resumed run.
    renamed = tmp_path / "two\nlines"
    os.rename(tmp_path / name, renamed)
    capsys.readouterr()
    assert cli.main(["--resume", str(renamed), "--total-timesteps", "256",
                     "--no-wandb"]) == cli.EXIT_BAD_ARGUMENTS
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "names the run, and its name holds a line break" in line
