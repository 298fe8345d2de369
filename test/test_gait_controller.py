"""GaitController without ROS: the e-stop's hold and release, the torque check on parameter changes,
gait selection and parameters, the tick's bounded dt, and the gait/state summary. Times are a fake
monotonic clock driven by the test."""
import math

import numpy as np
import pytest

from snake_control.gaits import GaitScheduler
from snake_control.gaits.controller import ERROR, OK, GaitController, TorqueEstimate
from snake_control.robot import load_robot
from snake_control.teleop.command_filter import CommandLimits

PERIOD_S = 0.01
LIMITS = CommandLimits(0.15, 0.1, 0.8, 0.3, 0.3, 2.0)


@pytest.fixture(scope='module')
def py32():
    return load_robot('pitch_yaw_32')


def controller(robot, **kw):
    kw.setdefault('period_s', PERIOD_S)
    kw.setdefault('limits', LIMITS)
    kw.setdefault('cmd_timeout_s', 0.5)
    return GaitController(robot, kw.pop('gait', 'serpentine'), **kw)


def run(c, t0_s, duration_s, command=None):
    """Tick every period from t0_s for duration_s (offering command each tick); returns (t, outputs)."""
    outs, t = [], t0_s
    for _ in range(int(round(duration_s / PERIOD_S))):
        t += PERIOD_S
        if command is not None:
            c.offer_command(*command, t)
        outs.append(c.tick(t))
    return t, outs


def test_waits_for_a_start_pose(py32):
    c = controller(py32)
    assert not c.started and c.tick(0.0) is None and c.status() is None
    pose = np.clip(np.full(py32.n_joints, 0.2), py32.lower_rad, py32.upper_rad)
    c.start(pose)
    out = c.tick(PERIOD_S)
    np.testing.assert_allclose(out.positions_rad, pose, atol=1e-4)     # at rest where it was


def test_estop_holds_the_last_pose_and_release_restarts_there_at_rest(py32):
    c = controller(py32)
    c.start(None)
    t, outs = run(c, 0.0, 2.0, (0.1, 0.0, 0.0))
    last = outs[-1].positions_rad
    assert np.abs(outs[-1].velocities_rad_s).max() > 0.05              # moving before the stop
    assert c.engage_estop() and not c.engage_estop()                   # engaged once
    hold = c.hold()
    np.testing.assert_array_equal(hold.positions_rad, last)
    assert not hold.velocities_rad_s.any()
    t, held = run(c, t, 0.5, (0.1, 0.0, 0.0))                          # commands are ignored
    for out in held:
        np.testing.assert_array_equal(out.positions_rad, last)
        assert not out.velocities_rad_s.any()
    assert c.status().summary()[0] == ERROR
    assert c.commands.current == (0.0, 0.0, 0.0)

    assert c.release_estop() and not c.release_estop()
    assert c.scheduler.state().target_gait == 'serpentine'
    t, resumed = run(c, t, 2.0, (0.1, 0.0, 0.0))
    # From rest at the held pose: the first step is tiny (no jump back to the old speed) ...
    first = resumed[0]
    assert np.abs(first.positions_rad - last).max() < 1e-3
    assert np.abs(first.velocities_rad_s).max() < 0.05
    # ... and the gait moves again.
    assert np.abs(resumed[-1].positions_rad - last).max() > 1e-2


def test_estop_before_any_tick_has_nothing_to_hold(py32):
    c = controller(py32)
    c.start(None)
    assert c.engage_estop()
    assert c.hold() is None and c.tick(0.01) is None
    assert c.release_estop()
    assert c.tick(0.02) is not None


def test_release_keeps_the_gait_it_was_heading_for(py32):
    c = controller(py32)
    c.start(None)
    t, _ = run(c, 0.0, 0.2)
    assert c.select('sidewinding') is None
    t, _ = run(c, t, 0.1)
    c.engage_estop()
    c.release_estop()
    assert c.scheduler.state().target_gait == 'sidewinding'      # blending in from the held pose


def test_a_late_tick_advances_at_most_three_periods(py32):
    c = controller(py32)
    c.start(None)
    c.offer_command(0.1, 0.0, 0.0, 0.0)
    t, _ = run(c, 0.0, 0.3, (0.1, 0.0, 0.0))
    before = c.scheduler.state().t_s
    c.offer_command(0.1, 0.0, 0.0, t + 5.0)
    c.tick(t + 5.0)                                                    # five seconds late
    assert c.scheduler.state().t_s - before == pytest.approx(3 * PERIOD_S)


