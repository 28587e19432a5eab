#!/usr/bin/env python
"""Evaluate checkpoints against the built-in baselines (`hackmatrix-eval`; see --help). The
program is hackmatrix/programs/evaluate.py."""

from hackmatrix.shell import entry_points
from hackmatrix.programs.evaluate import main  # noqa: F401  (the tests call main(argv))

if __name__ == "__main__":
    entry_points.evaluate()
