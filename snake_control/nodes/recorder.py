"""recorder: writes every topic of the graph to an MCAP file (ROS 2 profile, CDR messages, ros2msg
schemas), readable by `ros2 bag`, Foxglove and mcap_ros2.reader.

Messages are taken serialized (rclpy raw subscriptions) and written as they are by
snake_control.mcap_io.RawWriter, so recording costs no Python (de)serialization. Topics are discovered
while it runs, so late publishers are recorded too. Each subscription matches its publishers' QoS (best-effort or reliable, transient-local or volatile).
"""
from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from snake_control.mcap_io import RawWriter


def message_class(datatype: str):
    package, _, name = datatype.partition('/msg/')
    return getattr(importlib.import_module(f'{package}.msg'), name)


class Recorder(Node):
    NODE_NAME = 'recorder'

    def __init__(self, path, discovery_period_s: float = 0.25, exclude=(), **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.path = Path(path)
        self._writer = RawWriter(self.path, library='snake_control recorder')
        self._lock = threading.Lock()
        self._subs = {}
        self._exclude = set(exclude)
        self.counts = self._writer.counts  # messages written per topic
        self.skipped: dict[str, str] = {}
        self._closed = False
        self.create_timer(discovery_period_s, self._discover)
        self._discover()

    def _qos(self, topic: str) -> QoSProfile:
        infos = self.get_publishers_info_by_topic(topic)
        best_effort = any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos)
        latched = bool(infos) and all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                                      for i in infos)
        reliability = ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE
        durability = DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=reliability,
                          durability=durability)

    def _discover(self):
        for topic, types in self.get_topic_names_and_types():
            if topic in self._subs or topic in self.skipped or topic in self._exclude:
                continue
            if not self.get_publishers_info_by_topic(topic):
                continue  # only subscribers so far: wait for a publisher to learn its QoS
            datatype = types[0]
            try:
                cls = message_class(datatype)
                with self._lock:
                    self._writer.register(topic, datatype)
            except (ImportError, AttributeError, FileNotFoundError) as exc:
                self.skipped[topic] = str(exc)
                self.get_logger().warn(f'not recording {topic}: {exc}')
                continue
            self._subs[topic] = self.create_subscription(
                cls, topic, lambda data, t=topic: self._write(t, data), self._qos(topic), raw=True)

    def _write(self, topic: str, data: bytes):
        now = time.time_ns()
        with self._lock:
            if self._closed:
                return
            self._writer.write(topic, data, now)

    def close(self):
        """Finish the file (summary, index); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.close()
