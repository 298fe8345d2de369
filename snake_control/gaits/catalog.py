"""The gait catalogue: every gait's parameters (units, defaults, meaning) and its joint-angle shape.

A gait is a shape q(phase) (n,) rad that repeats (or, for AEH-sidewinding, rolls on) as the phase
(rad) advances; the scheduler advances the phase from the commanded speed. Three families:

- 'mcc': seed 004's main characteristic curves, kappa = A1 + B1 sin(w1 s + phi1),
  tau = A2 + B2 sin(w2 s + phi2), fitted with snake_control.gaits.backbone. Motion moves the shape
  along the body the way the paper drives each gait: phi1 (serpentine), psi0 (rolling, helix
  rolling), s0 (S-crawler, AEH-sidewinding).
- 'serpenoid': joint-space compound serpenoid (docs/gaits.md), with pitch and yaw parameters taken
  from each joint's axis in the robot YAML (never from even/odd index):
  q_i = beta_axis + A_axis g_axis(x_i) sin(w_s i + phase + delta_axis), delta_pitch = 0,
  delta_yaw = delta, x_i = i / (n - 1) from tail to head. The CMU form is sin(w_S n - w_T t) with n
  counted from the head (CMU); our joints count from the tail, so a positive phase rate sends the
  wave from head to tail (forward motion).
- 'wheeled': the yaw-only passive-wheel member q_i = A sin(phase + i delta) + turn_offset (seed 000).

Parameter defaults may depend on the robot (the paper gives lengths in units of l, the joint spacing).

Direction of travel (checked in the MuJoCo world by test/test_gait_direction.py, cmd_vel semantics):
a positive forward command moves serpentine, lateral and vertical undulation and the wheeled gaits
toward the head; a positive lateral command moves sidewinding, conical and AEH-sidewinding, rolling,
serpenoid rolling and helix rolling to the robot's left (+y); a positive angular.z turns serpentine,
the undulations, the wheeled gaits and turn_in_place counter-clockwise. Two defaults carry the sign:
AEH-sidewinding's helix is left-handed (a < 0; a right-handed one sidewinds the other way) and
serpenoid rolling lags yaw behind pitch (delta = -pi/2, the rotation sense of MCC rolling).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from snake_control.gaits import backbone

PI = math.pi


@dataclass(frozen=True)
class Param:
    """One gait parameter. default: a number, or a function of the Robot (default_text says how)."""

    name: str
    unit: str
    default: float | Callable
    meaning: str
    lower: float = -math.inf
    upper: float = math.inf
    default_text: str = ''

    def resolve(self, robot) -> float:
        return float(self.default(robot)) if callable(self.default) else float(self.default)

    def describe_default(self) -> str:
        return self.default_text or f'{self.default:g}'


@dataclass(frozen=True)
class GaitSpec:
    """A gait: its family, which robot kinds it fits, what drives its phase and how it turns.

    drive: which command component advances the phase: 'forward' (cmd_vel linear.x, m/s),
    'lateral' (linear.y, m/s), 'turn' (angular.z, rad/s) or None (a static shape). The phase rate is
    2 pi command / stride (the stride parameter: distance, or angle for 'turn', per gait cycle).
    turn_param: the parameter that the angular.z command offsets (by turn_gain * angular.z, at most
    turn_max in magnitude), or None when the gait does not turn.
    mirror_negative: a negative drive command runs the gait's mirror image (yaw joints negated: the
    reflection through the body's vertical plane) with the phase advancing, instead of the gait with
    its phase running backwards. Run backwards, a gait that relies on friction is not its own mirror:
    turn_in_place turned right while drifting 0.15 m/rad toward its tail, against 0.045 m/rad left.
    max_phase_rate_rad_s: a cap on the phase rate (rad/s) of a gait whose joint speeds do not bound it
    (the scheduler also caps it at 80 % of the joint velocity limits); max_phase_rate_why: what sets it, as
    `snake gait --list` states it.
    """

    name: str
    family: str
    kinds: tuple
    drive: str | None
    params: tuple
    description: str
    turn_param: str | None = None
    turn_gain: float = 0.0
    turn_max: float = 0.0
    mirror_negative: bool = False
    max_phase_rate_rad_s: float = math.inf
    max_phase_rate_why: str = "the gait's own cap"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def param_names(self):
        return tuple(p.name for p in self.params)


def _l(factor):
    return lambda robot: factor * robot.link_length_m


def _stride(unit='m', default=None, text=''):
    meaning = ('distance travelled per gait cycle: the phase advances 2 pi command / stride'
               if unit == 'm' else 'body rotation per gait cycle: the phase advances 2 pi angular.z / stride')
    return Param('stride', unit, default, meaning, 1e-6, 1e6, text)


_PSI0 = Param('psi0', 'rad', 0.0, 'Bishop angle at s = 0: rolls the whole shape about the body axis',
              -10 * PI, 10 * PI)

# --- MCC gaits (seed 004) ------------------------------------------------------------------------
#
# Where the seed's extracted text and our derivation disagree (derived and checked in the tests):
# - Pitch sign: with our FK theta_pitch = -int kappa sin psi (backbone module docstring), so the
#   seed's serpentine theta_p = 2 A1 L0 sin psi0 (+/-) (2 B1/w1) sin(w1 L0) sin psi0 sin(w1 s + phi1)
#   becomes -sin(psi0) (2 A1 L0 + (2 B1/w1) sin(w1 L0) sin(w1 s + phi1)), both terms with one sign,
#   and its helix theta_p = (2 A1/A2) sin(A2 L0) sin(A2 s + psi0) changes sign.
# - S-crawler: the printed condition sin(w1 lambda L/4 + phi1) = 1 would put the curvature MAXIMUM in
#   the middle of the straight part; the paper's own lambda = 0 result sin(4 pi s/L - pi/2) and its
#   B1 = (4 pi/L) lambda pi / sin(lambda pi) both need = -1, i.e. phi1 = -pi/2 - lambda pi. With
#   phi2 = -lambda pi/2 these satisfy the paper's integral conditions (test_gait_catalog).
# - AEH: the lift of the plane curve (perimeter L) with dz/ds' = a has Ls = sqrt(1 + a^2) L, and a
#   cylindrical generalised helix has kappa = kappa_plane / (1 + a^2), tau = a kappa; hence
#   kappa = (2 pi/Ls)(1 + eta sin(4 pi s/Ls + phi1)) / sqrt(1 + a^2). The printed Frenet equations
#   lost two minus signs (de2/ds = -kappa e1 + tau e3, de3/ds = -tau e2), and the special cases are
#   a = 0: the plane approximate ellipse (a circle if eta = 0); eta = 0, a != 0: a circular helix;
#   a -> infinity: a straight line.

SERPENTINE = GaitSpec(
    'serpentine', 'mcc', ('pitch_yaw',), 'forward',
    (Param('A1', '1/m', 0.0, 'mean curvature: turning (A1 = 0 goes straight)', -20, 20),
     Param('B1', '1/m', lambda r: 0.6 * 2 * PI / (16 * r.link_length_m),
           'curvature amplitude; Hirose serpenoid B1 = alpha b with winding angle alpha', -100, 100,
           '0.6 w1 (winding angle 0.6 rad)'),
     Param('w1', 'rad/m', lambda r: 2 * PI / (16 * r.link_length_m),
            'spatial frequency of the curvature wave',
           0, 1000, '2 pi / (16 l)'),
     Param('phi1', 'rad', 0.0, 'phase of the curvature wave (advanced by the gait phase)', -10 * PI, 10 * PI),
     _PSI0,
     _stride('m', _l(8.0), '8 l')),
    'seed 004 3.1.1: kappa = A1 + B1 sin(w1 s + phi1), tau = 0; moves by advancing phi1, turns through A1',
    turn_param='A1', turn_gain=1.0, turn_max=3.0)

# Rolling (docs/gaits.md, "Rolling: which side leads, and the conical arc"). psi0 = pi lays the arc with
# its convex side toward +y, the way a positive lateral command rolls it: rolled toward its concave side
# (psi0 = 0) the arc needs more torque than the servos have, its roll slips behind the phase and it
# scatters ten times what the acceptance allows. A1 = 0.25 1/m (seed 004's 1 / (12 l) is 1.19): the
# flatter the arc the less it veers, and its veer and stride hardly change with the phase rate.
# kappa_taper grades the curvature along the body (a conical arc): it steers, and 0.5 1/m cancels the
# veer. The phase rate is capped at 6 rad/s: faster, the servos lag by most of the shape and the motion
# scatters (8 rad/s: +-0.013 m and +-0.02 rad per cycle).
ROLLING = GaitSpec(
    'rolling', 'mcc', ('pitch_yaw',), 'lateral',
    (Param('A1', '1/m', 0.25, 'arc curvature at the middle of the body', -50, 50),
     Param('kappa_taper', '1/m', 0.5, 'curvature taper: kappa = A1 + kappa_taper (2x - 1), x = 0 tail .. 1 head '
           '(a conical arc, which rolls along a circle; the turning parameter)', -5, 5),
     Param('psi0', 'rad', PI, 'Bishop angle at s = 0: pi lays the arc convex side first for a positive lateral '
           'command (0 rolls it toward its concave side)', -10 * PI, 10 * PI),
     _stride('m', lambda r: 2 * PI * r.module_radius_m, '2 pi module radius')),
    'seed 004 3.1.2: an arc, kappa = A1 + kappa_taper (2x - 1), tau = 0, rolled by advancing psi0 (psi0 rate = '
    'lateral speed / module radius with the default stride); turns through kappa_taper; a negative lateral '
    'command rolls the mirror image, convex side first', turn_param='kappa_taper', turn_gain=20.0, turn_max=1.0,
    mirror_negative=True, max_phase_rate_rad_s=6.0,
    max_phase_rate_why='faster, the servos lag by most of the shape')

HELIX_ROLLING = GaitSpec(
    'helix_rolling', 'mcc', ('pitch_yaw',), 'lateral',
    (Param('A1', '1/m', 7.5, 'helix curvature r / (r^2 + p^2) (default: radius 0.12 m, pitch 0.04 m/rad)',
            -50, 50),
     Param('A2', '1/m', 2.5, 'helix torsion p / (r^2 + p^2)', -50, 50),
     _PSI0,
     _stride('m', lambda r: 2 * PI * (0.12 + r.module_radius_m), '2 pi (0.12 m + module radius)')),
    'seed 004 3.1.3: a helix, kappa = A1, tau = A2, rolled by advancing psi0 (pipe and pole climbing)')

S_CRAWLER = GaitSpec(
    's_crawler', 'mcc', ('pitch_yaw',), 'forward',
    (Param('L', 'm', _l(26.0), 'length of one crawler cycle of the curve', 1e-3, 1e3, '26 l'),
     # B1 = 2, B2 = 1 (pi/L): the seed's 4.8 and 2.5 bend 16 joints of pitch_yaw_32 past their limits
     # and ask 135 % of the stall torque.
     Param('B1_pi_per_L', 'pi/L', 2.0, 'curvature amplitude B1 in units of pi/L (used when lambda = 0)',
            -100, 100),
     Param('B2_pi_per_L', 'pi/L', 1.0, 'torsion amplitude B2 in units of pi/L', -100, 100),
     Param('lam', '1', 0.0, 'share of the cycle that is (nearly) straight, 0 <= lambda < 1; lambda > 0 '
           'sets B1 = (4 pi / L) lambda pi / sin(lambda pi)', 0.0, 0.95),
     _PSI0,
     _stride('m', _l(13.0), '13 l (L / 2)')),
    'seed 004 3.2: kappa = 4 pi/L + B1 sin(4 pi s/L - pi/2 - lambda pi), '
     'tau = B2 sin(2 pi s/L - lambda pi/2); '
    'moves by sliding the body along the curve (s0)')

AEH_SIDEWINDING = GaitSpec(
    'aeh_sidewinding', 'mcc', ('pitch_yaw',), 'lateral',
    # a = -0.5, eta = 0.8: the seed's a = -1, eta = 0.95 lift longer arches, 110 % of the stall torque.
    (Param('a', '1', -0.5, 'helix slope dz/ds of the approximate elliptic helix (tau = a kappa); its sign is '
           'the handedness, which sets the direction of travel: a < 0 sidewinds to the left (+y) for a '
           'positive lateral command', -20, 20),
     Param('eta', '1', 0.8, 'ellipse adjustment 0..1 (0: circular helix)', 0.0, 1.0),
     Param('Ls', 'm', _l(14.0), 'curve length of one turn', 1e-3, 1e3, '14 l'),
     Param('phi1', 'rad', 0.0, 'phase of the curvature modulation', -10 * PI, 10 * PI),
     _PSI0,
     Param('taper', '1', 0.0, 'joint-angle gradient along the body: angles x (1 + taper (1/2 - x)), x = 0 '
           'tail .. 1 head, a conical tread; a positive taper bends the tail more and steers the body left '
           '(counter-clockwise)', -1.0, 1.0),
     # Measured in the MuJoCo world (test_gait_direction): the body moves about 0.7 Ls per cycle.
     _stride('m', _l(10.0), '10 l (about 0.7 Ls, measured)')),
    'seed 004 4: kappa = (2 pi / Ls)(1 + eta sin(4 pi s / Ls + phi1)) / sqrt(1 + a^2), tau = a kappa '
    '(one full turn of the projected ellipse per Ls); moves by sliding the body along the curve (s0); turns '
    'through the taper of its joint angles (gently: about 0.16 rad per metre at taper 0.6)',
    # From rest in MuJoCo a taper of 0.4 turns about 0.1 rad per 0.94 m cycle (docs/gaits.md,
    # "AEH-sidewinding steers by a taper"): 30 x angular.z is that turn at 0.1 m/s sideways.
    turn_param='taper', turn_gain=30.0, turn_max=0.6)

# --- joint-space compound serpenoid gaits (docs/gaits.md) --------------------------------------------


def _serp_params(a_yaw, a_pitch, w_s, delta, taper=0.0, stride=None, stride_unit='m', beta_yaw=0.0):
    return (Param('A_yaw', 'rad', a_yaw, 'yaw joint amplitude', -PI / 2, PI / 2),
            Param('A_pitch', 'rad', a_pitch, 'pitch joint amplitude', -PI / 2, PI / 2),
            Param('w_s', 'rad/joint', w_s, 'spatial frequency: phase step from one joint to the next',
                  -PI, PI),
            Param('delta', 'rad', delta, 'phase of the yaw wave relative to the pitch wave',
                  -10 * PI, 10 * PI),
            Param('beta_yaw', 'rad', beta_yaw, 'yaw offset (bends the body: turning)', -PI / 2, PI / 2),
            Param('beta_pitch', 'rad', 0.0, 'pitch offset', -PI / 2, PI / 2),
            Param('taper', '1', taper,
                  'amplitude gradient along the body: A (1 + taper (x - 1/2)), x = 0 tail '
                  '.. 1 head (conical sidewinding)', -2.0, 2.0),
            stride if stride is not None else _stride(stride_unit, _l(6.0), '6 l'))


LATERAL_UNDULATION = GaitSpec(
    'lateral_undulation', 'serpenoid', ('pitch_yaw', 'planar'), 'forward',
    _serp_params(0.6, 0.0, 0.4, 0.0, stride=_stride('m', _l(8.0), '8 l')),
    'compound serpenoid, yaw wave only (A_pitch = 0); turns through beta_yaw',
    turn_param='beta_yaw', turn_gain=0.2, turn_max=0.35)

VERTICAL_UNDULATION = GaitSpec(
    'vertical_undulation', 'serpenoid', ('pitch_yaw',), 'forward',
    # w_s = 0.8: a lifted half-wave of four modules; at 0.4 the joints held eight and asked twice the
    # stall torque (dynamics.gait_check).
    _serp_params(0.0, 0.5, 0.8, 0.0, stride=_stride('m', _l(4.0), '4 l')),
    'compound serpenoid, pitch wave only (linear progression); steers through beta_yaw',
    turn_param='beta_yaw', turn_gain=0.2, turn_max=0.35)

# Sidewinding: the vertical wave a quarter period behind the horizontal one (delta = pi/2) lays the
# body down where the horizontal wave crosses zero, a tread on an elliptic helix like AEH-sidewinding,
# with the horizontal amplitude the larger (A_pitch >= A_yaw rolls the other way instead). In the MuJoCo
# world these defaults move straight sideways at the commanded speed with contacts slipping at about
# 0.28 of the body speed (validation.runs.contact_slip); the earlier delta = pi/4, A_yaw = 0.6,
# A_pitch = 0.25 slipped faster than the body moved and drifted forward and turned 100 degrees in 20 s.
# No set of these four parameters makes the contacts hold within the torque check: a scan of 190 sets
# (bench_sidewinding_slip --sweep) slid 0.18 of the speed at best, and that set turns over at other speeds
# (docs/estimation.md, "How much serpenoid sidewinding's contacts slide").
SIDEWINDING = GaitSpec(
    'sidewinding', 'serpenoid', ('pitch_yaw',), 'lateral',
    # w_s = 0.6: at 0.4 the longer lifted runs asked 113 % of the stall torque (dynamics.gait_check).
    _serp_params(0.4, 0.3, 0.6, PI / 2),
    'compound serpenoid, yaw and pitch waves with delta = pi/2; turns through the amplitude taper '
    '(conical sidewinding). Lifting more turns the body over: in MuJoCo A_pitch 0.32 rad rolled it onto '
    'its back within 8 s at 0.2 m/s (the default 0.3 tilts and recovers)',
    turn_param='taper', turn_gain=0.5, turn_max=0.8)

SERPENOID_ROLLING = GaitSpec(
    'serpenoid_rolling', 'serpenoid', ('pitch_yaw',), 'lateral',
    # delta = -pi/2: (yaw, pitch) = A (cos, sin)(phase - pi/2 ...) turns the bend the way MCC rolling's
    # (cos psi, -sin psi) does, so a positive lateral command rolls to the left (+y), checked in MuJoCo.
    _serp_params(0.15, 0.15, 0.0, -PI / 2,
                 stride=_stride('m', lambda r: 2 * PI * r.module_radius_m, '2 pi module radius')),
    'compound serpenoid with w_s = 0 and delta = -pi/2: every joint traces a circle, the body rolls')

# w_s = 0.8 (w_s = 0.4, A_pitch = 0.25 asked 129 % of stall). The wave runs in at the head and out at
# the tail, so with even halves (taper 0, pivot 0.5) the tail half out-sidewinds the head half and the body
# circles a point 0.05-0.13 m/rad away; the taper evens the halves' sideways push, the pivot their push
# along the body. Slower than 2.4 rad/s the body also crept toward its head (0.011 m per 0.18 rad cycle at
# 0.8 rad/s with A_pitch 0.2): a little more lift (A_pitch 0.22; from 0.23 the torque check holds the
# lifted runs as cantilevers, 80 % of stall) and a slight bend (beta_yaw 0.01) hold it at 0.010-0.018
# m/rad from 0.8 to 2.4 rad/s in MuJoCo (docs/gaits.md, "Turning on the spot").
# max_phase_rate_rad_s 2.4: the servos' drive in MuJoCo peaks at 75 % of stall there, and at 94 % (above
# 80 % half the time) at the joint-speed cap of 5.4 rad/s, an overload shutdown on real servos
# (docs/physics.md, "The servos' drive").
_TURN_IN_PLACE_PARAMS = _serp_params(0.5, 0.22, 0.8, PI / 2, taper=0.6, stride=_stride('rad', 0.3, '0.3 rad'),
                                     beta_yaw=0.01)
TURN_IN_PLACE = GaitSpec(
    'turn_in_place', 'serpenoid', ('pitch_yaw',), 'turn',
    _TURN_IN_PLACE_PARAMS[:-1] + (
        Param('pivot', '1', 0.53, 'where the pitch amplitude changes sign, x = 0 tail .. 1 head: the profile '
              'is -cos(pi x / (2 pivot)) on the tail side, -cos(pi (1 + (x - pivot) / (1 - pivot)) / 2) '
              'on the head side', 0.2, 0.8),
        _TURN_IN_PLACE_PARAMS[-1]),
    'sidewinding whose pitch amplitude changes sign along the body (at the pivot): the tail half '
    'sidewinds one way and the head half the other, so the body turns on the spot; a right turn is the '
    'left turn\'s mirror image', mirror_negative=True, max_phase_rate_rad_s=2.4,
    max_phase_rate_why="the servos' drive: faster, it passes 80 % of stall in MuJoCo")

CONICAL_SIDEWINDING = GaitSpec(
    'conical_sidewinding', 'serpenoid', ('pitch_yaw',), 'lateral',
    _serp_params(0.6, 0.25, 0.7, PI / 4, taper=0.8),      # w_s = 0.4 asked 138 % of stall
    'sidewinding with amplitudes growing linearly from tail to head (a cone instead of a cylinder): '
    'moves sideways along an arc; turns by changing the taper',
    turn_param='taper', turn_gain=0.5, turn_max=0.8)

# --- planar passive-wheel gaits (seed 000) --------------------------------------------------------

_WHEELED_PARAMS = (
    Param('amplitude', 'rad', 0.7, 'joint amplitude alpha0', -PI / 2, PI / 2),
    Param('delta', 'rad', 0.8, 'phase lead of each joint over the one on its tail side', -2 * PI, 2 * PI),
    Param('turn_offset', 'rad', 0.0, 'constant joint offset phi_turn (turning)', -PI / 2, PI / 2),
    _stride('m', lambda r: 0.25 * r.n_links * r.link_length_m, 'body length / 4'))

WHEELED_UNDULATION = GaitSpec(
    'wheeled_undulation', 'wheeled', ('planar',), 'forward', _WHEELED_PARAMS,
    'passive-wheel undulation alpha_i = amplitude sin(phase + (i - 1) delta) + turn_offset; turns through '
    'turn_offset', turn_param='turn_offset', turn_gain=0.3, turn_max=0.5)

KINEMATIC_SNAKE_PRESET = GaitSpec(
    'kinematic_snake_preset', 'wheeled', ('planar',), 'forward',
    (Param('amplitude', 'rad', math.radians(40.0), 'joint amplitude (seed 000: 40 deg)', -PI / 2, PI / 2),
     Param('delta', 'rad', math.radians(25.0), 'phase lead per joint (seed 000: 25 deg)', -2 * PI, 2 * PI),
     Param('turn_offset', 'rad', 0.0, 'constant joint offset (turning)', -PI / 2, PI / 2),
     _stride('m', lambda r: 0.25 * r.n_links * r.link_length_m, 'body length / 4')),
    "seed 000's three-link gait alpha1 = 40 deg sin t, alpha2 = 40 deg sin(t + 25 deg) (named preset of "
    'wheeled_undulation)', turn_param='turn_offset', turn_gain=0.3, turn_max=0.5)

STRAIGHT = GaitSpec(
    'straight', 'static', ('pitch_yaw', 'planar'), None, (),
    'all joints at zero (a straight body); no motion')

GAITS = {g.name: g for g in (SERPENTINE, ROLLING, HELIX_ROLLING, S_CRAWLER, AEH_SIDEWINDING,
                             LATERAL_UNDULATION, VERTICAL_UNDULATION, SIDEWINDING, SERPENOID_ROLLING,
                             TURN_IN_PLACE, CONICAL_SIDEWINDING, WHEELED_UNDULATION, KINEMATIC_SNAKE_PRESET,
                             STRAIGHT)}
# Not selectable: the scheduler's starting layer when it starts from a measured pose.
HOLD = GaitSpec('hold', 'static', ('pitch_yaw', 'planar'), None, (), 'hold a given pose')
BACKBONE_GAITS = tuple(name for name, g in GAITS.items() if g.family == 'mcc')


def gait_spec(name: str) -> GaitSpec:
    """The GaitSpec called name; ValueError listing the gaits otherwise."""
    try:
        return GAITS[name]
    except KeyError:
        raise ValueError(f'unknown gait {name!r}; gaits: {", ".join(GAITS)}') from None


def gaits_for(robot) -> list[str]:
    """Names of the gaits that fit the robot's kind (and joint axes)."""
    return [name for name, g in GAITS.items() if robot.kind in g.kinds]


