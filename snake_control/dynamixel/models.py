"""Dynamixel X-series servo models as pure data.

Model numbers are from ROBOTIS's control tables (see docs/dynamixel.md); stall torques, stall currents and no-load speeds are
the e-Manual's specification figures at the rated voltage named beside them. The torque constant
(N·m per A of motor current) is derived from them as stall torque / stall current: the e-Manual gives
no torque constant of its own, and near stall the torque-current line of its performance graphs runs
through that point. Every X-series servo in position mode spans 0..4095 ticks over one turn, 2048 at
the centre.
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
    stall_current_a: float = 2.3   # at the rated voltage, with stall_torque_nm

    @property
    def torque_constant_nm_per_a(self) -> float:
        """Output torque per ampere of motor current: stall torque / stall current (e-Manual figures)."""
        return self.stall_torque_nm / self.stall_current_a

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
    # name, model number, stall torque N·m, no-load speed, rated V, current unit mA, fast read fw, stall A;
    # torque, speed and current as the e-Manual's X-series overview gives them at that voltage.
    ServoModel('XL430-W250', 1060, 1.5, _rpm(61), 12.0, None, 45, 1.4),
    ServoModel('2XL430-W250', 1090, 1.5, _rpm(61), 12.0, None, None, 1.4),
    ServoModel('XC430-W150', 1070, 1.6, _rpm(126), 12.0, None, 45, 1.4),
    ServoModel('XC430-W240', 1080, 1.9, _rpm(70), 12.0, None, 45, 1.4),
    ServoModel('XM430-W350', 1020, 4.1, _rpm(46), 12.0, 2.69, 45, 2.3),
    ServoModel('XM430-W210', 1030, 3.0, _rpm(77), 12.0, 2.69, 45, 2.3),
    ServoModel('XH430-W350', 1000, 3.4, _rpm(30), 12.0, 1.34, 45, 1.3),
    ServoModel('XH430-W210', 1010, 2.5, _rpm(50), 12.0, 1.34, 45, 1.3),
    ServoModel('XM540-W270', 1120, 10.6, _rpm(30), 12.0, 2.69, 45, 4.4),
    ServoModel('XM540-W150', 1130, 7.3, _rpm(53), 12.0, 2.69, 45, 4.4),
    ServoModel('XH540-W270', 1100, 9.9, _rpm(39), 12.0, 2.69, 45, 4.9),
    ServoModel('XL330-M077', 1190, 0.215, _rpm(383), 5.0, 1.0, 46, 1.47),
    ServoModel('XL330-M288', 1200, 0.52, _rpm(103), 5.0, 1.0, 46, 1.47),
    ServoModel('XC330-T181', 1210, 0.80, _rpm(113), 12.0, 1.0, 46, 0.88),
    ServoModel('XC330-T288', 1220, 1.00, _rpm(71), 12.0, 1.0, 46, 0.88),
)}

MODEL_BY_NUMBER: dict[int, ServoModel] = {m.model_number: m for m in SERVO_MODELS.values()}


# ---------------------------------------------------------------------------------------------------
# X-series control table (XM430-W350; X430/X540 share it). Pure data for the driver, the emulator and
# `snake dxl read/write NAME`.

@dataclass(frozen=True)
class Register:
    """One control-table item: address, size in bytes, access, area, sign, factory default and the
    e-Manual's Range column (a write outside it is a Data Range Error; None: no fixed range)."""

    name: str
    address: int
    size: int
    writable: bool = True
    eeprom: bool = False            # writable only with torque off
    signed: bool = False
    default: int = 0
    range: tuple[int, int] | None = None


def _r(name, address, size, writable=True, default=0, signed=False, range=None):
    return Register(name, address, size, writable, address < 64, signed, default, range)


GAIN_RANGE = (0, 16383)
INDIRECT_ADDRESS_RANGE = (64, 661)


