"""snake_control.nodes.messages against rclpy's own serialization and message classes."""
import struct

import numpy as np
import pytest

pytest.importorskip('rclpy')
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402

from snake_control.nodes.messages import (IMU_ANGULAR_VELOCITY, IMU_ANGULAR_VELOCITY_COVARIANCE,  # noqa: E402
                                          IMU_LINEAR_ACCELERATION, IMU_LINEAR_ACCELERATION_COVARIANCE,
                                          IMU_ORIENTATION, IMU_ORIENTATION_COVARIANCE, JointStateReader,
                                          JointStateWriter, OdometryWriter, header_stamp_s, imu_values,
                                          odometry_pose, odometry_pose_any, set_stamp)


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


def test_a_stamp_set_in_place_serializes_as_one_built_from_its_parts():
    values = np.linspace(-1.0, 1.0, 32)
    filled = JointState(name=[f'j{k}' for k in range(32)], position=values.tolist(),
                        velocity=values[::-1].tolist())
    set_stamp(filled.header.stamp, 12 * 1_000_000_000 + 34)
    plain = JointState(name=[f'j{k}' for k in range(32)], position=values.tolist(),
                       velocity=values[::-1].tolist())
    plain.header.stamp.sec, plain.header.stamp.nanosec = 12, 34
    assert serialize_message(filled) == serialize_message(plain)
    back = deserialize_message(serialize_message(filled), JointState)
    np.testing.assert_array_equal(back.position, values)


def _joint_state(names, position, velocity=(), effort=(), frame_id=''):
    msg = JointState(name=list(names), position=list(position), velocity=list(velocity), effort=list(effort))
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_795_000_001, 250_000_000
    msg.header.frame_id = frame_id
    return msg


@pytest.mark.parametrize('frame_id', ['', 'b', 'base_link'])
@pytest.mark.parametrize('names', [['j0'], ['joint_1', 'joint_22', 'j3'], [f'joint_{k}' for k in range(32)]])
def test_the_joint_state_reader_reads_what_rclpy_writes(names, frame_id):
    rng = np.random.default_rng(len(names))
    position, velocity = rng.normal(size=len(names)), rng.normal(size=len(names))
    reader = JointStateReader()
    for k in range(3):              # the names decoded once, then recognised
        msg = _joint_state(names, position + k, velocity, rng.normal(size=len(names)), frame_id)
        stamp, got_names, got_position, got_velocity = reader.read(serialize_message(msg))
        assert stamp == pytest.approx(1_795_000_001.25, abs=1e-9)
        assert got_names == names
        np.testing.assert_array_equal(got_position, position + k)
        np.testing.assert_array_equal(got_velocity, velocity)
    # Other names: read again, not taken for the last ones.
    stamp, got_names, got_position, got_velocity = reader.read(serialize_message(
        _joint_state(names[::-1], position[::-1])))
    assert got_names == names[::-1]
    np.testing.assert_array_equal(got_position, position[::-1])
    assert got_velocity is None


def test_readers_leave_an_encoding_they_do_not_read_to_rclpy():
    other = b'\x00\x03\x00\x00' + bytes(400)         # parameter-list CDR
    assert JointStateReader().read(other) is None
    assert odometry_pose(other) is None
    assert imu_values(other) is None


def test_the_odometry_pose_and_imu_values_are_the_messages():
    odom = Odometry(child_frame_id='virtual_chassis')
    odom.header.frame_id = 'odom'
    p, q = odom.pose.pose.position, odom.pose.pose.orientation
    p.x, p.y, p.z, q.x, q.y, q.z, q.w = 1.25, -2.5, 0.125, 0.1, 0.2, 0.3, 0.9
    odom.pose.covariance = np.arange(36.0)
    assert odometry_pose(serialize_message(odom)) == (1.25, -2.5, 0.125, 0.1, 0.2, 0.3, 0.9)
    assert odometry_pose_any(serialize_message(odom)) == (1.25, -2.5, 0.125, 0.1, 0.2, 0.3, 0.9)

    imu = Imu()
    imu.header.frame_id = 'link_0_imu'
    imu.header.stamp.sec, imu.header.stamp.nanosec = 12, 500_000_000
    imu.orientation_covariance[0] = -1.0
    imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = 0.5, -0.25, 2.0
    imu.angular_velocity_covariance[0] = 0.01
    imu.linear_acceleration.x, imu.linear_acceleration.z = 0.3, 9.81
    imu.linear_acceleration_covariance[0] = -1.0
    stamp, values = imu_values(serialize_message(imu))
    assert stamp == 12.5
    assert values[IMU_ORIENTATION].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert values[IMU_ORIENTATION_COVARIANCE] == -1.0
    assert values[IMU_ANGULAR_VELOCITY].tolist() == [0.5, -0.25, 2.0]
    assert values[IMU_ANGULAR_VELOCITY_COVARIANCE] == 0.01
    assert values[IMU_LINEAR_ACCELERATION].tolist() == [0.3, 0.0, 9.81]
    assert values[IMU_LINEAR_ACCELERATION_COVARIANCE] == -1.0


