"""Calibration runs: a gait's net motion per cycle measured in the MuJoCo world, or from a recorded
trajectory of a real robot, fitted into a snake_control.gaits.calibration.Calibration.

In MuJoCo the runs use the validation physics (runs.VALIDATION_PHYSICS, the elliptic friction cone) by
default: the gait's motion is then measured on the floor it is validated on (cmd_vel's acceptance,
validation.cmdvel), not on the pyramidal cone that propels some gaits where Coulomb friction does not
(docs/physics.md). Each sample resets the robot into the gait's shape at phase 0 (no blend from a straight
body), ramps the phase rate up over RAMP_S, runs WARMUP_CYCLES unmeasured and then measures
CYCLES whole cycles: the body point is the centroid of the link centres, the heading the floor
direction from the tail half's centroid to the head half's (the same body axis as
validation.runs.body_motion, which a curled or rolling body still has), and
gaits.calibration.cycle_motion takes the motion per cycle between phase-aligned instants.

Samples per gait: turning offsets -u, 0, +u (u = TURN_SHARE of the gait's turn_max) at the lower
phase rate and 0 at the higher one; gaits without a turning parameter at both rates only. The rates
are where a user drives the gait (sample_rates): the higher one is the rate of the gait node's default
speed clamp along the gait's drive axis at the gait's nominal stride, at most RATE_SHARES[1] of the
gait's phase-rate cap (the scheduler's: 80 % of the joint velocity limits); the lower one is half of it.
Gaits whose motion per cycle changes with the rate are fitted where they are used: serpenoid rolling
rolls 0.185 m per cycle at 1 rad/s and goes the other way at 6.4 rad/s, the rate 0.3 of its cap.
When the offset that cancels the gait's veer (the map's offset for a command without a turn) lies
beyond +-u at either rate, one more run at the lower rate measures turn_max on that side, so that the
offset the gait goes straight with is measured, not clamped (conical sidewinding needs -0.53 of taper:
clamped at -0.4 it drifted 3 deg/m).

AEH-sidewinding is measured from rest instead (FROM_REST): the robot lies straight, blends into the shape
over BLEND_S, then runs as above for FROM_REST_CYCLES. Reset straight into its 3D tread, it settles onto
other contacts than the ones it lifts onto from the floor, as a robot always does, and keeps them: it veered
-0.10 rad per cycle so and -0.01 from rest (docs/gaits.md, "AEH-sidewinding steers by a taper").

    >>> cal = calibrate('pitch_yaw_32', ['serpentine'])        # doctest: +SKIP
    >>> cal.save(calibration_path(load_robot('pitch_yaw_32')))  # doctest: +SKIP
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from snake_control.gaits import catalog
from snake_control.gaits.calibration import Calibration, CycleSample, GaitCalibration, cycle_motion
from snake_control.paths import ConfigError
from snake_control.physics.mjcf import PhysicsOptions
from snake_control.physics.world import SnakeWorld
from snake_control.robot import Robot, load_robot
from snake_control.teleop.command_filter import (DEFAULT_MAX_FORWARD_M_S, DEFAULT_MAX_SIDEWAYS_M_S,
                                                   DEFAULT_MAX_TURN_RAD_S)
from snake_control.validation.runs import VALIDATION_PHYSICS

RAMP_S = 0.5
WARMUP_CYCLES = 1.0
CYCLES = 2
RATE_SHARES = (0.3, 0.6)
TURN_SHARE = 0.5
SETTLE_S = 0.5
# The gait node's default clamp along each drive axis (m/s; rad/s for a turning gait).
DRIVE_CLAMPS = {'forward': DEFAULT_MAX_FORWARD_M_S, 'lateral': DEFAULT_MAX_SIDEWAYS_M_S,
                'turn': DEFAULT_MAX_TURN_RAD_S}
# Gaits measured from rest (module docstring), over more cycles: from rest its turn per cycle varies by
# +-0.05 rad from one cycle to the next.
FROM_REST = frozenset({'aeh_sidewinding'})
FROM_REST_CYCLES = 3
BLEND_S = 1.5


def calibratable_gaits(robot: Robot) -> list[str]:
    """The robot's gaits that move (a drive command), in catalogue order."""
    return [g for g in catalog.gaits_for(robot) if catalog.gait_spec(g).drive is not None]


