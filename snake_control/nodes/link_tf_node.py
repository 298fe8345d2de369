"""link_tf_node: the links' transforms on /tf from joint_states, where robot_state_publisher is not running.

A thin rclpy shell around the robot's forward kinematics with the URDF's joint frames
(snake_control.kinematics.chain.urdf_joint_transforms, what tf_tree.link_transforms names): every joint's
parent -> child transform (link_j -> link_{j+1}), stamped with the joint_states message it comes from. With estimator_node's odom -> link_0 this makes the whole tree
odom -> every link, for Foxglove, RViz and recordings, without a ROS installation. Publishing needs only
the tf2_msgs message package (tf2_ros is not needed).

Subscribes: joint_states (sensor_msgs/JointState, best effort), only while something subscribes to /tf
(looked at every LISTENERS_PERIOD_S): a tree of 32 transforms costs a few hundred microseconds to compute
and publish, and every message a subscription takes costs its process about a tenth of a millisecond
even unused. The messages are taken as bytes and built only for a tree that is published.
Publishes: /tf (tf2_msgs/TFMessage).
Parameters: robot (str, read-only) robot name or YAML path; publish_rate_hz (float) at most this many
trees per second (robot_state_publisher's publish_frequency); 0 = every joint_states message.
"""
from __future__ import annotations

import math

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from snake_control.kinematics.chain import urdf_joint_transforms
from snake_control.kinematics.tf_tree import link_name, xyz_quat, xyz_quats
from snake_control.nodes.qos import SENSOR_QOS, STATE_QOS
from snake_control.nodes.messages import header_stamp_s
from snake_control.nodes.runner import run_node
from snake_control.robot import load_robot, reorder_joints

DEFAULT_RATE_HZ = 20.0      # robot_state_publisher's default publish_frequency: enough to watch and record
LISTENERS_PERIOD_S = 1.0    # a viewer that starts gets the tree within this


def tf2_msgs_available() -> bool:
    """Whether tf2_msgs (the message package /tf is published with) is importable."""
    try:
        import tf2_msgs.msg  # noqa: F401
    except ImportError:
        return False
    return True


def transform_msgs(transforms, stamp) -> list:
    """geometry_msgs/TransformStamped messages of (parent, child, 4x4) triples, all stamped stamp (None:
    unstamped)."""
    from geometry_msgs.msg import TransformStamped

    out = []
    for parent, child, matrix in transforms:
        (x, y, z), (qx, qy, qz, qw) = xyz_quat(matrix)
        t = TransformStamped()
        if stamp is not None:
            t.header.stamp = stamp
        t.header.frame_id = parent
        t.child_frame_id = child
        t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = x, y, z
        t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z, t.transform.rotation.w = (
            qx, qy, qz, qw)
        out.append(t)
    return out


class LinkTfNode(Node):
    """joint_states in, the links' transforms on /tf out."""

    NODE_NAME = 'link_tf_node'

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        from tf2_msgs.msg import TFMessage

        self.declare_parameter('robot', 'pitch_yaw_32', ParameterDescriptor(
            description='robot name (config/robots) or robot YAML path', read_only=True))
        rate = ParameterDescriptor(description='trees per second at most; 0 = every joint_states message')
        rate.floating_point_range = [FloatingPointRange(from_value=0.0, to_value=1000.0, step=0.0)]
        self.declare_parameter('publish_rate_hz', DEFAULT_RATE_HZ, rate)
        self.robot = load_robot(self.get_parameter('robot').value)
        self._joint_names = list(self.robot.joint_names)    # a property that builds a new list
        hz = float(self.get_parameter('publish_rate_hz').value)
        self.period_s = 0.0 if hz <= 0 else 1.0 / hz
        self._next_s = -math.inf
        self.received = 0
        self.published = 0
        # One message, built once with every frame name; each tree only writes the numbers and stamps.
        self._out = TFMessage(transforms=transform_msgs(
            [(link_name(j), link_name(j + 1), np.eye(4)) for j in range(self.robot.n_joints)], None))
        self.tf_pub = self.create_publisher(TFMessage, '/tf', STATE_QOS)
        self._joint_states_sub = None
        self.create_timer(LISTENERS_PERIOD_S, self._follow_listeners)
        self._follow_listeners()

    @property
    def listening(self) -> bool:
        """Whether joint_states are taken (something subscribes to /tf)."""
        return self._joint_states_sub is not None

    def _follow_listeners(self):
        wanted = self.tf_pub.get_subscription_count() > 0
        if wanted and self._joint_states_sub is None:
            self._joint_states_sub = self.create_subscription(JointState, 'joint_states', self._on_joint_states,
                                                              SENSOR_QOS, raw=True)
        elif not wanted and self._joint_states_sub is not None:
            self.destroy_subscription(self._joint_states_sub)
            self._joint_states_sub = None

    def _on_joint_states(self, data: bytes):
        self.received += 1
        msg = None
        stamp_s = header_stamp_s(data)
        if stamp_s is None:
            msg = deserialize_message(data, JointState)
            stamp_s = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if self._next_s - stamp_s > max(1.0, 2.0 * self.period_s):
            self._next_s = -math.inf        # the clock stepped back: start over rather than wait for it
        if stamp_s < self._next_s:
            return
        self._next_s = max(self._next_s + self.period_s, stamp_s + 0.5 * self.period_s)
        if msg is None:
            msg = deserialize_message(data, JointState)
        try:
            q = reorder_joints(list(msg.name), list(msg.position), self._joint_names)
        except ValueError as exc:
            self.get_logger().warning(f'joint_states ignored: {exc}', throttle_duration_sec=5.0)
            return
        poses = xyz_quats(urdf_joint_transforms(np.asarray(q, dtype=float), self.robot.axis_vectors,
                                                self.robot.link_lengths_m)).tolist()
        for t, (x, y, z, qx, qy, qz, qw) in zip(self._out.transforms, poses):
            t.header.stamp = msg.header.stamp
            tr, rot = t.transform.translation, t.transform.rotation
            tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w = x, y, z, qx, qy, qz, qw
        self.tf_pub.publish(self._out)
        self.published += 1


def main(args=None):
    return run_node(LinkTfNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
