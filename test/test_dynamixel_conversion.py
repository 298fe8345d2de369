"""The one joint <-> servo conversion (snake_control.dynamixel.conversion) and the models' torque constants."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from snake_control.dynamixel import conversion as C
from snake_control.dynamixel.models import SERVO_MODELS
from snake_control.robot import load_robot


@given(st.floats(-3.0, 3.0), st.sampled_from((1, -1)), st.floats(-1.0, 1.0))
def test_joint_servo_round_trip(q, direction, offset):
    s = C.joint_to_servo_rad(q, direction, offset)
    assert s == pytest.approx(direction * q + offset)
    assert C.servo_to_joint_rad(s, direction, offset) == pytest.approx(q, abs=1e-12)
    ticks = C.joint_to_ticks(q, direction, offset)
    assert abs(C.ticks_to_joint(ticks, direction, offset) - q) <= math.pi / 4096 + 1e-12


def test_ticks_centre_and_units():
    assert int(C.servo_rad_to_ticks(0.0)) == 2048
    assert int(C.servo_rad_to_ticks(math.pi / 2)) == C.servo_rad_to_tick(math.pi / 2) == 3072
    assert C.servo_rad_to_tick(-1.234) == int(C.servo_rad_to_ticks(-1.234))
    assert float(C.velocity_units_to_rad_s(100)) == pytest.approx(100 * 0.229 * 2 * math.pi / 60)
    np.testing.assert_array_equal(C.joint_to_ticks(np.zeros(3), np.array([1, -1, 1]), np.zeros(3)), [2048] * 3)


def test_torque_constants_are_stall_torque_over_stall_current():
    xm = SERVO_MODELS['XM430-W350']
    assert xm.torque_constant_nm_per_a == pytest.approx(4.1 / 2.3)
    assert float(C.current_a_to_torque_nm(1.0, xm)) == pytest.approx(1.783, abs=1e-3)
    assert float(C.torque_nm_to_current_a(C.current_a_to_torque_nm(0.7, xm), xm)) == pytest.approx(0.7)
    for m in SERVO_MODELS.values():
        assert 0.1 < m.torque_constant_nm_per_a < 3.0, m.name


def test_robot_joints_use_the_same_conversion():
    robot = load_robot('pitch_yaw_32')
    for j in robot.joints[:4]:
        assert j.servo_angle_rad(0.2) == C.joint_to_servo_rad(0.2, j.direction, j.offset_rad)
        assert j.joint_angle_rad(0.2) == C.servo_to_joint_rad(0.2, j.direction, j.offset_rad)
