"""Starting JAX's backends, with an error that says what to do when none starts."""

from __future__ import annotations

import os

from hackmatrix.messages import error_line


def start() -> str:
    """Starts JAX's backends and returns the default one's platform ("cpu", "gpu", "tpu").

    RuntimeError when none starts, naming JAX_PLATFORMS and the install line to check: JAX itself
    may say no more than "AssertionError" (JAX_PLATFORMS=cuda without the CUDA plugin)."""
    import jax
    try:
        return jax.default_backend()
    except Exception as error:
        raise RuntimeError(f"JAX could not start a backend (JAX_PLATFORMS="
                           f"{os.environ.get('JAX_PLATFORMS', '')!r}): {error_line(error)}; is "
                           "the matching jax extra installed (README: GPU or TPU)?") from error
