"""recorder: writes every topic of the graph to an MCAP file (ROS 2 profile, CDR messages, ros2msg
schemas), readable by `ros2 bag`, Foxglove and mcap_ros2.reader.

Messages are taken serialized (rclpy raw subscriptions) and written as they are, so recording costs no
Python (de)serialization; the schemas are the .msg definitions installed with the message packages,
concatenated the way rosbag2 does. Topics are discovered while it runs, so late publishers are recorded
too. Each subscription matches its publishers' QoS (best-effort or reliable, transient-local or volatile).
"""
from __future__ import annotations

import importlib
import re
import sys
import threading
import time
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

BUILTIN_TYPES = {'bool', 'byte', 'char', 'float32', 'float64', 'int8', 'uint8', 'int16', 'uint16', 'int32',
                 'uint32', 'int64', 'uint64', 'string', 'wstring'}
SEPARATOR = '=' * 80


def _share_dirs(package: str) -> list[Path]:
    dirs = [Path(sys.prefix) / 'share' / package]
    try:
        from ament_index_python.packages import get_package_share_directory
        dirs.append(Path(get_package_share_directory(package)))
    except Exception:  # no ament index: the venv layout above is the only place
        pass
    return dirs


def msg_text(datatype: str) -> str:
    """The .msg definition of 'pkg/msg/Type' (or 'pkg/Type') from the installed share folder."""
    package, _, name = datatype.replace('/msg/', '/').partition('/')
    for folder in _share_dirs(package):
        path = folder / 'msg' / f'{name}.msg'
        if path.is_file():
            return path.read_text()
    raise FileNotFoundError(f'no message definition for {datatype} (looked in share/{package}/msg)')


def _dependencies(package: str, text: str) -> list[str]:
    deps = []
    for line in text.splitlines():
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        field_type = re.sub(r'\[.*\]$', '', line.split()[0])
        if '=' in line.split()[0] or field_type.split('<=')[0] in BUILTIN_TYPES:
            continue
        field_type = field_type.split('<=')[0]
        if field_type in BUILTIN_TYPES:
            continue
        if field_type == 'Header':
            deps.append('std_msgs/Header')
        elif '/' in field_type:
            deps.append(field_type.replace('/msg/', '/'))
        else:
            deps.append(f'{package}/{field_type}')
    return deps


def msgdef(datatype: str) -> str:
    """The full ros2msg schema of a type: its definition, then every nested type once (rosbag2's form)."""
    top = datatype.replace('/msg/', '/')
    text = msg_text(top)
    parts, seen = [text.rstrip('\n')], {top}
    queue = _dependencies(top.split('/')[0], text)
    while queue:
        dep = queue.pop(0)
        if dep in seen:
            continue
        seen.add(dep)
        dep_text = msg_text(dep)
        parts.append(f'{SEPARATOR}\nMSG: {dep}\n{dep_text.rstrip(chr(10))}')
        queue.extend(_dependencies(dep.split('/')[0], dep_text))
    return '\n'.join(parts) + '\n'


def message_class(datatype: str):
    package, _, name = datatype.partition('/msg/')
    return getattr(importlib.import_module(f'{package}.msg'), name)


class Recorder(Node):
    NODE_NAME = 'recorder'

    def __init__(self, path, discovery_period_s: float = 0.25, exclude=(), **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        from mcap.writer import CompressionType, Writer  # the layer mcap_ros2.writer is built on

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, 'wb')
        self._writer = Writer(self._file, compression=CompressionType.ZSTD)
        self._writer.start(profile='ros2', library='snake_control recorder')
        self._lock = threading.Lock()
        self._channels: dict[str, int] = {}
        self._schemas: dict[str, int] = {}
        self._subs = {}
        self._exclude = set(exclude)
        self.counts: dict[str, int] = {}
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
                    if datatype not in self._schemas:
                        self._schemas[datatype] = self._writer.register_schema(
                            name=datatype.replace('/msg/', '/'), encoding='ros2msg',
                            data=msgdef(datatype).encode())
                    self._channels[topic] = self._writer.register_channel(
                        topic=topic, message_encoding='cdr', schema_id=self._schemas[datatype])
            except (ImportError, AttributeError, FileNotFoundError) as exc:
                self.skipped[topic] = str(exc)
                self.get_logger().warn(f'not recording {topic}: {exc}')
                continue
            self.counts[topic] = 0
            self._subs[topic] = self.create_subscription(
                cls, topic, lambda data, t=topic: self._write(t, data), self._qos(topic), raw=True)

    def _write(self, topic: str, data: bytes):
        now = time.time_ns()
        with self._lock:
            if self._closed:
                return
            self._writer.add_message(channel_id=self._channels[topic], log_time=now, publish_time=now,
                                     data=data, sequence=self.counts[topic])
            self.counts[topic] += 1

    def close(self):
        """Finish the file (summary, index); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.finish()
            self._file.close()
