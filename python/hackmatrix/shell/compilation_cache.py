"""JAX's persistent compilation cache, on by default for the trainer and the agent tools.

A restart then loads the compiled executables instead of compiling them: the trainer's update
chunk, the viewer's, evaluator's and play.py's game step (the same program for every checkpoint
of any run, so watching a second checkpoint skips the game's compile too). The cache lives in
`JAX_COMPILATION_CACHE_DIR` if set, else in the user's cache directory; every program is cached
however quickly it compiled, unless `JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS` says otherwise.
Kept because `evaluate.py --episodes 4 --max-steps 10` (the baselines) takes 11.1-11.2 s of CPU
with an empty cache and 4.6-4.7 s with a filled one. The benchmarks turn it off: they report
cold compiles.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable


def default_directory() -> str:
    """`JAX_COMPILATION_CACHE_DIR`, else `hackmatrix/jax_compilation_cache` in the user's cache
    directory (`XDG_CACHE_HOME`, else ~/.cache)."""
    directory = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if directory:
        return directory
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(cache_home) / "hackmatrix" / "jax_compilation_cache")


def _warn_on_stderr(message: str) -> None:
    print(f"hackmatrix: warning: {message}", file=sys.stderr)


def enable(warn: Callable[[str], None] = _warn_on_stderr) -> str | None:
    """Turns the cache on (call it before the process's first compile) and returns its
    directory; when no file can be created there, says so through `warn` (by default a line on
    stderr), turns JAX's cache off and returns None: every start then compiles from scratch.
    (A read-only cache that others filled is not read either: JAX would warn at each compile
    that it cannot add to it.)"""
    import jax
    directory = default_directory()
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        # A directory that exists but takes no files (read-only, or another user's) would have
        # JAX warn at every compile: a real file, because root passes every permission test.
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
            pass
    except OSError as error:
        warn(f"no compilation cache: cannot use {directory} ({error.strerror or error}); every "
             "start compiles from scratch")
        # JAX reads JAX_COMPILATION_CACHE_DIR itself, and would warn at every compile.
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    jax.config.update("jax_compilation_cache_dir", directory)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return directory
