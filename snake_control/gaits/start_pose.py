"""Which measured pose a gait may start from (pure, no ROS).

A gait starts from the robot's measured joint angles so nothing jumps. Starting from a wrong pose is the
worst case: the first goals then step from where the servos are not, by up to the whole joint range.
``StartPose.offer`` therefore takes a pose only after ``samples`` consecutive measurements that

- are finite and within the joint limits (plus ``tolerance_rad`` for calibration), and
- agree with each other: each differs from the one before by no more than the velocity limit allows
  over the time between them (``speed_factor`` x limit x dt + ``step_margin_rad``).

A lone spoofed or garbled message among the driver's stream breaks the run, so it is never taken; the
node's other rule (only the driver it commands publishes joint_states) is checked by the caller.
"""
from __future__ import annotations

import numpy as np


class StartPose:
    """Consecutive-consistency filter on measured poses; see the module docstring."""

    def __init__(self, lower_rad, upper_rad, velocity_limit_rad_s, *, samples: int = 3,
                 tolerance_rad: float = 0.05, speed_factor: float = 1.5, step_margin_rad: float = 0.02):
        self.lower = np.asarray(lower_rad, dtype=float)
        self.upper = np.asarray(upper_rad, dtype=float)
        self.vmax = np.asarray(velocity_limit_rad_s, dtype=float)
        self.samples = int(samples)
        self.tolerance = float(tolerance_rad)
        self.speed_factor = float(speed_factor)
        self.step_margin = float(step_margin_rad)
        self._run: list[tuple[float, np.ndarray]] = []

    def reset(self) -> None:
        self._run = []

    def offer(self, q_rad, t_s: float) -> tuple[np.ndarray | None, str]:
        """(pose clipped to the limits, '') once trusted; else (None, why this sample was not enough)."""
        q = np.asarray(q_rad, dtype=float)
        if q.shape != self.lower.shape or not np.all(np.isfinite(q)):
            self.reset()
            return None, 'waiting for finite joint_states naming every joint'
        if np.any(q < self.lower - self.tolerance) or np.any(q > self.upper + self.tolerance):
            self.reset()
            return None, 'joint_states outside the joint limits: waiting for a plausible pose'
        if self._run:
            t_prev, q_prev = self._run[-1]
            dt = max(float(t_s) - t_prev, 0.0)
            if np.any(np.abs(q - q_prev) > self.speed_factor * self.vmax * dt + self.step_margin):
                self._run = [(float(t_s), q)]
                return None, 'joint_states jump faster than the joints can move: waiting for a steady pose'
        self._run.append((float(t_s), q))
        if len(self._run) < self.samples:
            return None, ''
        return np.clip(q, self.lower, self.upper), ''
