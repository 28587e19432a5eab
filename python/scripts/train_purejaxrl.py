#!/usr/bin/env python
"""Train an action-masked PPO agent on the pure-JAX HackMatrix env (`hackmatrix-train`; see
--help, specs/training.md). The program is hackmatrix/training/cli.py."""

from hackmatrix.shell import entry_points

if __name__ == "__main__":
    entry_points.train()
