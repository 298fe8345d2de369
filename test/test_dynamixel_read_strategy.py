"""The read strategy: when the driver leaves fast sync read for per-servo packets on a noisy line, and
when it comes back (hysteresis, back-off), from the share of servo replies a cycle's first read loses;
the reply margin a noisy line's reads learn from its reply latency.
The driver's use of it against the emulated bus is in test_dynamixel_driver.py."""
import numpy as np

from snake_control.dynamixel.read_strategy import (ENTER_NOISY, LEAVE_NOISY, MAX_BACKOFF_CYCLES,
                                                   MIN_NOISY_CYCLES, ReadStrategy, ReplyLatency,
                                                   best_margin_ms)


def feed(strategy, cycles, lost, requested=32):
    events = [strategy.record(requested, lost) for _ in range(cycles)]
    return [e for e in events if e]


def cycles_until(strategy, mode, lost, limit=100_000, requested=32, late=0):
    for k in range(1, limit + 1):
        strategy.record(requested, lost, late)
        if strategy.mode == mode:
            return k
    raise AssertionError(f'never reached {mode} (failure rate {strategy.failure_rate:.3f})')


def test_a_clean_line_and_one_bad_cycle_stay_fast():
    s = ReadStrategy()
    assert feed(s, 500, 0) == [] and s.mode == 'fast' and s.failure_rate == 0.0
    # One cycle that lost every reply (a host hiccup) is not a noisy line.
    assert feed(s, 1, 32) == [] and s.mode == 'fast'
    assert 0 < s.failure_rate < ENTER_NOISY
    # Nor is one servo that stopped answering (it costs 1/N; the driver quarantines it).
    assert feed(s, 500, 1) == [] and s.mode == 'fast'


def test_sustained_loss_goes_noisy_then_back_after_the_line_is_clean():
    s = ReadStrategy()
    events = feed(s, 10, 30)                # a fast read on a 1 % line loses nearly everything
    assert s.mode == 'noisy' and not s.fast and s.noisy
    assert len(events) == 1 and 'noisy line' in events[0]
    # Per-servo packets on the same line still lose about a third: it stays noisy, however long.
    assert feed(s, 2000, 10) == [] and s.mode == 'noisy'
    # The line gets clean: back to fast once the average has fallen under LEAVE_NOISY.
    k = cycles_until(s, 'fast', 0)
    assert k > 10 and s.failure_rate == 0.0     # measured afresh in the new mode
    assert s.switches == 2


def test_no_return_before_the_minimum_stay():
    s = ReadStrategy()
    cycles_until(s, 'noisy', 32)
    # Clean from the first noisy cycle on: still no return before MIN_NOISY_CYCLES.
    assert cycles_until(s, 'fast', 0) == MIN_NOISY_CYCLES


def test_fast_failing_again_at_once_doubles_the_wait():
    """Not the noise but the firmware or the adapter: returning at once would thrash."""
    s = ReadStrategy()
    cycles_until(s, 'noisy', 32)
    waits = []
    for _ in range(8):
        waits.append(cycles_until(s, 'fast', 0))       # per-servo packets work...
        cycles_until(s, 'noisy', 32)                    # ...the fast read does not
    assert waits[0] == MIN_NOISY_CYCLES
    assert waits[1:4] == [2 * MIN_NOISY_CYCLES, 4 * MIN_NOISY_CYCLES, 8 * MIN_NOISY_CYCLES]
    assert max(waits) == MAX_BACKOFF_CYCLES


def test_firmware_without_fast_read_uses_sync_read_and_goes_noisy_too():
    s = ReadStrategy()
    s.no_fast()
    assert s.mode == 'slow' and not s.fast
    cycles_until(s, 'noisy', 20)
    assert cycles_until(s, 'slow', 0) >= MIN_NOISY_CYCLES