def _shape(robot, gait, params):
    spec = catalog.gait_spec(gait)
    catalog.check_gait_fits(spec, robot)
    return catalog.GaitShape(spec, robot, catalog.resolve_params(spec, robot, params))


def max_phase_rate(shape) -> float:
    """The scheduler's phase-rate cap for a shape (rad/s): 80 % of the joint velocity limits."""
    from snake_control.gaits.scheduler import _Layer
    return _Layer(shape, shape.robot, 0.0).max_rate


def measure(robot: Robot, shape, phase_rate_rad_s: float, turn: float, cycles: int = CYCLES,
            world: SnakeWorld | None = None, rate_hz: float = 100.0, from_rest: bool = False) -> CycleSample:
    """Run `shape` at a fixed phase rate (rad/s, > 0) and turning offset in MuJoCo (world: default a
    new one on VALIDATION_PHYSICS); its CycleSample. from_rest: start straight and blend into the shape
    over BLEND_S (module docstring) instead of starting in it."""
    if not phase_rate_rad_s > 0:
        raise ValueError(f'phase_rate_rad_s must be positive, got {phase_rate_rad_s}')
    world = world or SnakeWorld(robot, options=VALIDATION_PHYSICS)
    period = 1.0 / rate_hz
    steps = int(round(period / world.timestep_s))
    f = float(phase_rate_rad_s)

    def phase_at(t):     # rate ramps linearly from 0 to f over RAMP_S
        return 0.5 * f * t * t / RAMP_S if t < RAMP_S else f * (t - 0.5 * RAMP_S)

    start = np.clip(shape.angles(0.0, turn), robot.lower_rad, robot.upper_rad)
    if from_rest:
        world.reset(np.zeros(robot.n_joints))
        world.run(SETTLE_S)
        blend = int(round(BLEND_S * rate_hz))
        for k in range(1, blend + 1):
            u = k / blend
            # The scheduler's quintic weight, written as when the shipped samples were measured: evaluated as
            # scheduler._smoothstep rounds it, AEH's contacts grow the last-bit difference into a refit
            # 0.0026 m apart (the drive per cycle's u^2 term).
            world.set_goals(start * (u * u * u * (10.0 - 15.0 * u + 6.0 * u * u)))
            world.step(steps)
    else:
        world.reset(start)
    world.run(SETTLE_S)
    start_phase = phase_at(RAMP_S) + 2 * math.pi * WARMUP_CYCLES
    end_phase = start_phase + 2 * math.pi * cycles
    times, phases, xy, heading = [], [], [], []
    k = 0
    while True:
        t = k * period
        ph = phase_at(t)
        if ph > end_phase + 2 * math.pi * 0.05:
            break
        world.set_goals(shape.angles(ph, turn))
        if ph >= start_phase - 2 * math.pi * 0.05:
            centres = world.link_poses()[:, :2, 3]
            half = centres.shape[0] // 2
            axis = centres[-half:].mean(axis=0) - centres[:half].mean(axis=0)
            times.append(t)
            phases.append(ph)
            xy.append(centres.mean(axis=0))
            heading.append(math.atan2(axis[1], axis[0]))
        world.step(steps)
        k += 1
    fwd, left, dth, n = cycle_motion(times, phases, np.array(xy), heading)
    return CycleSample(f, float(turn), fwd, left, dth, n)


def sample_rates(shape) -> tuple[float, float]:
    """The (lower, higher) phase rates (rad/s) a shape is calibrated at: the higher is the rate that
    drives the gait at the gait node's default clamp with its nominal stride (the stride parameter), at
    most RATE_SHARES[1] of the phase-rate cap; the lower keeps RATE_SHARES' ratio to it."""
    hi = RATE_SHARES[1] * max_phase_rate(shape)
    stride = abs(float(shape.params.get('stride', 0.0)))
    if stride > 0:
        hi = min(hi, 2 * math.pi * DRIVE_CLAMPS[shape.spec.drive] / stride)
    return RATE_SHARES[0] / RATE_SHARES[1] * hi, hi


