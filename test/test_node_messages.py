"""snake_control.nodes.messages against rclpy's own serialization and message classes."""
import struct

import numpy as np
import pytest

pytest.importorskip('rclpy')
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from snake_control.nodes.messages import float64_array, header_stamp_s, set_stamp  # noqa: E402


@pytest.mark.parametrize('msg_type', [JointState, Odometry])
def test_the_stamp_read_from_the_bytes_is_the_messages(msg_type):
    msg = msg_type()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_795_000_123, 987_654_321
    msg.header.frame_id = 'odom'
    data = serialize_message(msg)
    assert header_stamp_s(data) == pytest.approx(1_795_000_123.987654321, abs=1e-9)
    # Big-endian CDR carries the same stamp in the other byte order.
    big = b'\x00\x00\x00\x00' + struct.pack('>iI', 7, 5) + data[12:]
    assert header_stamp_s(big) == pytest.approx(7.000000005, abs=1e-12)


def test_an_encoding_it_does_not_read_gives_none():
    assert header_stamp_s(b'\x00\x03\x00\x00' + bytes(16)) is None      # parameter-list CDR
    assert header_stamp_s(b'\x00\x01') is None                            # cut short


def test_a_filled_message_serializes_as_one_built_from_lists():
    values = np.linspace(-1.0, 1.0, 32)
    filled = JointState(name=[f'j{k}' for k in range(32)])
    filled.position = float64_array(values)
    filled.velocity = float64_array(values[::-1])          # not contiguous: copied in order
    set_stamp(filled.header.stamp, 12 * 1_000_000_000 + 34)
    plain = JointState(name=[f'j{k}' for k in range(32)], position=values.tolist(),
                       velocity=values[::-1].tolist())
    plain.header.stamp.sec, plain.header.stamp.nanosec = 12, 34
    assert serialize_message(filled) == serialize_message(plain)
    back = deserialize_message(serialize_message(filled), JointState)
    np.testing.assert_array_equal(back.position, values)
