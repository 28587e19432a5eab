"""Argument types shared by the benchmark CLIs: a bad value ends in a one-line usage error with
exit code 3 (their parser is `hackmatrix.tools.cli.ArgumentParser`), before anything compiles."""

from __future__ import annotations

import argparse

from hackmatrix.training.config import DTYPES


# A benchmark measures: a count beyond these is a typo that would fill the memory (envs stepped
# at once) or run for days (any other count), refused before anything compiles.
MAX_ENVS = 2**20
MAX_COUNT = 1_000_000


def positive_int(text: str, maximum: int = MAX_COUNT) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"expected at most {maximum:,}, got {value}")
    return value


def env_count(text: str) -> int:
    """A number of envs stepped at once: from 1 to MAX_ENVS."""
    return positive_int(text, MAX_ENVS)


def positive_int_list(text: str) -> list[int]:
    """Comma-separated positive integers, e.g. '64,256,1024'."""
    return [positive_int(part) for part in text.split(",")]


class _Joined(argparse.Action):
    """Joins the lists of several arguments ('64,256 1024') into one list."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [number for part in values for number in part])


def add_count_list(parser: argparse.ArgumentParser, flag: str, default: list[int], text: str,
                   maximum: int | None = None):
    """`flag` takes positive integers separated by spaces, commas or both: every benchmark's
    lists read the same ('--num-envs 64 256' and '--num-envs 64,256'). --num-envs lists are
    env counts (at most MAX_ENVS), other lists at most `maximum` (default MAX_COUNT)."""
    if maximum is None:
        maximum = MAX_ENVS if flag == "--num-envs" else MAX_COUNT

    def count_list(text: str) -> list[int]:
        return [positive_int(part, maximum) for part in text.split(",")]

    parser.add_argument(flag, type=count_list, nargs="+",
                        action=_Joined, default=default, metavar="N",
                        help=f"{text} (default {' '.join(map(str, default))}; separated by "
                             f"spaces or commas; each at most {maximum:,})")


def add_update_shape(parser: argparse.ArgumentParser) -> None:
    """--num-steps, --hidden-dim and --num-layers, defaulting to the training targets' config
    (128 steps per env, a 256 x 2 MLP), for the benchmarks that run PPO updates."""
    parser.add_argument("--num-steps", type=positive_int, default=128,
                        help="rollout length per env per update (default 128)")
    parser.add_argument("--hidden-dim", type=positive_int, default=256,
                        help="units per hidden layer (default 256)")
    parser.add_argument("--num-layers", type=positive_int, default=2,
                        help="hidden layers (default 2)")
    parser.add_argument("--torso", choices=("mlp", "conv", "ego"),
                        help="the network's torso (default: the trainer's)")
    parser.add_argument("--shared-torso", action=argparse.BooleanOptionalAction, default=None,
                        help="one torso for both heads (default: the trainer's, separate)")
    parser.add_argument("--conv-channels", type=positive_int,
                        help="channels per cell of a grid torso (default: the trainer's)")
    parser.add_argument("--dtype", choices=DTYPES,
                        help="the network's compute dtype, as the trainer's --dtype (default: "
                             "the trainer's, float32)")


def network_options(args) -> dict:
    """The TrainConfig network fields given to `add_update_shape`'s flags."""
    return {name: getattr(args, name) for name in ("torso", "shared_torso", "conv_channels",
                                                   "dtype")
            if getattr(args, name) is not None}
