"""MCAP files with the ROS 2 profile (CDR messages, ros2msg schemas): the package's one reader and writer.

No rclpy: the files are read and written with the ``mcap`` and ``mcap-ros2-support`` packages, so
recordings can be reviewed on a laptop without ROS. Used by the recorder node (raw CDR bytes, schemas
from the installed .msg files), by ``snake odometry --input F.mcap`` (joint_states), by the recorded
session reader and by the demo (merging one file per robot).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

BUILTIN_TYPES = {'bool', 'byte', 'char', 'float32', 'float64', 'int8', 'uint8', 'int16', 'uint16', 'int32',
                 'uint32', 'int64', 'uint64', 'string', 'wstring'}
SEPARATOR = '=' * 80
JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
# Full ros2msg definition (with dependencies) of sensor_msgs/msg/JointState, for writing without ROS.
JOINT_STATE_MSGDEF = """std_msgs/Header header
string[] name
float64[] position
float64[] velocity
float64[] effort
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""


# ---------------------------------------------------------------------------------------------- schemas

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


# ---------------------------------------------------------------------------------------------- writing

class RawWriter:
    """Writes already-serialized CDR messages: register(topic, datatype) once, then write(topic, data).

    Not thread-safe: the caller serializes calls (the recorder holds a lock).
    """

    def __init__(self, path: str | Path, library: str = 'snake_control'):
        from mcap.writer import CompressionType, Writer  # the layer mcap_ros2.writer is built on

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, 'wb')
        self._writer = Writer(self._file, compression=CompressionType.ZSTD)
        self._writer.start(profile='ros2', library=library)
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def register(self, topic: str, datatype: str) -> None:
        """Add a channel for topic with the schema of datatype ('pkg/msg/Type'); FileNotFoundError if the
        type's .msg is not installed."""
        if datatype not in self._schemas:
            self._schemas[datatype] = self._writer.register_schema(
                name=datatype.replace('/msg/', '/'), encoding='ros2msg', data=msgdef(datatype).encode())
        self._channels[topic] = self._writer.register_channel(
            topic=topic, message_encoding='cdr', schema_id=self._schemas[datatype])
        self.counts[topic] = 0

    def write(self, topic: str, data: bytes, log_time_ns: int) -> None:
        self._writer.add_message(channel_id=self._channels[topic], log_time=log_time_ns,
                                 publish_time=log_time_ns, data=data, sequence=self.counts[topic])
        self.counts[topic] += 1

    def close(self) -> None:
        """Finish the file (summary, index)."""
        self._writer.finish()
        self._file.close()


def write_joint_states(path, joint_names, t_s, positions_rad, velocities_rad_s=None, topic='/joint_states'):
    """Write sensor_msgs/JointState messages (t_s in s, angles in rad) to an .mcap file."""
    from mcap_ros2.writer import Writer

    with Path(path).open('wb') as f:
        writer = Writer(f)
        schema = writer.register_msgdef(JOINT_STATE_TYPE, JOINT_STATE_MSGDEF)
        for k, (t, q) in enumerate(zip(t_s, positions_rad)):
            sec = int(np.floor(t))
            msg = {'header': {'stamp': {'sec': sec, 'nanosec': int(round((t - sec) * 1e9)) % 1_000_000_000},
                              'frame_id': ''},
                   'name': list(joint_names), 'position': [float(v) for v in q],
                   'velocity': [] if velocities_rad_s is None else [float(v) for v in velocities_rad_s[k]],
                   'effort': []}
            writer.write_message(topic, schema, msg, log_time=int(t * 1e9), publish_time=int(t * 1e9))
        writer.finish()


