"""The driver's pure parts without a bus: safety.decide, the resume ramp, the register-block decoder."""
import numpy as np
import pytest

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.driver_config import DriverConfig, check_watchdog, default_watchdog_ms
from snake_control.dynamixel.readings import HEALTH_BLOCK, INDIRECT_SOURCES, STATE_BLOCK
from snake_control.dynamixel.safety import RampState, SafetyInputs, decide, ramp

NAMES = ('j1', 'j2', 'j3')


def inputs(**kw):
    base = dict(now_s=10.0, command_rad=np.array([0.1, 0.2, 0.3]), command_received_s=9.99, estop=False,
                names=NAMES, hardware_error=np.zeros(3, int), alert=np.zeros(3, bool),
                stale_cycles=np.zeros(3, int), present_rad=np.array([0.0, -0.5, 0.5]), hold_goal_rad=None,
                previous_mode='running', resume_after_s=0.0, stale_limit=5, stale_policy='hold',
                alert_policy='hold', estop_policy='hold', command_timeout_s=0.5)
    base.update(kw)
    return SafetyInputs(**base)


def test_running_passes_the_command():
    d = decide(inputs())
    assert d.mode == 'running' and d.reasons == () and not d.entered
    np.testing.assert_array_equal(d.goal_rad, [0.1, 0.2, 0.3])


def test_each_rule_holds_at_the_present_pose_and_says_why():
    for kw, reason in ((dict(estop=True), 'estop'),
                       (dict(command_received_s=9.0), 'command older than the timeout'),
                       (dict(command_rad=None), 'waiting for the first command'),
                       (dict(resume_after_s=9.995), 'waiting for a new command'),
                       (dict(stale_cycles=np.array([0, 5, 0])), 'j2 stale for 5 cycles'),
                       (dict(alert=np.array([True, False, False]),
                             hardware_error=np.array([P.HW_OVERHEATING, 0, 0])), 'alert on j1: overheating')):
        d = decide(inputs(**kw))
        assert d.mode == 'hold' and d.entered and reason in d.reasons, (kw, d)
        np.testing.assert_array_equal(d.goal_rad, [0.0, -0.5, 0.5])   # the present pose, never the command


def test_a_hold_keeps_the_pose_it_began_with():
    d = decide(inputs(estop=True, previous_mode='hold', hold_goal_rad=np.array([1.0, 1.0, 1.0])))
    assert d.mode == 'hold' and not d.entered
    np.testing.assert_array_equal(d.goal_rad, [1.0, 1.0, 1.0])


def test_torque_off_wins_and_stays_until_rearmed():
    d = decide(inputs(stale_cycles=np.array([9, 0, 0]), stale_policy='torque_off', estop=True))
    assert d.mode == 'torque_off' and d.entered
    d = decide(inputs(previous_mode='torque_off'))     # everything fine again: still off
    assert d.mode == 'torque_off' and not d.entered


def test_resume_ramp_stays_within_velocity_and_acceleration_limits_and_lands_on_the_command():
    dt, v_max, a_max = 0.01, np.array([4.0, 4.0, 2.0]), np.array([40.0, 40.0, 10.0])
    held = np.array([0.0, -0.5, 0.5])
    command = np.array([0.86, 0.2, -0.3])
    st = RampState(held.copy(), np.zeros(3), command.copy())
    goals, done, k = [held], False, 0
    while not done and k < 1000:
        goal, done = ramp(st, command, dt, v_max, a_max)
        goals.append(goal)
        k += 1
    assert done, 'the ramp never reached the command'
    g = np.array(goals)
    v = np.diff(g, axis=0) / dt
    assert np.all(np.abs(v) <= v_max * (1 + 1e-6))
    # Within the acceleration limit; the step that lands on the command may brake up to 20 % harder
    # (the discrete braking curve meets the command between two steps).
    accel = np.abs(np.diff(v, axis=0)) / dt
    assert np.all(accel <= 1.2 * a_max), accel.max(axis=0)
    np.testing.assert_allclose(g[-1], command)
    assert np.max(np.abs(g[1] - held)) <= a_max.max() * dt * dt + 1e-12     # starts at rest


def test_ramp_follows_a_moving_command_and_hands_over():
    dt, v_max, a_max = 0.01, np.full(1, 4.0), np.full(1, 40.0)
    st = RampState(np.zeros(1), np.zeros(1), np.array([0.5]))
    done, t = False, 0.0
    while not done and t < 5.0:
        t += dt
        _, done = ramp(st, np.array([0.5 + 1.0 * t]), dt, v_max, a_max)
    assert done and t < 2.0


def test_register_blocks_decode_by_name_and_map_every_byte():
    assert STATE_BLOCK.size == 14 and HEALTH_BLOCK.size == 3
    assert INDIRECT_SOURCES[:3] == [70, 126, 127] and INDIRECT_SOURCES[11:14] == [98, 120, 121]
    assert INDIRECT_SOURCES[-3:] == [146, 144, 145]
    data = bytes([0x20]) + (-5).to_bytes(2, 'little', signed=True) + (-7).to_bytes(4, 'little', signed=True) \
        + (3000).to_bytes(4, 'little', signed=True) + bytes([0xFF]) + (32767).to_bytes(2, 'little')
    v = STATE_BLOCK.decode(data)
    assert v == {'hardware_error_status': 0x20, 'present_current': -5, 'present_velocity': -7,
                 'present_position': 3000, 'bus_watchdog': -1, 'realtime_tick': 32767}
    with pytest.raises(ValueError):
        STATE_BLOCK.decode(data[:-1])


def test_watchdog_default_and_range():
    assert default_watchdog_ms(100.0) == 100 and default_watchdog_ms(10.0) == 500
    assert default_watchdog_ms(0.01) == 2540
    check_watchdog(100, 100.0)
    with pytest.raises(ValueError, match='watchdog_ms 40'):
        check_watchdog(40, 50.0)
    with pytest.raises(ValueError, match='watchdog_ms'):
        DriverConfig(watchdog_ms=5000).validate()
