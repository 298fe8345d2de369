"""The servo driver: a fixed-rate bus loop in its own thread between joint commands and joint states.

``Driver(robot, port, baud, config)``; ``start()`` checks and configures the bus and starts the loop;
``set_command(names, positions_rad, velocities_rad_s=None)`` and ``set_estop(bool)`` may be called from any thread (they only
swap the latest value under a lock); ``state()`` and ``diagnostics()`` return the latest snapshot;
``stop()`` turns torque off and closes the port.

Start-up (``start``): ping every servo of the robot YAML and check its model number, refusing to start
with a StartupError that names each missing or wrong servo; with torque off write the configuration
(status return level 2 first, so every later write is confirmed; return delay 0, position mode,
position limits from the joint limits, velocity limit and profiles from the joint limits, indirect
addresses, bus watchdog cleared); read the present positions and make them the first goals; only then
torque on; then the loop starts, arms every servo's bus watchdog and start() returns once each one reads
armed. Start-up and recovery exchanges wait up to SETUP_MARGIN_MS; the cycle's own timeouts are wire
time plus a margin from the control period (0.2 period, 3..8 ms).

Each cycle: one sync write of goal positions (joint rad -> servo rad through offset and direction ->
ticks); one fast sync read (sync read where the firmware lacks it) of Indirect Data 1..14 = hardware
error status, present current, velocity and position, bus watchdog and realtime tick; a follow-up sync
read of the servos the first read missed when the cycle has time left (a servo silent for
``stale_limit`` cycles leaves the main read and is probed every PROBE_EVERY cycles, so a dead servo
does not cost a timeout every cycle);
every ``health_period_s`` one servo's temperature and
voltage, round-robin. The state block carries each servo's bus watchdog: the loop arms a servo whose
watchdog reads off (torque comes on with it off, see _first_goals_and_torque_on) and clears one that
tripped, holding the robot until it is. The realtime tick dates each reply against a bound of the
servo's clock on the host's (readings.stale_replies): one sampled before this cycle's request is an
earlier request's answer taken late (``stale_replies``), treated as lost, never published as fresh;
its own reply, queued behind, is waited for without a new request. The read mode
follows the recent reply-failure rate (``read_strategy``): on a noisy line, where one garbled byte in
the long fast reply costs every servo after it, the cycle reads per-servo status packets (sync read) and
retries the lost servos while the cycle has time, with reply margins learnt from the line's reply
latency (read_strategy.ReplyLatency); it returns to fast sync read once the line is clean again.
With ``pipeline`` (one bus whose wire time leaves less than PIPELINE_SPARE_MS of the period, on a clean
line), a cycle sends the goals decided in the cycle before with its read request and, while the replies
are on the wire, takes the previous reading, publishes it and decides the next goals from it: reactions
to a reading reach the servos a cycle later.

Safety: a servo whose read failed keeps its last good value and is marked stale (never zeros); after
``stale_limit`` stale cycles, or on an Alert (hardware error), the configured policy runs: 'hold'
(every goal frozen at the present position) or 'torque_off'. A command older than
``command_timeout_s`` means hold. Estop runs ``estop_policy`` in the next cycle. NaN/inf and unknown
names reject a command; out-of-limit positions are clamped (or rejected) and counted. While running,
the goal leads the command by its velocity times ``velocity_lead_s`` (the servo profile's lag; holds get
no lead), and with ``command_extrapolation_s`` moves on along that velocity for the command's age when
the goals leave, up to that bound (a gait slower than the bus; running_goal_rad). Goals are
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
from snake_control.dynamixel.driver_config import (EVENT_MAX_CHARS, POLICIES, PROBE_EVERY,  # noqa: F401
                                                   SETUP_MARGIN_MS, TRANSMIT_FAULT_RECONNECT_S, DriverConfig, StartupError,
                                                   check_watchdog, default_watchdog_ms, watchdog_units)
from snake_control.dynamixel.conversion import (current_a_to_torque_nm, joint_to_ticks, ticks_to_joint,
                                                velocity_units_to_rad_s)
from snake_control.dynamixel.models import (CONTROL_TABLE, INDIRECT_ADDRESS_0, RAD_PER_TICK,
                                            RAD_S2_PER_ACCELERATION_UNIT, RAD_S_PER_VELOCITY_UNIT)
from snake_control.dynamixel.late_replies import LateWindow
from snake_control.dynamixel.read_strategy import ReadStrategy, ReplyLatency
from snake_control.dynamixel.realtime import precise_sleeps
from snake_control.dynamixel.readings import (HEALTH_BLOCK, INDIRECT_SOURCES, STATE_BLOCK,  # noqa: F401
                                              WATCHDOG_TRIPPED, Counters, DriverDiagnostics,
                                              JointStateSnapshot, ServoDiagnostics, ServoState, ServoTable,
                                              clock_leads, plausible_health,
                                              plausible_states, stale_replies)
from snake_control.dynamixel.safety import RampState, SafetyInputs, decide, ramp

log = logging.getLogger('snake_control.dynamixel.driver')

GOAL = CONTROL_TABLE['goal_position']
TORQUE = CONTROL_TABLE['torque_enable']
# Servos still on after a failed torque off are tried again every this many cycles.
TORQUE_OFF_RETRY_EVERY = 10
# A servo silent for this many cycles in a row (at least stale_limit) leaves the main read and is probed
# every PROBE_EVERY cycles: long enough that a noisy line (a servo missing a few reads in a row) never
# puts it there, short enough that an unplugged servo costs few timeouts.
QUARANTINE_AFTER = 50
# Follow-up reads of the servos a cycle's first read lost: at most this many rounds, each only while it
# still fits in this fraction of the control period.
MAX_FOLLOW_UPS = 6
MAX_NOISY_FOLLOW_UPS = 20
# Goals per sync write packet on a noisy line (read_strategy mode 'noisy').
NOISY_WRITE_GROUP = 4
FOLLOW_UP_BUDGET = 0.85
# On a noisy line the follow-ups may run until this long before the next cycle is due, when that is later
# than the budget: what the cycle does after its reads (decode, publish) takes a few tenths of a
# millisecond, and every read that fits keeps more servos fresh (at 1 % garbled bytes and 1 % lost
# replies, 100 Hz: every servo fresh in 85 % -> 93 % of cycles on the emulator, no more overruns).
NOISY_TAIL_MS = 0.5
# start() waits this long for the loop to see every servo's bus watchdog armed (a few cycles on a noisy
# line); a servo still unarmed then fails the start-up rather than run unguarded.
ARM_DEADLINE_S = 2.0
# Reply margin of follow-up reads and the quiet that ends the drain after an incomplete read (ms): each
# lost reply costs this, not the first read's margin, so a cycle has room for several rounds (on a
# noisy line, once learnt, the margins are the line's own: _reply_margin_ms). A reply later than this is lost for the cycle (stale), never taken for another's: every
# request clears the input buffer before it leaves.
QUICK_MARGIN_MS = 1.0
# How long a lost first-read reply may take to turn up whole before the read strategy counts it lost
# (a line noise suspect) rather than late: an emulator on a loaded host stalls for tens of milliseconds,
# then answers every queued request at once. Mode switches come this much later, a fraction of the
# strategy's own memory (about 20 cycles).
LATE_WINDOW_S = 0.25
# While more than this share of first-read replies comes late (read_strategy.late_rate), the first read
# waits longer for its reply: up to what the cycle's follow-up budget leaves. Follow-ups would only queue
# more requests behind the late answer.
LATE_EXTEND_RATE = 0.02
# A cycle is pipelined (Driver.pipeline) when the control period leaves less than this (ms) beside its
# wire time (goal write, fast read request and reply): what a sequential cycle adds to the wire, its
# own work and the reply's lateness, took 0.6-0.9 ms at 400 Hz. 32 servos at 4 Mbit/s leave 0.49 ms at
# 400 Hz, 1.3 ms at 300 Hz and 8 ms at 100 Hz, where a sequential cycle keeps time and reacts a cycle
# sooner.
PIPELINE_SPARE_MS = 1.0


_AS_IS = contextlib.nullcontext()


def _clip(a, lo, hi):
    """np.clip(a, lo, hi) for lo <= hi (NaN stays NaN) without np.clip's dispatch, a few times the cost
    of the work on a robot's few dozen joints."""
    return np.minimum(np.maximum(a, lo), hi)


def grid_start(epoch: float | None, now: float, period_s: float) -> float:
    """The first cycle time at or after now on the grid epoch + k * period (now itself without one).

    >>> grid_start(10.0, 10.25, 0.1)
    10.3
    """
    if epoch is None:
        return now
    return round(epoch + math.ceil((now - epoch) / period_s - 1e-9) * period_s, 9)


@dataclass
class _Command:
    position_rad: np.ndarray
    received_s: float
    velocity_rad_s: np.ndarray | None = None    # per joint; 0 where the command gave none
    taken_s: np.ndarray | None = None           # per joint: when its position and velocity came (monotonic s)


def running_goal_rad(position_rad: np.ndarray, velocity_rad_s: np.ndarray, taken_s: np.ndarray, sent_s: float,
                     reach_s: float, lead_s: float) -> np.ndarray:
    """The goal (rad) of a running command that leaves for the servos at sent_s (monotonic s): each
    joint's commanded position carried along its commanded velocity (rad/s) for the time since that
    joint's command was taken (taken_s), at most reach_s, plus lead_s of velocity for the servo's lag.

    reach_s lets the goal move between the commands of a gait slower than the bus and stops it reach_s
    after the last one, so a stalled gait drives nothing on; without it nothing is carried on. lead_s is
    the servo profile's lag past the time the goal leaves, whatever the command's age. A zero velocity
    moves nothing.

    >>> running_goal_rad(np.array([0.0, 1.0]), np.array([2.0, 0.0]), np.array([10.0, 10.0]), 10.004, 0.01, 0.0)
    array([0.008, 1.   ])
    >>> running_goal_rad(np.array([0.0]), np.array([2.0]), np.array([10.0]), 10.5, 0.01, 0.04)
    array([0.1])
    """
    if reach_s > 0.0:
        return position_rad + (_clip(sent_s - taken_s, 0.0, reach_s) + lead_s) * velocity_rad_s
    return position_rad + lead_s * velocity_rad_s


