"""The servo driver: a fixed-rate bus loop in its own thread between joint commands and joint states.

``Driver(robot, port, baud, config)``; ``start()`` checks and configures the bus and starts the loop;
``set_command(names, positions_rad)`` and ``set_estop(bool)`` may be called from any thread (they only
swap the latest value under a lock); ``state()`` and ``diagnostics()`` return the latest snapshot;
``stop()`` turns torque off and closes the port.

Start-up (``start``): ping every servo of the robot YAML and check its model number, refusing to start
with a StartupError that names each missing or wrong servo; with torque off write the configuration
(status return level 2 first, so every later write is confirmed; return delay 0, position mode,
position limits from the joint limits, velocity limit and profiles from the joint limits, indirect
addresses, bus watchdog); read the present positions and make them the first goals; only then torque
on. Start-up and recovery exchanges wait up to SETUP_MARGIN_MS; the cycle's own timeouts are wire time
plus a margin from the control period (0.2 period, 3..8 ms).

Each cycle: one sync write of goal positions (joint rad -> servo rad through offset and direction ->
ticks); one fast sync read (sync read where the firmware lacks it) of Indirect Data 1..11 = hardware
error status, present current, velocity and position; a follow-up sync read of the servos the first
read missed when the cycle has time left (a servo silent for ``stale_limit`` cycles leaves the main
read and is probed every PROBE_EVERY cycles, so a dead servo does not cost a timeout every cycle);
every ``health_every`` cycles one servo's temperature,
voltage and bus watchdog, round-robin (a tripped watchdog is cleared and re-armed). When fast sync read
delivers under half the servos on average (firmware without it, or a noisy line that garbles the one
long reply), the driver uses sync read and tries fast again every 100 cycles.

Safety: a servo whose read failed keeps its last good value and is marked stale (never zeros); after
``stale_limit`` stale cycles, or on an Alert (hardware error), the configured policy runs: 'hold'
(every goal frozen at the present position) or 'torque_off'. A command older than
``command_timeout_s`` means hold. Estop runs ``estop_policy`` in the next cycle. NaN/inf and unknown
names reject a command; out-of-limit positions are clamped (or rejected) and counted. Goals are
clamped to the joint limits and checked finite right before they are encoded, so nothing else can
reach a goal register. An unplugged adapter is reported, retried, and on replug the servos are checked
again and resume holding where they are; only a command received after that moves them again.
Torque goes off in stop(), at interpreter exit, and on any fatal error in the loop.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.bus import (CommError, DxlError, PortGone, ServoBus, latency_timer_warning)
from snake_control.dynamixel.conversion import (current_a_to_torque_nm, joint_to_ticks, ticks_to_joint,
                                                velocity_units_to_rad_s)
from snake_control.dynamixel.models import (CONTROL_TABLE, INDIRECT_ADDRESS_0, INDIRECT_DATA_0, RAD_PER_TICK,
                                            RAD_S2_PER_ACCELERATION_UNIT, RAD_S_PER_VELOCITY_UNIT)

log = logging.getLogger('snake_control.dynamixel.driver')

# Indirect Data 1..11: hardware error (70), present current (126, 2), velocity (128, 4), position (132, 4).
STATE_SOURCES = [70, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135]
# Indirect Data 12..15: temperature (146), input voltage (144, 2), bus watchdog (98).
HEALTH_SOURCES = [146, 144, 145, 98]
STATE_ADDR, STATE_LEN = INDIRECT_DATA_0, len(STATE_SOURCES)
HEALTH_ADDR, HEALTH_LEN = INDIRECT_DATA_0 + len(STATE_SOURCES), len(HEALTH_SOURCES)
GOAL = CONTROL_TABLE['goal_position']
TORQUE = CONTROL_TABLE['torque_enable']
POLICIES = ('hold', 'torque_off')
SETUP_MARGIN_MS = 20.0
PROBE_EVERY = 10                 # cycles between reads of a servo that stopped answering
TORQUE_OFF_DEADLINE_S = 2.0      # how long torque off keeps retrying servos not yet confirmed off
EVENT_MAX_CHARS = 300            # longest event text kept (they can quote untrusted input)
# What a servo can physically report; a reading outside is garbage (a garbled or misrouted reply) and is
# never published. Hardware Error Status only has bits 0, 2, 3, 4, 5. Present Position in position mode
# spans one turn (a margin of a turn for multi-turn modes); Present Velocity stays within the Velocity
# Limit register's range (0..1023 units, about 24 rad/s); no X-series servo draws 10 A; input voltage of
# 3.7..24 V servos, temperature of a working servo.
HW_ERROR_BITS = (P.HW_INPUT_VOLTAGE | P.HW_OVERHEATING | P.HW_MOTOR_ENCODER | P.HW_ELECTRICAL_SHOCK
                 | P.HW_OVERLOAD)
POSITION_TICKS_RANGE = (-4096, 2 * 4096 - 1)
VELOCITY_UNITS_MAX = 1023
CURRENT_A_MAX = 10.0
VOLTAGE_V_RANGE = (3.0, 30.0)
TEMPERATURE_C_RANGE = (0.0, 150.0)


def plausible_state(hw: int, pos_ticks: int, vel_units: int, current_a: float) -> bool:
    """Whether one servo's (hardware error, position, velocity, current) can be real (see the bounds)."""
    return (not hw & ~HW_ERROR_BITS and POSITION_TICKS_RANGE[0] <= pos_ticks <= POSITION_TICKS_RANGE[1]
            and abs(vel_units) <= VELOCITY_UNITS_MAX and abs(current_a) <= CURRENT_A_MAX)


