"""The robot's URDF, expanded by xacro from snake_description/urdf/snake.urdf.xacro and the robot YAML.

The xacro file is the only URDF builder: `ros2 launch` runs it through a Command substitution and
`snake urdf` runs it here, so RViz and every other tool see the same model.
"""
from __future__ import annotations

from pathlib import Path

from snake_control.paths import share_dir
from snake_control.robot import load_robot


def xacro_path() -> Path:
    return share_dir() / 'snake_description' / 'urdf' / 'snake.urdf.xacro'


def urdf_xml(robot: str | Path) -> str:
    """URDF text for a robot name or YAML path. The YAML is validated first, so a bad file fails
    with a ConfigError naming the key rather than with a xacro traceback."""
    import xacro  # imported here: only URDF users need it

    model = load_robot(robot)
    doc = xacro.process_file(str(xacro_path()), mappings={'robot_yaml': str(Path(model.source).resolve())})
    return doc.toprettyxml(indent='  ')
