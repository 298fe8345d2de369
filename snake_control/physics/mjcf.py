"""An MJCF (MuJoCo XML) model of a snake robot, built in a loop from its robot YAML.

The model follows snake_control.kinematics.chain exactly: bodies ``link_0`` (tail) .. ``link_n`` (head),
each body frame at its link's centre with x toward the head; joint j (named as in the YAML) sits at the
head end of link j and turns link j + 1 about the link's z axis (yaw) or y axis (pitch),
counter-clockwise positive. ``link_0`` carries the free joint, so the kinematic tree is the chain itself.

Two kinds of ground contact:

- planar robots ride on real passive wheels: a pair of hinged wheels at every link centre, axle along the
  link's y axis (perpendicular to the link), ``track_m`` apart. The wheels are the only geoms that touch
  the floor. Rolling costs nothing (hinge), sliding sideways is resisted by Coulomb friction (condim 3,
  no torsional or rolling friction), which is the no-lateral-slip constraint of docs/estimation.md.
- pitch-yaw robots lie on the floor as capsules (radius = module radius, spanning joint to joint) with
  anisotropic Coulomb friction: low along the module axis, high across it. Hirose's ACM snakes and seed
  004's robot get this from passive wheels or skin; without it a planar serpentine gait cannot propel
  itself at all. MuJoCo's capsule-plane contact frame has its first tangent along the capsule axis, so a
  ``<pair>`` friction (axial, lateral) is exactly this anisotropy. Set them equal for an isotropic skin.

Every joint has a position actuator modelling a Dynamixel X-series servo in position mode with its
default gains: stiffness from the Position P Gain register (the PWM saturates at full voltage for
885 / (KPP / 128) ticks of error, and full voltage at standstill is the stall torque), damping from the
DC motor's torque-speed line (stall torque / no-load speed, the back-EMF), the rotor's reflected inertia
as joint armature, and the force limited to the stall torque.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from snake_control.dynamixel.models import TICKS_PER_TURN
from snake_control.robot import Robot, load_robot

# Dynamixel X-series defaults: Position P Gain register 800, 885 = 100 % PWM.
DEFAULT_POSITION_P_GAIN = 800
PWM_LIMIT = 885


@dataclass(frozen=True)
class PhysicsOptions:
    """Tunable physical parameters of the MuJoCo world (SI units).

    timestep_s: integration step. floor_friction: wheel/floor Coulomb coefficient (planar robots).
    axial_friction / lateral_friction: module/floor coefficients along and across each module's axis
    (pitch-yaw robots). position_p_gain: the servo's Position P Gain register value.
    cone / impratio: MuJoCo's friction cone and the friction-to-normal impedance ratio. Pyramidal cones
    cost a third to a seventh of elliptic ones for a rolling 32-link snake, which is what keeps the
    running graph faster than real time on two cores; but they propel some gaits where Coulomb friction
    does not (vertical undulation 54 % faster, an isotropic-friction undulating body forward instead of
    back), so validation runs on the elliptic cone (docs/physics.md).
    armature_kg_m2: the servo rotor's inertia reflected through its gearbox (about 8e-8 kg m^2 x 353.5^2
    for an XM430-W350). gravity_m_s2: set 0 to check kinematics without loads.
    contact_timeconst_s: the time constant of the floor contacts' soft constraints (MuJoCo's solref). A
    contact that should hold slides at a speed that grows with it: rolling on pitch_yaw_32 travels 1.12
    times its modules' radius x roll rate at MuJoCo's default 0.02 s, 1.02 at 0.005 s, the world's default
    (docs/physics.md, "Soft contacts slide"). MuJoCo needs at least two timesteps.
    imu_link: the link carrying the IMU (gyro and accelerometer at its centre, its axes), negative from
    the head (-1: the head, where a real snake carries its camera and IMU). The readings
    (SnakeWorld.imu_reading) get white noise of the given standard deviation per reading and a constant
    bias per axis: the defaults are a consumer MEMS part before calibration (a gyro bias of a few
    tenths of a degree per second, 0.3 deg/s on z); the noise is drawn from imu_seed.
    """

    timestep_s: float = 0.002
    floor_friction: float = 1.0
    axial_friction: float = 0.15
    lateral_friction: float = 0.9
    position_p_gain: float = DEFAULT_POSITION_P_GAIN
    armature_kg_m2: float = 0.01
    gravity_m_s2: float = 9.81
    contact_timeconst_s: float = 0.005
    cone: str = 'pyramidal'
    impratio: float = 1.0
    imu_link: int = -1
    imu_gyro_noise_rad_s: float = 0.002
    imu_gyro_bias_rad_s: tuple = (0.004, -0.003, 0.005)
    imu_accel_noise_m_s2: float = 0.03
    imu_accel_bias_m_s2: tuple = (0.05, -0.04, 0.03)
    imu_seed: int = 0

    def validate(self) -> 'PhysicsOptions':
        for name in ('timestep_s', 'floor_friction', 'axial_friction', 'lateral_friction', 'position_p_gain',
                     'armature_kg_m2'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f'PhysicsOptions.{name} must be a positive finite number, got {value!r}')
        if self.timestep_s > 0.01:
            raise ValueError(f'PhysicsOptions.timestep_s {self.timestep_s} s is too coarse for servo '
                             f'dynamics (at most 0.01 s)')
        if self.cone not in ('pyramidal', 'elliptic'):
            raise ValueError(f"PhysicsOptions.cone must be 'pyramidal' or 'elliptic', got {self.cone!r}")
        if not (isinstance(self.contact_timeconst_s, (int, float)) and math.isfinite(self.contact_timeconst_s)
                and self.contact_timeconst_s >= 2 * self.timestep_s):
            # MuJoCo would quietly take two timesteps instead.
            raise ValueError(f'PhysicsOptions.contact_timeconst_s must be at least two timesteps '
                             f'({2 * self.timestep_s} s), got {self.contact_timeconst_s!r}')
        if not (math.isfinite(self.impratio) and self.impratio >= 1.0):
            raise ValueError(f'PhysicsOptions.impratio must be >= 1, got {self.impratio!r}')
        for name in ('imu_gyro_noise_rad_s', 'imu_accel_noise_m_s2'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f'PhysicsOptions.{name} must be a finite number >= 0, got {value!r}')
        for name in ('imu_gyro_bias_rad_s', 'imu_accel_bias_m_s2'):
            value = getattr(self, name)
            if len(value) != 3 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in value):
                raise ValueError(f'PhysicsOptions.{name} must be three finite numbers (x, y, z), '
                                 f'got {value!r}')
        if not (math.isfinite(self.gravity_m_s2) and self.gravity_m_s2 >= 0):
            raise ValueError(f'PhysicsOptions.gravity_m_s2 must be >= 0, got {self.gravity_m_s2!r}')
        return self


def matching_axial_weight(options=None) -> float:
    """The estimator's axial_weight that matches the world's anisotropic module friction.

    The estimator minimises squared slip velocities, axial ones weighted by axial_weight; weighting
    each direction by its friction coefficient squared, (mu_axial / mu_lateral)^2, makes that cost a
    quadratic stand-in for the friction the floor applies. With 1 (no axial sliding) the estimator reads
    the axial sliding that propels serpentine as slip and sees almost no motion; with 0 it ignores the
    axial friction drag and overestimates serpentine speed by about a fifth.
    """
    options = options or PhysicsOptions()
    return (options.axial_friction / options.lateral_friction) ** 2


def servo_gains(robot: Robot, options: PhysicsOptions | None = None) -> tuple[float, float]:
    """(stiffness N m/rad, damping N m s/rad) of the robot's servo in position mode.

    Example: an XM430-W350 (4.1 N m stall, 4.82 rad/s no load) with P gain 800 gives
    4.1 * (800 / 128) * (4096 / 2 pi) / 885 = 18.9 N m/rad and 4.1 / 4.82 = 0.85 N m s/rad.
    """
    options = options or PhysicsOptions()
    servo = robot.bus.servo
    ticks_per_rad = TICKS_PER_TURN / (2.0 * math.pi)
    kp = servo.stall_torque_nm * (options.position_p_gain / 128.0) * ticks_per_rad / PWM_LIMIT
    return kp, servo.stall_torque_nm / servo.no_load_speed_rad_s


IMU_SITE, IMU_GYRO, IMU_ACCEL = 'imu', 'imu_gyro', 'imu_accel'


def imu_link_index(robot: Robot, options: PhysicsOptions | None = None) -> int:
    """The link (0 = tail .. n_links - 1 = head) that carries the IMU: options.imu_link, negative
    counting from the head (-1, the default, is the head)."""
    k = (options or PhysicsOptions()).imu_link
    index = k + robot.n_links if k < 0 else k
    if not 0 <= index < robot.n_links:
        raise ValueError(f'PhysicsOptions.imu_link {k} is not a link of {robot.name} '
                         f'(0..{robot.n_links - 1}, or -1..-{robot.n_links} from the head)')
    return index


def link_name(k: int) -> str:
    return f'link_{k}'


def actuator_name(joint_name: str) -> str:
    return f'servo_{joint_name}'


def wheel_names(k: int) -> tuple[str, str]:
    """Body names of link k's left and right wheels (their hinge joints and geoms share the names)."""
    return f'wheel_{k}_left', f'wheel_{k}_right'


