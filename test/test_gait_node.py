"""gait_node over real DDS: joint_commands from the scheduler, cmd_vel timeout, gait/select, estop hold,
live parameters through the parameter services (what `ros2 param set` calls), garbage on every input."""
import math
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros


@pytest.fixture
def graph():
    from rclpy.parameter import Parameter

    from rosutil import RosHarness
    from snake_control.nodes.gait_node import GaitNode

    h = RosHarness()
    node = h.add(GaitNode(context=h.context, parameter_overrides=[
        Parameter('robot', value='pitch_yaw_32'), Parameter('start_from_joint_states', value=False),
        Parameter('state_rate_hz', value=50.0), Parameter('cmd_timeout_s', value=0.3),
        # A one-second ramp of the forward command, so a loaded machine still samples it mid-ramp.
        Parameter('accel_forward_m_s2', value=0.05)]))
    try:
        yield h, node
    finally:
        h.close()


def _state(msgs):
    return {kv.key: kv.value for kv in msgs[-1][1].values}


def _publishers(h):
    from geometry_msgs.msg import Twist
    from std_msgs.msg import Bool, String

    from snake_control.nodes.qos import ESTOP_QOS
    return (h.publisher(Twist, 'cmd_vel'), h.publisher(String, 'gait/select'), h.publisher(Bool, 'estop',
                                                                                           ESTOP_QOS))


def twist(vx=0.0, vy=0.0, wz=0.0):
    from geometry_msgs.msg import Twist
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.angular.z = vx, vy, wz
    return msg


def test_commands_speed_timeout_and_select(graph):
    from diagnostic_msgs.msg import DiagnosticStatus
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from rosutil import wait_until
    h, node = graph
    robot = node.robot
    joints = h.record(JointState, 'joint_commands')
    states = h.record(DiagnosticStatus, 'gait/state')
    cmd, select, _ = _publishers(h)
    h.wait_for_subscribers(cmd)
    assert wait_until(lambda: len(joints) > 5 and states)
    msg = joints[-1][1]
    assert list(msg.name) == list(robot.joint_names) and len(msg.position) == len(msg.velocity) == 32
    assert _state(states)['active_gait'] == 'serpentine'
    assert float(_state(states)['phase_rate_rad_s']) == 0.0, 'no command: no motion'

    # Forward: the phase runs and the joints move.
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        cmd.publish(twist(0.05))
        time.sleep(0.05)
    t_last_cmd = time.monotonic()
    st = _state(states)
    assert float(st['phase_rate_rad_s']) > 0 and float(st['command_forward_m_s']) == pytest.approx(0.05)
    recent = np.array([m.position for _, m in joints[-20:]])
    assert np.ptp(recent, axis=0).max() > 1e-3
    # Silence: after the timeout the command ramps to zero (no jump) and the phase stops.
    assert wait_until(lambda: float(_state(states)['command_forward_m_s']) == 0.0, timeout_s=3.0)
    assert wait_until(lambda: float(_state(states)['phase_rate_rad_s']) == 0.0, timeout_s=5.0)
    forward = [float({kv.key: kv.value for kv in m.values}['command_forward_m_s'])
               for t, m in states if t > t_last_cmd]
    assert any(0 < f < 0.05 for f in forward), f'ramped down, not dropped: {forward}'

    select.publish(String(data='no_such_gait'))
    select.publish(String(data='sidewinding'))
    assert wait_until(lambda: _state(states)['target_gait'] == 'sidewinding')
    assert node.controller.rejected_selects == 1
    assert wait_until(lambda: _state(states)['active_gait'] == 'sidewinding', timeout_s=10.0), _state(states)
    for _, m in joints:
        q = np.array(m.position)
        assert np.all(np.isfinite(q)) and np.all(q >= robot.lower_rad) and np.all(q <= robot.upper_rad)


