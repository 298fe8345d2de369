"""Command extrapolation (DriverConfig.command_extrapolation_s): between the commands of a gait slower
than the bus, the goal moves on along the commanded velocity, for at most the bound after a command.

Real SDK, the emulator in its own process over a pty; the goals are the ones the emulated servos saw on
the wire (their write log), in joint radians. The velocity lead is off, so a goal is the command
carried forward and nothing else.
"""
import threading
import time

import numpy as np
import pytest

from rosutil import wait_until

from snake_control.app.sim_bus import sim_bus_args
from snake_control.dynamixel.driver import Driver, DriverConfig
from snake_control.dynamixel.simproc import SimBusProcess
from snake_control.robot import load_robot
from test_dynamixel_velocity_lead import BAUD, ROBOT_YAML, command_at

RATE_HZ = 200
REACH_S = 0.1               # the bound: long against the bus period, so a ramp spans many goal writes
VELOCITY = np.array([2.0, -1.0])        # rad/s; j2 has a flipped direction and an offset
TICK_RAD = 2 * np.pi / 4096


@pytest.fixture(scope='module')
def robot(tmp_path_factory):
    path = tmp_path_factory.mktemp('robot') / 'lead_snake_2.yaml'
    path.write_text(ROBOT_YAML)
    return load_robot(str(path))


@pytest.fixture(scope='module')
def sim(robot):
    with SimBusProcess(sim_bus_args(robot.source, BAUD, spread_rad=0.0)) as s:
        yield s


class Goals:
    """The goal writes the emulated servos saw, as joint angles (rad) per write, with the emulator's times."""

    def __init__(self, sim, d: Driver):
        self.sim, self.d = sim, d

    def since(self, start: int = 0):
        """(times s, goals rad: one row per write of servo 1, each joint's goal at that write), from
        write ``start`` of servo 1 on."""
        last, rows, times = {}, [], []
        for t, sid, ticks, _ in self.sim.goals():
            last[sid] = ticks
            if sid == self.d.ids[0] and len(last) == len(self.d.ids):
                times.append(t)
                rows.append(self.d.ticks_to_joint(np.array([last[i] for i in self.d.ids])))
        return np.array(times[start:]), np.array(rows[start:]).reshape(-1, len(self.d.ids))

    def count(self) -> int:
        return len(self.since()[0])

    def last(self) -> np.ndarray:
        """The last goals written (NaN before the first write: start() need not wait for one)."""
        rows = self.since()[1]
        return rows[-1] if len(rows) else np.full(len(self.d.ids), np.nan)

    def settle_on(self, want_rad, timeout_s=5.0) -> bool:
        """Wait until the last goals are want_rad (within a tick) and ten more writes have gone out."""
        want = np.asarray(want_rad, dtype=float)
        if not wait_until(lambda: np.all(np.abs(self.last() - want) <= 1.5 * TICK_RAD), timeout_s, 0.05):
            return False
        n = self.count()
        return wait_until(lambda: self.count() >= n + 10, timeout_s, 0.05)

    def settled(self, timeout_s=5.0):
        """Wait until the last ten writes carried the same goals (within a tick): those goals, or None."""
        def still():
            rows = self.since()[1][-10:]
            return len(rows) == 10 and np.all(np.ptp(rows, axis=0) <= 1.5 * TICK_RAD)
        return self.last() if wait_until(still, timeout_s, 0.05) else None


def started(robot, sim, pipelined: bool = False, reach_s: float = REACH_S) -> Driver:
    """A driver on the emulator. A loaded host can starve its bus thread or the emulator for a while; a
    hold for stale readings or a tripped bus watchdog would wait for a newer command than these tests
    send: stale_limit is generous and the watchdog off."""
    d = Driver(robot, sim.path, config=DriverConfig(
        rate_hz=RATE_HZ, margin_ms=8.0, velocity_lead_s=0.0, command_extrapolation_s=reach_s,
        command_timeout_s=5.0, stale_limit=200, watchdog_ms=0))
    if pipelined:
        d.pipeline = True
        d.pipeline_spare_ms = 1e6       # pipelined whatever the wire time: this is about behaviour
    d.start()
    return d


def at_rest(d: Driver, goals: Goals, robot, q_rad) -> None:
    """Command q_rad at zero velocity and wait until the resume ramp has ended there."""
    assert d.set_command(robot.joint_names, q_rad, [0.0, 0.0])
    assert goals.settle_on(q_rad), (goals.last(), q_rad, d.mode, d.reasons)
    assert d.mode == 'running' and d._ramp is None, (d.mode, d.reasons, d.events)


