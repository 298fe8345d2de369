"""A robot on several buses with one process per bus: the buses' Python work runs on separate cores.

With one thread per bus (multibus.MultiBusDriver) both bus threads share one interpreter lock, so two
buses reached only 1.2x the one-bus cycle rate: the driver's Python work per cycle, not the wire, was
the limit. Here each bus's Driver runs in a child process of its own (multiprocessing 'spawn': the
parent holds DDS threads, which a fork would copy half-alive), behind the API of MultiBusDriver.

What crosses between the processes, per bus:

- shared memory (one block of doubles, written by the child's bus thread at the end of each cycle under
  a sequence counter): the joint state, the cycle count, the bus's mode and its own fault policy; two
  small text blocks hold its reasons and its fault reasons. Each child reads its peers' blocks at the
  start of each cycle for the peer fault (safety.decide's peer_policy), with no round trip through the
  parent, so a fault on one bus reaches the others within one cycle;
- a wake-up pipe (child to parent, non-blocking on the child's side: a stalled parent never stalls a bus
  loop): one byte per cycle tells the parent's reader thread to merge; its end of file is the child's
  death, which marks the bus fatal in shared memory (every peer goes to torque_off) and makes the parent
  turn that bus's torque off itself, through the port the dead child released;
- a control pipe (parent to child, fire and forget): commands, estop, reset, live config changes; and
  the requests that need an answer (diagnostics, stop). Its end of file is the parent's death: the child
  turns its servos' torque off, confirmed and logged, and exits.

The child ignores SIGINT and SIGHUP (Ctrl-C or a closed terminal reach the whole process group): the
parent decides when to stop, and its stop collects every bus's torque-off confirmation. SIGTERM to a
child alone stops that bus (torque off), which its peers see as a fatal bus.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import types

import numpy as np

from snake_control.dynamixel.busgroup import BusGroup
from snake_control.dynamixel.driver_config import DriverConfig, StartupError, command_velocities
from snake_control.dynamixel.readings import DriverDiagnostics, JointStateSnapshot

log = logging.getLogger(__name__)

MODES = ('stopped', 'running', 'hold', 'torque_off', 'disconnected', 'fatal')
POLICY_CODES = (None, 'hold', 'torque_off')
TEXT_BYTES = 2048            # each bus's reasons (and fault reasons): enough for 32 servos' stale names
_HEAD = 6                    # seq, (unused: stamps live in the ring), cycles, mode code, own fault
                             # policy code, grid slot
RING = 32                    # cycles each bus keeps in shared memory, so a parent that falls behind for
                             # up to this many cycles still publishes every one of them
STATUS_EVERY_S = 0.02        # the child's main thread refreshes mode and reasons this often (a bus loop
                             # that ended or a closed port publishes no more cycles)
START_TIMEOUT_S = 120.0      # a child imports numpy and the SDK, then checks every servo


class _Shared:
    """One bus's shared block: state and status written by its child, read by the parent and the peers."""

    def __init__(self, n: int, block, reasons, fault_reasons):
        self.n = n
        self.block, self.reasons_buf, self.fault_buf = block, reasons, fault_reasons
        self.a = np.frombuffer(block, dtype=np.float64)
        self._texts = {}

    @classmethod
    def create(cls, ctx, n: int) -> '_Shared':
        return cls(n, ctx.RawArray(ctypes.c_double, _HEAD + RING * (2 + 5 * n)),
                   ctx.RawArray(ctypes.c_char, TEXT_BYTES), ctx.RawArray(ctypes.c_char, TEXT_BYTES))

    def __reduce__(self):
        return _Shared, (self.n, self.block, self.reasons_buf, self.fault_buf)

    # written by the child
    # Each cycle's entry in the ring, at cycles % RING: stamp, grid slot, then position, velocity, effort,
    # current and fresh of the n servos.
    def _entry(self, a: np.ndarray, cycles: int) -> np.ndarray:
        width = 2 + 5 * self.n
        start = _HEAD + (cycles % RING) * width
        return a[start:start + width]

    def write_state(self, snap: JointStateSnapshot, cycles: int, slot: int):
        a, n = self.a, self.n
        a[0] += 1                                   # odd: being written
        a[2], a[5] = cycles, slot
        e = self._entry(a, cycles)
        e[0], e[1] = snap.stamp_s, slot
        e[2:2 + n] = snap.position_rad
        e[2 + n:2 + 2 * n] = snap.velocity_rad_s
        e[2 + 2 * n:2 + 3 * n] = snap.effort
        e[2 + 3 * n:2 + 4 * n] = snap.current_a
        e[2 + 4 * n:2 + 5 * n] = snap.fresh
        a[0] += 1

    def write_status(self, mode: str, policy: str | None, reasons, fault_reasons):
        self._write_text('reasons', self.reasons_buf, reasons)
        self._write_text('fault', self.fault_buf, fault_reasons)
        self.a[4] = POLICY_CODES.index(policy)
        self.a[3] = MODES.index(mode)               # last: a peer seeing the mode finds its reasons there

    def _write_text(self, key, buf, lines):
        lines = tuple(lines)
        if self._texts.get(key) != lines:           # most cycles change nothing: no encoding
            self._texts[key] = lines
            data = '\n'.join(lines).encode()[:TEXT_BYTES - 1]
            buf[:len(data) + 1] = data + b'\0'

    # read by anyone
    @property
    def mode(self) -> str:
        return MODES[int(self.a[3])]

    @property
    def policy(self) -> str | None:
        return POLICY_CODES[int(self.a[4])]

    @property
    def cycles(self) -> int:
        return int(self.a[2])

    @property
    def slot(self) -> int:
        return int(self.a[5])

    def reasons(self) -> list[str]:
        return self._read_text(self.reasons_buf)

    def fault_reasons(self) -> list[str]:
        return self._read_text(self.fault_buf)

    @staticmethod
    def _read_text(buf) -> list[str]:
        text = bytes(buf.value).decode(errors='replace')
        return text.split('\n') if text else []

    def _copy(self) -> np.ndarray | None:
        """A consistent copy of the block (retried while the child writes it); None before its first
        cycle."""
        a = self.a
        for _ in range(100):
            seq = a[0]
            if seq % 2:
                time.sleep(0)
                continue
            copy = a.copy()
            if a[0] == seq:
                return copy if copy[0] != 0 else None
        return None

    def _reading(self, e: np.ndarray, names) -> JointStateSnapshot:
        n = self.n
        part = lambda k: e[2 + k * n:2 + (k + 1) * n]  # noqa: E731
        return JointStateSnapshot(float(e[0]), list(names), part(0), part(1), part(2), part(4) > 0.5, part(3))

    def read_slots(self, names, first: int, last: int) -> dict[int, JointStateSnapshot]:
        """This bus's readings of grid slots first..last still in the ring, by slot."""
        copy = self._copy()
        if copy is None:
            return {}
        cycles, out = int(copy[2]), {}
        for c in range(max(1, cycles - RING + 1), cycles + 1):
            e = self._entry(copy, c)
            if first <= int(e[1]) <= last:
                out[int(e[1])] = self._reading(e, names)
        return out


