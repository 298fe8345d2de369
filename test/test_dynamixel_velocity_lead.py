"""The velocity lead (DriverConfig.velocity_lead_s): goal = commanded position + velocity x lead.

Tracking is measured through the real SDK against the emulator in its own process (its motor model,
snake_control.dynamixel.plant.MotorModel): a gait-like sinusoid with its velocities, the RMS error of the
measured joint angle against the command at the measurement's time, with the lead and without.
"""
import math
import threading
import time

import numpy as np
import pytest

from rosutil import wait_until

from snake_control.app.sim_bus import sim_bus_args
from snake_control.dynamixel.driver import Driver, DriverConfig
from snake_control.dynamixel.simproc import SimBusProcess
from snake_control.robot import load_robot

BAUD = 4_000_000
RATE_HZ = 100
# The shipped robots' joint limits (velocity 4 rad/s, acceleration 40 rad/s^2, 100 Hz), with room for
# a 1 rad sinusoid inside the position limits.
ROBOT_YAML = """schema: 1
name: lead_snake_2
kind: pitch_yaw
description: two joints, one with an offset and a flipped direction
link: {length_m: 0.07, radius_m: 0.03, mass_kg: 0.14}
bus: {servo_model: XM430-W350, port: /dev/null, baud: 4000000, control_rate_hz: 100}
joint_defaults: {lower_rad: -1.5, upper_rad: 1.5, velocity_limit_rad_s: 4.0, acceleration_limit_rad_s2: 40.0,
                 offset_rad: 0.0, direction: 1}
joints:
  - {name: j1, axis: pitch, id: 1}
  - {name: j2, axis: yaw, id: 2, direction: -1, offset_rad: 0.3}
"""
AMPLITUDE_RAD = 1.0
FREQUENCY_HZ = 0.5
PHASES = np.array([0.0, 1.0])


@pytest.fixture(scope='module')
def robot(tmp_path_factory):
    path = tmp_path_factory.mktemp('robot') / 'lead_snake_2.yaml'
    path.write_text(ROBOT_YAML)
    return load_robot(str(path))


def command_at(t):
    w = 2 * math.pi * FREQUENCY_HZ
    return AMPLITUDE_RAD * np.sin(w * t + PHASES), AMPLITUDE_RAD * w * np.cos(w * t + PHASES)


def tracking_rms(sim_path, robot, lead_s, seconds=3.0, settle_s=1.0, velocities=True, attempts=3):
    """RMS (rad) over joints and cycles of measured - commanded angle, the command taken at each
    reading's stamp, after settle_s (the resume ramp and the start-up transient). A run in which the
    driver held after settling (a host that starved the bus thread past the bus watchdog, as a CI run
    did) measures the hold, not the lead: it is run again, up to ``attempts`` times."""
    for _ in range(attempts):
        rms, held = _tracking_run(sim_path, robot, lead_s, seconds, settle_s, velocities)
        if not held:
            return rms
    return rms


def _tracking_run(sim_path, robot, lead_s, seconds, settle_s, velocities):
    """(RMS tracking error, whether the driver left 'running' after settle_s)."""
    d = Driver(robot, sim_path, config=DriverConfig(rate_hz=RATE_HZ, margin_ms=8.0, velocity_lead_s=lead_s))
    readings = []
    d.on_state = lambda snap: readings.append((snap.stamp_s, snap.position_rad.copy(), snap.fresh.all(),
                                               d.mode))
    d.start()
    try:
        t0 = time.monotonic()
        # The gait's publisher: the sinusoid at its own 100 Hz, not synchronised with the bus loop.
        stop = threading.Event()

        def publish():
            while not stop.is_set():
                q, v = command_at(time.monotonic() - t0)
                d.set_command(robot.joint_names, q, v if velocities else None)
                stop.wait(0.01)
        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        try:
            assert wait_until(lambda: d.mode == 'running', 5.0)
            assert wait_until(lambda: readings and readings[-1][0] - t0 > settle_s + seconds,
                              timeout_s=settle_s + seconds + 5.0)
        finally:
            stop.set()
            thread.join()
    finally:
        d.stop()
    settled = [r for r in readings if r[0] - t0 > settle_s]
    errors = [pos - command_at(stamp - t0)[0] for stamp, pos, fresh, _ in settled if fresh]
    assert len(errors) > 0.5 * seconds * RATE_HZ, f'only {len(errors)} fresh readings'
    return float(np.sqrt(np.mean(np.square(errors)))), any(mode != 'running' for *_, mode in settled)


