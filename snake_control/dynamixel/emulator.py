"""A Protocol 2.0 X-series servo bus behind a pseudo-terminal, for testing drivers without hardware.

``BusEmulator`` opens a pty, puts a stable symlink to its slave end (what a driver opens, like
/dev/ttyUSB0), and answers every instruction the way X-series servos do: ping (and broadcast ping in ID
order), read, write, reg write/action, reboot, factory reset, clear, sync read/write, fast sync read,
bulk read/write, fast bulk read, with CRC-16 and byte stuffing, status return level, return delay
time and the Alert bit. Each servo has its own control table (EEPROM locked while torque is on,
indirect addresses, hardware error status with shutdown, bus watchdog, baud rate register).

Timing: a packet occupies the wire for 10 bits per byte at the bus baud; a reply leaves no sooner than
the end of its request plus the servo's return delay plus its own bytes, and the bus is busy until the
last reply has left. The baud the driver set on its port is read from the tty: servos whose Baud
Rate register disagrees do not hear it (as on a real bus, `snake dxl scan` must find the right one).

Mechanics come from a Plant (snake_control.dynamixel.plant); the default MotorModel follows the goals
within the profile limits. Temperature rises with current; overload and overheating trip.

Faults (FaultSpec, from ``--faults`` or the control channel on stdin): corrupted bytes at a rate in
both directions, dropped replies at a rate, a servo that stops answering from a time for a while, an
overload/overheating trip, the adapter unplugged and plugged back (the pty closes; a new one appears
behind the same symlink).

Control channel: one command per line on stdin, one JSON line back on stdout:
``state`` (per-servo torque, goal, position, hardware error, goal-write record summary), ``goals``
(every goal write: [t_s, id, ticks, accepted]), ``silent ID SECONDS``, ``trip ID overload|overheating``,
``unplug SECONDS``, ``corrupt RATE``, ``drop RATE``, ``set ID REGISTER VALUE``, ``stall SECONDS`` (the
emulator stops reading the wire for a while, as a stalled host would: what the driver writes piles up in
the pty until its buffer is full).

Mechanics in their own thread: a plant whose ``threaded`` attribute is true (the MuJoCo world: its steps
release the interpreter lock) is stepped by a thread of its own at MECHANICS_STEP_S, and the serving loop
only takes its latest state. Stepping a physics world in the serving loop would delay every reply behind
a physics step (milliseconds on a loaded host), beyond the wire time and the driver's timeouts.
"""
from __future__ import annotations

import collections
import fcntl
import gc
import json
import math
import os
import random
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import threading
import time
import tty
from dataclasses import dataclass, field

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.models import (
    BAUD_BY_REGISTER, CENTER_TICK, CONTROL_TABLE, CONTROL_TABLE_SIZE, INDIRECT_ADDRESS_0, INDIRECT_COUNT,
    INDIRECT_DATA_0, RAD_PER_TICK, RAD_S_PER_VELOCITY_UNIT, RAD_S2_PER_ACCELERATION_UNIT,
    REGISTER_BY_BAUD, RETURN_DELAY_UNIT_S, WATCHDOG_UNIT_S, ServoModel)
from snake_control.dynamixel.plant import Plant, make_plant

R = CONTROL_TABLE
ADDR_TORQUE = R['torque_enable'].address
ADDR_HW_ERROR = R['hardware_error_status'].address
ADDR_GOAL = R['goal_position'].address
ADDR_WATCHDOG = R['bus_watchdog'].address
_TERMIOS_BAUD = {getattr(termios, f'B{b}'): b for b in (9600, 19200, 38400, 57600, 115200, 230400, 460800,
                                                         500000, 576000, 921600, 1000000, 1152000, 1500000,
                                                         2000000, 2500000, 3000000, 3500000, 4000000)
                 if hasattr(termios, f'B{b}')}
_TCGETS2 = 0x802C542A           # Linux ioctl: read struct termios2 (custom baud rates)
REBOOT_TIME_S = 0.05
AMBIENT_C = 30.0
THERMAL_TAU_S = 60.0
HEATING_C_PER_A2_S = 0.19          # ~60 C steady rise at a 2.3 A stall current
OVERLOAD_TIME_S = 1.0
GOAL_LOG_SIZE = 200_000
MECHANICS_STEP_S = 0.002     # present values are at most this old, as on a servo's own sampling


# ------------------------------------------------------------------------------------------- faults

