"""The closed loop around a gait's cmd_vel mapping: trims from the measured cycle-averaged body velocity
(pure Python on numpy; the gait controller calls it every tick, the gait node feeds it odometry).

No mapping from cmd_vel to phase rate and turning offset is exact on a real floor (a calibration made
elsewhere, a slope, a worn skin), so a slow outer loop corrects the command the mapping is given:

    drive' = g * drive            (the gait's drive component: linear.x, linear.y, or angular.z for a
                                   turning gait; the phase rate scales with it)
    turn'  = turn + b             (angular.z of a gait that moves and turns: the turning offset follows)

The measurement is the odometry's motion over the last whole gait cycle T = 2 pi / |phase rate|: the
displacement between the pose now and the pose one cycle ago, in the frame of the cycle's mean
heading, over T, and the heading change over T. Poses one cycle apart are at the same gait phase, so
the body's wave drops out; the instantaneous twist would swing with it.

Integral laws, evaluated every UPDATE_S (0.2 s) with dt the time since the last one (tau = time_constant_cycles * T):

    log g += clip(log(|drive command| / |drive measured|), -0.5, 0.5) dt / tau
    b     += (turn command - turn measured) dt / tau

On a plant that does k times what it is asked (measured = k g command), the first is
d(log g)/dt = -(log k + log g) / tau: the ratio settles as exp(-t / tau), independent of k. The second
settles with time constant tau / k_turn. tau of 3 cycles keeps the loop well behind the one-cycle
measurement window (its delay is about half a cycle), so it does not ring.

Not fighting the operator: nothing integrates until the command, the gait and the phase rate have
been steady for a whole cycle (WAITING); the trims are bounded (gain_range, turn_trim_max_rad_s);
anti-windup: while the gait reports that it cannot reach its (trimmed) command, a correction that
asks for more is not integrated and the state says CANNOT_REACH (the gait node shows it in gait/state)
instead of winding up; at a bound the state says AT_LIMIT. reset() (gait switch, parameter change,
e-stop) drops the trims and the history.

    >>> loop = TrimLoop()
    >>> loop.command('forward', (0.1, 0.0, 0.0))     # no measurement yet: the command unchanged
    (0.1, 0.0, 0.0)
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

OFF, WAITING, TRACKING, CANNOT_REACH, AT_LIMIT, NO_PROGRESS, SKIPPED = (
    'off', 'waiting', 'tracking', 'cannot reach', 'at limit', 'no progress', 'off for this gait')
UPDATE_S = 0.2              # how often the integrators run (s): a fifth of a second, tau is seconds
MAX_ERROR_LOG = 0.5         # a single ratio error counts at most e^0.5 = 1.65x
HISTORY_S = 60.0            # odometry kept (s): a gait cycle longer than this is not trimmed
SPACING_S = 0.05            # odometry kept at most every SPACING_S (a cycle is seconds: plenty)


@dataclass(frozen=True)
class TrimSettings:
    """Gains and bounds of the loop (module docstring).

    time_constant_cycles: tau in gait cycles; gain_range: bounds of the drive gain g;
    turn_trim_max_rad_s: bound of the yaw-rate trim b; min_drive: below this drive command (m/s, or
    rad/s for a turning gait) the gain is not trimmed; min_progress: the measured drive must be at
    least this share of the command, the same way, to be trusted (a stuck or reversed robot is not
    a ratio to integrate: NO_PROGRESS).
    """

    time_constant_cycles: float = 3.0
    gain_range: tuple = (0.5, 2.0)
    turn_trim_max_rad_s: float = 0.3
    min_drive: float = 0.01
    min_progress: float = 0.2

    def __post_init__(self):
        lo, hi = self.gain_range
        if not (self.time_constant_cycles > 0 and 0 < lo <= 1 <= hi and self.turn_trim_max_rad_s >= 0):
            raise ValueError(f'bad TrimSettings: time_constant_cycles {self.time_constant_cycles} must be '
                             f'> 0, gain_range {self.gain_range} must hold 1 with a positive low end, '
                             f'turn_trim_max_rad_s {self.turn_trim_max_rad_s} must be >= 0')


@dataclass(frozen=True)
class TrimState:
    """The loop now: drive gain g and yaw-rate trim b (rad/s); measured cycle averages (drive m/s or
    rad/s, turn rad/s; NaN before the first); status: OFF, WAITING, TRACKING, CANNOT_REACH, AT_LIMIT,
    NO_PROGRESS or SKIPPED (the gait is one the loop is told to leave alone)."""

    enabled: bool
    speed_gain: float
    turn_trim_rad_s: float
    measured_drive: float
    measured_turn_rad_s: float
    status: str


def heading_from_quaternion(qx: float, qy: float, qz: float, qw: float) -> float:
    """Heading (rad, CCW from x) of a body's x axis projected on the floor, from its unit quaternion."""
    return math.atan2(2.0 * (qx * qy + qw * qz), 1.0 - 2.0 * (qy * qy + qz * qz))