def test_select_and_parameters(py32):
    c = controller(py32, overrides={'sidewinding': {'A_pitch': 0.1}})
    assert c.select('moonwalk') and c.select(None) and c.rejected == 2
    assert c.select('rolling') is None and c.initial_gait == 'rolling'  # before start: where to start
    c.select('serpentine')
    c.start(None)
    assert c.param_refusal('serpentine', 'B1', math.nan) == 'expected a finite number'
    assert c.param_refusal('serpentine', 'B1', True) == 'expected a finite number'
    assert 'amplitude' in c.param_refusal('serpentine', 'amplitude', 1.0)
    assert c.param_refusal('serpentine', 'B1', 4.0) is None
    c.set_param('serpentine', 'B1', 4.0)
    assert c.scheduler.state().params['B1'] == 4.0 and c.scheduler.state().layers == 2
    c.set_param('sidewinding', 'A_yaw', 0.5)                          # not running: kept for later
    assert c.scheduler.state().target_gait == 'serpentine'
    assert c.select('sidewinding') is None
    params = c.scheduler.state().params
    assert params['A_pitch'] == 0.1 and params['A_yaw'] == 0.5


class FakeTorques:
    """A torque estimator whose peak is the parameter 'A_pitch' in N m, over the limit above 0.3."""

    def __init__(self):
        self.calls = []

    def __call__(self, gait, params, fraction):
        self.calls.append(dict(params))
        peak = params.get('A_pitch', 0.3) * 10
        return TorqueEstimate(peak, peak <= 3.0 * fraction / 0.8, f'torque check FAILED ({peak:.1f} N m).')


def test_torque_check_refuses_only_changes_that_raise_an_excess_peak(py32):
    torques = FakeTorques()
    c = controller(py32, torque_fraction=0.8, torque_estimator=torques,
                   overrides={'sidewinding': {'A_pitch': 0.4}})           # already over the line
    reason = c.param_refusal('sidewinding', 'A_pitch', 0.5)
    assert 'FAILED' in reason and 'Peak 5.00 N m against 4.00 N m now' in reason
    assert c.param_refusal('sidewinding', 'A_pitch', 0.35) is None       # over, but lower: tuning down
    assert c.param_refusal('sidewinding', 'A_pitch', 0.2) is None        # within the limit
    # The peak of the parameters in force is computed once and cached.
    assert torques.calls.count({'A_pitch': 0.4}) == 1
    c.torque_fraction = 0.0                                               # disabled
    assert c.param_refusal('sidewinding', 'A_pitch', 0.9) is None


def test_torque_check_with_the_dynamics(py32):
    from snake_control.dynamics.gait_check import torque_estimator
    c = controller(py32, torque_fraction=0.8, torque_estimator=torque_estimator(py32))
    # Sidewinding at its defaults stays under 80 % of stall (seed 001 dynamics); a much bigger
    # vertical wave lifts the body far enough to need several times that.
    heavy = c.param_refusal('sidewinding', 'A_pitch', 0.7)
    assert heavy and 'torque check FAILED' in heavy and 'refused' in heavy
    assert c.param_refusal('sidewinding', 'A_pitch', 0.1) is None


def test_status_summary(py32):
    c = controller(py32)
    c.start(None)
    run(c, 0.0, 0.5, (0.05, 0.0, 0.0))
    level, message, values = c.status().summary()
    values = dict(values)
    assert level == OK and message == 'serpentine'
    assert values['command_forward_m_s'] == pytest.approx(0.05) and values['estop'] == 'false'
    assert values['phase_rate_rad_s'] > 0 and 'serpentine.B1' in values
    c.select('sidewinding')
    assert c.status().summary()[1] == 'serpentine -> sidewinding'


def test_a_non_finite_tick_is_never_forwarded(py32):
    c = controller(py32)
    c.start(None)
    good = c.tick(PERIOD_S).positions_rad

    class Broken(GaitScheduler):
        def step(self, dt_s):
            tick = super().step(dt_s)
            tick.positions_rad = np.full_like(tick.positions_rad, np.nan)
            return tick
    c.scheduler.__class__ = Broken
    out = c.tick(2 * PERIOD_S)
    np.testing.assert_array_equal(out.positions_rad, good)
    assert not out.velocities_rad_s.any() and 'non-finite' in out.warning


def test_a_shape_past_more_joint_limits_is_refused(py32):
    from snake_control.gaits.feasibility import feasible_ranges
    c = controller(py32)
    c.start(None)
    lo, hi = feasible_ranges(py32, 'serpentine')['B1']
    reason = c.param_refusal('serpentine', 'B1', hi + 5.0)          # inside the catalogue's range
    assert reason and 'past their limits' in reason and 'against 0 now' in reason
    assert c.param_refusal('serpentine', 'B1', hi - 0.5) is None