def test_estop_holds_within_one_period_and_resumes(graph):
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool

    from rosutil import wait_until
    h, node = graph
    joints = h.record(JointState, 'joint_commands')
    cmd, _, estop = _publishers(h)
    h.wait_for_subscribers(cmd)
    h.wait_for_subscribers(estop)
    t_end = time.monotonic() + 1.0
    while time.monotonic() < t_end:
        cmd.publish(twist(0.05))
        time.sleep(0.05)
    estop.publish(Bool(data=True))
    assert wait_until(lambda: node.estopped)
    for _ in range(20):
        cmd.publish(twist(0.05))          # ignored while stopped
        time.sleep(0.02)
    # Held from the first tick after the e-stop reached the node (one control period), judged by the
    # commands' own stamps, however long delivery took on a loaded machine.
    held_from_ns = node.estop_stamps_ns[-1] + int(1.5 * node.period_s * 1e9)
    after = [m for _, m in joints
             if m.header.stamp.sec * 10**9 + m.header.stamp.nanosec > held_from_ns]
    assert len(after) > 10
    held = np.array([m.position for m in after])
    assert np.ptp(held, axis=0).max() == 0.0 and all(not any(m.velocity) for m in after)
    estop.publish(Bool(data=False))
    assert wait_until(lambda: not node.estopped)
    t_release = time.monotonic()
    t_end = time.monotonic() + 2.0
    while time.monotonic() < t_end:
        cmd.publish(twist(0.05))
        time.sleep(0.05)
    resumed = [m for t, m in joints if t > t_release]
    q = np.array([m.position for m in resumed])
    assert np.ptp(q, axis=0).max() > 1e-3, 'moves again after release'
    # From rest: the first step after release is small (no jump back to the old speed).
    assert np.max(np.abs(q[0] - held[-1])) < node.robot.velocity_limit_rad_s.max() * 0.05


def test_live_parameters_through_services(graph):
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    from rosutil import wait_until
    from diagnostic_msgs.msg import DiagnosticStatus
    h, node = graph
    states = h.record(DiagnosticStatus, 'gait/state')
    client = h.probe.create_client(SetParameters, '/gait_node/set_parameters')
    assert client.wait_for_service(timeout_sec=10.0)

    def set_param(name, value, kind=ParameterType.PARAMETER_DOUBLE):
        pv = ParameterValue(type=kind)
        if kind == ParameterType.PARAMETER_DOUBLE:
            pv.double_value = value
        else:
            pv.string_value = value
        future = client.call_async(SetParameters.Request(parameters=[ParameterMsg(name=name, value=pv)]))
        assert wait_until(future.done)
        return future.result().results[0]

    ok = set_param('serpentine.B1', 4.0)
    assert ok.successful, ok.reason
    assert node.scheduler.state().params['B1'] == 4.0
    # gait/state shows the new value once the switch reaches it.
    assert wait_until(lambda: states and _state(states).get('serpentine.B1') == '4', timeout_s=5.0), \
        states and _state(states)
    bad = set_param('serpentine.B1', 1e6)          # outside the descriptor's range
    assert not bad.successful and bad.reason
    nan = set_param('serpentine.w1', float('nan'))
    assert not nan.successful
    assert node.get_parameter('serpentine.B1').value == 4.0
    # The torque check (seed 001 dynamics): a much bigger vertical wave than sidewinding's default needs
    # more than 80 % of stall and is refused, a smaller one is taken.
    lock_free = []
    estimate = node.controller.torque_estimator

    def watched(*args):
        # The check takes about 0.1 s: it must not hold the lock the control tick takes.
        got = node.lock.acquire(timeout=1.0)
        if got:
            node.lock.release()
        lock_free.append(got)
        return estimate(*args)
    node.controller.torque_estimator = watched
    heavy = set_param('sidewinding.A_pitch', 0.7)
    assert lock_free and all(lock_free)
    assert not heavy.successful
    assert 'torque check FAILED' in heavy.reason and 'refused' in heavy.reason, heavy.reason
    assert node.get_parameter('sidewinding.A_pitch').value == pytest.approx(0.3)
    # A gait that is not running: validated now, used when it is selected.
    lighter = set_param('sidewinding.A_pitch', 0.1)
    assert lighter.successful, lighter.reason
    assert node.controller.overrides['sidewinding'] == {'A_pitch': 0.1}
    assert set_param('gait', 'sidewinding', ParameterType.PARAMETER_STRING).successful
    assert node.scheduler.state().target_gait == 'sidewinding'
    assert node.scheduler.state().params['A_pitch'] == 0.1
    # With the check switched off the same heavy change goes through.
    assert set_param('torque_check_fraction', 0.0).successful
    assert set_param('sidewinding.A_pitch', 0.7).successful
    assert node.scheduler.state().params['A_pitch'] == 0.7
    refused = set_param('gait', 'moonwalk', ParameterType.PARAMETER_STRING)
    assert not refused.successful and 'moonwalk' in refused.reason
    assert set_param('max_forward_m_s', 0.02).successful
    assert node.controller.commands.limits.max_forward_m_s == 0.02


