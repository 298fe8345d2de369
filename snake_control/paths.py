"""Where the package's shared files (config/, launch/, snake_description/) are, how a shipped
configuration is found by name, and the one error for a configuration file that cannot be used.

From a source checkout (pip -e, `make`) they sit beside the package; after `colcon build` they are in
share/snake_control, found through the ament index.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = 'snake_control'


def share_dir() -> Path:
    """The folder holding config/, launch/ and snake_description/."""
    source = Path(__file__).resolve().parents[1]
    if (source / 'config' / 'robots').is_dir():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except Exception as exc:  # PackageNotFoundError, or no ament index at all
        raise FileNotFoundError(
            f'cannot find the {PACKAGE} share folder: not a source checkout ({source}) and not '
            f'installed with colcon (source install/setup.bash first)') from exc


class ConfigError(ValueError):
    """A configuration file (robot, gamepad map, teleop script) that cannot be used; the message names the
    file, the key path and the problem."""

    def __init__(self, source: str, key: str, problem: str):
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f'{source}: {key}: {problem}' if key else f'{source}: {problem}')


# Shipped configuration: kind -> (folder under config/, what one file is, for messages).
SHIPPED = {'robots': 'robot', 'teleop': 'gamepad map', 'scripts': 'teleop script'}


def shipped_dir(kind: str) -> Path:
    """config/<kind>: 'robots', 'teleop' or 'scripts'."""
    if kind not in SHIPPED:
        raise ValueError(f'unknown kind of configuration {kind!r}: one of {", ".join(SHIPPED)}')
    return share_dir() / 'config' / kind


def shipped_names(kind: str) -> list[str]:
    """Names (file stems) of the YAML files shipped in config/<kind>; a robot's gait calibration
    (<robot>.calibration.yaml, beside it) is not one of them."""
    return sorted(p.stem for p in shipped_dir(kind).glob('*.yaml') if not p.name.endswith('.calibration.yaml'))


def resolve_shipped(kind: str, name_or_path: str | Path) -> Path:
    """A YAML path from a shipped file's name (``pitch_yaw_32``, ``xbox``) or from a path to a file.

    Anything with a .yaml/.yml suffix or naming an existing file is a path; otherwise a name looked up in
    config/<kind>. FileNotFoundError names what was asked for and what is shipped.
    """
    what = SHIPPED.get(kind, kind)
    candidate = Path(name_or_path)
    if candidate.suffix in ('.yaml', '.yml') or candidate.exists():
        if not candidate.is_file():
            raise FileNotFoundError(f'{what} file {candidate} does not exist')
        return candidate
    path = shipped_dir(kind) / f'{name_or_path}.yaml'
    if not path.is_file():
        raise FileNotFoundError(f'no {what} named {name_or_path!r}; shipped: '
                                f'{", ".join(shipped_names(kind))} (or pass a path to a {what} YAML)')
    return path


def robots_dir() -> Path:
    return shipped_dir('robots')


def robot_names() -> list[str]:
    """Names of the robot descriptions shipped in config/robots."""
    return shipped_names('robots')


def resolve_robot(name_or_path: str | Path) -> Path:
    """A robot YAML path from a shipped robot's name or from a path to a file."""
    return resolve_shipped('robots', name_or_path)


def teleop_names() -> list[str]:
    """Names of the gamepad maps shipped in config/teleop."""
    return shipped_names('teleop')


def resolve_teleop(name_or_path: str | Path) -> Path:
    """A teleop YAML path from a shipped map's name (xbox, playstation) or a path to a file."""
    return resolve_shipped('teleop', name_or_path)
