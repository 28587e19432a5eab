"""`benchmark.py scale`: training SPS against the device count, each count in a fresh process."""

import json

import pytest

from hackmatrix.bench import scale
from hackmatrix.programs import benchmark
from hackmatrix.tools.cli import EXIT_BAD_ARGUMENTS, EXIT_FAILURE, ToolError

# 4 envs x 4 steps, one update of a tiny network per timed chunk; the children share the tests'
# compilation cache (conftest.py: JAX_COMPILATION_CACHE_DIR, inherited).
TINY = ["--num-envs", "4", "--num-steps", "4", "--hidden-dim", "8", "--num-layers", "1",
        "--updates", "1", "--repeats", "1", "--use-cache"]


@pytest.mark.parametrize("argv, message", [
    (["--devices", "0"], "argument --devices: expected a positive integer, got 0"),
    (["--devices", "1,,2"], "argument --devices: expected a positive integer, got ''"),
    (["--devices", "65"], "argument --devices: expected at most 64, got 65"),
    (["--num-envs", "6", "--devices", "1,4"],
     "--num-envs 6 is not divisible by 4 (--devices): each device steps an equal share"),
    (["--num-envs", "12", "--num-steps", "2", "--devices", "1,4"],
     "each of the 4 devices' share of the batch (6 steps) is not divisible by num_minibatches 4"),
    (["--repeats", "0"], "argument --repeats: expected a positive integer, got 0"),
    (["--dtype", "float16"], "argument --dtype: invalid choice: 'float16'"),
    (["--processes", "2"], "unrecognized arguments: --processes 2"),
    (["--json", "/no/such/folder/scale.json"], "directory /no/such/folder does not exist"),
])
def test_bad_arguments_are_one_line_and_exit_3(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(["scale", *argv])
    assert exit_info.value.code == EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("benchmark.py scale: error: ") and message in line


def test_each_count_runs_in_a_fresh_process_with_that_many_devices(tmp_path, capsys):
    path = tmp_path / "scale.json"
    assert benchmark.main(["scale", "--devices", "2,1", *TINY, "--json", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("scale: training SPS at 4 envs x 4 steps (batch 16, 4 minibatches")
    assert "on CPU the devices are simulated" in lines[0] and "not scaling" in lines[0]
    assert lines[1].startswith("backend=cpu cpu_compile=fast device=cpu")
    assert lines[2].split() == ["devices", "train_sps", "ratio", "compile_s", "first_upd_s"]
    rows = [line.split() for line in lines[3:]]
    assert [row[0] for row in rows] == ["1", "2"] and rows[0][2] == "1.00"

    report = json.loads(path.read_text())
    assert (report["backend"], report["num_envs"], report["num_steps"], report["batch_size"]) == \
        ("cpu", 4, 4, 16)
    assert (report["num_minibatches"], report["update_epochs"], report["repeats"]) == (4, 4, 1)
    assert report["network"]["hidden_dim"] == 8 and "not scaling" in report["note"]
    assert report["ratio_base_devices"] == 1 and report["skipped"] == []
    results = report["results"]
    assert [result["devices"] for result in results] == [1, 2]
    for result, row in zip(results, rows, strict=True):
        assert set(result) == {"devices", "sps", "ratio", "compile_s", "first_update_s", "sps_all"}
        assert result["sps"] > 0 and 0 < result["compile_s"] <= result["first_update_s"]
        assert result["ratio"] == pytest.approx(result["sps"] / results[0]["sps"])
        assert row[1:] == [f"{result['sps']:.0f}", f"{result['ratio']:.2f}",
                           f"{result['compile_s']:.1f}", f"{result['first_update_s']:.1f}"]


def test_counts_above_the_real_devices_are_skipped_with_a_note(monkeypatch, tmp_path, capsys):
    launched = []

    def one_gpu(spec):
        launched.append(spec["devices"])
        return {"devices": spec["devices"], "backend": "gpu", "cpu_compile": None,
                "available": 1, "device_kind": "NVIDIA H100", "compile_s": 2.0,
                "first_update_s": 2.5, "sps": 1000.0, "sps_all": [1000.0]}

    monkeypatch.setattr(scale, "run_count", one_gpu)
    path = tmp_path / "scale.json"
    assert scale.main(["--devices", "1,2,4", "--json", str(path)]) == 0
    assert launched == [1]  # the first run said how many devices there are
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "backend=gpu device=NVIDIA H100 available=1"
    assert [line.split()[:2] for line in lines[3:]] == [["1", "1000"], ["2", "skipped:"],
                                                         ["4", "skipped:"]]
    report = json.loads(path.read_text())
    assert [row["devices"] for row in report["results"]] == [1]
    assert report["skipped"] == [
        {"devices": 2, "reason": "2, but JAX sees 1 gpu device(s)"},
        {"devices": 4, "reason": "4, but JAX sees 1 gpu device(s)"}]


def test_a_failed_child_is_one_error_with_exit_2(monkeypatch):
    monkeypatch.setattr(scale, "_CHILD", "import sys; sys.exit(2)")
    with pytest.raises(ToolError) as error:
        scale.run_count({"devices": 2})
    assert error.value.exit_code == EXIT_FAILURE
    assert str(error.value) == "the run with 2 device(s) failed (exit 2; its error is above)"
