"""hackmatrix/xla_options.py: the per-jit compile options and the process-wide CPU compile mode."""

import os

import jax
import jax.numpy as jnp
import pytest

from hackmatrix import xla_options
from hackmatrix.xla_options import FAST_COMPILE_XLA_FLAG, xla_flags_for_mode


def test_cpu_uses_backend_optimisation_level_2_and_0_for_run_once_programs():
    options = xla_options.compiler_options()
    run_once = xla_options.compiler_options(run_once=True)
    if jax.default_backend() == "cpu":
        skipped = {"xla_disable_hlo_passes": "hlo-verifier,tree_reduction_rewriter,"
                                              "while-loop-invariant-code-motion"}
        assert options == {"xla_backend_optimization_level": 2, **skipped}
        assert run_once == {"xla_backend_optimization_level": 0, **skipped}
    else:
        assert options is None and run_once is None


def test_the_options_compile_and_leave_results_unchanged():
    # XLA rejects an unknown or ill-typed option at compile time: this fails if XLA renames it.
    x = jnp.arange(8, dtype=jnp.float32)

    def f(x):
        return jnp.sin(x) * x  # elementwise: no reduction order for the options to change

    for options in (xla_options.compiler_options(), xla_options.compiler_options(run_once=True)):
        tuned = jax.jit(f, compiler_options=options).lower(x).compile()
        assert jnp.array_equal(tuned(x), jax.jit(f)(x))
    # The returned dict is a copy: a caller changing it cannot change what others get.
    options = xla_options.compiler_options()
    if options is not None:
        options["xla_backend_optimization_level"] = 0
        assert xla_options.compiler_options()["xla_backend_optimization_level"] == 2


def test_reductions_over_more_than_32_elements_stay_plain_reductions():
    # XLA ignores a pass name it does not know: this fails if the rewriter is renamed.
    counts = jnp.ones((4, 36), jnp.int32)
    options = xla_options.compiler_options()
    if options is None:
        pytest.skip("the CPU options only")
    hlo = jax.jit(lambda x: x.sum(axis=1), compiler_options=options).lower(counts).compile()
    assert "reduce-window" not in hlo.as_text()
    assert "reduce-window" in jax.jit(lambda x: x.sum(axis=1)).lower(counts).compile().as_text()
    assert jnp.array_equal(hlo(counts), jnp.full(4, 36))


def test_this_process_runs_in_the_requested_cpu_compile_mode():
    # conftest sets the mode before JAX is imported, as every CLI does at its start.
    requested = os.environ.get(xla_options.CPU_COMPILE_VARIABLE) or "fast"
    assert xla_options.cpu_compile_mode() == requested
    assert xla_options.cpu_compile_label("cpu") == f" cpu_compile={requested}"
    assert xla_options.cpu_compile_label("gpu") == ""
    assert xla_options.cpu_compile_mode("gpu") is None
    # XLA ignores backend options it does not know, so check the effect, not the flag: its
    # newer emitters wrap a lone iota in a fusion of its own, the older ones do not.
    compiled = jax.jit(lambda x: (jnp.arange(8), x * 2)).lower(jnp.ones(8)).compile().as_text()
    assert ("wrapped_iota" not in compiled) == (requested == "fast")


@pytest.mark.parametrize("environ, accelerator, flags, mode", [
    ({}, False, FAST_COMPILE_XLA_FLAG, "fast"),
    ({"JAX_PLATFORMS": "cpu"}, True, FAST_COMPILE_XLA_FLAG, "fast"),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}, False,
     "--xla_force_host_platform_device_count=8 " + FAST_COMPILE_XLA_FLAG, "fast"),
    ({"XLA_FLAGS": FAST_COMPILE_XLA_FLAG}, False, None, "fast"),
    ({"HACKMATRIX_CPU_COMPILE": "throughput"}, False, None, "throughput"),
    ({}, True, None, "throughput"),                       # a GPU or TPU plugin: its defaults
    ({"JAX_PLATFORMS": "cuda"}, False, None, "throughput"),
    ({"XLA_FLAGS": "--xla_backend_extra_options=x"}, False, None, "throughput"),  # the user's
])
def test_xla_flags_for_each_environment(environ, accelerator, flags, mode):
    assert xla_flags_for_mode(environ, lambda: accelerator) == (flags, mode)


def test_the_package_scan_is_skipped_when_the_environment_decides():
    def no_scan():
        raise AssertionError("scanned for accelerator plugins")

    for environ in ({"JAX_PLATFORMS": "cpu"}, {"HACKMATRIX_CPU_COMPILE": "throughput"},
                    {"XLA_FLAGS": FAST_COMPILE_XLA_FLAG}):
        xla_flags_for_mode(environ, no_scan)


def test_an_unknown_mode_is_reported_in_one_line_and_falls_back_to_fast(capsys):
    environ = {"HACKMATRIX_CPU_COMPILE": "fastest"}
    assert xla_flags_for_mode(environ, lambda: False) == (FAST_COMPILE_XLA_FLAG, "fast")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HACKMATRIX_CPU_COMPILE='fastest'" in err


def test_configure_leaves_a_running_backend_alone():
    jax.devices()  # backends are running: new XLA_FLAGS could no longer take effect
    environ = {"JAX_PLATFORMS": "cpu"}
    try:
        mode = xla_options.configure_cpu_compiler(environ)
        assert environ == {"JAX_PLATFORMS": "cpu"}
        assert mode == "throughput" == xla_options.cpu_compile_mode()
    finally:  # this process's real mode, read back from its XLA_FLAGS, for the tests after
        xla_options.configure_cpu_compiler()
    assert xla_options.cpu_compile_mode() == (os.environ.get("HACKMATRIX_CPU_COMPILE") or "fast")
