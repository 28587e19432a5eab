"""Environment throughput: env-steps/s of a jitted 128-step scan of vmapped auto-resetting steps.

Each scan step draws a uniformly random VALID action per env from the observation's action mask,
steps the gymnax-style env (which resets finished episodes), and carries the new observation. The
batch is stepped by `HackMatrixEnv.batch_step` (what training uses: bit-identical to
`jax.vmap(env.step)`, with the rarely needed parts run only where needed); `--plain-vmap`
measures `jax.vmap(env.step)` itself. The first call's time is reported separately from the
median of the timed runs, split into tracing and lowering (Python, JAX) and XLA's compile.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp

from hackmatrix import xla_options
from hackmatrix.shell import jax_backend
from hackmatrix.bench.arguments import add_count_list, positive_int
from hackmatrix.bench.timing import lower_and_compile
from hackmatrix.game import constants as C
from hackmatrix.game.env import HackMatrixEnv
from hackmatrix.game.spawning import split_key
from hackmatrix.tools.cli import ArgumentParser

DEFAULT_NUM_ENVS = (1, 64, 256, 1024, 4096)
SCAN_STEPS = 128


def random_valid_action(key, action_mask):
    """A uniformly random action among the valid ones (argmax of masked uniform noise)."""
    noise = jax.random.uniform(key, action_mask.shape)
    return jnp.argmax(jnp.where(action_mask, noise, -1.0), axis=-1)


def make_rollout(num_envs: int, scan_steps: int = SCAN_STEPS, plain_vmap: bool = False):
    """A jitted function (carry) -> carry running `scan_steps` batched env steps: `batch_step`,
    or `jax.vmap(step)` with `plain_vmap`."""
    env = HackMatrixEnv()
    params = env.default_params
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None)) if plain_vmap else env.batch_step

    def one_step(carry, _):
        key, obs, state = carry
        key, action_key, step_key = jax.random.split(key, 3)
        actions = random_valid_action(action_key, obs.action_mask)
        obs, state, reward, done, _ = step(split_key(step_key, num_envs), state, actions,
                                           params)
        return (key, obs, state), None

    def rollout(carry):
        carry, _ = jax.lax.scan(one_step, carry, None, length=scan_steps)
        return carry

    def initial(key):
        reset_key, key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), params)
        return key, obs, state

    options = xla_options.compiler_options()
    return (jax.jit(rollout, donate_argnums=0, compiler_options=options),
            jax.jit(initial, compiler_options=options))


def measure(num_envs: int, repeats: int = 5, scan_steps: int = SCAN_STEPS,
            plain_vmap: bool = False) -> dict:
    """The first call's time (`compile_s`: `trace_lower_s` + `xla_compile_s`) and the median
    env-steps/s over `repeats` timed rollouts after a warm-up."""
    rollout, initial = make_rollout(num_envs, scan_steps, plain_vmap)
    carry = jax.block_until_ready(initial(jax.random.PRNGKey(0)))
    compiled, trace_lower_s, xla_compile_s = lower_and_compile(rollout, carry)

    carry = jax.block_until_ready(compiled(carry))  # warm-up
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        carry = jax.block_until_ready(compiled(carry))
        rates.append(num_envs * scan_steps / (time.perf_counter() - start))
    return {"num_envs": num_envs, "compile_s": trace_lower_s + xla_compile_s,
            "trace_lower_s": trace_lower_s, "xla_compile_s": xla_compile_s,
            "steps_per_s": statistics.median(rates), "all_steps_per_s": rates}


def main(argv=None):
    parser = ArgumentParser(
        prog="benchmark.py env",
        description=f"HackMatrix env throughput: {SCAN_STEPS}-step scans of vmapped auto-resetting "
                    "steps with random valid actions.")
    add_count_list(parser, "--num-envs", list(DEFAULT_NUM_ENVS), "env counts")
    parser.add_argument("--repeats", type=positive_int, default=5,
                        help="timed runs per size (median; default 5)")
    parser.add_argument("--scan-steps", type=positive_int, default=SCAN_STEPS,
                        help=f"steps per timed scan (default {SCAN_STEPS})")
    parser.add_argument("--plain-vmap", action="store_true",
                        help="step with jax.vmap(env.step) instead of env.batch_step")
    parser.add_argument("--use-cache", action="store_true",
                        help="allow the persistent compilation cache (default off: cold compiles, "
                             "even with JAX_COMPILATION_CACHE_DIR set)")
    args = parser.parse_args(argv)
    if not args.use_cache:
        jax.config.update("jax_enable_compilation_cache", False)

    backend = jax_backend.start()
    print(f"backend: {backend}{xla_options.cpu_compile_label(backend)}  devices: {jax.devices()}  "
          f"actions: {C.NUM_ACTIONS}  stepping: "
          f"{'jax.vmap(env.step)' if args.plain_vmap else 'env.batch_step'}")
    print(f"{'num_envs':>9} {'compile_s':>10} {'trace_lower_s':>13} {'xla_compile_s':>13} "
          f"{'median steps/s':>15} {'ms/step':>8}  runs")
    for num_envs in args.num_envs:
        result = measure(num_envs, args.repeats, args.scan_steps, args.plain_vmap)
        ms_per_step = 1000.0 * num_envs / result["steps_per_s"]
        runs = " ".join(f"{r:,.0f}" for r in result["all_steps_per_s"])
        print(f"{num_envs:>9} {result['compile_s']:>10.2f} {result['trace_lower_s']:>13.2f} "
              f"{result['xla_compile_s']:>13.2f} {result['steps_per_s']:>15,.0f} "
              f"{ms_per_step:>8.2f}  [{runs}]", flush=True)


if __name__ == "__main__":
    main()
