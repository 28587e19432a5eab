"""`benchmark.py ab`: variant files, patching, the paired ratios and the report."""

import jax
import jax.numpy as jnp
import pytest

from hackmatrix.bench import ab
from hackmatrix.game import spawning

# Ranks in descending key order: a valid ranking, so the game runs, but other games.
DESCENDING_RANKS = '''
import jax.numpy as jnp

def ranks(keys):
    return jnp.sum(keys[None, :] > keys[:, None], axis=-1, dtype=jnp.int32)

PATCHES = {"hackmatrix.game.spawning._ranks": ranks}
'''


def _variant(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, message", [
    ("X = 1\n", "defines no PATCHES dict"),
    ("PATCHES = {}\n", "defines no PATCHES dict"),
    ("PATCHES = {'hackmatrix.game.spawning.no_such_name': 1}\n",
     "hackmatrix.game.spawning has no attribute 'no_such_name'"),
    ("PATCHES = {'no_such_module.name': 1}\n", "no module 'no_such_module'"),
    ("raise RuntimeError('broken')\n", "RuntimeError: broken"),
])
def test_a_bad_variant_file_is_one_line_naming_the_file(tmp_path, text, message):
    path = _variant(tmp_path, "variant.py", text)
    with pytest.raises(ab.VariantError) as error:
        ab.load_patches(path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_missing_variant_file_exits_3(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        ab.main([str(tmp_path / "missing.py")])
    assert exit_info.value.code == 3
    assert capsys.readouterr().err.strip() == (
        f"benchmark.py ab: error: {tmp_path / 'missing.py'}: no such file")


def test_patches_hold_inside_the_block_only_even_when_it_raises():
    original = spawning._ranks
    replacement = lambda keys: keys  # noqa: E731
    with pytest.raises(RuntimeError):
        with ab.patched({"hackmatrix.game.spawning._ranks": replacement}):
            assert spawning._ranks is replacement
            raise RuntimeError
    assert spawning._ranks is original


def test_paired_ratios_are_the_median_and_quartiles_of_each_rounds_ratio():
    # Round ratios 0.5, 1, 2, 3 and 4: the median pairs each round, not the two medians.
    median, low, high = ab.paired_ratios([2, 1, 1, 1, 1], [1, 1, 2, 3, 4])
    assert (median, low, high) == (2.0, 1.0, 3.0)
    assert ab.paired_ratios([2.0], [1.0]) == (0.5, 0.5, 0.5)


def test_differing_leaves_counts_leaves_with_any_difference():
    a = {"x": jnp.arange(3), "y": jnp.zeros(2)}
    assert ab.differing_leaves(a, a) == 0
    assert ab.differing_leaves(a, {"x": jnp.arange(3), "y": jnp.array([0.0, 1e-30])}) == 1


def test_a_variant_is_traced_with_its_patches_and_timed_against_the_baseline(tmp_path, capsys):
    # The descending ranks give other games: the report can only say so if the variant's
    # program was traced with the patch, and the baseline's without it.
    path = _variant(tmp_path, "descending.py", DESCENDING_RANKS)
    assert ab.main([path, "--num-envs", "2", "--num-steps", "2", "--rounds", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("benchmark.py ab: target=env num_envs=2 num_steps=2 rounds=2")
    baseline, variant = lines[2].split(), lines[3].split()
    assert baseline[0] == "baseline" and baseline[4] == "1"
    assert variant[0] == "descending" and variant[-2:] == ["leaves", "differ"]
    assert float(variant[4]) > 0 and float(variant[3].replace(",", "")) > 0
    assert spawning._ranks.__name__ == "_ranks"  # restored
    assert jax.config.jax_enable_compilation_cache  # as the pytest run had it
