"""`benchmark.py env`: the first call's split and the throughput it reports."""

import statistics
import time

import jax
import pytest

from hackmatrix.bench import env as env_benchmark


@pytest.fixture(scope="module")
def tiny_measurement():
    """(result, seconds the whole measurement took)."""
    start = time.perf_counter()
    result = env_benchmark.measure(num_envs=2, repeats=3, scan_steps=2)
    return result, time.perf_counter() - start


def test_first_call_is_tracing_and_lowering_plus_xla_compile(tiny_measurement):
    result, elapsed = tiny_measurement
    assert result["trace_lower_s"] > 0 and result["xla_compile_s"] > 0
    # Both parts are timed inside the measurement, which also builds, warms up and times runs.
    assert result["trace_lower_s"] + result["xla_compile_s"] < elapsed
    assert result["compile_s"] == pytest.approx(result["trace_lower_s"] + result["xla_compile_s"])


def test_reports_the_median_of_the_timed_runs(tiny_measurement):
    result, _ = tiny_measurement
    assert result["num_envs"] == 2 and len(result["all_steps_per_s"]) == 3
    assert result["steps_per_s"] == statistics.median(result["all_steps_per_s"])


@pytest.mark.parametrize("flags, cache_on", [([], False), (["--use-cache"], True)])
def test_compiles_cold_unless_asked_even_with_a_cache_directory_set(monkeypatch, capsys, flags,
                                                                     cache_on):
    # A JAX_COMPILATION_CACHE_DIR in the user's environment would otherwise make the second
    # run's "compile" a cache load (measured: 10.5 s, then 3.6 s at 64 envs).
    seen = []

    def measure(num_envs, repeats, scan_steps, plain_vmap):
        seen.append(jax.config.jax_enable_compilation_cache)
        return {"num_envs": num_envs, "compile_s": 1.0, "trace_lower_s": 0.5,
                "xla_compile_s": 0.5, "steps_per_s": 1.0, "all_steps_per_s": [1.0]}

    monkeypatch.setattr(env_benchmark, "measure", measure)
    try:
        env_benchmark.main(["--num-envs", "2", *flags])
    finally:
        jax.config.update("jax_enable_compilation_cache", True)
    assert seen == [cache_on]
    assert capsys.readouterr().out.splitlines()[-1].split()[0] == "2"
