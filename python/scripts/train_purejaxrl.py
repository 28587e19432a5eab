"""Train an action-masked PPO agent on the pure-JAX HackMatrix env (see --help, specs/training.md)."""

import sys

from hackmatrix.launch import load_main

if __name__ == "__main__":
    sys.exit(load_main("hackmatrix.training.cli")())
