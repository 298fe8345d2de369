"""A robot's emulated servo bus: the emulator options for its YAML and the plants offered by name.

The emulator (snake_control.dynamixel.simbus) knows servos, not robots: this module reads the robot YAML
(IDs, servo model, baud, each joint's offset and direction for the initial angles) and names the MuJoCo
plant, which lives in the physics package above the Dynamixel one.

    SimBusProcess(sim_bus_args('pitch_yaw_32', physics='mujoco'))
"""
from __future__ import annotations

import random

# Plants offered by name; a value is the emulator's --physics reference (MODULE:FACTORY).
PHYSICS = {'motor': 'motor', 'mujoco': 'snake_control.physics.servo_plant:mujoco_plant'}


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
    initial servo angles (joint angles uniform within +-spread_rad, through offset and direction) and
    the plant. ``robot`` is a Robot or a name/YAML path."""
    from snake_control.robot import load_robot

    r = load_robot(robot) if isinstance(robot, str) else robot
    rng = random.Random(seed)
    initial = {j.servo_id: j.servo_angle_rad(rng.uniform(-spread_rad, spread_rad)) for j in r.joints}
    options = {'servos': None, 'ids': ','.join(str(i) for i in r.servo_ids), 'model': r.bus.servo.name,
               'baud': baud or r.bus.baud, 'initial': ','.join(f'{i}:{a:.9g}' for i, a in initial.items()),
               'physics': 'motor', 'physics_arg': None}
    if physics and physics not in ('none', 'motor'):
        options['physics'] = physics_reference(physics)
        options['physics_arg'] = str(r.source)
    return options


def sim_bus_args(robot, baud: int | None = None, physics: str | None = None, spread_rad: float = 0.2,
                 seed: int = 0) -> list[str]:
    """The emulator's command-line options for a robot's bus (for SimBusProcess); see robot_bus."""
    args = []
    for name, value in robot_bus(robot, baud, physics, spread_rad, seed).items():
        if value is not None:
            args += [f'--{name.replace("_", "-")}', str(value)]
    return args