def test_late_replies_are_not_a_noisy_line():
    """Replies that arrived whole after the deadline (a loaded host) count as late, not lost: a fast
    read that is often late stays fast; the losses that were not late still go noisy."""
    s = ReadStrategy()
    events = [s.record(32, 32, late=32) for _ in range(500)]
    assert not any(events) and s.mode == 'fast' and s.failure_rate == 0.0 and s.late_rate > 0.99
    s.record(32, 2, late=5)                 # late by more than was lost is still only the loss
    assert s.failure_rate == 0.0 and s.mode == 'fast'
    # Half of each cycle's losses came late, the other half garbled: the garbled half goes noisy.
    assert cycles_until(s, 'noisy', 16, late=8) < 20


def test_fixed_modes_only_measure():
    for mode in ('fast', 'slow'):
        s = ReadStrategy(mode)
        assert s.mode == mode
        assert feed(s, 500, 32) == [] and s.mode == mode
        assert s.failure_rate > 0.99


def test_thresholds_leave_room_between_them():
    # A line just noisy enough to enter must not look clean enough to leave (no flapping).
    assert LEAVE_NOISY < ENTER_NOISY / 5


def test_the_learnt_reply_margin_fits_the_line_not_a_fixed_figure():
    """On a noisy line every garbled request costs its read the reply margin: the margin is learnt from
    how long this line's replies took beyond their wire time (ReplyLatency), so that it is short on a
    line that answers at once and still covers a USB adapter's latency timer (recorded-like waits)."""
    rng = np.random.default_rng(3)
    follow_up_ms = (14 + 4 + 4 * 25) * 0.0025      # a sync read of four servos at 4 Mbit/s
    quick = ReplyLatency()
    assert quick.margin_ms(8.0, follow_up_ms) is None       # nothing seen yet: the configured margin
    # Replies 0.25 to 0.35 ms late, 2 % at 3 ms: asking again beats waiting for the tail.
    for w in np.r_[rng.uniform(0.25, 0.35, 392), np.full(8, 3.0)]:
        quick.observe(w)
    assert 0.35 <= quick.margin_ms(8.0, follow_up_ms) < 1.0
    # A USB adapter with a 1 ms latency timer: replies 0.2 to 1.2 ms late, all waited for (a fixed
    # 0.5 ms margin would lose most of them), and never beyond the configured margin.
    usb = ReplyLatency()
    for w in rng.uniform(0.2, 1.2, 400):
        usb.observe(w)
    assert 1.2 <= usb.margin_ms(8.0, follow_up_ms) < 2.0
    assert usb.margin_ms(1.0, follow_up_ms) == 1.0
    # Replies that came after their deadline: the margin goes back up to the configured one.
    for _ in range(400):
        usb.missed()
    assert usb.margin_ms(8.0, follow_up_ms) == 8.0


def test_the_first_reads_latency_teaches_the_other_reads_too():
    retry = ReplyLatency()
    first = ReplyLatency(also=retry)
    for _ in range(30):
        first.observe(0.4)
    first.missed()
    assert len(first) == len(retry) == 31 and retry.margin_ms(8.0, 0.3) == first.margin_ms(8.0, 0.3)


def test_best_margin_waits_longer_for_a_longer_read():
    """Giving up a read whose replies are still to come leaves them on the line: the longer the read,
    the more a late reply is worth waiting for."""
    w = np.r_[np.full(60, 0.3), np.full(20, 0.6), np.full(30, 3.0)]
    assert best_margin_ms(w, 0.5, 0.2, 8.0) < 1.0 < 3.0 < best_margin_ms(w, 2.0, 0.2, 8.0) <= 8.0
    assert best_margin_ms(np.full(50, 0.01), 0.5, 0.2, 8.0) == 0.2      # never under the floor
    # Reads that got no reply at all (garbled requests) cost the margin whatever it is: the more of
    # them, the less the tail is worth waiting for.
    lost = np.r_[w, np.full(150, np.nan)]
    assert best_margin_ms(lost, 2.0, 0.2, 8.0) < 1.0
