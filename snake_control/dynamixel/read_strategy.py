"""How a control cycle reads the servos' state, chosen from the recent reply-failure rate.

A fast sync read answers for every servo in one packet (8 + N(L + 4) bytes), and a corrupted byte breaks
the running CRC of every block after it: at a byte error rate p the k-th servo's block survives
(1 - p)^(22 + N + 18k) (request and reply, L = 14), so at p = 1 % the 584-byte reply for 32 servos is
whole about 0.3 % of the time and every servo pays for one bad byte. A sync read answers with one status
packet per servo: a bad byte in a reply costs that servo only ((1 - p)^25 each), one in the request
(14 + N bytes) costs the read. The servos still missing are then read again, as one sync read, while the
cycle has time: after r reads a servo is missing with probability about q^r, q the loss of one read.

Modes (``ReadStrategy.mode``, reported as read_mode in /diagnostics):

- ``fast``: one fast sync read of all servos, then follow-ups of the missing (a clean line).
- ``slow``: the same with sync read (a clean line, firmware without fast sync read).
- ``noisy``: sync read (the first with the configured margin, which covers the adapter's latency),
  the missing ones read again with the short margin while the cycle has time, health reads with the
  short margin, goals in short sync write packets: on a noisy line a lost reply is lost for good, and
  waiting the full margin for each leaves no time to ask again.

Splitting the first read into groups does not pay: a group's request saves a few bytes of exposure but
costs a round trip (the adapter's latency), and for a fixed number of reads per cycle one read of all
then retries of the missing keeps the most servos fresh (docs/dynamixel.md, "A noisy line").

The failure rate is an exponential average (SMOOTHING) of the share of servo replies lost in a cycle's
first read, before any retry, less those that arrived whole after the read's deadline (late_replies):
a late reply is a slow host or emulator, not a noisy line, and per-servo packets would only add round
trips to wait for (the late rate is kept apart, ``late_rate``). ``fast``/``slow`` go ``noisy`` above ENTER_NOISY (a clean line loses
none; a servo that stopped answering alone costs 1/N and is soon quarantined); ``noisy`` goes back after
at least MIN_NOISY_CYCLES once the rate is under LEAVE_NOISY: a sync read of 32 servos losing 1 % of
them means p ~ 1.4e-4 per byte (71 bytes each, its own reply and the shared request), at which the fast
read's 630 bytes are whole 92 % of the time and it loses about 5 % of the servos. If the fast read then
loses as much again within MIN_NOISY_CYCLES (the firmware or the adapter, not the line), the next return
waits twice as long, up to MAX_BACKOFF_CYCLES.
"""
from __future__ import annotations

import numpy as np

ENTER_NOISY = 0.10          # first-read loss above which one long reply is the wrong bet
LEAVE_NOISY = 0.01          # per-packet loss under which it is the right one again
SMOOTHING = 0.05            # weight of one cycle in the failure rate (about 20 cycles of memory)
MIN_NOISY_CYCLES = 100      # cycles in noisy mode before a return is considered
MAX_BACKOFF_CYCLES = 3200


class ReadStrategy:
    """The read mode of one bus and the failure rate it is chosen from.

    ``read_mode``: the DriverConfig's 'auto' (switch as above), 'fast' or 'slow' (fixed: the failure
    rate is only measured). ``fast_capable``: every servo's firmware has fast sync read.
    """

    def __init__(self, read_mode: str = 'auto', fast_capable: bool = True):
        self.read_mode = read_mode
        self.fast_capable = fast_capable and read_mode != 'slow'
        self.mode = 'fast' if self.fast_capable else 'slow'
        self.failure_rate = 0.0
        self.late_rate = 0.0        # the same average of the share that came late but whole
        self.switches = 0
        self._cycles_in_mode = 0
        self._noisy_wait = MIN_NOISY_CYCLES

    def no_fast(self) -> None:
        """A servo's firmware lacks fast sync read: never use it."""
        self.fast_capable = False
        if self.mode == 'fast':
            self.mode = 'slow'

    @property
    def fast(self) -> bool:
        return self.mode == 'fast'

    @property
    def noisy(self) -> bool:
        return self.mode == 'noisy'

    def record(self, requested: int, lost: int, late: int = 0, caught_late: int = 0) -> str | None:
        """Take one cycle's first read (servo replies asked, lost, and of those lost how many arrived
        whole after the deadline; ``caught_late``: replies taken only thanks to an extended deadline);
        returns an event text when the mode changes."""
        if requested <= 0:
            return None
        late = min(late, lost)
        self.failure_rate += SMOOTHING * ((lost - late) / requested - self.failure_rate)
        self.late_rate += SMOOTHING * (min(requested, late + caught_late) / requested - self.late_rate)
        self._cycles_in_mode += 1
        if self.read_mode != 'auto':
            return None
        if self.mode != 'noisy' and self.failure_rate > ENTER_NOISY:
            came_back_early = self.switches > 0 and self._cycles_in_mode < MIN_NOISY_CYCLES
            self._noisy_wait = (min(MAX_BACKOFF_CYCLES, 2 * self._noisy_wait) if came_back_early
                                else MIN_NOISY_CYCLES)
            was = self.mode
            self._switch('noisy')
            return (f'{was} sync read lost {self.failure_rate:.0%} of the servo replies: noisy line, '
                    f'reading per-servo packets and retrying the lost ones')
        if self.mode == 'noisy' and self._cycles_in_mode >= self._noisy_wait \
                and self.failure_rate < LEAVE_NOISY:
            rate, self.failure_rate = self.failure_rate, 0.0     # measured afresh in the new mode
            self._switch('fast' if self.fast_capable else 'slow')
            return f'the line is clean again ({rate:.1%} of servo replies lost): {self.mode} sync read'
        return None

    def _switch(self, mode: str) -> None:
        self.mode = mode
        self.switches += 1
        self._cycles_in_mode = 0


def expected_all_fresh(p_byte: float, p_drop: float, n: int, reads: int, size: int = 11,
                       trials: int = 20000, seed: int = 1) -> float:
    """Share of cycles that read every one of ``n`` servos when a cycle makes ``reads`` sync reads (the
    first of all servos, each next one of those still missing) of ``size`` bytes per servo, on a line
    that garbles each byte with probability ``p_byte`` and loses each reply with ``p_drop``.

    A request of 14 + m bytes (m servos) is lost whole; each reply of 11 + size bytes on its own. The
    shared requests make the servos' fates dependent, so this counts (seeded Monte Carlo) rather than
    multiplies. Wire arithmetic only: the host's and the adapter's latency decide ``reads``.

    >>> round(expected_all_fresh(0.01, 0.01, 32, 5), 2), round(expected_all_fresh(0.005, 0.005, 32, 5), 2)
    (0.84, 0.99)
    """
    rng = np.random.default_rng(seed)
    missing = np.ones((trials, n), dtype=bool)
    reply_ok = (1.0 - p_byte) ** (11 + size) * (1.0 - p_drop)
    for _ in range(reads):
        m = missing.sum(axis=1)
        request_ok = rng.random(trials) < (1.0 - p_byte) ** (14 + m)
        missing &= ~(request_ok[:, None] & (rng.random((trials, n)) < reply_ok))
    return float(np.mean(~missing.any(axis=1)))
