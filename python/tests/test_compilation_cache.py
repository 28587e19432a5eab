"""The persistent compilation cache that the trainer and the agent tools turn on."""

import jax

from hackmatrix import compilation_cache


def test_the_directory_is_the_variable_else_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "given"))
    assert compilation_cache.default_directory() == str(tmp_path / "given")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation_cache.default_directory() == str(
        tmp_path / "xdg" / "hackmatrix" / "jax_compilation_cache")


def test_enabling_creates_the_directory_and_points_jax_at_it(monkeypatch, tmp_path):
    before = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "a" / "b"))
    warnings = []
    try:
        assert compilation_cache.enable(warnings.append) == str(tmp_path / "a" / "b")
        assert (tmp_path / "a" / "b").is_dir() and warnings == []
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "a" / "b")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_a_path_that_is_a_file_warns_once_and_is_not_used(monkeypatch, tmp_path):
    (tmp_path / "cache").write_text("")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache"))
    before = jax.config.jax_compilation_cache_dir
    warnings = []
    assert compilation_cache.enable(warnings.append) is None
    (warning,) = warnings
    assert warning.startswith(f"no compilation cache: cannot use {tmp_path / 'cache'}")
    assert warning.endswith("every start compiles from scratch")
    assert jax.config.jax_compilation_cache_dir == before