CONTROL_TABLE: dict[str, Register] = {r.name: r for r in (
    _r('model_number', 0, 2, False),
    _r('model_information', 2, 4, False),
    _r('firmware_version', 6, 1, False, 46),
    _r('id', 7, 1, True, 1, range=(0, 252)),
    _r('baud_rate', 8, 1, True, 1, range=(0, 7)),
    _r('return_delay_time', 9, 1, True, 250, range=(0, 254)),
    _r('drive_mode', 10, 1, True, 0, range=(0, 13)),
    _r('operating_mode', 11, 1, True, 3, range=(0, 16)),
    _r('secondary_id', 12, 1, True, 255, range=(0, 255)),
    _r('protocol_type', 13, 1, True, 2, range=(1, 2)),
    _r('homing_offset', 20, 4, True, 0, True, (-1_044_479, 1_044_479)),
    _r('moving_threshold', 24, 4, True, 10, range=(0, 1023)),
    _r('temperature_limit', 31, 1, True, 80, range=(0, 100)),
    _r('max_voltage_limit', 32, 2, True, 160, range=(95, 160)),
    _r('min_voltage_limit', 34, 2, True, 95, range=(95, 160)),
    _r('pwm_limit', 36, 2, True, 885, range=(0, 885)),
    _r('current_limit', 38, 2, True, 1193, range=(0, 1193)),
    _r('velocity_limit', 44, 4, True, 200, range=(0, 1023)),
    _r('max_position_limit', 48, 4, True, 4095, range=(0, 4095)),
    _r('min_position_limit', 52, 4, True, 0, range=(0, 4095)),
    _r('startup_configuration', 60, 1, True, 0, range=(0, 3)),
    _r('shutdown', 63, 1, True, 0x34),
    _r('torque_enable', 64, 1, True, 0, range=(0, 1)),
    _r('led', 65, 1, True, 0, range=(0, 1)),
    _r('status_return_level', 68, 1, True, 2, range=(0, 2)),
    _r('registered_instruction', 69, 1, False),
    _r('hardware_error_status', 70, 1, False),
    _r('velocity_i_gain', 76, 2, True, 1920, range=GAIN_RANGE),
    _r('velocity_p_gain', 78, 2, True, 100, range=GAIN_RANGE),
    _r('position_d_gain', 80, 2, True, 0, range=GAIN_RANGE),
    _r('position_i_gain', 82, 2, True, 0, range=GAIN_RANGE),
    _r('position_p_gain', 84, 2, True, 800, range=GAIN_RANGE),
    _r('feedforward_2nd_gain', 88, 2, True, 0, range=GAIN_RANGE),
    _r('feedforward_1st_gain', 90, 2, True, 0, range=GAIN_RANGE),
    _r('bus_watchdog', 98, 1, True, 0, True, (0, 127)),
    _r('goal_pwm', 100, 2, True, 885, True),
    _r('goal_current', 102, 2, True, 1193, True),
    _r('goal_velocity', 104, 4, True, 0, True),
    _r('profile_acceleration', 108, 4, True, 0, range=(0, 32767)),
    _r('profile_velocity', 112, 4, True, 0, range=(0, 32767)),
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
) + tuple(_r(f'indirect_address_{k + 1}', 168 + 2 * k, 2, True, 224 + k, range=INDIRECT_ADDRESS_RANGE)
          for k in range(28))
  + tuple(_r(f'indirect_data_{k + 1}', 224 + k, 1, True) for k in range(28))
  + tuple(_r(f'indirect_address_{k + 29}', 578 + 2 * k, 2, True, 634 + k, range=INDIRECT_ADDRESS_RANGE)
          for k in range(28))
  + tuple(_r(f'indirect_data_{k + 29}', 634 + k, 1, True) for k in range(28))}

CONTROL_TABLE_SIZE = 662            # bytes 0..661 (indirect data 56 ends at 661)
INDIRECT_ADDRESS_0 = 168            # the first block: Indirect Address/Data 1..28
INDIRECT_DATA_0 = 224
INDIRECT_COUNT = 28
# Both blocks as (first Indirect Address, first Indirect Data, count): 1..28 and 29..56.
INDIRECT_BLOCKS = ((168, 224, 28), (578, 634, 28))
# What Control Table Backup (0x20) stores, as [start, end) byte ranges: all of EEPROM, the gains, the
# profile and both Indirect Address blocks.
BACKUP_RANGES = ((0, 64), (76, 92), (108, 116), (168, 224), (578, 634))
OPERATING_MODE_VALUES = frozenset((0, 1, 3, 4, 5, 16))
# A goal register and the limit register that bounds it (|goal| <= limit, else Data Limit Error).
GOAL_LIMITS = {'goal_pwm': 'pwm_limit', 'goal_current': 'current_limit', 'goal_velocity': 'velocity_limit'}
# Baud Rate register value -> bit/s.
BAUD_BY_REGISTER = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000,
                    6: 4_000_000, 7: 4_500_000}
REGISTER_BY_BAUD = {b: r for r, b in BAUD_BY_REGISTER.items()}
SUPPORTED_BAUDS = tuple(sorted(REGISTER_BY_BAUD))
# The order `snake dxl scan` tries them: the factory default first, then the common fast rates.
SCAN_BAUDS = (57600, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 115200, 9600)
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
