"""`benchmark.py ab`: the checked-out code against patched variants of it, in one process.

On a shared machine a speed change under ~5% is lost in the drift between two runs. This builds
every version in one process and times them in alternating rounds (every other round in reverse
order), so a slow spell hits all of them; each round gives a variant's time over the baseline's,
and the median of those paired ratios, with their quartiles, is the result
(specs/performance.md, "How to measure").

A variant is a Python file that defines `PATCHES`, a dict from dotted names to replacements:

    import jax.numpy as jnp
    from hackmatrix.game import bitboard as bb

    def ranks(keys):  # the version under test
        keys = bb.materialize(keys)
        return jnp.sum(keys[None, :] < keys[:, None], axis=-1, dtype=jnp.int32)

    PATCHES = {"hackmatrix.game.spawning._ranks": ranks}

The patches hold only while that variant's programs are traced and its initial state is made,
so they reach whatever that code looks up by module attribute. Each version first runs once from
its own initial state (the same key for all): the report says whether its results are
bit-identical to the baseline's (the rollout's final carry, or the trainer's state after one
update). A variant that patches a function with itself shows the harness's own spread: a
ratio a few percent from 1 is within it. The first call's time is printed per version but is
only a hint: the first build in a process also pays JAX's one-time costs. Compare compile times with interleaved cold
processes of `benchmark.py env`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix import xla_options
from hackmatrix.shell import jax_backend
from hackmatrix.bench.arguments import (MAX_ENVS, add_update_shape, env_count,
                                         network_options, positive_int)
from hackmatrix.bench.timing import lower_and_compile, quartiles
from hackmatrix.tools.cli import ArgumentParser

TARGETS = ("env", "train")


class VariantError(ValueError):
    """A variant file that cannot be loaded or names nothing that exists."""


def load_patches(path: str) -> dict[str, Any]:
    """The `PATCHES` of a variant file, each name checked to exist (VariantError if not)."""
    file = Path(path)
    if not file.is_file():
        raise VariantError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"_hackmatrix_variant_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the user's file: any error is theirs to read
        raise VariantError(f"{path}: {type(error).__name__}: {error}") from None
    patches = getattr(module, "PATCHES", None)
    if not isinstance(patches, dict) or not patches:
        raise VariantError(f"{path}: defines no PATCHES dict of 'module.attribute': replacement")
    for name in patches:
        _owner(name, path)
    return patches


def _owner(name: str, path: str = "") -> tuple[Any, str]:
    """(module, attribute) of a dotted name whose attribute exists."""
    module_name, _, attribute = str(name).rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except (ImportError, ValueError):
        raise VariantError(f"{path}: {name!r}: no module {module_name!r}") from None
    if not hasattr(module, attribute):
        raise VariantError(f"{path}: {name!r}: {module_name} has no attribute {attribute!r}")
    return module, attribute


@contextlib.contextmanager
def patched(patches: dict[str, Any]):
    """Every name of `patches` replaced for the duration of the block."""
    saved = []
    try:
        for name, replacement in patches.items():
            module, attribute = _owner(name)
            saved.append((module, attribute, getattr(module, attribute)))
            setattr(module, attribute, replacement)
        yield
    finally:
        for module, attribute, original in reversed(saved):
            setattr(module, attribute, original)


class Build(NamedTuple):
    """One version compiled: `run(state) -> state` times one call (it may donate `state`);
    `initial` is the state that version's own code starts from."""
    name: str
    run: Callable[[Any], Any]
    initial: Any
    trace_lower_s: float
    xla_compile_s: float

    def start(self):
        """A fresh copy of `initial`, for `run` to consume."""
        return jax.tree.map(jnp.copy, self.initial)


def build_env(name: str, num_envs: int, scan_steps: int) -> Build:
    """The env benchmark's rollout (`bench.env.make_rollout`), traced under the current code."""
    from hackmatrix.bench.env import make_rollout
    rollout, initial = make_rollout(num_envs, scan_steps)
    carry = jax.block_until_ready(initial(jax.random.PRNGKey(0)))
    compiled, trace_lower_s, xla_compile_s = lower_and_compile(rollout, carry)
    return Build(name, compiled, carry, trace_lower_s, xla_compile_s)


def build_train(name: str, config) -> Build:
    """One PPO update chunk of the trainer (`bench.train.compile_chunk`); its state is the
    runner."""
    from hackmatrix.bench.train import compile_chunk
    from hackmatrix.game.env import HackMatrixEnv
    env = HackMatrixEnv()
    chunk, one = compile_chunk(config, env, env.default_params), jnp.int32(1)
    return Build(name, lambda state: chunk.run_chunk(state, one, chunk.schedule)[0], chunk.runner,
                 chunk.trace_lower_s, chunk.xla_compile_s)


