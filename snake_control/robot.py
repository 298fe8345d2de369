"""Load and validate a robot YAML (config/robots/*.yaml) into an immutable model.

One file describes one robot: its kind (a 3D chain of alternating pitch/yaw joints, or a planar chain
of yaw joints on passive wheels), link geometry and mass, the servo bus, and every joint from tail to
head with its Dynamixel ID, limits, zero offset and direction. Every tool (gaits, driver, estimator,
URDF, MuJoCo) reads the robot through this module, so they all agree on what a joint angle means:
alpha_i = theta_{i+1} - theta_i, counter-clockwise positive about the joint axis (docs/kinematics.md).

A bad file raises ConfigError naming the file, the key path (``joints[3].id``) and the problem.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_control.dynamixel.conversion import joint_to_servo_rad, servo_to_joint_rad
from snake_control.dynamixel.models import SERVO_MODELS, ServoModel
from snake_control.paths import ConfigError, resolve_robot
from snake_control.yaml_file import parse_yaml, read_text

KINDS = ('pitch_yaw', 'planar')
AXES = ('pitch', 'yaw')
# Joint axis in its link frame (x along the body toward the head, z up when the robot lies flat).
AXIS_VECTORS = {'yaw': (0.0, 0.0, 1.0), 'pitch': (0.0, 1.0, 0.0)}
SCHEMA_VERSION = 1
BAUD_RATES = (9600, 57600, 115200, 1000000, 2000000, 3000000, 4000000, 4500000)


@dataclass(frozen=True)
class Limit:
    """The physically sensible range of one setting, inclusive, in its unit."""

    low: float
    high: float
    unit: str
    why: str

    def check(self, value: float, where: str) -> float:
        """value if finite and within [low, high]; else ValueError naming `where`."""
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise ValueError(f'{where}: must be between {self.low:g} and {self.high:g} {self.unit} '
                             f'({self.why}), got {value!r}')
        return value


# The one table of ranges. The robot YAML schema, the launch arguments (graph.py), the `snake` options and
# the nodes' parameter descriptors all read their bounds here, so a value refused in one is refused in all,
# and before any servo is touched.
LIMITS = {
    # Below 10 Hz an e-stop "within one cycle" takes 0.1 s or more; above 1 kHz one cycle is shorter than
    # a Sync Write plus Sync Read of a handful of servos at 4 Mbit/s.
    'control_rate_hz': Limit(10.0, 1000.0, 'Hz', 'control loop rate'),
    'link.length_m': Limit(0.005, 2.0, 'm', 'distance between adjacent joint axes'),
    'link.radius_m': Limit(0.002, 1.0, 'm', 'module radius'),
    'link.mass_kg': Limit(0.001, 50.0, 'kg', 'mass of one module'),
    'link.axial_weight': Limit(0.0, 1.0, '', '(axial / lateral skin friction)^2: estimator weight of no-slip '
                               'along a module'),
    'wheels.radius_m': Limit(0.001, 1.0, 'm', 'passive wheel radius'),
    'wheels.track_m': Limit(0.001, 2.0, 'm', 'distance between the two wheels of a pair'),
    'wheels.mass_kg': Limit(0.0, 10.0, 'kg', 'mass of one wheel pair'),
    # Dynamixel X-series no-load speeds are at most about 8 rad/s; 50 leaves room for other actuators.
    'velocity_limit_rad_s': Limit(0.01, 50.0, 'rad/s', 'joint velocity limit'),
    'acceleration_limit_rad_s2': Limit(0.01, 10000.0, 'rad/s^2', 'joint acceleration limit'),
    'offset_rad': Limit(-2 * math.pi, 2 * math.pi, 'rad', 'servo angle at joint zero'),
    # dynamixel_sdk builds a Protocol 2.0 packet in at most 1024 bytes; the Sync Write of 4-byte goal
    # positions to n servos takes 14 + 5 n of them, so n <= 202.
    'n_joints': Limit(2, 200, 'joints', 'servos a single Sync Write can command'),
    # An offline trajectory is sampled at the control rate: longer ones are too big to print or plot.
    'trajectory_duration_s': Limit(0.001, 3600.0, 's', 'length of a computed trajectory'),
}


def check_rate_hz(rate_hz: float, where: str) -> float:
    """A control rate option: 0 means 'the robot YAML's control_rate_hz', else within LIMITS."""
    return rate_hz if rate_hz == 0 else LIMITS['control_rate_hz'].check(float(rate_hz), where)


