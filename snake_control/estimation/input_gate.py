"""Which joint_states the estimator may believe: stamps and physical plausibility (pure, no ROS).

A joint_states message is one sample (stamp t_s, joint angles q_rad) arriving at receive time now_s on
the estimator's clock. ``InputGate.check`` decides, before the estimator integrates it, whether to

- accept it;
- reject it: a stamp more than ``max_stamp_ahead_s`` ahead of now_s (a spoofed or broken sender; taken,
  it would make every later sample look old and stop odometry), a stamp not after the last accepted one
  (out of order), an angle outside the joint limits by more than ``limit_margin_rad``, or a step from the
  last accepted angles faster than the velocity limit allows (speed_factor x limit x dt, plus
  ``step_margin_rad`` for encoder noise and stamp jitter);
- accept it as a re-anchor (``rebase``): the time base moved, so the estimator's last stamp must be
  moved too. This happens when the last accepted stamp lies more than ``max_stamp_ahead_s`` ahead of
  the clock (the system clock stepped back), or after ``recover_after`` consecutive out-of-order
  samples. Likewise ``recover_after`` consecutive too-fast steps that agree with each other are accepted
  (the previous accepted pose was the bad one, or the robot was moved by hand while unpowered).

Every outcome is counted (``counts``) so /diagnostics can report it. The gate never rejects for ever: a
consistent stream of plausible samples is always accepted again within ``recover_after`` samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACCEPT = 'accept'
REBASE = 'rebase'
REJECT = 'reject'

# Outcome kinds, as counted and reported.
KINDS = ('future_stamp', 'old_stamp', 'time_rebase', 'out_of_limits', 'too_fast', 'shape_jump')


@dataclass(frozen=True)
class Verdict:
    action: str            # ACCEPT, REBASE or REJECT
    kind: str = ''         # one of KINDS when not a plain accept
    reason: str = ''       # one line for the log and /diagnostics


class InputGate:
    """Stamp and plausibility checks on joint samples; see the module docstring.

    lower_rad, upper_rad, velocity_limit_rad_s: (n_joints,) arrays of the robot's joint limits.
    """

    def __init__(self, lower_rad, upper_rad, velocity_limit_rad_s, *, limit_margin_rad: float = 0.2,
                 speed_factor: float = 2.0, step_margin_rad: float = 0.1, max_stamp_ahead_s: float = 1.0,
                 recover_after: int = 5):
        self.lower = np.asarray(lower_rad, dtype=float)
        self.upper = np.asarray(upper_rad, dtype=float)
        self.vmax = np.asarray(velocity_limit_rad_s, dtype=float)
        if not (self.lower.shape == self.upper.shape == self.vmax.shape and self.lower.ndim == 1):
            raise ValueError('lower_rad, upper_rad and velocity_limit_rad_s must be (n_joints,) arrays')
        if limit_margin_rad < 0 or speed_factor < 1 or step_margin_rad < 0 or max_stamp_ahead_s <= 0 \
                or recover_after < 1:
            raise ValueError('InputGate: margins must be >= 0, speed_factor >= 1, max_stamp_ahead_s > 0 '
                             'and recover_after >= 1')
        self.limit_margin = float(limit_margin_rad)
        self.speed_factor = float(speed_factor)
        self.step_margin = float(step_margin_rad)
        # Fixed for the gate's life; built once, not per sample.
        self._low = self.lower - self.limit_margin
        self._high = self.upper + self.limit_margin
        self._fast = self.speed_factor * self.vmax
        self.max_ahead = float(max_stamp_ahead_s)
        self.recover_after = int(recover_after)
        self.counts = dict.fromkeys(KINDS, 0)
        self.last_t = None
        self.last_q = None
        self._old_run = 0
        self._jump_run = 0
        self._jump_q = None
        self._jump_t = None

    def check(self, t_s: float, now_s: float, q_rad) -> Verdict:
        """The verdict on one sample; on ACCEPT or REBASE it becomes the last accepted sample."""
        q = np.asarray(q_rad, dtype=float)
        t_s, now_s = float(t_s), float(now_s)
        if q.shape != self.lower.shape or not np.all(np.isfinite(q)) or not np.isfinite(t_s):
            # Shape and finiteness are the estimator's to report; the gate only judges plausible numbers.
            return Verdict(ACCEPT)
        if t_s > now_s + self.max_ahead:
            return self._reject('future_stamp', f'stamp {t_s - now_s:.3g} s ahead of this clock')
        outside = (q < self._low) | (q > self._high)
        if outside.any():
            k = int(np.argmax(outside))
            return self._reject('out_of_limits',
                                f'joint {k} at {q[k]:.3f} rad, outside its limits [{self.lower[k]:.3f}, '
                                f'{self.upper[k]:.3f}] by more than {self.limit_margin:g} rad')
        if self.last_t is None:
            return self._accept(t_s, q)
        rebase = False
        if not t_s > self.last_t:
            clock_stepped_back = self.last_t > now_s + self.max_ahead
            self._old_run += 1
            if not clock_stepped_back and self._old_run < self.recover_after:
                return self._reject('old_stamp', f'stamp {self.last_t - t_s:.3g} s before the last one')
            rebase = True
        dt = max(t_s - self.last_t, 0.0) if not rebase else 0.0
        excess = np.abs(q - self.last_q) - (self._fast * dt + self.step_margin)
        if not rebase and np.any(excess > 0):
            k = int(np.argmax(excess))
            if self._jump_q is not None and t_s > self._jump_t and np.all(
                    np.abs(q - self._jump_q) <= self.speed_factor * self.vmax * (t_s - self._jump_t)
                    + self.step_margin):
                self._jump_run += 1
            else:
                self._jump_run = 1
            self._jump_q, self._jump_t = q, t_s
            if self._jump_run < self.recover_after:
                return self._reject('too_fast', f'joint {k} moved {abs(q[k] - self.last_q[k]):.3f} rad in '
                                                f'{dt:.3g} s, beyond its velocity limit '
                                                f'{self.vmax[k]:.3g} rad/s')
            self.counts['shape_jump'] += 1
            self._jump_run, self._jump_q = 0, None
            self._old_run = 0
            self.last_t, self.last_q = t_s, q
            return Verdict(REBASE, 'shape_jump', f'{self.recover_after} consistent samples away from the '
                                                 f'last accepted pose: re-anchored on them')
        if rebase:
            self.counts['time_rebase'] += 1
            back = self.last_t - t_s
            self._old_run = 0
            self._jump_run, self._jump_q = 0, None
            self.last_t, self.last_q = t_s, q
            return Verdict(REBASE, 'time_rebase', f'stamps went back {back:.3g} s: time base re-anchored')
        return self._accept(t_s, q)

    def _accept(self, t_s, q) -> Verdict:
        self.last_t, self.last_q = t_s, q
        self._old_run = 0
        self._jump_run, self._jump_q = 0, None
        return Verdict(ACCEPT)

    def _reject(self, kind: str, reason: str) -> Verdict:
        self.counts[kind] += 1
        return Verdict(REJECT, kind, reason)