def _f(*values) -> str:
    return ' '.join(repr(float(v)) for v in values)


def build_mjcf(robot: Robot | str, options: PhysicsOptions | None = None) -> str:
    """MJCF XML text of a robot (a Robot or a shipped name / YAML path) lying straight at the origin.

    Names: bodies link_0..link_n, joints as in the YAML, actuators servo_<joint>, planar robots' wheel
    bodies/joints/geoms wheel_<k>_left|right, link geoms link_<k>, floor geom floor.
    Raises ValueError for a robot that cannot be built (a planar robot without wheels, wheels that would
    not reach the floor clear of each other, fewer than 2 links) or bad options.
    """
    if isinstance(robot, str):
        robot = load_robot(robot)
    if not isinstance(robot, Robot):
        raise ValueError(f'robot must be a snake_control.robot.Robot or a robot name, '
                         f'got {type(robot).__name__}')
    options = (options or PhysicsOptions()).validate()
    n = robot.n_joints
    if n < 1:
        raise ValueError(f'robot {robot.name}: a snake needs at least one joint (two links)')
    length, radius = robot.link_length_m, robot.module_radius_m
    planar = robot.kind == 'planar'
    if planar:
        if robot.wheels is None:
            raise ValueError(f'robot {robot.name}: a planar robot needs wheels to be simulated')
        if robot.wheels.track_m <= 0 or robot.wheels.radius_m <= 0:
            raise ValueError(f'robot {robot.name}: wheels need a positive radius and track')
        if 2 * robot.wheels.radius_m >= length:
            # Wheels of neighbouring links would overlap when the chain bends.
            raise ValueError(f'robot {robot.name}: wheel diameter {2 * robot.wheels.radius_m} m must be '
                             f'shorter than the link length {length} m')
    kp, kd = servo_gains(robot, options)
    stall = robot.bus.servo.stall_torque_nm
    inertia = robot.link_inertia_kg_m2

    root = ET.Element('mujoco', model=f'snake_{robot.name}')
    ET.SubElement(root, 'compiler', angle='radian', autolimits='true')
    # implicitfast integrates the servo damping stably.
    ET.SubElement(root, 'option', timestep=_f(options.timestep_s), integrator='implicitfast',
                  cone=options.cone, impratio=_f(options.impratio), gravity=_f(0, 0, -options.gravity_m_s2))
    ET.SubElement(root, 'size', memory='8M')
    visual = ET.SubElement(root, 'visual')
    ET.SubElement(visual, 'global', offwidth='1280', offheight='720')
    asset = ET.SubElement(root, 'asset')
    ET.SubElement(asset, 'texture', name='grid', type='2d', builtin='checker', width='256', height='256',
                  rgb1='.3 .35 .4', rgb2='.25 .3 .35')
    ET.SubElement(asset, 'material', name='grid', texture='grid', texrepeat='8 8', reflectance='0.1')
    default = ET.SubElement(root, 'default')
    ET.SubElement(default, 'joint', armature=_f(options.armature_kg_m2), damping=_f(kd))
    # Only explicit contact pairs (and wheels) collide: links never collide with each other or, for
    # planar robots, with the floor (their bodies ride above the axles).
    ET.SubElement(default, 'geom', contype='0', conaffinity='0')

    world = ET.SubElement(root, 'worldbody')
    ET.SubElement(world, 'light', pos='0 0 4', dir='0 0 -1', directional='true')
    solref = _f(options.contact_timeconst_s, 1.0)
    ET.SubElement(world, 'geom', name='floor', type='plane', size='0 0 0.05', material='grid',
                  friction=_f(options.floor_friction, 0.0, 0.0), conaffinity='1', condim='3', solref=solref)

    height = robot.wheels.radius_m if planar else radius
    parent = world
    imu_link = imu_link_index(robot, options)
    for k in range(n + 1):
        pos = (0.0, 0.0, height) if k == 0 else (length, 0.0, 0.0)  # centre to centre along x
        body = ET.SubElement(parent, 'body', name=link_name(k), pos=_f(*pos))
        if k == 0:
            ET.SubElement(body, 'freejoint', name='base')
        else:
            joint = robot.joints[k - 1]
            axis = robot.axis_vectors[k - 1]
            ET.SubElement(body, 'joint', name=joint.name, type='hinge', pos=_f(-length / 2, 0, 0),
                          axis=_f(*axis), range=_f(joint.lower_rad, joint.upper_rad))
        ET.SubElement(body, 'inertial', pos='0 0 0', mass=_f(robot.link_mass_kg), diaginertia=_f(*inertia))
        if planar:
            # The link's body rides above the axle; it is drawn but never touches anything.
            ET.SubElement(body, 'geom', name=link_name(k), type='box', mass='0', rgba='.2 .5 .8 1',
                          size=_f(0.45 * length, 0.3 * robot.wheels.track_m, 0.5 * radius),
                          pos=_f(0, 0, radius))
            for side, name in zip((1.0, -1.0), wheel_names(k)):
                wheel = ET.SubElement(body, 'body', name=name, pos=_f(0, side * robot.wheels.track_m / 2, 0))
                ET.SubElement(wheel, 'joint', name=name, type='hinge', axis='0 1 0', armature='0',
                              damping='1e-5')
                # Cylinder axis along the axle; half-width 1/6 of the radius keeps it a thin wheel.
                ET.SubElement(wheel, 'geom', name=name, type='cylinder', zaxis='0 1 0',
                              size=_f(robot.wheels.radius_m, robot.wheels.radius_m / 6),
                              mass=_f(robot.wheels.mass_kg), contype='1', conaffinity='0', condim='3',
                              friction=_f(options.floor_friction, 0.0, 0.0), solref=solref, rgba='.1 .1 .1 1')
        else:
            ET.SubElement(body, 'geom', name=link_name(k), type='capsule', size=_f(radius), mass='0',
                          fromto=_f(-length / 2, 0, 0, length / 2, 0, 0),
                          rgba='.85 .45 .1 1' if k % 2 else '.2 .2 .25 1')
        ET.SubElement(body, 'site', name=f'{link_name(k)}_centre', size='0.005')
        if k == imu_link:
            # The IMU sits at the link centre, axes along the link frame (x toward the head).
            ET.SubElement(body, 'site', name=IMU_SITE, size='0.004')
        parent = body

    if not planar:
        contact = ET.SubElement(root, 'contact')
        for k in range(n + 1):
            # Capsule-plane contacts put the first tangent along the capsule axis.
            ET.SubElement(contact, 'pair', geom1=link_name(k), geom2='floor', condim='3', solref=solref,
                          friction=_f(options.axial_friction, options.lateral_friction, 0.005, 1e-4, 1e-4))

    sensors = ET.SubElement(root, 'sensor')
    # Noise-free here: snake_control.physics.world.SnakeWorld adds the configured noise and bias.
    ET.SubElement(sensors, 'gyro', name=IMU_GYRO, site=IMU_SITE)
    ET.SubElement(sensors, 'accelerometer', name=IMU_ACCEL, site=IMU_SITE)

    actuators = ET.SubElement(root, 'actuator')
    for joint in robot.joints:
        ET.SubElement(actuators, 'position', name=actuator_name(joint.name), joint=joint.name,
                      kp=_f(kp), ctrlrange=_f(joint.lower_rad, joint.upper_rad), forcerange=_f(-stall, stall))

    ET.indent(root)
    return ET.tostring(root, encoding='unicode')


def resting_height_m(robot: Robot) -> float:
    """Height of link frames above the floor when the robot lies flat (axle height or module radius)."""
    return robot.wheels.radius_m if robot.kind == 'planar' else robot.module_radius_m