def cycle_average(times_s, xy_m, yaw_rad, period_s: float) -> tuple[float, float, float] | None:
    """(forward m/s, left m/s, yaw rate rad/s) over the last period_s of a pose history, forward and
    left in the frame of the mean heading over that window; None when the history is shorter.

    times_s (T,) increasing, xy_m (T, 2), yaw_rad (T,) unwrapped.

    >>> t = np.linspace(0.0, 2.0, 21)
    >>> [round(float(v), 6) for v in cycle_average(t, np.stack([0.1 * t, 0 * t], 1), 0 * t, 1.0)]
    [0.1, 0.0, 0.0]
    """
    t = np.asarray(times_s, dtype=float)
    if t.size < 2 or t[-1] - t[0] < period_s - 1e-9 or period_s <= 0:
        return None
    start = t[-1] - period_s
    xy = np.asarray(xy_m, dtype=float)
    yaw = np.asarray(yaw_rad, dtype=float)
    x0, y0 = np.interp(start, t, xy[:, 0]), np.interp(start, t, xy[:, 1])
    yaw0 = float(np.interp(start, t, yaw))
    inside = t > start
    ts = np.concatenate([[start], t[inside]])
    ys = np.concatenate([[yaw0], yaw[inside]])
    mean = float(np.trapezoid(ys, ts) / period_s)
    dx, dy = xy[-1, 0] - x0, xy[-1, 1] - y0
    c, s = math.cos(mean), math.sin(mean)
    return (float(c * dx + s * dy) / period_s, float(-s * dx + c * dy) / period_s,
            float(yaw[-1] - yaw0) / period_s)