# The gait ticks, and publishes joint_commands, at the control rate up to this rate, above it at this
# rate: a gait's shape changes over tenths of a second, which 100 Hz samples finely, and the driver moves
# the goals between its commands along their velocities (DriverConfig.command_extrapolation_s). At 400 Hz
# a gait at the bus's rate cost four times the gait's and joint_commands' CPU, which two cores lacked.
GAIT_RATE_MAX_HZ = 100.0


def gait_rate_hz(control_rate_hz: float, requested_hz: float = 0.0) -> float:
    """The gait's tick rate (Hz) under a bus at control_rate_hz: requested_hz when given (> 0), else
    the control rate up to GAIT_RATE_MAX_HZ; never above the control rate (the bus would drop the rest).

    >>> gait_rate_hz(400.0), gait_rate_hz(50.0), gait_rate_hz(400.0, 200.0), gait_rate_hz(100.0, 400.0)
    (100.0, 50.0, 200.0, 100.0)
    """
    rate = float(requested_hz) if requested_hz > 0 else min(float(control_rate_hz), GAIT_RATE_MAX_HZ)
    return min(rate, float(control_rate_hz))


def command_extrapolation_s(control_rate_hz: float, gait_hz: float) -> float:
    """How long (s) the driver carries a command on along its velocities: one gait period when the gait
    ticks slower than the bus, else 0 (every bus cycle has a command of its own).

    >>> command_extrapolation_s(400.0, 100.0), command_extrapolation_s(100.0, 100.0)
    (0.01, 0.0)
    """
    return 1.0 / gait_hz if gait_hz < control_rate_hz else 0.0


def check_baud(baud: int, where: str) -> int:
    """A baud option: 0 means 'the robot YAML's', else one of BAUD_RATES."""
    if baud != 0 and baud not in BAUD_RATES:
        raise ValueError(f'{where}: {baud} is not a Dynamixel baud rate (0 for the robot YAML\'s, or one '
                         f'of {", ".join(map(str, BAUD_RATES))})')
    return baud


@dataclass(frozen=True)
class Joint:
    """One actuated joint. Angles in rad, the robot's convention (not the servo's)."""

    name: str
    axis: str                       # 'pitch' or 'yaw'
    servo_id: int                   # Dynamixel ID on the bus
    lower_rad: float
    upper_rad: float
    velocity_limit_rad_s: float
    acceleration_limit_rad_s2: float
    offset_rad: float               # servo angle (from its centre tick) when the joint is at zero
    direction: int                  # +1: servo turns with the joint angle; -1: against it

    @property
    def axis_vector(self) -> np.ndarray:
        return np.array(AXIS_VECTORS[self.axis])

    def servo_angle_rad(self, joint_angle_rad):
        """Servo angle from its centre tick for a joint angle."""
        return joint_to_servo_rad(joint_angle_rad, self.direction, self.offset_rad)

    def joint_angle_rad(self, servo_angle_rad):
        """Joint angle for a servo angle measured from its centre tick (inverse of servo_angle_rad)."""
        return servo_to_joint_rad(servo_angle_rad, self.direction, self.offset_rad)


@dataclass(frozen=True)
class Wheels:
    """A passive wheel pair at each link centre, axle perpendicular to the link (planar robots)."""

    radius_m: float
    track_m: float                  # distance between the two wheels of one pair
    mass_kg: float


@dataclass(frozen=True)
class Bus:
    servo: ServoModel
    port: str                       # of a one-bus robot; a robot with `buses:` names one per line
    baud: int
    control_rate_hz: float


@dataclass(frozen=True)
class BusLine:
    """One adapter's chain: its port and baud and the joints (by name, the YAML's order) on it."""

    port: str
    baud: int
    joint_names: tuple[str, ...]


