"""`benchmark.py profile`: kernel times read from a real `jax.profiler` trace."""

import re

import jax
import jax.numpy as jnp

from hackmatrix.bench import kernels, profile

_RUNS, _ITERATIONS = 4, 3


def _looped(x):
    with jax.named_scope("outer.loop"):
        # One kernel per iteration inside the while loop, whose own event spans them.
        return jax.lax.fori_loop(0, _ITERATIONS, lambda i, y: y * 3 + (y >> 2), x)


def test_kernel_times_counts_each_launch_per_update_and_skips_loop_containers(tmp_path):
    x = jnp.arange(8 * 36, dtype=jnp.int32).reshape(8, 36)
    compiled = jax.jit(_looped).lower(x).compile(
        compiler_options={"xla_cpu_enable_xprof_traceme": True})
    jax.block_until_ready(compiled(x))
    with jax.profiler.trace(str(tmp_path), create_perfetto_trace=True):
        for _ in range(_RUNS):
            jax.block_until_ready(compiled(x))
    hlo_text = compiled.as_text()
    rows = profile.kernel_times(hlo_text, profile.trace_events(tmp_path), updates=2)

    assert not any(row.name.startswith("while") for row in rows)
    body = [row for row in rows if row.scope == "outer.loop" and row.instructions > 0]
    assert len(body) == 1
    kernel = body[0]
    assert kernel.launches_per_update == _RUNS * _ITERATIONS / 2
    assert kernel.ms_per_update > 0 and kernel.shape.startswith("s32[8,36]")
    line = next(line for line in hlo_text.splitlines() if f"%{kernel.name} = " in line)
    computation = re.search(r"calls=%([\w.\-]+)", line).group(1)
    assert kernel.instructions == kernels.instruction_counts(hlo_text)[computation] >= 3
    assert rows == sorted(rows, key=lambda row: -row.ms_per_update)