def test_garbage_never_crashes_or_leaks_nan(graph):
    from diagnostic_msgs.msg import DiagnosticStatus
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool, String

    from rosutil import wait_until
    h, node = graph
    joints = h.record(JointState, 'joint_commands')
    states = h.record(DiagnosticStatus, 'gait/state')
    cmd, select, estop = _publishers(h)
    h.wait_for_subscribers(cmd)
    garbage = [twist(float('nan')), twist(0.0, float('inf')), twist(1e300, -1e300, 1e300),
               twist(-float('inf'), 0.0, float('nan')), twist(0.05, 0.0, 1e9)]
    for k in range(60):
        cmd.publish(garbage[k % len(garbage)])
        select.publish(String(data=['', '\x00' * 10, 'x' * 5000, 'rolling', 'serpentine',
                                    'SERPENTINE'][k % 6]))
        if k == 30:
            estop.publish(Bool(data=True))
        if k == 40:
            estop.publish(Bool(data=False))
        time.sleep(0.02)
    assert wait_until(lambda: len(joints) > 50)
    assert node.controller.commands.rejected >= 30 and node.controller.rejected_selects >= 30
    st = _state(states)
    assert abs(float(st['command_forward_m_s'])) <= node.controller.commands.limits.max_forward_m_s
    assert abs(float(st['command_turn_rad_s'])) <= node.controller.commands.limits.max_turn_rad_s
    robot = node.robot
    for _, m in joints:
        q, v = np.array(m.position), np.array(m.velocity)
        assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
        assert np.all(q >= robot.lower_rad) and np.all(q <= robot.upper_rad)
        assert np.all(np.abs(v) <= robot.velocity_limit_rad_s + 1e-9)


def test_starts_from_measured_pose():
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.gait_node import GaitNode

    h = RosHarness()
    try:
        node = h.add(GaitNode(context=h.context, parameter_overrides=[Parameter('robot', value='wheeled_8')]))
        joints = h.record(JointState, 'joint_commands')
        states_pub = h.publisher(JointState, 'joint_states')
        h.wait_for_subscribers(states_pub)
        names = list(node.robot.joint_names)
        # One reliable publisher delivers in order: the bad ones reach the node before the good ones.
        states_pub.publish(JointState(name=names[:-1], position=[0.1] * (len(names) - 1)))  # incomplete
        states_pub.publish(JointState(name=names, position=[math.nan] * len(names)))       # not finite
        states_pub.publish(JointState(name=names, position=[3.0] * len(names)))            # beyond the limits
        pose = [0.3 * (-1) ** i for i in range(len(names))]
        # A driver publishes at its control rate; the pose is taken once a few messages agree.
        assert wait_until(lambda: joints or states_pub.publish(JointState(name=names, position=pose)),
                          period_s=0.02)
        # The very first command is at the measured pose: nothing was commanded before it was known
        # (the gait's own shape is far from it), and none of the bad messages started the gait.
        first = np.array(joints[0][1].position)
        assert np.max(np.abs(first - pose)) < 0.05, 'starts where the robot is'
        from snake_control.gaits import GaitScheduler
        own_shape = GaitScheduler(node.robot, node.initial_gait).positions_rad
        assert np.max(np.abs(own_shape - pose)) > 0.1, 'the check above tells the two starts apart'
    finally:
        h.close()


