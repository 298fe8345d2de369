"""Robustness of the bus and the driver against a slow other end, garbled health data and closed pipes
(real SDK, real pty, the emulator in its own process)."""
import math
import threading
import time

import numpy as np

from snake_control.dynamixel.bus import CommError, ServoBus
from snake_control.dynamixel.driver import Driver, DriverConfig
from snake_control.dynamixel.emulator import BusEmulator
from snake_control.dynamixel.models import CONTROL_TABLE, SERVO_MODELS
from snake_control.dynamixel.plant import MotorModel
from snake_control.dynamixel.readings import STATE_BLOCK
from snake_control.app.sim_bus import sim_bus_args
from snake_control.dynamixel.simproc import SimBusProcess
from snake_control.robot import load_robot

BAUD = 4_000_000
GOAL = CONTROL_TABLE['goal_position'].address


def test_full_pty_buffer_waits_instead_of_reporting_an_unplug():
    # The emulator stops reading (a stalled host) while the bus keeps writing: the pty buffer fills
    # and write() says EAGAIN. That is a slow peer, not a vanished adapter: no PortGone, and the bus
    # works again once the peer reads.
    with SimBusProcess(['--servos', '4', '--baud', str(BAUD)]) as sim:
        bus = ServoBus(sim.path, BAUD, margin_ms=20.0).open()
        try:
            bus.port.write_wait_s = 0.05
            assert bus.ping(1) is not None
            sim.command('stall 1.5')
            data = {sid: (2048).to_bytes(4, 'little') for sid in (1, 2, 3, 4)}
            sent = failed = 0
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end:
                try:
                    bus.sync_write(GOAL, 4, data)
                    sent += 1
                except CommError:
                    failed += 1          # the buffer stayed full for write_wait_s: a transmit failure
            assert failed > 0, f'the pty buffer never filled ({sent} writes went out)'
            time.sleep(0.8)              # the stall ends; the emulator reads the backlog
            bus.drain(quiet_ms=50, max_ms=2000)
            assert any(bus.ping(1) is not None for _ in range(5))
        finally:
            bus.close()


class SlowPhysics(MotorModel):
    """A plant whose every step takes 20 ms of wall time without holding the interpreter lock (like
    MuJoCo on a busy host)."""

    threaded = True

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        time.sleep(0.02)
        return super().step(dt_s, goals_rad_by_id, torque_on_by_id)


def _retry(fn, *args):
    """Set-up exchanges, not what a test measures: a lost reply on a busy host is tried again."""
    for _ in range(9):
        try:
            return fn(*args)
        except CommError:
            pass
    return fn(*args)


def test_slow_physics_steps_never_delay_replies_beyond_the_wire_time():
    # Replies must leave at wire time + return delay, whatever the physics costs: a physics step in
    # the serving loop would make every one of these reads miss a 4 ms margin.
    ids = [1, 2, 3, 4]
    emu = BusEmulator(ids, SERVO_MODELS['XM430-W350'], BAUD, plant=SlowPhysics(), return_delay=0)
    thread = threading.Thread(target=emu.serve_forever, daemon=True)
    thread.start()
    bus = ServoBus(emu.path, BAUD, margin_ms=4.0).open()
    try:
        for sid in ids:
            _retry(bus.write_register, sid, 'torque_enable', 1)
        _retry(bus.write_register, 1, 'goal_position', 2048 + 300)
        ok, tries = 0, 60
        for _ in range(tries):
            try:
                bus.read_register(1, 'present_position')
                ok += 1
            except CommError:
                pass
            time.sleep(0.003)
        # (Behind a 20 ms physics step every read would miss; a loaded host may cost a few.)
        assert ok >= 0.5 * tries, f'only {ok} of {tries} reads answered in time'
        # ... and the physics still moves the servo.
        assert abs(_retry(bus.read_register, 1, 'present_position') - 2048) > 10
    finally:
        bus.close()
        emu.stop_requested = True
        thread.join(timeout=5)
        emu.close()


# ------------------------------------------------------------------------------ garbage never published