def check_gait_fits(spec: GaitSpec, robot) -> None:
    """ValueError if the gait cannot run on the robot (a pitch gait on a planar robot)."""
    if robot.kind not in spec.kinds:
        raise ValueError(f'gait {spec.name!r} needs a {" or ".join(spec.kinds)} robot; {robot.name} is '
                         f'{robot.kind} (its gaits: {", ".join(gaits_for(robot))})')


def resolve_params(spec: GaitSpec, robot, overrides=None) -> dict:
    """Full parameter dict: defaults for the robot updated with validated overrides.

    Raises ValueError naming the parameter for unknown names, non-numbers, non-finite values and
    values outside the parameter's range, and for pitch amplitudes on a robot without pitch joints.
    """
    values = {p.name: p.resolve(robot) for p in spec.params}
    for key, raw in (overrides or {}).items():
        if key not in values:
            raise ValueError(f'gait {spec.name!r} has no parameter {key!r}; parameters: '
                             f'{", ".join(values) or "(none)"}')
        p = spec.param(key)
        try:
            v = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f'parameter {key!r} of gait {spec.name!r} must be a number, '
                             f'got {raw!r}') from None
        if not math.isfinite(v):
            raise ValueError(f'parameter {key!r} of gait {spec.name!r} must be finite, got {raw!r}')
        if not p.lower <= v <= p.upper:
            raise ValueError(f'parameter {key!r} of gait {spec.name!r} must be in [{p.lower:g}, {p.upper:g}] '
                             f'{p.unit}, got {v:g}')
        values[key] = v
    if spec.family == 'serpenoid' and 'pitch' not in robot.axes and \
            (values['A_pitch'] != 0.0 or values['beta_pitch'] != 0.0):
        raise ValueError(f'parameter A_pitch/beta_pitch of gait {spec.name!r} must be 0 on {robot.name}: '
                         'it has no pitch joints')
    return values