def follow_up_budget_ms(period_ms: float, noisy: bool) -> float:
    """How far into a control cycle of ``period_ms`` (ms from its start) the follow-up reads may run: the
    FOLLOW_UP_BUDGET share of the period, and on a noisy line until NOISY_TAIL_MS before the next cycle
    when that is later.

    >>> follow_up_budget_ms(10.0, False), follow_up_budget_ms(10.0, True), follow_up_budget_ms(2.5, True)
    (8.5, 9.5, 2.125)
    """
    budget_ms = FOLLOW_UP_BUDGET * period_ms
    return max(budget_ms, period_ms - NOISY_TAIL_MS) if noisy else budget_ms


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
        self.watchdog_ms = (default_watchdog_ms(self.rate_hz) if self.config.watchdog_ms is None
                            else int(self.config.watchdog_ms))
        check_watchdog(self.watchdog_ms, self.rate_hz)
        margin = self.config.margin_ms
        if margin is None:
            margin = min(8.0, max(3.0, 0.2 * self.period_s * 1000.0))
        self.margin_ms = margin
        self.bus = ServoBus(self.port, self.baud, margin)
        self.bus.drain_quiet_ms = min(margin, QUICK_MARGIN_MS)
        self.bus.late.fast_watch_s = LATE_WINDOW_S
        self.joints = list(robot.joints)
        self.names = [j.name for j in self.joints]
        self._names_tuple = tuple(self.names)
        self.index = {n: k for k, n in enumerate(self.names)}
        self.ids = [j.servo_id for j in self.joints]
        self.lower = robot.lower_rad.copy()
        self.upper = robot.upper_rad.copy()
        self.direction = np.array([j.direction for j in self.joints], dtype=float)
        self.offset = np.array([j.offset_rad for j in self.joints])
        self.velocity_limit = np.array([j.velocity_limit_rad_s for j in self.joints], dtype=float)
        self.acceleration_limit = np.array([j.acceleration_limit_rad_s2 for j in self.joints], dtype=float)
        self._max_goal_step = self.velocity_limit * self.period_s     # rad per cycle
        self._min_goal_step = -self._max_goal_step
        self._min_velocity = -self.velocity_limit
        self.model = robot.bus.servo
        self._amps_per_current_unit = (self.model.current_unit_ma or 0.0) / 1000.0
        self._tick_limits = None
        # Per-cycle values of every servo live in arrays (self.table); ServoState is one servo's view.
        self.table = ServoTable(len(self.joints))
        self.servos = [ServoState(j.name, j.servo_id, self.table, k) for k, j in enumerate(self.joints)]
        self._ids_array = np.array(self.ids)
        self._ids_bytes_array = np.array(self.ids, dtype=np.uint8)     # IDs as a sync write lists them
        self._ids_bytes = self._ids_bytes_array.tobytes()
        self._positions = np.arange(len(self.ids))
        self.by_id = {s.servo_id: s for s in self.servos}
        self.k_by_id = {sid: k for k, sid in enumerate(self.ids)}
        self._rows_cache: dict[tuple, tuple] = {}      # _rows_of
        self.counters = Counters()
        self.warnings: list[str] = []
        self.events: collections.deque = collections.deque(maxlen=200)
        self.read_strategy = ReadStrategy(self.config.read_mode)
        # How long this line's replies take beyond their wire time, to the reads after a cycle's first
        # and to the first (behind the goal writes, and the longest): on a noisy line the reply margins
        # are learnt from them. The first reads teach the others too, so that their margin follows the
        # line even in cycles whose first read leaves no time for another.
        self.retry_latency = ReplyLatency()
        self.first_latency = ReplyLatency(also=self.retry_latency)
        self._lock = threading.Lock()
        self._command: _Command | None = None
        self._command_names: list | None = None     # the last accepted command's names, and their indices
        self._command_idx = None
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
        self._health_due = 0.0                # monotonic s of the next health read
        self._read_order = list(self.ids)
        self._disconnected_since = None
        self._last_reconnect_try = -math.inf
        self._resume_after = 0.0            # commands older than this do not end a hold
        self._ramp: RampState | None = None  # resuming from a hold: the goal ramps to the command
        self._transmit_fault_since = None   # first of consecutive cycles whose packets did not leave
        self._unsettled_since = None        # when the last incomplete state read ended (_settle)
        # The last cycles' first reads, judged by the read strategy once the replies they lost have had
        # LATE_WINDOW_S to turn up late (late_replies).
        self._first_reads = LateWindow(math.ceil(LATE_WINDOW_S * self.rate_hz))
        self._last_read_ms = self._last_read_ms_due = 0.0     # the last state read: took, would have had
        # When this cycle's first read asked, and when each servo's reply this cycle had come (host
        # monotonic s): what a reply's Realtime Tick is judged against (readings.stale_replies).
        self._asked_s = math.nan
        self._replied_s = np.full(len(self.ids), np.nan)
        self._stale_ids: set[int] = set()    # servos the first read got only stale replies of
        self._decoded = None    # (replies, how many, rows, rows as a list, decoded blocks, when) of the first read
        self._rearm_pending: list[int] = []  # servos whose tripped bus watchdog awaits clearing
        self._arm_pending: set[int] = set()  # servos whose bus watchdog read off: armed with the next goals
        self.torque_off_unconfirmed: list[str] = []   # servo names a finished torque off left on
        self.max_goal_step_rad = 0.0        # largest goal change of a joint between running cycles
        self._torque_off_done = False
        self._atexit_registered = False
        # Called by the bus thread with each cycle's JointStateSnapshot, right after the read: publishing
        # here (not from a timer) neither delays nor aliases the measurement.
        self.on_state = None
        # With publish_behind, a cycle that ends when the next one is due (or would be, after on_state
        # has run) hands its snapshot to on_state only once the next cycle's fast read request has left,
        # while the replies are on the wire: a loop that cannot keep its rate then loses no time to it.
        # A next cycle that reads otherwise (sync read, a drain first) or talks to single servos first
        # (reconnect, re-arm, reboots, torque off) hands it over before that, not after.
        # Snapshots still go out one by one in order, each stamped when its servos were read; on_state
        # must not rely on the loop's own bookkeeping (cycle starts, counters) being this cycle's.
        self.publish_behind = False
        self._unpublished: JointStateSnapshot | None = None
        self._next_due_s = math.inf         # when the cycle after the one running is due (monotonic s)
        self._on_state_s = 0.0              # running mean of how long on_state takes (s)
        # With pipeline, a cycle whose wire time fills nearly all the period (pipeline_spare_ms) on a clean
        # line in fast read mode, running or holding, overlaps the host's work with its read: it sends
        # the goals decided in the cycle before at once with its read request; while the replies are on
        # the wire it checks and takes the previous cycle's reading, hands it to on_state and decides
        # the next goals from it; a reply with every servo's block is kept raw for the next cycle. Every
        # reaction to a reading comes a cycle later. Anything else (a lost servo, a noisy line, torque
        # off, reboots, re-arms, a reset, a reconnect, probes) runs the sequential cycle, after taking
        # the reading still pending.
        self.pipeline = False
        self.pipeline_spare_ms = PIPELINE_SPARE_MS
        self._pending = None                # (replies, IDs asked, asked s, replied s, stamp s) not yet taken
        self._next_goal: tuple | None = None   # (goal rad, _encode_goals') decided for the next pipelined cycle
        self._pipeline_break = False        # a pipelined reading held a stale reply: one sequential cycle settles
        self._replied_at = math.nan         # when the last state read's replies were in (monotonic s)
        self._first_read_span = None        # (request written, replies in) of this cycle's first read, monotonic s
        # Called first thing by the bus thread (real-time priority, CPU pinning); returns problems to log.
        self.thread_setup = None
        # A robot on several buses (snake_control.dynamixel.multibus): the other buses' worst fault as
        # (policy, reasons), and the time grid all buses' cycles fall on.
        self.peer_fault = None
        self.cycle_epoch: float | None = None
        self.fault_policy: str | None = None    # this bus's own fault this cycle (what the peers follow)
        self.fault_reasons: tuple = ()

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

    def cycle_wire_ms(self) -> float:
        """Wire time (ms) of a fast-read cycle of every servo: goal sync write, read request, reply."""
        n = len(self.ids)
        return (14 + 5 * n + 14 + n + P.sync_read_reply_bytes(n, STATE_BLOCK.size, True)) * self.bus.byte_time_ms

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
                for s in self.servos:           # every servo's health known before the loop starts
                    for _ in range(3):
                        if self._read_servo_health(s) is not None:
                            break
                # Torque on last, with the bus watchdog off: turning 32 servos on over a noisy line takes
                # longer than the watchdog, which would stop the first ones before the loop writes to
                # them. Each holds its present position meanwhile, as a tripped watchdog would.
                self._first_goals_and_torque_on()
        except (StartupError, DxlError, PortGone) as exc:
            with contextlib.suppress(PortGone):
                self._torque_off_all(deadline_s=self.config.torque_off_deadline_s)
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
        self._torque_off_done = False
        self._thread = threading.Thread(target=self._run, name='dxl-bus', daemon=True)
        self._thread.start()
        self._wait_armed()

    def _wait_armed(self):
        """Return once the loop, writing goals every cycle, has armed every servo's bus watchdog (read
        back in its state block); stop (torque off) and raise StartupError naming the servos it could
        not arm by ARM_DEADLINE_S."""
        if not self.watchdog_ms:
            return
        units = watchdog_units(self.watchdog_ms)
        deadline = time.monotonic() + ARM_DEADLINE_S
        while not np.all(self.table.watchdog == units):
            if time.monotonic() >= deadline or not self.running or self.mode not in ('hold', 'running'):
                unarmed = [f'{self.names[k]} (ID {self.ids[k]}, reads {int(self.table.watchdog[k])})'
                           for k in np.flatnonzero(self.table.watchdog != units).tolist()]
                why = self.fatal_error or '; '.join(self.reasons) or 'no answer'
                off = ('torque is off' if self.stop() else
                       f'torque off NOT confirmed on {", ".join(self.torque_off_unconfirmed)}')
                raise StartupError(f'{self.port}: bus watchdog ({self.watchdog_ms} ms) not armed on '
                                   f'{", ".join(unarmed)} after {ARM_DEADLINE_S:g} s ({why}); {off}')
            time.sleep(self.period_s / 2)
        log.info('bus watchdog armed on all %d servos (%d ms)', len(self.servos), self.watchdog_ms)

    def stop(self) -> bool:
        """Stop the loop, turn torque off on every servo (each confirmed, retried until the config's
        torque_off_deadline_s), close the port. Returns whether every servo is confirmed off; the
        names of the others are in ``torque_off_unconfirmed`` and logged as an error."""
        self._stop_request = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10.0)     # never two threads on the bus
        self._thread = None
        ok = self._shutdown_torque_off()
        if self.mode != 'fatal':
            self.mode = 'stopped'
        return ok

    def _shutdown_torque_off(self) -> bool:
        """Torque off for good (the loop has ended): retried per servo until confirmed or the deadline,
        reopening the port if the adapter went away meanwhile; the outcome is logged and kept."""
        if self._torque_off_done:
            return not self.torque_off_unconfirmed
        deadline = time.monotonic() + self.config.torque_off_deadline_s
        pending = [s.servo_id for s in self.servos]
        while pending and time.monotonic() < deadline:
            if not self.bus.is_open:
                try:
                    self.bus.open()
                except PortGone:
                    time.sleep(0.05)
                    continue
            self._torque_off_all(pending, deadline_s=max(0.0, deadline - time.monotonic()))
            pending = [s.servo_id for s in self.servos if s.torque]
        self.bus.close()
        self.torque_off_unconfirmed = [self.by_id[sid].name for sid in pending]
        if pending:
            log.error('torque off NOT confirmed on %d servo(s): %s', len(pending),
                      ', '.join(f'{self.by_id[sid].name} (ID {sid})' for sid in pending))
            self.reasons = [f'torque off not confirmed on {", ".join(self.torque_off_unconfirmed)}']
        else:
            log.info('torque off confirmed on all %d servos', len(self.servos))
        self._torque_off_done = True
        return not pending

    def set_command(self, names, positions_rad, velocities_rad_s=None) -> bool:
        """Take a joint command (any subset of joints by name), with optional velocities (empty or None:
        none; used only for the velocity lead). Returns whether it was accepted."""
        positions = np.asarray(positions_rad, dtype=float).ravel() if positions_rad is not None else None
        velocities = (np.asarray(velocities_rad_s, dtype=float).ravel()
                      if velocities_rad_s is not None and len(velocities_rad_s) else None)
        names = list(names) if names is not None else []
        with self._lock:
            if (positions is None or len(names) != len(positions) or not names
                    or (velocities is not None and len(velocities) != len(names))):
                self.counters.rejected_malformed += 1
                return False
            if names != self._command_names:    # a gait sends the same names every time: look up once
                unknown = [n for n in names if n not in self.index]
                if unknown:
                    self.counters.rejected_unknown_name += 1
                    self._event(f'command rejected: {len(unknown)} unknown joint(s) {unknown[:3]}')
                    return False
                self._command_names, self._command_idx = names, np.array([self.index[n] for n in names])
            if np.count_nonzero(np.isfinite(positions)) != len(positions):
                self.counters.rejected_nonfinite += 1
                self._event('command rejected: NaN or inf position')
                return False
            if velocities is not None and np.count_nonzero(np.isfinite(velocities)) != len(velocities):
                self.counters.rejected_nonfinite += 1
                self._event('command rejected: NaN or inf velocity')
                return False
            idx = self._command_idx
            lo, hi = self.lower[idx], self.upper[idx]
            outside = (positions < lo) | (positions > hi)
            if np.count_nonzero(outside):
                if not self.config.clamp_out_of_limit:
                    self.counters.rejected_out_of_limit += 1
                    self._event(f'command rejected: {np.array(names)[outside].tolist()} outside limits')
                    return False
                self.counters.clamped += int(np.count_nonzero(outside))
                positions = np.clip(positions, lo, hi)
            base = self._command.position_rad.copy() if self._command is not None else (
                self._goal.copy() if self._goal is not None else np.zeros(len(self.names)))
            base[idx] = positions
            # Joints this command leaves out keep their velocity; joints it names without one get 0.
            vel = (self._command.velocity_rad_s.copy() if self._command is not None
                   else np.zeros(len(self.names)))
            vel[idx] = velocities if velocities is not None else 0.0
            now = time.monotonic()
            # Joints this command leaves out keep the time of their own: their goals stop where theirs would.
            taken = self._command.taken_s.copy() if self._command is not None else np.full(len(self.names), now)
            taken[idx] = now
            self._command = _Command(base, now, vel, taken)
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

    def diagnostics(self) -> DriverDiagnostics:
        """Bus and per-servo health (a snapshot; dataclasses.asdict makes it JSON-able)."""
        with self._lock:
            starts = list(self._cycle_starts)
            jitter = np.array(self._jitter) if self._jitter else np.zeros(1)
        span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
        rate = (len(starts) - 1) / span if span > 0 else 0.0
        nan_none = lambda v: None if math.isnan(v) else v  # noqa: E731
        return DriverDiagnostics(
            mode=self.mode, reasons=list(self.reasons), fatal_error=self.fatal_error, port=self.port,
            baud=self.baud, rate_hz_target=self.rate_hz, cycle_rate_hz=rate,
            jitter_p99_ms=float(np.percentile(np.abs(jitter), 99) * 1000.0),
            read_mode=self.read_strategy.mode, reply_failure_rate=self.read_strategy.failure_rate,
            counters=dict(self.counters.__dict__),
            disconnected_for_s=(time.monotonic() - self._disconnected_since
                                if self.mode == 'disconnected' and self._disconnected_since else 0.0),
            watchdog_ms=self.watchdog_ms, torque_off_unconfirmed=list(self.torque_off_unconfirmed),
            warnings=list(self.warnings), events=list(self.events)[-10:],
            servos=[ServoDiagnostics(s.name, s.servo_id, s.stale_count, s.stale_cycles, s.hardware_error,
                                     P.decode_hardware_error(s.hardware_error), s.alert,
                                     nan_none(s.temperature_c), nan_none(s.voltage_v), s.health_stale,
                                     s.health_failures, s.torque, s.reboots, s.current_a)
                    for s in self.servos])

    @property
    def fast(self) -> bool:
        """Whether the cycle's first read is one fast sync read (see read_strategy)."""
        return self.read_strategy.fast

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
                    self.read_strategy.no_fast()
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
        indirect = b''.join(P.le(src, 2) for src in INDIRECT_SOURCES)
        self._retry(self.bus.write, sid, INDIRECT_ADDRESS_0, indirect)
        self._seed_clock(sid)                       # a rebooted servo's Realtime Tick starts again
        self._clear_watchdog(sid)
        w('status_return_level', 2)

    def _seed_clock(self, sid: int):
        """Bound the servo's clock lead (readings.clock_leads) afresh from a read of its Realtime Tick
        alone: nothing else is read with 2 data bytes, so the reply can only be this one (or an earlier
        one of the same read, which only makes the bound looser). Without it the first state reply
        after start-up or a reboot could not be judged, and a late line may hand over an old one."""
        k = self.k_by_id[sid]
        tick = self._retry(self.bus.read_register, sid, 'realtime_tick')
        t = self.table
        t.clock_lead_ms[k], t.clock_at_s[k] = (v[0] for v in clock_leads(
            np.array([tick]), np.array([time.monotonic()]), np.full(1, np.nan), np.full(1, np.nan)))

    def _clear_watchdog(self, sid: int):
        """Bus Watchdog off (0 also clears a trip): torque comes on without it, and the loop arms it."""
        self._retry(self.bus.write_register, sid, 'bus_watchdog', 0)
        self.by_id[sid].watchdog = 0

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
        for sid in ids:                     # the loop's first replies are judged from here on
            self._seed_clock(sid)
        present = np.array([s.position_rad for s in self.servos])
        self._goal = np.clip(present, self.lower, self.upper)
        self._hold_goal = self._goal.copy()

    def _torque_off_all(self, ids=None, deadline_s: float = 0.0) -> bool:
        """Torque off: one sync write to all, then a plain Write of Torque Enable = 0 to each servo not yet
        confirmed, whose acknowledgement confirms it (status return level 2), repeated until every servo
        is confirmed or ``deadline_s`` has passed (at least one round). One short exchange per servo gets
        through a noisy line far more often than a read and a write. A servo once confirmed stays
        confirmed. True if every servo is off.

        A lost acknowledgement costs the reply margin twice (the wait, then a drain until the line is
        quiet that long); with the start-up margin, at 5 % garbled bytes (most tries fail) the 2 s
        deadline would go on some 50 tries. So the tries wait the cycle's margin, which this line
        answers within every cycle, and drain only briefly: a late acknowledgement can only be this
        servo's to the same write (the others' carry their IDs), and it does confirm it. Only after a
        round in which no servo answered (a slow adapter or a starved host, not noise) does the next
        round wait the start-up margin."""
        if not self.bus.is_open:
            return False
        pending = [s for s in self.servos if ids is None or s.servo_id in ids]
        t_end = time.monotonic() + deadline_s
        margin_ms = self.margin_ms
        outer_margin_ms = self.bus.port.margin_ms
        try:
            with contextlib.suppress(CommError):
                self.bus.sync_write(TORQUE.address, 1, {s.servo_id: b'\x00' for s in pending})
            while True:
                self.bus.port.margin_ms = margin_ms
                left = []
                for s in pending:
                    try:
                        self.bus.write(s.servo_id, TORQUE.address, b'\x00', quiet_ms=QUICK_MARGIN_MS)
                        s.torque = False
                    except DxlError:
                        s.torque = True          # unconfirmed: assume still on
                        left.append(s)
                margin_ms = max(self.margin_ms, SETUP_MARGIN_MS) if len(left) == len(pending) else self.margin_ms
                pending = left
                if not pending or time.monotonic() >= t_end:
                    break
        except PortGone:
            return False
        finally:
            self.bus.port.margin_ms = outer_margin_ms
        return not pending

    # ================================================================ loop
    def _run(self):
        precise_sleeps()        # each cycle starts when due, not up to the default timer slack later
        if self.thread_setup is not None:
            for problem in self.thread_setup():
                self._event(problem)
                log.warning(problem)
        next_t = grid_start(self.cycle_epoch, time.monotonic(), self.period_s)
        while not self._stop_request:
            now = time.monotonic()
            if now < next_t:
                time.sleep(next_t - now)
                now = time.monotonic()
            with self._lock:
                self._jitter.append(now - next_t)
                self._cycle_starts.append(now)
            self._next_due_s = next_t + self.period_s
            try:
                self._cycle(now)
            except PortGone as exc:
                self._on_disconnect(str(exc))
            except Exception as exc:      # a bug, not a bus fault: torque off (retried, reported) and stop
                log.exception('driver loop failed')
                self.fatal_error = f'{type(exc).__name__}: {exc}'
                self.mode = 'fatal'
                self.reasons = [self.fatal_error]
                self._shutdown_torque_off()
                if self.torque_off_unconfirmed:
                    self.reasons.append(f'torque off not confirmed on {", ".join(self.torque_off_unconfirmed)}')
                self._hand_over_unpublished()
                return
            next_t += self.period_s
            after = time.monotonic()
            if after > next_t + self.period_s:     # overran by a whole period: do not try to catch up
                self.counters.overruns += 1
                next_t = after
        self._hand_over_unpublished()

    def _on_disconnect(self, why: str):
        if self.mode != 'disconnected':
            self.counters.disconnects += 1
            self._event(f'bus disconnected: {why}')
            self.mode = 'disconnected'
            self.reasons = [f'disconnected: {why}']
            self._disconnected_since = time.monotonic()
            self._hold_goal = self._goal.copy() if self._goal is not None else None
        self._discard_unsent()
        self.bus.close()
        self._transmit_fault_since = None
        self._ramp = None
        self._pending = self._next_goal = None      # a reading of the line before: not published
        for s in self.servos:
            s.fresh = False

    def _discard_unsent(self):
        """Drop what the adapter still holds to send: goals of cycles long past must not leave late."""
        with contextlib.suppress(Exception):
            if self.bus.is_open and self.bus.port.ser is not None:
                self.bus.port.ser.reset_output_buffer()

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
            self._discard_unsent()
            self.bus.close()
            return
        self.counters.reconnects += 1
        self._event('bus reconnected; holding until a new command')
        self.mode = 'hold'
        self._hold_goal = self._goal.copy()
        self._resume_after = time.monotonic()
        self.reasons = ['reconnected: waiting for a new command']
        for s in self.servos:
            s.stale_cycles = 0

    def _recheck_after_replug(self):
        """Same servos? Each holds where it is; those that lost torque (power-cycled) are configured
        again and get it back unless a hardware error is latched; the bus watchdog of the others is
        cleared (it stopped them while the bus was down) and armed again."""
        self._check_servos()
        hw = {}
        off = []
        for s in self.servos:
            hw[s.servo_id] = self._retry(self.bus.read_register, s.servo_id, 'hardware_error_status')
            if self._retry(self.bus.read_register, s.servo_id, 'torque_enable') == 0:
                off.append(s.servo_id)
        for sid in off:
            self._configure_servo(sid)
        for sid in self.ids:
            if sid not in off:
                self._clear_watchdog(sid)
        on_again = [sid for sid in off if not hw[sid]]
        self._first_goals_and_torque_on([sid for sid in self.ids if sid not in off] + on_again)
        for sid, bits in hw.items():
            self.by_id[sid].hardware_error = bits
            self.by_id[sid].alert = bool(bits)

    def _cycle(self, now: float):
        self.counters.cycles += 1
        if not self.bus.is_open:
            self._hand_over_unpublished()   # the last cycle's snapshot does not wait for a reconnect
            self._try_reconnect(now)
            self._publish(now)
            return
        with self._lock:
            command, estop = self._command, self._estop
            reset, self._reset_request = self._reset_request, False
        pipelined = self.pipeline and not reset and self._pipeline_fits()
        if not pipelined and (self._pending is not None or self._next_goal is not None):
            self._flush_pipeline(now)
        if reset:
            self._hand_over_unpublished()
            self._rearm()
        # How many servos are rebooting: nothing else changes it until the next cycle's _service_reboots.
        rebooting = self._service_reboots(now)
        if self._rearm_pending:
            # A servo whose tripped watchdog is not yet cleared ignores goals: hold until every one is,
            # so that the resume ramps from where they all stopped.
            self._resume_after = time.monotonic()
        encoded = None
        if pipelined and self._next_goal is not None:
            (goal, encoded), self._next_goal = self._next_goal, None
        else:
            goal = self._decide(now, command, estop)
            pipelined = pipelined and self.mode in ('running', 'hold')
        sent = self._write_goals(goal, rebooting, encoded)
        read_start = time.monotonic()
        self._first_read_span = None
        if pipelined:
            self.counters.pipelined_cycles += 1
            sent = self._read_ahead(now) and sent
        else:
            sent = self._read_state(now, rebooting) and sent
            # This sequential read settled the line. Cleared here, not only on leaving the pipeline: the
            # reading taken then may itself hold stale replies, and with nothing left pending the mark
            # would keep every later cycle sequential.
            self._pipeline_break = False
        # The servos sample their state while the cycle's first read is on the wire (request written to
        # replies in): its midpoint is the measurement time. Not the whole read step's: the follow-ups of
        # lost servos and the decoding after it would move the stamp past the read it dates.
        span = self._first_read_span
        stamp = 0.5 * (span[0] + span[1]) if span is not None else 0.5 * (read_start + time.monotonic())
        if self._pending is not None and self._pending[4] is None:
            self._pending = self._pending[:4] + (stamp,)     # published by the next cycle, with this stamp
        if sent:
            self._transmit_fault_since = None
        else:
            # The adapter took no bytes (a stalled or overloaded line): a bus fault like a lost reply.
            # Stale servos hold the robot; if it lasts, the bus is closed and checked again on reopening.
            self.counters.transmit_failures += 1
            if self._transmit_fault_since is None:
                self._transmit_fault_since = now
            elif now - self._transmit_fault_since >= TRANSMIT_FAULT_RECONNECT_S:
                self._on_disconnect(f'transmit failing for {now - self._transmit_fault_since:.1f} s')
                self._publish(stamp)
                return
        if self._health_is_due():
            with self._quick_margin(self.read_strategy.noisy):
                self._read_health()
        if self._pending is None:
            self._publish(stamp)

    # ---------------------------------------------------------------- the pipelined cycle
    def _pipeline_fits(self) -> bool:
        """Whether this cycle may be pipelined (see Driver.pipeline): a clean line read fast, running or
        holding, nothing that talks to single servos or drains the line, every servo in the read."""
        t = self.table
        if (self.mode not in ('running', 'hold') or self.read_strategy.mode != 'fast'
                or self._pipeline_break or self._rearm_pending or self._unsettled_since is not None
                or self._transmit_fault_since is not None
                or self.period_s * 1000.0 - self.cycle_wire_ms() >= self.pipeline_spare_ms):
            return False
        if self._pending is not None and self._next_goal is None:
            return False        # the last decision needs the sequential cycle (torque off)
        if self._rebooting() or (self.config.auto_reboot and np.count_nonzero(t.alert)):
            return False
        return not np.count_nonzero(t.stale_cycles >= max(self.config.stale_limit, QUARANTINE_AFTER))

    def _flush_pipeline(self, now: float):
        """Leave the pipeline: the pending reading into the table and out to on_state, and the goal
        decided from the one before dropped (the sequential cycle decides again, from the newer reading)."""
        self._next_goal = None
        pending, self._pending = self._pending, None
        self._pipeline_break = False
        if pending is not None:
            self._take_pending(now, pending)

    def _take_pending(self, now: float, pending: tuple):
        """A pipelined cycle's raw reading: its Realtime Ticks checked against its own request's time,
        taken into the table, handed to on_state with its own stamp."""
        got, ids, asked_s, replied_s, stamp = pending
        got, dropped = self._drop_stale(got, True, replied_s, complete=True, asked_s=asked_s, watch=False)
        if dropped:
            # Its own replies were queued behind: the sequential cycle's read settles the line.
            self._pipeline_break = True
        self._absorb(now, got, ids, rearm=False)
        self._publish(stamp, behind=False)

    def _deferred_work(self, pending):
        """Run while a pipelined cycle's replies are on the wire: the last cycle's reading taken and
        published, the next cycle's goals decided from it."""
        self._hand_over_unpublished()       # a sequential cycle's snapshot first: in order
        now = time.monotonic()
        if pending is not None:
            self._take_pending(now, pending)
        with self._lock:
            command, estop = self._command, self._estop
        goal = self._decide(now, command, estop, deferred=True)
        # Encoded now: the servo table's torque flags, which choose the servos written, change only when a
        # reading is taken (next in the next cycle's wire time, after these goals have left) or in
        # sequential cycles, which drop these goals.
        self._next_goal = None if goal is None else (goal, self._encode_goals(goal, 0))

    def _read_ahead(self, now: float) -> bool:
        """A pipelined cycle's state read (see Driver.pipeline): every servo, fast; the last cycle's
        reading taken and the next goals decided while the replies are on the wire. A reply with every
        servo's block stays raw until the next cycle; one that lost servos is checked, followed up and
        taken now, as in _read_state. False when the request could not be sent."""
        ids = list(self._read_order)
        self._judge_first_read()
        extra_ms = self._first_read_extra_ms(now, len(ids), True)
        pending, self._pending = self._pending, None
        ran = []

        def deferred():
            ran.append(True)
            self._deferred_work(pending)
        self.bus.after_send = deferred
        self._stale_ids.clear()
        try:
            got = self._sync_read(ids, True, quick=False, extra_ms=extra_ms, defer=True)
            asked_s = self._asked_s
        except CommError:                   # the request did not leave: no reply this cycle
            if not ran:
                deferred()
            self._next_goal = None          # the next cycle is sequential (transmit fault)
            self._read_not_sent()
            return False
        if not ran:
            deferred()
        lost, retry = self._judge_read(ids, ids, got, extra_ms, True)
        if not lost:
            self._pending = (got, ids, asked_s, self._replied_at, None)
            return True
        self._follow_up(now, got, retry)
        self._absorb(now, got, ids)
        return True

    # ---------------------------------------------------------------- decisions
    def _decide(self, now, command, estop, deferred: bool = False) -> np.ndarray | None:
        """The goal for this cycle (joint rad): safety.decide's mode and goal, the policy's action, and the
        resume ramp after any hold. ``deferred``: decided ahead by a pipelined cycle while its replies
        are on the wire; None (nothing changed) when the decision is torque off, which writes to each
        servo and is left to the next, sequential cycle."""
        previous = self.mode if self.mode in ('running', 'hold', 'torque_off') else 'hold'
        peer_policy, peer_reasons = self.peer_fault() if self.peer_fault is not None else (None, ())
        t = self.table
        # The table's own arrays: decide only reads them, and copies what becomes a goal.
        d = decide(SafetyInputs(
            now_s=now, command_rad=None if command is None else command.position_rad,
            command_received_s=command.received_s if command is not None else -math.inf, estop=estop,
            names=self._names_tuple, hardware_error=t.hardware_error, alert=t.alert,
            stale_cycles=t.stale_cycles, present_rad=t.position_rad, hold_goal_rad=self._hold_goal,
            previous_mode=previous, resume_after_s=self._resume_after,
            stale_limit=self.config.stale_limit, stale_policy=self.config.stale_policy,
            alert_policy=self.config.alert_policy, estop_policy=self.config.estop_policy,
            command_timeout_s=self.config.command_timeout_s, peer_policy=peer_policy,
            peer_reasons=peer_reasons))
        if deferred and d.mode == 'torque_off':
            return None
        self.fault_policy = d.fault_policy
        self.fault_reasons = tuple(r for r in d.reasons if r not in peer_reasons) if peer_reasons else d.reasons
        if d.command_timed_out:
            self.counters.stale_commands += 1
        # A stale servo is a fault of this bus (decide): without one, no servo can be stale.
        if d.fault_policy is not None and np.count_nonzero(t.stale_cycles >= self.config.stale_limit):
            self.counters.stale_hold_cycles += 1
        reasons = list(d.reasons)
        if d.mode == 'torque_off':
            self._hand_over_unpublished()   # torque off writes each servo in turn
            if d.entered:
                self.counters.policy_actions += 1
                self._event(f'torque off: {"; ".join(reasons)}')
                self._torque_off_all(deadline_s=0.5)
            elif self.counters.cycles % TORQUE_OFF_RETRY_EVERY == 0 and any(s.torque for s in self.servos):
                # Torque off not yet confirmed everywhere (lost replies, a silent servo): keep trying.
                self._torque_off_all([s.servo_id for s in self.servos if s.torque])
            unconfirmed = [s.name for s in self.servos if s.torque]
            if unconfirmed:
                reasons.append(f'torque off not confirmed on {", ".join(unconfirmed)}')
            self.mode, self.reasons, self._ramp = 'torque_off', reasons, None
            self._hold_goal = np.clip(d.goal_rad, self.lower, self.upper)
            return self._hold_goal
        if d.mode == 'hold':
            if d.entered:
                self.counters.policy_actions += 1
                self._hold_goal = np.clip(d.goal_rad, self.lower, self.upper)
                self._event(f'hold: {"; ".join(reasons)}')
            self.mode, self.reasons, self._ramp = 'hold', reasons, None
            return self._hold_goal
        command_rad = d.goal_rad
        lead_s, reach_s = self.config.velocity_lead_s, self.config.command_extrapolation_s
        if (lead_s > 0 or reach_s > 0) and command is not None:
            # Lead the goal by the servo's lag (goal = q + v·τ): the profile trails a moving goal, so
            # the joint ends up near q. With command_extrapolation_s, carry it on along v for the
            # command's age when it leaves: now, or, decided ahead in a pipelined cycle, at the next
            # cycle's start. Such a goal may be a cycle older than its decision: its bound is a period
            # longer, or it would stop short whenever the next command came in between. The velocity
            # is bounded by the joint's limit, so a wild one moves the goal at most
            # velocity_limit·(τ + bound); the limits below clip the sum.
            sent_s, bound_s = now, reach_s
            if deferred and reach_s > 0 and math.isfinite(self._next_due_s):
                sent_s, bound_s = max(self._next_due_s, now), reach_s + self.period_s
            velocity = _clip(command.velocity_rad_s, self._min_velocity, self.velocity_limit)
            command_rad = running_goal_rad(command_rad, velocity, command.taken_s, sent_s, bound_s, lead_s)
            if reach_s > 0 and now - command.received_s > reach_s:
                self.counters.extrapolation_capped += 1
        command_rad = _clip(command_rad, self.lower, self.upper)
        if d.entered:
            # Resume from the held pose at rest: the goal ramps to the command within the joint limits.
            start = self._goal if self._goal is not None else command_rad
            self._ramp = RampState(start.copy(), np.zeros(len(self.names)), command_rad.copy())
            self.counters.ramps += 1
            self._event('resuming: ramping from the held pose to the command')
        self.mode, self.reasons = 'running', []
        if self._ramp is None:
            goal = command_rad
        else:
            goal, done = ramp(self._ramp, command_rad, self.period_s, self.velocity_limit,
                              self.acceleration_limit)
            if done:
                self._ramp = None
        if self._goal is not None:
            # Last line of defence: no goal moves faster than its joint's velocity limit, whatever the
            # command did (a late or jumping command stream).
            goal = self._goal + _clip(goal - self._goal, self._min_goal_step, self._max_goal_step)
            # Moving goals only: entering a hold steps a goal back to where its servo is, not onwards.
            self.max_goal_step_rad = max(self.max_goal_step_rad,
                                         float(np.maximum.reduce(np.abs(goal - self._goal))))
        return goal

    def _rearm(self):
        """After a stop: torque on again (goal = present) where it is off and nothing is latched."""
        if self.mode == 'torque_off':
            ids = [s.servo_id for s in self.servos if not s.hardware_error]
            try:
                with self._patient():
                    for sid in ids:             # torque on without the watchdog; the loop arms it again
                        self._clear_watchdog(sid)
                    self._first_goals_and_torque_on(ids)
            except (DxlError, StartupError) as exc:
                self._event(f're-arm failed (trying again): {exc}')
                with self._lock:
                    self._reset_request = not self._estop      # a new estop cancels the re-arm
                return
            self.mode = 'hold'
        self._resume_after = time.monotonic()
        self._event('re-armed; holding until a new command')

    def _rebooting(self) -> int:
        """How many servos are rebooting (a time in rebooting_until, not NaN)."""
        r = self.table.rebooting_until
        return np.count_nonzero(r == r)

    def _service_reboots(self, now) -> int:
        """Configure servos whose reboot has ended, reboot overloaded ones (auto_reboot). Returns how many
        servos are rebooting now."""
        t = self.table
        rebooting = self._rebooting()
        if not rebooting and not (self.config.auto_reboot and np.count_nonzero(t.alert)):
            return 0                        # every cycle but one with a servo in trouble
        self._hand_over_unpublished()       # exchanges with single servos follow
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
            return self._rebooting()
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
        return self._rebooting()

    # ---------------------------------------------------------------- bus I/O
    def _encode_goals(self, goal: np.ndarray, rebooting: int) -> tuple:
        """Clip and check goals (joint rad) and encode them for the servos that take goals now: (goals
        clipped, their IDs as bytes or None when no goal is to be sent, ticks as bytes)."""
        goal = _clip(np.asarray(goal, dtype=float), self.lower, self.upper)
        if np.count_nonzero(np.isfinite(goal)) != goal.size:    # cannot happen; never let it reach a register
            raise RuntimeError('non-finite goal computed')
        if self.mode == 'torque_off':
            return goal, None, b''
        lo_t, hi_t = self.tick_limits()
        raw = _clip(self.joint_to_ticks(goal), lo_t, hi_t).astype('<i4').tobytes()
        t = self.table
        sendable = t.torque & (t.rebooting_until != t.rebooting_until) if rebooting else t.torque  # NaN: not
        if np.count_nonzero(sendable) == len(self.ids):
            return goal, self._ids_bytes, raw
        rows = np.flatnonzero(sendable)
        if not len(rows):
            return goal, None, b''
        return goal, self._ids_bytes_array[rows].tobytes(), np.frombuffer(raw, '<i4')[rows].tobytes()

    def _write_goals(self, goal: np.ndarray, rebooting: int, encoded: tuple | None = None) -> bool:
        """Clip, check and queue this cycle's goals (they leave with the read request); ``rebooting``: how
        many servos are rebooting (their goals wait); ``encoded``: _encode_goals' result for them, made
        ahead. False when the packet could not be sent."""
        goal, ids, raw = encoded if encoded is not None else self._encode_goals(goal, rebooting)
        self._goal = goal
        if ids is None:
            return True
        try:
            if self._arm_pending:
                self._arm_watchdogs()
            self._held_sync_write(GOAL.address, 4, ids, raw)
        except CommError:
            self.counters.write_failures += 1
            return False
        return True

    def _held_sync_write(self, address: int, size: int, ids: bytes, data: bytes):
        """Sync write of ``size`` bytes to each servo of ``ids`` (bytes), their blocks one after another
        in ``data``, held back to leave with the cycle's read request. On a noisy line one garbled byte
        voids a whole sync write: 32 goals in one 174-byte packet reach their servos 17 % of the time at
        1 %, in packets of NOISY_WRITE_GROUP (34 bytes) 71 %, for 14 bytes more per packet."""
        if not self.read_strategy.noisy or len(ids) <= NOISY_WRITE_GROUP:
            self.bus.sync_write_blocks(address, size, ids, data, hold=True)
            return
        for k in range(0, len(ids), NOISY_WRITE_GROUP):
            self.bus.sync_write_blocks(address, size, ids[k:k + NOISY_WRITE_GROUP],
                                       data[k * size:(k + NOISY_WRITE_GROUP) * size], hold=True)

    def _arm_watchdogs(self):
        """Arm the bus watchdog of the servos whose last read showed it off, in the packet before this
        cycle's goals: from here on the loop writes to them every cycle. Not confirmed: the cycle's read
        carries the register, and a servo the write missed is armed again next cycle."""
        value = bytes((watchdog_units(self.watchdog_ms),))
        ids, self._arm_pending = sorted(self._arm_pending), set()
        self._held_sync_write(CONTROL_TABLE['bus_watchdog'].address, 1, bytes(ids), value * len(ids))

    def _read_state(self, now: float, rebooting: int) -> bool:
        """Read every servo's state block into the servo table; mark the others stale. ``rebooting``: how
        many servos are rebooting (they are not asked). False when the read request could not be sent
        (transmit failure)."""
        # A servo silent for QUARANTINE_AFTER cycles leaves the main read (where it would cost a timeout
        # every cycle) and is read with the others every PROBE_EVERY cycles, until it answers again.
        # Probes go in the main read, never in a follow-up that a late cycle skips: otherwise a servo
        # that a noisy line put here would never come back.
        quarantine_after = max(self.config.stale_limit, QUARANTINE_AFTER)
        t = self.table
        if not rebooting and not np.count_nonzero(t.stale_cycles >= quarantine_after):
            quarantined, ids = set(), list(self._read_order)     # every cycle but a faulty bus's
        else:
            active = [sid for sid in self._read_order if self.by_id[sid].rebooting_until is None]
            quarantined = {sid for sid in active if self.by_id[sid].stale_cycles >= quarantine_after}
            probes = {sid for sid in quarantined
                      if (self.counters.cycles + self.k_by_id[sid]) % PROBE_EVERY == 0}
            ids = [sid for sid in active if sid not in quarantined or sid in probes]
        strategy = self.read_strategy
        got: dict = {}
        if self._unsettled_since is not None:
            self._hand_over_unpublished()   # the line may be drained first
        self._settle()
        self._judge_first_read()
        extra_ms = self._first_read_extra_ms(now, len(ids), strategy.fast)
        if self._unpublished is not None:
            if strategy.fast and ids:
                # The last cycle's snapshot goes to on_state while this read's replies are on the wire
                # (a fast read's wait learns no margins that the delay could skew).
                self.bus.after_send = self._hand_over_unpublished
            else:
                self._hand_over_unpublished()
        try:
            if ids:
                self._stale_ids.clear()
                got = self._sync_read(ids, strategy.fast, quick=False, extra_ms=extra_ms)
        except CommError:                   # the request did not leave: no reply this cycle
            self._read_not_sent()
            return False
        # The failure rate counts servos expected to answer, not quarantined ones' probes.
        counted = [sid for sid in ids if sid not in quarantined] if quarantined else ids
        _, retry = self._judge_read(ids, counted, got, extra_ms, strategy.fast)
        self._follow_up(now, got, retry)
        self._absorb(now, got, ids)
        return True

    def _read_not_sent(self):
        """A cycle's first read whose request could not be sent: every servo stale this cycle."""
        t = self.table
        t.fresh[:] = False
        t.stale_cycles += 1
        t.stale_count += 1
        self.counters.read_failures += len(self.servos)
        self.counters.full_read_failures += 1

    def _judge_read(self, ids: list, counted: list, got: dict, extra_ms: float, fast: bool) -> tuple[list, list]:
        """A cycle's first read of ``ids`` into the read strategy, counting the servos of ``counted``:
        (the servos lost, those of them worth asking again this cycle)."""
        # (The replies are of servos asked: when all came, none is lost.)
        lost = [] if len(got) == len(ids) else [sid for sid in counted if sid not in got]
        # A servo whose own reply is still queued behind an earlier one: another request would queue too.
        retry = [sid for sid in lost if sid not in self._stale_ids] if self._stale_ids else lost
        # Replies taken after the deadline the read would have had without the extension.
        caught = len(counted) - len(lost) if extra_ms and self._last_read_ms > self._last_read_ms_due else 0
        if fast and lost and self.bus.garbled_in_time:
            # Blocks of the reply came in time and broke: garbled, not late, so judged now rather than
            # after LATE_WINDOW_S (a noisy line then costs a few cycles of fast reads, not 25).
            self._record_first_read(len(counted), len(lost), 0, caught)
        else:
            self._first_reads.add(len(counted), set(lost), caught)
        return lost, retry

    def _absorb(self, now: float, got: dict, ids: list, rearm: bool = True):
        """A state read's replies ``got`` of the servos ``ids`` asked into the servo table: the others
        stale, the next read's order. ``rearm``: clear tripped watchdogs now (a pipelined cycle, whose
        line is busy, leaves them to the next cycle, which reads sequentially while any is pending)."""
        t = self.table
        if ids and not got:
            self.counters.full_read_failures += 1
        good = self._take_states(got)
        if rearm and self._rearm_pending:
            with self._quick_margin(self.read_strategy.noisy):
                self._service_rearms(now)
        n = len(self.ids)
        failed = n - int(np.count_nonzero(good))
        if failed:
            stale = ~good
            t.fresh[stale] = False
            t.stale_cycles[stale] += 1
            t.stale_count[stale] += 1
        self.counters.read_failures += failed
        self.counters.all_fresh_cycles += failed == 0
        # Servos that failed go last (a silent one then truncates no one else's fast-read block); ties
        # rotate, so two servos behind one silent servo do not keep hiding behind each other.
        c = self.counters.cycles
        if np.count_nonzero(t.stale_cycles):
            self._read_order = self._ids_array[np.lexsort(((self._positions + c) % n, t.stale_cycles))].tolist()
        else:                               # all tied: the lexsort's order is the IDs rotated by c
            r = -c % n
            self._read_order = self.ids[r:] + self.ids[:r]

    def _judge_first_read(self):
        """First reads of LATE_WINDOW_S ago go into the read strategy: their lost replies that arrived
        whole since (inside a later read, or cleared before a request) were late, not garbled, and are
        counted as late_replies instead of toward a noisy line."""
        window = self._first_reads
        late = self.bus.collect_late()
        if late:
            window.credit(late)
        for requested, lost, n_late, caught in window.judged():
            self._record_first_read(requested, lost, n_late, caught)
        self.bus.late.watch_only(window.watched())

    def _record_first_read(self, requested: int, lost: int, n_late: int, caught: int):
        """One cycle's first read into the read strategy (read_strategy.ReadStrategy.record)."""
        self.counters.late_replies += n_late
        self.counters.late_replies_caught += caught
        event = self.read_strategy.record(requested, lost, n_late, caught)
        if event:
            self.counters.mode_switches += 1
            self._event(event)

    def _first_read_extra_ms(self, now: float, n: int, fast: bool) -> float:
        """How much longer than wire time plus margin the first read waits for its reply: nothing on a
        line that answers in time; while replies come late (LATE_EXTEND_RATE), whatever the cycle's
        follow-up budget leaves after the read itself. Nothing on a noisy line either: there a lost
        reply is mostly a garbled request or reply, which no wait brings, and a reply that came late
        raises the learnt margin instead (ReplyLatency)."""
        if self.read_strategy.late_rate < LATE_EXTEND_RATE or not n or self.read_strategy.noisy:
            return 0.0
        reply_bytes = P.sync_read_reply_bytes(n, STATE_BLOCK.size, fast)
        read_ms = (14 + n + reply_bytes) * self.bus.byte_time_ms + self.margin_ms
        elapsed_ms = (time.monotonic() - now) * 1000.0
        return max(0.0, FOLLOW_UP_BUDGET * self.period_s * 1000.0 - elapsed_ms - read_ms)

    def _follow_up(self, now: float, got: dict, missing: list):
        """Read again the servos the first read lost, in rounds of sync read while the cycle has time
        for one more: one garbled byte then costs a few servos, not the whole cycle."""
        if not missing:
            return
        budget_ms = follow_up_budget_ms(self.period_s * 1000.0, self.read_strategy.noisy)
        quick_ms = self._reply_margin_ms(first=False)
        # On a noisy line every round that fits the cycle is worth it: each one leaves a share q of the
        # missing servos missing (one read's loss), so r rounds leave q^r.
        max_rounds = MAX_FOLLOW_UPS if not self.read_strategy.noisy else MAX_NOISY_FOLLOW_UPS
        # A read waits its margin for the first reply, and a clean line's reads the margin again for a
        # last lost one; on a noisy line the margin is this line's (learnt), and a lost last reply is
        # one of many.
        margins = 1 if self.read_strategy.noisy else 2
        rounds = 0
        while missing and rounds < max_rounds:
            elapsed_ms = (time.monotonic() - now) * 1000.0
            need_ms = (14 + len(missing) * (12 + STATE_BLOCK.size)) * self.bus.byte_time_ms + margins * quick_ms
            free_running = rounds == 0 and self.rate_hz >= 1000
            if elapsed_ms + need_ms > budget_ms and not free_running:
                break
            rounds += 1
            try:
                more = self._sync_read(missing, False, quick=True)
            except CommError:
                break
            got.update(more)
            missing = [sid for sid in missing if sid not in got]

    def _sync_read(self, ids: list, fast: bool, quick: bool, extra_ms: float = 0.0, defer: bool = False) -> dict:
        """One sync read of the state block (``quick``: with the short margin; ``extra_ms``: waiting that
        much longer for the reply; ``defer``: a reply with every servo's block is returned raw, its
        Realtime Ticks checked by the caller a cycle later, _take_pending). An incomplete one is not
        drained here: the next read of the cycle
        follows at once (a late reply it takes is still this cycle's), and the next cycle's first read
        settles the line first (_settle)."""
        self.counters.state_reads += 1
        start = time.monotonic()
        with self._margin(self._reply_margin_ms(first=not quick)):
            got = self.bus.sync_read(STATE_BLOCK.data_address, STATE_BLOCK.size, ids, fast, drain=False,
                                     extra_ms=extra_ms,
                                     latency=None if fast else self.retry_latency if quick else self.first_latency)
            reply_bytes = P.sync_read_reply_bytes(len(ids), STATE_BLOCK.size, fast)
            self._last_read_ms_due = (14 + len(ids) + reply_bytes) * self.bus.byte_time_ms + self.bus.port.margin_ms
        replied = time.monotonic()
        self._last_read_ms = (replied - start) * 1000.0
        self._replied_at = replied
        if not quick:
            # The cycle's replies are dated against the moment its request was written, not when the cycle
            # set out to ask: a thread switch between the two would pass a reply sampled in it.
            self._asked_s = self.bus.sent_s
            # Ends when the replies came off the line, not on return: a thread switch after it would date
            # the reading late.
            off_line = self.bus.replied_s
            self._first_read_span = (self._asked_s, off_line if self._asked_s <= off_line <= replied else replied)
        if got and not (defer and len(got) == len(ids)):
            got, stale = self._drop_stale(got, fast, replied, complete=len(got) == len(ids))
            if stale and not quick:
                got.update(self._listen(stale, len(ids), fast))
                self._stale_ids.update(sid for sid in stale if sid not in got)
        self._unsettled_since = None if len(got) == len(ids) else time.monotonic()
        return got

    def _listen(self, stale: list, n: int, fast: bool) -> dict:
        """The first read took earlier requests' replies of ``stale`` servos for its own: their own
        replies are queued right behind. Wait for them (no new request, which would only queue behind
        too) as long as the read's own wire time and margin, within the cycle's follow-up budget."""
        size = STATE_BLOCK.size
        reply_bytes = P.sync_read_reply_bytes(n, size, fast)
        reply_ms = reply_bytes * self.bus.byte_time_ms + self.margin_ms
        got: dict = {}
        while stale:
            left_ms = FOLLOW_UP_BUDGET * self.period_s * 1000.0 - (time.monotonic() - self._asked_s) * 1000.0
            if left_ms <= 0:
                break
            heard = self.bus.listen(size, stale, min(reply_ms, left_ms))
            if not heard:
                break
            heard, _ = self._drop_stale(heard, fast, time.monotonic(), complete=False)
            got.update(heard)
            stale = [sid for sid in stale if sid not in got]
        return got

    def _rows_of(self, sids: tuple) -> tuple[np.ndarray, list]:
        """The table rows of servos ``sids`` (IDs in reply order) as an array and a list. A cycle's
        replies come in one of a few orders (the read order rotates), so each is looked up once."""
        rows = self._rows_cache.get(sids)
        if rows is None:
            if len(self._rows_cache) >= 256:
                self._rows_cache.clear()
            ks = [self.k_by_id[sid] for sid in sids]
            k = np.array(ks, dtype=np.intp)
            k.flags.writeable = False       # shared by every cycle of this order
            rows = self._rows_cache[sids] = (k, ks)
        return rows

    def _drop_stale(self, got: dict, fast: bool, replied_s: float, complete: bool, asked_s: float | None = None,
                    watch: bool = True) -> tuple[dict, list]:
        """The replies of a state read less those that answer an earlier request (their Realtime Tick
        dates them before this cycle's request: readings.stale_replies). A late line (a starved host, an
        adapter that buffers) can deliver a whole earlier reply, good CRC and all, inside this read; it is
        counted as a stale reply and the servo treated as lost, and its own reply, still on its way, is
        watched for (_listen, then as a late reply). ``asked_s``: when the read asked (this cycle's first
        read's by default); ``watch``: False for a read checked a cycle later (pipelined), whose own late
        replies are long past watching. Returns (the replies kept, the servos dropped)."""
        t, size = self.table, STATE_BLOCK.size
        errs, blocks = zip(*got.values())
        raw = b''.join(blocks)
        whole = len(raw) == size * len(blocks) and not any(errs)
        if whole:                           # nearly always: every block whole, no error byte
            sids = tuple(got)
        else:                               # error bytes and odd sizes are _take_states' to judge
            sids = tuple(sid for sid, (err, data) in got.items() if len(data) == size and not err & 0x7F)
            if not sids:
                return got, []
            raw = b''.join([got[sid][1] for sid in sids])
        k, ks = self._rows_of(sids)
        v = STATE_BLOCK.decode_many(raw)
        ticks = v['realtime_tick']
        self._replied_s[k] = replied_s
        stale = stale_replies(ticks, self._asked_s if asked_s is None else asked_s, t.clock_lead_ms[k],
                              t.clock_at_s[k])
        if not np.count_nonzero(stale):
            # _take_states takes these very replies when no follow-up adds any: decoded once.
            self._decoded = (got, len(got), k, ks, v, replied_s) if whole else None
            return got, []
        dropped = [sids[i] for i in np.flatnonzero(stale).tolist()]
        self.counters.stale_replies += len(dropped)
        got = {sid: reply for sid, reply in got.items() if sid not in dropped}
        if not watch:
            return got, dropped
        for sid in dropped:
            self.bus.late.duplicate(sid)    # the reply an earlier read missed: it came, late
        self.bus.late.expect(dropped, size, fast, in_flight=not complete)
        return got, dropped

    def _settle(self):
        """Before a cycle's first read: no reply of an earlier cycle may pass for one of this cycle. A
        reply late by up to the drain's quiet time has arrived by now, and the request clears the input
        buffer before it leaves; only when the last incomplete read ended less than that ago (a late
        cycle) is the line drained until quiet. The wait falls in the sleep between cycles."""
        if self._unsettled_since is None:
            return
        quiet_ms = self.bus.drain_quiet_ms if self.bus.drain_quiet_ms is not None else self.margin_ms
        if (time.monotonic() - self._unsettled_since) * 1000.0 < quiet_ms:
            self.bus.drain(quiet_ms)
        self._unsettled_since = None

    def _reply_margin_ms(self, first: bool) -> float:
        """The reply margin (ms) of a cycle's first read (``first``) or of the exchanges after it: the
        configured margin and QUICK_MARGIN_MS; on a noisy line, once learnt, the one that gets the most
        replies per ms from what this line's replies took (ReplyLatency), within the configured margin.
        A garbled request gets no reply and costs its read the whole margin, so a margin that fits the
        line leaves time for more reads, whether the line answers in 0.1 ms or an adapter's latency
        timer adds 1 ms."""
        fixed = self.margin_ms if first else min(self.margin_ms, QUICK_MARGIN_MS)
        if not self.read_strategy.noisy:
            return fixed
        # What a read costs besides its wait: the first reads all servos, the others a few.
        n = len(self.ids) if first else min(len(self.ids), 4)
        read_ms = (14 + n + n * (11 + STATE_BLOCK.size)) * self.bus.byte_time_ms
        learnt = (self.first_latency if first else self.retry_latency).margin_ms(self.margin_ms, read_ms)
        if learnt is None and first:
            # Just gone noisy: until the first reads have timed this line, the follow-ups already have
            # (those of the fast reads before), and the configured margin would cost a whole cycle
            # for every garbled request. A first reply that comes later teaches first_latency all the same.
            learnt = self.retry_latency.margin_ms(self.margin_ms, read_ms)
        return fixed if learnt is None else learnt

    def _margin(self, margin_ms: float):
        """Reply margin ``margin_ms`` for the exchanges inside."""
        if margin_ms == self.margin_ms:
            return _AS_IS               # nearly always, every cycle: no generator to set up
        return self._other_margin(margin_ms)

    @contextlib.contextmanager
    def _other_margin(self, margin_ms: float):
        self.bus.port.margin_ms = margin_ms
        try:
            yield
        finally:
            self.bus.port.margin_ms = self.margin_ms

    def _quick_margin(self, on: bool = True):
        """The short reply margin of the exchanges after a cycle's first read (_reply_margin_ms)."""
        return self._margin(self._reply_margin_ms(first=False) if on else self.margin_ms)

    def _take_states(self, got: dict) -> np.ndarray:
        """This cycle's state blocks ({id: (error byte, data)}) of all servos at once: the values of those
        with a plausible reading go into the table and mark them fresh. Returns that bool mask (per
        joint). A servo that reported an error instead of data, or whose values cannot be real, is a
        failed read (last good value kept, stale), never a published value."""
        size = STATE_BLOCK.size
        good = np.zeros(len(self.ids), dtype=bool)
        if not got:
            return good
        decoded, self._decoded = self._decoded, None
        if decoded is not None and decoded[0] is got and decoded[1] == len(got):
            _, _, k, ks, v, replied_s = decoded     # the first read's replies, whole, no error bytes
            return self._take_decoded(good, (0,), ks, k, v, replied_s)
        errs, blocks = zip(*got.values())
        if set(map(len, blocks)) != {size}:
            for sid, (err, data) in got.items():            # rare: a block of the wrong size
                if len(data) != size and not err & 0x7F:
                    self._reject(self.by_id[sid], None, None, None, None)
            got = {sid: reply for sid, reply in got.items() if len(reply[1]) == size}
            if not got:
                return good
            errs, blocks = zip(*got.values())
        k, ks = self._rows_of(tuple(got))
        return self._take_decoded(good, errs, ks, k, STATE_BLOCK.decode_many(b''.join(blocks)))

    def _take_decoded(self, good: np.ndarray, errs, ks: list, k: np.ndarray, v: np.ndarray,
                      replied_s: float | None = None) -> np.ndarray:
        """_take_states for decoded blocks ``v`` of the servos at table rows ``k`` (``ks`` as a list),
        with their error bytes ``errs``; ``replied_s``: when all of them came in one read, its time."""
        t = self.table
        hw, cur = v['hardware_error_status'], v['present_current']
        vel, pos, watchdog = v['present_velocity'], v['present_position'], v['bus_watchdog']
        tick = v['realtime_tick']
        current_a = cur * self._amps_per_current_unit
        ok = plausible_states(hw, pos, vel, current_a)
        all_ok = np.count_nonzero(ok) == len(ok)
        errs = np.array(errs) if any(errs) else None        # nearly always: no error byte
        if errs is not None:
            no_error = (errs & 0x7F) == 0
            for i in np.flatnonzero(no_error & ~ok).tolist():
                self._reject(self.servos[ks[i]], int(hw[i]), int(pos[i]), int(vel[i]), int(cur[i]))
            ok &= no_error
            all_ok = np.count_nonzero(ok) == len(ok)
        elif not all_ok:
            for i in np.flatnonzero(~ok).tolist():
                self._reject(self.servos[ks[i]], int(hw[i]), int(pos[i]), int(vel[i]), int(cur[i]))
        if not all_ok:
            k, hw, vel, pos, watchdog, current_a = k[ok], hw[ok], vel[ok], pos[ok], watchdog[ok], current_a[ok]
            tick = tick[ok]
            errs = errs[ok] if errs is not None else None
        direction = self.direction[k]
        t.position_rad[k] = ticks_to_joint(pos, direction, self.offset[k])
        t.velocity_rad_s[k] = direction * velocity_units_to_rad_s(vel)
        t.current_a[k] = direction * current_a
        alert = hw != 0
        if errs is not None:
            alert |= (errs & P.ERR_ALERT) != 0
        if np.count_nonzero(alert):
            for i in np.flatnonzero(alert & ~t.alert[k]).tolist():
                self._event(f'{self.names[k[i]]} alert: '
                            f'{", ".join(P.decode_hardware_error(int(hw[i]))) or "error byte alert"}')
            t.torque[k] &= hw == 0          # shutdown errors cut torque in the servo
        t.hardware_error[k] = hw
        t.alert[k] = alert
        t.fresh[k] = t.ever_read[k] = True
        t.stale_cycles[k] = 0
        good[k] = True
        t.watchdog[k] = watchdog
        # What the next replies' ticks are judged against.
        t.tick_ms[k] = tick
        replied = self._replied_s[k] if replied_s is None else replied_s
        t.clock_lead_ms[k], t.clock_at_s[k] = clock_leads(tick, replied, t.clock_lead_ms[k], t.clock_at_s[k])
        armed = watchdog_units(self.watchdog_ms)
        # Nearly always every watchdog reads armed: none tripped, none to arm.
        if self.watchdog_ms and np.count_nonzero(watchdog != armed):
            on = t.torque[k]
            for j in k[(watchdog == WATCHDOG_TRIPPED) & on].tolist():
                self._rearm_watchdog(self.servos[j])
            unarmed = (watchdog != armed) & (watchdog != WATCHDOG_TRIPPED) & on
            if np.count_nonzero(unarmed):
                self._arm_pending.update(self._ids_array[k[unarmed]].tolist())
        return good

    def _reject(self, s: ServoState, hw, pos, vel, cur):
        """Count and log a reading that cannot be real (it is never published)."""
        self.counters.rejected_readings += 1
        self._event(f'{s.name}: implausible reading rejected (hw {hw}, position {pos}, '
                    f'velocity {vel}, current {cur})')

    def _rearm_watchdog(self, s: ServoState):
        """The servo's bus watchdog tripped (the loop or the line stalled): it stopped where it was and
        refuses goals until the watchdog is cleared. Hold (the robot resumes from where the servos
        stopped) and queue the servo for _service_rearms."""
        if s.servo_id in self._rearm_pending:
            return
        self.counters.watchdog_trips += 1
        self._event(f'{s.name}: bus watchdog tripped; re-arming')
        self._resume_after = time.monotonic()
        self._rearm_pending.append(s.servo_id)

    def _service_rearms(self, now: float):
        """Clear tripped watchdogs (one confirmed write each; the next cycle's read then shows the
        watchdog off and arms it with the goals): at least one servo per cycle, more while the cycle has
        time, so that after a stall the servos are not kept waiting long enough to trip again."""
        budget_s = FOLLOW_UP_BUDGET * self.period_s
        first = True
        while self._rearm_pending and (first or time.monotonic() - now < budget_s):
            first = False
            s = self.by_id[self._rearm_pending.pop(0)]
            try:
                self.bus.write_register(s.servo_id, 'bus_watchdog', 0)
                self._event(f'{s.name}: bus watchdog cleared')
            except DxlError as exc:         # the next read still shows it tripped: queued again
                self._event(f'{s.name}: clearing the bus watchdog failed: {exc}')

    def _health_is_due(self) -> bool:
        return self.config.health_period_s > 0 and time.monotonic() >= self._health_due

    def _read_health(self):
        # Time-based, not every N cycles: a health read costs a round trip, which at 400 Hz is a large
        # share of the period, and temperature and voltage change over seconds whatever the rate.
        if self.config.health_period_s <= 0:
            return
        now = time.monotonic()
        if now < self._health_due:
            return
        self._health_due = max(self._health_due + self.config.health_period_s, now)
        s = self.servos[self._health_next % len(self.servos)]
        self._health_next += 1
        if s.rebooting_until is not None:
            return
        self._read_servo_health(s)

    def _read_servo_health(self, s: ServoState) -> dict | None:
        """Temperature and voltage of one servo; a failed or implausible read keeps the last good values
        and marks them stale. Returns the decoded health block when it was good, else None."""
        try:
            data, _ = self.bus.read(s.servo_id, HEALTH_BLOCK.data_address, HEALTH_BLOCK.size)
        except DxlError:
            data = None
        if data is not None and len(data) == HEALTH_BLOCK.size:
            v = HEALTH_BLOCK.decode(data)
            temperature, voltage = float(v['present_temperature']), v['present_input_voltage'] * 0.1
            if plausible_health(temperature, voltage):
                s.temperature_c, s.voltage_v, s.health_stale = temperature, voltage, False
                return v
            self.counters.rejected_readings += 1
            self._event(f'{s.name}: implausible health reading rejected '
                        f'({temperature:.0f} C, {voltage:.1f} V)')
        s.health_stale = True
        s.health_failures += 1
        self.counters.health_failures += 1
        return None

    def _publish(self, stamp_s: float, behind: bool = True):
        """The table as a snapshot stamped ``stamp_s`` to state() and on_state (``behind``: may wait for
        the next read's request, publish_behind)."""
        if behind:
            self.bus.after_send = None
        self._hand_over_unpublished()       # the last cycle's first: in order, whatever this cycle did
        t = self.table
        current_a = t.current_a.copy()
        snap = JointStateSnapshot(stamp_s, list(self.names), t.position_rad.copy(), t.velocity_rad_s.copy(),
                                  current_a_to_torque_nm(current_a, self.model), t.fresh.copy(), current_a)
        with self._lock:
            self._snapshot = snap
        if self.on_state is None:
            return
        if behind and self.publish_behind and time.monotonic() + self._on_state_s >= self._next_due_s:
            self._unpublished = snap        # handed over while the next cycle's read is on the wire
            return
        self._hand_over(snap)

    def _hand_over_unpublished(self):
        snap, self._unpublished = self._unpublished, None
        if snap is not None:
            self._hand_over(snap)

    def _hand_over(self, snap: JointStateSnapshot):
        start = time.monotonic()
        try:
            self.on_state(snap)
        except Exception:       # a subscriber's error must never stop the servo loop
            log.exception('on_state callback failed')
        self._on_state_s += 0.1 * (time.monotonic() - start - self._on_state_s)
