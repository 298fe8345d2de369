"""A robot on two buses: the emulator serving two ptys (one plant), the multi-bus driver (a process per
bus, and the thread-per-bus option) through the real SDK.

Each bus is checked at start, its Bus Watchdog armed and its torque turned off at every exit; the
buses publish one joint_states with every joint; a fault on one bus stops the other too; a bus process
that dies is a fault for all, and a parent that dies leaves every servo's torque off.
"""
import time

import numpy as np
import pytest

from snake_control.app.sim_bus import sim_bus_args
from snake_control.dynamixel.driver import DriverConfig, StartupError
from snake_control.dynamixel.multibus import MultiBusDriver, make_driver
from snake_control.dynamixel.procbus import ProcessMultiBusDriver
from snake_control.dynamixel.safety import SafetyInputs, decide
from snake_control.dynamixel.simproc import SimBusProcess
from snake_control.robot import load_robot

ROBOT_YAML = """schema: 1
name: test_two_buses_4
kind: pitch_yaw
link: {length_m: 0.07, radius_m: 0.03, mass_kg: 0.14}
bus: {servo_model: XM430-W350, baud: 4000000, control_rate_hz: 50}
buses:
  - {port: /dev/null-a, joints: j1..j2}
  - {port: /dev/null-b, joints: [j3, j4], baud: 2000000}
joint_defaults: {lower_rad: -1.0, upper_rad: 1.0, velocity_limit_rad_s: 4.0, acceleration_limit_rad_s2: 40.0,
                 offset_rad: 0.0, direction: 1}
joints:
  - {name: j1, axis: pitch, id: 1}
  - {name: j2, axis: yaw, id: 2, direction: -1, offset_rad: 0.3}
  - {name: j3, axis: pitch, id: 3}
  - {name: j4, axis: yaw, id: 4, direction: -1}
"""


@pytest.fixture(scope='module')
def robot(tmp_path_factory):
    path = tmp_path_factory.mktemp('robot') / 'test_two_buses_4.yaml'
    path.write_text(ROBOT_YAML)
    return load_robot(str(path))


def config(**kw):
    base = dict(rate_hz=50, margin_ms=8.0, stale_limit=4, command_timeout_s=1.0)
    base.update(kw)
    return DriverConfig(**base)


def wait_for(predicate, timeout_s=5.0, step_s=0.01):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def sim(robot, extra=()):
    return SimBusProcess([*sim_bus_args(robot, spread_rad=0.3), *extra])


def test_one_process_serves_each_bus_on_its_own_pty_at_its_baud(robot):
    from snake_control.dynamixel.bus import ServoBus
    with sim(robot) as s:
        assert len(s.paths) == 2 and s.path == s.paths[0]
        a, b = ServoBus(s.paths[0], 4_000_000).open(), ServoBus(s.paths[1], 2_000_000).open()
        try:
            assert [a.ping(i) is not None for i in (1, 2, 3, 4)] == [True, True, False, False]
            assert [b.ping(i) is not None for i in (1, 2, 3, 4)] == [False, False, True, True]
        finally:
            a.close()
            b.close()
        assert sorted(s.state()['servos']) == ['1', '2', '3', '4']
        assert 'no servo 9' in s.command('silent 9 1')['error']