def _robot(tmp_path):
    from test_dynamixel_driver import ROBOT_YAML
    path = tmp_path / 'test_snake_4.yaml'
    path.write_text(ROBOT_YAML)
    return load_robot(str(path))


def _stream(driver, robot, seconds, on_cycle=None):
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        t = time.monotonic() - t0
        driver.set_command(robot.joint_names, 0.3 * np.sin(2 * math.pi * 0.5 * t + np.arange(robot.n_joints)))
        if on_cycle:
            on_cycle()
        time.sleep(0.02)


def test_garbled_health_reading_keeps_the_last_good_value_marked_stale(tmp_path):
    # Servo 2's voltage slot is rerouted to its model number (1020 -> "102.0 V"), as a misrouted or
    # garbled reply would read: the driver must keep the last good voltage, mark it stale and count.
    robot = _robot(tmp_path)
    with SimBusProcess(sim_bus_args(robot, BAUD, spread_rad=0.3)) as sim:
        d = Driver(robot, sim.path, config=DriverConfig(rate_hz=50, margin_ms=8.0, health_period_s=0.001))
        d.start()
        try:
            servos = d.diagnostics().servos
            # Every servo's health is read at start-up: nothing unknown, nothing NaN.
            assert all(s.voltage_v == 12.0 and 0 < s.temperature_c < 100 for s in servos)
            # High byte first: each step on the way reads an impossible voltage (88.8 V, then 102.0 V).
            # Indirect Address n + 1 is the temperature, n + 2 and n + 3 the voltage (n: state block bytes).
            n = STATE_BLOCK.size
            sim.command(f'set 2 indirect_address_{n + 3} 1')
            sim.command(f'set 2 indirect_address_{n + 2} 0')
            seen = []
            _stream(d, robot, 1.0, lambda: seen.append(d.diagnostics().servos[1]))
            assert all(s.voltage_v == 12.0 for s in seen), {s.voltage_v for s in seen}
            last = d.diagnostics().servos[1]
            assert last.health_stale and last.health_failures >= 3
            assert d.counters.rejected_readings >= 3
            assert not any(s.health_stale for k, s in enumerate(d.diagnostics().servos) if k != 1)
        finally:
            d.stop()


def test_garbled_state_reading_is_never_published(tmp_path):
    # Servo 3's velocity top byte is rerouted to its model number's low byte (0xFC): an absurd velocity
    # of about -6e7 units. It must make that servo stale, never reach joint_states.
    robot = _robot(tmp_path)
    with SimBusProcess(sim_bus_args(robot, BAUD, spread_rad=0.3)) as sim:
        d = Driver(robot, sim.path, config=DriverConfig(rate_hz=50, margin_ms=8.0, stale_limit=1000))
        d.start()
        try:
            _stream(d, robot, 0.3)
            sim.command('set 3 indirect_address_7 0')
            snaps = []
            _stream(d, robot, 0.6, lambda: snaps.append(d.state()))
            for snap in snaps:
                assert np.all(np.abs(snap.velocity_rad_s) < 30.0), snap.velocity_rad_s
                assert np.all(np.abs(snap.effort) <= 10.0)
            assert not snaps[-1].fresh[2] and snaps[-1].fresh[[0, 1, 3]].all()
            assert d.counters.rejected_readings > 5
        finally:
            d.stop()


def test_stop_keeps_trying_a_servo_that_misses_the_torque_off(tmp_path):
    # Servo 3 hears nothing for 0.8 s just as the driver stops (a noise burst, a brown-out): the other
    # servos confirm torque off at once, servo 3 is tried again until it confirms too. Torque must end
    # off everywhere; a fixed few rounds would give up while it is still silent, torque on.
    robot = _robot(tmp_path)
    with SimBusProcess(sim_bus_args(robot, BAUD, spread_rad=0.3)) as sim:
        d = Driver(robot, sim.path, config=DriverConfig(rate_hz=50, margin_ms=8.0))
        d.start()
        _stream(d, robot, 0.3)
        sim.command('silent 3 0.8')
        d.stop()
        servos = sim.state()['servos']
        assert not any(v['torque'] for v in servos.values()), {k: v['torque'] for k, v in servos.items()}
        assert not any(s.torque for s in d.servos)
