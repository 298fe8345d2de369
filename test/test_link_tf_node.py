"""link_tf_node with real DDS: the links' transforms on /tf from joint_states, taken only while something
subscribes to /tf."""
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
tf2_msgs = pytest.importorskip('tf2_msgs.msg', reason='tf2_msgs not importable (make ros2-tools installs it)')
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from snake_control.kinematics.chain import urdf_joint_transforms  # noqa: E402
from snake_control.kinematics.tf_tree import xyz_quats  # noqa: E402
from snake_control.nodes.link_tf_node import LinkTfNode  # noqa: E402
from snake_control.robot import load_robot  # noqa: E402


def _spin_until(executor, predicate, timeout_s=15.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not predicate():
        executor.spin_once(timeout_sec=0.02)
    return predicate()


def test_tree_only_while_someone_listens():
    context = rclpy.Context()
    rclpy.init(context=context)
    robot = load_robot('pitch_yaw_32')
    node = LinkTfNode(context=context, parameter_overrides=[Parameter('robot', value='pitch_yaw_32'),
                                                            Parameter('publish_rate_hz', value=0.0)])
    peer = rclpy.create_node('link_tf_peer', context=context)
    pub = peer.create_publisher(JointState, 'joint_states', QoSProfile(depth=50))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(peer)
    q = 0.4 * np.sin(0.5 * np.arange(robot.n_joints))

    def send(k):
        msg = JointState(name=robot.joint_names, position=q.tolist())
        msg.header.stamp.sec, msg.header.stamp.nanosec = 50 + k, 250_000_000
        pub.publish(msg)
    try:
        # Nobody subscribes to /tf: joint_states flow (the peer hears them) but the node does not take them.
        heard = []
        peer.create_subscription(JointState, 'joint_states', heard.append, QoSProfile(depth=50))
        k = 0
        end = time.monotonic() + 15.0
        while len(heard) < 5 and time.monotonic() < end:
            send(k)
            k += 1
            _spin_until(executor, lambda: len(heard) >= 5, timeout_s=0.05)
        assert len(heard) >= 5
        assert not node.listening and node.received == 0 and node.published == 0

        trees = []
        viewer = peer.create_subscription(tf2_msgs.TFMessage, '/tf', trees.append, QoSProfile(depth=10))
        assert _spin_until(executor, lambda: node.listening and pub.get_subscription_count() > 1)
        end = time.monotonic() + 15.0
        while not trees and time.monotonic() < end:
            send(k)
            _spin_until(executor, lambda: bool(trees), timeout_s=0.1)
        assert trees and node.published >= 1
        tree = trees[-1].transforms
        assert [(t.header.frame_id, t.child_frame_id) for t in tree[:2]] == [('link_0', 'link_1'),
                                                                            ('link_1', 'link_2')]
        assert tree[0].header.stamp.nanosec == 250_000_000 and tree[0].header.stamp.sec >= 50
        got = np.array([[t.transform.translation.x, t.transform.translation.y, t.transform.translation.z,
                         t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z,
                         t.transform.rotation.w] for t in tree])
        expected = xyz_quats(urdf_joint_transforms(q, robot.axis_vectors, robot.link_lengths_m))
        np.testing.assert_allclose(got, expected, atol=1e-9)

        peer.destroy_subscription(viewer)           # the viewer goes: joint_states are let go
        assert _spin_until(executor, lambda: not node.listening)
    finally:
        executor.shutdown()
        node.destroy_node()
        peer.destroy_node()
        rclpy.try_shutdown(context=context)
