"""Where the package's shared files (config/, launch/, snake_description/) are.

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


def robots_dir() -> Path:
    return share_dir() / 'config' / 'robots'


def robot_names() -> list[str]:
    """Names of the robot descriptions shipped in config/robots."""
    return sorted(p.stem for p in robots_dir().glob('*.yaml'))


def resolve_robot(name_or_path: str | Path) -> Path:
    """A robot YAML path from a shipped robot's name or from a path to a file."""
    candidate = Path(name_or_path)
    if candidate.suffix in ('.yaml', '.yml') or candidate.exists():
        if not candidate.is_file():
            raise FileNotFoundError(f'robot file {candidate} does not exist')
        return candidate
    path = robots_dir() / f'{name_or_path}.yaml'
    if not path.is_file():
        raise FileNotFoundError(
            f'no robot named {name_or_path!r}; shipped robots: {", ".join(robot_names())} '
            f'(or pass a path to a robot YAML)')
    return path