def peer_fault(shared: list[_Shared], ports: list[str], k: int) -> tuple[str | None, tuple]:
    """The worst fault of the buses other than k: ('torque_off' | 'hold' | None, reasons), as
    multibus.MultiBusDriver._peer_fault, from the shared blocks."""
    policy, reasons = None, []
    for j, s in enumerate(shared):
        if j == k:
            continue
        mode = s.mode
        if mode == 'fatal':
            p, why = 'torque_off', s.reasons() or ['loop ended']
        elif mode == 'disconnected':
            p, why = 'hold', s.reasons()
        else:
            p = s.policy
            if p is None:
                continue
            why = s.fault_reasons()
        policy = 'torque_off' if 'torque_off' in (p, policy) else 'hold'
        reasons += [f'bus {ports[j]}: {r}' for r in why]
    return policy, tuple(reasons)


# ==================================================================== the child
def _child_main(k, robot, config, ports, shared, conn, wake, epoch, thread_setup):
    """One bus's process: its Driver, fed by the control pipe, publishing through shared memory."""
    from snake_control.dynamixel.driver import Driver
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    term = threading.Event()
    termed = []

    def on_term(*_):
        # Once only: a second SIGTERM inside term.set() would wait on the lock the first one holds.
        if not termed:
            termed.append(True)
            term.set()
    signal.signal(signal.SIGTERM, on_term)
    logging.basicConfig(level=logging.INFO, format=f'[bus {ports[k]}] %(levelname)s %(message)s')
    me = shared[k]
    d = Driver(robot, config=config)
    d.cycle_epoch = epoch
    d.thread_setup = thread_setup
    d.peer_fault = lambda: peer_fault(shared, ports, k)
    wake_fd = wake.fileno()
    os.set_blocking(wake_fd, False)

    def status():
        me.write_status(d.mode, d.fault_policy, d.reasons, d.fault_reasons)

    def on_state(snap):
        # The cycle's slot on the shared time grid: the parent merges once per slot every bus has read.
        slot = round((d._cycle_starts[-1] - epoch) / d.period_s) if d._cycle_starts else 0
        me.write_state(snap, d.counters.cycles, slot)
        status()
        try:
            os.write(wake_fd, b'.')
        except (BlockingIOError, BrokenPipeError):      # the parent is behind (it catches up from the ring) or gone
            pass
    d.on_state = on_state
    try:
        d.start()
    except StartupError as exc:
        conn.send(('failed', str(exc)))
        return
    conn.send(('started', d.fast, list(d.warnings)))
    why = 'stop requested'
    try:
        while not term.is_set():
            if conn.poll(STATUS_EVERY_S):
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    why = 'parent gone'
                    break
                op = msg[0]
                if op == 'command':
                    d.set_command(msg[1], msg[2], msg[3])
                elif op == 'estop':
                    d.set_estop(msg[1])
                elif op == 'reset':
                    d.reset()
                elif op == 'config':
                    for name, value in msg[1].items():
                        setattr(d.config, name, value)
                elif op == 'diagnostics':
                    conn.send(('diagnostics', d.diagnostics(), time.process_time()))
                elif op == 'stop':
                    break
            status()
        else:
            why = 'SIGTERM'
    finally:
        ok = d.stop()
        status()
        log.info('bus process ends (%s): torque off %s', why, 'confirmed' if ok else
                 f'NOT confirmed on {", ".join(d.torque_off_unconfirmed)}')
        try:
            conn.send(('stopped', ok, list(d.torque_off_unconfirmed), d.diagnostics(), time.process_time()))
        except (BrokenPipeError, OSError):
            pass


