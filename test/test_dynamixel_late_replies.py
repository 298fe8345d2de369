"""Telling a late line from a noisy one: which of the replies a read missed arrived later, whole. The
driver's use of it against the emulated bus (a fault that answers late) is in test_dynamixel_driver.py."""
from snake_control.dynamixel import protocol as P
import collections

from snake_control.dynamixel.late_replies import LateReplies, LateWindow

SIZE = 11


def fast_reply(ids):
    return P.build_fast_status([(0, sid, bytes(range(sid, sid + SIZE))) for sid in ids])


def status(sid):
    return P.build_status(sid, 0, bytes(SIZE))


def garble(raw: bytes, at: int) -> bytes:
    return raw[:at] + bytes((raw[at] ^ 0x5A,)) + raw[at + 1:]


def test_a_fast_reply_that_comes_whole_after_the_deadline_is_late():
    late = LateReplies()
    raw = fast_reply([1, 2, 3, 4])
    # The first two blocks came in time (the read took them), the rest after the deadline.
    late.expect([3, 4], SIZE, fast=True, tail=raw[:40])
    assert late.outstanding
    late.feed(raw[40:70])
    late.feed(raw[70:])
    assert late.take() == {3: 1, 4: 1}
    assert late.take() == {}
    late.watch_only(set())
    assert not late.outstanding


def test_garbled_or_absent_bytes_leave_the_loss_a_loss():
    late = LateReplies()
    raw = fast_reply([1, 2, 3, 4])
    late.expect([1, 2, 3, 4], SIZE, fast=True)
    late.feed(garble(raw, 30))
    assert not late.take()
    late.expect([5, 6], SIZE, fast=False)
    late.feed(b'\x13\x37' + garble(status(5), 12) + b'\xff\xff')
    late.feed(status(9))                     # a servo the read did not miss
    assert not late.take()
    late.expect([7], SIZE, fast=False)       # nothing at all comes (a garbled request): lost
    assert not late.take()


def test_a_later_reads_own_replies_are_not_late_but_an_earlier_fast_reply_inside_it_is():
    late = LateReplies()
    late.expect([1, 2, 3], SIZE, fast=True)
    # The follow-up (sync read of 1, 2, 3) receives the first read's fast reply, then its own replies.
    stream = fast_reply([1, 2, 3]) + status(1) + status(2)
    late.feed(stream[:25], in_flight=True)
    late.feed(stream[25:], in_flight=True)
    assert set(late.take()) == {1, 2, 3}
    late.watch_only(set())
    late.expect([1, 2], SIZE, fast=False)
    late.feed(status(1) + status(2), in_flight=True)    # the follow-up's own: not evidence
    assert not late.take()


def test_a_fast_reply_is_watched_for_inside_later_reads_only_for_the_late_window():
    """A later sync read's bytes are parsed a second time while a fast read's missed reply may come
    inside them. A noisy line's sync reads miss servos every cycle and keep those servos watched: the
    fast reply is looked for only until fast_watch_s after the last fast read that missed any."""
    late = LateReplies()
    late.fast_watch_s = 3600.0
    late.expect([1, 2], SIZE, fast=True)
    late.expect([2, 3], SIZE, fast=False)
    assert late.fast_outstanding
    late.watch_only({2, 3})         # 1 judged; 2 still watched for the sync read
    assert late.fast_outstanding
    late.fast_watch_s = 0.0
    late.expect([2], SIZE, fast=True)
    assert not late.fast_outstanding and late.outstanding       # the sync read's servos stay watched
    late.expect([2, 3], SIZE, fast=False)
    assert not late.fast_outstanding


def test_per_servo_replies_late_as_strays_or_twice_in_one_read():
    late = LateReplies()
    late.expect([4, 5, 6], SIZE, fast=False, tail=status(4)[:6])
    late.feed(status(4)[6:] + status(5))      # cleared by the next request, or drained: late
    late.duplicate(6)                         # a follow-up got servo 6 twice
    late.duplicate(9)                         # not missed: nothing
    assert set(late.take()) == {4, 5, 6}


def test_the_window_credits_each_late_reply_to_the_oldest_cycle_that_lost_it():
    w = LateWindow(2)
    w.add(4, {1, 2, 3, 4})
    w.add(4, {1, 2})
    w.credit(collections.Counter({1: 2, 2: 1, 3: 1}))
    assert w.judged() == [] and w.watched() == {2, 4}
    w.add(4, set())
    assert w.judged() == [(4, 4, 3, 0)]            # servo 4's reply never came: lost
    w.add(4, set())
    assert w.judged() == [(4, 2, 1, 0)] and w.watched() == set()


def test_the_windows_watched_servos_follow_its_cycles_as_it_moves():
    """watched() is kept as cycles come, are credited and leave: it equals the union, over the open
    cycles, of each one's lost servos not yet credited, through a random run."""
    import random
    rng = random.Random(7)
    w = LateWindow(5)
    for _ in range(400):
        w.add(8, {sid for sid in range(8) if rng.random() < 0.2})
        if rng.random() < 0.5:
            w.credit(collections.Counter({rng.randrange(8): rng.randrange(1, 3)}))
        w.judged()
        expected = set().union(*(lost - late for _, lost, late, _ in w._open))
        assert w.watched() == expected
    w.clear()
    assert w.watched() == set()


def test_realtime_tick_tells_an_earlier_requests_reply_across_the_wrap_and_a_drifting_clock():
    """A servo whose clock runs 1.5 % fast from an arbitrary start, read every 10 ms for 70 s (the tick
    wraps twice), answering 0.1-5 ms after each request: no reply of its own request is judged stale,
    and every earlier request's reply (one to three cycles behind) is."""
    import numpy as np
    from snake_control.dynamixel.readings import TICK_WRAP, clock_leads, stale_replies

    rng = np.random.default_rng(3)
    tick_of = lambda host_s: np.array([int(12345.6 + host_s * 1015.0) % TICK_WRAP])  # noqa: E731
    lead = at = np.full(1, np.nan)
    sampled = []
    for k in range(7000):
        asked = 100.0 + 0.01 * k
        sample = asked + rng.uniform(0.0001, 0.005)
        replied = sample + rng.uniform(0.0, 0.0005)
        if k > 3:
            old = sampled[-rng.integers(1, 4)]          # a reply of one to three cycles before
            assert stale_replies(tick_of(old), asked, lead, at)[0], (k, old, asked, lead)
        assert not stale_replies(tick_of(sample), asked, lead, at)[0], (k, sample, lead)
        lead, at = clock_leads(tick_of(sample), replied, lead, at)
        sampled.append(sample)
    # The bound follows the clock that runs ahead, within the tick's resolution and the reply time.
    true_lead = (12345.6 + sampled[-1] * 15.0) % TICK_WRAP
    assert -2.0 < ((true_lead - lead[0] + TICK_WRAP / 2) % TICK_WRAP - TICK_WRAP / 2) < 2.0
