"""Argument types shared by the benchmark CLIs: a bad value ends in a one-line usage error with
exit code 3 (their parser is `hackmatrix.tools.cli.ArgumentParser`), before anything compiles."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_int_list(text: str) -> list[int]:
    """Comma-separated positive integers, e.g. '64,256,1024'."""
    return [positive_int(part) for part in text.split(",")]


class _Joined(argparse.Action):
    """Joins the lists of several arguments ('64,256 1024') into one list."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [number for part in values for number in part])


def add_count_list(parser: argparse.ArgumentParser, flag: str, default: list[int], text: str):
    """`flag` takes positive integers separated by spaces, commas or both: every benchmark's
    lists read the same ('--num-envs 64 256' and '--num-envs 64,256')."""
    parser.add_argument(flag, type=positive_int_list, nargs="+", action=_Joined, default=default,
                        metavar="N", help=f"{text} (default {' '.join(map(str, default))}; "
                                          "separated by spaces or commas)")
