"""Would a gait with these parameters overload the servos? The check the gait node runs before it
accepts a parameter change (``ros2 param set`` or a gait switch).

It runs the gait scheduler offline from phase 0 for a few periods with the proposed parameters
(snake_control.gaits.report.run_gait) and checks the joint torques of that trajectory against the
servo's stall torque (snake_control.dynamics.torques.gait_torque_report, robot on the ground).

Example (a node's parameter callback):
    report = gait_params_torque_report(robot, 'sidewinding', {'A_even': 0.9}, fraction=0.8)
    if not report.ok:
        return SetParametersResult(successful=False, reason=report.message)
"""
from __future__ import annotations

import numpy as np

from snake_control.dynamics.torques import TorqueReport, gait_torque_report


def gait_params_torque_report(robot, gait: str, params: dict | None = None, fraction: float = 0.8, *,
                              periods: float = 2.0, rate_hz: float = 50.0, speed: float | None = None,
                              max_duration_s: float = 20.0, **report_kwargs) -> TorqueReport:
    """TorqueReport of `gait` with `params` on `robot` over `periods` gait periods sampled at rate_hz.

    The period comes from the scheduler's phase rate at the given speed (None: the gait's default);
    a gait that does not advance its phase (speed 0, a static pose) is checked over one second.
    max_duration_s caps the run for very slow gaits. report_kwargs go to gait_torque_report
    (support, up, gravity_m_s2, contact_tolerance_m). Raises ValueError for an unknown gait or
    parameter (from the gait catalogue) or a bad fraction.
    """
    from snake_control.gaits.report import run_gait

    if not 0.0 < fraction <= 1.0:
        raise ValueError(f'fraction must be in (0, 1], got {fraction}')
    if not (np.isfinite(periods) and periods > 0):
        raise ValueError(f'periods must be positive, got {periods}')
    probe = run_gait(robot, gait, params, 2.0 / rate_hz, rate_hz, speed)
    phase_rate = abs(probe.scheduler.state().phase_rate_rad_s)
    duration = periods * 2 * np.pi / phase_rate if phase_rate > 1e-9 else 1.0
    duration = min(max(duration, 4.0 / rate_hz), max_duration_s)
    run = run_gait(robot, gait, params, duration, rate_hz, speed)
    return gait_torque_report(robot, run.t_s, run.positions_rad, fraction, phase_rad=run.phases_rad,
                              **report_kwargs)


def torque_estimator(robot, *, periods: float = 1.0, rate_hz: float = 25.0):
    """The gait controller's torque check for `robot` (snake_control.gaits.controller.TorqueEstimator):
    (gait, params, fraction) -> TorqueEstimate. One period at 25 Hz is about 0.1 s of work, paid only
    when a parameter changes."""
    from snake_control.gaits.controller import TorqueEstimate

    def estimate(gait: str, params: dict, fraction: float) -> TorqueEstimate:
        report = gait_params_torque_report(robot, gait, params, fraction, periods=periods, rate_hz=rate_hz)
        return TorqueEstimate(float(np.max(report.peak_nm)), bool(report.ok), report.message)
    return estimate


def max_speed_within_torque(robot, gait: str, max_speed: float, params: dict | None = None,
                            fraction: float = 0.8, iterations: int = 5) -> tuple[float, float]:
    """(speed, peak torque / stall at that speed): the highest command of the gait's drive component up
    to max_speed (m/s, rad/s for turn gaits; gaits.reach.cmd_vel_meaning gives the joint-velocity one)
    at which the torque check still passes at `fraction` of stall.

    A faster gait needs more torque to move its links, so the reach is the lower of the two limits.
    Bisection between 0 and max_speed, `iterations` steps (5: within 3 % of max_speed), only when the
    check fails at max_speed. Speed 0 when the gait fails even at 1/32 of max_speed.
    """
    stall = robot.bus.servo.stall_torque_nm

    def peak(speed):
        report = gait_params_torque_report(robot, gait, params, fraction, speed=speed)
        return float(np.max(report.peak_nm)) / stall, bool(report.ok)

    top, ok = peak(max_speed)
    if ok or max_speed <= 0:
        return float(max_speed), top
    good, good_peak, bad = 0.0, 0.0, float(max_speed)
    for _ in range(iterations):
        mid = 0.5 * (good + bad)
        p, ok = peak(mid)
        if ok:
            good, good_peak = mid, p
        else:
            bad = mid
    return good, good_peak
