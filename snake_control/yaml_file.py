"""Reading the package's YAML files (robots, gamepad maps, teleop scripts) with one-line errors.

Every failure becomes ``error(source, key, problem)``, an exception class that names the file: a file that
cannot be read, is not UTF-8 text, is not YAML, or nests deeper than the parser can follow (which would
otherwise raise RecursionError with a thousand-line traceback).
"""
from __future__ import annotations

from pathlib import Path

import yaml


def read_text(path: str | Path, error) -> str:
    """The file's text (UTF-8); raises error(path, '', problem)."""
    try:
        return Path(path).read_text(encoding='utf-8')
    except UnicodeDecodeError as exc:
        raise error(str(path), '', f'not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset '
                                   f'{exc.start})') from None
    except OSError as exc:
        raise error(str(path), '', f'cannot read: {exc.strerror or exc}') from None


def parse_yaml(text: str, source: str, error):
    """The YAML document in text; raises error(source, where, problem)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = f'line {mark.line + 1}, column {mark.column + 1}' if mark else ''
        raise error(source, where, f'not valid YAML: {getattr(exc, "problem", None) or exc}') from None
    except RecursionError:
        raise error(source, '', 'not usable YAML: nested too deeply') from None


def load_yaml_file(path: str | Path, error):
    """read_text then parse_yaml."""
    return parse_yaml(read_text(path, error), str(path), error)
