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
# std_msgs/Header and what it needs, as a ros2msg dependency section.
_HEADER_DEPS = """================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""
# Full ros2msg definition (with dependencies) of sensor_msgs/msg/JointState, for writing without ROS.
JOINT_STATE_MSGDEF = """std_msgs/Header header
string[] name
float64[] position
float64[] velocity
float64[] effort
""" + _HEADER_DEPS
TF_MESSAGE_TYPE = 'tf2_msgs/msg/TFMessage'
# Full ros2msg definition of tf2_msgs/msg/TFMessage: /tf is written from this where tf2_msgs is not
# installed (the ROS 2 profile needs only the schema text and CDR).
TF_MESSAGE_MSGDEF = """geometry_msgs/TransformStamped[] transforms
================================================================================
MSG: geometry_msgs/TransformStamped
std_msgs/Header header
string child_frame_id
Transform transform
================================================================================
MSG: geometry_msgs/Transform
Vector3 translation
Quaternion rotation
================================================================================
MSG: geometry_msgs/Vector3
float64 x
float64 y
float64 z
================================================================================
MSG: geometry_msgs/Quaternion
float64 x 0
float64 y 0
float64 z 0
float64 w 1
""" + _HEADER_DEPS


def type_name(datatype: str) -> str:
    """The canonical 'pkg/msg/Type' form of a message type written 'pkg/Type' or 'pkg/msg/Type'.

    >>> type_name('sensor_msgs/JointState'), type_name('sensor_msgs/msg/JointState')
    ('sensor_msgs/msg/JointState', 'sensor_msgs/msg/JointState')
    """
    package, _, name = datatype.replace('/msg/', '/').partition('/')
    return f'{package}/msg/{name}' if name else datatype


# ---------------------------------------------------------------------------------------------- QoS

# rmw enum values, as rosbag2 stores them in a channel's offered_qos_profiles.
_HISTORY = {'keep_last': 1, 'keep_all': 2}
_RELIABILITY = {'reliable': 1, 'best_effort': 2}
_DURABILITY = {'transient_local': 1, 'volatile': 2}
_INFINITE = {'sec': 2147483647, 'nsec': 4294967295}


def offered_qos_profiles(reliability: str = 'reliable', durability: str = 'volatile', depth: int = 10,
                         history: str = 'keep_last') -> str:
    """A channel's offered_qos_profiles metadata (rosbag2's YAML), so `ros2 bag play` offers each topic
    with its publisher's reliability and durability (a latched robot_description stays latched).

    >>> print(offered_qos_profiles('best_effort').splitlines()[:4])
    ['- history: 1', '  depth: 10', '  reliability: 2', '  durability: 2']
    """
    import yaml

    for value, table, what in ((reliability, _RELIABILITY, 'reliability'), (durability, _DURABILITY, 'durability'),
                               (history, _HISTORY, 'history')):
        if value not in table:
            raise ValueError(f'{what}: expected one of {sorted(table)}, got {value!r}')
    profile = {'history': _HISTORY[history], 'depth': int(depth), 'reliability': _RELIABILITY[reliability],
               'durability': _DURABILITY[durability], 'deadline': dict(_INFINITE), 'lifespan': dict(_INFINITE),
               'liveliness': 1, 'liveliness_lease_duration': dict(_INFINITE),
               'avoid_ros_namespace_conventions': False}
    return yaml.safe_dump([profile], sort_keys=False)


# rosbag2's MCAP reader (rosbag2_storage_mcap's read_metadata, then rosbag2_storage's qos.cpp) decodes a
# channel's offered_qos_profiles by the bag's metadata version: policies as rmw integers up to version 8, as
# names ('reliable', 'transient_local') from version 9, Jazzy's. A file holding a metadata record named
# 'rosbag2' without 'serialized_metadata' is read as version 8, as the files of Humble's MCAP plugin were;
# a file without that record gets the reader's own version, so a Jazzy reader would read our integers as
# 'unknown' policies. Integers plus this record are what both Humble and Jazzy read alike (names would
# fail on Humble), so every file written here starts with it.
ROSBAG2_METADATA_NAME = 'rosbag2'
ROS_DISTRO = 'jazzy'            # the rclpy wheels the package pins


def start_ros2_file(writer, library: str) -> None:
    """Start an mcap.writer.Writer as a ROS 2 file that rosbag2 reads: the ros2 profile, then the
    'rosbag2' metadata record (see above)."""
    writer.start(profile='ros2', library=library)
    writer.add_metadata(ROSBAG2_METADATA_NAME, {'ROS_DISTRO': ROS_DISTRO})


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
        start_ros2_file(self._writer, library)
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def register(self, topic: str, datatype: str, qos_yaml: str | None = None, definition: str | None = None):
        """Add a channel for topic with the schema of datatype ('pkg/msg/Type' or 'pkg/Type'), stored under
        rosbag2's name 'pkg/msg/Type'. qos_yaml: the offered_qos_profiles metadata (default: reliable,
        volatile); definition: the full ros2msg text, else it is read from the installed .msg files
        (FileNotFoundError if they are not installed)."""
        datatype = type_name(datatype)
        if datatype not in self._schemas:
            text = definition if definition is not None else msgdef(datatype)
            self._schemas[datatype] = self._writer.register_schema(
                name=datatype, encoding='ros2msg', data=text.encode())
        self._channels[topic] = self._writer.register_channel(
            topic=topic, message_encoding='cdr', schema_id=self._schemas[datatype],
            metadata={'offered_qos_profiles': qos_yaml or offered_qos_profiles()})
        self.counts[topic] = 0

    def registered(self, topic: str) -> bool:
        return topic in self._channels

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
            msg = {'header': {'stamp': stamp_dict(t), 'frame_id': ''},
                   'name': list(joint_names), 'position': [float(v) for v in q],
                   'velocity': [] if velocities_rad_s is None else [float(v) for v in velocities_rad_s[k]],
                   'effort': []}
            writer.write_message(topic, schema, msg, log_time=int(t * 1e9), publish_time=int(t * 1e9))
        writer.finish()


def stamp_dict(t_s: float) -> dict:
    """builtin_interfaces/Time of a time in s (dict form for mcap_ros2's encoder)."""
    sec = int(np.floor(t_s))
    return {'sec': sec, 'nanosec': min(int(round((t_s - sec) * 1e9)), 999_999_999)}


def tf_message(t_s: float, transforms) -> dict:
    """A tf2_msgs/TFMessage (dict form) of (parent, child, 4x4 transform in m) triples, all stamped t_s."""
    from snake_control.kinematics.tf_tree import xyz_quat

    out = []
    for parent, child, matrix in transforms:
        (x, y, z), (qx, qy, qz, qw) = xyz_quat(matrix)
        out.append({'header': {'stamp': stamp_dict(t_s), 'frame_id': parent}, 'child_frame_id': child,
                    'transform': {'translation': {'x': x, 'y': y, 'z': z},
                                  'rotation': {'x': qx, 'y': qy, 'z': qz, 'w': qw}}})
    return {'transforms': out}


class MessageEncoder:
    """CDR bytes of messages given as dicts, from the message definition alone (no ROS install):
    MessageEncoder(TF_MESSAGE_TYPE, TF_MESSAGE_MSGDEF).encode(tf_message(...))."""

    def __init__(self, datatype: str, definition: str):
        from mcap_ros2._dynamic import serialize_dynamic   # the encoder mcap_ros2.writer.Writer uses

        self.datatype, self.definition = type_name(datatype), definition
        encoders = serialize_dynamic(self.datatype, definition)
        self._encode = encoders.get(self.datatype) or encoders[self.datatype.replace('/msg/', '/')]

    def encode(self, message: dict) -> bytes:
        return self._encode(message)


class _ChannelCopier:
    """Copies one or more MCAP files' channels into a writer: each schema once, each (renamed) topic
    once. Every channel in a source's summary is registered before its messages are copied, so a topic
    that had no messages (a subscriber that heard nothing) is still in the copy."""

    def __init__(self, writer):
        self.writer = writer
        self.schemas: dict = {}
        self.channels: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def channel(self, schema, channel, topic: str) -> int:
        if topic not in self.channels:
            sid = 0
            if schema is not None:
                key = (schema.name, schema.encoding, schema.data)
                if key not in self.schemas:
                    self.schemas[key] = self.writer.register_schema(schema.name, schema.encoding, schema.data)
                sid = self.schemas[key]
            self.channels[topic] = self.writer.register_channel(topic, channel.message_encoding, sid,
                                                                dict(channel.metadata))
            self.counts[topic] = 0
        return self.channels[topic]

    def copy(self, reader, rename=lambda topic: topic, before=None) -> None:
        """Every channel of reader, then its messages in log-time order (``before(t_ns)`` is called ahead
        of each message, to interleave others)."""
        summary = reader.get_summary()
        if summary is not None:
            for channel in summary.channels.values():
                self.channel(summary.schemas.get(channel.schema_id), channel, rename(channel.topic))
        for schema, channel, message in reader.iter_messages(log_time_order=True):
            if before is not None:
                before(message.log_time)
            topic = rename(channel.topic)
            cid = self.channel(schema, channel, topic)
            self.writer.add_message(cid, message.log_time, message.data, message.publish_time,
                                    sequence=self.counts[topic])
            self.counts[topic] += 1


def add_messages(path: str | Path, topic: str, datatype: str, definition: str, messages, qos_yaml=None) -> int:
    """Rewrite the MCAP file at path with the messages [(log_time_ns, dict)] added on a new channel topic
    (datatype with its full ros2msg definition), in log-time order with the rest. Returns the number added."""
    from mcap.reader import make_reader
    from mcap.writer import CompressionType, Writer

    path = Path(path)
    encoder = MessageEncoder(datatype, definition)
    extra = sorted(((int(t), encoder.encode(m)) for t, m in messages), key=lambda item: item[0])
    tmp = path.with_name(path.name + '.tmp')
    with open(path, 'rb') as f_in, open(tmp, 'wb') as f_out:
        reader = make_reader(f_in)
        header = reader.get_header()
        writer = Writer(f_out, compression=CompressionType.ZSTD)
        start_ros2_file(writer, header.library or 'snake_control')
        new_sid = writer.register_schema(encoder.datatype, 'ros2msg', definition.encode())
        new_channel = writer.register_channel(topic, 'cdr', new_sid,
                                              {'offered_qos_profiles': qos_yaml or offered_qos_profiles()})
        k = 0

        def flush_until(t_ns):
            nonlocal k
            while k < len(extra) and extra[k][0] <= t_ns:
                writer.add_message(new_channel, extra[k][0], extra[k][1], extra[k][0], sequence=k)
                k += 1

        _ChannelCopier(writer).copy(reader, before=flush_until)
        flush_until(2 ** 63)
        writer.finish()
    tmp.replace(path)
    return len(extra)


def merge_recordings(parts: list[tuple[str, Path]], out_path: str | Path) -> dict:
    """Merge per-robot MCAP files into one: each robot's topics keep their /<robot>/ names, absolute
    topics (/diagnostics, /rosout, /tf, ...) move under /<robot>/. Returns message counts per topic
    (every topic of the parts, with 0 for those without messages)."""
    from mcap.reader import make_reader
    from mcap.writer import CompressionType, Writer

    out_path = Path(out_path)
    with open(out_path, 'wb') as f_out:
        writer = Writer(f_out, compression=CompressionType.ZSTD)
        start_ros2_file(writer, 'snake_control demo')
        copier = _ChannelCopier(writer)
        for robot, path in parts:
            prefix = f'/{robot}'
            with open(path, 'rb') as f_in:
                copier.copy(make_reader(f_in), lambda t: t if t.startswith(prefix + '/') else prefix + t)
        writer.finish()
    return copier.counts


# ---------------------------------------------------------------------------------------------- reading

def _joint_names_match(reader, topic: str, joint_names) -> bool:
    """Whether the first message on topic names exactly the given joints (in any order)."""
    for _, _, _, msg in reader.iter_decoded_messages(topics=[topic]):
        return sorted(msg.name) == sorted(joint_names)
    return False


def ros2_messages(path: str | Path, topics=None) -> Iterator:
    """Every message of the file (or of the given topics only) in log-time order, decoded (mcap_ros2's
    McapROS2Message: .channel.topic, .log_time_ns, .ros_msg)."""
    from mcap_ros2.reader import read_ros2_messages

    return read_ros2_messages(str(path), topics=None if topics is None else list(topics))


def joint_states_topic(path, reader, joint_names, topic: str | None = None) -> str:
    """The sensor_msgs/JointState topic of an open MCAP reader to take a robot's joints from: topic (with
    or without its leading slash), or the one topic named joint_states (in a file with several robots,
    the one naming joint_names). ValueError naming the file and the topics it has otherwise."""
    summary = reader.get_summary()
    channels = summary.channels.values() if summary is not None else []
    schemas = summary.schemas if summary is not None else {}
    # Both spellings of the type: rosbag2 writes 'sensor_msgs/msg/JointState', other tools 'sensor_msgs/JointState'.
    candidates = [c.topic for c in channels if schemas.get(c.schema_id) is not None
                  and type_name(schemas[c.schema_id].name) == JOINT_STATE_TYPE]
    if topic is not None and topic not in candidates and '/' + topic.lstrip('/') in candidates:
        topic = '/' + topic.lstrip('/')
    if topic is None:
        named = sorted({t for t in candidates if t.rstrip('/').split('/')[-1] == 'joint_states'})
        if len(named) > 1:
            # Several robots in one file (the demo's): the one whose joints these are.
            named = [t for t in named if _joint_names_match(reader, t, joint_names)] or named
        if len(named) != 1:
            raise ValueError(f'{path}: expected one sensor_msgs/JointState topic named joint_states, '
                             f'found {named or sorted(set(candidates))}; choose one with --topic')
        topic = named[0]
    elif topic not in candidates:
        raise ValueError(f'{path}: no sensor_msgs/JointState topic {topic!r} '
                         f'(have {sorted(set(candidates))})')
    return topic


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
        topic = joint_states_topic(path, reader, joint_names, topic)
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


def read_tf(path, topics=None) -> list[tuple[int, float, str, str, np.ndarray]]:
    """Every transform on the file's tf2_msgs/TFMessage topics (all of them, or those in topics), in log-time
    order: (log_time_ns, stamp_s, parent frame, child frame, 4x4 transform in m)."""
    from snake_control.kinematics.lie import matrix_from_quaternion

    out = []
    for m in ros2_messages(path, topics):
        if type_name(m.schema.name) != TF_MESSAGE_TYPE:
            continue
        for t in m.ros_msg.transforms:
            r, p = t.transform.rotation, t.transform.translation
            matrix = np.eye(4)
            matrix[:3, :3] = matrix_from_quaternion(np.array([r.x, r.y, r.z, r.w]))
            matrix[:3, 3] = (p.x, p.y, p.z)
            out.append((m.log_time_ns, t.header.stamp.sec + 1e-9 * t.header.stamp.nanosec, t.header.frame_id,
                        t.child_frame_id, matrix))
    return out


def tf_chain(latest: dict, frame: str, root: str, limit: int = 10_000) -> np.ndarray | None:
    """The transform root -> frame composed from latest {child: (parent, 4x4)}, or None where the chain
    breaks before reaching root."""
    matrix = np.eye(4)
    for _ in range(limit):
        if frame == root:
            return matrix
        if frame not in latest:
            return None
        frame, step = latest[frame]
        matrix = step @ matrix
    return None