@dataclass(frozen=True)
class Robot:
    """An immutable robot description. Links are numbered 0..n_joints from tail to head."""

    name: str
    kind: str
    description: str
    source: str
    link_length_m: float            # distance between adjacent joint axes (= each link's length)
    module_radius_m: float
    link_mass_kg: float
    wheels: Wheels | None
    bus: Bus
    joints: tuple[Joint, ...]
    # Pitch-yaw robots: (mu_axial / mu_lateral)^2 of the module skin on the ground it drives on, the
    # estimator's weight of the no-slip condition along each module (docs/estimation.md). 1 = no axial
    # sliding (wheels, or a skin that grips equally both ways).
    axial_weight: float = 1.0
    # The chain over one or more adapters, read in parallel; one line with every joint unless the YAML
    # has `buses:`.
    buses: tuple[BusLine, ...] = ()
    # The YAML's `calibration:`: the stem of the calibration files beside it that this robot uses (a robot
    # that differs from another only in its wiring drives the same body on the same floor); '' = its own.
    calibration_stem: str = ''

    @property
    def calibration_robot(self) -> str:
        """The robot whose calibration this one uses: the YAML's `calibration:`, else its own name."""
        return self.calibration_stem or self.name

    @property
    def n_joints(self) -> int:
        return len(self.joints)

    @property
    def bus_lines(self) -> tuple[BusLine, ...]:
        """The bus lines (one on bus.port with every joint for a robot built without them)."""
        return self.buses or (BusLine(self.bus.port, self.bus.baud, tuple(self.joint_names)),)

    def on_line(self, line: BusLine, port: str | None = None, baud: int | None = None) -> 'Robot':
        """This robot cut to the joints of one bus line, whose port and baud become its bus's."""
        import dataclasses
        names = set(line.joint_names)
        bus = dataclasses.replace(self.bus, port=port or line.port, baud=baud or line.baud)
        sub = BusLine(bus.port, bus.baud, line.joint_names)
        return dataclasses.replace(self, bus=bus, joints=tuple(j for j in self.joints if j.name in names),
                                   buses=(sub,))

    @property
    def n_links(self) -> int:
        return len(self.joints) + 1

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    @property
    def axes(self) -> list[str]:
        return [j.axis for j in self.joints]

    @property
    def axis_vectors(self) -> np.ndarray:
        """(n_joints, 3) unit joint axes in their link frames."""
        return np.array([AXIS_VECTORS[j.axis] for j in self.joints])

    @property
    def servo_ids(self) -> list[int]:
        return [j.servo_id for j in self.joints]

    @property
    def lower_rad(self) -> np.ndarray:
        return np.array([j.lower_rad for j in self.joints])

    @property
    def upper_rad(self) -> np.ndarray:
        return np.array([j.upper_rad for j in self.joints])

    @property
    def velocity_limit_rad_s(self) -> np.ndarray:
        return np.array([j.velocity_limit_rad_s for j in self.joints])

    @property
    def acceleration_limit_rad_s2(self) -> np.ndarray:
        return np.array([j.acceleration_limit_rad_s2 for j in self.joints])

    @property
    def link_lengths_m(self) -> np.ndarray:
        return np.full(self.n_links, self.link_length_m)

    @property
    def link_inertia_kg_m2(self) -> np.ndarray:
        """Principal inertia (Ixx, Iyy, Izz) of one link about its centre: a solid cylinder along x."""
        m, r, l = self.link_mass_kg, self.module_radius_m, self.link_length_m
        return np.array([m * r * r / 2.0, m * (3 * r * r + l * l) / 12.0, m * (3 * r * r + l * l) / 12.0])

    def joint_index(self, name: str) -> int:
        for i, joint in enumerate(self.joints):
            if joint.name == name:
                return i
        raise KeyError(f'robot {self.name} has no joint {name!r}')


# --- validation -------------------------------------------------------------------------------

