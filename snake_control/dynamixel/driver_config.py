"""How the driver behaves: DriverConfig (checked before any servo is touched), its policies and constants.

Times in s unless the name says ms; rates in Hz. See snake_control.dynamixel.driver for what each does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

POLICIES = ('hold', 'torque_off')
READ_MODES = ('auto', 'fast', 'slow')
SETUP_MARGIN_MS = 20.0           # reply margin of start-up and recovery exchanges (not time-critical)
PROBE_EVERY = 10                 # cycles between reads of a servo that stopped answering
TORQUE_OFF_DEADLINE_S = 2.0      # how long torque off keeps retrying servos not yet confirmed off
EVENT_MAX_CHARS = 300            # longest event text kept (they can quote untrusted input)
WATCHDOG_UNIT_MS = 20            # Bus Watchdog register unit (e-Manual: 1..127 x 20 ms, 0 off)
WATCHDOG_MAX_MS = 127 * WATCHDOG_UNIT_MS
# The Bus Watchdog stops every servo when no instruction reaches it for this long: a dead controller
# (SIGKILL, a crash, a pulled cable) leaves the servos stopped within it. By default five control periods
# and at least WATCHDOG_MIN_AUTO_MS, so that a loaded host's late cycle does not trip it.
WATCHDOG_PERIODS = 5
WATCHDOG_MIN_AUTO_MS = 100
# Transmit failures (the adapter takes no bytes) for this long: the bus is treated as gone (closed,
# reopened and checked again, as after an unplug) instead of retried cycle after cycle.
TRANSMIT_FAULT_RECONNECT_S = 0.5
# Upper bound of velocity_lead_s: a lead is meant to cancel the servo's lag (tens of ms); a larger one
# would send goals far ahead of the command on a stale or jumping velocity.
VELOCITY_LEAD_MAX_S = 0.2
# Upper bound of command_extrapolation_s: one period of the slowest control rate (10 Hz).
COMMAND_EXTRAPOLATION_MAX_S = 0.1


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
    watchdog_ms: int | None = None           # Bus Watchdog (0: off; None: default_watchdog_ms(rate))
    margin_ms: float | None = None           # packet timeout margin; None: from the control period
    reconnect_interval_s: float = 0.5
    health_period_s: float = 0.04            # one servo's temperature/voltage this often, whatever the
                                             # control rate (at 400 Hz, every 16 cycles); 0: never
    torque_off_deadline_s: float = TORQUE_OFF_DEADLINE_S
    # Goal = commanded position + commanded velocity x velocity_lead_s (0: off): cancels the lag of the
    # servo's own profile (docs/dynamixel.md, "Command velocities").
    velocity_lead_s: float = 0.04
    # Between commands the goal moves on along the commanded velocity for the command's age, at most this
    # long (0: off): a gait slower than the bus (the graph's gait at 100 Hz under a 400 Hz bus) passes its
    # period here, so its joints move every bus cycle and stop one gait period after its last command.
    command_extrapolation_s: float = 0.0

    def validate(self):
        for name in ('stale_policy', 'alert_policy', 'estop_policy'):
            if getattr(self, name) not in POLICIES:
                raise ValueError(f'{name} must be one of {POLICIES}, got {getattr(self, name)!r}')
        if self.read_mode not in READ_MODES:
            raise ValueError(f"read_mode must be 'auto', 'fast' or 'slow', got {self.read_mode!r}")
        if self.rate_hz is not None and not 0 < self.rate_hz <= 2000:
            raise ValueError(f'rate_hz must be in (0, 2000], got {self.rate_hz}')
        if self.stale_limit < 1:
            raise ValueError(f'stale_limit must be >= 1, got {self.stale_limit}')
        if self.watchdog_ms is not None and not 0 <= self.watchdog_ms <= WATCHDOG_MAX_MS:
            raise ValueError(f'watchdog_ms must be 0..{WATCHDOG_MAX_MS}, got {self.watchdog_ms}')
        if not 0 < self.torque_off_deadline_s <= 60:
            raise ValueError(f'torque_off_deadline_s must be in (0, 60], got {self.torque_off_deadline_s}')
        lead = self.velocity_lead_s
        if not (isinstance(lead, (int, float)) and math.isfinite(lead) and 0 <= lead <= VELOCITY_LEAD_MAX_S):
            raise ValueError(f'velocity_lead_s must be finite, in [0, {VELOCITY_LEAD_MAX_S}], got {lead!r}')
        reach = self.command_extrapolation_s
        if not (isinstance(reach, (int, float)) and math.isfinite(reach)
                and 0 <= reach <= COMMAND_EXTRAPOLATION_MAX_S):
            raise ValueError(f'command_extrapolation_s must be finite, in [0, {COMMAND_EXTRAPOLATION_MAX_S}], '
                             f'got {reach!r}')



def command_velocities(velocities_rad_s, n: int):
    """A command's velocities as floats: None when it gave none (None or empty, as a JointState may),
    False when malformed (not n numbers, NaN or inf): a multi-bus driver checks before splitting."""
    if velocities_rad_s is None or len(velocities_rad_s) == 0:
        return None
    try:
        v = np.asarray(velocities_rad_s, dtype=float).ravel()
    except (TypeError, ValueError):
        return False
    return v if len(v) == n and bool(np.all(np.isfinite(v))) else False


def default_watchdog_ms(rate_hz: float) -> int:
    """The Bus Watchdog for a loop at rate_hz: WATCHDOG_PERIODS periods, at least WATCHDOG_MIN_AUTO_MS,
    rounded up to the register's 20 ms unit and capped at its maximum."""
    ms = max(WATCHDOG_MIN_AUTO_MS, WATCHDOG_PERIODS * 1000.0 / rate_hz)
    return int(min(WATCHDOG_MAX_MS, math.ceil(ms / WATCHDOG_UNIT_MS) * WATCHDOG_UNIT_MS))


def check_watchdog(watchdog_ms: int, rate_hz: float) -> None:
    """A watchdog shorter than two control periods (+ one unit) would stop the servos in normal running."""
    need = 2 * 1000.0 / rate_hz + WATCHDOG_UNIT_MS
    if watchdog_ms and watchdog_ms < need:
        raise ValueError(f'watchdog_ms {watchdog_ms} is shorter than two control periods at {rate_hz:g} Hz '
                         f'plus {WATCHDOG_UNIT_MS} ms ({need:.0f} ms): the servos would stop in normal '
                         f'running (0 turns the watchdog off)')


def watchdog_units(watchdog_ms: int) -> int:
    """The Bus Watchdog register value: watchdog_ms in 20 ms units (at least 1 when armed, 0 off)."""
    return max(1, round(watchdog_ms / WATCHDOG_UNIT_MS)) if watchdog_ms else 0