@pytest.mark.parametrize('processes', [True, False])
def test_two_buses_run_as_one_driver_and_every_exit_turns_torque_off_on_both(robot, processes):
    with sim(robot) as s:
        d = make_driver(robot, config=config(), ports=s.paths, processes=processes)
        assert isinstance(d, ProcessMultiBusDriver if processes else MultiBusDriver)
        got = []
        d.on_state = got.append
        d.start()
        try:
            state = s.state()['servos']
            assert all(state[k]['torque'] for k in '1234')
            assert all(state[k]['watchdog'] > 0 for k in '1234'), state       # armed on every bus
            target = np.array([0.3, -0.2, 0.4, -0.5])
            assert d.set_command(robot.joint_names, target)

            def arrived():
                snap = d.state()
                return snap is not None and np.allclose(snap.position_rad, target, atol=0.02)
            assert wait_for(arrived), d.state()
            snap = got[-1]
            assert snap.names == robot.joint_names and snap.fresh.all()
            # The servos themselves are there: each bus's goal registers through its offsets.
            ticks = {k: s.state()['servos'][k]['goal'] for k in '1234'}
            assert abs(ticks['2'] - (2048 + round((-(-0.2) + 0.3) / (2 * np.pi / 4096)))) <= 2, ticks
            # One merged reading per cycle: as many as either bus's cycles, give or take the phase (the
            # merging thread of this process may wake a little after the buses' processes have read).
            n0, c0 = len(got), d.drivers[1].counters.cycles
            assert wait_for(lambda: d.drivers[1].counters.cycles - c0 >= 25)
            c1 = d.drivers[1].counters.cycles
            assert wait_for(lambda: len(got) - n0 >= (c1 - c0) - 3), (len(got) - n0, c1 - c0)
            assert len(got) - n0 <= (d.drivers[1].counters.cycles - c0) + 3
            assert not d.set_command(['j1', 'nope'], [0.0, 0.0])        # refused whole, on no bus
            # Velocities go with their joints to each bus, which leads its own goals by velocity x lead;
            # a bad one refuses the whole command, on no bus.
            assert not d.set_command(robot.joint_names, target, [0.0, float('nan'), 0.0, 0.0])
            assert not d.set_command(robot.joint_names, target, [0.0])
            vel = np.array([2.5, 0.0, 0.0, -2.5])
            led = target + d.config.velocity_lead_s * vel
            assert wait_for(lambda: d.set_command(robot.joint_names, target, vel)
                            and np.allclose(d.state().position_rad, led, atol=0.02)), d.state()
        finally:
            assert d.stop()
        assert not any(s.state()['servos'][k]['torque'] for k in '1234')
        assert d.torque_off_unconfirmed == []


@pytest.mark.parametrize('processes', [True, False])
def test_a_fault_on_one_bus_holds_the_other(robot, processes):
    with sim(robot) as s:
        d = make_driver(robot, config=config(), ports=s.paths, processes=processes)
        d.start()
        try:
            q = np.zeros(4)
            assert d.set_command(robot.joint_names, q)
            assert wait_for(lambda: d.mode == 'running')
            s.command('silent 4 3')                     # bus b loses a servo
            assert wait_for(lambda: d.drivers[0].mode == 'hold' and d.drivers[1].mode == 'hold')
            assert any('j4 stale' in r for r in d.drivers[0].reasons), d.drivers[0].reasons
            # Bus a's goals no longer follow the commands while bus b is faulty (from the goal its hold
            # wrote: the cycle that entered it may still be on the wire when the mode reads 'hold').
            a = d.drivers[0]
            c0 = a.counters.cycles
            assert wait_for(lambda: a.counters.cycles >= c0 + 2)
            goal_a = s.state()['servos']['1']['goal']
            for k in range(10):
                d.set_command(robot.joint_names, q + 0.05 * (k + 1))
                time.sleep(0.02)
            assert s.state()['servos']['1']['goal'] == goal_a
            # Both resume together once the servo answers again and commands keep coming.
            assert wait_for(lambda: (d.set_command(robot.joint_names, q + 0.5) and d.mode == 'running'),
                            timeout_s=8.0), d.reasons
        finally:
            assert d.stop()
        assert not any(s.state()['servos'][k]['torque'] for k in '1234')


def test_a_missing_servo_on_either_bus_refuses_to_start_and_leaves_torque_off(robot):
    with SimBusProcess(['--ids', '1,2,3', '--bus-ids', '1,2@4000000', '--bus-ids', '3@2000000']) as s:
        d = make_driver(robot, config=config(), ports=s.paths)
        with pytest.raises(StartupError, match=r'j4 \(ID 4\): no answer'):
            d.start()
        assert not any(v['torque'] for v in s.state()['servos'].values())


