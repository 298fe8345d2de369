"""The node graph: which nodes run, with which names, parameters and remappings, from the launch arguments.

Built once here and used twice: launch/gait.launch.py turns the list into launch_ros Nodes and
`snake bringup` instantiates the same node classes in one process. No rclpy and no launch import: this is
plain data, testable anywhere.

Example:
    >>> from snake_control.app.graph import GraphArgs, build_graph
    >>> specs = build_graph(GraphArgs(robot='pitch_yaw_32', bus='sim'))
    >>> [s.name for s in specs if s.package == 'snake_control']
    ['driver_node', 'gait_node', 'estimator_node', 'teleop_node']
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

PACKAGE = 'snake_control'
BUS_CHOICES = ('sim', 'real')
PHYSICS_CHOICES = ('none', 'mujoco')
BOOL_CHOICES = ('true', 'false')


@dataclass(frozen=True)
class LaunchArgument:
    """One launch argument of gait.launch.py: name, default (a string, as launch wants), description,
    and the closed set of values where there is one."""

    name: str
    default: str
    description: str
    choices: tuple[str, ...] | None = None


def launch_arguments() -> tuple[LaunchArgument, ...]:
    """Every argument of gait.launch.py (and the matching `snake bringup` options)."""
    from snake_control.paths import robot_names
    from snake_control.paths import teleop_names
    from snake_control.robot import GAIT_RATE_MAX_HZ, LIMITS
    rate = LIMITS['control_rate_hz']
    return (
        LaunchArgument('robot', 'pitch_yaw_32',
                       f'robot description: a shipped name ({", ".join(robot_names())}) or a path to a '
                       f'robot YAML'),
        LaunchArgument('bus', 'real', 'servo bus: real (a USB adapter on `port`) or sim (the emulated bus '
                       'started by the launch, `snake sim-bus`)', BUS_CHOICES),
        LaunchArgument('port', '', 'serial device of the servo bus (a robot with several buses: one per '
                       'bus, comma-separated, in the YAML\'s order); empty: the robot YAML\'s (ignored with '
                       'bus:=sim)'),
        LaunchArgument('baud', '0', 'bus baud rate in bit/s; 0: the robot YAML\'s bus.baud'),
        LaunchArgument('rate', '0', f'control rate in Hz of the driver\'s bus loop ({rate.low:g} to '
                       f'{rate.high:g}); 0: the robot YAML\'s bus.control_rate_hz'),
        LaunchArgument('gait_rate', '0', f'rate in Hz of the gait and its joint_commands, at most `rate`; '
                       f'0: `rate` up to {GAIT_RATE_MAX_HZ:g} Hz. Slower than the bus, the driver moves the '
                       f'goals between commands along their velocities, for at most one gait period'),
        LaunchArgument('watchdog_ms', '-1', 'servo Bus Watchdog in ms: the servos stop when no packet has '
                       'reached them for this long (a killed or hung controller, a pulled cable); -1: five '
                       'control periods, at least 100 ms; 0: off'),
        LaunchArgument('namespace', 'snake', 'ROS namespace of every node and topic'),
        LaunchArgument('joy', 'true', 'start joy_node for a gamepad on joy_dev', BOOL_CHOICES),
        LaunchArgument('joy_dev', '0', 'joy_node device id (0 is the first gamepad)'),
        LaunchArgument('teleop', 'xbox', f'gamepad map: {", ".join(teleop_names())} or a path to a teleop '
                       f'YAML'),
        LaunchArgument('gait', '', 'gait selected at start; empty: the first gait for the robot\'s kind'),
        LaunchArgument('physics', 'none', 'with bus:=sim, couple the emulated servos to a MuJoCo world',
                       PHYSICS_CHOICES),
        LaunchArgument('rviz', 'false', 'start RViz with snake_description/rviz/snake.rviz', BOOL_CHOICES),
        LaunchArgument('robot_state_publisher', 'true', 'start robot_state_publisher (the links\' TF from '
                       'joint_states and the URDF)', BOOL_CHOICES),
    )


def _as_bool(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ('true', '1', 'yes', 'on'):
        return True
    if text in ('false', '0', 'no', 'off'):
        return False
    raise ValueError(f'launch argument {name}: expected true or false, got {value!r}')


@dataclass(frozen=True)
class GraphArgs:
    """The launch arguments, typed. Zero or empty means 'from the robot YAML'."""

    robot: str = 'pitch_yaw_32'
    bus: str = 'real'
    port: str = ''
    baud: int = 0
    rate: float = 0.0
    gait_rate: float = 0.0
    watchdog_ms: int = -1
    namespace: str = 'snake'
    joy: bool = True
    joy_dev: int = 0
    teleop: str = 'xbox'
    gait: str = ''
    physics: str = 'none'
    rviz: bool = False
    robot_state_publisher: bool = True

    @classmethod
    def from_strings(cls, values: dict[str, str]) -> 'GraphArgs':
        """From launch-argument strings (as `ros2 launch` gives them); raises ValueError naming the
        argument and the allowed values."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f'unknown launch argument(s) {sorted(unknown)}; known: {sorted(known)}')
        kwargs = {}
        for f in fields(cls):
            if f.name not in values:
                continue
            raw = values[f.name]
            if f.type in ('bool', bool):
                kwargs[f.name] = _as_bool(raw, f.name)
            elif f.type in ('int', int):
                try:
                    kwargs[f.name] = int(raw)
                except ValueError:
                    raise ValueError(f'launch argument {f.name}: expected an integer, got {raw!r}') from None
            elif f.type in ('float', float):
                try:
                    kwargs[f.name] = float(raw)
                except ValueError:
                    raise ValueError(f'launch argument {f.name}: expected a number, got {raw!r}') from None
            else:
                kwargs[f.name] = str(raw)
        return cls(**kwargs).validated()

    def validated(self) -> 'GraphArgs':
        """Check closed sets and ranges; resolve the robot; raise ValueError naming the argument."""
        from snake_control.paths import resolve_robot
        if self.bus not in BUS_CHOICES:
            raise ValueError(f'launch argument bus: expected one of {BUS_CHOICES}, got {self.bus!r}')
        if self.physics not in PHYSICS_CHOICES:
            raise ValueError(f'launch argument physics: expected one of {PHYSICS_CHOICES}, '
                             f'got {self.physics!r}')
        if self.physics != 'none' and self.bus != 'sim':
            raise ValueError('launch argument physics: a physics world needs bus:=sim')
        from snake_control.robot import check_baud, check_rate_hz, load_robot
        check_baud(self.baud, 'launch argument baud')
        check_rate_hz(self.rate, 'launch argument rate')
        check_rate_hz(self.gait_rate, 'launch argument gait_rate')
        if not (self.watchdog_ms == -1 or 0 <= self.watchdog_ms <= 2540):
            raise ValueError(f'launch argument watchdog_ms: -1 (automatic), 0 (off) or 1..2540 ms, '
                             f'got {self.watchdog_ms}')
        if self.namespace.strip('/') and not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*',
                                                          self.namespace.strip('/')):
            raise ValueError(f'launch argument namespace: not a valid ROS namespace: {self.namespace!r}')
        resolve_robot(self.robot)  # FileNotFoundError naming the shipped robots
        robot = load_robot(self.robot)  # ConfigError naming the file and key
        if self.gait:
            from snake_control.gaits.catalog import gaits_for
            known = list(gaits_for(robot))
            if self.gait not in known:
                raise ValueError(f'launch argument gait: unknown gait {self.gait!r} for {robot.name}; '
                                 f'known: {", ".join(known)}')
        from snake_control.teleop.mapping import load_teleop_config
        load_teleop_config(self.teleop)  # a bad gamepad map fails here, before anything starts
        return self


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph.

    package/executable: what `ros2 run` starts; module/class_name: the same node for in-process use
    (None for nodes of other packages, which `snake bringup` cannot run). parameters: name -> value
    (str, int, float, bool or a list of one of these). remappings: (from, to) topic pairs.
    """

    package: str
    executable: str
    name: str
    namespace: str
    parameters: dict = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    module: str | None = None
    class_name: str | None = None
    arguments: tuple[str, ...] = ()

    @property
    def in_process(self) -> bool:
        return self.module is not None

    @property
    def fqn(self) -> str:
        """Fully qualified node name, /namespace/name."""
        ns = '/' + self.namespace.strip('/') if self.namespace.strip('/') else ''
        return f'{ns}/{self.name}'


# Gaits the gamepad's next/previous buttons cycle through, by robot kind, in this order (the first is the
# gait at start). Every other gait of the catalogue stays reachable through gait/select.
# In the graph the joint vectors lag their stamps by varying amounts (the emulated bus answers with the
# plant's last tick; a driver holds readings a cycle lost), so the IMU attitude taken as it is turns the
# chassis by the head's swing each time they disagree: the contacts turn the chassis and the IMU pulls it
# with this time constant (s) (docs/estimation.md, "The graph against offline").
GRAPH_IMU_ATTITUDE_S = 1.0
# How long the gait node's power-up rest waits for the world's IMU (published from the bus emulator's
# process, which DDS can discover seconds after the driver on a loaded machine).
GRAPH_IMU_WAIT_S = 10.0

TELEOP_GAIT_CYCLES = {
    # aeh_sidewinding before the serpenoid one: its contacts hold still (a real tread) in MuJoCo, where
    # serpenoid sidewinding slips at about 0.28 of the body speed.
    'pitch_yaw': ('serpentine', 'lateral_undulation', 'aeh_sidewinding', 'sidewinding', 'rolling',
                  'turn_in_place'),
    'planar': ('wheeled_undulation', 'lateral_undulation', 'kinematic_snake_preset'),
}


def default_gait_cycle(robot) -> list[str]:
    """Gaits the gamepad cycles through for a robot: TELEOP_GAIT_CYCLES filtered by the catalogue."""
    from snake_control.gaits.catalog import gaits_for
    available = gaits_for(robot)
    cycle = [g for g in TELEOP_GAIT_CYCLES.get(robot.kind, ()) if g in available]
    return cycle or [g for g in available if g != 'straight']


def estimator_parameters(robot, robot_path: str, args: GraphArgs) -> dict:
    """estimator_node's parameters. In the MuJoCo world a pitch-yaw robot's modules slide along their
    axis far more easily than across it (anisotropic capsule friction); an axial_weight of 1 (no axial
    sliding) would read serpentine as no motion, so the graph passes the weight that matches the world's
    friction, whatever the world's options (snake_control.physics.mjcf.matching_axial_weight,
    (mu_axial / mu_lateral)^2, about 0.028). Real robots take the robot YAML link.axial_weight (the
    node default). The estimator fuses the world's IMU and is told which link carries it (the head);
    a wheeled robot takes its heading from the gyro (wheels skid)."""
    params = {'robot': robot_path}
    if args.physics == 'mujoco':
        from snake_control.physics.mjcf import imu_link_index, matching_axial_weight
        # The world publishes its IMU on `imu` (snake_control.nodes.sim_imu), from this link, and the
        # estimator fuses it; lost and late readings are bridged with the contacts (docs/estimation.md).
        params['use_imu'] = True
        params['imu_link'] = imu_link_index(robot)
        if robot.kind == 'pitch_yaw':
            params['axial_weight'] = float(matching_axial_weight())
            params['imu_attitude_s'] = GRAPH_IMU_ATTITUDE_S
    return params


def gait_calibration(robot, args: GraphArgs) -> dict:
    """gait_node's calibration parameter. The MuJoCo world of the graph runs the pyramidal friction cone
    (faster than real time beside the controller), on which some gaits go faster or turn otherwise than
    on the elliptic cone the shipped calibration is measured on (serpentine about 8 % faster,
    docs/physics.md): the graph maps cmd_vel with <robot>.sim.calibration.yaml, measured on its own
    floor, when there is one. Elsewhere the node's default: the calibration beside the robot YAML."""
    if args.physics != 'mujoco':
        return {}
    from snake_control.gaits.calibration import SIM_SUFFIX, calibration_path
    path = calibration_path(robot, SIM_SUFFIX)
    return {'calibration': str(path)} if path.is_file() else {}


