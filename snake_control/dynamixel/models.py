"""Dynamixel X-series servo models as pure data.

Model numbers are from ROBOTIS's control tables (see shared DYNAMIXEL.md); stall torques and
no-load speeds are the e-Manual figures at the rated voltage named beside them. Every X-series
servo in position mode spans 0..4095 ticks over one turn, 2048 at the centre.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

TICKS_PER_TURN = 4096
CENTER_TICK = 2048
RAD_PER_TICK = 2.0 * math.pi / TICKS_PER_TURN
# One velocity unit is 0.229 rev/min.
RAD_S_PER_VELOCITY_UNIT = 0.229 * 2.0 * math.pi / 60.0


@dataclass(frozen=True)
class ServoModel:
    """One servo type: what the driver, the emulator and the torque check need to know."""

    name: str
    model_number: int
    stall_torque_nm: float
    no_load_speed_rad_s: float
    rated_voltage_v: float
    current_unit_ma: float | None  # None: no Goal/Present Current (XL430 reports load instead)
    fast_sync_read_min_firmware: int | None  # None: fast sync read not supported

    @property
    def min_position_rad(self) -> float:
        """Lowest servo angle reachable in position mode, relative to the centre tick."""
        return (0 - CENTER_TICK) * RAD_PER_TICK

    @property
    def max_position_rad(self) -> float:
        """Highest servo angle reachable in position mode, relative to the centre tick."""
        return (TICKS_PER_TURN - 1 - CENTER_TICK) * RAD_PER_TICK


def _rpm(rpm: float) -> float:
    return rpm * 2.0 * math.pi / 60.0


SERVO_MODELS: dict[str, ServoModel] = {m.name: m for m in (
    ServoModel('XL430-W250', 1060, 1.5, _rpm(61), 12.0, None, 45),
    ServoModel('2XL430-W250', 1090, 1.5, _rpm(61), 12.0, None, None),
    ServoModel('XC430-W150', 1070, 1.6, _rpm(126), 12.0, None, 45),
    ServoModel('XC430-W240', 1080, 1.9, _rpm(70), 12.0, None, 45),
    ServoModel('XM430-W350', 1020, 4.1, _rpm(46), 12.0, 2.69, 45),
    ServoModel('XM430-W210', 1030, 3.0, _rpm(77), 12.0, 2.69, 45),
    ServoModel('XH430-W350', 1000, 3.4, _rpm(30), 12.0, 1.34, 45),
    ServoModel('XH430-W210', 1010, 2.5, _rpm(50), 12.0, 1.34, 45),
    ServoModel('XM540-W270', 1120, 10.6, _rpm(30), 12.0, 2.69, 45),
    ServoModel('XM540-W150', 1130, 7.3, _rpm(53), 12.0, 2.69, 45),
    ServoModel('XH540-W270', 1100, 9.9, _rpm(33), 24.0, 2.69, 45),
    ServoModel('XL330-M077', 1190, 0.228, _rpm(383), 5.0, 1.0, 46),
    ServoModel('XL330-M288', 1200, 0.52, _rpm(104), 5.0, 1.0, 46),
    ServoModel('XC330-T181', 1210, 0.6, _rpm(129), 12.0, 1.0, 46),
    ServoModel('XC330-T288', 1220, 0.92, _rpm(81), 12.0, 1.0, 46),
)}

MODEL_BY_NUMBER: dict[int, ServoModel] = {m.model_number: m for m in SERVO_MODELS.values()}
