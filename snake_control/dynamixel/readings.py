"""What the driver reads from its servos: the indirect-address blocks, their decoder, plausibility checks,
and the records the driver keeps (ServoState, JointStateSnapshot, Counters).

The servos are configured so that Indirect Data 1.. holds, byte for byte, the registers of STATE_BLOCK
followed by those of HEALTH_BLOCK: one read of consecutive bytes gets them all. A block is described
once, by register names; ``decode`` turns its bytes into values by name, signed where the register is.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.models import CONTROL_TABLE, INDIRECT_COUNT, INDIRECT_DATA_0


@dataclass(frozen=True)
class RegisterBlock:
    """Registers mapped one after another into Indirect Data from ``data_address`` on."""

    names: tuple[str, ...]
    data_address: int

    @cached_property
    def size(self) -> int:
        return sum(CONTROL_TABLE[n].size for n in self.names)

    @cached_property
    def _struct(self) -> struct.Struct:
        # Decoded for every servo in every cycle: one precompiled little-endian unpack.
        codes = {1: 'b', 2: 'h', 4: 'i'}
        fmt = ''.join(codes[CONTROL_TABLE[n].size] if CONTROL_TABLE[n].signed
                      else codes[CONTROL_TABLE[n].size].upper() for n in self.names)
        return struct.Struct('<' + fmt)

    @cached_property
    def dtype(self) -> np.dtype:
        """One record of the block's bytes (packed, little-endian): many servos' blocks decode at once."""
        codes = {1: 'i1', 2: '<i2', 4: '<i4'}
        return np.dtype([(n, codes[CONTROL_TABLE[n].size] if CONTROL_TABLE[n].signed
                          else codes[CONTROL_TABLE[n].size].replace('i', 'u')) for n in self.names])

    def decode_many(self, data: bytes) -> np.ndarray:
        """Structured array of register values (fields by name) from consecutive blocks' bytes."""
        if len(data) % self.size:
            raise ValueError(f'{len(data)} bytes are not whole {self.size}-byte blocks {self.names}')
        return np.frombuffer(data, self.dtype)

    def sources(self) -> list[int]:
        """The control-table address of every byte, in order: what the Indirect Address entries hold."""
        return [CONTROL_TABLE[n].address + i for n in self.names for i in range(CONTROL_TABLE[n].size)]

    def decode(self, data: bytes) -> dict[str, int]:
        """Register values by name from the block's bytes (little-endian, signed where the register is)."""
        if len(data) != self.size:
            raise ValueError(f'{len(data)} bytes for a {self.size}-byte block {self.names}')
        return dict(zip(self.names, self._struct.unpack(bytes(data))))


# Bus Watchdog rides in every cycle's read: a servo it stopped is known and re-armed at once. Realtime
# Tick (the servo's millisecond clock) dates the reading, so a reply to an earlier request that a later
# read takes for its own is told apart (stale_replies).
STATE_BLOCK = RegisterBlock(('hardware_error_status', 'present_current', 'present_velocity',
                             'present_position', 'bus_watchdog', 'realtime_tick'), INDIRECT_DATA_0)
HEALTH_BLOCK = RegisterBlock(('present_temperature', 'present_input_voltage'),
                             INDIRECT_DATA_0 + STATE_BLOCK.size)
INDIRECT_SOURCES = STATE_BLOCK.sources() + HEALTH_BLOCK.sources()
assert len(INDIRECT_SOURCES) <= INDIRECT_COUNT
WATCHDOG_TRIPPED = -1            # Bus Watchdog value after it stopped a servo (e-Manual)

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


def plausible_states(hw: np.ndarray, pos_ticks: np.ndarray, vel_units: np.ndarray,
                     current_a: np.ndarray) -> np.ndarray:
    """Whether each servo's (hardware error, position, velocity, current) can be real (see the bounds), for
    many servos at once (bool array)."""
    return ((hw | HW_ERROR_BITS) == HW_ERROR_BITS) & (pos_ticks >= POSITION_TICKS_RANGE[0]) \
        & (pos_ticks <= POSITION_TICKS_RANGE[1]) & (np.abs(vel_units) <= VELOCITY_UNITS_MAX) \
        & (np.abs(current_a) <= CURRENT_A_MAX)


# Realtime Tick counts milliseconds and wraps to 0 after 32767 (e-Manual). A servo's clock may run this
# much fast or slow against the host's (a ceramic resonator or a microcontroller's internal oscillator
# are within 1-2 %).
TICK_WRAP = 32768
TICK_RATE_TOLERANCE = 0.02
_HALF = TICK_WRAP // 2
_DRIFT_MS_PER_S = TICK_RATE_TOLERANCE * 1000.0
_CLOCK_KEPT_MS = 2000.0             # drift allowance past which a bound means nothing: start again


