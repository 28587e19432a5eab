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
