"""Train an action-masked PPO agent on the pure-JAX HackMatrix env (see --help, specs/training.md)."""

from hackmatrix.launch import exit_process, load_main

if __name__ == "__main__":
    exit_process(load_main("hackmatrix.training.cli")())