def stale_replies(tick_ms: np.ndarray, asked_s: float, lead_ms: np.ndarray, at_s: np.ndarray) -> np.ndarray:
    """Which replies cannot answer this cycle's request, by their Realtime Tick (bool per servo).

    A servo's clock reads tick = floor(host_ms + c) mod 32768, c its lead on the host's clock, and
    c >= lead_ms as of host time ``at_s`` (``clock_leads``), less the clock's drift since (2 % of
    it). A reply was then sampled before host time tick + 1 - lead: if that is no later than this
    cycle's first request left (``asked_s``), it answers an earlier request and was taken late. Not
    judged: a servo without a bound (NaN: just configured) or whose bound is too old to mean anything.
    Times are host monotonic s; differences of ticks are taken across the wrap.

    A servo 250 ms ahead of the host's clock (tick = host ms + 250), asked at 10.020 s: its reply now,
    one of 10 ms ago, one sampled 2 ms before the request, one of a clock restarted behind
    (stale, 10 s before the request: the servo stays stale until it is configured again; a clock
    restarted ahead reads as fresh and its reply moves the bound):

    >>> stale_replies(np.array([10270, 10260, 10268, 5]), 10.020, np.full(4, 249.5), np.full(4, 10.001))
    array([False,  True,  True,  True])
    """
    # Every servo, every cycle: a few whole-array operations. (x + half) % wrap <= half means x <= 0
    # across the wrap; NaN compares false.
    drift = (asked_s - at_s) * _DRIFT_MS_PER_S
    stale = (tick_ms - lead_ms + drift + (1.0 + _HALF - asked_s * 1000.0)) % TICK_WRAP <= _HALF
    if np.count_nonzero(stale):
        stale &= drift < _CLOCK_KEPT_MS
    return stale