@pytest.mark.parametrize('pipelined', [False, True], ids=['sequential', 'pipelined'])
def test_goals_move_along_the_velocity_between_commands_and_stop_at_the_bound(robot, sim, pipelined):
    d = started(robot, sim, pipelined)
    goals = Goals(sim, d)
    try:
        q0 = np.array([-0.3, 0.2])
        at_rest(d, goals, robot, q0)
        # A zero-velocity command moves nothing, however long after it.
        times, rows = goals.since(goals.count() - 10)
        np.testing.assert_allclose(rows, np.tile(q0, (len(rows), 1)), atol=1.5 * TICK_RAD)

        # One command with a velocity, then none: the goals run along it, then stop at q0 + v x bound
        # (decided a cycle ahead, pipelined goals are carried on to when they leave: up to a period more).
        start = goals.count()
        assert d.set_command(robot.joint_names, q0, VELOCITY)
        end = q0 + VELOCITY * REACH_S
        beyond = q0 + VELOCITY * (REACH_S + (1.0 / RATE_HZ if pipelined else 0.0))
        # (the last ten writes agreeing once the run along the velocity has had its time)
        assert wait_until(lambda: goals.count() >= start + int(REACH_S * RATE_HZ) + 5, 5.0, 0.05)
        stop = goals.settled()
        assert stop is not None and d.mode == 'running', (goals.last(), d.mode, d.reasons)
        tol = 1.5 * TICK_RAD
        assert np.all((stop >= np.minimum(end, beyond) - tol) & (stop <= np.maximum(end, beyond) + tol)), \
            (stop, end, beyond)
        times, rows = goals.since(start)
        moving = (rows[:, 0] > q0[0] + 0.1 * VELOCITY[0] * REACH_S) & (rows[:, 0] < end[0] - 0.1 * VELOCITY[0] * REACH_S)
        # 0.1 s of ramp at 200 Hz: about 16 writes between a tenth and nine tenths of the way.
        assert np.count_nonzero(moving) >= 6, rows[:, 0]
        slope = np.polyfit(times[moving], rows[moving], 1)[0]
        np.testing.assert_allclose(slope, VELOCITY, rtol=0.35)
        # Every goal between the command and where it stopped, never past it.
        lo, hi = np.minimum(q0, stop) - tol, np.maximum(q0, stop) + tol
        assert np.all((rows >= lo) & (rows <= hi)), rows
        assert d.counters.extrapolation_capped > 0

        # A command for j1 alone: j2 keeps its own command's time, so it stays where it stopped instead
        # of stepping back to where its last command put it, 0.1 rad away (a pipelined run's odd
        # sequential cycle, after a late reply, carries it a period less far).
        start = goals.count()
        assert d.set_command(['j1'], [q0[0]], [0.0])
        assert goals.settle_on([q0[0], stop[1]]), (goals.last(), d.mode, d.reasons)
        slack = abs(VELOCITY[1]) / RATE_HZ if pipelined else 0.0
        np.testing.assert_allclose(goals.since(start)[1][:, 1], stop[1], atol=tol + slack)
    finally:
        d.stop()


def test_a_stream_slower_than_the_bus_moves_the_goals_every_cycle(robot, sim):
    """A 20 Hz ramp under a 200 Hz bus with the bound at its period: the goals change in nearly every
    write, not once in ten, and follow the ramp's velocity."""
    d = started(robot, sim, reach_s=0.05)
    goals = Goals(sim, d)
    try:
        q0 = np.array([-0.4, 0.3])
        at_rest(d, goals, robot, q0)
        start = goals.count()
        t0 = time.monotonic()
        v = np.array([1.0, -0.5])
        while time.monotonic() - t0 < 0.6:
            d.set_command(robot.joint_names, q0 + v * (time.monotonic() - t0), v)
            time.sleep(0.05)
        d.set_command(robot.joint_names, q0 + v * (time.monotonic() - t0), [0.0, 0.0])
        times, rows = goals.since(start)
        inside = (times > times[0] + 0.1) & (times < times[0] + 0.5)
        steps = np.diff(rows[inside, 0])
        assert len(steps) >= 40, len(steps)
        # Before: only the write after each command changed (one in ten).
        assert np.count_nonzero(np.abs(steps) > 0.5 * TICK_RAD) >= 0.7 * len(steps), steps
        np.testing.assert_allclose(np.polyfit(times[inside], rows[inside], 1)[0], v, rtol=0.3)
    finally:
        d.stop()


