"""Dynamixel X-series servo models as pure data.

Model numbers are from ROBOTIS's control tables (see docs/dynamixel.md); stall torques and
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


# ---------------------------------------------------------------------------------------------------
# X-series control table (XM430-W350; X430/X540 share it). Pure data for the driver, the emulator and
# `snake dxl read/write NAME`.

@dataclass(frozen=True)
class Register:
    """One control-table item: address, size in bytes, access, area, sign and factory default."""

    name: str
    address: int
    size: int
    writable: bool = True
    eeprom: bool = False            # writable only with torque off
    signed: bool = False
    default: int = 0


def _r(name, address, size, writable=True, default=0, signed=False):
    return Register(name, address, size, writable, address < 64, signed, default)


CONTROL_TABLE: dict[str, Register] = {r.name: r for r in (
    _r('model_number', 0, 2, False),
    _r('model_information', 2, 4, False),
    _r('firmware_version', 6, 1, False, 46),
    _r('id', 7, 1, True, 1),
    _r('baud_rate', 8, 1, True, 1),
    _r('return_delay_time', 9, 1, True, 250),
    _r('drive_mode', 10, 1, True, 0),
    _r('operating_mode', 11, 1, True, 3),
    _r('secondary_id', 12, 1, True, 255),
    _r('protocol_type', 13, 1, True, 2),
    _r('homing_offset', 20, 4, True, 0, True),
    _r('moving_threshold', 24, 4, True, 10),
    _r('temperature_limit', 31, 1, True, 80),
    _r('max_voltage_limit', 32, 2, True, 160),
    _r('min_voltage_limit', 34, 2, True, 95),
    _r('pwm_limit', 36, 2, True, 885),
    _r('current_limit', 38, 2, True, 1193),
    _r('velocity_limit', 44, 4, True, 200),
    _r('max_position_limit', 48, 4, True, 4095),
    _r('min_position_limit', 52, 4, True, 0),
    _r('startup_configuration', 60, 1, True, 0),
    _r('shutdown', 63, 1, True, 0x34),
    _r('torque_enable', 64, 1, True, 0),
    _r('led', 65, 1, True, 0),
    _r('status_return_level', 68, 1, True, 2),
    _r('registered_instruction', 69, 1, False),
    _r('hardware_error_status', 70, 1, False),
    _r('velocity_i_gain', 76, 2, True, 1920),
    _r('velocity_p_gain', 78, 2, True, 100),
    _r('position_d_gain', 80, 2, True, 0),
    _r('position_i_gain', 82, 2, True, 0),
    _r('position_p_gain', 84, 2, True, 800),
    _r('feedforward_2nd_gain', 88, 2, True, 0),
    _r('feedforward_1st_gain', 90, 2, True, 0),
    _r('bus_watchdog', 98, 1, True, 0, True),
    _r('goal_pwm', 100, 2, True, 885, True),
    _r('goal_current', 102, 2, True, 1193, True),
    _r('goal_velocity', 104, 4, True, 0, True),
    _r('profile_acceleration', 108, 4, True, 0),
    _r('profile_velocity', 112, 4, True, 0),
    _r('goal_position', 116, 4, True, 2048, True),
    _r('realtime_tick', 120, 2, False),
    _r('moving', 122, 1, False),
    _r('moving_status', 123, 1, False),
    _r('present_pwm', 124, 2, False, 0, True),
    _r('present_current', 126, 2, False, 0, True),
    _r('present_velocity', 128, 4, False, 0, True),
    _r('present_position', 132, 4, False, 2048, True),
    _r('velocity_trajectory', 136, 4, False, 0, True),
    _r('position_trajectory', 140, 4, False, 0, True),
    _r('present_input_voltage', 144, 2, False, 120),
    _r('present_temperature', 146, 1, False, 30),
    _r('backup_ready', 147, 1, False),
) + tuple(_r(f'indirect_address_{k + 1}', 168 + 2 * k, 2, True, 224 + k) for k in range(28))
  + tuple(_r(f'indirect_data_{k + 1}', 224 + k, 1, True) for k in range(28))}

CONTROL_TABLE_SIZE = 252            # bytes 0..251 (indirect data 28 ends at 251)
INDIRECT_ADDRESS_0 = 168
INDIRECT_DATA_0 = 224
INDIRECT_COUNT = 28
# Baud Rate register value -> bit/s.
BAUD_BY_REGISTER = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000,
                    6: 4_000_000, 7: 4_500_000}
REGISTER_BY_BAUD = {b: r for r, b in BAUD_BY_REGISTER.items()}
OPERATING_MODES = {'current': 0, 'velocity': 1, 'position': 3, 'extended_position': 4,
                   'current_based_position': 5, 'pwm': 16}
# Profile Acceleration unit: 214.577 rev/min^2.
RAD_S2_PER_ACCELERATION_UNIT = 214.577 * 2.0 * math.pi / 3600.0
# Input voltage unit: 0.1 V.  Return delay unit: 2 us.  Watchdog unit: 20 ms.
VOLT_PER_UNIT = 0.1
RETURN_DELAY_UNIT_S = 2e-6
WATCHDOG_UNIT_S = 0.02


def register(name: str) -> Register:
    """The control-table item called ``name`` (case and '-'/' ' insensitive), ValueError naming it."""
    key = name.strip().lower().replace('-', '_').replace(' ', '_')
    if key not in CONTROL_TABLE:
        raise ValueError(f'unknown register {name!r}; known: {", ".join(CONTROL_TABLE)}')
    return CONTROL_TABLE[key]