def clock_leads(tick_ms: np.ndarray, replied_s, lead_ms: np.ndarray, at_s: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The bound (lead_ms, at_s) of each servo's clock lead (see stale_replies) after an accepted reading:
    it was sampled before its reply arrived (``replied_s``), so the lead is at least tick - replied.
    The bound set at ``at_s`` counts less the clock's drift since; this reading's replaces it when it is
    at least as high (a quicker reply, or the old bound's drift), when there was none (NaN) or when
    the old one is too old to mean anything. Kept as set; its differences with ticks are taken across
    the wrap.

    >>> lead, at = clock_leads(np.array([10270]), 10.0212, np.full(1, np.nan), np.full(1, np.nan))
    >>> lead.round(2), at
    (array([248.8]), array([10.0212]))
    >>> clock_leads(np.array([10290]), 10.0408, lead, at)        # a quicker reply: its bound
    (array([249.2]), array([10.0408]))
    >>> clock_leads(np.array([10290]), 10.0500, lead, at)[0].round(2)     # a slower one: the old bound
    array([248.8])
    """
    new = (tick_ms - np.asarray(replied_s) * 1000.0) % TICK_WRAP
    drift = (replied_s - at_s) * _DRIFT_MS_PER_S
    lower = (new - lead_ms + drift + _HALF) % TICK_WRAP < _HALF      # NaN compares false
    if np.count_nonzero(lower):
        lower &= drift < _CLOCK_KEPT_MS
    return np.where(lower, lead_ms, new), np.where(lower, at_s, replied_s)


def plausible_health(temperature_c: float, voltage_v: float) -> bool:
    """Whether a (temperature, input voltage) reading can be real."""
    return (TEMPERATURE_C_RANGE[0] <= temperature_c <= TEMPERATURE_C_RANGE[1]
            and VOLTAGE_V_RANGE[0] <= voltage_v <= VOLTAGE_V_RANGE[1])


class ServoTable:
    """What the bus loop reads or writes of every servo in every cycle, one array per field (index: the
    joint's position in the robot YAML), so a cycle updates all servos in a few numpy operations."""

    FIELDS = {'position_rad': float, 'velocity_rad_s': float, 'current_a': float, 'hardware_error': np.int64,
              'alert': bool, 'torque': bool, 'fresh': bool, 'ever_read': bool, 'stale_cycles': np.int64,
              'stale_count': np.int64, 'rebooting_until': float, 'watchdog': np.int64,
              'tick_ms': np.int64, 'clock_lead_ms': float, 'clock_at_s': float}

    def __init__(self, n: int):
        for name, kind in self.FIELDS.items():
            setattr(self, name, np.zeros(n, dtype=kind))
        self.rebooting_until[:] = np.nan          # NaN: not rebooting
        # The last accepted reading's Realtime Tick; a bound of each servo's clock lead on the host's
        # (stale_replies), NaN: none since the servo was configured.
        self.clock_at_s[:] = np.nan


def _table_field(name: str, doc: str):
    def get(self):
        return getattr(self._table, name)[self._k].item()

    def set_(self, value):
        getattr(self._table, name)[self._k] = value
    return property(get, set_, doc=doc)


def _rebooting_get(self):
    t = self._table.rebooting_until[self._k].item()
    return None if math.isnan(t) else t


def _rebooting_set(self, value):
    self._table.rebooting_until[self._k] = math.nan if value is None else value


class ServoState:
    """What the driver knows about one servo (joint frame): a view of its row in the driver's ServoTable
    for what changes every cycle, plain attributes for the rest."""

    def __init__(self, name: str, servo_id: int, table: ServoTable | None = None, k: int = 0):
        self.name, self.servo_id = name, servo_id
        self._table, self._k = (table, k) if table is not None else (ServoTable(1), 0)
        self.temperature_c = math.nan           # last good reading; NaN until the first one
        self.voltage_v = math.nan
        self.health_stale = True                # the last temperature/voltage read failed or was garbage
        self.health_failures = 0                # failed or rejected temperature/voltage reads
        self.reboots = 0
        self.last_reboot_t = -math.inf

    position_rad = _table_field('position_rad', 'last good position (rad)')
    velocity_rad_s = _table_field('velocity_rad_s', 'last good velocity (rad/s)')
    current_a = _table_field('current_a', 'last good motor current (A, joint direction)')
    hardware_error = _table_field('hardware_error', 'Hardware Error Status bits')
    alert = _table_field('alert', 'error bits or the status packet\'s Alert bit')
    torque = _table_field('torque', 'torque on (as far as the driver knows)')
    fresh = _table_field('fresh', 'read this cycle')
    ever_read = _table_field('ever_read', 'read at least once')
    stale_cycles = _table_field('stale_cycles', 'consecutive cycles without a good reading')
    stale_count = _table_field('stale_count', 'cycles without a good reading, in all')
    watchdog = _table_field('watchdog', 'Bus Watchdog register as last read (0 off, -1 tripped)')
    rebooting_until = property(_rebooting_get, _rebooting_set, doc='monotonic time a reboot ends (None: none)')

    def __repr__(self):
        return (f'ServoState({self.name!r}, id={self.servo_id}, position_rad={self.position_rad:.4f}, '
                f'fresh={self.fresh}, stale_cycles={self.stale_cycles}, torque={self.torque})')


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
class Counters:
    cycles: int = 0
    overruns: int = 0
    read_failures: int = 0               # servo reads missing from a cycle
    late_replies: int = 0                # first-read replies that missed their deadline but came whole
    late_replies_caught: int = 0         # first-read replies taken only thanks to a deadline extended
                                         # for a late line
    all_fresh_cycles: int = 0            # cycles that read every servo
    rejected_readings: int = 0           # replies whose values cannot be real (never published)
    stale_replies: int = 0               # replies to an earlier request, told by their Realtime Tick
                                         # (never published; the servo is not fresh that cycle)
    health_failures: int = 0             # temperature/voltage reads failed or rejected
    full_read_failures: int = 0          # cycles where no servo answered
    state_reads: int = 0                 # (fast) sync reads of the state block, follow-ups included
    write_failures: int = 0
    transmit_failures: int = 0           # packets the adapter did not take (a stalled or full line)
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
    ramps: int = 0                       # resumes ramped from a held pose
    stale_hold_cycles: int = 0           # cycles held (or torque off) because a servo's state went stale
    pipelined_cycles: int = 0            # cycles that read with the host's work on the wire (Driver.pipeline)
    extrapolation_capped: int = 0        # running cycles whose command was older than command_extrapolation_s:
                                         # the goal stopped at its bound (a late or stopped command stream)


@dataclass
class ServoDiagnostics:
    name: str
    id: int
    stale_count: int
    stale_cycles: int
    hardware_error: int
    hardware_error_names: list
    alert: bool
    temperature_c: float | None
    voltage_v: float | None
    health_stale: bool
    health_failures: int
    torque: bool
    reboots: int
    current_a: float                     # motor current, A (joint direction); joint_states carries N·m


@dataclass
class DriverDiagnostics:
    """Bus and per-servo health as Driver.diagnostics() reports it."""

    mode: str
    reasons: list
    fatal_error: str | None
    port: str
    baud: int
    rate_hz_target: float
    cycle_rate_hz: float
    jitter_p99_ms: float
    read_mode: str
    counters: dict
    disconnected_for_s: float
    watchdog_ms: int
    reply_failure_rate: float = 0.0     # recent share of servo replies lost in a cycle's first read
    torque_off_unconfirmed: list = field(default_factory=list)   # servo names after a failed torque off
    warnings: list = field(default_factory=list)
    events: list = field(default_factory=list)
    servos: list = field(default_factory=list)                   # ServoDiagnostics
