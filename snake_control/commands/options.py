"""argparse types shared by the `snake` commands: each refuses a bad value with one line naming the option.

Ranges come from snake_control.robot.LIMITS, the table the robot YAML and the nodes use too.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path


def in_range(limit_name: str, zero_means_default: bool = False):
    """A float option within LIMITS[limit_name] (0 also allowed when it means 'the robot YAML's')."""
    def parse(text: str) -> float:
        from snake_control.robot import LIMITS
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected a number, got {text!r}') from None
        if zero_means_default and value == 0:
            return 0.0
        limit = LIMITS[limit_name]
        if not (math.isfinite(value) and limit.low <= value <= limit.high):
            zero = ' (or 0 for the robot YAML\'s)' if zero_means_default else ''
            raise argparse.ArgumentTypeError(f'must be between {limit.low:g} and {limit.high:g} {limit.unit}'
                                             f'{zero}, got {text!r}')
        return value
    parse.__name__ = limit_name     # argparse names the type in its messages
    return parse


def positive_seconds(text: str) -> float:
    """A finite duration > 0 in s."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a time in s, got {text!r}') from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f'expected a finite time > 0 in s, got {text!r}')
    return value


def input_file(text: str) -> str:
    """An existing regular file to read."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f'{text} is a directory, expected a file')
    if not path.is_file():
        raise argparse.ArgumentTypeError(f'{text}: no such file')
    return text


def output_file(text: str) -> str:
    """A file to write: not a directory, in a directory that exists."""
    path = Path(text)
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f'{text!r} is a directory, expected a file to write')
    parent = path.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f'{text}: directory {parent} does not exist')
    return text


def output_dir(text: str) -> str:
    """A directory to write into: created if missing, refused if a file is in the way."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f'{text} is a file, expected a directory')
    return text


def name_value(text: str) -> tuple[str, str]:
    """NAME=VALUE (a repeatable setting such as --set) as (name, value text), white space around the name
    dropped; the value may be empty, each command reads it as it needs.

    >>> name_value(' lam=0.2')
    ('lam', '0.2')
    """
    name, sep, value = text.partition('=')
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f'expected NAME=VALUE, got {text!r}')
    return name, value