def differing_leaves(a, b) -> int:
    """How many leaves of two pytrees of arrays differ anywhere (0: bit-identical)."""
    return sum(not np.array_equal(np.asarray(x), np.asarray(y))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def time_rounds(builds: list[Build], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each build, over `rounds` rounds of one call each in alternating
    order; each build carries its own state from call to call."""
    states = {build.name: jax.block_until_ready(build.start()) for build in builds}
    for build in builds:  # warm-up
        states[build.name] = jax.block_until_ready(build.run(states[build.name]))
    seconds = {build.name: [] for build in builds}
    for index in range(rounds):
        for build in (builds if index % 2 == 0 else builds[::-1]):
            start = time.perf_counter()
            states[build.name] = jax.block_until_ready(build.run(states[build.name]))
            seconds[build.name].append(time.perf_counter() - start)
    return seconds


def paired_ratios(baseline: list[float], variant: list[float]) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) of the rounds' variant / baseline times."""
    ratios = [v / b for b, v in zip(baseline, variant)]
    return (statistics.median(ratios), *quartiles(ratios))


def main(argv=None) -> int:
    parser = ArgumentParser(prog="benchmark.py ab", description=__doc__)
    parser.add_argument("variants", nargs="+", metavar="VARIANT.py",
                        help="files defining PATCHES (see above); the baseline is the code as "
                             "it is")
    parser.add_argument("--target", choices=TARGETS, default="env",
                        help="env: the env benchmark's rollout of --num-steps steps; train: one "
                             "PPO update of the trainer (default env)")
    parser.add_argument("--num-envs", type=env_count, default=256,
                        help=f"parallel environments (default 256, at most {MAX_ENVS:,})")
    add_update_shape(parser)
    parser.add_argument("--rounds", type=positive_int, default=12,
                        help="timed rounds, every other one in reverse order (default 12)")
    args = parser.parse_args(argv)
    names = [Path(path).stem for path in args.variants]
    if len(set(names)) != len(names) or "baseline" in names:
        parser.error("variant files need distinct names other than 'baseline'")
    jax_backend.start()
    try:
        patches = [load_patches(path) for path in args.variants]
    except VariantError as error:
        parser.error(str(error))
    if args.target == "env":
        make = lambda name: build_env(name, args.num_envs, args.num_steps)  # noqa: E731
        unit = "env-steps/s"
    else:
        from hackmatrix.bench.train import benchmark_config
        from hackmatrix.training.config import ConfigError
        try:
            config = benchmark_config(args.num_envs, args.num_steps, args.hidden_dim,
                                      args.num_layers, log_interval=1,
                                      explicit=network_options(args))
        except ConfigError as error:
            parser.error(str(error))
        make = lambda name: build_train(name, config)  # noqa: E731
        unit = "train steps/s"

    backend = jax.default_backend()
    print(f"benchmark.py ab: target={args.target} num_envs={args.num_envs} "
          f"num_steps={args.num_steps} rounds={args.rounds} backend={backend}"
          f"{xla_options.cpu_compile_label(backend)}")
    cache_was_on = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)  # every build compiles cold
    try:
        builds = [make("baseline")]
        for name, variant in zip(names, patches):
            # A loop body or cond branch that is a module-level function keeps its traced jaxpr
            # in JAX's caches: cleared, so that no trace of the baseline's code is reused.
            jax.clear_caches()
            with patched(variant):
                builds.append(make(name))
    finally:
        jax.config.update("jax_enable_compilation_cache", cache_was_on)
    finals = [jax.block_until_ready(build.run(build.start())) for build in builds]
    seconds = time_rounds(builds, args.rounds)

    steps = args.num_envs * args.num_steps
    print(f"{'version':<20} {'trace_lower_s':>13} {'xla_compile_s':>13} {unit:>14} "
          f"{'time_ratio':>10} {'p25-p75':>13}  results")
    for build, final in zip(builds, finals):
        rate = steps / statistics.median(seconds[build.name])
        if build.name == "baseline":
            ratio, spread, results = "1", "", ""
        else:
            median, low, high = paired_ratios(seconds["baseline"], seconds[build.name])
            ratio, spread = f"{median:.3f}", f"{low:.3f}-{high:.3f}"
            differing = differing_leaves(finals[0], final)
            results = ("bit-identical" if differing == 0
                       else f"{differing} of {len(jax.tree.leaves(final))} leaves differ")
        print(f"{build.name:<20} {build.trace_lower_s:>13.2f} {build.xla_compile_s:>13.2f} "
              f"{rate:>14,.0f} {ratio:>10} {spread:>13}  {results}", flush=True)
    return 0
