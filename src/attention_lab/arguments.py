"""argparse types of the `attention-lab` commands (cli.py, project.py): bounded numbers, whose
violation argparse reports as a usage error naming the option."""

from __future__ import annotations

import argparse


def int_in(low: int, high: int | None = None):
    """argparse type: an integer in [low, high]; otherwise argparse's usage error (exit 2) names the
    option."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, "
                f"{'inf)' if high is None else f'{high}]'}, got {value}"
            )
        return value

    return parse


def float_in(low: float, high: float):
    """argparse type: a finite number in [low, high]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:  # False for nan
            raise argparse.ArgumentTypeError(
                f"expected a number in [{low:g}, {high:g}], got {text}"
            )
        return value

    return parse
