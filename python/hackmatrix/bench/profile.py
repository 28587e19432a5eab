"""`benchmark.py profile`: the training update chunk's kernel time, kernel by kernel.

Runs `--updates` PPO updates (256 envs × 128 steps by default, as the training targets) under
`jax.profiler.trace`, with the game's functions scoped (`kernels.scoped_game_functions`) and
XLA:CPU's per-kernel trace events on, and prints for each kernel its time and launches per
update, the instructions of its fused computation, its output shape and its scope. A kernel
with many instructions on an output of several entries per env usually recomputes per-env work
for every entry (specs/performance.md, "What bounds the step on XLA:CPU"). Kernel times add up
across threads and move with the machine's load: compare kernels within one run, and confirm a
change with interleaved wall-clock runs (`benchmark.py train`).
"""

from __future__ import annotations

import collections
import gzip
import json
import re
import tempfile
from pathlib import Path
from typing import Iterable, NamedTuple

import jax
import jax.numpy as jnp

from hackmatrix import xla_options
from hackmatrix.shell import jax_backend
from hackmatrix.bench.arguments import (MAX_ENVS, add_update_shape, env_count,
                                         network_options, positive_int)
from hackmatrix.bench.kernels import (in_game_scope, instruction_counts, scope_parts,
                                      scoped_game_functions)
from hackmatrix.tools.cli import ArgumentParser

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (\S+) ([\w\-]+)\(")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
# Control flow: their events span the kernels they run, which are counted themselves.
_CONTAINERS = ("while", "conditional", "call")


class KernelTime(NamedTuple):
    name: str
    ms_per_update: float
    launches_per_update: float
    instructions: int  # of its fused computation; 0 for an unfused instruction
    shape: str
    scope: str  # '/'-joined `module.function` parts of its op_name (`kernels.scope_parts`)


def kernel_times(hlo_text: str, events: Iterable[dict], updates: int) -> list[KernelTime]:
    """Per kernel of an optimised HLO module, from a trace's complete ("X") events named after
    its instructions: time and launches per update, most time first."""
    sizes = instruction_counts(hlo_text)
    kernels = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if match is None or match.group(3) in _CONTAINERS:
            continue
        calls = _CALLS.search(line)
        kernels[match.group(1)] = (sizes.get(calls.group(1), 0) if calls else 0, match.group(2),
                                   "/".join(scope_parts(line)))
    microseconds, launches = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("ph") == "X" and event.get("name") in kernels:
            microseconds[event["name"]] += event.get("dur", 0)
            launches[event["name"]] += 1
    return [KernelTime(name, total / updates / 1000, launches[name] / updates, *kernels[name])
            for name, total in microseconds.most_common()]


def trace_events(trace_dir: Path) -> list[dict]:
    """The events of the perfetto trace that `jax.profiler.trace(trace_dir,
    create_perfetto_trace=True)` wrote."""
    path = next(trace_dir.glob("**/*.trace.json.gz"))
    with gzip.open(path) as trace:
        events = json.load(trace)
    return events["traceEvents"] if isinstance(events, dict) else events


def profile_chunk(config, updates: int) -> tuple[str, list[dict]]:
    """(optimised HLO text, trace events) of `updates` one-update chunks of the trainer."""
    from hackmatrix.training.trainer import make_schedule, make_trainer
    jax.config.update("jax_enable_compilation_cache", False)
    with scoped_game_functions():
        from hackmatrix.envs.hackmatrix_env import HackMatrixTrainingEnv as HackMatrixEnv
        env = HackMatrixEnv()
        trainer = make_trainer(config, env, env.default_params)
        runner = jax.jit(trainer.init, compiler_options=xla_options.compiler_options())(
            jax.random.PRNGKey(0))
        schedule = make_schedule(config)
        options = {**(xla_options.compiler_options() or {}),
                   "xla_cpu_enable_xprof_traceme": jax.default_backend() == "cpu"}
        chunk = trainer.run_chunk.lower(runner, jnp.int32(1), schedule).compile(
            compiler_options=options)

    def update(runner):
        runner, metrics = chunk(runner, jnp.int32(1), schedule)
        jax.block_until_ready(metrics)
        return runner

    runner = update(runner)  # warm-up: first-call work stays out of the trace
    with tempfile.TemporaryDirectory(prefix="hackmatrix-profile-") as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(updates):
                runner = update(runner)
        return chunk.as_text(), trace_events(Path(trace_dir))


def main(argv=None) -> int:
    parser = ArgumentParser(prog="benchmark.py profile", description=__doc__)
    parser.add_argument("--num-envs", type=env_count, default=256,
                        help=f"parallel environments (default 256, at most {MAX_ENVS:,})")
    add_update_shape(parser)
    parser.add_argument("--updates", type=positive_int, default=2,
                        help="profiled updates, after one warm-up update (default 2)")
    parser.add_argument("--top", type=positive_int, default=40, help="rows shown (default 40)")
    parser.add_argument("--game-only", action="store_true",
                        help="only kernels inside a game function's scope")
    args = parser.parse_args(argv)
    jax_backend.start()
    from hackmatrix.bench.train import benchmark_config
    from hackmatrix.training.config import ConfigError
    try:  # one-update chunks
        config = benchmark_config(args.num_envs, args.num_steps, args.hidden_dim,
                                  args.num_layers, log_interval=1,
                                  explicit=network_options(args))
    except ConfigError as error:
        parser.error(str(error))
    hlo_text, events = profile_chunk(config, args.updates)
    rows = kernel_times(hlo_text, events, args.updates)
    game = [row for row in rows if in_game_scope(row.scope)]
    print(f"update chunk at {args.num_envs} envs x {args.num_steps} steps: kernel time per update "
          f"{sum(row.ms_per_update for row in rows):.1f} ms, of which in game scopes "
          f"{sum(row.ms_per_update for row in game):.1f} ms "
          f"({sum(row.launches_per_update for row in game):.0f} launches)")
    print(f"{'ms/upd':>7} {'launches':>8} {'instr':>5}  {'shape':<26} {'kernel':<28} scope")
    for row in (game if args.game_only else rows)[:args.top]:
        scope = row.scope if len(row.scope) <= 90 else "..." + row.scope[-87:]
        print(f"{row.ms_per_update:7.2f} {row.launches_per_update:8.0f} {row.instructions:5d}  "
              f"{row.shape[:26]:<26} {row.name[:28]:<28} {scope}")
    return 0
