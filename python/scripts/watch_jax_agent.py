#!/usr/bin/env python
"""Watch a trained agent play HackMatrix in the terminal (`hackmatrix-watch`; see --help). The
program is hackmatrix/programs/watch.py."""

from hackmatrix.shell import entry_points
from hackmatrix.programs.watch import main  # noqa: F401  (the tests call main(argv))

if __name__ == "__main__":
    entry_points.watch()