class _Checker:
    """Reads a parsed YAML mapping, raising ConfigError with the file and key path."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, problem: str):
        raise ConfigError(self.source, key, problem)

    def mapping(self, value: Any, key: str, required: set[str], optional: set[str]) -> dict:
        if not isinstance(value, dict):
            self.fail(key or '(top level)', f'expected a mapping, got {_kind(value)}')
        for k in value:
            if not isinstance(k, str):
                self.fail(key or '(top level)', f'keys must be strings, got {k!r}')
        unknown = sorted(set(value) - required - optional)
        if unknown:
            self.fail(_join(key, unknown[0]),
                      f'unknown key (allowed here: {", ".join(sorted(required | optional))})')
        missing = sorted(required - set(value))
        if missing:
            self.fail(_join(key, missing[0]), 'missing required key')
        return value

    def number(self, value: Any, key: str, positive: bool = False, minimum: float | None = None,
               limit: str | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f'expected a number, got {_kind(value)}')
        try:
            value = float(value)
        except OverflowError:
            self.fail(key, 'must be finite, got an integer too large for a float')
        if not math.isfinite(value):
            self.fail(key, f'must be finite, got {value}')
        if limit is not None:
            bounds = LIMITS[limit]
            if not bounds.low <= value <= bounds.high:
                self.fail(key, f'must be between {bounds.low:g} and {bounds.high:g} {bounds.unit} '
                               f'({bounds.why}), got {value:g}')
        if positive and value <= 0.0:
            self.fail(key, f'must be positive, got {value}')
        if minimum is not None and value < minimum:
            self.fail(key, f'must be at least {minimum}, got {value}')
        return value

    def integer(self, value: Any, key: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f'expected an integer, got {_kind(value)}')
        if not lo <= value <= hi:
            self.fail(key, f'must be between {lo} and {hi}, got {value}')
        return value

    def string(self, value: Any, key: str, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, f'expected a non-empty string, got {_kind(value)}')
        if choices is not None and value not in choices:
            self.fail(key, f'must be one of {", ".join(choices)}, got {value!r}')
        return value


def _kind(value: Any) -> str:
    if value is None:
        return 'nothing (null)'
    if isinstance(value, (dict, list)):
        return type(value).__name__
    return f'{type(value).__name__} {value!r}'


def _join(prefix: str, key: str) -> str:
    return f'{prefix}.{key}' if prefix else key


_JOINT_FIELDS = {'lower_rad', 'upper_rad', 'velocity_limit_rad_s', 'acceleration_limit_rad_s2',
                 'offset_rad', 'direction'}


def robot_from_dict(data: Any, source: str = '<robot>') -> Robot:
    """Validate a parsed robot YAML mapping and build the Robot. Raises ConfigError."""
    c = _Checker(source)
    top = c.mapping(data, '', {'schema', 'name', 'kind', 'link', 'bus', 'joints'},
                    {'description', 'wheels', 'joint_defaults', 'buses', 'calibration'})
    if top['schema'] != SCHEMA_VERSION or isinstance(top['schema'], bool):
        c.fail('schema',
               f'unsupported schema version {top["schema"]!r} (this release reads {SCHEMA_VERSION})')
    name = c.string(top['name'], 'name')
    kind = c.string(top['kind'], 'kind', KINDS)
    description = top.get('description', '')
    if not isinstance(description, str):
        c.fail('description', f'expected a string, got {_kind(description)}')

    link = c.mapping(top['link'], 'link', {'length_m', 'radius_m', 'mass_kg'}, {'axial_weight'})
    length = c.number(link['length_m'], 'link.length_m', limit='link.length_m')
    radius = c.number(link['radius_m'], 'link.radius_m', limit='link.radius_m')
    mass = c.number(link['mass_kg'], 'link.mass_kg', limit='link.mass_kg')
    axial_weight = c.number(link.get('axial_weight', 1.0), 'link.axial_weight', limit='link.axial_weight')

    wheels = None
    if kind == 'planar':
        if top.get('wheels') is None:
            c.fail('wheels', 'a planar robot needs its passive wheels described (radius_m, track_m, mass_kg)')
        w = c.mapping(top['wheels'], 'wheels', {'radius_m', 'track_m', 'mass_kg'}, set())
        wheels = Wheels(c.number(w['radius_m'], 'wheels.radius_m', limit='wheels.radius_m'),
                        c.number(w['track_m'], 'wheels.track_m', limit='wheels.track_m'),
                        c.number(w['mass_kg'], 'wheels.mass_kg', limit='wheels.mass_kg'))
    elif top.get('wheels') is not None:
        c.fail('wheels', 'only planar robots have passive wheels')

    b = c.mapping(top['bus'], 'bus', {'servo_model', 'baud'}, {'port', 'control_rate_hz'})
    if top.get('buses') is not None and 'port' in b:
        c.fail('bus.port', 'a robot with `buses:` gives each bus its port there')
    model_name = c.string(b['servo_model'], 'bus.servo_model', tuple(SERVO_MODELS))
    baud = c.integer(b['baud'], 'bus.baud', 1, 10**8)
    if baud not in BAUD_RATES:
        c.fail('bus.baud', f'{baud} is not a Dynamixel baud rate ({", ".join(map(str, BAUD_RATES))})')
    port = c.string(b.get('port', '/dev/ttyUSB0'), 'bus.port')
    rate = c.number(b.get('control_rate_hz', 100.0), 'bus.control_rate_hz', limit='control_rate_hz')
    bus = Bus(SERVO_MODELS[model_name], port, baud, rate)

    defaults = top.get('joint_defaults') or {}
    c.mapping(defaults, 'joint_defaults', set(), _JOINT_FIELDS)

    raw_joints = top['joints']
    if not isinstance(raw_joints, list):
        c.fail('joints', f'expected a list of joints from tail to head, got {_kind(raw_joints)}')
    n_limit = LIMITS['n_joints']
    if len(raw_joints) < n_limit.low:
        c.fail('joints', f'a snake needs at least {n_limit.low:g} joints, got {len(raw_joints)}')
    if len(raw_joints) > n_limit.high:
        c.fail('joints', f'at most {n_limit.high:g} joints ({n_limit.why}), got {len(raw_joints)}')
    joints = []
    seen_names: dict[str, int] = {}
    seen_ids: dict[int, int] = {}
    for i, raw in enumerate(raw_joints):
        key = f'joints[{i}]'
        c.mapping(raw, key, {'name', 'axis', 'id'}, _JOINT_FIELDS)
        merged = {**defaults, **raw}
        missing = sorted(_JOINT_FIELDS - set(merged))
        if missing:
            c.fail(_join(key, missing[0]), 'missing (give it here or in joint_defaults)')

        def field(k, **kw):
            where = _join(key, k) if k in raw else _join('joint_defaults', k)
            return c.number(merged[k], where, **kw)

        jname = c.string(raw['name'], _join(key, 'name'))
        if jname in seen_names:
            c.fail(_join(key, 'name'), f'duplicate joint name {jname!r} (also joints[{seen_names[jname]}])')
        seen_names[jname] = i
        axis = c.string(raw['axis'], _join(key, 'axis'), AXES)
        if kind == 'planar' and axis != 'yaw':
            c.fail(_join(key, 'axis'), 'a planar robot has yaw joints only')
        sid = c.integer(raw['id'], _join(key, 'id'), 0, 252)
        if sid in seen_ids:
            c.fail(_join(key, 'id'), f'duplicate Dynamixel ID {sid} (also joints[{seen_ids[sid]}])')
        seen_ids[sid] = i
        lower, upper = field('lower_rad'), field('upper_rad')
        if not lower < upper:
            c.fail(_join(key, 'upper_rad'), f'upper limit {upper} must be above lower limit {lower}')
        direction = merged['direction']
        if direction not in (1, -1) or isinstance(direction, bool):
            where = _join(key, 'direction') if 'direction' in raw else 'joint_defaults.direction'
            c.fail(where, f'must be 1 or -1, got {direction!r}')
        joint = Joint(jname, axis, sid, lower, upper,
                      field('velocity_limit_rad_s', limit='velocity_limit_rad_s'),
                      field('acceleration_limit_rad_s2', limit='acceleration_limit_rad_s2'),
                      field('offset_rad', limit='offset_rad'), int(direction))
        servo_lo, servo_hi = sorted((joint.servo_angle_rad(lower), joint.servo_angle_rad(upper)))
        if servo_lo < bus.servo.min_position_rad or servo_hi > bus.servo.max_position_rad:
            c.fail(_join(key, 'lower_rad' if 'lower_rad' in raw else 'upper_rad'),
                   f'limits [{lower}, {upper}] rad with offset {joint.offset_rad} and direction {direction} '
                   f'put the servo at [{servo_lo:.3f}, {servo_hi:.3f}] rad, outside the {model_name} '
                   f'position range [{bus.servo.min_position_rad:.3f}, {bus.servo.max_position_rad:.3f}]')
        joints.append(joint)

    lines = _bus_lines(c, top.get('buses'), bus, [j.name for j in joints])
    calibration = top.get('calibration', '')
    if not isinstance(calibration, str) or (calibration and not re.fullmatch(r'[A-Za-z0-9_.-]+', calibration)):
        c.fail('calibration', f'expected the name of a robot YAML beside this one whose calibration files it '
                              f'shares (like pitch_yaw_32), got {calibration!r}'[:200])
    return Robot(name, kind, description, source, length, radius, mass, wheels, bus, tuple(joints),
                 axial_weight, lines, calibration)


def _bus_lines(c: _Checker, raw: Any, bus: Bus, names: list[str]) -> tuple[BusLine, ...]:
    """The `buses:` list: each line's port, baud (default bus.baud) and joints, given as a list of names
    or as ``first..last`` (inclusive, in the joints' order); every joint on exactly one line."""
    if raw is None:
        return (BusLine(bus.port, bus.baud, tuple(names)),)
    if not isinstance(raw, list) or not raw:
        c.fail('buses', f'expected a list of buses (port, joints, optional baud), got {_kind(raw)}')
    where_joint: dict[str, int] = {}
    ports: dict[str, int] = {}
    lines = []
    for i, item in enumerate(raw):
        key = f'buses[{i}]'
        m = c.mapping(item, key, {'port', 'joints'}, {'baud'})
        port = c.string(m['port'], _join(key, 'port'))
        if port in ports:
            c.fail(_join(key, 'port'), f'{port!r} is also buses[{ports[port]}].port')
        ports[port] = i
        baud = c.integer(m.get('baud', bus.baud), _join(key, 'baud'), 1, 10**8)
        if baud not in BAUD_RATES:
            c.fail(_join(key, 'baud'), f'{baud} is not a Dynamixel baud rate ({", ".join(map(str, BAUD_RATES))})')
        jkey = _join(key, 'joints')
        spec = m['joints']
        if isinstance(spec, str) and '..' in spec:
            first, _, last = (w.strip() for w in spec.partition('..'))
            for n in (first, last):
                if n not in names:
                    c.fail(jkey, f'unknown joint {n!r} in {spec!r}')
            a, b = names.index(first), names.index(last)
            if a > b:
                c.fail(jkey, f'{spec!r}: {first} comes after {last} in joints')
            chosen = names[a:b + 1]
        elif isinstance(spec, list) and spec:
            chosen = []
            for n in spec:
                if not isinstance(n, str) or n not in names:
                    c.fail(jkey, f'unknown joint {n!r}')
                chosen.append(n)
        else:
            c.fail(jkey, f'expected a list of joint names or FIRST..LAST, got {spec!r}')
        for n in chosen:
            if n in where_joint:
                c.fail(jkey, f'{n} is also on buses[{where_joint[n]}]')
            where_joint[n] = i
        lines.append(BusLine(port, baud, tuple(n for n in names if n in set(chosen))))
    left = [n for n in names if n not in where_joint]
    if left:
        c.fail('buses', f'joint(s) on no bus: {", ".join(left[:5])}{" ..." if len(left) > 5 else ""}')
    return tuple(lines)


def joint_index(names, joint_names) -> list[int]:
    """Where each of joint_names sits in names (a message's or a file's order); ValueError names the
    missing joints.

    >>> joint_index(['joint_2', 'joint_1'], ['joint_1', 'joint_2'])
    [1, 0]
    """
    where = {n: i for i, n in enumerate(names)}
    missing = [n for n in joint_names if n not in where]
    if missing:
        raise ValueError(f'lacks joints {missing}')
    return [where[n] for n in joint_names]


def reorder_joints(names, values, joint_names) -> np.ndarray:
    """Values of a message (names, values) in the robot's joint order; ValueError names missing joints."""
    if len(names) != len(values):
        raise ValueError(f'joint names ({len(names)}) and values ({len(values)}) differ in length')
    if names == joint_names:        # the driver's own order, every message: nothing to look up
        return np.array(values, dtype=float)
    try:
        index = joint_index(names, joint_names)
    except ValueError as exc:
        raise ValueError(f'joint_states {exc}') from None
    return np.array([values[i] for i in index], dtype=float)


def load_robot(name_or_path: str | Path) -> Robot:
    """Load a robot by shipped name (``pitch_yaw_32``) or YAML path, validated."""
    path = resolve_robot(name_or_path)
    return robot_from_yaml(read_text(path, ConfigError), str(path))


def robot_from_yaml(text: str, source: str = '<robot>') -> Robot:
    """Parse and validate robot YAML text."""
    return robot_from_dict(parse_yaml(text, source, ConfigError), source)