def plausible_health(temperature_c: float, voltage_v: float) -> bool:
    """Whether a (temperature, input voltage) reading can be real."""
    return (TEMPERATURE_C_RANGE[0] <= temperature_c <= TEMPERATURE_C_RANGE[1]
            and VOLTAGE_V_RANGE[0] <= voltage_v <= VOLTAGE_V_RANGE[1])


class StartupError(RuntimeError):
    """The bus is not what the robot YAML says (missing or wrong servos, unusable port)."""


@dataclass
class DriverConfig:
    """Driver behaviour. Times in s, rates in Hz; policies 'hold' or 'torque_off'."""

    rate_hz: float | None = None            # None: the robot YAML's bus.control_rate_hz
    stale_limit: int = 5                     # consecutive stale cycles before stale_policy
    stale_policy: str = 'hold'
    alert_policy: str = 'hold'
    estop_policy: str = 'hold'
    command_timeout_s: float = 0.5
    clamp_out_of_limit: bool = True          # False: reject commands outside the joint limits
    auto_reboot: bool = False                # reboot a servo latched in overload (rate-limited)
    reboot_min_interval_s: float = 5.0
    max_reboots: int = 3
    read_mode: str = 'auto'                  # 'auto' (fast if supported), 'fast', 'slow'
    watchdog_ms: int = 0                     # Bus Watchdog (0: off); servos stop if the loop stalls
    margin_ms: float | None = None           # packet timeout margin; None: from the control period
    reconnect_interval_s: float = 0.5
    health_every: int = 4                    # one servo's temperature/voltage every N cycles

    def validate(self):
        for name in ('stale_policy', 'alert_policy', 'estop_policy'):
            if getattr(self, name) not in POLICIES:
                raise ValueError(f'{name} must be one of {POLICIES}, got {getattr(self, name)!r}')
        if self.read_mode not in ('auto', 'fast', 'slow'):
            raise ValueError(f"read_mode must be 'auto', 'fast' or 'slow', got {self.read_mode!r}")
        if self.rate_hz is not None and not 0 < self.rate_hz <= 2000:
            raise ValueError(f'rate_hz must be in (0, 2000], got {self.rate_hz}')
        if self.stale_limit < 1:
            raise ValueError(f'stale_limit must be >= 1, got {self.stale_limit}')
        if not 0 <= self.watchdog_ms <= 127 * 20:
            raise ValueError(f'watchdog_ms must be 0..2540, got {self.watchdog_ms}')


@dataclass
class ServoState:
    """What the driver knows about one servo (joint frame)."""

    name: str
    servo_id: int
    position_rad: float = 0.0
    velocity_rad_s: float = 0.0
    current_a: float = 0.0
    temperature_c: float = math.nan          # last good reading; NaN until the first one
    voltage_v: float = math.nan
    health_stale: bool = True                # the last temperature/voltage read failed or was garbage
    health_failures: int = 0                 # failed or rejected temperature/voltage reads
    hardware_error: int = 0
    alert: bool = False
    torque: bool = False
    fresh: bool = False
    ever_read: bool = False
    stale_cycles: int = 0
    stale_count: int = 0
    reboots: int = 0
    last_reboot_t: float = -math.inf
    rebooting_until: float | None = None


@dataclass
class JointStateSnapshot:
    stamp_s: float                       # monotonic time of the read
    names: list
    position_rad: np.ndarray
    velocity_rad_s: np.ndarray
    effort: np.ndarray                   # joint torque, N·m: motor current x torque constant (joint direction)
    fresh: np.ndarray                    # bool per joint: read this cycle
    current_a: np.ndarray                # motor current, A (joint direction)


@dataclass
class _Command:
    position_rad: np.ndarray
    received_s: float


@dataclass
class Counters:
    cycles: int = 0
    overruns: int = 0
    read_failures: int = 0               # servo reads missing from a cycle
    rejected_readings: int = 0           # replies whose values cannot be real (never published)
    health_failures: int = 0             # temperature/voltage reads failed or rejected
    full_read_failures: int = 0          # cycles where no servo answered
    write_failures: int = 0
    rejected_nonfinite: int = 0
    rejected_unknown_name: int = 0
    rejected_malformed: int = 0
    rejected_out_of_limit: int = 0
    clamped: int = 0
    stale_commands: int = 0
    disconnects: int = 0
    reconnects: int = 0
    reboots: int = 0
    mode_switches: int = 0
    watchdog_trips: int = 0
    policy_actions: int = 0
    stale_hold_cycles: int = 0           # cycles held (or torque off) because a servo's state went stale