# ==================================================================== the parent
_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def _main_module_hidden():
    """While a bus process starts, hide this interpreter's __main__ from multiprocessing: 'spawn' would
    otherwise run the parent's main module again in the child (as __mp_main__). For the driver node
    that imported rclpy into every bus process (about 45 MB each, and a slower start), and a user's
    script without a main guard would run its top-level code there. The child needs nothing from it:
    its target and arguments live in importable modules."""
    with _MAIN_LOCK:
        main = sys.modules.get('__main__')
        sys.modules['__main__'] = types.ModuleType('__main__')
        try:
            yield
        finally:
            if main is not None:
                sys.modules['__main__'] = main
class _LiveConfig(DriverConfig):
    """The parent's DriverConfig: a change of a field (a live parameter) is sent to every bus process."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        hook = self.__dict__.get('_on_change')
        if hook is not None and not name.startswith('_'):
            hook({name: value})


class BusProcess:
    """The parent's handle on one bus's child: its mode, reasons and cycle count from shared memory."""

    def __init__(self, robot, port, baud, shared: _Shared):
        self.robot = robot
        self.port = port
        self.baud = baud
        self.names = list(robot.joint_names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.ids = [j.servo_id for j in robot.joints]
        self.shared = shared
        self.process = None
        self.conn = None
        self.wake = None
        self.lock = threading.Lock()             # one exchange at a time on the control pipe
        self.fast = False
        self.warnings: list[str] = []
        self.torque_off_unconfirmed: list[str] = []
        self.last_diagnostics: DriverDiagnostics | None = None
        self.cpu_s = 0.0                          # the child's CPU time at its last report
        self.died: str | None = None              # why the child ended without being asked
        self.stopped = False

    @property
    def mode(self) -> str:
        return self.shared.mode

    @property
    def reasons(self) -> list[str]:
        return self.shared.reasons()

    @property
    def counters(self):
        """The cycle count (what the bench and the tests follow); the rest is in diagnostics()."""
        return types.SimpleNamespace(cycles=self.shared.cycles)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.is_alive() and self.mode not in ('fatal', 'stopped')

    def send(self, *msg) -> bool:
        with self.lock:
            try:
                self.conn.send(msg)
                return True
            except (BrokenPipeError, OSError, AttributeError):
                return False

    def ask(self, *msg, timeout_s: float = 5.0):
        with self.lock:
            try:
                self.conn.send(msg)
                while self.conn.poll(timeout_s):
                    reply = self.conn.recv()
                    if reply[0] in (msg[0], 'stopped'):
                        return reply
                return None
            except (BrokenPipeError, EOFError, OSError, AttributeError):
                return None


class ProcessMultiBusDriver(BusGroup):
    """One child process per bus line, behaving as one driver (see the module docstring). Same API as
    Driver and MultiBusDriver: start, stop, set_command, set_estop, reset, state, diagnostics, on_state,
    thread_setup (picklable: it is called in each child's bus thread), config (live: changes reach every
    bus)."""

    def __init__(self, robot, ports: list[str] | None = None, baud: int | None = None,
                 config: DriverConfig | None = None):
        self.robot = robot
        base = config or DriverConfig()
        base.validate()
        self.config = _LiveConfig(**dataclasses.asdict(base))
        self._ctx = multiprocessing.get_context('spawn')
        lines = robot.bus_lines
        ports = list(ports) if ports else [None] * len(lines)
        self.buses: list[BusProcess] = []
        for line, port in zip(lines, ports):
            part = robot.on_line(line, port, baud)
            self.buses.append(BusProcess(part, part.bus.port, part.bus.baud,
                                         _Shared.create(self._ctx, part.n_joints)))
        self.drivers = self.buses                   # as MultiBusDriver names them
        self.names = list(robot.joint_names)
        self.ids = [sid for b in self.buses for sid in b.ids]
        self.port = ','.join(b.port for b in self.buses)
        self.baud = self.buses[0].baud
        self.rate_hz = self.config.rate_hz or robot.bus.control_rate_hz
        self.period_s = 1.0 / self.rate_hz
        index = {n: i for i, n in enumerate(self.names)}
        self._where = [np.array([index[n] for n in b.names]) for b in self.buses]
        self._lower, self._upper = robot.lower_rad.copy(), robot.upper_rad.copy()
        self._lock = threading.Lock()
        self._publishing = threading.Lock()         # one bus reader thread publishes at a time
        self._merged_slot = -1                      # the grid slot of the last merged joint_states
        self._snapshot: JointStateSnapshot | None = None
        self._readers: list[threading.Thread] = []
        self._stopping = False
        self._atexit_registered = False
        self.on_state = None
        self.thread_setup = None
        self.fatal_error: str | None = None

    # ---------------------------------------------------------------- start and stop
    def start(self) -> None:
        """Start one process per bus; each checks and configures its servos in parallel. If any fails,
        the others are stopped (torque off) and StartupError names each failing bus."""
        if self.thread_setup is not None:
            try:
                pickle.dumps(self.thread_setup)
            except Exception as exc:
                raise StartupError(f'thread_setup must be picklable to reach the bus processes '
                                   f'(functools.partial of a module function is): {exc}') from None
        epoch = time.monotonic()                    # CLOCK_MONOTONIC is one clock for every process
        ports = [b.port for b in self.buses]
        shared = [b.shared for b in self.buses]
        self._stopping = False
        self._merged_slot = -1
        for k, b in enumerate(self.buses):
            parent_end, child_end = self._ctx.Pipe()
            wake_r, wake_w = self._ctx.Pipe(duplex=False)
            b.process = self._ctx.Process(
                target=_child_main, name=f'dxl-bus-{k}', daemon=True,
                args=(k, b.robot, DriverConfig(**{f.name: getattr(self.config, f.name)
                                                  for f in dataclasses.fields(DriverConfig)}),
                      ports, shared, child_end, wake_w, epoch, self.thread_setup))
            with _main_module_hidden():
                b.process.start()
            child_end.close()                       # the child's end of file is then the parent's death
            wake_w.close()                          # and ours is the child's
            b.conn, b.wake = parent_end, wake_r
            b.died, b.stopped = None, False
        errors = []
        for b in self.buses:
            reply = None
            if b.conn.poll(START_TIMEOUT_S):
                try:
                    reply = b.conn.recv()
                except (EOFError, OSError):
                    reply = None
            if reply is None:
                errors.append(f'{b.port}: bus process ended at start (exit code {b.process.exitcode})')
            elif reply[0] == 'failed':
                errors.append(reply[1])
                b.stopped = True            # its Driver turned the torque off as it gave up
            else:
                b.fast, b.warnings = reply[1], reply[2]
        self.config.__dict__['_on_change'] = self._send_config
        if not self._atexit_registered:         # an interpreter that exits without stop() still collects
            atexit.register(self.stop)          # every bus's torque-off confirmation
            self._atexit_registered = True
        for k, b in enumerate(self.buses):
            t = threading.Thread(target=self._read_bus, args=(k,), name=f'dxl-merge-{k}', daemon=True)
            t.start()
            self._readers.append(t)
        if errors:
            self.stop()
            raise StartupError('; '.join(errors))

    def stop(self) -> bool:
        """Stop every bus process, each turning its servos' torque off (confirmed, retried, reported); a
        bus whose process died has its torque turned off here. True if every servo is confirmed off."""
        self._stopping = True
        self.config.__dict__['_on_change'] = None
        for b in self.buses:
            b.send('stop')
        deadline = self.config.torque_off_deadline_s + 10.0
        for b in self.buses:
            if b.stopped or b.process is None:
                continue
            reply = None
            with b.lock:
                end = time.monotonic() + deadline
                try:
                    while reply is None and b.conn.poll(max(0.0, end - time.monotonic())):
                        msg = b.conn.recv()
                        if msg[0] == 'stopped':
                            reply = msg
                except (EOFError, OSError):
                    pass
            if reply is not None:
                _, ok, b.torque_off_unconfirmed, b.last_diagnostics, b.cpu_s = reply
                b.stopped = True
            else:
                self._torque_off_here(b)
            b.process.join(timeout=5.0)
            if b.process.is_alive():
                b.process.kill()
        for t in self._readers:
            t.join(timeout=2.0)
        self._readers = []
        for b in self.buses:
            for c in (b.conn, b.wake):
                if c is not None:
                    c.close()
            b.conn = b.wake = None
        return not self.torque_off_unconfirmed

    def _torque_off_here(self, b: BusProcess) -> None:
        """A bus whose process is gone: torque off from this process, through a Driver never started
        (the dead child's port is free again), confirmed and reported like any other."""
        if b.stopped:
            return
        if b.process is not None and b.process.is_alive():
            b.process.kill()
            b.process.join(timeout=5.0)
        d = self._driver_here(b)
        d.stop()
        b.torque_off_unconfirmed = list(d.torque_off_unconfirmed)
        b.stopped = True

    def _driver_here(self, b: BusProcess):
        """A Driver for bus b in this process, never started: it opens the port only if asked to."""
        from snake_control.dynamixel.driver import Driver
        return Driver(b.robot, config=DriverConfig(**{f.name: getattr(self.config, f.name)
                                                     for f in dataclasses.fields(DriverConfig)}))

    def _silent_bus_diagnostics(self, b: BusProcess) -> DriverDiagnostics:
        """Diagnostics for a bus whose process never answered (dead, or stuck): its servos, unknown
        health, its mode and reasons as its shared block last had them."""
        d = self._driver_here(b)
        d.mode, d.reasons = ('fatal', [b.died]) if b.died else (b.mode, b.reasons)
        d.fatal_error = b.died
        d.torque_off_unconfirmed = list(b.torque_off_unconfirmed)
        return d.diagnostics()

    # ---------------------------------------------------------------- each bus's reader thread
    def _read_bus(self, k: int):
        """Wait for bus k's cycles; merge once every bus has read since the last joint_states. End of file:
        the child is gone; unasked, that is a fatal bus (every peer follows into torque_off)."""
        b = self.buses[k]
        fd = b.wake.fileno()
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b''
            if not data:
                break
            self._take(k)
        if not self._stopping and not b.stopped:
            b.process.join(timeout=2.0)
            why = f'bus process ended (exit code {b.process.exitcode})'
            b.died = why
            self.fatal_error = f'{b.port}: {why}'
            log.error('%s: %s: turning its torque off from the parent', b.port, why)
            b.shared.write_status('fatal', None, [why], [])
            with b.lock:
                self._torque_off_here(b)

    def _take(self, k: int):
        """Bus k has read: publish one joint_states of every bus's reading for each slot of the time grid
        that every bus has read since the last, in order (a parent that fell behind catches up from the
        buses' rings instead of skipping to the latest)."""
        with self._lock:
            # A slot some bus skipped (it overran) is not published; its peers' phase on the machine's
            # scheduler neither makes nor loses one.
            latest = min(b.shared.slot for b in self.buses)
            if latest <= self._merged_slot or any(b.shared.a[0] == 0 for b in self.buses):
                return
            first = max(self._merged_slot + 1, latest - RING + 1) if self._merged_slot >= 0 else latest
            rings = [b.shared.read_slots(b.names, first, latest) for b in self.buses]
            self._merged_slot = latest
            merged = [self.merged_state([r[s] for r in rings]) for s in range(first, latest + 1)
                      if all(s in r for r in rings)]
            if not merged:
                return
            self._snapshot = merged[-1]
            self._publishing.acquire()      # taken before the merge lock is let go: slots go out in order
        try:
            if self.on_state is not None:
                for m in merged:
                    try:
                        self.on_state(m)
                    except Exception:       # a subscriber's error must never stop the merging
                        log.exception('on_state callback failed')
        finally:
            self._publishing.release()

    # ---------------------------------------------------------------- the Driver API
    def _send_config(self, change: dict):
        for b in self.buses:
            b.send('config', change)

    def set_command(self, names, positions_rad, velocities_rad_s=None) -> bool:
        """A command for any subset of joints by name: each bus takes its own joints. Checked here as the
        Driver checks it (names, lengths, finite values, limits unless clamped), so the answer is known
        without a round trip; a refused command goes to the first bus, which counts and reports it."""
        names = list(names) if names is not None else []
        try:
            positions = np.asarray(positions_rad, dtype=float).ravel()
        except (TypeError, ValueError):
            positions = None
        index = {n: i for i, n in enumerate(self.names)}
        ok = (positions is not None and bool(names) and len(positions) == len(names)
              and all(n in index for n in names) and bool(np.all(np.isfinite(positions))))
        vel = command_velocities(velocities_rad_s, len(names)) if ok else None
        ok = ok and vel is not False
        if ok and not self.config.clamp_out_of_limit:
            idx = np.array([index[n] for n in names])
            ok = not np.any((positions < self._lower[idx]) | (positions > self._upper[idx]))
        if not ok:
            self.buses[0].send('command', names, positions, velocities_rad_s)
            return False
        for b in self.buses:
            mine = [i for i, n in enumerate(names) if n in b.index]
            if mine:
                b.send('command', [names[i] for i in mine], positions[mine],
                       None if vel is None else vel[mine])
        return True

    def set_estop(self, active: bool) -> None:
        for b in self.buses:
            b.send('estop', bool(active))

    def reset(self) -> None:
        for b in self.buses:
            b.send('reset')

    def cpu_s(self) -> float:
        """CPU time (s) of this process and every bus process: what the driver costs the machine."""
        total = time.process_time()
        tick = os.sysconf('SC_CLK_TCK')
        for b in self.buses:
            try:
                with open(f'/proc/{b.process.pid}/stat') as f:
                    fields = f.read().rsplit(')', 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick     # utime, stime
            except (OSError, AttributeError, IndexError, ValueError):
                total += b.cpu_s                    # ended: its CPU time at its last report
        return total

    def diagnostics(self) -> DriverDiagnostics:
        """Every bus's diagnostics as one (as MultiBusDriver's): worst mode, reasons and events by port,
        counters summed, cycles the robot's, the slowest rate, the worst jitter, every servo."""
        parts = []
        for b in self.buses:
            reply = b.ask('diagnostics') if not b.stopped else None
            if reply is not None and reply[0] == 'diagnostics':
                b.last_diagnostics, b.cpu_s = reply[1], reply[2]
            elif reply is not None and reply[0] == 'stopped':
                _, _, b.torque_off_unconfirmed, b.last_diagnostics, b.cpu_s = reply
                b.stopped = True
            parts.append(b.last_diagnostics or self._silent_bus_diagnostics(b))
        fatal = [p.fatal_error for p in parts if p.fatal_error] + [f'{b.port}: {b.died}' for b in self.buses
                                                                    if b.died]
        return self.merged_diagnostics(parts, fatal, self.torque_off_unconfirmed
                                       or [n for p in parts for n in p.torque_off_unconfirmed])