def tracking_rms(robot, sim, reach_s, bus_hz=400, gait_hz=100, seconds=2.0, settle_s=1.0) -> float:
    """RMS (rad) of measured minus commanded angle at each fresh reading's stamp, after settle_s: a 1 rad
    0.5 Hz sinusoid with its velocities published at gait_hz to a bus at bus_hz, the velocity lead on."""
    d = Driver(robot, sim.path, config=DriverConfig(rate_hz=bus_hz, margin_ms=3.0, stale_limit=200, watchdog_ms=0,
                                                    command_extrapolation_s=reach_s))   # no holds (started)
    readings = []
    d.on_state = lambda snap: readings.append((snap.stamp_s, snap.position_rad.copy(), snap.fresh.all()))
    d.start()
    stop = threading.Event()
    t0 = time.monotonic()

    def publish():
        while not stop.is_set():
            d.set_command(robot.joint_names, *command_at(time.monotonic() - t0))
            stop.wait(1.0 / gait_hz)
    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: readings and readings[-1][0] - t0 > settle_s + seconds, settle_s + seconds + 5.0)
    finally:
        stop.set()
        thread.join()
        d.stop()
    errors = [q - command_at(stamp - t0)[0] for stamp, q, fresh in readings if fresh and stamp - t0 > settle_s]
    assert len(errors) > 0.3 * seconds * bus_hz, f'only {len(errors)} fresh readings'
    return float(np.sqrt(np.mean(np.square(errors))))


def test_a_100_hz_gait_under_a_400_hz_bus_tracks_as_well_as_one_at_400_hz(robot, sim):
    """Without extrapolation the servos' profiles plan to stop at every step of the goal, four bus cycles
    apart; carried on, the goals move every cycle. Measured on the motor model: 0.076-0.082 rad RMS
    without, 0.017-0.018 with, 0.016 for a gait publishing at 400 Hz."""
    without = tracking_rms(robot, sim, 0.0)
    carried = tracking_rms(robot, sim, 0.01)
    print(f'RMS tracking error, a 100 Hz gait under a 400 Hz bus: {without:.4f} rad without extrapolation, '
          f'{carried:.4f} rad with 10 ms')
    assert carried < 0.5 * without


def test_estop_and_hold_do_not_extrapolate(robot, sim):
    d = started(robot, sim)
    goals = Goals(sim, d)
    writes = int(2 * REACH_S * RATE_HZ)     # twice as long as a command is ever carried on
    try:
        q0 = np.array([0.3, -0.2])
        at_rest(d, goals, robot, q0)
        # Estop while a command with a velocity is fresh: the hold keeps the present pose, and the goals
        # stay there for longer than the bound although that command's velocity is still the last one.
        assert d.set_command(robot.joint_names, q0, VELOCITY)
        d.set_estop(True)
        assert wait_until(lambda: d.mode == 'hold', 5.0)
        hold = d._hold_goal.copy()
        # (from the first write the servos logged at the hold: a write in flight may log late)
        assert goals.settle_on(hold), (goals.last(), hold)
        start = goals.count()
        assert wait_until(lambda: goals.count() >= start + writes, 5.0, 0.05)
        rows = goals.since(start)[1]
        np.testing.assert_allclose(rows, np.tile(hold, (len(rows), 1)), atol=1.5 * TICK_RAD)
        # Released, the stop waits for a fresh command: the old one, with its velocity, moves nothing.
        d.set_estop(False)
        start = goals.count()
        assert wait_until(lambda: goals.count() >= start + writes, 5.0, 0.05)
        rows = goals.since(start)[1]
        np.testing.assert_allclose(rows, np.tile(hold, (len(rows), 1)), atol=1.5 * TICK_RAD)
        assert d.mode == 'hold', d.reasons
    finally:
        d.stop()


def test_config_validation():
    for bad in (-0.01, 0.5, float('nan'), float('inf')):
        with pytest.raises(ValueError, match='command_extrapolation_s'):
            DriverConfig(command_extrapolation_s=bad).validate()
    DriverConfig(command_extrapolation_s=0.0).validate()
    DriverConfig(command_extrapolation_s=0.1).validate()