def test_lead_cuts_tracking_error_on_the_emulator_motor_model(robot):
    with SimBusProcess(sim_bus_args(robot.source, BAUD, spread_rad=0.0)) as sim:
        without = tracking_rms(sim.path, robot, 0.0)
        with_lead = tracking_rms(sim.path, robot, DriverConfig.velocity_lead_s)
        # Velocities left out (a publisher without them): no lead, whatever velocity_lead_s says.
        no_velocities = tracking_rms(sim.path, robot, DriverConfig.velocity_lead_s, velocities=False)
    print(f'motor model RMS tracking error: {without:.4f} rad without the lead, {with_lead:.4f} rad with '
          f'{DriverConfig.velocity_lead_s:g} s, {no_velocities:.4f} rad without velocities')
    # Measured: about 0.10 rad without, 0.02 rad with 0.04 s.
    assert with_lead < 0.5 * without
    # Without velocities the goals carry no lead: clearly worse than with it. (Compared with the lead, not
    # with the first run: a loaded host can double one run's error, and the runs take turns on it.)
    assert no_velocities > 1.5 * with_lead


@pytest.mark.slow
def test_lead_cuts_tracking_error_on_the_mujoco_plant(robot):
    with SimBusProcess(sim_bus_args(robot.source, BAUD, physics='mujoco', spread_rad=0.0)) as sim:
        without = tracking_rms(sim.path, robot, 0.0)
        with_lead = tracking_rms(sim.path, robot, DriverConfig.velocity_lead_s)
    print(f'MuJoCo plant RMS tracking error: {without:.4f} rad without the lead, {with_lead:.4f} rad with '
          f'{DriverConfig.velocity_lead_s:g} s')
    # Measured: about 0.19 rad without, 0.11 rad with 0.04 s (this plant lags more: its optimum is ~0.09 s).
    assert with_lead < 0.8 * without


def test_lead_is_clipped_to_limits_and_never_applied_to_a_hold(robot):
    lead = 0.2
    with SimBusProcess(sim_bus_args(robot.source, BAUD, spread_rad=0.0)) as sim:
        d = Driver(robot, sim.path, config=DriverConfig(rate_hz=RATE_HZ, margin_ms=8.0, velocity_lead_s=lead,
                                                        command_timeout_s=5.0))
        d.start()
        try:
            lo, hi = d.tick_limits()

            def last_goals():
                last = {}
                for _, sid, ticks, _ in sim.goals():
                    last[sid] = ticks
                return np.array([last[sid] for sid in d.ids])

            def settle_on(q_rad, v_rad_s, goal_rad):
                want = d.joint_to_ticks(np.asarray(goal_rad))
                d.set_command(robot.joint_names, q_rad, v_rad_s)
                assert wait_until(lambda: d.mode == 'running' and np.all(np.abs(last_goals() - want) <= 1), 5.0), \
                    (last_goals(), want)

            # A wild velocity leads by at most velocity_limit x lead (4 x 0.2 = 0.8 rad).
            settle_on([0.0, 0.0], [100.0, -100.0], [0.8, -0.8])
            # A lead past the joint limit stops at the limit.
            settle_on([1.4, -1.4], [4.0, -4.0], [1.5, -1.5])
            assert np.all((last_goals() >= lo) & (last_goals() <= hi))
            # A command with a bad velocity is refused whole.
            assert not d.set_command(robot.joint_names, [0.0, 0.0], [math.nan, 0.0])
            assert not d.set_command(robot.joint_names, [0.0, 0.0], [1.0])
            # Led to 0.3 + 2 x 0.2 = 0.7 rad; once the joints stand there, estop holds them where they are:
            # the hold goal is the present position, with no lead added again.
            settle_on([0.3, -0.3], [2.0, -2.0], [0.7, -0.7])
            assert wait_until(lambda: np.allclose(d.state().position_rad, [0.7, -0.7], atol=0.01), 5.0)
            n_goals = len(sim.goals())
            d.set_estop(True)
            assert wait_until(lambda: d.mode == 'hold' and len(sim.goals()) > n_goals + 10, 5.0)
            np.testing.assert_allclose(d.ticks_to_joint(last_goals()), [0.7, -0.7], atol=0.01)
        finally:
            d.stop()


def test_config_validation():
    for bad in (-0.01, 0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match='velocity_lead_s'):
            DriverConfig(velocity_lead_s=bad).validate()
    DriverConfig(velocity_lead_s=0.0).validate()
