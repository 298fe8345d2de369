"""One emulated X-series servo: its control table bytes and what reading and writing them does.

The rules follow the ROBOTIS e-Manual (Protocol 2.0 page, Status Packet errors; XM430-W350 control
table). In the order a write is checked:

- Access Error (0x07): an address that is not an item, a read-only item, EEPROM (and Operating Mode,
  and the Indirect Addresses) while torque is on;
- Data Length Error (0x05): the data covers a multi-byte item only in part (the manual's own example
  is two bytes written into the four-byte Goal Position);
- Data Range Error (0x04): a value outside the item's Range column (models.Register.range), an
  undefined Operating Mode, a goal while the Bus Watchdog has tripped;
- Data Limit Error (0x06): a goal outside the value of its limit item (Goal Position outside
  Min/Max Position Limit in the position modes, |Goal PWM/Current/Velocity| above PWM/Current/Velocity
  Limit, Profile Velocity above Velocity Limit).
"""
from __future__ import annotations

import collections
import math
import operator
import struct
import time

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.conversion import servo_rad_to_tick
from snake_control.dynamixel.models import (
    BACKUP_RANGES, CENTER_TICK, CONTROL_TABLE, CONTROL_TABLE_SIZE, GOAL_LIMITS, INDIRECT_BLOCKS,
    OPERATING_MODE_VALUES, RAD_PER_TICK, RAD_S_PER_VELOCITY_UNIT, RAD_S2_PER_ACCELERATION_UNIT,
    WATCHDOG_UNIT_S, ServoModel)

R = CONTROL_TABLE
ADDR_TORQUE = R['torque_enable'].address
ADDR_HW_ERROR = R['hardware_error_status'].address
ADDR_GOAL = R['goal_position'].address
ADDR_WATCHDOG = R['bus_watchdog'].address
ADDR_BACKUP_READY = R['backup_ready'].address
ADDR_TEMPERATURE_LIMIT = R['temperature_limit'].address
ADDR_CURRENT_LIMIT = R['current_limit'].address
REBOOT_TIME_S = 0.05
AMBIENT_C = 30.0
THERMAL_TAU_S = 60.0
HEATING_C_PER_A2_S = 0.19          # ~60 C steady rise at a 2.3 A stall current
OVERLOAD_TIME_S = 1.0
GOAL_LOG_SIZE = 200_000
STARTUP_RAM_RESTORE = 0x02         # Startup Configuration bit 1: restore the RAM backup at boot
POSITION_MODES = (3, 5)            # modes whose Goal Position is bounded by Min/Max Position Limit

# Register covering each address; which addresses are Indirect Addresses (locked while torque is on).
REG_AT: dict[int, object] = {}
for _reg in CONTROL_TABLE.values():
    for _a in range(_reg.address, _reg.address + _reg.size):
        REG_AT[_a] = _reg
_INDIRECT_ADDRESS_BYTES = frozenset(a for base, _, n in INDIRECT_BLOCKS for a in range(base, base + 2 * n))
# Indirect Data address -> the address of its Indirect Address item.
_INDIRECT_SLOT = {data + k: base + 2 * k for base, data, n in INDIRECT_BLOCKS for k in range(n)}
_INDIRECT_SPAN = [(data, data + n) for _, data, n in INDIRECT_BLOCKS]
_READ_PLANS_MAX = 256              # distinct (address, length) reads whose plans a servo keeps
_PRESENT_126 = struct.Struct('<HII')   # Present Current, Velocity, Position (126..135)
_PRESENT_120 = struct.Struct('<HB')    # Realtime Tick, Moving (120..122)
_PRESENT_144 = struct.Struct('<HB')    # Present Input Voltage, Temperature (144..146)
# Registers read in place by the hot paths (a slice and int.from_bytes cost several times more):
_HOMING = struct.Struct('<i')                          # Homing Offset (20)
_HOMING_GOAL = struct.Struct(f'<i{ADDR_GOAL - 24}xi')  # Homing Offset (20), Goal Position
_POSITION_LIMITS = struct.Struct('<II')                # Max, Min Position Limit (48, 52)