class Driver:
    """Bus loop for one robot. See the module docstring."""

    def __init__(self, robot, port: str | None = None, baud: int | None = None,
                 config: DriverConfig | None = None):
        self.robot = robot
        self.config = config or DriverConfig()
        self.config.validate()
        self.port = port or robot.bus.port
        self.baud = baud or robot.bus.baud
        self.rate_hz = self.config.rate_hz or robot.bus.control_rate_hz
        self.period_s = 1.0 / self.rate_hz
        margin = self.config.margin_ms
        if margin is None:
            margin = min(8.0, max(3.0, 0.2 * self.period_s * 1000.0))
        self.margin_ms = margin
        self.bus = ServoBus(self.port, self.baud, margin)
        self.joints = list(robot.joints)
        self.names = [j.name for j in self.joints]
        self.index = {n: k for k, n in enumerate(self.names)}
        self.ids = [j.servo_id for j in self.joints]
        self.lower = robot.lower_rad.copy()
        self.upper = robot.upper_rad.copy()
        self.direction = np.array([j.direction for j in self.joints], dtype=float)
        self.offset = np.array([j.offset_rad for j in self.joints])
        self.model = robot.bus.servo
        self._tick_limits = None
        self.servos = [ServoState(j.name, j.servo_id) for j in self.joints]
        self.by_id = {s.servo_id: s for s in self.servos}
        self.k_by_id = {sid: k for k, sid in enumerate(self.ids)}
        self.counters = Counters()
        self.warnings: list[str] = []
        self.events: collections.deque = collections.deque(maxlen=200)
        self.fast = self.config.read_mode != 'slow'
        self._fast_capable = self.fast
        self._fast_yield = 1.0
        self._lock = threading.Lock()
        self._command: _Command | None = None
        self._estop = False
        self._stop_request = False
        self._reset_request = False
        self._thread: threading.Thread | None = None
        self.mode = 'stopped'              # running | hold | torque_off | disconnected | fatal | stopped
        self.reasons: list[str] = []
        self.fatal_error: str | None = None
        self._hold_goal: np.ndarray | None = None
        self._goal = None                   # last goal sent, joint rad
        self._snapshot: JointStateSnapshot | None = None
        self._jitter = collections.deque(maxlen=1000)
        self._cycle_starts = collections.deque(maxlen=200)
        self._health_next = 0
        self._read_order = list(self.ids)
        self._disconnected_since = None
        self._last_reconnect_try = -math.inf
        self._resume_after = 0.0            # commands older than this do not end a hold
        self._atexit_registered = False
        # Called by the bus thread with each cycle's JointStateSnapshot, right after the read: publishing
        # here (not from a timer) neither delays nor aliases the measurement.
        self.on_state = None
        # Called first thing by the bus thread (real-time priority, CPU pinning); returns problems to log.
        self.thread_setup = None

    # ================================================================ conversions
    def joint_to_ticks(self, q_rad: np.ndarray) -> np.ndarray:
        """Goal ticks for joint angles (rad): servo angle = direction * q + offset; 2048 at the centre."""
        return joint_to_ticks(q_rad, self.direction, self.offset)

    def ticks_to_joint(self, ticks) -> np.ndarray:
        return ticks_to_joint(ticks, self.direction, self.offset)

    def tick_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """(min, max) goal ticks of each servo: its joint limits through offset and direction."""
        if self._tick_limits is None:
            a, b = self.joint_to_ticks(self.lower), self.joint_to_ticks(self.upper)
            self._tick_limits = (np.minimum(a, b), np.maximum(a, b))
        return self._tick_limits

    # ================================================================ public API
    def start(self) -> None:
        """Check, configure, torque on, start the loop. Raises StartupError naming what is wrong."""
        try:
            self.bus.open()
        except PortGone as exc:
            raise StartupError(str(exc)) from None
        warning = latency_timer_warning(self.port)
        if warning:
            self.warnings.append(warning)
            log.warning(warning)
        try:
            with self._patient():
                self._check_servos()
                self._configure_all()
                self._first_goals_and_torque_on()
                for s in self.servos:           # every servo's health known before the loop starts
                    for _ in range(3):
                        if self._read_servo_health(s) is not None:
                            break
        except (StartupError, DxlError, PortGone) as exc:
            self._torque_off_all()
            self.bus.close()
            if isinstance(exc, StartupError):
                raise
            raise StartupError(f'{self.port}: start-up failed: {exc}') from None
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        self.mode = 'hold'
        self.reasons = ['waiting for the first command']
        self._stop_request = False
        self._thread = threading.Thread(target=self._run, name='dxl-bus', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop, turn torque off on every servo (verified, retried), close the port."""
        self._stop_request = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)     # never two threads on the bus
        self._thread = None
        if not self.bus.is_open and self.mode == 'disconnected':
            try:                                 # the adapter may be back: try once more
                self.bus.open()
            except PortGone:
                pass
        if self.bus.is_open:
            with self._patient():
                if not self._torque_off_all():
                    log.error('could not confirm torque off on every servo: %s',
                              [s.name for s in self.servos if s.torque])
            self.bus.close()
        if self.mode != 'fatal':
            self.mode = 'stopped'

    def set_command(self, names, positions_rad) -> bool:
        """Take a joint command (any subset of joints by name). Returns whether it was accepted."""
        positions = np.asarray(positions_rad, dtype=float).ravel() if positions_rad is not None else None
        names = list(names) if names is not None else []
        with self._lock:
            if positions is None or len(names) != len(positions) or not names:
                self.counters.rejected_malformed += 1
                return False
            unknown = [n for n in names if n not in self.index]
            if unknown:
                self.counters.rejected_unknown_name += 1
                self._event(f'command rejected: {len(unknown)} unknown joint(s) {unknown[:3]}')
                return False
            if not np.all(np.isfinite(positions)):
                self.counters.rejected_nonfinite += 1
                self._event('command rejected: NaN or inf position')
                return False
            idx = np.array([self.index[n] for n in names])
            lo, hi = self.lower[idx], self.upper[idx]
            outside = (positions < lo) | (positions > hi)
            if np.any(outside):
                if not self.config.clamp_out_of_limit:
                    self.counters.rejected_out_of_limit += 1
                    self._event(f'command rejected: {np.array(names)[outside].tolist()} outside limits')
                    return False
                self.counters.clamped += int(np.count_nonzero(outside))
                positions = np.clip(positions, lo, hi)
            base = self._command.position_rad.copy() if self._command is not None else (
                self._goal.copy() if self._goal is not None else np.zeros(len(self.names)))
            base[idx] = positions
            self._command = _Command(base, time.monotonic())
            return True

    def set_estop(self, active: bool) -> None:
        """Estop on: the stop policy runs in the next cycle. Off: re-arm (torque back on where it was cut,
        holding in place) and wait for a fresh command."""
        with self._lock:
            if self._estop and not active:
                self._reset_request = True
            self._estop = bool(active)

    def reset(self) -> None:
        """Leave a torque-off stop: torque back on (goal = present) for servos without a latched error."""
        with self._lock:
            self._reset_request = True

    def state(self) -> JointStateSnapshot | None:
        with self._lock:
            return self._snapshot

    def diagnostics(self) -> dict:
        """Bus and per-servo health, JSON-able."""
        with self._lock:
            starts = list(self._cycle_starts)
            jitter = np.array(self._jitter) if self._jitter else np.zeros(1)
            span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
            rate = (len(starts) - 1) / span if span > 0 else 0.0
            c = self.counters
            return {
                'mode': self.mode, 'reasons': list(self.reasons), 'fatal_error': self.fatal_error,
                'port': self.port, 'baud': self.baud, 'rate_hz_target': self.rate_hz,
                'cycle_rate_hz': rate,
                'jitter_p99_ms': float(np.percentile(np.abs(jitter), 99) * 1000.0),
                'read_mode': 'fast' if self.fast else 'slow',
                'counters': dict(c.__dict__),
                'disconnected_for_s': (time.monotonic() - self._disconnected_since
                                       if self.mode == 'disconnected' and self._disconnected_since else 0.0),
                'warnings': list(self.warnings), 'events': list(self.events)[-10:],
                'servos': [{'name': s.name, 'id': s.servo_id, 'stale_count': s.stale_count,
                            'stale_cycles': s.stale_cycles, 'hardware_error': s.hardware_error,
                            'hardware_error_names': P.decode_hardware_error(s.hardware_error),
                            'alert': s.alert, 'current_a': s.current_a,
                            'temperature_c': None if math.isnan(s.temperature_c) else s.temperature_c,
                            'voltage_v': None if math.isnan(s.voltage_v) else s.voltage_v,
                            'health_stale': s.health_stale, 'health_failures': s.health_failures,
                            'torque': s.torque, 'reboots': s.reboots} for s in self.servos],
            }

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ================================================================ start-up
    def _event(self, text: str):
        # An event quotes untrusted input (a command's joint names): keep a bounded head of it, so the
        # log of 200 events cannot hold hundreds of MB.
        if len(text) > EVENT_MAX_CHARS:
            text = f'{text[:EVENT_MAX_CHARS]}... ({len(text)} characters)'
        self.events.append(f'{time.monotonic():.3f} {text}')
        log.info(text)

    def _retry(self, fn, *args, attempts=10):
        last = None
        for _ in range(attempts):
            try:
                return fn(*args)
            except CommError as exc:
                last = exc
        raise last

    @contextlib.contextmanager
    def _patient(self):
        """Start-up and recovery exchanges are not time-critical: wait up to SETUP_MARGIN_MS for replies."""
        self.bus.port.margin_ms = max(self.margin_ms, SETUP_MARGIN_MS)
        try:
            yield
        finally:
            self.bus.port.margin_ms = self.margin_ms

    def _check_servos(self):
        problems = []
        for j in self.joints:
            found = None
            for _ in range(5):
                found = self.bus.ping(j.servo_id)
                if found:
                    break
            if found is None:
                problems.append(f'{j.name} (ID {j.servo_id}): no answer')
            elif found[0] != self.model.model_number:
                problems.append(f'{j.name} (ID {j.servo_id}): model number {found[0]}, expected '
                                f'{self.model.model_number} ({self.model.name})')
            else:
                fw_min = self.model.fast_sync_read_min_firmware
                if self.config.read_mode == 'auto' and (fw_min is None or found[1] < fw_min):
                    self.fast = self._fast_capable = False
        if problems:
            raise StartupError(f'{self.port} at {self.baud} baud: ' + '; '.join(problems))

    def _configure_servo(self, sid: int):
        """Write the configuration of one servo; torque must be (and is made) off."""
        k = self.ids.index(sid)
        lo_t, hi_t = self.tick_limits()
        vel = max(1, math.ceil(self.joints[k].velocity_limit_rad_s / RAD_S_PER_VELOCITY_UNIT))
        acc = max(1, math.ceil(self.joints[k].acceleration_limit_rad_s2 / RAD_S2_PER_ACCELERATION_UNIT))
        w = lambda name, value: self._retry(self.bus.write_register, sid, name, value)  # noqa: E731
        # A servo left at status return level 0/1 would not confirm the writes below: set 2 blind first.
        self.bus.write_no_reply(sid, CONTROL_TABLE['status_return_level'].address, b'\x02')
        w('torque_enable', 0)
        w('return_delay_time', 0)
        w('operating_mode', 3)
        w('min_position_limit', int(lo_t[k]))
        w('max_position_limit', int(hi_t[k]))
        if self._retry(self.bus.read_register, sid, 'velocity_limit') < vel:
            w('velocity_limit', vel)
        w('profile_acceleration', acc)
        w('profile_velocity', vel)
        indirect = b''.join(P.le(src, 2) for src in STATE_SOURCES + HEALTH_SOURCES)
        self._retry(self.bus.write, sid, INDIRECT_ADDRESS_0, indirect)
        w('bus_watchdog', 0)
        if self.config.watchdog_ms:
            w('bus_watchdog', self._watchdog_units())
        w('status_return_level', 2)

    def _watchdog_units(self) -> int:
        return max(1, round(self.config.watchdog_ms / 20))

    def _configure_all(self):
        for sid in self.ids:
            self._configure_servo(sid)

    def _read_present_ticks(self, sid: int) -> int:
        return self._retry(self.bus.read_register, sid, 'present_position')

    def _first_goals_and_torque_on(self, ids=None):
        """Goal = present position for each servo (inside its limits), then torque on."""
        ids = list(self.ids if ids is None else ids)
        lo_t, hi_t = self.tick_limits()
        goals = {}
        for sid in ids:
            k = self.ids.index(sid)
            ticks = self._read_present_ticks(sid)
            tol = 0.05 / RAD_PER_TICK
            if not lo_t[k] - tol <= ticks <= hi_t[k] + tol:
                raise StartupError(f'{self.names[k]} (ID {sid}) is at {ticks} ticks, outside its limits '
                                   f'{lo_t[k]}..{hi_t[k]} ticks '
                                   f'({self.lower[k]:.3f}..{self.upper[k]:.3f} rad): '
                                   f'move it inside by hand before torque comes on')
            goals[sid] = int(min(max(ticks, lo_t[k]), hi_t[k]))
            s = self.by_id[sid]
            s.position_rad = float(ticks_to_joint(ticks, self.direction[k], self.offset[k]))
            s.ever_read = True
        for sid, t in goals.items():
            self._retry(self.bus.write_register, sid, 'goal_position', t)
        for sid in ids:
            self._retry(self.bus.write_register, sid, 'torque_enable', 1)
            self.by_id[sid].torque = True
        present = np.array([s.position_rad for s in self.servos])
        self._goal = np.clip(present, self.lower, self.upper)
        self._hold_goal = self._goal.copy()

    def _torque_off_all(self, ids=None, deadline_s: float = TORQUE_OFF_DEADLINE_S) -> bool:
        """Torque off: a sync write, then each servo confirmed (read back, or a write it acknowledged),
        and the servos not yet confirmed tried again until all are or ``deadline_s`` has passed (at least
        one round). A servo once confirmed stays confirmed: on a noisy line a round where every one of
        32 exchanges succeeds is rare, a confirmation per servo is not. True if every servo is off."""
        if not self.bus.is_open:
            return False
        pending = [s for s in self.servos if ids is None or s.servo_id in ids]
        t_end = time.monotonic() + deadline_s
        try:
            while True:
                try:
                    self.bus.sync_write(TORQUE.address, 1, {s.servo_id: b'\x00' for s in pending})
                except CommError:
                    pass
                left = []
                for s in pending:
                    try:
                        if self.bus.read_register(s.servo_id, 'torque_enable') != 0:
                            self.bus.write_register(s.servo_id, 'torque_enable', 0)
                        s.torque = False
                    except DxlError:
                        s.torque = True          # unconfirmed: assume still on
                        left.append(s)
                pending = left
                if not pending or time.monotonic() >= t_end:
                    break
        except PortGone:
            return False
        return not pending

    # ================================================================ loop
    def _run(self):
        if self.thread_setup is not None:
            for problem in self.thread_setup():
                self._event(problem)
                log.warning(problem)
        next_t = time.monotonic()
        while not self._stop_request:
            now = time.monotonic()
            if now < next_t:
                time.sleep(next_t - now)
                now = time.monotonic()
            with self._lock:
                self._jitter.append(now - next_t)
                self._cycle_starts.append(now)
            try:
                self._cycle(now)
            except PortGone as exc:
                self._on_disconnect(str(exc))
            except Exception as exc:      # anything unexpected is fatal: torque off and stop
                log.exception('driver loop failed')
                self.fatal_error = f'{type(exc).__name__}: {exc}'
                self.mode = 'fatal'
                self.reasons = [self.fatal_error]
                try:
                    with self._patient():
                        self._torque_off_all()
                finally:
                    self.bus.close()
                return
            next_t += self.period_s
            after = time.monotonic()
            if after > next_t + self.period_s:     # overran by a whole period: do not try to catch up
                self.counters.overruns += 1
                next_t = after

    def _on_disconnect(self, why: str):
        if self.mode != 'disconnected':
            self.counters.disconnects += 1
            self._event(f'bus disconnected: {why}')
            self.mode = 'disconnected'
            self.reasons = [f'disconnected: {why}']
            self._disconnected_since = time.monotonic()
        self.bus.close()
        for s in self.servos:
            s.fresh = False

    def _try_reconnect(self, now: float):
        if now - self._last_reconnect_try < self.config.reconnect_interval_s:
            return
        self._last_reconnect_try = now
        try:
            self.bus.open()
        except PortGone:
            return
        try:
            with self._patient():
                self._recheck_after_replug()
        except (StartupError, DxlError, PortGone) as exc:
            self._event(f'reconnect check failed: {exc}')
            self.bus.close()
            return
        self.counters.reconnects += 1
        self._event('bus reconnected; holding until a new command')
        self.mode = 'hold'
        self._hold_goal = self._goal.copy()
        self._resume_after = time.monotonic()
        self.reasons = ['reconnected: waiting for a new command']

    def _recheck_after_replug(self):
        """Same servos? Each holds where it is; those that lost torque (power-cycled) are configured
        again and get it back unless a hardware error is latched."""
        self._check_servos()
        hw = {}
        off = []
        for s in self.servos:
            hw[s.servo_id] = self._retry(self.bus.read_register, s.servo_id, 'hardware_error_status')
            if self._retry(self.bus.read_register, s.servo_id, 'torque_enable') == 0:
                off.append(s.servo_id)
        for sid in off:
            self._configure_servo(sid)
        on_again = [sid for sid in off if not hw[sid]]
        self._first_goals_and_torque_on([sid for sid in self.ids if sid not in off] + on_again)
        for sid, bits in hw.items():
            self.by_id[sid].hardware_error = bits
            self.by_id[sid].alert = bool(bits)

    def _cycle(self, now: float):
        self.counters.cycles += 1
        if not self.bus.is_open:
            self._try_reconnect(now)
            return
        with self._lock:
            command, estop = self._command, self._estop
            reset, self._reset_request = self._reset_request, False
        if reset:
            self._rearm()
        self._service_reboots(now)
        goal = self._decide(now, command, estop)
        self._write_goals(goal)
        read_start = time.monotonic()
        self._read_state(now)
        # The servos sample their state while the read is on the wire: its midpoint is the measurement time.
        stamp = 0.5 * (read_start + time.monotonic())
        self._read_health()
        self._publish(stamp)

    # ---------------------------------------------------------------- decisions
    def _decide(self, now, command, estop) -> np.ndarray:
        """The goal for this cycle (joint rad), after every safety rule."""
        reasons = []
        policy = None
        if estop:
            reasons.append('estop')
            policy = self.config.estop_policy
        alerts = [s for s in self.servos if s.alert]
        if alerts:
            reasons += [f'alert on {s.name}: {", ".join(P.decode_hardware_error(s.hardware_error)) or "?"}'
                        for s in alerts]
            policy = policy or self.config.alert_policy
            if self.config.alert_policy == 'torque_off':
                policy = 'torque_off'
        stale = [s for s in self.servos if s.stale_cycles >= self.config.stale_limit]
        if stale:
            self.counters.stale_hold_cycles += 1
            reasons += [f'{s.name} stale for {s.stale_cycles} cycles' for s in stale]
            if self.config.stale_policy == 'torque_off':
                policy = 'torque_off'
            policy = policy or self.config.stale_policy
        if policy is None:
            if command is None:
                reasons.append('waiting for the first command')
                policy = 'hold'
            elif now - command.received_s > self.config.command_timeout_s:
                reasons.append('command older than the timeout')
                self.counters.stale_commands += 1
                policy = 'hold'
            elif command.received_s <= self._resume_after:
                reasons.append('waiting for a new command')
                policy = 'hold'
        if self.mode == 'torque_off':
            policy = 'torque_off'            # stays off until reset()/estop release
        if policy == 'torque_off':
            if self.mode != 'torque_off':
                self.counters.policy_actions += 1
                self._event(f'torque off: {"; ".join(reasons)}')
                with self._patient():
                    self._torque_off_all(deadline_s=0.5)
                self.mode = 'torque_off'
            elif self.counters.cycles % 10 == 0 and any(s.torque for s in self.servos):
                # Torque off not yet confirmed everywhere (lost replies, a silent servo): keep trying.
                with self._patient():
                    self._torque_off_all([s.servo_id for s in self.servos if s.torque], deadline_s=0.0)
            unconfirmed = [s.name for s in self.servos if s.torque]
            if unconfirmed:
                reasons = reasons + [f'torque off not confirmed on {", ".join(unconfirmed)}']
            self.reasons = reasons
            present = np.array([s.position_rad for s in self.servos])
            self._hold_goal = np.clip(present, self.lower, self.upper)
            return self._hold_goal
        if policy == 'hold':
            if self.mode != 'hold':
                self.counters.policy_actions += 1
                present = np.array([s.position_rad for s in self.servos])
                self._hold_goal = np.clip(present, self.lower, self.upper)
                self._event(f'hold: {"; ".join(reasons)}')
            self.mode = 'hold'
            self.reasons = reasons
            return self._hold_goal
        self.mode = 'running'
        self.reasons = []
        return command.position_rad

    def _rearm(self):
        """After a stop: torque on again (goal = present) where it is off and nothing is latched."""
        if self.mode == 'torque_off':
            ids = [s.servo_id for s in self.servos if not s.hardware_error]
            try:
                with self._patient():
                    self._first_goals_and_torque_on(ids)
            except (DxlError, StartupError) as exc:
                self._event(f're-arm failed (trying again): {exc}')
                with self._lock:
                    self._reset_request = not self._estop      # a new estop cancels the re-arm
                return
            self.mode = 'hold'
        self._resume_after = time.monotonic()
        self._event('re-armed; holding until a new command')

    def _service_reboots(self, now):
        for s in self.servos:
            if s.rebooting_until is not None and now >= s.rebooting_until:
                s.rebooting_until = None
                try:
                    with self._patient():
                        self._configure_servo(s.servo_id)
                        self._first_goals_and_torque_on([s.servo_id])
                    s.hardware_error, s.alert = 0, False
                    self._event(f'{s.name} rebooted and holding')
                    self._resume_after = time.monotonic()
                except (DxlError, StartupError) as exc:
                    self._event(f'{s.name} did not come back after reboot: {exc}')
        if not self.config.auto_reboot:
            return
        for s in self.servos:
            if (s.alert and s.hardware_error & P.HW_OVERLOAD and s.rebooting_until is None
                    and s.reboots < self.config.max_reboots
                    and now - s.last_reboot_t >= self.config.reboot_min_interval_s):
                try:
                    self.bus.reboot(s.servo_id)
                except DxlError as exc:
                    self._event(f'reboot of {s.name} failed: {exc}')
                    continue
                s.reboots += 1
                self.counters.reboots += 1
                s.last_reboot_t = now
                s.rebooting_until = now + 0.15
                s.torque = False
                self._event(f'{s.name} overloaded: rebooting ({s.reboots}/{self.config.max_reboots})')

    # ---------------------------------------------------------------- bus I/O
    def _write_goals(self, goal: np.ndarray):
        goal = np.clip(np.asarray(goal, dtype=float), self.lower, self.upper)
        if not np.all(np.isfinite(goal)):        # cannot happen; never let it reach a register
            raise RuntimeError('non-finite goal computed')
        self._goal = goal
        if self.mode == 'torque_off':
            return
        lo_t, hi_t = self.tick_limits()
        ticks = np.clip(self.joint_to_ticks(goal), lo_t, hi_t).tolist()
        data = {sid: t.to_bytes(4, 'little', signed=True) for sid, t, s in zip(self.ids, ticks, self.servos)
                if s.torque and s.rebooting_until is None}
        if data:
            try:
                self.bus.sync_write(GOAL.address, 4, data, hold=True)   # leaves with the read request
            except CommError:
                self.counters.write_failures += 1

    def _read_state(self, now: float):
        active = [sid for sid in self._read_order if self.by_id[sid].rebooting_until is None]
        # A servo silent for stale_limit cycles leaves the main read (where it would cost a timeout
        # every cycle) and is probed every PROBE_EVERY cycles instead, until it answers again.
        quarantine_after = max(self.config.stale_limit, 3)
        quarantined = [sid for sid in active if self.by_id[sid].stale_cycles >= quarantine_after]
        probes = [sid for sid in quarantined if (self.counters.cycles + self.k_by_id[sid]) % PROBE_EVERY == 0]
        ids = [sid for sid in active if sid not in quarantined]
        use_fast = self.fast
        if not use_fast and self._fast_capable and self.config.read_mode != 'slow' \
                and self.counters.cycles % 100 == 0:
            use_fast = True                 # re-measure a fast read now and then
        got = self.bus.sync_read(STATE_ADDR, STATE_LEN, ids, use_fast) if ids else {}
        missing = [sid for sid in ids if sid not in got] + probes
        if use_fast and ids:
            self._fast_yield = 0.8 * self._fast_yield + 0.2 * (len(got) / len(ids)) \
                if self.fast else len(got) / len(ids)
        # Follow up with per-servo sync reads for those the first read lost, while the cycle has time
        # (at most 3 rounds): one garbled byte then costs a few servos, not the whole cycle.
        rounds = 0
        while missing and rounds < 3:
            elapsed_ms = (time.monotonic() - now) * 1000.0
            need_ms = len(missing) * (11 + STATE_LEN) * self.bus.byte_time_ms + self.margin_ms
            free_running = rounds == 0 and self.rate_hz >= 1000
            if elapsed_ms + need_ms > 0.8 * self.period_s * 1000.0 and not free_running:
                break
            rounds += 1
            more = self.bus.sync_read(STATE_ADDR, STATE_LEN, missing, False)
            got.update(more)
            missing = [sid for sid in missing if sid not in got]
        if self.config.read_mode == 'auto' and use_fast:
            # Fast sync read loses every servo after a garbled byte, and old firmware ignores it:
            # when it delivers under half the servos on average, sync read serves better.
            if self.fast and self._fast_yield < 0.5:
                self.fast = False
                self.counters.mode_switches += 1
                self._event(f'fast sync read delivers {self._fast_yield:.0%} of the servos; using sync read')
            elif not self.fast and self._fast_yield >= 0.9:
                self.fast = True
                self.counters.mode_switches += 1
                self._event('fast sync read works again; using it')
        missing += [sid for sid in quarantined if sid not in probes]
        if ids and not got:
            self.counters.full_read_failures += 1
        self.counters.read_failures += len(missing)
        for sid, (err, data) in list(got.items()):
            s = self.by_id[sid]
            k = self.k_by_id[sid]
            hw = data[0]
            cur = P.from_le(data[1:3], True)
            vel = P.from_le(data[3:7], True)
            pos = P.from_le(data[7:11], True)
            current_a = cur * (self.model.current_unit_ma or 0.0) / 1000.0
            if err & 0x7F or len(data) != STATE_LEN or not plausible_state(hw, pos, vel, current_a):
                # The servo reported an error instead of data, or the values cannot be real: a failed
                # read (last good value kept, stale), never a published value.
                if not err & 0x7F:
                    self.counters.rejected_readings += 1
                    self._event(f'{s.name}: implausible reading rejected (hw 0x{hw:02x}, position {pos}, '
                                f'velocity {vel}, current {cur})')
                del got[sid]
                missing.append(sid)
                continue
            s.position_rad = float(ticks_to_joint(pos, self.direction[k], self.offset[k]))
            s.velocity_rad_s = float(self.direction[k] * velocity_units_to_rad_s(vel))
            s.current_a = float(self.direction[k] * current_a)
            if (hw or err & P.ERR_ALERT) and not s.alert:
                self._event(f'{s.name} alert: {", ".join(P.decode_hardware_error(hw)) or "error byte alert"}')
            s.hardware_error = hw
            s.alert = bool(hw) or bool(err & P.ERR_ALERT)
            if s.alert:
                s.torque = s.torque and not hw      # shutdown errors cut torque in the servo
            s.fresh, s.ever_read, s.stale_cycles = True, True, 0
        for sid in missing:
            s = self.by_id[sid]
            s.fresh = False
            s.stale_cycles += 1
            s.stale_count += 1
        # Servos that failed go last (a silent one then truncates no one else's fast-read block); ties
        # rotate, so two servos behind one silent servo do not keep hiding behind each other.
        c, n = self.counters.cycles, len(self.ids)
        self._read_order = sorted(self.ids, key=lambda sid: (self.by_id[sid].stale_cycles,
                                                             (self.k_by_id[sid] + c) % n))

    def _read_health(self):
        if self.config.health_every <= 0 or self.counters.cycles % self.config.health_every:
            return
        s = self.servos[self._health_next % len(self.servos)]
        self._health_next += 1
        if s.rebooting_until is not None:
            return
        data = self._read_servo_health(s)
        if data is None:
            return
        if self.config.watchdog_ms and data[3] == 0xFF:
            # The servo's bus watchdog tripped (the loop stalled): it stopped and refuses goals until
            # the watchdog is cleared. Clear and re-arm it; the goal it holds is its present position.
            self._event(f'{s.name}: bus watchdog tripped; re-armed')
            self.counters.watchdog_trips += 1
            try:
                self.bus.write_register(s.servo_id, 'bus_watchdog', 0)
                self.bus.write_register(s.servo_id, 'bus_watchdog', self._watchdog_units())
            except DxlError as exc:
                self._event(f'{s.name}: re-arming the bus watchdog failed: {exc}')

    def _read_servo_health(self, s: ServoState) -> bytes | None:
        """Temperature and voltage of one servo; a failed or implausible read keeps the last good values
        and marks them stale. Returns the raw health bytes when they were good, else None."""
        try:
            data, _ = self.bus.read(s.servo_id, HEALTH_ADDR, HEALTH_LEN)
        except DxlError:
            data = None
        if data is not None and len(data) == HEALTH_LEN:
            temperature, voltage = float(data[0]), P.from_le(data[1:3]) * 0.1
            if plausible_health(temperature, voltage):
                s.temperature_c, s.voltage_v, s.health_stale = temperature, voltage, False
                return data
            self.counters.rejected_readings += 1
            self._event(f'{s.name}: implausible health reading rejected '
                        f'({temperature:.0f} C, {voltage:.1f} V)')
        s.health_stale = True
        s.health_failures += 1
        self.counters.health_failures += 1
        return None

    def _publish(self, stamp_s: float):
        current_a = np.array([s.current_a for s in self.servos])
        snap = JointStateSnapshot(
            stamp_s, list(self.names),
            np.array([s.position_rad for s in self.servos]),
            np.array([s.velocity_rad_s for s in self.servos]),
            current_a_to_torque_nm(current_a, self.model),
            np.array([s.fresh for s in self.servos]),
            current_a)
        with self._lock:
            self._snapshot = snap
        if self.on_state is not None:
            try:
                self.on_state(snap)
            except Exception:       # a subscriber's error must never stop the servo loop
                log.exception('on_state callback failed')
