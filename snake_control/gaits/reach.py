"""What cmd_vel means to each gait on a robot: the components it follows, how far it can follow them, and
what it does beyond that (pure numpy; `snake gait --list --robot R` and the README print it).

The reach comes from the same numbers the scheduler runs on, so the text cannot drift from the code:

- speed: the scheduler caps a gait's phase rate where its fastest joint would use 80 % of its velocity
  limit (scheduler._Layer.max_rate, from a sampled bound of |dq/dphase|); the highest speed is the
  speed at that rate: m/s for linear.x and linear.y gaits, rad/s for turn_in_place. It comes from the
  gait's mapping, as the scheduler picks it: the robot's calibration (gaits/calibration.py, the file
  beside the robot YAML that the gait node loads by default), the no-slip model on passive wheels
  (gaits/stride.py), or else stride x max_rate / (2 pi) with the `stride` parameter.
- turning with a calibration or on passive wheels: the mapping's path curvature range (rad/m), from
  the measured turning offsets or the stride model: a command (v, w) is followed while w / v stays in it.
- turning elsewhere: angular.z offsets the gait's turning parameter by turn_gain x angular.z, at most
  turn_max. No model maps that offset to a yaw rate, so the yaw rate this gives is open loop; the reach
  stated is the angular.z at which the offset stops growing: the smaller of turn_max / turn_gain and the
  offset beyond which the shape leaves the joint limits.

Example:
    >>> from snake_control.robot import load_robot
    >>> m = cmd_vel_meaning(load_robot('pitch_yaw_32'), 'turn_in_place')    # the shipped calibration
    >>> m.follows, round(m.max_speed, 2), m.speed_unit, m.mapping
    (('angular.z',), 0.07, 'rad/s', 'calibration')
    >>> round(cmd_vel_meaning(load_robot('pitch_yaw_32'), 'turn_in_place', calibration=None).max_speed, 2)
    0.11
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.gaits import catalog
from snake_control.gaits.calibration import find_calibration
from snake_control.gaits.scheduler import _Layer

PI = math.pi
AXIS = {'forward': 'linear.x', 'lateral': 'linear.y', 'turn': 'angular.z'}
_SAMPLES = 24          # phases per cycle at which a turning offset is checked against the joint limits
_TOLERANCE_RAD = 0.01  # as gaits.feasibility: beyond a limit by less than this still counts as within
_ITERATIONS = 12       # bisection steps on the turning offset


@dataclass(frozen=True)
class CmdVelMeaning:
    """cmd_vel for one gait on one robot (see the module docstring).

    follows: cmd_vel fields the gait follows (the first drives its phase); max_speed: highest |command|
    of the driving field (speed_unit m/s, or rad/s for angular.z); stride: distance (m) or angle (rad)
    per gait cycle at that speed; mapping: the scheduler's ('calibration', 'no-slip model', 'stride
    parameter'); modelled: stride and turning from a calibration or the no-slip model. Turning (None
    when the gait does not turn): curvature_range_rad_m (modelled gaits: lowest, highest angular.z per
    linear.x), or turn_param, turn_gain, turn_max and turn_within_limits (the largest offset, <= turn_max,
    that keeps the shape inside the joint limits) with max_turn_rad_s the angular.z at which the offset
    stops growing.
    """

    gait: str
    follows: tuple
    speed_unit: str
    max_speed: float
    stride: float
    modelled: bool
    max_phase_rate_rad_s: float
    mapping: str = 'stride parameter'
    curvature_range_rad_m: tuple | None = None
    turn_param: str | None = None
    turn_gain: float = 0.0
    turn_max: float = 0.0
    turn_within_limits: float = 0.0
    max_turn_rad_s: float | None = None

    @property
    def curvature_max_rad_m(self) -> float:
        """The path curvature (rad/m) reachable both ways (0 when the gait cannot turn both ways)."""
        if self.curvature_range_rad_m is None:
            return 0.0
        lo, hi = self.curvature_range_rad_m
        return max(0.0, min(-lo, hi))

    @property
    def drive(self) -> str | None:
        return self.follows[0] if self.follows else None

    def reach_text(self) -> str:
        """The reach, one line: 'linear.x within +-0.598 m/s; angular.z within +-4.82 x linear.x (...)'."""
        if not self.follows:
            return 'none: a static shape'
        parts = [f'{self.drive} within +-{self.max_speed:.3g} {self.speed_unit}']
        if self.curvature_range_rad_m is not None:
            lo, hi = self.curvature_range_rad_m
            parts.append(f'angular.z from {lo:.3g} to {hi:.3g} x {self.drive} (path curvature, rad/m)')
        elif self.turn_param:
            parts.append(f'angular.z within +-{self.max_turn_rad_s:.3g} rad/s moves {self.turn_param} '
                         f'(+{self.turn_gain:g} x angular.z; the yaw rate it gives is open loop)')
        return '; '.join(parts)

    def outside_text(self) -> str:
        """What the gait does with a command beyond its reach or along a field it does not follow."""
        if not self.follows:
            return 'ignores cmd_vel'
        ignored = [a for a in ('linear.x', 'linear.y', 'angular.z') if a not in self.follows]
        spec = catalog.gait_spec(self.gait)
        why = (spec.max_phase_rate_why if self.max_phase_rate_rad_s >= spec.max_phase_rate_rad_s - 1e-9
               else '80 % of the joint velocity limit')
        parts = [f'faster: phase rate capped at {self.max_phase_rate_rad_s:.3g} rad/s ({why})']
        if self.modelled and self.curvature_range_rad_m is not None:
            parts.append(f'{self.mapping}: tighter turns keep the tightest curvature, yaw rate short'
                         + (f'; angular.z without {self.drive} holds the shape' if self.mapping == 'no-slip model'
                            else ''))
        elif self.modelled and self.drive != 'angular.z':
            parts.append(f'{self.mapping}: a turn command is not reachable')
        elif self.turn_param:
            edge = ('the joint limits clamp the shape (gait/state saturated_joints)'
                    if self.turn_within_limits < self.turn_max - 1e-9 else f'{self.turn_param} offset held '
                    f'at {self.turn_max:g}')
            parts.append(f'harder turns: {edge}')
        if ignored:
            parts.append('ignores ' + ', '.join(ignored))
        return '; '.join(parts) + '; gait/state: reachable false, WARN "cannot reach the command"'


def _turn_within_limits(robot, shape: catalog.GaitShape, turn_max: float) -> float:
    """Largest u in [0, turn_max] such that offsets +-u keep the shape inside the joint limits (bisection;
    0 when the straight shape already leaves them)."""
    phases = np.linspace(0.0, 2 * PI, _SAMPLES, endpoint=False)
    lower, upper = robot.lower_rad - _TOLERANCE_RAD, robot.upper_rad + _TOLERANCE_RAD

    def inside(u):
        for turn in (u, -u):
            q = np.array([shape.angles(float(ph), turn) for ph in phases])
            if np.any(q < lower) or np.any(q > upper):
                return False
        return True
    if inside(turn_max):
        return float(turn_max)
    if not inside(0.0):
        return 0.0
    good, bad = 0.0, float(turn_max)
    for _ in range(_ITERATIONS):
        mid = 0.5 * (good + bad)
        good, bad = (mid, bad) if inside(mid) else (good, mid)
    return good


def cmd_vel_meaning(robot, gait: str, params: dict | None = None, calibration='auto') -> CmdVelMeaning:
    """What cmd_vel means to `gait` on `robot` with `params` (default: the gait's defaults for it).

    calibration: 'auto' (the file beside the robot YAML, as the gait node loads it by default), None,
    or a gaits.calibration.Calibration. Raises ValueError for an unknown gait, a gait that does not fit
    the robot, or a bad parameter.
    """
    spec = catalog.gait_spec(gait)
    catalog.check_gait_fits(spec, robot)
    values = catalog.resolve_params(spec, robot, params)
    shape = catalog.GaitShape(spec, robot, values)
    if spec.drive is None:
        return CmdVelMeaning(gait, (), '', 0.0, 0.0, False, 0.0, 'none')
    if calibration == 'auto':
        calibration = find_calibration(robot)
    layer = _Layer(shape, robot, 0.0, calibration)   # the scheduler's own phase-rate cap and mapping
    drive = AXIS[spec.drive]
    unit = 'rad/s' if spec.drive == 'turn' else 'm/s'
    turns = spec.drive != 'turn' and bool(spec.turn_param)
    if layer.model is not None:
        r = layer.model.reach(layer.max_rate)
        max_speed = float(r['max_speed_m_s'])
        stride = 2 * PI * max_speed / layer.max_rate if layer.max_rate > 0 else 0.0
        lo, hi = r['curvature_rad_m']
        curving = turns and hi - lo > 1e-9
        return CmdVelMeaning(gait, (drive, 'angular.z') if curving else (drive,), unit, max_speed, stride, True,
                             layer.max_rate, layer.mapping, (float(lo), float(hi)) if curving else None)
    stride = values['stride']
    max_speed = abs(stride) * layer.max_rate / (2 * PI)
    if not turns:
        return CmdVelMeaning(gait, (drive,), unit, max_speed, stride, False, layer.max_rate, layer.mapping)
    within = _turn_within_limits(robot, shape, spec.turn_max)
    return CmdVelMeaning(gait, (drive, 'angular.z'), unit, max_speed, stride, False, layer.max_rate,
                         layer.mapping, turn_param=spec.turn_param, turn_gain=spec.turn_gain,
                         turn_max=spec.turn_max, turn_within_limits=within, max_turn_rad_s=within / spec.turn_gain)


def meanings(robot) -> list[CmdVelMeaning]:
    """cmd_vel_meaning of every gait that moves the robot (catalog.gaits_for, without static shapes)."""
    return [cmd_vel_meaning(robot, g) for g in catalog.gaits_for(robot) if catalog.gait_spec(g).drive]
