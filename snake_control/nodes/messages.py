"""Messages at control rate without per-message waste.

Taking: rclpy turns every message a subscription takes into Python objects before the callback runs,
for a 32-joint JointState tens of microseconds per subscriber and message, at 100-400 Hz. A
subscription created with raw=True gets the serialized bytes instead; header_stamp_s reads the stamp
from them, so the message is built (rclpy.serialization.deserialize_message) only when it is used.

Reading more than the stamp: JointStateReader, odometry_pose and imu_values (their ``_any`` forms fall back
to the message) read the fields a node uses
straight from the bytes of plain little- or big-endian CDR (what rmw_fastrtps and rmw_cyclonedds write),
about a tenth of the cost of the message rclpy would build (an Odometry: some forty microseconds, most of
it its two 36-element covariance arrays); they return None for another encoding, and the caller
deserializes the message then.

Filling: set_stamp writes a builtin_interfaces/Time in place (Clock.now().to_msg() builds a new one);
ros_ns_at gives the ROS clock at an instant of the monotonic clock (a measurement's time).

Publishing bytes: Publisher.publish takes a serialized message too. JointStateWriter and OdometryWriter
encode the parts that never change (frame ids, joint names) once and pack only the stamp and the
numbers per message, where rclpy's conversion of a message object walks every field (and every joint
name) again each time.
"""
from __future__ import annotations

import struct
import time

import numpy as np

# Encapsulation identifiers (the first two bytes) of plain CDR and XCDR2, big- and little-endian: a
# message whose first member is a std_msgs/Header starts with its stamp's int32 sec and uint32 nanosec
# right after the 4-byte encapsulation header. Parameter-list and delimited encodings put other bytes
# first; they are not decoded here.
_STAMP = {b'\x00\x00': struct.Struct('>iI'), b'\x00\x01': struct.Struct('<iI'),
          b'\x00\x06': struct.Struct('>iI'), b'\x00\x07': struct.Struct('<iI')}


def header_stamp_s(data: bytes) -> float | None:
    """Stamp (s) of the std_msgs/Header a serialized message begins with (JointState, Imu, Odometry,
    ...), or None for an encoding this does not read (deserialize the message then).

    >>> header_stamp_s(b'\\x00\\x01\\x00\\x00' + struct.pack('<iI', 12, 500_000_000) + bytes(8))
    12.5
    """
    layout = _STAMP.get(bytes(data[:2]))
    if layout is None or len(data) < 4 + layout.size:
        return None
    sec, nanosec = layout.unpack_from(data, 4)
    return sec + 1e-9 * nanosec


# Plain CDR (XCDR1): the encapsulation identifier, then the payload, each primitive aligned to its size
# counted from the payload's start. Byte order by identifier.
_PLAIN_CDR = {b'\x00\x00': '>', b'\x00\x01': '<'}
_CDR_LE = b'\x00\x01\x00\x00'
_U32 = {'<': struct.Struct('<I'), '>': struct.Struct('>I')}
_STAMP_LE = struct.Struct('<iI')


def _skip_strings(data: bytes, offset: int, count: int, u32: struct.Struct) -> int:
    """Payload offset after `count` CDR strings starting at payload offset `offset`."""
    for _ in range(count):
        offset += (-offset) % 4
        offset += 4 + u32.unpack_from(data, 4 + offset)[0]
    return offset


def _strings_bytes(texts, offset: int) -> bytes:
    """CDR strings (uint32 length with the NUL, UTF-8, NUL), little-endian, from payload offset `offset`."""
    out = bytearray()
    for text in texts:
        out += bytes((-(offset + len(out))) % 4)
        raw = text.encode() + b'\x00'
        out += struct.pack('<I', len(raw)) + raw
    return bytes(out)