def test_the_imu_fallback_lays_out_the_values_as_the_byte_reader(monkeypatch):
    """imu_values_any on an encoding the byte reader leaves to rclpy: the same 37 values, same places."""
    from snake_control.nodes import messages
    imu = Imu()
    imu.header.stamp.sec, imu.header.stamp.nanosec = 3, 250_000_000
    imu.orientation.x, imu.angular_velocity.y, imu.linear_acceleration.z = 0.5, -0.25, 9.81
    imu.orientation_covariance = np.arange(9.0)
    imu.angular_velocity_covariance = np.arange(9.0) + 10
    imu.linear_acceleration_covariance = np.arange(9.0) + 20
    data = serialize_message(imu)
    stamp, values = imu_values(data)
    monkeypatch.setattr(messages, 'imu_values', lambda data: None)
    fallback_stamp, fallback = messages.imu_values_any(data)
    assert fallback_stamp == stamp
    np.testing.assert_array_equal(fallback, values)


@pytest.mark.parametrize('frame_id', ['', 'abc'])
@pytest.mark.parametrize('n', [1, 2, 3, 32])
def test_the_joint_state_writer_writes_what_rclpy_reads(n, frame_id):
    names = [f'joint_{k}' for k in range(n)]
    rng = np.random.default_rng(n)
    position, velocity, effort = rng.normal(size=(3, n))
    writer = JointStateWriter(names, frame_id)
    for v, e in ((velocity, effort), (velocity, None), (None, None)):
        msg = deserialize_message(writer.pack(1_795_000_001_250_000_000, position, v, e), JointState)
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_795_000_001, 250_000_000)
        assert msg.header.frame_id == frame_id
        assert list(msg.name) == names
        assert msg.position.tolist() == position.tolist()
        assert msg.velocity.tolist() == ([] if v is None else v.tolist())
        assert msg.effort.tolist() == ([] if e is None else e.tolist())


def test_the_odometry_writer_writes_what_rclpy_reads():
    writer = OdometryWriter('odom', 'virtual_chassis')
    pose = np.array([1.0, -2.0, 0.1, 0.0, 0.0, 0.6, 0.8])
    pose_cov, twist, twist_cov = np.arange(36.0).reshape(6, 6), np.arange(6.0) - 3.0, np.eye(6) * 0.5
    msg = deserialize_message(writer.pack(3_000_000_007, pose, pose_cov, twist, twist_cov), Odometry)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 7)
    assert (msg.header.frame_id, msg.child_frame_id) == ('odom', 'virtual_chassis')
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    assert [p.x, p.y, p.z, q.x, q.y, q.z, q.w] == pose.tolist()
    assert msg.pose.covariance.tolist() == pose_cov.ravel().tolist()
    t = msg.twist.twist
    assert [t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z] == twist.tolist()
    assert msg.twist.covariance.tolist() == twist_cov.ravel().tolist()


def test_an_odometry_the_byte_reader_does_not_read_is_read_by_rclpy(monkeypatch):
    from snake_control.nodes import messages
    odom = Odometry(child_frame_id='base')
    odom.pose.pose.position.x, odom.pose.pose.orientation.w = -3.5, 1.0
    monkeypatch.setattr(messages, 'odometry_pose', lambda data: None)
    assert messages.odometry_pose_any(serialize_message(odom)) == (-3.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)


def test_a_joint_state_the_byte_reader_does_not_read_is_read_by_rclpy(monkeypatch):
    reader = JointStateReader()
    data = serialize_message(_joint_state(['a', 'b'], np.array([0.5, -1.0])))
    monkeypatch.setattr(reader, 'read', lambda data: None)
    stamp, names, position, velocity = reader.read_any(data)
    assert stamp == pytest.approx(1_795_000_001.25, abs=1e-9)
    assert names == ['a', 'b'] and position.tolist() == [0.5, -1.0] and velocity is None
    direct = JointStateReader().read_any(data)          # plain CDR: the byte reader's own answer
    assert direct[0] == stamp and direct[1] == names and direct[2].tolist() == [0.5, -1.0] and direct[3] is None
