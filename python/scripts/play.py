#!/usr/bin/env python
"""Play HackMatrix in the terminal (`hackmatrix-play`; see --help). The program is
hackmatrix/programs/play.py."""

from hackmatrix.shell import entry_points
from hackmatrix.programs.play import main  # noqa: F401  (the tests call main(argv))

if __name__ == "__main__":
    entry_points.play()
