"""Joint readings and IMU readings put back in the order of their stamps.

The two streams reach the estimator apart (separate topics, one executor taking from each in turn; under
load either can arrive hundreds of milliseconds late). The estimator wants each joint update to find the
IMU attitude at its own stamp, so a joint reading stamped after the newest IMU reading waits until a
reading at or after its stamp arrives, or until the streams have moved ``hold_s`` past it (the IMU readings
around it are lost: the estimator then bridges with the contacts). IMU readings never wait.

``StampOrder(hold_s=0.25, imu_silent_s=1.0)``: ``imu(t_s, item)`` and ``joints(t_s, item)`` take a
reading and return the readings to process now, in stamp order, as (kind, t_s, item) with kind 'imu' or
'joints'; ``flush()`` returns every waiting joint reading (no reading has come for a while). Without any
IMU reading, or with none for ``imu_silent_s`` of the joints' stamps, joint readings pass at once.

Example (the IMU at 100 Hz running 20 ms behind the joints):
    >>> order = StampOrder()
    >>> order.imu(0.99, 'i0')
    [('imu', 0.99, 'i0')]
    >>> order.joints(1.00, 'j0'), order.joints(1.01, 'j1')
    ([], [])
    >>> order.imu(1.00, 'i1')                 # the joint reading at 1.00 has its IMU reading now
    [('imu', 1.0, 'i1'), ('joints', 1.0, 'j0')]
    >>> [kind for kind, _, _ in order.imu(1.02, 'i2')]
    ['imu', 'joints']
"""
from __future__ import annotations

from collections import deque


class StampOrder:
    """Holds joint readings until the IMU has caught up with their stamps (see the module docstring)."""

    def __init__(self, hold_s: float = 0.25, imu_silent_s: float = 1.0):
        if not (hold_s > 0 and imu_silent_s >= hold_s):
            raise ValueError(f'hold_s must be positive and imu_silent_s at least hold_s, got {hold_s} and '
                             f'{imu_silent_s}')
        self.hold_s = float(hold_s)
        self.imu_silent_s = float(imu_silent_s)
        self._waiting: deque = deque()
        self._imu_t = None          # newest IMU stamp seen (s)
        self._newest = None         # newest stamp seen on either stream (s)
        self.held = 0               # joint readings that waited for the IMU
        self.timed_out = 0          # joint readings let go without their IMU reading

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def imu(self, t_s: float, item) -> list:
        t_s = float(t_s)
        # The reading first, then the joint readings it catches up with: a joint stamp between two readings
        # then takes the attitude carried back from the later one at its rate (for a delta-angle gyro, the
        # mean rate between them: the attitudes interpolated).
        out = [('imu', t_s, item)]
        while self._waiting and self._waiting[0][1] <= t_s:
            out.append(self._waiting.popleft())
        self._imu_t = t_s if self._imu_t is None else max(self._imu_t, t_s)
        self._see(t_s)
        return self._expired(out)

    def joints(self, t_s: float, item) -> list:
        t_s = float(t_s)
        self._see(t_s)
        reading = ('joints', t_s, item)
        if not self._waiting and (self._imu_t is None or t_s <= self._imu_t or
                                  self._newest - self._imu_t > self.imu_silent_s):
            return [reading]
        self._waiting.append(reading)
        self.held += 1
        return self._expired([])

    def reset(self) -> None:
        """Forget the stamps seen (the clock stepped back); call flush() first."""
        self._waiting.clear()
        self._imu_t = self._newest = None

    def flush(self) -> list:
        out = list(self._waiting)
        self.timed_out += len(out)
        self._waiting.clear()
        return out

    def _see(self, t_s: float) -> None:
        self._newest = t_s if self._newest is None else max(self._newest, t_s)

    def _expired(self, out: list) -> list:
        silent = self._imu_t is None or self._newest - self._imu_t > self.imu_silent_s
        while self._waiting and (silent or self._waiting[0][1] < self._newest - self.hold_s):
            out.append(self._waiting.popleft())
            self.timed_out += 1
        return out
