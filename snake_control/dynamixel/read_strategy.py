"""How a control cycle reads the servos' state, chosen from the recent reply-failure rate.

A fast sync read answers for every servo in one packet (8 + N(L + 4) bytes). Each block is checked on
its own (a garbled byte costs the block it hit), but a servo that does not answer ends the chain of
blocks, and a garbled request (14 + N bytes) gets no reply at all: at 1 % of bytes garbled and 1 % of
replies lost, about half the servos of a 32-servo read are lost. A sync read answers with one status
packet per servo: a bad byte in a reply, or a lost reply, costs that servo only ((1 - p)^25 each), one
in the request costs the read. The servos still missing are then read again, as one sync read, while
the cycle has time: after r reads a servo is missing with probability about q^r, q the loss of one
read.

Modes (``ReadStrategy.mode``, reported as read_mode in /diagnostics):

- ``fast``: one fast sync read of all servos, then follow-ups of the missing (a clean line).
- ``slow``: the same with sync read (a clean line, firmware without fast sync read).
- ``noisy``: sync read, the missing ones read again while the cycle has time, goals in short sync
  write packets. The reply margins are learnt from this line's reply latency (``ReplyLatency``,
  ``best_margin_ms``; the configured margin and the short one until then): a garbled request gets no
  reply, so every read it hits costs the whole margin, and waiting the configured one (which covers a
  loaded host) leaves no time to ask again.

Splitting the first read into groups does not pay: a group's request saves a few bytes of exposure but
costs a round trip (the adapter's latency), and for a fixed number of reads per cycle one read of all
then retries of the missing keeps the most servos fresh (docs/dynamixel.md, "A noisy line").

The failure rate is an exponential average (SMOOTHING) of the share of servo replies lost in a cycle's
first read, before any retry, less those that arrived whole after the read's deadline (late_replies):
a late reply is a slow host or emulator, not a noisy line, and per-servo packets would only add round
trips to wait for (the late rate is kept apart, ``late_rate``). ``fast``/``slow`` go ``noisy`` above
ENTER_NOISY (a clean line loses none; a servo that stopped answering alone costs 1/N and is soon
quarantined); ``noisy`` goes back after at least MIN_NOISY_CYCLES once the rate is under LEAVE_NOISY: a
sync read of 32 servos losing 1 % of them means p ~ 1.4e-4 per byte (71 bytes each, its own reply and
the shared request), at which the fast read's 46-byte request is lost 0.6 % of the time and each
20-byte block 0.3 %: about 1 % of the servos. If the fast read then loses as much again within
MIN_NOISY_CYCLES (the firmware or the adapter, not the line), the next return waits twice as long, up
to MAX_BACKOFF_CYCLES.
"""
from __future__ import annotations

import collections
import math

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


# The learnt reply margin of a noisy line (ReplyLatency): how long a read waits, beyond the wire time
# of its bytes, for a reply before it takes the request for lost.
LATENCY_WINDOW = 400        # reads kept (a few seconds of a noisy line)
LATENCY_MIN_SAMPLES = 20    # fewer than this: no margin learnt yet (the configured one applies)
LATENCY_SLACK_MS = 0.1      # added to a wait seen: the reply's bytes trickling in
LATENCY_FLOOR_MS = 0.2      # never shorter (a line that answered at once so far may not always)
# The margin is worked out again after this many new reads, not after each: on a noisy line a cycle makes
# several reads, and working it out (a sort of the window) took about a tenth of a millisecond each time,
# time the cycle's follow-ups then lacked. A few cycles of delay are nothing against a 400-read window.
LATENCY_RECOMPUTE = 10


