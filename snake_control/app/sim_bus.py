"""A robot's emulated servo bus: the emulator options for its YAML and the plants offered by name.

The emulator (snake_control.dynamixel.simbus) knows servos, not robots: this module reads the robot YAML
(IDs, servo model, baud, each joint's offset and direction for the initial angles) and names the MuJoCo
plant, which lives in the physics package above the Dynamixel one.

    SimBusProcess(sim_bus_args('pitch_yaw_32', physics='mujoco'))
"""
from __future__ import annotations

# Plants offered by name; a value is the emulator's --physics reference (MODULE:FACTORY). The MuJoCo
# plant's factory in nodes/ also publishes the world's IMU on `imu` (snake_control.nodes.sim_imu).
PHYSICS = {'motor': 'motor', 'mujoco': 'snake_control.nodes.sim_imu:mujoco_plant'}


def physics_reference(name: str) -> str:
    """The emulator's --physics value for a physics name (a MODULE:FACTORY passes through)."""
    if ':' in name:
        return name
    if name not in PHYSICS:
        raise ValueError(f'--physics {name!r} unknown; known: {", ".join(PHYSICS)}')
    return PHYSICS[name]


def robot_bus(robot, baud: int | None = None, physics: str | None = None, spread_rad: float = 0.2,
              seed: int = 0) -> dict:
    """Emulator options (as attribute names of its parsed arguments) for a robot's bus: IDs, model, baud,
    initial angles (snake_control.dynamixel.simbus.robot_options) and the plant. ``robot`` is a Robot
    or a name/YAML path."""
    from snake_control.dynamixel.simbus import robot_options
    from snake_control.robot import load_robot

    r = load_robot(robot) if isinstance(robot, str) else robot
    options = {**robot_options(r, baud, spread_rad, seed), 'physics': 'motor', 'physics_arg': None}
    if physics and physics not in ('none', 'motor'):
        options['physics'] = physics_reference(physics)
        options['physics_arg'] = str(r.source)
    return options


def sim_bus_args(robot, baud: int | None = None, physics: str | None = None, spread_rad: float = 0.2,
                 seed: int = 0) -> list[str]:
    """The emulator's command-line options for a robot's bus (for SimBusProcess); see robot_bus."""
    from snake_control.dynamixel.simbus import options_to_args

    return options_to_args(robot_bus(robot, baud, physics, spread_rad, seed))