def test_under_a_fast_bus_the_gait_ticks_at_most_100_hz(tmp_path):
    """A robot YAML at 400 Hz: the gait's default rate is 100 Hz (the driver moves the goals between its
    commands); rate_hz still sets any rate."""
    from rclpy.parameter import Parameter

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.gait_node import GaitNode
    from snake_control.paths import resolve_robot

    fast = tmp_path / 'wheeled_8_fast.yaml'
    fast.write_text(Path(resolve_robot('wheeled_8')).read_text().replace('control_rate_hz: 100',
                                                                          'control_rate_hz: 400'))
    h = RosHarness()
    try:
        node = h.add(GaitNode(context=h.context, parameter_overrides=[
            Parameter('robot', value=str(fast)), Parameter('start_from_joint_states', value=False)]))
        assert node.robot.bus.control_rate_hz == 400
        assert node.rate_hz == 100.0 and node.controller.period_s == pytest.approx(0.01)
        assert wait_until(lambda: node.ticks > 3)
        given = h.add(GaitNode(context=h.context, node_name='gait_400', parameter_overrides=[
            Parameter('robot', value=str(fast)), Parameter('start_from_joint_states', value=False),
            Parameter('rate_hz', value=400.0)]))
        assert given.rate_hz == 400.0
    finally:
        h.close()


def test_the_power_up_rest_waits_for_the_imu():
    """With startup_imu_wait_s the gait does not start (so the power-up rest does not pass) until an IMU
    message has been heard: the estimator learns the gyro bias in that rest. Without any IMU it starts
    once the wait is over, with a warning."""
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Imu, JointState

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.gait_node import GaitNode
    from snake_control.nodes.qos import SENSOR_QOS

    h = RosHarness()
    try:
        waits = h.add(GaitNode(context=h.context, namespace='a', parameter_overrides=[
            Parameter('robot', value='wheeled_8'), Parameter('startup_imu_wait_s', value=60.0)]))
        h.add(GaitNode(context=h.context, namespace='b', parameter_overrides=[
            Parameter('robot', value='wheeled_8'), Parameter('startup_imu_wait_s', value=0.5)]))
        joints = {ns: h.record(JointState, f'/{ns}/joint_commands') for ns in 'ab'}
        states = {ns: h.publisher(JointState, f'/{ns}/joint_states') for ns in 'ab'}
        imu_pub = h.publisher(Imu, '/a/imu', SENSOR_QOS)
        for pub in states.values():
            h.wait_for_subscribers(pub)
        names = list(waits.robot.joint_names)
        pose = [0.2] * len(names)

        def drive():
            for pub in states.values():
                pub.publish(JointState(name=names, position=pose))
            return False
        # b gives up waiting after 0.5 s and starts; a, which has heard no IMU, is still waiting then.
        assert wait_until(lambda: drive() or joints['b'], period_s=0.01)
        assert not joints['a'] and 'IMU' in waits.waiting_for
        imu_pub.publish(Imu())
        assert wait_until(lambda: drive() or joints['a'] or imu_pub.publish(Imu()), period_s=0.01)
    finally:
        h.close()