@dataclass
class FaultSpec:
    """Injected faults. Times are seconds since the emulator started (or since the command, on stdin)."""

    corrupt_rate: float = 0.0       # probability that any byte on the wire (either way) is garbled
    drop_rate: float = 0.0          # probability that a servo's reply is lost
    silent: dict = field(default_factory=dict)      # id -> (start_s, end_s): servo does not answer
    trips: list = field(default_factory=list)       # (time_s, id, 'overload'|'overheating')
    unplugs: list = field(default_factory=list)     # (time_s, duration_s)
    seed: int = 0

    @classmethod
    def parse(cls, spec: str | None) -> 'FaultSpec':
        """Parse ``corrupt=0.01,drop=0.001,silent=3@2+1.5,trip=5:overload@1,unplug=2+1,seed=7``.

        ``silent=ID@START+DURATION`` (duration may be omitted: forever), ``trip=ID:KIND@TIME``,
        ``unplug=TIME+DURATION``. Items repeat freely.
        """
        out = cls()
        if not spec:
            return out
        for item in spec.split(','):
            item = item.strip()
            if not item:
                continue
            key, sep, value = item.partition('=')
            try:
                if not sep:
                    raise ValueError('expected key=value')
                if key == 'corrupt':
                    out.corrupt_rate = _rate(value)
                elif key == 'drop':
                    out.drop_rate = _rate(value)
                elif key == 'seed':
                    out.seed = int(value)
                elif key == 'silent':
                    sid, _, when = value.partition('@')
                    start, _, dur = (when or '0').partition('+')
                    out.silent[int(sid)] = (float(start), float(start) + (float(dur) if dur else math.inf))
                elif key == 'trip':
                    who, _, when = value.partition('@')
                    sid, _, kind = who.partition(':')
                    if kind not in ('overload', 'overheating'):
                        raise ValueError('kind must be overload or overheating')
                    out.trips.append((float(when or 0), int(sid), kind))
                elif key == 'unplug':
                    start, _, dur = value.partition('+')
                    out.unplugs.append((float(start), float(dur or 1.0)))
                else:
                    raise ValueError('unknown fault (corrupt, drop, silent, trip, unplug, seed)')
            except ValueError as exc:
                raise ValueError(f'--faults item {item!r}: {exc}') from None
        return out


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f'rate {value} is not within 0..1')
    return value


# -------------------------------------------------------------------------------------------- servo

