"""estimator_node with real rclpy pub/sub: JointState in, Odometry and /diagnostics out."""
import math
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from snake_control.estimation.estimator import run_offline  # noqa: E402
from snake_control.nodes.estimator_node import EstimatorNode  # noqa: E402
from snake_control.nodes.messages import set_stamp  # noqa: E402
from snake_control.robot import load_robot  # noqa: E402


@pytest.fixture
def ros():
    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


def _spin_until(executor, predicate, timeout_s=15.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not predicate():
        executor.spin_once(timeout_sec=0.02)
    return predicate()


def test_joint_states_in_odometry_out(ros):
    robot = load_robot('wheeled_8')
    node = EstimatorNode(context=ros, parameter_overrides=[
        Parameter('robot', value='wheeled_8'), Parameter('diagnostics_rate_hz', value=20.0)])
    peer = rclpy.create_node('estimator_test_peer', context=ros)
    odoms, diags = [], []
    peer.create_subscription(Odometry, 'odom', odoms.append, QoSProfile(depth=500))
    peer.create_subscription(DiagnosticArray, '/diagnostics', diags.append, QoSProfile(depth=50))
    pub = peer.create_publisher(JointState, 'joint_states', QoSProfile(depth=50))
    executor = SingleThreadedExecutor(context=ros)
    executor.add_node(node)
    executor.add_node(peer)
    try:
        assert _spin_until(executor, lambda: pub.get_subscription_count() > 0 and
                           peer.count_publishers('odom') > 0)
        ts = np.arange(0.0, 1.0, 0.02)
        names = list(reversed(robot.joint_names))          # any order: matched by name
        sent = []
        for i, t in enumerate(ts):
            q = 0.5 * np.sin(2 * np.pi * t - 0.9 * np.arange(7))
            msg = JointState()
            msg.header.stamp.sec = 100 + int(t)
            msg.header.stamp.nanosec = int(round((t % 1.0) * 1e9))
            msg.name = names
            msg.position = [float(v) for v in q[::-1]]
            sent.append(q)
            # Lock step (sensor-data QoS is best effort and shallow): one odometry per joint_states.
            for _ in range(3):
                pub.publish(msg)
                if _spin_until(executor, lambda: len(odoms) > i, timeout_s=2.0):
                    break
            assert len(odoms) == i + 1
        assert _spin_until(executor, lambda: bool(diags))
        last = odoms[-1]
        assert last.header.frame_id == 'odom' and last.child_frame_id == 'link_4'
        stamp = last.header.stamp.sec + 1e-9 * last.header.stamp.nanosec
        assert stamp == pytest.approx(100 + ts[-1], abs=1e-6)
        # The node's estimate equals the library's on the same messages.
        expected = run_offline(robot, ts, np.array(sent))[-1]
        p = last.pose.pose.position
        np.testing.assert_allclose([p.x, p.y, p.z], expected.pose[:3, 3], atol=1e-9)
        assert np.hypot(p.x, p.y) > 0.01
        cov = np.array(last.pose.covariance).reshape(6, 6)
        assert np.all(np.isfinite(cov)) and cov[0, 0] > 0 and cov[5, 5] > 0
        status = diags[-1].status[0]
        values = {kv.key: kv.value for kv in status.values}
        assert {'slip_rms_m_s', 'rank', 'singular'} <= set(values)
        assert values['rank'] == '3' and status.hardware_id == 'wheeled_8'
        # A message lacking joints is rejected and counted, never crashes the node.
        bad = JointState()
        bad.name = ['joint_1']
        bad.position = [0.0]
        pub.publish(bad)
        assert _spin_until(executor, lambda: node.pipeline.rejected == 1)
        assert 'joint_2' in node.pipeline.last_error
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_parameters_are_described_and_read_only(ros):
    node = EstimatorNode(context=ros, parameter_overrides=[Parameter('robot', value='pitch_yaw_32')])
    try:
        desc = node.describe_parameters(['robot', 'publish_rate_hz'])
        assert desc[0].read_only and 'robot' in desc[0].description
        assert not desc[1].read_only and desc[1].floating_point_range[0].to_value == 1000.0
        assert node.base_frame == 'virtual_chassis'
        # Every parameter is declared with the default the offline replay takes too.
        from dataclasses import asdict

        from snake_control.estimation.pipeline import EstimatorParams
        for name, value in asdict(EstimatorParams()).items():
            if name != 'robot':
                assert node.get_parameter(name).value == value, name
        result = node.set_parameters([Parameter('robot', value='wheeled_8')])[0]
        assert not result.successful
        assert node.set_parameters([Parameter('publish_rate_hz', value=10.0)])[0].successful
        assert node.pipeline.publish_period_s == pytest.approx(0.1)
    finally:
        node.destroy_node()


def _send(executor, pub, msg, count):
    """Publish msg until count() grows (a best-effort subscriber may miss one): each message arrives."""
    before = count()
    for _ in range(3):
        pub.publish(msg)
        if _spin_until(executor, lambda: count() > before, timeout_s=2.0):
            return
    raise AssertionError('message not received')


def _imu_rig(ros, peer_name, *overrides, odom_depth=50):
    """A pitch_yaw_32 estimator_node with use_imu and the given parameters, and a peer node publishing
    joint_states and imu and collecting odom, on one executor: (node, peer, odoms, js_pub, imu_pub,
    executor)."""
    from sensor_msgs.msg import Imu

    node = EstimatorNode(context=ros, parameter_overrides=[
        Parameter('robot', value='pitch_yaw_32'), Parameter('use_imu', value=True), *overrides])
    peer = rclpy.create_node(peer_name, context=ros)
    odoms = []
    peer.create_subscription(Odometry, 'odom', odoms.append, QoSProfile(depth=odom_depth))
    js_pub = peer.create_publisher(JointState, 'joint_states', QoSProfile(depth=10))
    imu_pub = peer.create_publisher(Imu, 'imu', QoSProfile(depth=10))
    executor = SingleThreadedExecutor(context=ros)
    executor.add_node(node)
    executor.add_node(peer)
    return node, peer, odoms, js_pub, imu_pub, executor


def test_imu_orientation_reaches_the_estimate(ros):
    from sensor_msgs.msg import Imu

    from snake_control.kinematics.lie import matrix_from_quaternion, quaternion_from_matrix, so3_exp
    robot = load_robot('pitch_yaw_32')
    node, peer, odoms, js_pub, imu_pub, executor = _imu_rig(ros, 'estimator_imu_peer')
    try:
        assert _spin_until(executor, lambda: js_pub.get_subscription_count() > 0 and
                           imu_pub.get_subscription_count() > 0 and peer.count_publishers('odom') > 0)
        turn = so3_exp(np.array([0.0, 0.0, 0.7]))
        imu = Imu()
        qx, qy, qz, qw = quaternion_from_matrix(turn)
        imu.orientation.x, imu.orientation.y, imu.orientation.z, imu.orientation.w = qx, qy, qz, qw
        imu.angular_velocity_covariance[0] = -1.0          # no rate: orientation only
        for _ in range(3):
            imu_pub.publish(imu)
            if _spin_until(executor, lambda: node.pipeline._imu[0] is not None, timeout_s=2.0):
                break
        assert node.pipeline._imu[0] is not None and node.pipeline._imu[1] is None
        for i in range(3):
            msg = JointState()
            msg.header.stamp.sec = 10 + i
            msg.name = list(robot.joint_names)
            msg.position = [0.0] * robot.n_joints
            for _ in range(3):
                js_pub.publish(msg)
                if _spin_until(executor, lambda: len(odoms) > i, timeout_s=2.0):
                    break
        assert len(odoms) == 3
        o = odoms[-1].pose.pose.orientation
        # A straight body on an IMU at the tail turned 0.7 rad: the chassis is turned the same way.
        np.testing.assert_allclose(matrix_from_quaternion(np.array([o.x, o.y, o.z, o.w])), turn, atol=1e-9)
        assert odoms[-1].child_frame_id == 'virtual_chassis'
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_a_raw_imu_turns_the_estimate_by_its_gyro(ros):
    """An Imu without orientation (the MuJoCo world's): its gyro turns the estimate of a still body."""
    from sensor_msgs.msg import Imu

    robot = load_robot('pitch_yaw_32')
    node, peer, odoms, js_pub, imu_pub, executor = _imu_rig(
        ros, 'estimator_raw_imu_peer', Parameter('imu_link', value=32), Parameter('update_rate_hz', value=0.0))

    def send_imu(t):
        imu = Imu()
        set_stamp(imu.header.stamp, round(t * 1e9))
        imu.orientation_covariance[0] = -1.0          # raw: no orientation
        imu.angular_velocity.z = 0.5
        imu.linear_acceleration.z = 9.80665
        count = node.pipeline.imu_received
        for _ in range(3):
            imu_pub.publish(imu)
            if _spin_until(executor, lambda: node.pipeline.imu_received > count, timeout_s=2.0):
                return
        raise AssertionError(f'imu at {t} not received')

    def send_joints(t):
        msg = JointState()
        msg.header.stamp.sec = t
        msg.name = list(robot.joint_names)
        msg.position = [0.0] * robot.n_joints
        count = len(odoms)
        for _ in range(3):
            js_pub.publish(msg)
            if _spin_until(executor, lambda: len(odoms) > count, timeout_s=2.0):
                return
        raise AssertionError(f'no odom for joint_states at {t}')

    try:
        assert _spin_until(executor, lambda: js_pub.get_subscription_count() > 0 and
                           imu_pub.get_subscription_count() > 0 and peer.count_publishers('odom') > 0)
        send_imu(9.99)
        send_joints(10)
        for k in range(1, 26):
            send_imu(10.0 + 0.04 * k)
        send_joints(11)
        o = odoms[-1].pose.pose.orientation
        yaw = 2.0 * math.atan2(o.z, o.w)
        assert yaw == pytest.approx(0.5, abs=0.02)          # 0.5 rad/s for 1 s
        assert node.pipeline.imu_received >= 26
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_the_gyro_bias_is_learnt_at_rest_and_reported(ros):
    """Over DDS as in the demo: the IMU starts while the body still settles (0.03 rad/s about up), before
    any joint_states; then the joints rest for a second, one servo flickering by one encoder tick. The node
    learns the gyro's own bias from the rest and reports it in /diagnostics."""
    from sensor_msgs.msg import Imu

    robot = load_robot('pitch_yaw_32')
    node, peer, odoms, js_pub, imu_pub, executor = _imu_rig(
        ros, 'estimator_bias_peer', Parameter('imu_link', value=32), Parameter('update_rate_hz', value=0.0),
        Parameter('diagnostics_rate_hz', value=20.0))
    diags = []
    peer.create_subscription(DiagnosticArray, '/diagnostics', diags.append, QoSProfile(depth=50))
    bias = np.array([0.004, -0.003, 0.005])
    tick = 2.0 * math.pi / 4096

    def send(pub, msg, count):
        _send(executor, pub, msg, count)

    def send_imu(t, gyro):
        imu = Imu()
        set_stamp(imu.header.stamp, round(t * 1e9))
        imu.orientation_covariance[0] = -1.0
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = (float(v) for v in gyro)
        imu.linear_acceleration.z = 9.80665
        send(imu_pub, imu, lambda: node.pipeline.imu_received)

    def send_joints(t, q):
        msg = JointState()
        set_stamp(msg.header.stamp, round(t * 1e9))
        msg.name = list(robot.joint_names)
        msg.position = [float(v) for v in q]
        send(js_pub, msg, lambda: node.pipeline.received)

    try:
        assert _spin_until(executor, lambda: js_pub.get_subscription_count() > 0 and
                           imu_pub.get_subscription_count() > 0 and peer.count_publishers('odom') > 0)
        for k in range(40):
            send_imu(20.0 + 0.01 * k, bias + [0.0, 0.0, 0.03])
        for k in range(40, 140):
            t = 20.0 + 0.01 * k
            send_joints(t, np.eye(robot.n_joints)[5] * tick * (k // 3 % 2))
            send_imu(t + 0.005, bias)
        np.testing.assert_allclose(node.estimator.imu.bias, bias, atol=2e-3)
        count = len(diags)
        assert _spin_until(executor, lambda: len(diags) > count)
        values = {kv.key: kv.value for kv in diags[-1].status[0].values}
        np.testing.assert_allclose([float(v) for v in values['gyro_bias_rad_s'].split()], bias, atol=2e-3)
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


@pytest.mark.parametrize('robot_name', ['wheeled_8', 'pitch_yaw_32'])
def test_tf_hangs_the_urdf_root_under_the_estimate(ros, robot_name):
    """odom -> link_0 times the chain's own frame of the reported body is the odometry pose: for a planar
    robot (body link_4, root from the shape) and a pitch-yaw one (virtual chassis, root from the
    estimator's own chain geometry)."""
    try:
        from tf2_msgs.msg import TFMessage
    except ImportError:
        pytest.skip('tf2_msgs not importable (make ros2-tools installs it from the shared folder)')
    from snake_control.estimation.estimator import body_pose_from_links
    from snake_control.kinematics.chain import chain_frames
    from snake_control.kinematics.lie import matrix_from_quaternion

    robot = load_robot(robot_name)
    node = EstimatorNode(context=ros, parameter_overrides=[Parameter('robot', value=robot_name)])
    peer = rclpy.create_node('estimator_tf_peer', context=ros)
    odoms, tfs = [], []
    peer.create_subscription(TFMessage, '/tf', tfs.append, QoSProfile(depth=100))
    peer.create_subscription(Odometry, 'odom', odoms.append, QoSProfile(depth=100))
    pub = peer.create_publisher(JointState, 'joint_states', QoSProfile(depth=50))
    executor = SingleThreadedExecutor(context=ros)
    executor.add_node(node)
    executor.add_node(peer)
    k = np.arange(robot.n_joints)
    try:
        assert _spin_until(executor, lambda: pub.get_subscription_count() > 0 and
                           node.tf_pub.get_subscription_count() > 0)
        for i, t in enumerate(np.arange(0.0, 0.6, 0.02)):
            q = 0.5 * np.sin(2 * np.pi * t - 0.9 * k)
            msg = JointState(name=robot.joint_names, position=[float(v) for v in q])
            msg.header.stamp.sec, msg.header.stamp.nanosec = 100, int(t * 1e9)
            for _ in range(3):
                pub.publish(msg)
                if _spin_until(executor, lambda: len(odoms) > i, timeout_s=2.0):
                    break
        assert _spin_until(executor, lambda: tfs and tfs[-1].transforms[0].header.stamp == odoms[-1].header.stamp)
        tf = tfs[-1].transforms[0]
        assert tf.header.frame_id == 'odom' and tf.child_frame_id == 'link_0'
        root = np.eye(4)
        root[:3, :3] = matrix_from_quaternion(np.array([tf.transform.rotation.x, tf.transform.rotation.y,
                                                        tf.transform.rotation.z, tf.transform.rotation.w]))
        root[:3, 3] = [tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z]
        frames = chain_frames(q, robot.axis_vectors, robot.link_lengths_m)
        if robot_name == 'wheeled_8':
            # link_0 in odom times the chain's own link_4 (the reported body link) is the odometry pose.
            body = root @ frames[4]
            assert odoms[-1].child_frame_id == 'link_4'
        else:
            body = root @ body_pose_from_links(robot, frames)      # the virtual chassis of this shape
            assert odoms[-1].child_frame_id == 'virtual_chassis'
            o = odoms[-1].pose.pose.orientation
            np.testing.assert_allclose(body[:3, :3], matrix_from_quaternion(np.array([o.x, o.y, o.z, o.w])),
                                       atol=1e-6)
        p = odoms[-1].pose.pose.position
        np.testing.assert_allclose(body[:3, 3], [p.x, p.y, p.z], atol=1e-6)
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_a_future_stamp_or_a_spoofed_pose_never_stops_odometry(ros):
    """One joint_states stamped a day ahead used to make every later message look old: odometry stopped
    for good while /diagnostics said OK. Now it is rejected, counted, and reported as WARN; so is a
    spoofed pose far from the measured one."""
    robot = load_robot('wheeled_8')
    node = EstimatorNode(context=ros, parameter_overrides=[     # every message updates (100 Hz stamps)
        Parameter('robot', value='wheeled_8'), Parameter('diagnostics_rate_hz', value=20.0),
        Parameter('update_rate_hz', value=0.0)])
    peer = rclpy.create_node('estimator_gate_peer', context=ros)
    odoms, diags = [], []
    peer.create_subscription(Odometry, 'odom', odoms.append, QoSProfile(depth=500))
    peer.create_subscription(DiagnosticArray, '/diagnostics', diags.append, QoSProfile(depth=50))
    pub = peer.create_publisher(JointState, 'joint_states', QoSProfile(depth=50))
    executor = SingleThreadedExecutor(context=ros)
    executor.add_node(node)
    executor.add_node(peer)

    def send(q, stamp_s, wait_for=None):
        msg = JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int((stamp_s % 1.0) * 1e9)
        msg.name = robot.joint_names
        msg.position = [float(v) for v in q]
        for _ in range(3):
            pub.publish(msg)
            if wait_for is None or _spin_until(executor, wait_for, timeout_s=2.0):
                return

    try:
        assert _spin_until(executor, lambda: pub.get_subscription_count() > 0 and
                           peer.count_publishers('odom') > 0)
        start = node.get_clock().now().nanoseconds * 1e-9

        def shape(k):
            return 0.3 * np.sin(2 * np.pi * 0.01 * k - 0.9 * np.arange(robot.n_joints))

        for k in range(5):
            n = len(odoms)
            send(shape(k), start + 0.01 * k, lambda: len(odoms) > n)
        send(np.zeros(robot.n_joints), start + 86400.0,
             lambda: node.pipeline.gate.counts['future_stamp'] >= 1)
        assert node.pipeline.gate.counts['future_stamp'] >= 1
        spoof = np.clip(np.full(robot.n_joints, 1.0), robot.lower_rad, robot.upper_rad)
        send(spoof, start + 0.055, lambda: node.pipeline.gate.counts['too_fast'] >= 1)
        assert node.pipeline.gate.counts['too_fast'] >= 1
        for k in range(6, 30):
            n = len(odoms)
            send(shape(k), start + 0.01 * k, lambda: len(odoms) > n)
        assert len(odoms) >= 29      # odometry went on after the future stamp and the spoof
        last = odoms[-1].header.stamp
        assert last.sec + 1e-9 * last.nanosec == pytest.approx(start + 0.29, abs=1e-3)
        # The estimate is that of the good messages alone: the spoofed pose was never integrated.
        expected = run_offline(robot, start + 0.01 * np.arange(30), np.array([shape(k) for k in range(30)]))
        p = odoms[-1].pose.pose.position
        np.testing.assert_allclose([p.x, p.y], expected[-1].pose[:2, 3], atol=1e-3)
        count = len(diags)
        assert _spin_until(executor, lambda: len(diags) > count)
        status = diags[-1].status[0]
        values = {kv.key: kv.value for kv in status.values}
        assert status.level == DiagnosticStatus.WARN and 'joint_states' in status.message
        assert int(values['input_future_stamp']) >= 1 and int(values['input_too_fast']) >= 1
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_imu_gaps_and_late_readings_do_not_turn_the_heading(ros):
    """The graph's worst case for the IMU: a MuJoCo serpentine run fed to a real estimator_node over DDS,
    the IMU readings 30 ms behind the joint_states and lost for 0.3-0.5 s three times. The node puts the
    readings back in stamp order and the estimator bridges each gap with the contacts, then re-anchors: the
    heading stays within 3 degrees of the truth (integrating one held rate over each gap, as before, turned
    it by 28 degrees and up to 72 on the way)."""
    from sensor_msgs.msg import Imu

    from snake_control.physics import SnakeWorld
    from snake_control.validation import runs as V

    robot = load_robot('pitch_yaw_32')
    case = next(c for c in V.CASES if c.robot == 'pitch_yaw_32' and c.gait == 'serpentine')
    rec = V.simulate(SnakeWorld(robot), V.gait_goal_fn(robot, case.gait, case.command, case.params), 6.0,
                     warmup_s=V.WARMUP_S)
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    true_yaw = np.unwrap(np.arctan2(truth[:, 1, 0], truth[:, 0, 0]))
    t0 = 100.0                                          # stamps: t0 + simulated time
    gaps = [(1.5, 1.9), (3.0, 3.3), (4.4, 4.9)]
    lost = [any(a <= t < b for a, b in gaps) for t in rec.times_s]
    lag = 3                                             # IMU readings 30 ms behind the joints

    node, peer, odoms, js_pub, imu_pub, executor = _imu_rig(
        ros, 'estimator_imu_gap_peer', Parameter('imu_link', value=rec.imu_link),
        Parameter('update_rate_hz', value=0.0), Parameter('publish_tf', value=False),
        Parameter('axial_weight', value=float(V.case_estimator_options(case).get('axial_weight', -1.0))),
        odom_depth=1000)

    def stamp(msg, t):
        set_stamp(msg.header.stamp, round(t * 1e9))

    def send(pub, msg, count):
        _send(executor, pub, msg, count)

    def send_imu(t, gyro, accel):
        imu = Imu()
        stamp(imu, t)
        imu.orientation_covariance[0] = -1.0
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = (float(v) for v in gyro)
        a = imu.linear_acceleration
        a.x, a.y, a.z = (float(v) for v in accel)
        send(imu_pub, imu, lambda: node.pipeline.imu_received)

    def send_joints(k):
        msg = JointState()
        stamp(msg, t0 + rec.times_s[k])
        msg.name = list(robot.joint_names)
        msg.position = [float(v) for v in rec.positions_rad[k]]
        send(js_pub, msg, lambda: node.pipeline.received)

    try:
        assert _spin_until(executor, lambda: js_pub.get_subscription_count() > 0 and
                           imu_pub.get_subscription_count() > 0 and peer.count_publishers('odom') > 0)
        still = len(rec.still_gyro_rad_s)      # the settling's still readings, as at power-up
        for k, (gyro, accel) in enumerate(zip(rec.still_gyro_rad_s, rec.still_accel_m_s2)):
            send_imu(t0 + rec.times_s[0] + (k - still) * 0.01, gyro, accel)
        n = len(rec.times_s)
        for k in range(n + lag):
            if k < n:
                send_joints(k)
            j = k - lag
            if 0 <= j and not lost[j]:
                send_imu(t0 + rec.times_s[j], rec.gyro_rad_s[j], rec.accel_m_s2[j])
        assert _spin_until(executor, lambda: len(odoms) >= n - 5 and node.pipeline.order.waiting == 0)
        assert node.estimator.imu_gaps == len(gaps)
        assert node.pipeline.order.held > n / 2        # joint_states waited for their IMU reading
        from snake_control.kinematics.lie import matrix_from_quaternion
        rots = [matrix_from_quaternion(np.array([o.pose.pose.orientation.x, o.pose.pose.orientation.y,
                                                 o.pose.pose.orientation.z, o.pose.pose.orientation.w]))
                for o in odoms]
        est_yaw = np.unwrap([math.atan2(r[1, 0], r[0, 0]) for r in rots])
        index = [int(round((o.header.stamp.sec + 1e-9 * o.header.stamp.nanosec - t0 - rec.times_s[0]) / 0.01))
                 for o in odoms]
        error = np.degrees((est_yaw - est_yaw[0]) - (true_yaw[index] - true_yaw[index[0]]))
        assert np.max(np.abs(error)) < 3.0, np.max(np.abs(error))
        assert np.linalg.norm(truth[-1, :2, 3] - truth[0, :2, 3]) > 1.0       # the snake went somewhere
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()


def test_the_node_and_the_offline_replay_give_the_same_odometry(ros):
    """The same joint_states and raw IMU readings through a real estimator_node over DDS and through
    estimation.replay: the same odometry, stamp for stamp, bit for bit. The stream has what the node's
    per-message logic handles: 200 Hz joint_states decimated to 100 Hz, each waiting for the IMU reading
    at its stamp (sent just after it), the IMU lost for 0.4 s, a future stamp, stamps that go back 3 s."""
    from sensor_msgs.msg import Imu

    from snake_control.estimation.replay import EstimatorInputs, replay_estimator

    robot = load_robot('wheeled_8')
    node, peer, odoms, js_pub, imu_pub, executor = _imu_rig(
        ros, 'estimator_replay_peer', Parameter('robot', value='wheeled_8'), Parameter('update_rate_hz', value=100.0),
        odom_depth=1000)
    k = np.arange(robot.n_joints)
    joints_t = np.concatenate([100.0 + 0.005 * np.arange(160), 97.8 + 0.005 * np.arange(80)])
    joints_t[50] = time.time() + 86400.0                # a day ahead of the node's clock
    imu_t = 100.0 + 0.01 * np.arange(80)
    imu_t = imu_t[(imu_t < 100.3) | (imu_t > 100.7)]
    joints, imu = [], []                # (stamp, receive time) as sent

    def send_joints(t):
        msg = JointState(name=list(robot.joint_names),
                         position=[float(v) for v in 0.4 * np.sin(np.pi * t - k)])
        set_stamp(msg.header.stamp, round(t * 1e9))
        joints.append((t, time.time()))
        _send(executor, js_pub, msg, lambda: node.pipeline.received)

    def send_imu(t):
        msg = Imu()
        set_stamp(msg.header.stamp, round(t * 1e9))
        msg.orientation_covariance[0] = -1.0
        msg.angular_velocity.z = 0.3 + 0.1 * math.sin(t)
        msg.linear_acceleration.z = 9.80665
        imu.append((t, time.time()))
        _send(executor, imu_pub, msg, lambda: node.pipeline.imu_received)

    try:
        assert _spin_until(executor, lambda: js_pub.get_subscription_count() > 0 and
                           imu_pub.get_subscription_count() > 0 and peer.count_publishers('odom') > 0)
        next_imu = 0
        for i, t in enumerate(joints_t):
            send_joints(t)
            while i != 50 and next_imu < len(imu_t) and imu_t[next_imu] <= t + 1e-9:
                send_imu(imu_t[next_imu])
                next_imu += 1
        assert _spin_until(executor, lambda: node.pipeline.order.waiting == 0)
        js = np.array(joints)
        positions = 0.4 * np.sin(np.pi * js[:, :1] - k[None, :])
        inputs = EstimatorInputs(js[:, 0], js[:, 1], positions, np.full(positions.shape, np.nan))
        im = np.array(imu)
        inputs.imu_t_s, inputs.imu_received_s = im[:, 0], im[:, 1]
        inputs.imu_orientation_xyzw = np.full((len(im), 4), np.nan)
        inputs.imu_rate_rad_s = np.column_stack((0 * im[:, 0], 0 * im[:, 0], 0.3 + 0.1 * np.sin(im[:, 0])))
        inputs.imu_accel_m_s2 = np.tile([0.0, 0.0, 9.80665], (len(im), 1))
        track = replay_estimator(robot, inputs, update_rate_hz=100.0)
        c = track.counts
        # The stream did exercise each part.
        assert c['decimated'] > 80 and c['held_for_imu'] > 50 and c['imu_timed_out'] > 5, c
        assert c['input_future_stamp'] == 1 and c['input_time_rebase'] == 1 and c['imu_gaps'] >= 1, c
        _spin_until(executor, lambda: len(odoms) >= len(track.t_s), timeout_s=3.0)
        got_t = np.array([o.header.stamp.sec + 1e-9 * o.header.stamp.nanosec for o in odoms])
        # (Stamps that went back used to stop odom until they passed the last published one again.)
        assert len(odoms) == len(track.t_s), sorted(set(np.round(got_t, 4)) ^ set(np.round(track.t_s, 4)))[:5]
        np.testing.assert_allclose(got_t, track.t_s, atol=1e-6)
        got = np.array([[o.pose.pose.position.x, o.pose.pose.position.y, o.pose.pose.position.z,
                         o.pose.pose.orientation.x, o.pose.pose.orientation.y, o.pose.pose.orientation.z,
                         o.pose.pose.orientation.w] for o in odoms])
        np.testing.assert_allclose(got, track.pose_xyz_quat, atol=1e-12)
        for name in ('decimated', 'received', 'imu_received'):
            assert getattr(node.pipeline, name) == c[name], name
        assert node.pipeline.order.held == c['held_for_imu'] and node.pipeline.order.timed_out == c['imu_timed_out']
        assert node.pipeline.gate.counts == {kind[len('input_'):]: n for kind, n in c.items()
                                             if kind.startswith('input_')}
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()