def _slot_key(table: bytearray, spans: tuple) -> bytes:
    """The Indirect Address bytes a read's plan was made from (what must not have changed since)."""
    if len(spans) == 1:
        lo, hi = spans[0]
        return bytes(table[lo:hi])
    return b''.join(bytes(table[lo:hi]) for lo, hi in spans)


class Servo:
    """One emulated X-series servo: control table bytes and the registers' side effects."""

    def __init__(self, servo_id: int, model: ServoModel, baud_register: int, firmware: int,
                 return_delay: int = 250):
        self.model = model
        self.table = bytearray(CONTROL_TABLE_SIZE)
        self.backup: bytes | None = None    # Control Table Backup area (BACKUP_RANGES, concatenated)
        self._factory_defaults()
        self.table[7] = servo_id
        self.table[8] = baud_register
        self.table[6] = firmware
        self.table[9] = return_delay
        self.position_rad = 0.0
        self.velocity_rad_s = 0.0
        self.current_a = 0.0
        self.temperature_c = AMBIENT_C
        self.voltage_v = model.rated_voltage_v
        self.registered: tuple[int, bytes] | None = None
        self.silent_until = 0.0            # reboot in progress
        self.overload_since: float | None = None
        self.last_instruction_t = time.monotonic()
        self.watchdog_trips = 0            # times the Bus Watchdog stopped this servo (a test's record)
        self.pending_reboot = False
        self.profile_changed = False
        # Every goal write (t_s, ticks, accepted): the latest GOAL_LOG_SIZE, plus whole-run statistics.
        self.goal_log: collections.deque = collections.deque(maxlen=GOAL_LOG_SIZE)
        self.goal_stats = [0, None, None, 0]   # writes, min ticks, max ticks, refused
        # (address, length) -> (Indirect Address spans, their bytes then, gather or None when direct):
        # a read's physical addresses, resolved once and reused while those Indirect Address bytes stay
        # the same (compared on every read, so any way of changing the table invalidates it).
        self._read_plans: dict = {}

    def _factory_defaults(self, keep_id=False, keep_baud=False):
        sid, baud, fw = self.table[7], self.table[8], self.table[6]
        for reg in CONTROL_TABLE.values():
            self.table[reg.address:reg.address + reg.size] = P.le(reg.default, reg.size)
        self.table[0:2] = P.le(self.model.model_number, 2)
        self.table[6] = fw or 46
        if keep_id:
            self.table[7] = sid
        if keep_baud:
            self.table[8] = baud
        self.table[ADDR_BACKUP_READY] = self.backup is not None

    # register helpers
    def get(self, name: str) -> int:
        reg = R[name]
        return P.from_le(self.table[reg.address:reg.address + reg.size], reg.signed)

    def set(self, name: str, value: int) -> None:
        reg = R[name]
        self.table[reg.address:reg.address + reg.size] = P.le(int(value), reg.size)

    def set_present(self, name: str, value: float) -> None:
        """Set a measured quantity behind a Present register (the control channel's `set`): the next
        refresh would overwrite the register itself. Other registers are written as they are."""
        if name == 'present_temperature':
            self.temperature_c = float(value)
        elif name == 'present_input_voltage':
            self.voltage_v = float(value) / 10.0
        elif name in ('present_position', 'present_velocity', 'present_current'):
            raise ValueError(f'{name} comes from the mechanics (the plant), not from the control channel')
        else:
            self.set(name, int(value))

    @property
    def id(self) -> int:
        return self.table[7]

    @property
    def torque_on(self) -> bool:
        return self.table[ADDR_TORQUE] == 1

    @property
    def alert(self) -> int:
        return P.ERR_ALERT if self.table[ADDR_HW_ERROR] else 0

    def goal_rad(self) -> float:
        homing, goal = _HOMING_GOAL.unpack_from(self.table, 20)     # every servo, every mechanics step
        return (goal - CENTER_TICK - homing) * RAD_PER_TICK

    def profile(self) -> tuple[float, float]:
        pv, pa = self.get('profile_velocity'), self.get('profile_acceleration')
        return (pv * RAD_S_PER_VELOCITY_UNIT if pv else math.inf,
                pa * RAD_S2_PER_ACCELERATION_UNIT if pa else math.inf)

    def refresh_present(self, now: float) -> None:
        """Write the mechanical state into the Present registers (before any read)."""
        t = self.table
        ticks = servo_rad_to_tick(self.position_rad) + _HOMING.unpack_from(t, 20)[0]
        unit_a = (self.model.current_unit_ma or 2.69) / 1000.0
        # Two's complement in the register's width, as P.le writes it.
        _PRESENT_126.pack_into(t, 126, round(self.current_a / unit_a) & 0xFFFF,
                               round(self.velocity_rad_s / RAD_S_PER_VELOCITY_UNIT) & 0xFFFFFFFF,
                               ticks & 0xFFFFFFFF)
        _PRESENT_144.pack_into(t, 144, round(self.voltage_v * 10.0) & 0xFFFF,
                               max(0, min(255, round(self.temperature_c))))
        _PRESENT_120.pack_into(t, 120, int(now * 1000.0) % 32768, 1 if abs(self.velocity_rad_s) > 1e-3 else 0)

    def resolve(self, address: int, length: int) -> list[int]:
        """Physical addresses of a range, with Indirect Data bytes mapped through Indirect Address."""
        out = []
        for a in range(address, address + length):
            slot = _INDIRECT_SLOT.get(a)
            if slot is not None:
                target = self.table[slot] | (self.table[slot + 1] << 8)
                if target < CONTROL_TABLE_SIZE:
                    a = target
            out.append(a)
        return out

    def _direct(self, address: int, length: int) -> bool:
        end = address + length
        return all(end <= lo or address >= hi for lo, hi in _INDIRECT_SPAN)

    def _read_plan(self, address: int, length: int) -> tuple:
        """(Indirect Address spans, their bytes, gather) of a read; gather(table) gives its bytes'
        values in order (None: a direct read, one slice)."""
        if len(self._read_plans) >= _READ_PLANS_MAX:
            self._read_plans.clear()
        if self._direct(address, length):
            plan = self._read_plans[address, length] = ((), b'', None)
            return plan
        slots = sorted({_INDIRECT_SLOT[a] for a in range(address, address + length) if a in _INDIRECT_SLOT})
        spans = []
        for slot in slots:                  # consecutive 2-byte entries merge into one span
            if spans and spans[-1][1] == slot:
                spans[-1][1] = slot + 2
            else:
                spans.append([slot, slot + 2])
        spans = tuple((lo, hi) for lo, hi in spans)
        addrs = self.resolve(address, length)
        gather = operator.itemgetter(*addrs) if length > 1 else (lambda t, a=addrs[0]: (t[a],))
        plan = self._read_plans[address, length] = (spans, _slot_key(self.table, spans), gather)
        return plan

    def read(self, address: int, length: int, now: float) -> tuple[int, bytes]:
        if length <= 0:
            return P.ERR_DATA_LENGTH, b''
        if address + length > CONTROL_TABLE_SIZE:
            return P.ERR_ACCESS, b''
        self.refresh_present(now)
        t = self.table
        plan = self._read_plans.get((address, length))
        if plan is None or (plan[0] and _slot_key(t, plan[0]) != plan[1]):
            plan = self._read_plan(address, length)
        gather = plan[2]
        if gather is None:
            return 0, bytes(t[address:address + length])
        return 0, bytes(gather(t))

    def write(self, address: int, data: bytes, now: float) -> int:
        """Apply a write; return the status error code (0 when accepted)."""
        if address == ADDR_GOAL and len(data) == 4:
            return self._write_goal(int.from_bytes(data, 'little', signed=True), data, now)
        if not data:
            return P.ERR_DATA_LENGTH
        if address + len(data) > CONTROL_TABLE_SIZE:
            return P.ERR_ACCESS
        end = address + len(data)
        for a in range(address, end):
            reg = REG_AT.get(a)
            if reg is None or not reg.writable:
                return P.ERR_ACCESS
        for a in range(address, end):
            reg = REG_AT[a]
            if reg.address < address or reg.address + reg.size > end:
                return P.ERR_DATA_LENGTH        # part of a multi-byte item
        targets = self.resolve(address, len(data))
        touched = set()
        for a in targets:
            reg = REG_AT.get(a)
            if reg is None or not reg.writable:
                return P.ERR_ACCESS
            locked = reg.eeprom or a in _INDIRECT_ADDRESS_BYTES or reg.name == 'operating_mode'
            if locked and self.torque_on and reg.name != 'torque_enable':
                return P.ERR_ACCESS
            touched.add(reg.name)
        new = bytearray(self.table)
        for a, b in zip(targets, data):
            new[a] = b
        goal_written = 'goal_position' in touched
        goal = P.from_le(new[ADDR_GOAL:ADDR_GOAL + 4], True)
        err = self._validate(new, touched)
        if goal_written:
            self._record_goal(now, goal, err == 0)
        if err:
            return err
        was_on = self.torque_on
        old_profile = self.profile()
        self.table[:] = new
        if 'torque_enable' in touched and self.torque_on and not was_on:
            if self.table[ADDR_HW_ERROR] & self.get('shutdown'):
                self.table[ADDR_TORQUE] = 0        # a latched shutdown error keeps torque off
                return P.ERR_RESULT_FAIL
        if self.profile() != old_profile:
            self.profile_changed = True
        return 0

    def _record_goal(self, now: float, goal: int, accepted: bool) -> None:
        self.goal_log.append((now, goal, accepted))
        st = self.goal_stats
        st[0] += 1
        if st[1] is None or goal < st[1]:
            st[1] = goal
        if st[2] is None or goal > st[2]:
            st[2] = goal
        if not accepted:
            st[3] += 1

    def _write_goal(self, goal: int, data: bytes, now: float) -> int:
        """Goal Position alone (every cycle of a driver): the same checks as write(), without copies."""
        t = self.table
        err = 0
        if t[ADDR_WATCHDOG] == 0xFF:
            err = P.ERR_DATA_RANGE
        elif t[11] in POSITION_MODES:
            highest, lowest = _POSITION_LIMITS.unpack_from(t, 48)
            if not lowest <= goal <= highest:
                err = P.ERR_DATA_LIMIT
        self._record_goal(now, goal, err == 0)
        if not err:
            t[ADDR_GOAL:ADDR_GOAL + 4] = data
        return err

    def _validate(self, new: bytearray, touched: set) -> int:
        def val(name):
            reg = R[name]
            return P.from_le(new[reg.address:reg.address + reg.size], reg.signed)
        goals = touched & {'goal_position', 'goal_velocity', 'goal_current', 'goal_pwm'}
        if goals and self.get('bus_watchdog') < 0:
            return P.ERR_DATA_RANGE
        for name in touched:
            lo_hi = R[name].range
            if lo_hi is not None and not lo_hi[0] <= val(name) <= lo_hi[1]:
                return P.ERR_DATA_RANGE
        if 'operating_mode' in touched and val('operating_mode') not in OPERATING_MODE_VALUES:
            return P.ERR_DATA_RANGE
        if 'goal_position' in touched and val('operating_mode') in POSITION_MODES:
            if not val('min_position_limit') <= val('goal_position') <= val('max_position_limit'):
                return P.ERR_DATA_LIMIT
        for goal in goals & GOAL_LIMITS.keys():
            if abs(val(goal)) > val(GOAL_LIMITS[goal]):
                return P.ERR_DATA_LIMIT
        if 'profile_velocity' in touched and 0 < val('velocity_limit') < val('profile_velocity'):
            return P.ERR_DATA_LIMIT
        return 0

    def trip(self, bits: int) -> None:
        """Latch hardware error bits; cut torque when Shutdown selects them. An overheating trip reads
        as such: Present Temperature above the Temperature Limit."""
        if bits & P.HW_OVERHEATING:
            self.temperature_c = max(self.temperature_c, self.get('temperature_limit') + 1.0)
        self.table[ADDR_HW_ERROR] |= bits
        if self.table[ADDR_HW_ERROR] & self.get('shutdown'):
            self.table[ADDR_TORQUE] = 0

    def reboot(self, now: float) -> None:
        """RAM back to defaults (or to the RAM backup when Startup Configuration asks for it), hardware
        error cleared, goal = present, silent for a moment."""
        eeprom = bytes(self.table[:64])
        self._factory_defaults(keep_id=True, keep_baud=True)
        self.table[:64] = eeprom            # RAM (incl. indirect addresses) back to defaults
        if self.backup is not None and self.table[R['startup_configuration'].address] & STARTUP_RAM_RESTORE:
            self._restore(ram=True)
        self.refresh_present(now)
        self.table[ADDR_GOAL:ADDR_GOAL + 4] = self.table[132:136]
        self.overload_since = None
        self.silent_until = now + REBOOT_TIME_S
        self.profile_changed = True

    def factory_reset(self, option: int) -> None:
        self._factory_defaults(keep_id=option in (1, 2), keep_baud=option == 2)
        self.table[ADDR_GOAL:ADDR_GOAL + 4] = self.table[132:136]
        self.profile_changed = True

    def store_backup(self) -> None:
        """Control Table Backup, store: EEPROM, gains, profile and Indirect Addresses to the backup area."""
        self.backup = b''.join(bytes(self.table[a:b]) for a, b in BACKUP_RANGES)
        self.table[ADDR_BACKUP_READY] = 1

    def _restore(self, ram: bool) -> None:
        """Copy the backup area back: its EEPROM part (ram=False) or its RAM part (ram=True)."""
        k = 0
        for a, b in BACKUP_RANGES:
            if (a >= 64) == ram:
                self.table[a:b] = self.backup[k:k + b - a]
            k += b - a

    def restore_backup(self) -> None:
        """Control Table Backup, restore: EEPROM from the backup area (the caller reboots the servo)."""
        self._restore(ram=False)

    def tick(self, now: float, dt: float, watch: bool = True) -> None:
        """Temperature, overload, overheating and (``watch``) the bus watchdog over dt seconds."""
        t = self.table                      # every servo, every cycle: the registers read in place
        if dt > 0:
            rise = HEATING_C_PER_A2_S * self.current_a ** 2 - (self.temperature_c - AMBIENT_C) / THERMAL_TAU_S
            self.temperature_c += rise * dt
        if self.temperature_c > t[ADDR_TEMPERATURE_LIMIT]:
            self.trip(P.HW_OVERHEATING)
        limit_a = (t[ADDR_CURRENT_LIMIT] | t[ADDR_CURRENT_LIMIT + 1] << 8) \
            * (self.model.current_unit_ma or 2.69) / 1000.0
        if t[ADDR_TORQUE] == 1 and abs(self.current_a) > 0.95 * limit_a:
            if self.overload_since is None:
                self.overload_since = now
            elif now - self.overload_since > OVERLOAD_TIME_S:
                self.trip(P.HW_OVERLOAD)
        else:
            self.overload_since = None
        if watch:
            self.watch_bus(now)

    def watch_bus(self, now: float) -> None:
        """The Bus Watchdog: with torque on, no instruction for longer than it stops the servo."""
        t = self.table
        wd = t[ADDR_WATCHDOG]               # signed: 0xFF (-1) once it has tripped
        if 0 < wd < 128 and t[ADDR_TORQUE] == 1 and now - self.last_instruction_t > wd * WATCHDOG_UNIT_S:
            self.set('bus_watchdog', -1)
            self.watchdog_trips += 1
            self.refresh_present(now)
            self.table[ADDR_GOAL:ADDR_GOAL + 4] = self.table[132:136]   # stop where it is