def merge_recordings(parts: list[tuple[str, Path]], out_path: str | Path) -> dict:
    """Merge per-robot MCAP files into one: each robot's topics keep their /<robot>/ names, absolute
    topics (/diagnostics, /rosout, /tf, ...) move under /<robot>/. Returns message counts per topic."""
    from mcap.reader import make_reader
    from mcap.writer import CompressionType, Writer

    out_path = Path(out_path)
    counts: dict[str, int] = {}
    with open(out_path, 'wb') as f_out:
        writer = Writer(f_out, compression=CompressionType.ZSTD)
        writer.start(profile='ros2', library='snake_control demo')
        schemas, channels = {}, {}
        for robot, path in parts:
            prefix = f'/{robot}'
            with open(path, 'rb') as f_in:
                for schema, channel, message in make_reader(f_in).iter_messages(log_time_order=True):
                    topic = channel.topic
                    if not topic.startswith(prefix + '/'):
                        topic = prefix + topic
                    if topic not in channels:
                        sid = 0
                        if schema is not None:
                            key = (schema.name, schema.encoding, schema.data)
                            if key not in schemas:
                                schemas[key] = writer.register_schema(schema.name, schema.encoding,
                                                                      schema.data)
                            sid = schemas[key]
                        channels[topic] = writer.register_channel(topic, channel.message_encoding, sid,
                                                                  dict(channel.metadata))
                        counts[topic] = 0
                    writer.add_message(channels[topic], message.log_time, message.data, message.publish_time,
                                       sequence=counts[topic])
                    counts[topic] += 1
        writer.finish()
    return counts


# ---------------------------------------------------------------------------------------------- reading

def ros2_messages(path: str | Path) -> Iterator:
    """Every message of the file in log-time order, decoded (mcap_ros2's McapROS2Message: .channel.topic,
    .log_time_ns, .ros_msg)."""
    from mcap_ros2.reader import read_ros2_messages

    return read_ros2_messages(str(path))


def read_joint_states(path, joint_names, topic: str | None = None):
    """sensor_msgs/JointState messages of an .mcap file in the given joint order: (t_s (T,),
    positions_rad (T, n), velocities_rad_s (T, n) or None when some message lacks velocities).

    topic: the exact topic; default: the one topic whose name ends in 'joint_states'. Stamps come
    from the message header (the log time when the header is zero).
    """
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from snake_control.robot import joint_index

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no such .mcap file')
    with path.open('rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        channels = summary.channels.values() if summary is not None else []
        schemas = summary.schemas if summary is not None else {}
        candidates = [c.topic for c in channels if schemas.get(c.schema_id) is not None
                      and schemas[c.schema_id].name == JOINT_STATE_TYPE]
        if topic is None:
            named = sorted({t for t in candidates if t.rstrip('/').split('/')[-1] == 'joint_states'})
            if len(named) != 1:
                raise ValueError(f'{path}: expected one sensor_msgs/JointState topic named joint_states, '
                                 f'found {named or sorted(set(candidates))}; choose one with --topic')
            topic = named[0]
        elif topic not in candidates:
            raise ValueError(f'{path}: no sensor_msgs/JointState topic {topic!r} '
                             f'(have {sorted(set(candidates))})')
        index = None
        times, pos, vel = [], [], []
        has_vel = True
        for _, _, message, msg in reader.iter_decoded_messages(topics=[topic]):
            names = list(msg.name)
            if index is None or names != index[1]:
                try:
                    index = (joint_index(names, joint_names), names)
                except ValueError as exc:
                    raise ValueError(f'{path}: {topic}: message {exc}') from None
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            times.append(stamp if stamp > 0 else message.log_time * 1e-9)
            position = np.asarray(msg.position, dtype=float)
            pos.append(position[index[0]])
            velocity = np.asarray(msg.velocity, dtype=float)
            if velocity.shape == position.shape and has_vel:
                vel.append(velocity[index[0]])
            else:
                has_vel = False
    if len(times) < 2:
        raise ValueError(f'{path}: {topic}: needs at least two joint_states messages, found {len(times)}')
    return np.asarray(times, dtype=float), np.asarray(pos, dtype=float), (np.asarray(vel) if has_vel else None)