def pitch_profile(x, pivot: float = 0.5) -> np.ndarray:
    """turn_in_place's pitch amplitude profile over x = 0 (tail) .. 1 (head): -1 at the tail, +1 at the
    head, 0 at the pivot, a quarter cosine either side (-cos(pi x) for pivot 0.5)."""
    x = np.asarray(x, dtype=float)
    tail = -np.cos(0.5 * PI * x / pivot)
    head = -np.cos(0.5 * PI * (1.0 + (x - pivot) / (1.0 - pivot)))
    return np.where(x < pivot, tail, head)


# --- shapes ---------------------------------------------------------------------------------------

class GaitShape:
    """A gait bound to a robot and parameters: angles(phase, turn) -> (n,) joint angles in rad.

    turn is the offset added to spec.turn_param (units of that parameter); phase in rad.
    For MCC gaits, curve(phase, turn) -> (MCCCurve, s0_m) gives the target backbone curve.
    """

    def __init__(self, spec: GaitSpec, robot, params: dict, pose_rad=None):
        self.spec, self.robot, self.params = spec, robot, dict(params)
        self.n = robot.n_joints
        self._pose = np.zeros(self.n) if pose_rad is None else np.array(pose_rad, dtype=float)
        self.axes = tuple(robot.axes)
        self.l = float(robot.link_length_m)
        self._yaw = np.array([a == 'yaw' for a in self.axes])
        self._idx = np.arange(self.n, dtype=float)
        self._x = self._idx / max(self.n - 1, 1)
        self._windows = backbone.joint_windows(self.axes, self.l, 0.0)
        self._body_m = max(self.n - 1, 1) * self.l          # arc length from the first joint to the last
        fam = spec.family
        self._fast = None
        if fam == 'mcc':
            self._fast = self._tabulate_mcc()
        if fam == 'serpenoid':
            # Everything but the phase and the turning offset is fixed: tabulate once per shape.
            p = self.params
            profile_pitch = pitch_profile(self._x, p['pivot']) if spec.name == 'turn_in_place' else np.ones(self.n)
            self._amp0 = np.where(self._yaw, p['A_yaw'], p['A_pitch'] * profile_pitch)
            self._arg0 = p['w_s'] * self._idx + np.where(self._yaw, p['delta'], 0.0)
            self._beta0 = np.where(self._yaw, p['beta_yaw'], p['beta_pitch'])
            self._yawf = self._yaw.astype(float)
        elif fam == 'wheeled':
            self._arg0 = self._idx * self.params['delta']

    # the turn offset applied to the gait's turning parameter
    def _p(self, name, turn):
        v = self.params[name]
        return v + turn if name == self.spec.turn_param else v

    def curve(self, phase: float, turn: float = 0.0):
        """(MCCCurve, s0_m) of an MCC gait at this phase, or None for joint-space gaits."""
        name = self.spec.name
        p = self.params
        if name == 'serpentine':
            return backbone.MCCCurve(A1=self._p('A1', turn), B1=p['B1'], w1=p['w1'], phi1=p['phi1'] + phase,
                                     psi0=p['psi0']), 0.0
        if name == 'rolling':
            k, body = self._p('kappa_taper', turn), self._body_m
            return backbone.MCCCurve(A1=p['A1'] - k, G1=2.0 * k / body, psi0=p['psi0'] + phase), 0.0
        if name == 'helix_rolling':
            return backbone.MCCCurve(A1=p['A1'], A2=p['A2'], psi0=p['psi0'] + phase), 0.0
        if name == 's_crawler':
            big_l, lam = p['L'], p['lam']
            b1 = p['B1_pi_per_L'] * PI / big_l if lam == 0.0 else \
                (4 * PI / big_l) * (lam * PI) / math.sin(lam * PI)
            curve = backbone.MCCCurve(A1=4 * PI / big_l, B1=b1, w1=4 * PI / big_l, phi1=-PI / 2 - lam * PI,
                                      B2=p['B2_pi_per_L'] * PI / big_l, w2=2 * PI / big_l, phi2=-lam * PI / 2,
                                      psi0=p['psi0'])
            return curve, phase * big_l / (2 * PI)
        if name == 'aeh_sidewinding':
            a, ls = p['a'], p['Ls']
            c = 2 * PI / ls / math.sqrt(1.0 + a * a)
            w = 4 * PI / ls
            curve = backbone.MCCCurve(A1=c, B1=c * p['eta'], w1=w, phi1=p['phi1'],
                                      A2=a * c, B2=a * c * p['eta'], w2=w, phi2=p['phi1'], psi0=p['psi0'])
            return curve, phase * ls / (2 * PI)
        return None

    def angles(self, phase: float, turn: float = 0.0) -> np.ndarray:
        """Joint angles (n,) rad at this phase with this turning offset."""
        fam = self.spec.family
        p = self.params
        if fam == 'mcc':
            return self._fast(phase, turn)
        if fam == 'serpenoid':
            taper = self._p('taper', turn)
            amp = self._amp0 if taper == 0.0 else self._amp0 * (1.0 + taper * (self._x - 0.5))
            q = amp * np.sin(self._arg0 + phase)
            q += self._beta0
            if self.spec.turn_param == 'beta_yaw' and turn != 0.0:
                q += self._yawf * turn
            return q
        if fam == 'wheeled':
            q = p['amplitude'] * np.sin(self._arg0 + phase)
            q += self._p('turn_offset', turn)
            return q
        return self._pose.copy()

    def reference_angles(self, phase: float, turn: float = 0.0) -> np.ndarray:
        """MCC gaits: backbone.joint_angles of curve(phase, turn), the definition angles() tabulates."""
        curve, s0 = self.curve(phase, turn)
        s, lo, hi = self._windows
        q = backbone.joint_angles(curve, self.axes, self.l, s0, (s + s0, lo + s0, hi + s0))
        if self.spec.name == 'aeh_sidewinding':
            # The taper scales the fitted joint angles, not the curve (a cone is no MCC curve).
            q = q * (1.0 + self._p('taper', turn) * (0.5 - self._x))
        return q

    def _tabulate_mcc(self):
        """A fast angles(phase, turn) for this MCC gait: the window integrals of backbone's closed forms
        (or its quadrature) with everything but the phase tabulated, shifted by angle addition."""
        name, p = self.spec.name, self.params
        _, lo, hi = self._windows
        width = hi - lo
        yaw = self._yaw
        if name == 'serpentine':
            # int kappa = A1 W + (B1/w)[cos(w lo + phi) - cos(w hi + phi)], phi = phi1 + phase
            w, b1 = p['w1'], p['B1']
            sgn = np.where(yaw, math.cos(p['psi0']), -math.sin(p['psi0']))
            if abs(w) < 1e-9:
                return lambda phase, turn: sgn * width * (self._p('A1', turn)
                                                          + b1 * math.sin(p['phi1'] + phase))
            dc = (np.cos(w * lo) - np.cos(w * hi)) * (b1 / w)
            ds = (np.sin(w * lo) - np.sin(w * hi)) * (b1 / w)
            sgn_w = sgn * width

            def serpentine(phase, turn):
                phi = p['phi1'] + phase
                return sgn_w * self._p('A1', turn) + sgn * (dc * math.cos(phi) - ds * math.sin(phi))
            return serpentine
        if name == 'rolling':
            # int kappa over each window, kappa = A1 + k (2 s / body - 1): linear in the taper k.
            gradient = (hi * hi - lo * lo) / self._body_m - width
            base = p['A1'] * width + p['kappa_taper'] * gradient
            yawf = yaw.astype(float)

            def rolling(phase, turn):
                total = base + turn * gradient if turn else base
                return total * (yawf * math.cos(p['psi0'] + phase) - (1.0 - yawf) * math.sin(p['psi0'] + phase))
            return rolling
        if name == 'helix_rolling' and abs(p['A2']) >= 1e-9:
            # psi = psi0 + phase + A2 s: theta_yaw = r (sin psi_hi - sin psi_lo), theta_pitch = r (cos - cos)
            r, a2 = p['A1'] / p['A2'], p['A2']
            d_sin = np.sin(a2 * hi) - np.sin(a2 * lo)
            d_cos = np.cos(a2 * hi) - np.cos(a2 * lo)
            cp = r * np.where(yaw, d_sin, d_cos)
            sp = r * np.where(yaw, d_cos, -d_sin)
            return lambda phase, turn: cp * math.cos(p['psi0'] + phase) + sp * math.sin(p['psi0'] + phase)
        if name == 's_crawler':
            shifted = backbone.ShiftedQuadrature(self.curve(0.0)[0], self.axes, self.l)
            return lambda phase, turn: shifted.angles(phase * p['L'] / (2 * PI))
        if name == 'aeh_sidewinding' and abs(p['a']) >= 1e-9:
            # theta = [sin(psi_hi + o) - sin(psi_lo + o)] / a with o = pi/2 on pitch joints (cos), where
            # psi(x + s0) = psi0 + a K(x + s0), K(s) = A1 s + (B1/w)(cos phi1 - cos(w s + phi1)).
            curve, _ = self.curve(0.0)
            a, w = p['a'], curve.w1
            x = np.stack([lo, hi])
            cx, sx = np.cos(w * x + curve.phi1), np.sin(w * x + curve.phi1)
            off = np.where(yaw, 0.0, 0.5 * PI)
            base = curve.psi0 + a * (curve.A1 * x + (curve.B1 / w) * math.cos(curve.phi1)) + off
            kb = a * curve.B1 / w
            ka = a * curve.A1

            taper0, half_minus_x = p['taper'], 0.5 - self._x

            def aeh(phase, turn):
                s0 = phase * p['Ls'] / (2 * PI)
                cw, sw = math.cos(w * s0), math.sin(w * s0)
                v = np.sin(base + ka * s0 - kb * (cx * cw - sx * sw))
                q = (v[1] - v[0]) / a
                taper = taper0 + turn
                return q if taper == 0.0 else q * (1.0 + taper * half_minus_x)
            return aeh
        return self.reference_angles

    def phase_derivative_bound(self, turn_max: float | None = None, samples: int = 24) -> np.ndarray:
        """(n,) max over phase of |dq_i/dphase| (rad/rad), sampled; used to cap the phase rate."""
        if self.spec.drive is None:
            return np.zeros(self.n)
        turns = [0.0] if not self.spec.turn_param else [0.0, self.spec.turn_max, -self.spec.turn_max]
        h = 1e-4
        best = np.zeros(self.n)
        for turn in turns:
            for ph in np.linspace(0.0, 2 * PI, samples, endpoint=False):
                d = (self.angles(ph + h, turn) - self.angles(ph - h, turn)) / (2 * h)
                best = np.maximum(best, np.abs(d))
        return best