class JointStateReader:
    """sensor_msgs/JointState from its CDR bytes (a raw subscription): stamp, names, positions and
    velocities. The names are decoded again only when their bytes change (a driver sends the same ones
    every cycle).

    >>> from rclpy.serialization import serialize_message
    >>> from sensor_msgs.msg import JointState
    >>> msg = JointState(name=['a', 'b'], position=[0.5, -1.0])
    >>> msg.header.stamp.sec = 3
    >>> JointStateReader().read(serialize_message(msg))
    (3.0, ['a', 'b'], array([ 0.5, -1. ]), None)
    """

    def __init__(self):
        self._names_bytes = None        # the name sequence's bytes as last seen, from its count on
        self._names: list = []

    def read(self, data: bytes):
        """(stamp s, names, positions (n,), velocities (n,) or None when the message has none) or None for
        an encoding this does not read. names is the reader's own list: do not change it. The arrays are
        read-only views of data."""
        order = _PLAIN_CDR.get(bytes(data[:2]))
        if order is None:
            return None
        u32 = _U32[order]
        offset = 12 + u32.unpack_from(data, 12)[0]                      # past frame_id
        offset += (-offset) % 4
        known = self._names_bytes
        if known is not None and data.startswith(known, 4 + offset):
            offset += len(known)
        else:
            count = u32.unpack_from(data, 4 + offset)[0]
            end = _skip_strings(data, offset + 4, count, u32)
            self._names_bytes = bytes(data[4 + offset:4 + end])
            self._names = _read_strings(data, offset + 4, count, u32)
            offset = end
        arrays = []
        for _ in range(2):                  # position, velocity
            offset += (-offset) % 4
            count = u32.unpack_from(data, 4 + offset)[0]
            offset += 4
            if count:
                offset += (-offset) % 8
            arrays.append(np.frombuffer(data, dtype=order + 'f8', count=count, offset=4 + offset))
            offset += 8 * count
        position, velocity = arrays
        return header_stamp_s(data), self._names, position, (velocity if len(velocity) else None)

    def read_any(self, data: bytes):
        """read, or for an encoding it does not read the same fields of the message rclpy builds."""
        read = self.read(data)
        if read is None:
            from rclpy.serialization import deserialize_message
            from sensor_msgs.msg import JointState
            msg = deserialize_message(data, JointState)
            velocity = np.asarray(msg.velocity, dtype=float)
            read = (msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, list(msg.name),
                    np.asarray(msg.position, dtype=float), velocity if len(velocity) else None)
        return read


def _read_strings(data: bytes, offset: int, count: int, u32: struct.Struct) -> list[str]:
    out = []
    for _ in range(count):
        offset += (-offset) % 4
        size = u32.unpack_from(data, 4 + offset)[0]
        out.append(bytes(data[8 + offset:8 + offset + size - 1]).decode())
        offset += 4 + size
    return out


def _doubles_after_header(data: bytes, strings: int, count: int):
    """The first `count` float64 after a std_msgs/Header and `strings - 1` more strings (Odometry: its
    child_frame_id), as a read-only array, or None for an encoding this does not read."""
    order = _PLAIN_CDR.get(bytes(data[:2]))
    if order is None:
        return None
    offset = _skip_strings(data, 8, strings, _U32[order])
    offset += (-offset) % 8
    return np.frombuffer(data, dtype=order + 'f8', count=count, offset=4 + offset)


def odometry_pose(data: bytes):
    """nav_msgs/Odometry's pose from its CDR bytes: (x, y, z, qx, qy, qz, qw) floats (m, unit quaternion),
    or None for an encoding this does not read.

    >>> from rclpy.serialization import serialize_message
    >>> from nav_msgs.msg import Odometry
    >>> msg = Odometry(child_frame_id='base')
    >>> msg.pose.pose.position.x, msg.pose.pose.orientation.w = 1.5, 1.0
    >>> odometry_pose(serialize_message(msg))
    (1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    """
    values = _doubles_after_header(data, 2, 7)
    return None if values is None else tuple(values.tolist())


def odometry_pose_any(data: bytes):
    """odometry_pose, or for an encoding it does not read the same fields of the message rclpy builds."""
    pose = odometry_pose(data)
    if pose is None:
        from nav_msgs.msg import Odometry
        from rclpy.serialization import deserialize_message
        msg = deserialize_message(data, Odometry)
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        pose = (p.x, p.y, p.z, q.x, q.y, q.z, q.w)
    return pose


IMU_ORIENTATION = slice(0, 4)               # x, y, z, w
IMU_ORIENTATION_COVARIANCE = 4              # index of orientation_covariance[0]
IMU_ANGULAR_VELOCITY = slice(13, 16)        # rad/s
IMU_ANGULAR_VELOCITY_COVARIANCE = 16
IMU_LINEAR_ACCELERATION = slice(25, 28)     # m/s^2
IMU_LINEAR_ACCELERATION_COVARIANCE = 28


def imu_values(data: bytes):
    """sensor_msgs/Imu from its CDR bytes: (stamp s, the 37 float64 after its header as a read-only array:
    orientation, its covariance, angular velocity, its covariance, linear acceleration, its covariance;
    the IMU_* indices pick them), or None for an encoding this does not read."""
    values = _doubles_after_header(data, 1, 37)
    return None if values is None else (header_stamp_s(data), values)


def imu_values_any(data: bytes):
    """imu_values, or for an encoding it does not read the same values from the message rclpy builds."""
    read = imu_values(data)
    if read is None:
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import Imu
        msg = deserialize_message(data, Imu)
        q, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
        read = (msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec,
                np.array([q.x, q.y, q.z, q.w, *msg.orientation_covariance, w.x, w.y, w.z,
                          *msg.angular_velocity_covariance, a.x, a.y, a.z, *msg.linear_acceleration_covariance]))
    return read