def test_ports_and_port_parameters_fit_the_robot(robot):
    with pytest.raises(ValueError, match='ports: 1 given, robot test_two_buses_4 has 2'):
        make_driver(robot, ports=['/dev/x'])
    with pytest.raises(ValueError, match='port: robot test_two_buses_4 has 2 buses'):
        make_driver(robot, port='/dev/x')
    d = make_driver(robot, ports=['/dev/x', '/dev/y'], baud=1_000_000)
    assert [(b.port, b.baud, b.names) for b in d.drivers] == [('/dev/x', 1_000_000, ['j1', 'j2']),
                                                              ('/dev/y', 1_000_000, ['j3', 'j4'])]


def test_peer_fault_in_the_pure_decision():
    n = 2
    base = dict(now_s=10.0, command_rad=np.zeros(n), command_received_s=9.99, estop=False, names=('a', 'b'),
                hardware_error=np.zeros(n, int), alert=np.zeros(n, bool), stale_cycles=np.zeros(n, int),
                present_rad=np.array([0.1, 0.2]), hold_goal_rad=None, previous_mode='running',
                resume_after_s=0.0, stale_limit=3, stale_policy='hold', alert_policy='hold',
                estop_policy='hold', command_timeout_s=0.5)
    assert decide(SafetyInputs(**base)).mode == 'running'
    d = decide(SafetyInputs(**base, peer_policy='hold', peer_reasons=('bus B: x stale',)))
    assert d.mode == 'hold' and d.reasons == ('bus B: x stale',) and d.fault_policy is None
    assert np.allclose(d.goal_rad, [0.1, 0.2])
    d = decide(SafetyInputs(**{**base, 'stale_cycles': np.array([0, 3])}, peer_policy='torque_off'))
    assert d.mode == 'torque_off' and d.fault_policy == 'hold'      # its own fault is what peers follow


def test_a_bus_process_that_dies_is_a_fault_for_every_bus_and_its_torque_goes_off_from_the_parent(robot):
    import os
    import signal
    with sim(robot) as s:
        d = make_driver(robot, config=config(), ports=s.paths)
        d.start()
        try:
            assert d.set_command(robot.joint_names, np.zeros(4))
            assert wait_for(lambda: d.mode == 'running')
            os.kill(d.drivers[1].process.pid, signal.SIGKILL)      # no torque off of its own
            # The other bus follows into torque off; the parent turns the dead bus's torque off itself.
            assert wait_for(lambda: d.drivers[0].mode == 'torque_off'), (d.drivers[0].mode, d.reasons)
            assert any('bus process ended' in r for r in d.drivers[0].reasons), d.drivers[0].reasons
            assert wait_for(lambda: not any(s.state()['servos'][k]['torque'] for k in '1234')), s.state()
            assert d.mode == 'fatal' and 'bus process ended' in d.diagnostics().fatal_error
        finally:
            assert d.stop()
        assert d.torque_off_unconfirmed == []


def test_live_config_changes_reach_every_bus_process(robot):
    with sim(robot) as s:
        d = make_driver(robot, config=config(), ports=s.paths)
        d.start()
        try:
            assert d.set_command(robot.joint_names, np.zeros(4))
            assert wait_for(lambda: d.mode == 'running')
            d.config.estop_policy = 'torque_off'        # as the driver node's parameter callback does
            d.set_estop(True)                            # behind the change on each bus's pipe
            # Each bus applies its own estop policy: both cut torque only if both heard the change.
            assert wait_for(lambda: [b.mode for b in d.drivers] == ['torque_off', 'torque_off']), d.reasons
            assert wait_for(lambda: not any(s.state()['servos'][k]['torque'] for k in '1234'))
        finally:
            assert d.stop()


