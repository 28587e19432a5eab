"""`benchmark.py kernels`: where the compiled env step's kernels and their operations come from.

XLA:CPU compile time follows the operations inside the fused kernels (after XLA has copied
cheap producers into each consumer) plus a fixed cost per kernel (specs/performance.md, "What
bounds the step on XLA:CPU"). This compiles `HackMatrixEnv.batch_step` once with every function
of the game's rule modules (`GAME_MODULES`; the small helpers of `bitboard`, `fusion` and
`outcome` count under their callers) wrapped in a `jax.named_scope` named `module.function`,
and attributes each fusion of the optimised HLO, with the instructions of its fused computation,
to the scope path of its root. It measures no time: compile time itself is `benchmark.py env`'s job.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import inspect
import re
from typing import NamedTuple

import jax
import jax.numpy as jnp

from hackmatrix import xla_options
from hackmatrix.shell import jax_backend
from hackmatrix.bench.arguments import MAX_ENVS, env_count, positive_int
from hackmatrix.tools.cli import ArgumentParser

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$")
_FUSION_CALL = re.compile(r" fusion\(.*calls=%?([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]+)"')


class ScopeCount(NamedTuple):
    scope: str
    kernels: int
    operations: int


def instruction_counts(hlo_text: str) -> dict[str, int]:
    """Instructions (not parameters or constants) of each computation of an HLO module."""
    counts, current = {}, None
    for line in hlo_text.splitlines():
        match = _COMPUTATION.match(line)
        if match and not line.startswith(" "):
            current = match.group(1)
            counts[current] = 0
        elif line.startswith("}"):
            current = None
        elif current is not None and " = " in line and " parameter(" not in line \
                and " constant(" not in line:
            counts[current] += 1
    return counts


def scope_parts(hlo_line: str) -> list[str]:
    """The `module.function` scopes of an HLO instruction line's op_name (its parts with a dot,
    outside `jit(...)`), outermost first; none without an op_name."""
    op_name = _OP_NAME.search(hlo_line)
    if op_name is None:
        return []
    return [part for part in op_name.group(1).split("/")
            if "." in part and not part.startswith("jit(")]


def by_scope(hlo_text: str, depth: int = 2, prefix: str = "") -> list[ScopeCount]:
    """Kernels (fusions) and fused operations of an optimised HLO module per named-scope path.

    A fusion's path is the `module.function` parts of its op_name (names with a dot, outside
    `jit(...)`), cut to `depth` parts; fusions outside every scope count as "(none)". With
    `prefix` (a path of whole parts), only the fusions at or under it count, shown relative to
    it ("(itself)" for those directly in it). Sorted by operations, most first.
    """
    sizes = instruction_counts(hlo_text)
    kernels, operations = collections.Counter(), collections.Counter()
    for line in hlo_text.splitlines():
        call = _FUSION_CALL.search(line)
        if not call:
            continue
        parts = scope_parts(line)
        if prefix:
            prefix_parts = prefix.split("/")
            if parts[:len(prefix_parts)] != prefix_parts:
                continue
            parts = parts[len(prefix_parts):]
        scope = "/".join(parts[:depth]) or ("(itself)" if prefix else "(none)")
        kernels[scope] += 1
        operations[scope] += sizes.get(call.group(1), 0)
    return [ScopeCount(scope, kernels[scope], count) for scope, count in operations.most_common()]


# The game modules whose functions `scoped_game_functions` scopes (the scope's label is
# "module.function").
GAME_MODULES = ("action_mask", "actions", "batching", "enemy_turn", "env", "history",
                "observation", "pathfinding", "programs", "reward", "siphon_quality", "spawning",
                "state", "transition", "worldgen")


def in_game_scope(scope: str) -> bool:
    """Whether a '/'-joined scope path holds a scope of `scoped_game_functions`."""
    return any(part.split(".", 1)[0].removeprefix("vmap(") in GAME_MODULES
               for part in scope.split("/") if part)


@contextlib.contextmanager
def scoped_game_functions():
    """Every function defined in a game module runs inside `jax.named_scope("module.function")`
    (module-level names are rebound, so calls between and within modules are scoped too);
    restored on exit."""
    modules = [importlib.import_module(f"hackmatrix.game.{name}") for name in GAME_MODULES]
    originals = []
    for module in modules:
        label_prefix = module.__name__.rsplit(".", 1)[-1]
        for name, function in list(vars(module).items()):
            if inspect.isfunction(function) and function.__module__ == module.__name__:
                originals.append((module, name, function))
                setattr(module, name, _scoped(function, f"{label_prefix}.{name}"))
    try:
        yield
    finally:
        for module, name, function in originals:
            setattr(module, name, function)


def _scoped(function, label: str):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with jax.named_scope(label):
            return function(*args, **kwargs)
    return wrapper


def batch_step_hlo(num_envs: int) -> str:
    """Optimised HLO text of `HackMatrixEnv.batch_step` for `num_envs` envs, game functions
    scoped (`scoped_game_functions`), compiled with the compile options of the benchmarks and
    the trainer (`xla_options.compiler_options`) and without the persistent cache."""
    jax.config.update("jax_enable_compilation_cache", False)
    with scoped_game_functions():
        from hackmatrix.game.env import HackMatrixEnv
        env = HackMatrixEnv()
        keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
        _, states = jax.eval_shape(env.batch_reset, keys)
        actions = jnp.zeros((num_envs,), jnp.int32)
        return jax.jit(env.batch_step, compiler_options=xla_options.compiler_options()).lower(
            keys, states, actions).compile().as_text()


def main(argv=None) -> int:
    parser = ArgumentParser(prog="benchmark.py kernels", description=__doc__)
    parser.add_argument("--num-envs", type=env_count, default=1024,
                        help=f"envs of the compiled batch step (default 1024, at most {MAX_ENVS:,})")
    parser.add_argument("--depth", type=positive_int, default=2,
                        help="scope levels to group by (default 2)")
    parser.add_argument("--prefix", default="",
                        help="only the fusions under this scope path, e.g. "
                             "'vmap(transition.before_generation)/enemy_turn.run_until_placement'")
    parser.add_argument("--top", type=positive_int, default=30, help="rows shown (default 30)")
    args = parser.parse_args(argv)
    jax_backend.start()
    rows = by_scope(batch_step_hlo(args.num_envs), args.depth, args.prefix)
    total_kernels = sum(row.kernels for row in rows)
    total_operations = sum(row.operations for row in rows)
    print(f"batch_step at {args.num_envs} envs: {total_kernels} kernels, "
          f"{total_operations} fused operations" + (f" under {args.prefix}" if args.prefix else ""))
    print(f"{'operations':>10} {'share':>6} {'kernels':>7}  scope")
    for row in rows[:args.top]:
        share = row.operations / max(total_operations, 1)
        print(f"{row.operations:10d} {share:6.1%} {row.kernels:7d}  {row.scope}")
    return 0
