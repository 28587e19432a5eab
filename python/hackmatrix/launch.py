"""Starting a command-line program. Importing its module imports JAX, which reads its
environment variables (JAX_ENABLE_X64, JAX_NUM_CPU_DEVICES, ...) at import and raises on a bad
value: that is bad input, so the program says so in one line and exits 2, without a traceback."""

from __future__ import annotations

import importlib
import sys

EXIT_FAILURE = 2


def load_main(module: str):
    """`module.main`, or exit 2 with one line if importing `module` fails."""
    try:
        return importlib.import_module(module).main
    except Exception as error:  # any import-time failure of JAX or its plugins
        detail = " ".join(str(error).split())
        print(f"error: cannot start: {type(error).__name__}: {detail}", file=sys.stderr)
        sys.exit(EXIT_FAILURE)
