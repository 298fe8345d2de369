"""recorder: writes every topic of the graph to an MCAP file (ROS 2 profile, CDR messages, ros2msg
schemas), readable by `ros2 bag`, Foxglove and mcap_ros2.reader.

Messages are taken serialized (rclpy raw subscriptions) and written as they are by
snake_control.mcap_io.RawWriter, so recording costs no Python (de)serialization. Topics are discovered
while it runs, so late publishers are recorded too. Each subscription matches its publishers' QoS (best-effort
or reliable, transient-local or volatile), and each channel carries it as offered_qos_profiles metadata, so
`ros2 bag play` offers the topics as they were (a latched robot_description stays latched).

Where tf2_msgs is not installed nobody can publish /tf; given the robot (tf_robot), the recorder then writes
/tf into the file itself, serialised from the message definition: the links' transforms from joint_states
(snake_control.kinematics.tf_tree) and odom -> link_0 from odom, the same tree link_tf_node and
estimator_node publish where tf2_msgs is installed.
"""
from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from snake_control.mcap_io import (TF_MESSAGE_MSGDEF, TF_MESSAGE_TYPE, MessageEncoder, RawWriter,
                                   offered_qos_profiles, type_name)

TF_TOPIC = '/tf'


def message_class(datatype: str):
    package, _, name = datatype.partition('/msg/')
    return getattr(importlib.import_module(f'{package}.msg'), name)


class Recorder(Node):
    NODE_NAME = 'recorder'

    def __init__(self, path, discovery_period_s: float = 0.25, exclude=(), tf_robot=None, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.path = Path(path)
        self._writer = RawWriter(self.path, library='snake_control recorder')
        self._lock = threading.Lock()
        self._subs = {}
        self._exclude = set(exclude)
        self.counts = self._writer.counts  # messages written per topic
        self.skipped: dict[str, str] = {}
        self._closed = False
        self._tf = None
        if tf_robot is not None:
            self._tf = _TfFromGraph(self, tf_robot)
            self._exclude.add(TF_TOPIC)
        self.create_timer(discovery_period_s, self._discover)
        self._discover()

    def _qos(self, topic: str) -> tuple[QoSProfile, str]:
        """The subscription's QoS, matching every publisher, and the offered_qos_profiles to store."""
        infos = self.get_publishers_info_by_topic(topic)
        best_effort = any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos)
        latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                      for i in infos)
        reliability = ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE
        durability = DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE
        depth = max([int(i.qos_profile.depth) for i in infos] + [1])
        offered = offered_qos_profiles('best_effort' if best_effort else 'reliable',
                                       'transient_local' if latched else 'volatile', depth)
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=reliability,
                          durability=durability), offered

    def _discover(self):
        for topic, types in self.get_topic_names_and_types():
            if topic in self._subs or topic in self.skipped or topic in self._exclude:
                continue
            if not self.get_publishers_info_by_topic(topic):
                continue  # only subscribers so far: wait for a publisher to learn its QoS
            datatype = type_name(types[0])
            qos, offered = self._qos(topic)
            # The TF definition ships with this module: /tf is recorded even where tf2_msgs' .msg files
            # are not installed in a share folder.
            definition = TF_MESSAGE_MSGDEF if datatype == TF_MESSAGE_TYPE else None
            try:
                cls = message_class(datatype)
                with self._lock:
                    self._writer.register(topic, datatype, offered, definition)
            except (ImportError, AttributeError, FileNotFoundError) as exc:
                self.skipped[topic] = str(exc)
                self.get_logger().warn(f'not recording {topic}: {exc}')
                continue
            self._subs[topic] = self.create_subscription(
                cls, topic, lambda data, t=topic: self._write(t, data), qos, raw=True)

    def _write(self, topic: str, data: bytes, definition: str | None = None):
        now = time.time_ns()
        with self._lock:
            if self._closed:
                return
            if definition is not None and not self._writer.registered(topic):
                self._writer.register(topic, TF_MESSAGE_TYPE, offered_qos_profiles(depth=100), definition)
            self._writer.write(topic, data, now)

    def close(self):
        """Finish the file (summary, index); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.close()


class _TfFromGraph:
    """The TF tree written straight into the recording from joint_states and odom (no tf2_msgs to publish
    it with): the links' transforms at most LINK_RATE_HZ, odom -> link_0 on every odom message."""

    LINK_RATE_HZ = 50.0

    def __init__(self, recorder: Recorder, robot):
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState

        from snake_control.nodes.qos import SENSOR_QOS, STATE_QOS
        from snake_control.robot import load_robot

        self.recorder = recorder
        self.robot = load_robot(robot) if isinstance(robot, (str, Path)) else robot
        self.encoder = MessageEncoder(TF_MESSAGE_TYPE, TF_MESSAGE_MSGDEF)
        self.q = None
        self._next_s = float('-inf')
        self._body_in_root = None
        recorder.create_subscription(JointState, 'joint_states', self._on_joint_states, SENSOR_QOS)
        recorder.create_subscription(Odometry, 'odom', self._on_odom, STATE_QOS)

    def _emit(self, t_s: float, transforms):
        from snake_control.mcap_io import tf_message

        self.recorder._write(TF_TOPIC, self.encoder.encode(tf_message(t_s, transforms)), TF_MESSAGE_MSGDEF)

    def _on_joint_states(self, msg):
        import numpy as np

        from snake_control.kinematics.tf_tree import link_transforms
        from snake_control.robot import reorder_joints

        try:
            self.q = np.asarray(reorder_joints(list(msg.name), list(msg.position), self.robot.joint_names))
        except ValueError:
            return
        t_s = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if abs(t_s - self._next_s) > 1.0 or t_s >= self._next_s:
            self._next_s = t_s + 1.0 / self.LINK_RATE_HZ
            self._emit(t_s, link_transforms(self.robot, self.q))

    def _on_odom(self, msg):
        import numpy as np

        from snake_control.estimation.estimator import root_link_pose
        from snake_control.kinematics.lie import matrix_from_quaternion

        if self.q is None:
            return
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        body = np.eye(4)
        body[:3, :3] = matrix_from_quaternion(np.array([o.x, o.y, o.z, o.w]))
        body[:3, 3] = (p.x, p.y, p.z)
        root, self._body_in_root = root_link_pose(self.robot, body, self.q, None, self._body_in_root)
        self._emit(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec,
                   [(msg.header.frame_id or 'odom', 'link_0', root)])
