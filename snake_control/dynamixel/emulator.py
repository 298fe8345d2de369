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

The emulator's own work stays off that timeline as far as it can: a packet's replies are made one at
a time as they go out, and a mechanics step that comes due is run between requests, not in front of one
(BusEmulator.poll), so a reply leaves within the scheduler's wake-up of its modelled time.

Timing also counts what is not a packet: junk bytes occupy the wire like any others, and a packet
whose bytes arrive more than BYTE_TIMEOUT_S apart is discarded, as the servo firmware drops a packet
that stops arriving.

The servos themselves (control tables and the e-Manual's rules for them) are snake_control.dynamixel.
servo; framing is snake_control.dynamixel.protocol; the control channel (commands on stdin) is
snake_control.dynamixel.control; the process entry is snake_control.dynamixel.simbus.

Mechanics come from a Plant (snake_control.dynamixel.plant); the default MotorModel follows the goals
within the profile limits. Temperature rises with current; overload and overheating trip.

Faults (snake_control.dynamixel.faults.FaultSpec, from ``--faults`` or the control channel): corrupted
bytes at a rate in both directions, dropped replies at a rate, a share of requests answered late (whole
replies, after a delay in which the emulator reads nothing, as a host busy elsewhere), a servo that stops answering from a time
for a while, an overload/overheating trip, the adapter unplugged and plugged back (the pty closes; a
new one appears behind the same symlink).

Mechanics in their own thread: a plant whose ``threaded`` attribute is true (the MuJoCo world: its steps
release the interpreter lock) is stepped by a thread of its own at MECHANICS_STEP_S, and the serving loop
only takes its latest state. Stepping a physics world in the serving loop would delay every reply behind
a physics step (milliseconds on a loaded host), beyond the wire time and the driver's timeouts.

Several buses, one robot: a robot whose chain is split over several adapters is one body, so one plant
moves all its servos (a MuJoCo world couples every joint). ``SharedMechanics`` owns that plant and
steps it in its own thread with the goals of every bus; each BusEmulator (one pty each, served in a
thread of its own so the buses' wire times overlap as on real adapters) takes its servos' state.
"""
from __future__ import annotations

import fcntl
import math
import os
import random
import select
import shutil
import struct
import sys
import tempfile
import termios
import threading
import time
import tty

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.control import answer_lines, command
from snake_control.dynamixel.faults import FaultSpec
from snake_control.dynamixel.models import (
    BAUD_BY_REGISTER, REGISTER_BY_BAUD, RETURN_DELAY_UNIT_S, SUPPORTED_BAUDS, ServoModel)
from snake_control.dynamixel.plant import MotorModel, Plant
from snake_control.dynamixel.realtime import precise_sleeps
from snake_control.dynamixel.servo import ADDR_GOAL, ADDR_HW_ERROR, Servo

# The Dynamixel rates Linux names with a termios constant; others (4.5 Mbit/s) are read via termios2.
_TERMIOS_BAUD = {getattr(termios, f'B{b}'): b for b in SUPPORTED_BAUDS if hasattr(termios, f'B{b}')}
_TCGETS2 = 0x802C542A           # Linux ioctl: read struct termios2 (custom baud rates)
# Present values come from the last mechanics step, as from a servo's own sampling: less than this old
# as a rule, less than twice this when a request found a step due (see BusEmulator.poll).
MECHANICS_STEP_S = 0.002
# A packet whose next byte comes later than this after the previous one is dropped. The e-Manual gives
# no figure; servos drop a stalled packet well within the time of the next instruction, and a host
# writes a packet in one go, so any gap this long means the packet was cut.
BYTE_TIMEOUT_S = 0.01
# While bytes came within this long, the serving loop wakes for each mechanics step (see poll); an
# idle bus wakes only at the caller's poll timeout.
DRIVER_ACTIVE_S = 0.1
# From this firmware on, X-series servos ignore a broadcast Factory Reset with option 0xFF (Reset All).
FACTORY_RESET_ALL_BROADCAST_IGNORED_FROM = 42
_GROUP_INSTRUCTIONS = frozenset((P.SYNC_READ, P.SYNC_WRITE, P.FAST_SYNC_READ, P.BULK_READ, P.BULK_WRITE,
                                 P.FAST_BULK_READ))


# -------------------------------------------------------------------------------------------- bus
class SharedMechanics:
    """One plant behind the servos of several BusEmulators, stepped every MECHANICS_STEP_S in a thread
    of its own: ``SharedMechanics(plant)``, pass it to each BusEmulator, then ``start()``."""

    def __init__(self, plant: Plant | None = None):
        self.plant = plant or MotorModel()
        self.servos: dict[int, Servo] = {}
        self.lock = threading.Lock()
        self.state: dict = {}
        self.version = 0
        self.stop_requested = False
        self.thread = None

    def add(self, servos: dict) -> None:
        self.servos.update(servos)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name='mechanics', daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop_requested = True
        if self.thread is not None:
            self.thread.join(timeout=2.0)

    def take(self, seen: int) -> tuple[int, dict | None]:
        """(version, state) when newer than ``seen``, else (seen, None)."""
        with self.lock:
            return (self.version, self.state) if self.version != seen else (seen, None)

    def _loop(self) -> None:
        def publish(state):
            with self.lock:
                self.state = state
                self.version += 1
        step_plant_forever(self.plant, lambda: plant_inputs(list(self.servos.items())), publish,
                           lambda: self.stop_requested)


def plant_inputs(servos) -> tuple[dict, dict, list]:
    """(goals rad, torque on, profile changes) of (id, Servo) pairs, consuming their profile changes."""
    goals, torque, profiles = {}, {}, []
    for i, s in servos:
        if s.profile_changed:
            s.profile_changed = False
            profiles.append((i, s.profile()))
        goals[i] = s.goal_rad()
        torque[i] = s.torque_on
    return goals, torque, profiles


def step_plant_forever(plant, inputs, publish, stopped) -> None:
    """Step a plant every MECHANICS_STEP_S of wall time until stopped(): inputs() gives (goals, torque,
    profile changes), publish(state) takes each step's result. The step runs outside any lock, so
    serving a packet never waits for physics."""
    last = time.monotonic()
    next_t = last
    while not stopped():
        next_t += MECHANICS_STEP_S
        goals, torque, profiles = inputs()
        for i, prof in profiles:
            plant.set_profile(i, *prof)
        now = time.monotonic()
        try:
            state = plant.step(now - last, goals, torque)
        except Exception as exc:          # a broken world must not look like frozen servos silently
            print(f'sim-bus: physics step failed, mechanics stopped: {exc!r}', file=sys.stderr, flush=True)
            return
        last = now
        publish(state)
        wait = next_t - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            next_t = time.monotonic()       # behind (slow host): never step in bursts to catch up


class BusEmulator:
    """Servos on one pty; call serve_forever() (or run in a thread) and open ``path`` with the SDK."""

    def __init__(self, ids, models, baud: int = 1_000_000, faults: FaultSpec | None = None,
                 plant: Plant | None = None, link: str | None = None, firmware: int = 46,
                 return_delay: int = 250, initial_rad=None, mechanics: SharedMechanics | None = None):
        if isinstance(models, ServoModel):
            models = {i: models for i in ids}
        if baud not in REGISTER_BY_BAUD:
            raise ValueError(f'baud {baud} is not a Dynamixel baud rate ({sorted(REGISTER_BY_BAUD)})')
        self.faults = faults or FaultSpec()
        self.rng = random.Random(self.faults.seed)
        self.servos: dict[int, Servo] = {}
        for i in ids:
            self.servos[i] = Servo(i, models[i], REGISTER_BY_BAUD[baud], firmware, return_delay)
        self.mechanics = mechanics
        self._mech_seen = -1
        self.plant = mechanics.plant if mechanics is not None else (plant or MotorModel())
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
        self._step_cost_s = 0.001       # running mean of a mechanics step's duration (starts cautious)
        self.stalled_until = 0.0        # monotonic time until which the wire is not read (`stall`)
        self._by_id: dict[int, Servo] = {}     # ID -> servo at _by_id_baud (see _servo_finder)
        self._by_id_baud = None
        self._mech_lock = threading.Lock()
        self._mech_state = None         # latest {id: (q, v, i)} of a threaded plant
        self._mech_thread = None
        if mechanics is not None:
            mechanics.add(self.servos)
        elif getattr(self.plant, 'threaded', False):
            self._mech_thread = threading.Thread(target=self._mechanics_loop, name='mechanics', daemon=True)
            self._mech_thread.start()
        self.counters = {'packets': 0, 'crc_errors': 0, 'replies': 0, 'dropped': 0, 'corrupted_bytes': 0,
                         'junk_bytes': 0, 'late': 0}
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
        if not self._silent_abs:            # the usual case: no silence scheduled
            return True
        window = self._silent_abs.get(s.table[7])
        return not (window and window[0] <= now < window[1])

    # -------------------------------------------------------------- time
    def tick(self, now: float, watch: bool = True):
        """Advance mechanics and scheduled faults to ``now`` (``watch``: and the bus watchdogs)."""
        self._advance_schedule(now)
        self._step(now, watch)

    def _advance_schedule(self, now: float) -> None:
        """Scheduled trips, unplugs and replugs up to ``now`` (cheap: done before any byte is served, so
        they happen at their time whatever the mechanics' pace)."""
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

    def _step(self, now: float, watch: bool) -> None:
        """The mechanics and the servos' own checks (temperature, overload, ``watch``: the bus
        watchdog) up to ``now``, once a mechanics step is due."""
        dt = now - self.last_tick
        if dt < MECHANICS_STEP_S:
            return                  # the mechanics advance in steps of at least 2 ms (cheap enough per cycle)
        self.last_tick = now
        t0 = time.monotonic()
        try:
            self._advance_mechanics(now, dt, watch)
        finally:
            self._step_cost_s += 0.1 * (time.monotonic() - t0 - self._step_cost_s)

    def _advance_mechanics(self, now: float, dt: float, watch: bool) -> None:
        if self.mechanics is not None:
            self._mech_seen, state = self.mechanics.take(self._mech_seen)
            if state:
                self._apply_state(state)
            for s in self.servos.values():
                s.tick(now, dt, watch)
            return
        if self._mech_thread is not None:
            with self._mech_lock:
                state, self._mech_state = self._mech_state, None
            if state:
                self._apply_state(state)
            for s in self.servos.values():
                s.tick(now, dt, watch)
            return
        goals, torque = {}, {}
        for i, s in self.servos.items():
            if s.profile_changed:
                self.plant.set_profile(i, *s.profile())
                s.profile_changed = False
            goals[i] = s.goal_rad()
            torque[i] = s.torque_on
        self._apply_state(self.plant.step(dt, goals, torque))
        for s in self.servos.values():
            s.tick(now, dt, watch)

    def _apply_state(self, state: dict) -> None:
        for i, (q, v, c) in state.items():
            s = self.servos.get(i)
            if s is not None:
                s.position_rad, s.velocity_rad_s, s.current_a = q, v, c

    def _mechanics_loop(self) -> None:
        """Step a threaded plant every MECHANICS_STEP_S of wall time, apart from the serving loop.

        Goals, torque and profile changes are taken under the lock (the serving loop writes them);
        the step itself runs outside it, so serving a packet never waits for physics."""
        def inputs():
            with self._mech_lock:
                return plant_inputs(self.servos.items())

        def publish(state):
            with self._mech_lock:
                self._mech_state = state
        step_plant_forever(self.plant, inputs, publish, lambda: self.stop_requested)

    # -------------------------------------------------------------- instructions
    def handle(self, pkt: P.Packet, now: float, baud: int) -> list[tuple[float, bytes]]:
        """Replies to one packet as (wire_end_time, bytes) in order; updates bus_free_at."""
        return list(self.replies(pkt, now, baud))

    def replies(self, pkt: P.Packet, now: float, baud: int):
        """handle() as an iterator: each reply is made when the previous one has been taken, so the
        serving loop sends the first reply of a sync read when its wire time is up, not after all 32
        are made. Their content is as of ``now`` either way (nothing else runs in between), and
        bus_free_at is set once the last one has been taken. A late request (the ``late`` fault) is
        decided after all its replies, as before: then they are made at once."""
        gen = self._replies(pkt, now, baud)
        if not self.faults.late_rate:
            return gen
        replies = list(gen)
        if replies and self.rng.random() < self.faults.late_rate:
            self.counters['late'] += 1
            late_s = self.faults.late_ms / 1000.0
            replies = [(t + late_s, raw) for t, raw in replies]
            self.bus_free_at += late_s
        return replies

    def _servo_finder(self, baud: int):
        """find(id) -> the Servo with that ID hearing ``baud`` (None: none). The ID map is kept between
        packets and checked on each use (ID and Baud Rate registers change by writes, resets, backups,
        the control channel): a miss or a mismatch rebuilds it."""
        def rebuild():
            self._by_id = {s.table[7]: s for s in self.servos.values()      # 7: ID, 8: Baud Rate
                           if BAUD_BY_REGISTER.get(s.table[8]) == baud}
            self._by_id_baud = baud
            return self._by_id
        if self._by_id_baud != baud:
            rebuild()

        def find(sid: int):
            s = self._by_id.get(sid)
            if s is not None and s.table[7] == sid and BAUD_BY_REGISTER.get(s.table[8]) == baud:
                return s
            return rebuild().get(sid)
        return find, rebuild

    def _replies(self, pkt: P.Packet, now: float, baud: int):
        byte_s = 10.0 / baud
        clock = max(now, self.bus_free_at) + pkt.size * byte_s
        self.counters['packets'] += 1
        find, all_at_baud = self._servo_finder(baud)

        def emit(s: Servo, data: bytes, droppable: bool = True):
            """(wire end, bytes) of a reply, None when the line drops it (it took the wire all the same)."""
            nonlocal clock
            clock += s.table[9] * RETURN_DELAY_UNIT_S + len(data) * byte_s
            if droppable and self.faults.drop_rate and self.rng.random() < self.faults.drop_rate:
                self.counters['dropped'] += 1
                return None
            return clock, data

        try:
            if not pkt.crc_ok:
                self.counters['crc_errors'] += 1
                s = find(pkt.servo_id)
                if s is not None and self.answers(s, now) and s.table[68] == 2:
                    r = emit(s, P.build_status(s.id, P.ERR_CRC | s.alert))
                    if r:
                        yield r
                return
            inst, prm, target = pkt.instruction, pkt.params, pkt.servo_id
            bcast = target == P.BROADCAST_ID
            if inst in _GROUP_INSTRUCTIONS:
                if bcast:
                    for r in self._group(inst, prm, find, now, emit):
                        if r:
                            yield r
                return
            if bcast:
                addressed = list(all_at_baud().values())
            else:
                s = find(target)
                addressed = [s] if s is not None else []
            for s in addressed:
                s.last_instruction_t = now
                if not self.answers(s, now):
                    continue
                reply = self._single(s, inst, prm, now, bcast)
                if reply is not None and not (bcast and inst != P.PING):
                    r = emit(s, reply)
                    if r:
                        yield r
            for s in addressed:
                if s.pending_reboot:
                    s.pending_reboot = False
                    s.reboot(now)
        finally:
            self.bus_free_at = clock

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
                reply = status(P.ERR_INSTRUCTION)      # e-Manual: Action used without Reg Write
        elif inst == P.REBOOT:
            s.pending_reboot = True
            reply = status(0)
        elif inst == P.FACTORY_RESET:
            if len(prm) != 1 or prm[0] not in (0x01, 0x02, 0xFF):
                reply = status(P.ERR_DATA_RANGE)
            elif bcast and prm[0] == 0xFF and s.table[6] >= FACTORY_RESET_ALL_BROADCAST_IGNORED_FROM:
                return None         # e-Manual safety feature: a broadcast Reset All is not executed
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
        elif inst == P.BACKUP and s.table[6] >= (s.model.fast_sync_read_min_firmware or 256):
            # Control Table Backup: the same firmware generations that brought fast sync read.
            if len(prm) != 5 or prm[1:] != P.BACKUP_KEY or prm[0] not in (0x01, 0x02):
                reply = status(P.ERR_DATA_RANGE)
            elif s.torque_on or (prm[0] == 0x02 and s.backup is None):
                reply = status(P.ERR_RESULT_FAIL)
            elif prm[0] == 0x01:
                s.store_backup()
                reply = status(0)
            else:
                s.restore_backup()
                s.pending_reboot = True         # the e-Manual: the servo reboots after restoring
                reply = status(0)
        else:
            reply = status(P.ERR_INSTRUCTION)
        return reply if level >= 2 else None

    def _group(self, inst, prm, find, now, emit):
        """The replies of a group instruction, one at a time (None for one the line dropped)."""
        if inst in (P.SYNC_READ, P.FAST_SYNC_READ, P.SYNC_WRITE):
            if len(prm) < 4:
                return
            addr, length = prm[0] | prm[1] << 8, prm[2] | prm[3] << 8
            if inst == P.SYNC_WRITE:
                step = 1 + length
                for k in range(4, len(prm) - step + 1, step):
                    s = find(prm[k])
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
                s = find(sid)
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
            s = find(sid)
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
                yield emit(s, P.build_status(s.id, err | s.alert, data))
        if blocks:
            yield emit(first, P.build_fast_status(blocks), droppable=False)

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
        """Wait up to timeout_s for bytes; answer every complete packet. Returns ready extra fds.

        Order: bytes waiting are served before a mechanics step that can wait. A step costs a sizeable
        fraction of a millisecond (every servo's plant and checks): run in front of a request, it would
        delay the reply beyond the wire time, which a real servo (return delay 0: microseconds) never
        does. So while a driver talks, the loop wakes when a step comes due, to run it between requests.
        A request that finds one due anyway: when the wire time of the bytes just read covers the step
        (twice its running mean), the step goes first, hidden in that wire time; otherwise the request
        is answered from the last step's state (less than two steps old) and the step follows as of the
        moment those bytes were read. Scheduled faults (trips, unplugs) are applied before any byte is
        served, at their time."""
        now = time.monotonic()
        stalled = now < self.stalled_until
        if now - self._last_rx < DRIVER_ACTIVE_S:
            timeout_s = max(0.0, min(timeout_s, self.last_tick + MECHANICS_STEP_S - now))
        fds = list(extra_fds) + ([self.master] if self.master >= 0 and not stalled else [])
        try:
            ready, _, _ = select.select(fds, [], [], timeout_s)
        except InterruptedError:
            ready = []
        now = time.monotonic()
        waiting = self.master >= 0 and self.master in ready and not stalled
        self._advance_schedule(now)
        waiting = waiting and self.master >= 0          # an unplug just now: nothing to read
        # A step more than one step overdue (the emulator itself was kept from running) goes first, so
        # no reply reports state older than two steps.
        step_after = waiting and now - self.last_tick < 2 * MECHANICS_STEP_S
        due = now - self.last_tick >= MECHANICS_STEP_S      # the servos' checks run at the mechanics' pace
        if not step_after:
            # Bytes already waiting reached the servos before now: an emulator that was itself kept
            # from running must serve them before a watchdog judges the silence (a real servo is never
            # late).
            self._step(now, watch=not waiting)
        if waiting:
            try:
                data = os.read(self.master, 65536)
            except (BlockingIOError, OSError):
                data = b''
            if data:
                data = self._corrupt(data)
                # FF FF FD 00 only ever starts a packet (stuffing keeps it out of bodies): when new bytes
                # begin with it, what still waits in the buffer was a garbled packet (say, a corrupted
                # LEN) and must not swallow this one. A packet whose bytes stopped coming is dropped.
                cut = bool(self.parser.buffer) and (data.startswith(P.HEADER)
                                                    or now - self._last_rx > BYTE_TIMEOUT_S)
                self._last_rx = now
                baud = self.port_baud() or 0
                if step_after and due and baud and len(data) * 10.0 / baud >= 2.0 * self._step_cost_s:
                    # These requests' own wire time hides the step (say, a cycle's goal writes and its
                    # read): it goes first, as before any reply is due, and the state is fresher.
                    self._step(now, watch=False)
                    step_after = False
                self._serve(data, now, cut, baud)
            if step_after:
                # As of `now`: every byte that had arrived by then has been served, so the watchdog
                # judges only real silence.
                self._step(now, watch=True)
            elif due:
                for s in self.servos.values():
                    s.watch_bus(now)
        return [fd for fd in ready if fd in extra_fds]

    def _serve(self, data: bytes, now: float, cut: bool = False, baud: int | None = None):
        baud = (self.port_baud() or 0) if baud is None else baud
        discarded = self.parser.discarded
        if cut:
            self.parser.discard_partial()
        packets = self.parser.feed(data)
        junk = self.parser.discarded - discarded
        if junk and baud:
            # Bytes that make no packet still occupied the wire (10 bits each), delaying what follows.
            self.bus_free_at = max(now, self.bus_free_at) + junk * 10.0 / baud
            self.counters['junk_bytes'] += junk
        for pkt in packets:
            if not baud:
                continue
            for t_end, raw in self.replies(pkt, now, baud):
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
        precise_sleeps()
        while not self.stop_requested:
            ready = self.poll(0.005, [cfd] if cfd is not None else [])
            if ready:
                chunk = os.read(cfd, 4096)
                if not chunk:
                    cfd = None
                    continue
                buf = answer_lines(buf, chunk, lambda line: command(self, line), control_out)