def sample_plan(shape) -> list[tuple[float, float]]:
    """(phase rate rad/s, turning offset) of each calibration run of a shape."""
    lo, hi = sample_rates(shape)
    spec = shape.spec
    if spec.turn_param and spec.turn_max > 0:
        u = TURN_SHARE * spec.turn_max
        return [(lo, -u), (lo, 0.0), (lo, u), (hi, 0.0)]
    return [(lo, 0.0), (hi, 0.0)]


def calibrate_gait(robot: Robot, gait: str, params: dict | None = None, progress=None,
                   options=None) -> GaitCalibration:
    """Measure one gait in MuJoCo (sample_plan; physics options, default VALIDATION_PHYSICS) and fit its
    GaitCalibration."""
    shape = _shape(robot, gait, params)
    world = SnakeWorld(robot, options=options or VALIDATION_PHYSICS)
    how = {'from_rest': True, 'cycles': FROM_REST_CYCLES} if gait in FROM_REST else {}
    samples = []
    plan = sample_plan(shape)
    for rate, turn in plan:
        samples.append(measure(robot, shape, rate, turn, world=world, **how))
        if progress:
            progress(gait, samples[-1])
    fitted = GaitCalibration.fit(gait, shape.params, samples)
    extra = straight_sample(fitted, shape, plan)
    if extra is None:
        return fitted
    samples.append(measure(robot, shape, *extra, world=world, **how))
    if progress:
        progress(gait, samples[-1])
    return GaitCalibration.fit(gait, shape.params, samples)


def straight_sample(fitted: GaitCalibration, shape, plan) -> tuple[float, float] | None:
    """(phase rate rad/s, offset) of one more run when the offset that cancels the fitted veer at a planned
    rate lies beyond the planned offsets: the lower rate at turn_max on that side; None otherwise."""
    spec = shape.spec
    if not spec.turn_param or spec.turn_max <= 0 or spec.drive == 'turn':
        return None
    rates = sorted({rate for rate, _ in plan})
    lo, hi = min(u for _, u in plan), max(u for _, u in plan)
    for rate in rates:
        u = fitted.straight_offset(rate)
        if not (lo - 1e-9 <= u <= hi + 1e-9):
            side = math.copysign(spec.turn_max, u)
            return (rates[0], side) if not (lo - 1e-9 <= side <= hi + 1e-9) else None
    return None


