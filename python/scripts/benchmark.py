"""Benchmarks: `benchmark.py env [...]` (environment throughput) or `benchmark.py train [...]`.

A thin dispatcher; the bodies live in hackmatrix.bench.env and hackmatrix.bench.train. Each is
imported only when chosen, so `env` works without the training code.
"""

import argparse
import importlib
import sys

COMMANDS = {
    "env": ("hackmatrix.bench.env", "env-steps/s of vmapped random-valid-action rollouts"),
    "train": ("hackmatrix.bench.train", "PPO training throughput"),
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=sorted(COMMANDS),
                        help="; ".join(f"{name}: {text}" for name, (_, text) in COMMANDS.items()))
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="options of the subcommand (see `benchmark.py COMMAND --help`)")
    parsed = parser.parse_args(argv[:1])
    module = importlib.import_module(COMMANDS[parsed.command][0])
    module.main(argv[1:])


if __name__ == "__main__":
    main()
