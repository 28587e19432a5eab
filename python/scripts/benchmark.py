#!/usr/bin/env python
"""Benchmarks (`hackmatrix-bench`; see --help). The program is hackmatrix/programs/benchmark.py."""

from hackmatrix.shell import entry_points
from hackmatrix.programs.benchmark import main  # noqa: F401  (the tests call main(argv))

if __name__ == "__main__":
    entry_points.bench()