def test_a_parent_that_falls_behind_still_publishes_every_cycle_in_order(robot):
    """A slow joint_states subscriber (here: on_state taking five control periods, six times) makes the
    parent catch up from the buses' rings: no cycle is skipped, none is published twice or out of order."""
    with sim(robot) as s:
        d = make_driver(robot, config=config(), ports=s.paths)
        got, slow = [], [6]

        def on_state(snap):
            got.append(snap.stamp_s)
            if slow[0] > 0 and len(got) > 10:
                slow[0] -= 1
                time.sleep(5 * d.period_s)
        d.on_state = on_state
        d.start()
        try:
            assert d.set_command(robot.joint_names, np.zeros(4))
            assert wait_for(lambda: slow[0] == 0 and len(got) > 60), (slow, len(got))
            overruns = d.diagnostics().counters['overruns']
            n = len(got)
        finally:
            assert d.stop()
        got = got[:n]
        steps = np.diff(got) / d.period_s
        assert (steps > 0).all(), steps                        # in order, never twice
        # Gaps in what was published: a step of two periods or more. A bus that started a cycle a whole
        # period late counts one overrun however long the host kept it from running (it goes on from then,
        # the slots in between never read), so it explains one gap; three more on a quiet test bus are
        # already a lot. A parent that dropped the cycles it was late for would leave six gaps of five
        # periods with no overrun.
        gaps = int(np.count_nonzero(np.round(steps) >= 2))
        assert gaps <= 3 + overruns, (gaps, overruns, np.round(steps, 2))


PARENT = """
import sys, time
import numpy as np
from snake_control.dynamixel.driver import DriverConfig
from snake_control.dynamixel.multibus import make_driver
from snake_control.robot import load_robot
robot = load_robot(sys.argv[1])
d = make_driver(robot, config=DriverConfig(rate_hz=50, margin_ms=8.0), ports=sys.argv[2:])
d.start()
d.set_command(robot.joint_names, np.zeros(robot.n_joints))
print('started', flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize('sig', ['SIGTERM', 'SIGKILL'])
def test_a_parent_killed_without_its_own_stop_leaves_every_servo_torque_off(robot, sig, tmp_path):
    """The bus processes see their control pipe close and turn their servos' torque off (confirmed, in
    their log), whatever ended the parent."""
    import signal
    import subprocess
    import sys
    with sim(robot) as s:
        proc = subprocess.Popen([sys.executable, '-c', PARENT, str(robot.source), *s.paths],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == 'started', proc.stderr.read()
            assert all(s.state()['servos'][k]['torque'] for k in '1234')
            proc.send_signal(getattr(signal, sig))
            assert wait_for(lambda: not any(s.state()['servos'][k]['torque'] for k in '1234'), 10.0)
            proc.wait(timeout=10)
            err = proc.stderr.read()
            assert err.count('torque off confirmed on all 2 servos') == 2, err[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.ros
@pytest.mark.parametrize('sig', ['SIGTERM', 'SIGINT'])
def test_driver_node_on_two_buses_confirms_torque_off_on_every_servo_when_signalled(robot, sig):
    """The driver node's signal handler stops both bus processes and reports their torque off as one;
    the bus processes ignore a SIGINT sent to the whole group and wait for the node's stop."""
    import os
    import signal
    import subprocess
    import sys
    with sim(robot) as s:
        proc = subprocess.Popen([sys.executable, '-m', 'snake_control.nodes.driver_node', '--ros-args',
                                 '-p', f'robot:={robot.source}', '-p', f'ports:={",".join(s.paths)}'],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            assert wait_for(lambda: all(v['torque'] for v in s.state()['servos'].values())
                            or proc.poll() is not None, 60.0)
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            # The bus processes do not run the node's module again (spawn would, as __mp_main__): no rclpy.
            kids = subprocess.run(['pgrep', '-P', str(proc.pid)], capture_output=True, text=True).stdout.split()
            maps = [open(f'/proc/{k}/maps').read() for k in kids]
            assert len([m for m in maps if 'dynamixel_sdk' in m or 'numpy' in m]) == 2, len(maps)
            assert not any('rclpy' in m for m in maps)
            os.killpg(proc.pid, getattr(signal, sig))        # as a terminal's Ctrl-C or a session's end
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        lines = [ln for ln in out.splitlines() if ln.startswith('driver_node:')]
        assert proc.returncode == 0 and lines[-1] == 'driver_node: torque off confirmed on every servo', out[-3000:]
        assert out.count('torque off confirmed on all 2 servos') == 2, out[-3000:]
        assert not any(v['torque'] for v in s.state()['servos'].values())
