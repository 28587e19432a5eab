#!/usr/bin/env python
"""Draw the training curves of a run's metrics.jsonl (`hackmatrix-plot`; see --help). The
program is hackmatrix/programs/plot.py."""

from hackmatrix.shell import entry_points
from hackmatrix.programs.plot import main  # noqa: F401  (the tests call main(argv))

if __name__ == "__main__":
    entry_points.plot()
