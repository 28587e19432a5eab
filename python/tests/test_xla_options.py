"""The XLA compile options of hackmatrix/xla_options.py are valid for the backend in use."""

import jax
import jax.numpy as jnp

from hackmatrix import xla_options


def test_cpu_uses_backend_optimisation_level_2_and_0_for_run_once_programs():
    options = xla_options.compiler_options()
    run_once = xla_options.compiler_options(run_once=True)
    if jax.default_backend() == "cpu":
        assert options == {"xla_backend_optimization_level": 2}
        assert run_once == {"xla_backend_optimization_level": 0}
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