def calibrate(robot: Robot | str, gaits=None, params: dict | None = None, progress=None,
              options=None) -> Calibration:
    """Calibrate gaits (default: every gait that moves) of a robot in MuJoCo. params: {gait: {p: v}};
    options: the physics (default VALIDATION_PHYSICS), named in the result's method."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    options = options or VALIDATION_PHYSICS
    names = list(gaits) if gaits else calibratable_gaits(robot)
    fitted = {g: calibrate_gait(robot, g, (params or {}).get(g), progress, options) for g in names}
    # A robot sharing another's calibration files (its YAML's `calibration:`) writes them under that name.
    return Calibration(robot.calibration_robot, fitted, mujoco_method(options))


def mujoco_method(options) -> str:
    """The calibration file's method for MuJoCo runs on these physics options: 'mujoco, <cone> cone', and the
    floor contacts' time constant when it is not the default (it changes how far a gait goes: docs/physics.md,
    "Soft contacts slide")."""
    method = f'mujoco, {options.cone} cone'
    if options.contact_timeconst_s != PhysicsOptions().contact_timeconst_s:
        method += f', contacts {options.contact_timeconst_s:g} s'
    return method


# --- a recorded trajectory (odometry or motion capture) ------------------------------------------

POSE_COLUMNS = ('t', 'x', 'y', 'z', 'qx', 'qy', 'qz', 'qw')


def read_pose_csv(path: str | Path) -> np.ndarray:
    """(T, 8) rows t, x, y, z, qx, qy, qz, qw of a pose CSV (docs/architecture.md: seconds, metres, the
    body frame's unit quaternion in the odometry or motion-capture frame); columns in any order,
    extra columns ignored. ConfigError naming the file, line and column otherwise."""
    src = str(path)
    try:
        with open(path, newline='', encoding='utf-8') as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(src, '', f'cannot read: {exc}') from None
    if not rows:
        raise ConfigError(src, '', 'empty file; expected a header t,x,y,z,qx,qy,qz,qw')
    header = [h.strip() for h in rows[0]]
    missing = [c for c in POSE_COLUMNS if c not in header]
    if missing:
        raise ConfigError(src, 'line 1', f'missing column(s) {", ".join(missing)}; expected '
                                         f'{",".join(POSE_COLUMNS)}')
    index = [header.index(c) for c in POSE_COLUMNS]
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            values = [float(row[i]) for i in index]
        except (ValueError, IndexError):
            raise ConfigError(src, f'line {n}', f'expected {len(header)} numbers, got {",".join(row)[:80]!r}') from None
        if not all(math.isfinite(v) for v in values):
            raise ConfigError(src, f'line {n}', 'non-finite value')
        out.append(values)
    if len(out) < 3:
        raise ConfigError(src, '', f'{len(out)} poses; need at least 3')
    data = np.array(out)
    if np.any(np.diff(data[:, 0]) <= 0):
        bad = int(np.argmax(np.diff(data[:, 0]) <= 0)) + 3
        raise ConfigError(src, f'line {bad}', 'times must increase')
    norms = np.linalg.norm(data[:, 4:8], axis=1)
    if np.any(np.abs(norms - 1.0) > 1e-3):
        bad = int(np.argmax(np.abs(norms - 1.0) > 1e-3)) + 2
        raise ConfigError(src, f'line {bad}', f'quaternion norm {norms[bad - 2]:.4f}, expected 1')
    return data


def trajectory_sample(path: str | Path, phase_rate_rad_s: float, turn: float = 0.0,
                      skip_s: float = 0.0) -> CycleSample:
    """The CycleSample of a recorded run at a known phase rate (rad/s) and turning offset: the pose
    CSV's position and the heading of its body x axis on the floor, after skip_s seconds. ConfigError
    naming the file when it holds less than one whole cycle."""
    data = read_pose_csv(path)
    data = data[data[:, 0] >= data[0, 0] + skip_s]
    if not phase_rate_rad_s > 0:
        raise ValueError(f'the phase rate of {path} must be positive, got {phase_rate_rad_s}')
    t = data[:, 0] - data[0, 0]
    qx, qy, qz, qw = data[:, 4:8].T
    # The body x axis's floor direction: the first column of the rotation matrix.
    heading = np.arctan2(2 * (qx * qy + qw * qz), 1 - 2 * (qy * qy + qz * qz))
    try:
        fwd, left, dth, n = cycle_motion(t, phase_rate_rad_s * t, data[:, 1:3], heading)
    except ValueError as exc:
        raise ConfigError(str(path), '', f'{exc} (at {phase_rate_rad_s:g} rad/s)') from None
    return CycleSample(float(phase_rate_rad_s), float(turn), fwd, left, dth, n)


def calibrate_from_trajectories(robot: Robot, gait: str, runs, params: dict | None = None
                                ) -> GaitCalibration:
    """Fit one gait from recorded runs: [(pose CSV path, phase rate rad/s, turning offset), ...]."""
    shape = _shape(robot, gait, params)
    samples = [trajectory_sample(path, rate, turn) for path, rate, turn in runs]
    return GaitCalibration.fit(gait, shape.params, samples)


def format_table(cal: Calibration) -> str:
    """One row per sample: gait, phase rate, offset, motion per cycle, and the speed it gives."""
    header = (f'{"gait":<20} {"rate rad/s":>10} {"turn":>7} {"fwd m/cyc":>9} {"left m/cyc":>10} '
              f'{"turn rad/cyc":>12} {"v m/s":>7} {"lat m/s":>7} {"w rad/s":>7}')
    lines = [header, '-' * len(header)]
    for name, g in cal.gaits.items():
        for s in g.samples:
            hz = s.phase_rate_rad_s / (2 * math.pi)
            lines.append(f'{name:<20} {s.phase_rate_rad_s:>10.2f} {s.turn:>7.3f} {s.forward_m:>9.4f} '
                         f'{s.left_m:>10.4f} {s.turn_rad:>12.4f} {hz * s.forward_m:>7.3f} '
                         f'{hz * s.left_m:>7.3f} {hz * s.turn_rad:>7.3f}')
    return '\n'.join(lines)
