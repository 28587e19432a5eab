"""`benchmark.py kernels` attribution and the benchmark CLIs' argument checks."""

import argparse
import importlib
import pathlib
import re
import runpy

import jax
import jax.numpy as jnp
import pytest

from hackmatrix.bench import kernels
from hackmatrix.bench.arguments import add_count_list, env_count, positive_int, positive_int_list
from hackmatrix.tools.cli import ArgumentParser

BENCHMARK = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "benchmark.py"


def _two_scoped_outputs(x):
    # Each output is its own elementwise kernel (XLA:CPU has no multi-output fusion); the outer
    # scope nests the inner one.
    with jax.named_scope("outer.total"):
        total = x * 3 + 1
        with jax.named_scope("inner.peak"):
            peak = x ^ (x >> 2)
    return total, peak


@pytest.fixture(scope="module")
def scoped_hlo():
    x = jnp.arange(8 * 36, dtype=jnp.int32).reshape(8, 36)
    return jax.jit(_two_scoped_outputs).lower(x).compile().as_text()


def test_by_scope_attributes_each_fusion_to_its_named_scope(scoped_hlo):
    rows = {row.scope: row for row in kernels.by_scope(scoped_hlo, depth=2)}
    assert set(rows) == {"outer.total", "outer.total/inner.peak"}
    assert rows["outer.total"].kernels == 1 and rows["outer.total/inner.peak"].kernels == 1
    # Each fused computation holds its two arithmetic instructions (and a broadcast constant).
    assert all(row.operations >= 2 for row in rows.values())


def test_by_scope_depth_and_prefix(scoped_hlo):
    shallow = kernels.by_scope(scoped_hlo, depth=1)
    assert [(row.scope, row.kernels) for row in shallow] == [("outer.total", 2)]
    assert shallow[0].operations == sum(row.operations
                                        for row in kernels.by_scope(scoped_hlo, depth=2))
    inner = kernels.by_scope(scoped_hlo, depth=1, prefix="outer.total/inner.peak")
    assert [(row.scope, row.kernels) for row in inner] == [("(itself)", 1)]
    under_outer = kernels.by_scope(scoped_hlo, depth=1, prefix="outer.total")
    assert sorted((row.scope, row.kernels) for row in under_outer) == [("(itself)", 1),
                                                                     ("inner.peak", 1)]
    # A prefix matches whole parts only.
    assert kernels.by_scope(scoped_hlo, prefix="outer.tot") == []
    assert kernels.by_scope(scoped_hlo, prefix="elsewhere") == []


def test_in_game_scope_names_the_scoped_game_modules():
    assert kernels.in_game_scope("vmap(transition.before_generation)/enemy_turn.run")
    assert kernels.in_game_scope("batching.compacted_map")
    assert not kernels.in_game_scope("make_trainer.<locals>.init")
    assert not kernels.in_game_scope("")


def test_scoped_game_functions_restores_the_modules():
    from hackmatrix.game import enemy_turn, state
    original_run, original_select = enemy_turn.run, state.select
    with kernels.scoped_game_functions():
        assert enemy_turn.run is not original_run and state.select is not original_select
        assert enemy_turn.run.__wrapped__ is original_run
    assert enemy_turn.run is original_run and state.select is original_select


def test_positive_int_arguments():
    assert positive_int("7") == 7
    assert positive_int_list("64,256,1024") == [64, 256, 1024]
    for bad in ("0", "-3", "x", "1.5", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_int(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        positive_int_list("64,,256")


def test_benchmark_counts_that_would_fill_the_memory_or_run_for_days_are_refused(capsys):
    assert positive_int("1000000") == 1_000_000 and env_count("1048576") == 2**20
    with pytest.raises(argparse.ArgumentTypeError, match="expected at most 1,000,000, got"):
        positive_int("1000001")
    with pytest.raises(argparse.ArgumentTypeError, match="expected at most 1,048,576, got"):
        env_count("1048577")
    parser = ArgumentParser(prog="benchmark.py env")
    add_count_list(parser, "--num-envs", [64], "env counts")
    assert "each at most 1,048,576" in parser.format_help()
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--num-envs", "64,2000000"])
    assert exit_info.value.code == 3
    assert "expected at most 1,048,576, got 2000000" in capsys.readouterr().err


def test_every_benchmark_list_takes_spaces_commas_or_both():
    parser = ArgumentParser(prog="benchmark.py env")
    add_count_list(parser, "--num-envs", [64, 256], "env counts")
    for argv in (["64", "256", "1024"], ["64,256,1024"], ["64,256", "1024"]):
        assert parser.parse_args(["--num-envs", *argv]).num_envs == [64, 256, 1024]
    assert parser.parse_args([]).num_envs == [64, 256]


@pytest.mark.parametrize("command, argv", [
    ("env", ["--num-envs", "0"]),
    ("train", ["--num-envs", "3", "--num-steps", "3", "--num-minibatches", "2"]),
    ("kernels", ["--depth", "-1"]),
    ("profile", ["--updates", "0"]),
    ("profile", ["--num-envs", "1", "--num-steps", "1"]),  # a batch of 1 in 4 minibatches
    ("ab", ["--rounds", "0", "variant.py"]),
    ("scale", ["--devices", "3", "--num-envs", "256"]),
])
def test_bad_benchmark_arguments_exit_3_before_compiling(command, argv, capsys):
    module = importlib.import_module(f"hackmatrix.bench.{command}")
    with pytest.raises(SystemExit) as exit_info:
        module.main(argv)
    assert exit_info.value.code == 3
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"benchmark.py {command}: error:")


@pytest.mark.parametrize("argv", [[], ["--num-envs", "64", "env"]])
def test_benchmark_without_a_subcommand_first_names_the_subcommands(argv, capsys):
    benchmark_main = runpy.run_path(str(BENCHMARK), run_name="bench_test")["main"]
    with pytest.raises(SystemExit) as exit_info:
        benchmark_main(argv)
    assert exit_info.value.code == 3
    assert capsys.readouterr().err == (
        "benchmark.py: error: name a subcommand first: env, train, scale, kernels, profile, ab or "
        "learn (then its options; see benchmark.py COMMAND --help)\n")


class _ParserBuilt(Exception):
    """Raised instead of parsing: the options are all added by then."""


@pytest.mark.parametrize("command", ["env", "train", "scale", "kernels", "profile", "ab",
                                     "learn"])
def test_every_benchmark_option_has_help_with_its_default(command, monkeypatch):
    options = []
    add_argument = ArgumentParser.add_argument

    def recording(parser, *args, **kwargs):
        option = add_argument(parser, *args, **kwargs)
        options.append(option)
        return option

    def stop(parser, argv=None):
        raise _ParserBuilt

    monkeypatch.setattr(ArgumentParser, "add_argument", recording)
    monkeypatch.setattr(ArgumentParser, "parse_args", stop)
    with pytest.raises(_ParserBuilt):
        importlib.import_module(f"hackmatrix.bench.{command}").main([])
    for option in options:
        if option.default == argparse.SUPPRESS:  # --help
            continue
        assert option.help, option.option_strings
        if option.default not in (None, False, ""):  # a value the user would otherwise not know
            default = option.default
            shown = " ".join(map(str, default)) if isinstance(default, list) else str(default)
            assert re.search(rf"default {re.escape(shown)}\b", option.help), (
                option.option_strings, option.help)