class TrimLoop:
    """The outer loop (module docstring). Times are monotonic seconds chosen by the caller."""

    def __init__(self, settings: TrimSettings | None = None, enabled: bool = True):
        self.settings = settings or TrimSettings()
        self.enabled = bool(enabled)
        self._poses: deque = deque()
        self.reset()

    def reset(self) -> None:
        """Drop the trims and the odometry history (gait switch, parameter change, e-stop)."""
        self._log_g = 0.0
        self._b = 0.0
        self._poses.clear()
        self._yaw_prev = None
        self._key = None
        self._steady_since = math.inf
        self._last_update = None
        self._keep_s = HISTORY_S
        self._measured = (math.nan, math.nan)
        self._status = WAITING if self.enabled else OFF

    def set_enabled(self, enabled: bool) -> None:
        if bool(enabled) != self.enabled:
            self.enabled = bool(enabled)
            self.reset()

    # -- inputs ------------------------------------------------------------------------------------
    def observe(self, t_s: float, x_m: float, y_m: float, yaw_rad: float) -> None:
        """An odometry pose: body position on the floor (m) and heading (rad) at time t_s."""
        if not self.enabled or not all(math.isfinite(v) for v in (t_s, x_m, y_m, yaw_rad)):
            return
        if self._poses and t_s <= self._poses[-1][0]:
            if t_s < self._poses[-1][0] - 1.0:      # the clock went back: start again
                self._poses.clear()
                self._yaw_prev = None
            else:
                return
        if self._poses and t_s - self._poses[-1][0] < SPACING_S:
            return
        if self._yaw_prev is not None:              # unwrap
            yaw_rad = self._yaw_prev + math.remainder(yaw_rad - self._yaw_prev, 2 * math.pi)
        self._yaw_prev = yaw_rad
        self._poses.append((float(t_s), float(x_m), float(y_m), float(yaw_rad)))
        # Keep a little more than the one-cycle window the update reads.
        while self._poses and self._poses[0][0] < t_s - self._keep_s:
            self._poses.popleft()

    # -- the loop ----------------------------------------------------------------------------------
    def command(self, drive: str | None, command) -> tuple[float, float, float]:
        """The trimmed (forward m/s, lateral m/s, turn rad/s) for a gait driven by `drive`."""
        fwd, lat, turn = command
        if not self.enabled or drive is None:
            return (fwd, lat, turn)
        g = math.exp(self._log_g)
        if drive == 'forward':
            return (g * fwd, lat, turn + self._b)
        if drive == 'lateral':
            return (fwd, g * lat, turn + self._b)
        return (fwd, lat, g * turn)

    def update(self, t_s: float, drive: str | None, command, phase_rate_rad_s: float, reachable: bool,
               steady_gait: bool = True, turns: bool = True, skip: bool = False) -> None:
        """Integrate (every UPDATE_S) toward the command (forward, lateral, turn), untrimmed.

        drive: the target gait's drive ('forward', 'lateral', 'turn', None); phase_rate_rad_s: its phase
        rate now; reachable: whether it can do the trimmed command (GaitState.reachable); steady_gait:
        False while a switch blends; turns: whether angular.z steers the gait (a turning parameter);
        skip: leave this gait alone (command() must then be given drive None).
        """
        if not self.enabled:
            self._status = OFF
            return
        if skip:
            self._key = None
            self._status = SKIPPED
            return
        # A new command, gait or end of a blend starts the wait for a whole cycle of the new motion.
        key = (drive, round(command[0], 3), round(command[1], 3), round(command[2], 3), steady_gait)
        if key != self._key or not steady_gait or drive is None:
            self._key = key
            self._steady_since = t_s if steady_gait and drive is not None else math.inf
            self._last_update = None
            self._status = WAITING
            return
        if self._last_update is not None and t_s - self._last_update < UPDATE_S:
            return
        rate = abs(phase_rate_rad_s)
        if rate < 1e-6 or not self._poses:
            self._status = WAITING
            return
        period = 2 * math.pi / rate
        self._keep_s = min(HISTORY_S, 1.5 * period + 1.0)
        if t_s - self._steady_since < period or self._poses[0][0] > t_s - period:
            self._status = WAITING
            return
        data = np.array(self._poses)
        avg = cycle_average(data[:, 0], data[:, 1:3], data[:, 3], period)
        if avg is None:
            self._status = WAITING
            return
        dt = UPDATE_S if self._last_update is None else t_s - self._last_update
        self._last_update = t_s
        tau = self.settings.time_constant_cycles * period
        fwd, lat, turn = command
        meas_drive = {'forward': avg[0], 'lateral': avg[1], 'turn': avg[2]}[drive]
        cmd_drive = {'forward': fwd, 'lateral': lat, 'turn': turn}[drive]
        self._measured = (meas_drive, avg[2])
        status = TRACKING
        s = self.settings
        lo, hi = math.log(s.gain_range[0]), math.log(s.gain_range[1])
        if abs(cmd_drive) >= s.min_drive:
            if meas_drive * cmd_drive <= 0 or abs(meas_drive) < s.min_progress * abs(cmd_drive):
                status = NO_PROGRESS
            else:
                err = min(max(math.log(abs(cmd_drive) / abs(meas_drive)), -MAX_ERROR_LOG), MAX_ERROR_LOG)
                if err > 0 and not reachable:
                    status = CANNOT_REACH           # anti-windup: do not ask for more of what is capped
                else:
                    new = self._log_g + err * dt / tau
                    if new > hi or new < lo:
                        status = AT_LIMIT
                    self._log_g = min(max(new, lo), hi)
        if turns and drive != 'turn' and abs(cmd_drive) >= s.min_drive:
            err = turn - avg[2]
            asked = turn + self._b
            if not reachable and err * asked > 0:
                status = CANNOT_REACH if status == TRACKING else status
            else:
                new = self._b + err * dt / tau
                m = s.turn_trim_max_rad_s
                if abs(new) > m and status == TRACKING:
                    status = AT_LIMIT
                self._b = min(max(new, -m), m)
        self._status = status

    def state(self) -> TrimState:
        return TrimState(self.enabled, math.exp(self._log_g), self._b, self._measured[0], self._measured[1],
                         self._status if self.enabled else OFF)