class Servo:
    """One emulated X-series servo: control table bytes and the registers' side effects."""

    def __init__(self, servo_id: int, model: ServoModel, baud_register: int, firmware: int,
                 return_delay: int = 250):
        self.model = model
        self.table = bytearray(CONTROL_TABLE_SIZE)
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
        # Every goal write (t_s, ticks, accepted): the latest GOAL_LOG_SIZE, plus whole-run statistics.
        self.goal_log: collections.deque = collections.deque(maxlen=GOAL_LOG_SIZE)
        self.goal_stats = [0, None, None, 0]   # writes, min ticks, max ticks, refused

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

    # register helpers
    def get(self, name: str) -> int:
        reg = R[name]
        return P.from_le(self.table[reg.address:reg.address + reg.size], reg.signed)

    def set(self, name: str, value: int) -> None:
        reg = R[name]
        self.table[reg.address:reg.address + reg.size] = P.le(int(value), reg.size)

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
        return (self.get('goal_position') - CENTER_TICK - self.get('homing_offset')) * RAD_PER_TICK

    def profile(self) -> tuple[float, float]:
        pv, pa = self.get('profile_velocity'), self.get('profile_acceleration')
        return (pv * RAD_S_PER_VELOCITY_UNIT if pv else math.inf,
                pa * RAD_S2_PER_ACCELERATION_UNIT if pa else math.inf)

    def refresh_present(self, now: float) -> None:
        """Write the mechanical state into the Present registers (before any read)."""
        t = self.table
        ticks = round(self.position_rad / RAD_PER_TICK) + CENTER_TICK + self.get('homing_offset')
        t[132:136] = P.le(ticks, 4)
        t[128:132] = P.le(round(self.velocity_rad_s / RAD_S_PER_VELOCITY_UNIT), 4)
        unit_a = (self.model.current_unit_ma or 2.69) / 1000.0
        t[126:128] = P.le(round(self.current_a / unit_a), 2)
        t[144:146] = P.le(round(self.voltage_v * 10.0), 2)
        t[146] = max(0, min(255, round(self.temperature_c)))
        t[122] = 1 if abs(self.velocity_rad_s) > 1e-3 else 0
        t[120:122] = P.le(int(now * 1000.0) % 32768, 2)

    def resolve(self, address: int, length: int) -> list[int]:
        """Physical addresses of a range, with Indirect Data bytes mapped through Indirect Address."""
        out = []
        for a in range(address, address + length):
            k = a - INDIRECT_DATA_0
            if 0 <= k < INDIRECT_COUNT:
                base = INDIRECT_ADDRESS_0 + 2 * k
                a = self.table[base] | (self.table[base + 1] << 8)
                if a >= CONTROL_TABLE_SIZE:
                    a = INDIRECT_DATA_0 + k
            out.append(a)
        return out

    def read(self, address: int, length: int, now: float) -> tuple[int, bytes]:
        if length <= 0:
            return P.ERR_DATA_LENGTH, b''
        if address + length > CONTROL_TABLE_SIZE:
            return P.ERR_ACCESS, b''
        self.refresh_present(now)
        if address + length <= INDIRECT_DATA_0 or address >= INDIRECT_DATA_0 + INDIRECT_COUNT:
            return 0, bytes(self.table[address:address + length])
        return 0, bytes(self.table[a] for a in self.resolve(address, length))

    def write(self, address: int, data: bytes, now: float) -> int:
        """Apply a write; return the status error code (0 when accepted)."""
        if address == ADDR_GOAL and len(data) == 4:
            return self._write_goal(P.from_le(data, True), data, now)
        if not data:
            return P.ERR_DATA_LENGTH
        if address + len(data) > CONTROL_TABLE_SIZE:
            return P.ERR_ACCESS
        targets = self.resolve(address, len(data))
        touched = set()
        for a in targets:
            reg = _REG_AT.get(a)
            if reg is None or not reg.writable:
                return P.ERR_ACCESS
            locked = reg.eeprom or INDIRECT_ADDRESS_0 <= a < INDIRECT_DATA_0 or reg.name == 'operating_mode'
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
            self._profile_changed = True
        return 0

    def _record_goal(self, now: float, goal: int, accepted: bool) -> None:
        self.goal_log.append((now, goal, accepted))
        st = self.goal_stats
        st[0] += 1
        st[1] = goal if st[1] is None else min(st[1], goal)
        st[2] = goal if st[2] is None else max(st[2], goal)
        st[3] += not accepted

    def _write_goal(self, goal: int, data: bytes, now: float) -> int:
        """Goal Position alone (every cycle of a driver): the same checks as write(), without copies."""
        t = self.table
        err = 0
        if t[ADDR_WATCHDOG] == 0xFF:
            err = P.ERR_DATA_RANGE
        elif t[11] in (3, 5) and not (P.from_le(t[52:56]) <= goal <= P.from_le(t[48:52])):
            err = P.ERR_DATA_LIMIT
        self._record_goal(now, goal, err == 0)
        if not err:
            t[ADDR_GOAL:ADDR_GOAL + 4] = data
        return err

    def _validate(self, new: bytearray, touched: set) -> int:
        def val(name):
            reg = R[name]
            return P.from_le(new[reg.address:reg.address + reg.size], reg.signed)
        if 'goal_position' in touched or 'goal_velocity' in touched or 'goal_current' in touched:
            if self.get('bus_watchdog') < 0:
                return P.ERR_DATA_RANGE
        if 'goal_position' in touched and val('operating_mode') in (3, 5):
            if not val('min_position_limit') <= val('goal_position') <= val('max_position_limit'):
                return P.ERR_DATA_LIMIT
        checks = {'torque_enable': (0, 1), 'id': (0, 252), 'baud_rate': (0, 7), 'status_return_level': (0, 2),
                  'bus_watchdog': (0, 127), 'max_position_limit': (0, 4095), 'min_position_limit': (0, 4095),
                  'profile_velocity': (0, 32767), 'profile_acceleration': (0, 32767),
                  'velocity_limit': (0, 1023), 'temperature_limit': (0, 100), 'led': (0, 1)}
        for name, (lo, hi) in checks.items():
            if name in touched and not lo <= val(name) <= hi:
                return P.ERR_DATA_LIMIT
        if 'operating_mode' in touched and val('operating_mode') not in (0, 1, 3, 4, 5, 16):
            return P.ERR_DATA_LIMIT
        if 'profile_velocity' in touched and 0 < val('velocity_limit') < val('profile_velocity'):
            return P.ERR_DATA_LIMIT
        return 0

    _profile_changed = False

    def trip(self, bits: int) -> None:
        """Latch hardware error bits; cut torque when Shutdown selects them."""
        self.table[ADDR_HW_ERROR] |= bits
        if self.table[ADDR_HW_ERROR] & self.get('shutdown'):
            self.table[ADDR_TORQUE] = 0

    def reboot(self, now: float) -> None:
        """RAM back to defaults, hardware error cleared, goal = present, silent for a moment."""
        eeprom = bytes(self.table[:64])
        self._factory_defaults(keep_id=True, keep_baud=True)
        self.table[:64] = eeprom            # RAM (incl. indirect addresses) back to defaults
        self.refresh_present(now)
        self.table[ADDR_GOAL:ADDR_GOAL + 4] = self.table[132:136]
        self.overload_since = None
        self.silent_until = now + REBOOT_TIME_S
        self._profile_changed = True

    def factory_reset(self, option: int) -> None:
        self._factory_defaults(keep_id=option in (1, 2), keep_baud=option == 2)
        self.table[ADDR_GOAL:ADDR_GOAL + 4] = self.table[132:136]
        self._profile_changed = True

    def tick(self, now: float, dt: float) -> None:
        """Temperature, overload, overheating and the bus watchdog over dt seconds."""
        if dt > 0:
            rise = HEATING_C_PER_A2_S * self.current_a ** 2 - (self.temperature_c - AMBIENT_C) / THERMAL_TAU_S
            self.temperature_c += rise * dt
        if self.temperature_c > self.get('temperature_limit'):
            self.trip(P.HW_OVERHEATING)
        limit_a = self.get('current_limit') * (self.model.current_unit_ma or 2.69) / 1000.0
        if self.torque_on and abs(self.current_a) > 0.95 * limit_a:
            if self.overload_since is None:
                self.overload_since = now
            elif now - self.overload_since > OVERLOAD_TIME_S:
                self.trip(P.HW_OVERLOAD)
        else:
            self.overload_since = None
        wd = self.get('bus_watchdog')
        if wd > 0 and self.torque_on and now - self.last_instruction_t > wd * WATCHDOG_UNIT_S:
            self.set('bus_watchdog', -1)
            self.refresh_present(now)
            self.table[ADDR_GOAL:ADDR_GOAL + 4] = self.table[132:136]   # stop where it is


