"""Fit reports and offline gait runs (used by `snake gait` and bench/bench_gaits.py).

fit_report(robot) gives, for every backbone (MCC) gait, the RMS distance between the chain (forward
kinematics of the fitted joint angles) and the continuous curve integrated from kappa and tau, after
the best proper rigid alignment (backbone.chain_fit_error), at several phases.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snake_control.gaits import backbone, catalog
from snake_control.gaits.scheduler import GaitScheduler


def gait_shape(robot, name: str, params: dict | None = None) -> catalog.GaitShape:
    """A gait bound to a robot with validated parameters (ValueError for unfit gaits / bad params)."""
    spec = catalog.gait_spec(name)
    catalog.check_gait_fits(spec, robot)
    return catalog.GaitShape(spec, robot, catalog.resolve_params(spec, robot, params))


def gait_fit_error(robot, name: str, params: dict | None = None, phases=(0.0,)) -> dict | None:
    """Fit of one MCC gait's chain to its curve: {'rms_m': mean over phases, 'max_rms_m', 'limit_excess_rad'}.

    The fit uses the unclamped joint angles (how well the chain can follow the curve at all);
    limit_excess_rad is the largest amount by which those angles leave the joint limits (0 if none).
    Returns None for joint-space gaits (they have no backbone curve).
    """
    shape = gait_shape(robot, name, params)
    if shape.spec.family != 'mcc':
        return None
    errs, excess = [], 0.0
    for ph in phases:
        curve, s0 = shape.curve(ph)
        q = shape.angles(ph)
        errs.append(backbone.chain_fit_error(curve, robot.axes, robot.link_length_m, s0, q))
        excess = max(excess, float(np.max(np.maximum(q - robot.upper_rad, robot.lower_rad - q))), 0.0)
    return {'rms_m': float(np.mean(errs)), 'max_rms_m': float(np.max(errs)), 'limit_excess_rad': excess}


def fit_report(robot, names=None, phases=np.linspace(0.0, 2 * np.pi, 8, endpoint=False)) -> list[dict]:
    """Rows {'gait', 'rms_m', 'max_rms_m', 'limit_excess_rad'} for every backbone gait fitting the robot."""
    names = [n for n in (names or catalog.gaits_for(robot)) if catalog.gait_spec(n).family == 'mcc']
    return [dict(gait=n, **gait_fit_error(robot, n, None, phases)) for n in names]


def format_fit_table(rows) -> str:
    """The fit report as a fixed-width text table (mm)."""
    lines = [f'{"gait":<18} {"RMS fit (mm)":>13} {"worst phase (mm)":>17} {"beyond joint limit (rad)":>25}']
    for r in rows:
        lines.append(f'{r["gait"]:<18} {1e3 * r["rms_m"]:>13.3f} {1e3 * r["max_rms_m"]:>17.3f} '
                     f'{r["limit_excess_rad"]:>25.3f}')
    return '\n'.join(lines)


def default_speed(robot, name: str, params: dict | None = None) -> float:
    """A command for the gait's drive component giving half a gait cycle per second (m/s or rad/s)."""
    shape = gait_shape(robot, name, params)
    return 0.5 * shape.params['stride'] if shape.spec.drive else 0.0


@dataclass
class GaitRun:
    """An offline run: t_s (k,), positions_rad (k, n), phases_rad (k,) (the gait's phase), ticks, scheduler.

    Row 0 is the starting pose at t = 0 (phase 0); rows 1.. are the scheduler's ticks.
    """

    t_s: np.ndarray
    positions_rad: np.ndarray
    phases_rad: np.ndarray
    ticks: list
    scheduler: GaitScheduler


def run_gait(robot, name: str, params: dict | None = None, duration_s: float = 10.0, rate_hz: float = 100.0,
             speed: float | None = None, turn_rad_s: float = 0.0) -> GaitRun:
    """Run the scheduler on one gait from its phase 0 for duration_s at rate_hz.

    speed drives the gait's drive component (forward/lateral m/s, turn rad/s); None: default_speed.
    """
    if not (np.isfinite(duration_s) and duration_s > 0):
        raise ValueError(f'duration must be positive, got {duration_s}')
    if not (np.isfinite(rate_hz) and 0 < rate_hz <= 10000):
        raise ValueError(f'rate must be in (0, 10000] Hz, got {rate_hz}')
    if not np.isfinite(turn_rad_s) or (speed is not None and not np.isfinite(speed)):
        raise ValueError('speed and turn must be finite')
    sched = GaitScheduler(robot, name, params)
    spec = catalog.gait_spec(name)
    v = default_speed(robot, name, params) if speed is None else float(speed)
    cmd = {'forward': (v, 0.0, turn_rad_s), 'lateral': (0.0, v, turn_rad_s), 'turn': (0.0, 0.0, v),
           None: (0.0, 0.0, turn_rad_s)}[spec.drive]
    sched.set_command(*cmd)
    dt = 1.0 / rate_hz
    steps = int(round(duration_s * rate_hz))
    if steps < 1:
        raise ValueError(f'duration {duration_s} s is shorter than one tick at {rate_hz} Hz')
    q = [sched.positions_rad]
    phases = [sched.state().phase_rad]
    ticks = []
    for _ in range(steps):
        tick = sched.step(dt)
        ticks.append(tick)
        q.append(tick.positions_rad)
        phases.append(tick.phase_rad)
    return GaitRun(np.arange(steps + 1) * dt, np.array(q), np.array(phases), ticks, sched)
