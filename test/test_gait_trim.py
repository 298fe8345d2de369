"""The closed loop (gaits/trim.py) on a synthetic plant that does k times what it is asked and veers,
its anti-windup, bounds and off switch, its resets through the GaitController, and in MuJoCo that a
calibration 1.5x wrong is corrected to within 10 % of the commanded speed."""
import dataclasses
import math

import pytest

from snake_control.gaits.calibration import Calibration, find_calibration
from snake_control.gaits.controller import OK, WARN, GaitController
from snake_control.gaits.trim import (AT_LIMIT, CANNOT_REACH, NO_PROGRESS, OFF, SKIPPED, TRACKING, WAITING,
                                      TrimLoop, TrimSettings, cycle_average)
from snake_control.robot import load_robot
from snake_control.teleop.command_filter import CommandLimits

DT = 0.01


def plant(loop, seconds, command=(0.2, 0.0, 0.0), k_speed=0.6, k_turn=1.0, veer=0.05, rate=2 * math.pi,
          reachable=True, t0=0.0, pose=(0.0, 0.0, 0.0)):
    """A body doing k_speed times the trimmed forward speed and k_turn times the trimmed yaw rate plus a
    veer (rad/s); the gait's phase rate is `rate` (1 cycle per second). Returns (t, pose, speed, yaw)."""
    x, y, yaw = pose
    t = t0
    v = w = 0.0
    for _ in range(int(round(seconds / DT))):
        loop.update(t, 'forward', command, rate, reachable)
        fwd, _, turn = loop.command('forward', command)
        v, w = k_speed * fwd, k_turn * turn + veer
        x, y, yaw = x + v * math.cos(yaw) * DT, y + v * math.sin(yaw) * DT, yaw + w * DT
        t += DT
        loop.observe(t, x, y, yaw)
    return t, (x, y, yaw), v, w


def test_cycle_average_of_an_arc():
    # 0.2 m/s on a circle at 0.5 rad/s, sampled at 100 Hz: 1 s window.
    ts = [i * DT for i in range(301)]
    xy = [(0.4 * math.sin(0.5 * t), 0.4 * (1 - math.cos(0.5 * t))) for t in ts]
    fwd, left, yaw = cycle_average(ts, xy, [0.5 * t for t in ts], 1.0)
    assert yaw == pytest.approx(0.5, rel=1e-9)
    assert fwd == pytest.approx(0.8 * math.sin(0.25), rel=1e-3) and abs(left) < 1e-3   # the chord per second
    assert cycle_average(ts[:50], xy[:50], ts[:50], 1.0) is None                        # shorter than a cycle


def test_loop_corrects_speed_and_veer_within_a_few_time_constants():
    loop = TrimLoop()                         # tau = 3 cycles = 3 s here
    t, pose, v, w = plant(loop, 0.9)
    assert loop.state().status == WAITING and loop.state().speed_gain == 1.0   # a whole cycle first
    _, _, v, w = plant(loop, 25.0, t0=t, pose=pose)
    s = loop.state()
    assert s.status == TRACKING
    assert v == pytest.approx(0.2, rel=0.02) and s.speed_gain == pytest.approx(1 / 0.6, rel=0.02)
    assert abs(w) < 0.005 and s.turn_trim_rad_s == pytest.approx(-0.05, abs=0.005)
    assert s.measured_drive == pytest.approx(0.2, rel=0.03)


def test_loop_does_not_ring():
    """An integral loop slower than its one-cycle window: the gain approaches 1/k without overshoot."""
    loop = TrimLoop()
    gains = []
    t, pose = 0.0, (0.0, 0.0, 0.0)
    for _ in range(60):
        t, pose, _, _ = plant(loop, 0.5, t0=t, pose=pose, veer=0.0)
        gains.append(loop.state().speed_gain)
    assert max(gains) <= 1 / 0.6 * 1.03
    assert gains == sorted(gains)


def test_saturated_gait_reports_instead_of_winding_up():
    loop = TrimLoop()
    plant(loop, 20.0, reachable=False, veer=0.0)
    s = loop.state()
    assert s.status == CANNOT_REACH and s.speed_gain == 1.0            # nothing integrated upward
    # Once the gait can follow again, the loop takes over from where it was.
    plant(loop, 25.0, t0=20.0, veer=0.0)
    assert loop.state().speed_gain == pytest.approx(1 / 0.6, rel=0.03)
    # A robot going faster than asked can always be trimmed down, saturated or not.
    fast = TrimLoop()
    plant(fast, 25.0, k_speed=1.5, reachable=False, veer=0.0)
    assert fast.state().speed_gain == pytest.approx(1 / 1.5, rel=0.03)


def test_bounds_and_no_progress():
    loop = TrimLoop(TrimSettings(gain_range=(0.5, 2.0)))
    plant(loop, 40.0, k_speed=0.2, veer=0.0)
    assert loop.state().speed_gain == pytest.approx(2.0) and loop.state().status == AT_LIMIT
    stuck = TrimLoop()
    plant(stuck, 10.0, k_speed=-0.5, veer=0.0)                          # going backwards
    assert stuck.state().status == NO_PROGRESS and stuck.state().speed_gain == 1.0