_REG_AT = {}
for _reg in CONTROL_TABLE.values():
    for _a in range(_reg.address, _reg.address + _reg.size):
        _REG_AT[_a] = _reg


# -------------------------------------------------------------------------------------------- bus

class BusEmulator:
    """Servos on one pty; call serve_forever() (or run in a thread) and open ``path`` with the SDK."""

    def __init__(self, ids, models, baud: int = 1_000_000, faults: FaultSpec | None = None,
                 plant: Plant | None = None, link: str | None = None, firmware: int = 46,
                 return_delay: int = 250, initial_rad=None, robot=None):
        if isinstance(models, ServoModel):
            models = {i: models for i in ids}
        if baud not in REGISTER_BY_BAUD:
            raise ValueError(f'baud {baud} is not a Dynamixel baud rate ({sorted(REGISTER_BY_BAUD)})')
        self.faults = faults or FaultSpec()
        self.rng = random.Random(self.faults.seed)
        self.servos: dict[int, Servo] = {}
        for i in ids:
            self.servos[i] = Servo(i, models[i], REGISTER_BY_BAUD[baud], firmware, return_delay)
        self.plant = plant or make_plant('motor', list(ids), models, robot)
        initial_rad = initial_rad or {}
        for i, s in self.servos.items():
            s.position_rad = float(initial_rad.get(i, 0.0))
            self.plant.configure(i, s.model, s.position_rad)
            s.refresh_present(0.0)
            s.table[ADDR_GOAL:ADDR_GOAL + 4] = s.table[132:136]
        self._own_dir = None
        if link is None:
            self._own_dir = tempfile.mkdtemp(prefix='snake-sim-bus-')
            link = os.path.join(self._own_dir, 'ttyDXL')
        self.path = link
        self.master = self.slave = -1
        self.t0 = time.monotonic()
        self.last_tick = self.t0
        self.bus_free_at = 0.0
        self.parser = P.PacketParser()
        self.plugged_until = None       # while unplugged: monotonic time of the replug
        self._pending_unplugs = sorted(self.faults.unplugs)
        self._pending_trips = sorted(self.faults.trips)
        self._silent_abs = {i: (self.t0 + a, self.t0 + b) for i, (a, b) in self.faults.silent.items()}
        self._corrupt_countdown = self._next_corrupt()
        self.stop_requested = False
        self._last_rx = 0.0
        self.stalled_until = 0.0        # monotonic time until which the wire is not read (`stall`)
        self._mech_lock = threading.Lock()
        self._mech_state = None         # latest {id: (q, v, i)} of a threaded plant
        self._mech_thread = None
        if getattr(self.plant, 'threaded', False):
            self._mech_thread = threading.Thread(target=self._mechanics_loop, name='mechanics', daemon=True)
            self._mech_thread.start()
        self.counters = {'packets': 0, 'crc_errors': 0, 'replies': 0, 'dropped': 0, 'corrupted_bytes': 0}
        self._open_pty()

    # -------------------------------------------------------------- pty
    def _open_pty(self):
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        attrs = termios.tcgetattr(self.slave)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(self.slave, termios.TCSANOW, attrs)
        os.set_blocking(self.master, False)
        tmp = self.path + '.new'
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.ttyname(self.slave), tmp)
        os.replace(tmp, self.path)      # atomic: the link never dangles between two ptys
        self.parser = P.PacketParser()

    def _close_pty(self):
        for fd in (self.master, self.slave):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.master = self.slave = -1
        if os.path.lexists(self.path):
            os.unlink(self.path)

    def close(self):
        self.stop_requested = True
        if self._mech_thread is not None:
            self._mech_thread.join(timeout=2.0)
        self._close_pty()
        if self._own_dir:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def unplug(self, duration_s: float):
        """Close the pty now (the driver's port fails) and open a new one after duration_s."""
        if self.master >= 0:
            self._close_pty()
        self.plugged_until = time.monotonic() + duration_s

    def port_baud(self) -> int | None:
        """The baud rate the driver set on the port (what its bytes would be clocked at)."""
        try:
            speed = termios.tcgetattr(self.slave)[4]
            if speed in _TERMIOS_BAUD:
                return _TERMIOS_BAUD[speed]
            # A custom rate (4.5 Mbit/s): Linux keeps it in struct termios2, c_ispeed at byte 36.
            buf = fcntl.ioctl(self.slave, _TCGETS2, bytes(44))
            return struct.unpack_from('I', buf, 36)[0]
        except (termios.error, OSError):
            return None

    # -------------------------------------------------------------- faults
    def _next_corrupt(self) -> int:
        p = self.faults.corrupt_rate
        if p <= 0:
            return -1
        if p >= 1:
            return 0
        return int(math.log(1.0 - self.rng.random()) / math.log(1.0 - p))

    def _corrupt(self, data: bytes) -> bytes:
        if self._corrupt_countdown < 0:
            return data
        out = None
        i = self._corrupt_countdown
        while i < len(data):
            if out is None:
                out = bytearray(data)
            out[i] ^= self.rng.randrange(1, 256)
            self.counters['corrupted_bytes'] += 1
            i += 1 + self._next_corrupt()
        self._corrupt_countdown = i - len(data)
        return bytes(out) if out is not None else data

    def set_corrupt_rate(self, rate: float):
        self.faults.corrupt_rate = rate
        self._corrupt_countdown = self._next_corrupt()

    def silence(self, servo_id: int, duration_s: float, start_s: float = 0.0):
        now = time.monotonic()
        self._silent_abs[servo_id] = (now + start_s, now + start_s + duration_s)

    def answers(self, s: Servo, now: float) -> bool:
        if now < s.silent_until:
            return False
        window = self._silent_abs.get(s.id)
        return not (window and window[0] <= now < window[1])

    # -------------------------------------------------------------- time
    def tick(self, now: float):
        """Advance mechanics and scheduled faults to ``now``."""
        t_rel = now - self.t0
        while self._pending_trips and self._pending_trips[0][0] <= t_rel:
            _, sid, kind = self._pending_trips.pop(0)
            if sid in self.servos:
                self.servos[sid].trip(P.HW_OVERLOAD if kind == 'overload' else P.HW_OVERHEATING)
        while self._pending_unplugs and self._pending_unplugs[0][0] <= t_rel:
            _, dur = self._pending_unplugs.pop(0)
            self.unplug(dur)
        if self.plugged_until is not None and now >= self.plugged_until:
            self.plugged_until = None
            self._open_pty()
        dt = now - self.last_tick
        if dt < MECHANICS_STEP_S:
            return                  # the mechanics advance in steps of at least 2 ms (cheap enough per cycle)
        self.last_tick = now
        if self._mech_thread is not None:
            with self._mech_lock:
                state, self._mech_state = self._mech_state, None
            if state:
                self._apply_state(state)
            for s in self.servos.values():
                s.tick(now, dt)
            return
        goals, torque = {}, {}
        for i, s in self.servos.items():
            if s._profile_changed:
                self.plant.set_profile(i, *s.profile())
                s._profile_changed = False
            goals[i] = s.goal_rad()
            torque[i] = s.torque_on
        self._apply_state(self.plant.step(dt, goals, torque))
        for s in self.servos.values():
            s.tick(now, dt)

    def _apply_state(self, state: dict) -> None:
        for i, (q, v, c) in state.items():
            s = self.servos.get(i)
            if s is not None:
                s.position_rad, s.velocity_rad_s, s.current_a = q, v, c

    def _mechanics_loop(self) -> None:
        """Step a threaded plant every MECHANICS_STEP_S of wall time, apart from the serving loop.

        Goals, torque and profile changes are taken under the lock (the serving loop writes them);
        the step itself runs outside it, so serving a packet never waits for physics."""
        last = time.monotonic()
        next_t = last
        while not self.stop_requested:
            next_t += MECHANICS_STEP_S
            with self._mech_lock:
                goals, torque, profiles = {}, {}, []
                for i, s in self.servos.items():
                    if s._profile_changed:
                        s._profile_changed = False
                        profiles.append((i, s.profile()))
                    goals[i] = s.goal_rad()
                    torque[i] = s.torque_on
            for i, prof in profiles:
                self.plant.set_profile(i, *prof)
            now = time.monotonic()
            try:
                state = self.plant.step(now - last, goals, torque)
            except Exception as exc:          # a broken world must not look like frozen servos silently
                print(f'sim-bus: physics step failed, mechanics stopped: {exc!r}', file=sys.stderr,
                      flush=True)
                return
            last = now
            with self._mech_lock:
                self._mech_state = state
            wait = next_t - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                next_t = time.monotonic()       # behind (slow host): never step in bursts to catch up

    # -------------------------------------------------------------- instructions
    def handle(self, pkt: P.Packet, now: float, baud: int) -> list[tuple[float, bytes]]:
        """Replies to one packet as (wire_end_time, bytes) in order; updates bus_free_at."""
        byte_s = 10.0 / baud
        clock = [max(now, self.bus_free_at) + pkt.size * byte_s]
        self.counters['packets'] += 1
        by_id = {s.id: s for s in self.servos.values() if BAUD_BY_REGISTER.get(s.table[8]) == baud}
        replies: list[tuple[float, bytes]] = []

        def emit(s: Servo, data: bytes, droppable: bool = True):
            clock[0] += s.table[9] * RETURN_DELAY_UNIT_S + len(data) * byte_s
            if droppable and self.faults.drop_rate and self.rng.random() < self.faults.drop_rate:
                self.counters['dropped'] += 1
                return
            replies.append((clock[0], data))

        try:
            if not pkt.crc_ok:
                self.counters['crc_errors'] += 1
                s = by_id.get(pkt.servo_id)
                if s is not None and self.answers(s, now) and s.table[68] == 2:
                    emit(s, P.build_status(s.id, P.ERR_CRC | s.alert))
                return replies
            inst, prm, target = pkt.instruction, pkt.params, pkt.servo_id
            bcast = target == P.BROADCAST_ID
            if inst in (P.SYNC_READ, P.SYNC_WRITE, P.FAST_SYNC_READ, P.BULK_READ, P.BULK_WRITE,
                        P.FAST_BULK_READ):
                if bcast:
                    self._group(inst, prm, by_id, now, emit)
                return replies
            addressed = list(by_id.values()) if bcast else ([by_id[target]] if target in by_id else [])
            for s in addressed:
                s.last_instruction_t = now
                if not self.answers(s, now):
                    continue
                reply = self._single(s, inst, prm, now, bcast)
                if reply is not None and not (bcast and inst != P.PING):
                    emit(s, reply)
            for s in addressed:
                if getattr(s, '_pending_reboot', False):
                    s._pending_reboot = False
                    s.reboot(now)
            return replies
        finally:
            self.bus_free_at = clock[0]

    def _single(self, s: Servo, inst: int, prm: bytes, now: float, bcast: bool) -> bytes | None:
        """Status reply of one servo to a non-group instruction (None: no reply)."""
        level = s.table[68]
        sid = s.id

        def status(err, params=b''):
            return P.build_status(sid, err | s.alert, params)

        if inst == P.PING:
            if prm:
                return status(P.ERR_DATA_LENGTH)
            return status(0, P.le(s.model.model_number, 2) + bytes((s.table[6],)))
        if inst == P.READ:
            if len(prm) != 4:
                return status(P.ERR_DATA_LENGTH) if level >= 1 else None
            err, data = s.read(prm[0] | prm[1] << 8, prm[2] | prm[3] << 8, now)
            return status(err, data) if level >= 1 else None
        reply = None
        if inst == P.WRITE:
            err = s.write(prm[0] | prm[1] << 8, prm[2:], now) if len(prm) >= 3 else P.ERR_DATA_LENGTH
            reply = status(err)
        elif inst == P.REG_WRITE:
            if len(prm) < 3:
                reply = status(P.ERR_DATA_LENGTH)
            else:
                s.registered = (prm[0] | prm[1] << 8, bytes(prm[2:]))
                s.table[69] = 1
                reply = status(0)
        elif inst == P.ACTION:
            if s.registered is not None:
                addr, data = s.registered
                s.registered = None
                s.table[69] = 0
                reply = status(s.write(addr, data, now))
            else:
                reply = status(0)
        elif inst == P.REBOOT:
            s._pending_reboot = True
            reply = status(0)
        elif inst == P.FACTORY_RESET:
            if len(prm) != 1 or prm[0] not in (0x01, 0x02, 0xFF):
                reply = status(P.ERR_DATA_RANGE)
            elif s.torque_on:
                reply = status(P.ERR_ACCESS)
            else:
                reply = status(0)
                s.factory_reset(prm[0])
        elif inst == P.CLEAR:
            if len(prm) != 5 or prm[1:] != b'DXL"' or prm[0] not in (0x01, 0x02):
                reply = status(P.ERR_DATA_RANGE)
            elif prm[0] == 0x01:
                if abs(s.velocity_rad_s) > 1e-3:
                    reply = status(P.ERR_RESULT_FAIL)
                else:
                    s.position_rad = math.remainder(s.position_rad, 2 * math.pi)
                    reply = status(0)
            else:
                s.table[ADDR_HW_ERROR] = 0
                reply = status(0)
        else:
            reply = status(P.ERR_INSTRUCTION)
        return reply if level >= 2 else None

    def _group(self, inst, prm, by_id, now, emit):
        if inst in (P.SYNC_READ, P.FAST_SYNC_READ, P.SYNC_WRITE):
            if len(prm) < 4:
                return
            addr, length = prm[0] | prm[1] << 8, prm[2] | prm[3] << 8
            if inst == P.SYNC_WRITE:
                step = 1 + length
                for k in range(4, len(prm) - step + 1, step):
                    s = by_id.get(prm[k])
                    if s is not None:
                        s.last_instruction_t = now
                        if self.answers(s, now):
                            s.write(addr, prm[k + 1:k + 1 + length], now)
                return
            items = [(sid, addr, length) for sid in prm[4:]]
        elif inst == P.BULK_WRITE:
            k = 0
            while k + 5 <= len(prm):
                sid, addr, length = prm[k], prm[k + 1] | prm[k + 2] << 8, prm[k + 3] | prm[k + 4] << 8
                s = by_id.get(sid)
                if s is not None:
                    s.last_instruction_t = now
                    if self.answers(s, now):
                        s.write(addr, prm[k + 5:k + 5 + length], now)
                k += 5 + length
            return
        else:
            items = [(prm[k], prm[k + 1] | prm[k + 2] << 8, prm[k + 3] | prm[k + 4] << 8)
                     for k in range(0, len(prm) - 4, 5)]
        fast = inst in (P.FAST_SYNC_READ, P.FAST_BULK_READ)
        blocks = []
        first = None
        for sid, addr, length in items:
            s = by_id.get(sid)
            if s is None or not self.answers(s, now) or s.table[68] < 1:
                if fast:
                    break           # the chain of blocks stops at the first servo that does not answer
                continue
            s.last_instruction_t = now
            if fast and (s.model.fast_sync_read_min_firmware is None
                         or s.table[6] < s.model.fast_sync_read_min_firmware):
                break               # firmware without fast read ignores the instruction
            err, data = s.read(addr, length, now)
            if fast:
                if self.faults.drop_rate and self.rng.random() < self.faults.drop_rate:
                    self.counters['dropped'] += 1
                    break
                first = first or s
                blocks.append((err | s.alert, s.id, data if not err else bytes(length)))
            else:
                emit(s, P.build_status(s.id, err | s.alert, data))
        if blocks:
            emit(first, P.build_fast_status(blocks), droppable=False)

    # -------------------------------------------------------------- control channel
    def command(self, line: str) -> dict:
        """Run one control-channel command; return its JSON-able answer."""
        words = line.split()
        if not words:
            return {}
        cmd, args = words[0], words[1:]
        now = time.monotonic()
        try:
            if cmd == 'state':
                out = {}
                for i, s in self.servos.items():
                    s.refresh_present(now)
                    out[str(i)] = {'torque': s.torque_on, 'goal': s.get('goal_position'),
                                   'position': s.get('present_position'), 'hw_error': s.table[ADDR_HW_ERROR],
                                   'return_delay': s.table[9], 'status_return_level': s.table[68],
                                   'min_limit': s.get('min_position_limit'),
                                   'max_limit': s.get('max_position_limit'),
                                   'goal_writes': s.goal_stats[0], 'goal_min': s.goal_stats[1],
                                   'goal_max': s.goal_stats[2], 'goal_refused': s.goal_stats[3],
                                   'temperature': s.temperature_c, 'watchdog': s.get('bus_watchdog')}
                return {'servos': out, 'counters': self.counters, 'plugged': self.master >= 0}
            if cmd == 'goals':
                return {'goals': sorted([round(t - self.t0, 6), s.id, g, ok]
                                        for s in self.servos.values() for t, g, ok in s.goal_log)}
            if cmd == 'silent':
                self.silence(int(args[0]), float(args[1]) if len(args) > 1 else math.inf)
            elif cmd == 'trip':
                self.servos[int(args[0])].trip(P.HW_OVERLOAD if args[1] == 'overload' else P.HW_OVERHEATING)
            elif cmd == 'unplug':
                self.unplug(float(args[0]) if args else 1.0)
            elif cmd == 'corrupt':
                self.set_corrupt_rate(_rate(args[0]))
            elif cmd == 'drop':
                self.faults.drop_rate = _rate(args[0])
            elif cmd == 'set':
                self.servos[int(args[0])].set(args[1], int(args[2]))
            elif cmd == 'stall':
                self.stalled_until = time.monotonic() + float(args[0] if args else 1.0)
            else:
                return {'error': f'unknown command {cmd!r}'}
            return {'ok': cmd}
        except (IndexError, KeyError, ValueError) as exc:
            return {'error': f'{line.strip()!r}: {exc!r}'}

    # -------------------------------------------------------------- loop
    def _write(self, data: bytes):
        data = self._corrupt(data)
        deadline = None
        while data:
            try:
                data = data[os.write(self.master, data):]
                continue
            except BlockingIOError:
                # The driver's side is full (it stopped reading): wait a little, then the rest is lost
                # (as on a real bus, where nobody listening loses the bytes).
                now = time.monotonic()
                deadline = deadline or now + 0.05
                if now >= deadline:
                    return
                try:
                    select.select([], [self.master], [], deadline - now)
                except (OSError, ValueError):
                    return
            except OSError:
                return
        self.counters['replies'] += 1

    def poll(self, timeout_s: float, extra_fds=()) -> list[int]:
        """Wait up to timeout_s for bytes; answer every complete packet. Returns ready extra fds."""
        stalled = time.monotonic() < self.stalled_until
        fds = list(extra_fds) + ([self.master] if self.master >= 0 and not stalled else [])
        try:
            ready, _, _ = select.select(fds, [], [], timeout_s)
        except InterruptedError:
            ready = []
        now = time.monotonic()
        self.tick(now)
        if self.master >= 0 and self.master in ready and not stalled:
            try:
                data = os.read(self.master, 65536)
            except (BlockingIOError, OSError):
                data = b''
            if data:
                data = self._corrupt(data)
                # FF FF FD 00 only ever starts a packet (stuffing keeps it out of bodies): when new bytes
                # begin with it, what still waits in the buffer was a garbled packet (say, a corrupted
                # LEN) and must not swallow this one.
                if self.parser.buffer and data.startswith(P.HEADER):
                    self.parser.buffer.clear()
                self._serve(data, now)
        return [fd for fd in ready if fd in extra_fds]

    def _serve(self, data: bytes, now: float):
        baud = self.port_baud() or 0
        packets = self.parser.feed(data)
        for pkt in packets:
            if not baud:
                continue
            for t_end, raw in self.handle(pkt, now, baud):
                # Sleep (never spin: the driver under test needs the CPU) until the reply's last byte
                # would have left; a reply may leave late, never early.
                wait = t_end - time.monotonic()
                while wait > 0:
                    time.sleep(wait)
                    wait = t_end - time.monotonic()
                self._write(raw)

    def serve_forever(self, control_in=None, control_out=None):
        """Run until stop_requested; read control commands from the control_in text stream if given."""
        cfd = control_in.fileno() if control_in is not None else None
        buf = b''
        while not self.stop_requested:
            ready = self.poll(0.005, [cfd] if cfd is not None else [])
            if ready:
                chunk = os.read(cfd, 4096)
                if not chunk:
                    cfd = None
                    continue
                buf += chunk
                while b'\n' in buf:
                    line, buf = buf.split(b'\n', 1)
                    answer = self.command(line.decode(errors='replace'))
                    if control_out is not None and answer:
                        control_out.write(json.dumps(answer) + '\n')
                        control_out.flush()


def run(ids, models, baud, faults=None, physics='motor', link=None, firmware=46, return_delay=250,
        initial_rad=None, robot=None, out=sys.stdout) -> int:
    """Process entry of `snake sim-bus`: print the device path, serve until SIGINT/SIGTERM."""
    plant = make_plant(physics, list(ids), models if isinstance(models, dict) else {i: models for i in ids},
                       robot)
    bus = BusEmulator(ids, models, baud, faults, plant, link, firmware, return_delay, initial_rad, robot)

    def stop(signum, frame):
        bus.stop_requested = True
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    # Replies are timed to the microsecond: no cycle-collector pauses (the emulator makes no cycles).
    gc.collect()
    gc.freeze()
    gc.disable()
    out.write(bus.path + '\n')
    out.flush()
    print(f'sim-bus: {len(bus.servos)} servo(s) at {baud} baud on {bus.path} -> {os.ttyname(bus.slave)}; '
          f'Ctrl-C to stop', file=sys.stderr, flush=True)
    try:
        bus.serve_forever(sys.stdin if not sys.stdin.isatty() else None, out)
    finally:
        bus.close()
    return 0
