"""The persistent compilation cache that the trainer and the agent tools turn on."""

import os
import pathlib
import subprocess
import sys

import jax
import pytest

from hackmatrix.shell import compilation_cache


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
        assert list((tmp_path / "a" / "b").iterdir()) == []  # the probe file is gone
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "a" / "b")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_a_path_that_is_a_file_warns_once_and_turns_the_cache_off(monkeypatch, tmp_path):
    (tmp_path / "cache").write_text("")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache"))
    before = jax.config.jax_compilation_cache_dir
    warnings = []
    try:
        assert compilation_cache.enable(warnings.append) is None
        (warning,) = warnings
        assert warning.startswith(f"no compilation cache: cannot use {tmp_path / 'cache'}")
        assert warning.endswith("every start compiles from scratch")
        assert jax.config.jax_compilation_cache_dir == before
        # Off, not only unset here: JAX reads the variable itself and would warn at each compile.
        assert not jax.config.jax_enable_compilation_cache
    finally:
        jax.config.update("jax_enable_compilation_cache", True)


def test_without_a_warn_function_the_warning_is_a_line_on_stderr(monkeypatch, tmp_path, capsys):
    # For code that uses the game as a library: enable() with no arguments.
    (tmp_path / "cache").write_text("")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache"))
    try:
        assert compilation_cache.enable() is None
        assert capsys.readouterr().err == (
            f"hackmatrix: warning: no compilation cache: cannot use {tmp_path / 'cache'} "
            "(File exists); every start compiles from scratch\n")
    finally:
        jax.config.update("jax_enable_compilation_cache", True)


def test_a_directory_that_takes_no_files_warns_once_and_turns_the_cache_off(
        monkeypatch, tmp_path):
    # A read-only directory, as a user other than root sees it (root may write anywhere).
    def refuse(**kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(compilation_cache.tempfile, "NamedTemporaryFile", refuse)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    warnings = []
    try:
        assert compilation_cache.enable(warnings.append) is None
        assert warnings == [f"no compilation cache: cannot use {tmp_path} (Permission denied); "
                            "every start compiles from scratch"]
        assert not jax.config.jax_enable_compilation_cache
    finally:
        jax.config.update("jax_enable_compilation_cache", True)


@pytest.mark.parametrize("script, argv", [
    ("play.py", ["--no-color"]),
    ("evaluate.py", ["--episodes", "1", "--max-steps", "2"]),  # the baselines only
])
def test_a_tool_given_an_unusable_cache_warns_once_and_runs(tmp_path, script, argv):
    # In a process of its own: JAX reads JAX_COMPILATION_CACHE_DIR when it starts, and any
    # compile before the tool turns the cache off (an import computing a constant) would warn.
    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / script
    (tmp_path / "cache").write_text("")
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache"),
           "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, str(path), *argv], input="q\n", env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0
    assert result.stderr == (f"{script}: warning: no compilation cache: cannot use "
                             f"{tmp_path / 'cache'} (File exists); every start compiles from "
                             f"scratch\n")
