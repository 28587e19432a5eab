"""`benchmark.py env`: the first call's split and the throughput it reports."""

import pytest

from hackmatrix.bench import env as env_benchmark


@pytest.fixture(scope="module")
def tiny_measurement():
    return env_benchmark.measure(num_envs=2, repeats=2, scan_steps=2)


def test_first_call_is_tracing_and_lowering_plus_xla_compile(tiny_measurement):
    result = tiny_measurement
    assert result["trace_lower_s"] > 0 and result["xla_compile_s"] > 0
    assert result["compile_s"] == pytest.approx(result["trace_lower_s"] + result["xla_compile_s"])


def test_reports_the_median_of_the_timed_runs(tiny_measurement):
    result = tiny_measurement
    assert result["num_envs"] == 2 and len(result["all_steps_per_s"]) == 2
    assert result["steps_per_s"] == pytest.approx(sum(result["all_steps_per_s"]) / 2)