def test_off_switch_and_reset():
    loop = TrimLoop(enabled=False)
    plant(loop, 10.0)
    assert loop.state().status == OFF and loop.command('forward', (0.2, 0.0, 0.1)) == (0.2, 0.0, 0.1)
    loop.set_enabled(True)
    plant(loop, 20.0)
    assert loop.state().speed_gain > 1.3
    loop.reset()
    assert loop.state().speed_gain == 1.0 and loop.state().turn_trim_rad_s == 0.0
    assert loop.command('lateral', (0.0, 0.1, 0.0)) == (0.0, 0.1, 0.0)


def test_command_change_waits_a_cycle():
    loop = TrimLoop()
    t, pose, _, _ = plant(loop, 10.0, veer=0.0)
    g = loop.state().speed_gain
    t, pose, _, _ = plant(loop, 0.9, command=(0.1, 0.0, 0.0), t0=t, pose=pose, veer=0.0)
    assert loop.state().status == WAITING and loop.state().speed_gain == g


# --- through the controller -------------------------------------------------------------------------

@pytest.fixture(scope='module')
def py32():
    return load_robot('pitch_yaw_32')


def _controller(robot, **kw):
    return GaitController(robot, kw.pop('gait', 'serpentine'), period_s=DT,
                          limits=CommandLimits(0.5, 0.5, 1.0, 1.0, 1.0, 2.0), cmd_timeout_s=10.0, **kw)


def _learn(c, t=0.0, seconds=12.0):
    """Run the controller with odometry of a body at 60 % of the scheduler's modelled speed."""
    x = 0.0
    for _ in range(int(seconds / DT)):
        t += DT
        c.offer_command(0.2, 0.0, 0.0, t)
        c.tick(t)
        x += 0.6 * c.scheduler.state().modelled.speed_m_s * DT
        c.offer_odometry(t, x, 0.0, 0.0)
    return t


def test_controller_resets_the_loop_on_switch_and_estop(py32):
    c = _controller(py32)
    assert c.status() is None
    c.start(None)
    t = _learn(c)
    assert c.trim.state().speed_gain > 1.1
    assert dict(c.status().summary()[2])['closed_loop'] == TRACKING
    c.select('lateral_undulation')
    assert c.trim.state().speed_gain == 1.0
    c.select('serpentine')
    _learn(c, t)
    assert c.trim.state().speed_gain > 1.1
    c.engage_estop()
    assert c.trim.state().speed_gain == 1.0


def test_controller_leaves_the_gaits_it_is_told_to_skip_alone(py32):
    c = _controller(py32, closed_loop_skip=('serpentine',))
    c.start(None)
    _learn(c)
    assert c.trim.state().status == SKIPPED and c.trim.state().speed_gain == 1.0
    assert c.scheduler.state().command_forward_m_s == pytest.approx(0.2)     # untrimmed


def test_controller_reports_a_command_it_cannot_reach(py32):
    c = _controller(py32)
    c.start(None)
    t = 0.0
    for _ in range(50):
        t += DT
        c.offer_command(0.0, 0.0, 0.5, t)       # serpentine turns only while it moves
        c.tick(t)
    level, message, values = c.status().summary()
    assert level == WARN and 'cannot reach the command' in message
    assert dict(values)['reachable'] == 'false' and dict(values)['mapping'] == 'calibration'
    for _ in range(50):
        t += DT
        c.offer_command(0.1, 0.0, 0.0, t)
        c.tick(t)
    assert c.status().summary()[0] == OK


def test_closed_loop_corrects_a_wrong_calibration_in_mujoco(py32):
    """Serpentine with a calibration whose strides are 1.5x too long (so open loop it goes at 2/3 of
    the command): the loop, fed by the state estimator on the measured joints, brings it within 10 %
    of the commanded speed (truth)."""
    from snake_control.physics.mjcf import PhysicsOptions
    from snake_control.validation.cmdvel import run_command
    good = find_calibration(py32).gaits['serpentine']
    wrong = dataclasses.replace(good, drive_coef=tuple(1.5 * c for c in good.drive_coef),
                                turn_coef=tuple(1.5 * c for c in good.turn_coef))
    bad = Calibration(py32.name, {'serpentine': wrong})
    command = (0.4, 0.0, 0.0)
    # In the physics the calibration is measured in (`snake calibrate`'s default), from the gait's own shape.
    r = run_command(py32, 'serpentine', command, 30.0, score_s=8.0, options=PhysicsOptions(), warmup_s=0.0,
                    from_rest=False, calibration=bad, closed_loop=True, odometry='estimator', estimate=False)
    a = r.achieved
    print(f'serpentine 1.5x calibration, closed loop: {a.forward_m_s:.4f} m/s of {command[0]}, '
          f'gain {r.trim.speed_gain:.3f}, {r.trim.status}')
    assert r.trim.speed_gain > 1.3
    assert a.forward_m_s == pytest.approx(command[0], rel=0.10)
    assert abs(a.yaw_rate_rad_s) < 0.03
