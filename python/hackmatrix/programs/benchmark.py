"""Benchmarks: `benchmark.py env|train|scale|kernels|profile|ab|learn [...]` (env throughput,
training throughput, training throughput against the device count, where the compiled env step's
kernels come from, the update's kernel time by kernel, variants of the code timed against it, how
well a training recipe's agents play over seeds).

A thin dispatcher; the bodies live in hackmatrix.bench.env, .train, .scale, .kernels, .profile,
.ab and .learn.
Each is imported only when chosen, so `env` and `kernels` load none of the PPO trainer (optax,
wandb).
"""

import argparse
import sys

from hackmatrix.shell.launch import load_main
from hackmatrix.tools.cli import ArgumentParser, run_main

COMMANDS = {
    "env": ("hackmatrix.bench.env", "env-steps/s of vmapped random-valid-action rollouts"),
    "train": ("hackmatrix.bench.train", "PPO training throughput"),
    "scale": ("hackmatrix.bench.scale",
              "PPO training throughput against the device count, one process per count (on CPU "
              "simulated devices: the collectives' overhead, not scaling)"),
    "kernels": ("hackmatrix.bench.kernels",
                "kernels and fused operations of the compiled env step, by game function"),
    "profile": ("hackmatrix.bench.profile",
                "kernel time of the training update chunk, kernel by kernel"),
    "ab": ("hackmatrix.bench.ab",
           "patched variants of the code against the code as it is, timed in one process"),
    "learn": ("hackmatrix.bench.learn",
              "a training recipe over seeds, judged by play on fixed boards against the "
              "baselines (trainer config flags after --)"),
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = ArgumentParser(prog="benchmark.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=sorted(COMMANDS),
                        help="; ".join(f"{name}: {text}" for name, (_, text) in COMMANDS.items()))
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="options of the subcommand (see `benchmark.py COMMAND --help`)")
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        # argparse would ask for "command, args": there is no "args" to give.
        names = list(COMMANDS)
        parser.error(f"name a subcommand first: {', '.join(names[:-1])} or {names[-1]} (then "
                     "its options; see benchmark.py COMMAND --help)")
    parsed = parser.parse_args(argv[:1])
    subcommand = load_main(COMMANDS[parsed.command][0])
    # One-line errors, exit 7 on SIGINT/SIGTERM, exit 0 when piped into `head`.
    return run_main(f"benchmark.py {parsed.command}", lambda: subcommand(argv[1:]))

