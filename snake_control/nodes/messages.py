"""Messages at control rate without per-message waste.

Taking: rclpy turns every message a subscription takes into Python objects before the callback runs,
for a 32-joint JointState tens of microseconds per subscriber and message, at 100-400 Hz. A
subscription created with raw=True gets the serialized bytes instead; header_stamp_s reads the stamp
from them, so the message is built (rclpy.serialization.deserialize_message) only when it is used.

Filling: a float64[] field holds an array.array('d'); float64_array makes one from a numpy array in one
copy (tolist() would make a Python float per element first). set_stamp writes a builtin_interfaces/Time
in place (Clock.now().to_msg() builds a new one).
"""
from __future__ import annotations

import array
import struct

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


def float64_array(values) -> array.array:
    """array.array('d') of a float array, for a float64[] message field.

    >>> float64_array(np.array([1.0, 2.5])).tolist()
    [1.0, 2.5]
    """
    out = array.array('d')
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def set_stamp(stamp, nanoseconds: int) -> None:
    """Write a time in ns (e.g. Clock.now().nanoseconds) into a builtin_interfaces/Time in place."""
    stamp.sec, stamp.nanosec = divmod(int(nanoseconds), 1_000_000_000)