def best_margin_ms(waits: np.ndarray, read_ms: float, floor_ms: float, ceiling_ms: float) -> float:
    """The reply margin (ms) that gets the most replies per ms from reads whose first reply took
    ``waits`` (ms beyond the wire time; inf: it came after its read's deadline; nan: the read got no
    reply at all, nor did one come later: a garbled request, or every reply garbled or lost).

    A read of ``read_ms`` (the wire time of its bytes) whose reply comes w ms late takes read_ms +
    min(w, M) with margin M, and gets its reply when w <= M; one that gets no reply takes read_ms + M.
    One given up while its replies are still to come leaves them on the line, and the next read waits
    behind them: read_ms more. So the replies per ms are a F / (read_ms + a E[min(w, M)] + (1 - a) M
    + a (1 - F) read_ms), a the share of reads answered and F the share of those answered within M. A
    reply that came late counts as coming at ``ceiling_ms`` (the configured margin). The margin is one
    of the waits seen (plus LATENCY_SLACK_MS) or the ceiling, within ``floor_ms``..``ceiling_ms``.

    >>> w = np.array([0.3] * 60 + [0.6] * 20 + [3.0] * 30)
    >>> round(best_margin_ms(w, 0.5, 0.2, 8.0), 2)      # a short read: the 3 ms tail is asked again
    0.7
    >>> round(best_margin_ms(w, 2.0, 0.2, 8.0), 2)      # a long one: worth waiting for
    3.1
    >>> round(best_margin_ms(np.append(w, [np.nan] * 150), 2.0, 0.2, 8.0), 2)  # unless requests get lost
    0.7
    """
    waits = np.asarray(waits, dtype=float)
    answered = waits[~np.isnan(waits)]
    if not len(answered):
        return ceiling_ms
    a = len(answered) / len(waits)
    seen = np.sort(np.minimum(answered + LATENCY_SLACK_MS, ceiling_ms))
    margins = np.clip(np.unique(np.append(seen, ceiling_ms)), floor_ms, ceiling_ms)
    within = np.searchsorted(seen, margins, side='right')          # replies within each margin
    share = within / len(seen)
    waited = (np.concatenate(([0.0], np.cumsum(seen)))[within] + margins * (len(seen) - within)) / len(seen)
    per_ms = a * share / (read_ms + a * waited + (1.0 - a) * margins + a * (1.0 - share) * read_ms)
    return float(margins[int(np.argmax(per_ms))])


class ReplyLatency:
    """How long this line's replies take beyond the wire time of the bytes (ms), and the reply margin
    learnt from it: ``observe`` each wait for a first reply that came in time, ``missed`` a read whose
    replies came after its deadline, ``silent`` a read that got no reply at all, ``margin_ms`` the
    margin.

    On a noisy line a garbled request gets no reply at all, and the read can only tell after its
    margin: every such read costs the margin. A fixed margin is either too long for a line that answers
    in 0.1 ms or too short for a USB adapter with a 1 ms latency timer; the margin here is the one that
    gets the most replies per ms from what this line's replies took (best_margin_ms). ``also``: another
    ReplyLatency that learns from these reads too.
    """

    def __init__(self, window: int = LATENCY_WINDOW, also: 'ReplyLatency | None' = None):
        self.also = also
        self._waits: collections.deque = collections.deque(maxlen=window)
        self._margin: float | None = None       # best_margin_ms of _waits, None when to be computed
        self._for = (math.nan, math.nan)        # the (ceiling, read) it was computed for
        self._new = 0                           # reads seen since

    def __len__(self) -> int:
        return len(self._waits)

    def observe(self, wait_ms: float) -> None:
        """A reply came ``wait_ms`` after the wire time of the request (and what preceded it) and of
        the reply's own bytes."""
        self._add(max(0.0, float(wait_ms)))

    def missed(self) -> None:
        """A read's replies came after its deadline."""
        self._add(math.inf)

    def silent(self) -> None:
        """A read got no reply, in time or since."""
        self._add(math.nan)

    def _add(self, value: float) -> None:
        self._waits.append(value)
        self._new += 1
        if self.also is not None:
            self.also._add(value)

    def margin_ms(self, ceiling_ms: float, read_ms: float) -> float | None:
        """The learnt margin (ms) within LATENCY_FLOOR_MS..``ceiling_ms`` (the configured margin) for
        reads of ``read_ms`` on the wire; None until LATENCY_MIN_SAMPLES reads were seen."""
        if len(self._waits) < LATENCY_MIN_SAMPLES:
            return None
        if self._margin is None or self._new >= LATENCY_RECOMPUTE or self._for != (ceiling_ms, read_ms):
            self._margin = best_margin_ms(np.fromiter(self._waits, float), read_ms, LATENCY_FLOOR_MS,
                                          ceiling_ms)
            self._for, self._new = (ceiling_ms, read_ms), 0
        return self._margin


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