def test_starts_only_from_the_driver_it_commands_never_from_a_spoofer():
    """joint_states from anyone used to choose the first pose: a spoofer's pose made the first goal step
    1.67 rad from where the servos were. Now a node that does not take joint_commands holds the start
    back while it publishes, and a lone odd message among the driver's is never taken."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.gait_node import GaitNode

    h = RosHarness()
    try:
        node = h.add(GaitNode(context=h.context, parameter_overrides=[Parameter('robot', value='wheeled_8')]))
        joints = h.record(JointState, 'joint_commands')     # the probe is the driver: it takes commands
        driver_pub = h.publisher(JointState, 'joint_states')
        spoofer = h.add(Node('spoofer', context=h.context))
        spoof_pub = spoofer.create_publisher(JointState, 'joint_states', 10)
        h.wait_for_subscribers(driver_pub)
        names = list(node.robot.joint_names)
        measured = [0.2] * len(names)
        spoofed = [-0.8 * (-1) ** i for i in range(len(names))]
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            driver_pub.publish(JointState(name=names, position=measured))
            spoof_pub.publish(JointState(name=names, position=spoofed))
            time.sleep(0.01)
        assert not joints, 'no start while a foreign node publishes joint_states'
        spoofer.destroy_publisher(spoof_pub)
        assert wait_until(lambda: joints or driver_pub.publish(JointState(name=names, position=measured)),
                          period_s=0.01)
        first = np.array(joints[0][1].position)
        step = node.robot.velocity_limit_rad_s / node.rate_hz
        assert np.all(np.abs(first - measured) <= step + 1e-9), 'first goal reachable from the measured pose'
    finally:
        h.close()


def test_start_pose_needs_steady_plausible_samples():
    from snake_control.gaits.start_pose import StartPose
    sp = StartPose(-np.ones(3), np.ones(3), np.full(3, 4.0), samples=3)
    q = np.zeros(3)
    assert sp.offer(q, 0.00)[0] is None and sp.offer(q, 0.01)[0] is None
    assert sp.offer(np.full(3, 0.9), 0.011)[0] is None          # a jump 0.9 rad in 1 ms breaks the run
    assert sp.offer(q, 0.02)[0] is None and sp.offer(q, 0.03)[0] is None
    pose, _ = sp.offer(q, 0.04)
    np.testing.assert_array_equal(pose, q)
    sp.reset()
    assert 'outside' in sp.offer(np.full(3, 1.5), 0.05)[1]
    assert 'finite' in sp.offer(np.full(3, np.nan), 0.06)[1]


def test_closed_loop_trims_from_odom_and_switches_off():
    """A fake estimator publishes odom of a body doing 60 % of the speed the gait node's calibration
    predicts: the node's loop raises the drive gain (gait/state trim_speed_gain); closed_loop false
    (ros2 param set) switches it off and drops the trim."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.gait_node import GaitNode

    h = RosHarness()
    node = h.add(GaitNode(context=h.context, parameter_overrides=[
        Parameter('robot', value='pitch_yaw_32'), Parameter('start_from_joint_states', value=False),
        Parameter('state_rate_hz', value=20.0), Parameter('closed_loop_time_constant_cycles', value=0.5)]))
    try:
        states = h.record(DiagnosticStatus, 'gait/state')
        cmd, _, _ = _publishers(h)
        odom = h.publisher(Odometry, 'odom')
        h.wait_for_subscribers(cmd)
        h.wait_for_subscribers(odom)
        assert wait_until(lambda: states)
        st = _state(states)
        assert st['mapping'] == 'calibration' and st['closed_loop'] == 'waiting'
        x, last = 0.0, time.monotonic()

        def drive():
            nonlocal x, last
            now = time.monotonic()
            cmd.publish(twist(0.15))
            modelled = float(_state(states).get('modelled_speed_m_s', 0.0))
            x += 0.6 * modelled * (now - last)
            last = now
            msg = Odometry()
            msg.pose.pose.position.x = x
            msg.pose.pose.orientation.w = 1.0
            odom.publish(msg)
            return float(_state(states)['trim_speed_gain']) > 1.15

        assert wait_until(drive, timeout_s=30.0, period_s=0.02), _state(states)
        assert _state(states)['closed_loop'] in ('tracking', 'at limit')
        node.set_parameters([Parameter('closed_loop', value=False)])
        assert wait_until(lambda: _state(states)['closed_loop'] == 'off'
                          and float(_state(states)['trim_speed_gain']) == 1.0)
    finally:
        h.close()
