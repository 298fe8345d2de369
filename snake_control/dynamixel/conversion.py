"""Joint <-> servo conversions, the one place they are written (driver, plants and emulator use these).

A joint angle q (rad, the robot's convention) and the servo angle s (rad from the centre tick 2048) are
related through the joint's zero offset and direction (robot YAML):

    s = direction * q + offset_rad          q = direction * (s - offset_rad)

Velocities and torques follow the direction only. Ticks are 4096 per turn. Every function takes
scalars or numpy arrays.

    >>> round(float(servo_to_joint_rad(joint_to_servo_rad(0.3, -1, 0.1), -1, 0.1)), 12)
    0.3
    >>> int(servo_rad_to_ticks(0.0))
    2048
"""
from __future__ import annotations

import numpy as np

from snake_control.dynamixel.models import CENTER_TICK, RAD_PER_TICK, RAD_S_PER_VELOCITY_UNIT, ServoModel


def joint_to_servo_rad(q_rad, direction, offset_rad):
    """Servo angle (rad from the centre tick) for a joint angle (rad)."""
    return direction * q_rad + offset_rad


def servo_to_joint_rad(servo_rad, direction, offset_rad):
    """Joint angle (rad) for a servo angle (rad from the centre tick); inverse of joint_to_servo_rad."""
    return direction * (servo_rad - offset_rad)


def servo_rad_to_ticks(servo_rad):
    """Position ticks (nearest) for a servo angle in rad from the centre tick."""
    return np.rint(np.asarray(servo_rad, dtype=float) / RAD_PER_TICK).astype(np.int64) + CENTER_TICK


def servo_rad_to_tick(servo_rad: float) -> int:
    """servo_rad_to_ticks for one float, without numpy's per-call cost (the emulator's hot path)."""
    return round(servo_rad / RAD_PER_TICK) + CENTER_TICK       # both round half to even


def ticks_to_servo_rad(ticks):
    """Servo angle in rad from the centre tick for position ticks."""
    return (np.asarray(ticks, dtype=float) - CENTER_TICK) * RAD_PER_TICK


def joint_to_ticks(q_rad, direction, offset_rad):
    """Goal ticks for joint angles (rad)."""
    return servo_rad_to_ticks(joint_to_servo_rad(np.asarray(q_rad, dtype=float), direction, offset_rad))


def ticks_to_joint(ticks, direction, offset_rad):
    """Joint angles (rad) for position ticks."""
    return servo_to_joint_rad(ticks_to_servo_rad(ticks), direction, offset_rad)


def velocity_units_to_rad_s(units):
    """Present/Goal Velocity register units (0.229 rev/min) to rad/s."""
    return np.asarray(units, dtype=float) * RAD_S_PER_VELOCITY_UNIT


def current_units_to_a(units, model: ServoModel):
    """Present Current register units to amperes (0 for a model without a current register)."""
    return np.asarray(units, dtype=float) * (model.current_unit_ma or 0.0) / 1000.0


def current_a_to_torque_nm(current_a, model: ServoModel):
    """Output torque (N·m) for a motor current (A): the model's torque constant (stall torque /
    stall current). The sign follows the current; apply the joint direction separately."""
    return np.asarray(current_a, dtype=float) * model.torque_constant_nm_per_a


def torque_nm_to_current_a(torque_nm, model: ServoModel):
    """Motor current (A) for an output torque (N·m); inverse of current_a_to_torque_nm."""
    return np.asarray(torque_nm, dtype=float) / model.torque_constant_nm_per_a
