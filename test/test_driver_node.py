"""driver_node with real rclpy pub/sub against the emulated bus."""
import math
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402

from snake_control.app.sim_bus import sim_bus_args  # noqa: E402
from snake_control.dynamixel.simproc import SimBusProcess  # noqa: E402
from snake_control.nodes.driver_node import DriverNode  # noqa: E402

pytestmark = pytest.mark.ros
ROBOT = 'kinematic_snake_3'     # two XM430-W350 yaw joints, IDs 1 and 2, 4 Mbit/s


def torque(sim):
    return [v['torque'] for v in sim.state()['servos'].values()]


def test_driver_node_pub_sub_estop_and_diagnostics():
    with SimBusProcess(sim_bus_args(ROBOT)) as sim:
        rclpy.init()
        node = peer = None
        try:
            node = DriverNode(namespace='snake', parameter_overrides=[
                Parameter('robot', value=ROBOT), Parameter('port', value=sim.path),
                Parameter('rate', value=50.0), Parameter('estop_policy', value='torque_off'),
                Parameter('diagnostics_period', value=0.2)])
            peer = rclpy.create_node('driver_test_peer')
            states, diags = [], []
            peer.create_subscription(JointState, '/snake/joint_states', states.append, 10)
            peer.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 10)
            cmd_pub = peer.create_publisher(JointState, '/snake/joint_commands', 10)
            estop_pub = peer.create_publisher(Bool, '/snake/estop', QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
            ex = SingleThreadedExecutor()
            ex.add_node(node)
            ex.add_node(peer)

            def spin_for(seconds, target=None, until=None):
                end = time.monotonic() + seconds
                while time.monotonic() < end and not (until and until()):
                    if target is not None:
                        msg = JointState(name=['joint_1', 'joint_2'], position=list(target))
                        cmd_pub.publish(msg)
                    ex.spin_once(timeout_sec=0.01)

            def arrived():
                return bool(states) and np.allclose(states[-1].position, [0.4, -0.3], atol=0.05) and \
                    any('servo joint_2' in st.name for d in diags for st in d.status)

            # Discovery on a loaded machine can take a while: wait for the arm to get there.
            spin_for(10.0, target=[0.4, -0.3], until=arrived)
            assert states and states[-1].name == ['joint_1', 'joint_2']
            np.testing.assert_allclose(states[-1].position, [0.4, -0.3], atol=0.05)
            # A loaded host can hold the arm for a few cycles (a servo's reads went stale): still
            # commanded, it runs again. CI once read 'hold' the instant the arm arrived.
            spin_for(10.0, target=[0.4, -0.3], until=lambda: node.driver.mode == 'running')
            assert node.driver.mode == 'running', (node.driver.reasons, node.driver.counters)
            bus = [s for d in diags for s in d.status if 'bus' in s.name]
            keys = {kv.key for kv in bus[-1].values} if bus else set()
            assert keys >= {'cycle_rate_hz', 'jitter_p99_ms', 'read_failures', 'read_mode', 'reply_failure_rate'}
            servo = [s for d in diags for s in d.status if 'servo joint_2' in s.name]
            keys = {kv.key for kv in servo[-1].values} if servo else set()
            assert keys >= {'temperature_c', 'voltage_v', 'stale_count', 'hardware_error_names'}
            # A NaN command is rejected and never moves anything.
            cmd_pub.publish(JointState(name=['joint_1', 'joint_2'], position=[math.nan, 0.0]))
            spin_for(10.0, until=lambda: node.driver.counters.rejected_nonfinite >= 1)
            assert node.driver.counters.rejected_nonfinite >= 1
            # joint_commands.velocity reaches the driver: with velocity_lead 0.1 s a velocity of 1 rad/s
            # (held, not integrated: the position stays) leads joint_1 by 0.1 rad.
            assert node.set_parameters([Parameter('velocity_lead', value=0.1)])[0].successful
            assert not node.set_parameters([Parameter('velocity_lead', value=0.5)])[0].successful
            # command_extrapolation: -1 (the default) carries nothing on when the gait runs at the bus's
            # own rate (50 Hz); a value is taken live, one past the bound refused.
            assert node.driver.config.command_extrapolation_s == 0.0
            assert node.set_parameters([Parameter('command_extrapolation', value=0.02)])[0].successful
            assert node.driver.config.command_extrapolation_s == 0.02
            assert not node.set_parameters([Parameter('command_extrapolation', value=0.5)])[0].successful
            assert node.set_parameters([Parameter('command_extrapolation', value=-1.0)])[0].successful
            assert node.driver.config.command_extrapolation_s == 0.0

            def led():
                cmd_pub.publish(JointState(name=['joint_1', 'joint_2'], position=[0.4, -0.3],
                                           velocity=[1.0, 0.0]))
                return bool(states) and np.allclose(states[-1].position, [0.5, -0.3], atol=0.02)
            spin_for(5.0, until=led)
            np.testing.assert_allclose(states[-1].position, [0.5, -0.3], atol=0.02)
            estop_pub.publish(Bool(data=True))
            spin_for(10.0, until=lambda: node.driver.mode == 'torque_off' and not any(torque(sim)))
            assert node.driver.mode == 'torque_off' and not any(torque(sim))
            # Live parameter change within its set; a bad value is refused.
            assert node.set_parameters([Parameter('stale_policy', value='torque_off')])[0].successful
            assert not node.set_parameters([Parameter('stale_policy', value='panic')])[0].successful
            read_only = node.set_parameters([Parameter('port', value='/dev/ttyUSB3')])[0]
            assert not read_only.successful
        finally:
            # Also when an assertion failed: a driver left running would go on driving the emulator.
            for n in (node, peer):
                if n is not None:
                    n.destroy_node()
            rclpy.try_shutdown()
        assert not any(torque(sim))


def test_rclpy_shutdown_without_destroying_the_node_turns_torque_off(caplog):
    """A program that shuts rclpy down and forgets the node (rclpy's own SIGINT handler does just that)
    leaves no servo holding torque, and the bus thread does not go on publishing into a dead context."""
    with SimBusProcess(sim_bus_args(ROBOT)) as sim:
        rclpy.init()
        node = None
        try:
            node = DriverNode(namespace='snake_forgotten', parameter_overrides=[
                Parameter('robot', value=ROBOT), Parameter('port', value=sim.path)])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not all(torque(sim)):
                time.sleep(0.05)
            assert all(torque(sim)), 'driver_node did not bring torque on'
        finally:
            rclpy.try_shutdown()
        assert not any(torque(sim))
        assert node.driver.mode == 'stopped' and not node.driver.running
        assert 'on_state callback failed' not in caplog.text
        node.destroy_node()


def test_driver_node_sigterm_turns_torque_off():
    with SimBusProcess(sim_bus_args(ROBOT)) as sim:
        proc = subprocess.Popen([sys.executable, '-m', 'snake_control.nodes.driver_node', '--ros-args',
                                 '-p', f'robot:={ROBOT}', '-p', f'port:={sim.path}'],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not all(torque(sim)):
                time.sleep(0.1)
            assert all(torque(sim)), 'driver_node did not bring torque on'
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert not any(torque(sim))


def test_driver_node_refuses_a_missing_bus(tmp_path):
    out = subprocess.run([sys.executable, '-m', 'snake_control.nodes.driver_node', '--ros-args',
                          '-p', f'robot:={ROBOT}', '-p', f'port:={tmp_path / "ttyUSB7"}'],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and 'no such device' in out.stderr


@pytest.mark.parametrize('module,param', [('snake_control.nodes.driver_node', 'diagnostics_period:=0.01'),
                                          ('snake_control.nodes.gait_node', 'state_rate_hz:=1000.0')])
def test_a_parameter_out_of_range_is_one_line(module, param):
    """An out-of-range -p value is refused before any servo is touched, in one line naming it."""
    out = subprocess.run([sys.executable, '-m', module, '--ros-args', '-p', f'robot:={ROBOT}', '-p', param],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and 'Traceback' not in out.stderr, out.stderr
    assert param.split(':=')[0] in out.stderr, out.stderr


def test_a_state_stamp_is_not_moved_by_a_thread_switch_between_the_two_clock_reads():
    """joint_states are stamped with the ROS clock at the monotonic instant the servos were read; a thread
    switch between reading the two clocks (up to the 1 ms switch interval) must not move the stamp."""
    class Now:
        def __init__(self):
            self.calls = 0

        def now(self):
            self.calls += 1
            ns = time.time_ns()
            if self.calls == 1:
                time.sleep(0.003)       # the thread is switched out right after reading the ROS clock
            return type('T', (), {'nanoseconds': ns})()

    from snake_control.nodes.messages import ros_ns_at

    read_s = time.monotonic() - 0.002
    expected = time.time_ns() - int((time.monotonic() - read_s) * 1e9)
    stamp = ros_ns_at(Now(), read_s)
    assert abs(stamp - expected) < 300_000, f'stamp off by {(stamp - expected) / 1e6:.2f} ms'


def test_the_package_processes_keep_off_fast_dds_shared_memory_unless_told():
    """Fast DDS's shared-memory transport can hold a publish a third of a second while it opens a port:
    the package's processes choose its UDP transport, and a transport the user set stays."""
    from snake_control.nodes.qos import DDS_TRANSPORT_ENV, choose_dds_transport

    env = {}
    assert choose_dds_transport(env) == 'UDPv4' and env[DDS_TRANSPORT_ENV] == 'UDPv4'
    env = {DDS_TRANSPORT_ENV: 'SHM'}
    assert choose_dds_transport(env) == 'SHM'
    code = ('import os, sys; from snake_control.nodes import runner; runner.rclpy.init = '
            'lambda **k: sys.exit(os.environ.get("FASTDDS_BUILTIN_TRANSPORTS", "unset") == "UDPv4" and 7 or 8); '
            'runner.run_node(object)')
    env = {k: v for k, v in __import__('os').environ.items() if k != DDS_TRANSPORT_ENV}
    assert subprocess.run([sys.executable, '-c', code], env=env, timeout=60).returncode == 7
