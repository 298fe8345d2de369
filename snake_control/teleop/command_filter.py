"""Velocity commands for the gait loop: validation, clamping, timeout and rate limiting.

Pure Python, used by gait_node: whatever arrives on cmd_vel (NaN, infinities, enormous speeds, bursts, or
nothing at all) becomes a finite, bounded, smoothly changing command (vx m/s forward, vy m/s to the
left, wz rad/s counter-clockwise; the robot base frame).

Example:
    >>> f = CommandFilter(CommandLimits(0.1, 0.05, 0.5, 1.0, 1.0, 10.0), timeout_s=0.5)
    >>> f.offer(0.08, 0.0, 0.2, now_s=0.0)
    >>> f.update(now_s=0.0)                # the first tick starts from rest
    (0.0, 0.0, 0.0)
    >>> f.update(now_s=0.01)               # rate-limited toward (0.08, 0, 0.2): 1 m/s2 for 10 ms
    (0.01, 0.0, 0.1)
    >>> f.offer(float('nan'), 0.0, 0.0, now_s=0.02)
    'cmd_vel rejected: non-finite value (nan, 0.0, 0.0)'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# The gait node's default clamps (its max_forward_m_s, max_sideways_m_s, max_turn_rad_s parameters): the
# fastest a user commands without changing them. Calibration measures gaits at these speeds.
DEFAULT_MAX_FORWARD_M_S = 0.15
DEFAULT_MAX_SIDEWAYS_M_S = 0.1
DEFAULT_MAX_TURN_RAD_S = 0.8


@dataclass(frozen=True)
class CommandLimits:
    """Bounds of a velocity command. Speeds beyond max_* are clamped; changes are limited to accel_*."""

    max_forward_m_s: float
    max_sideways_m_s: float
    max_turn_rad_s: float
    accel_forward_m_s2: float
    accel_sideways_m_s2: float
    accel_turn_rad_s2: float

    def __post_init__(self):
        for name, value in self.__dict__.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f'CommandLimits.{name} must be finite and > 0, got {value!r}')


def _clamp(value: float, bound: float) -> float:
    return max(-bound, min(bound, value))


def _approach(current: float, target: float, max_step: float) -> float:
    # Land exactly on the target: current + (target - current) can overshoot it by one ulp.
    if abs(target - current) <= max_step:
        return target
    return current + _clamp(target - current, max_step)


class CommandFilter:
    """The command the gait loop follows: latest valid cmd_vel, zero after `timeout_s` without one,
    approached at bounded acceleration (so a timeout or a burst ramps instead of jumping).

    offer() returns None when the command is taken or a one-line reason when it is rejected.
    """

    def __init__(self, limits: CommandLimits, timeout_s: float):
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f'timeout_s must be finite and > 0, got {timeout_s!r}')
        self.limits, self.timeout_s = limits, timeout_s
        self.target = (0.0, 0.0, 0.0)
        self.current = (0.0, 0.0, 0.0)
        self.last_offer_s: float | None = None
        self.last_update_s: float | None = None
        self.rejected = 0
        self.clamped = 0

    def offer(self, vx: float, vy: float, wz: float, now_s: float) -> str | None:
        values = (vx, vy, wz)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            self.rejected += 1
            return f'cmd_vel rejected: non-finite value ({vx!r}, {vy!r}, {wz!r})'
        lim = self.limits
        bounded = (_clamp(vx, lim.max_forward_m_s), _clamp(vy, lim.max_sideways_m_s),
                   _clamp(wz, lim.max_turn_rad_s))
        if bounded != tuple(float(v) for v in values):
            self.clamped += 1
        self.target = bounded
        self.last_offer_s = now_s
        return None

    def timed_out(self, now_s: float) -> bool:
        return self.last_offer_s is None or now_s - self.last_offer_s > self.timeout_s

    def hold_zero(self) -> None:
        """Drop the command at once (e-stop): the next update starts from zero."""
        self.target = self.current = (0.0, 0.0, 0.0)
        self.last_offer_s = None

    def update(self, now_s: float) -> tuple[float, float, float]:
        """The command for this control tick at monotonic time now_s."""
        dt = 0.0 if self.last_update_s is None else max(0.0, now_s - self.last_update_s)
        self.last_update_s = now_s
        target = (0.0, 0.0, 0.0) if self.timed_out(now_s) else self.target
        lim = self.limits
        steps = (lim.accel_forward_m_s2 * dt, lim.accel_sideways_m_s2 * dt, lim.accel_turn_rad_s2 * dt)
        self.current = tuple(_approach(c, t, s) for c, t, s in zip(self.current, target, steps))
        return self.current