class JointStateWriter:
    """sensor_msgs/JointState for a fixed list of joint names, as CDR bytes to publish: the frame id and the
    names are encoded once.

    >>> from rclpy.serialization import deserialize_message
    >>> from sensor_msgs.msg import JointState
    >>> msg = deserialize_message(JointStateWriter(['a', 'b']).pack(2_500_000_000, [1.0, 2.0]), JointState)
    >>> msg.header.stamp.sec, msg.name, msg.position.tolist(), msg.velocity.tolist()
    (2, ['a', 'b'], [1.0, 2.0], [])
    """

    def __init__(self, names, frame_id: str = ''):
        self.names = list(names)
        fixed = _strings_bytes([frame_id], 8)
        fixed += bytes((-(8 + len(fixed))) % 4) + struct.pack('<I', len(self.names))
        fixed += _strings_bytes(self.names, 8 + len(fixed))
        self._fixed = fixed
        self._fixed_end = 8 + len(fixed)          # payload offset after the names

    def pack(self, stamp_ns: int, position, velocity=None, effort=None) -> bytes:
        """The message: stamp in ns, then float64[] position, velocity and effort (None: empty)."""
        sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
        parts = [_CDR_LE, _STAMP_LE.pack(sec, nanosec), self._fixed]
        offset = self._fixed_end
        for values in (position, velocity, effort):
            count = 0 if values is None else len(values)
            pad = (-offset) % 4
            offset += pad + 4
            head = bytes(pad) + struct.pack('<I', count)
            if count:
                pad = (-offset) % 8
                head += bytes(pad)
                offset += pad + 8 * count
                parts += [head, np.ascontiguousarray(values, dtype='<f8').tobytes()]
            else:
                parts.append(head)
        return b''.join(parts)


class OdometryWriter:
    """nav_msgs/Odometry with fixed frame ids as CDR bytes to publish: the frame ids are encoded once.

    >>> from rclpy.serialization import deserialize_message
    >>> from nav_msgs.msg import Odometry
    >>> data = OdometryWriter('odom', 'base').pack(5, [1, 2, 0, 0, 0, 0, 1], np.eye(6), np.zeros(6), np.eye(6))
    >>> msg = deserialize_message(data, Odometry)
    >>> msg.child_frame_id, msg.pose.pose.position.y, float(msg.pose.covariance[7])
    ('base', 2.0, 1.0)
    """

    def __init__(self, frame_id: str, child_frame_id: str):
        fixed = _strings_bytes([frame_id, child_frame_id], 8)
        self._fixed = fixed + bytes((-(8 + len(fixed))) % 8)
        self._values = np.empty(7 + 36 + 6 + 36)

    def pack(self, stamp_ns: int, pose_xyz_quat, pose_covariance, twist, twist_covariance) -> bytes:
        """The message: stamp in ns, pose (x, y, z, qx, qy, qz, qw), its 6x6 covariance, twist (vx, vy, vz,
        wx, wy, wz) and its 6x6 covariance."""
        sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
        v = self._values
        v[:7] = pose_xyz_quat
        v[7:43] = np.ravel(pose_covariance)
        v[43:49] = twist
        v[49:] = np.ravel(twist_covariance)
        return b''.join((_CDR_LE, _STAMP_LE.pack(sec, nanosec), self._fixed, v.astype('<f8', copy=False).tobytes()))


def set_stamp(stamp, nanoseconds: int) -> None:
    """Write a time in ns (e.g. Clock.now().nanoseconds) into a builtin_interfaces/Time in place."""
    stamp.sec, stamp.nanosec = divmod(int(nanoseconds), 1_000_000_000)


def ros_ns_at(clock, monotonic_s: float) -> int:
    """The ROS clock (ns; ``clock``: an rclpy Clock) at an instant of time.monotonic() (s), such as when a
    measurement was taken. The two clocks are read back to back, and of up to three tries the pair read
    closest together is taken: a thread switch between the two reads (up to the interpreter's switch
    interval, 1-5 ms) would move the stamp that much earlier (at 400 Hz a joint_states stamp fell 1.09 ms
    before the one of the cycle before)."""
    best = None
    for _ in range(3):
        before = time.monotonic()
        now_ns = clock.now().nanoseconds
        after = time.monotonic()
        if best is None or after - before < best[0]:
            best = (after - before, now_ns, 0.5 * (before + after))
        if after - before < 50e-6:
            break
    _, now_ns, at_s = best
    return now_ns - int(round((at_s - monotonic_s) * 1e9))