def build_graph(args: GraphArgs, port: str | None = None) -> list[NodeSpec]:
    """The node list for the launch arguments. `port` overrides the serial device (bringup passes the
    emulated bus's pty here once it has started it)."""
    from snake_control.dynamixel.driver_config import check_watchdog, default_watchdog_ms
    from snake_control.paths import resolve_robot
    from snake_control.robot import command_extrapolation_s, gait_rate_hz, load_robot

    robot_path = str(Path(resolve_robot(args.robot)).resolve())
    robot = load_robot(robot_path)
    rate = float(args.rate or robot.bus.control_rate_hz)
    gait_rate = gait_rate_hz(rate, args.gait_rate)
    watchdog_ms = default_watchdog_ms(rate) if args.watchdog_ms < 0 else int(args.watchdog_ms)
    try:
        check_watchdog(watchdog_ms, rate)
    except ValueError as exc:
        raise ValueError(f'launch argument {exc}') from None
    baud = int(args.baud or robot.bus.baud)
    serial_port = port or args.port or robot.bus.port
    bus_ports = {'port': serial_port}
    if len(robot.bus_lines) > 1:        # one device per bus: the driver's `ports`, `port` left empty
        given = port or args.port
        if given and len(given.split(',')) != len(robot.bus_lines):
            raise ValueError(f'launch argument port: {len(robot.bus_lines)} comma-separated devices for '
                             f'the buses of {robot.name}, got {given!r}')
        bus_ports = {'port': '', 'ports': given or ','.join(line.port for line in robot.bus_lines)}
    ns = args.namespace.strip('/')
    cycle = default_gait_cycle(robot)
    gait = args.gait or cycle[0]
    estimator = estimator_parameters(robot, robot_path, args)
    calibration = gait_calibration(robot, args)

    specs = [
        NodeSpec(PACKAGE, 'driver_node', 'driver_node', ns,
                 {'robot': robot_path, **bus_ports, 'baud': baud, 'rate': rate, 'watchdog_ms': watchdog_ms,
                  'command_extrapolation': command_extrapolation_s(rate, gait_rate)},
                 module='snake_control.nodes.driver_node', class_name='DriverNode'),
        NodeSpec(PACKAGE, 'gait_node', 'gait_node', ns,
                 {'robot': robot_path, 'rate_hz': gait_rate, 'gait': gait, **calibration,
                  # The power-up rest teaches the estimator its gyro bias only if the IMU is heard by then.
                  **({'startup_imu_wait_s': GRAPH_IMU_WAIT_S} if estimator.get('use_imu') else {})},
                 module='snake_control.nodes.gait_node', class_name='GaitNode'),
        NodeSpec(PACKAGE, 'estimator_node', 'estimator_node', ns, estimator,
                 module='snake_control.nodes.estimator_node', class_name='EstimatorNode'),
        NodeSpec(PACKAGE, 'teleop_node', 'teleop_node', ns,
                 {'robot': robot_path, 'teleop': args.teleop, 'gait_cycle': cycle},
                 module='snake_control.nodes.teleop_node', class_name='TeleopNode'),
    ]
    if args.robot_state_publisher:
        # robot_description is filled by the launch file or published by bringup, both from
        # description.urdf_xml.
        specs.append(NodeSpec('robot_state_publisher', 'robot_state_publisher', 'robot_state_publisher', ns,
                              {'publish_frequency': min(rate, 50.0)}))
    if args.joy:
        specs.append(NodeSpec('joy', 'joy_node', 'joy_node', ns,
                              {'device_id': args.joy_dev, 'deadzone': 0.05, 'autorepeat_rate': 20.0}))
    if args.rviz:
        specs.append(NodeSpec('rviz2', 'rviz2', 'rviz2', ns, {}, arguments=('-d', str(rviz_config_path()))))
    return specs


def package_available(package: str) -> bool:
    """Whether a ROS package is installed (on AMENT_PREFIX_PATH)."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return False
    try:
        get_package_prefix(package)
    except (PackageNotFoundError, ValueError, OSError):   # OSError: no AMENT_PREFIX_PATH at all
        return False
    return True


def rviz_config_path() -> Path:
    from snake_control.paths import share_dir
    return share_dir() / 'snake_description' / 'rviz' / 'snake.rviz'


def with_parameters(spec: NodeSpec, **parameters) -> NodeSpec:
    """A copy of spec with parameters added or replaced."""
    return replace(spec, parameters={**spec.parameters, **parameters})


def ros_arguments(spec: NodeSpec) -> list[str]:
    """`--ros-args` for one node run alone (`ros2 run` form): name, namespace, parameters, remappings."""
    import yaml
    out = ['--ros-args', '-r', f'__node:={spec.name}']
    if spec.namespace:
        out += ['-r', f'__ns:=/{spec.namespace}']
    for key, value in spec.parameters.items():
        text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()
        out += ['-p', f'{key}:={text}']
    for src, dst in spec.remappings:
        out += ['-r', f'{src}:={dst}']
    return out
