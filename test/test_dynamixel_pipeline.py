"""The pipelined cycle (Driver.pipeline): the host's work on the last reading overlaps the next read.

Real SDK, emulated servos in their own process over a pty. The pipeline is forced at 50 Hz
(pipeline_spare_ms above the period) so that the tests are about behaviour, not speed: bench/bench_dynamixel.py
measures what it gains at 400 Hz.
"""
import threading
import time

import numpy as np
import pytest

from snake_control.dynamixel.driver import Driver
from snake_control.dynamixel.driver_config import watchdog_units
from snake_control.dynamixel.readings import STATE_BLOCK
from snake_control.dynamixel.simproc import SimBusProcess
from snake_control.robot import load_robot
from test_dynamixel_driver import (ROBOT_YAML, ReadingAges, assert_goals_safe, config, sim_args, stream,
                                   stream_until, wait_for)


@pytest.fixture(scope='module')
def robot(tmp_path_factory):
    path = tmp_path_factory.mktemp('robot') / 'test_snake_4.yaml'
    path.write_text(ROBOT_YAML)
    return load_robot(str(path))


def pipelined_driver(robot, sim, **kw) -> Driver:
    d = Driver(robot, sim.path, config=config(**kw))
    d.pipeline = True
    d.pipeline_spare_ms = 1e6           # whatever the wire time: these tests are about behaviour
    return d


class Recorder:
    """What the bus thread did, in order: goals decided (by which cycle, and whether ahead of the next
    cycle), goals written (by which cycle), first state reads (start, end), snapshots handed over."""

    def __init__(self, d: Driver):
        self.d = d
        self.lock = threading.Lock()
        self.decided, self.written, self.reads, self.handed = [], [], [], []
        decide, write, sync_read = d._decide, d._write_goals, d.bus.sync_read

        def _decide(now, command, estop, deferred=False):
            goal = decide(now, command, estop, deferred)
            with self.lock:
                self.decided.append((d.counters.cycles, deferred, None if goal is None else goal.copy()))
            return goal

        def _write_goals(goal, rebooting, encoded=None):
            sent = write(goal, rebooting, encoded)
            with self.lock:
                self.written.append((d.counters.cycles, d._goal.copy(), d.mode))
            return sent

        def _sync_read(address, size, ids, fast, *a, **kw):
            start = time.monotonic()
            try:
                return sync_read(address, size, ids, fast, *a, **kw)
            finally:
                if len(ids) == len(d.ids):
                    with self.lock:
                        self.reads.append((start, time.monotonic()))

        def on_state(snap):
            with self.lock:
                self.handed.append((snap, time.monotonic(), d.counters.cycles))
        d._decide, d._write_goals, d.bus.sync_read, d.on_state = _decide, _write_goals, _sync_read, on_state


def pipeline_blockers(d: Driver) -> dict:
    """What Driver._pipeline_fits looks at, for an assert message when a loaded host pipelined too few
    cycles: the mode, the read mode, and the conditions that send a cycle to the sequential path."""
    return dict(mode=d.mode, reasons=d.reasons, read_mode=d.read_strategy.mode, pipeline_break=d._pipeline_break,
                rearm_pending=sorted(d._rearm_pending), unsettled=d._unsettled_since is not None,
                transmit_fault=d._transmit_fault_since is not None, pending=d._pending is not None,
                next_goal=d._next_goal is not None, max_stale_cycles=int(d.table.stale_cycles.max()))


def test_pipelined_goals_are_decided_a_cycle_ahead_from_the_reading_handed_over_first(robot):
    """Each pipelined cycle writes the goal decided while the cycle before's replies were on the wire,
    from the reading handed to on_state just before that decision."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        d = pipelined_driver(robot, sim)
        d.start()
        rec = Recorder(d)
        try:
            assert stream_until(d, robot, lambda: d.mode == 'running' and d.counters.pipelined_cycles >= 40)
            stream(d, robot, 0.3, t0=2.0)
        finally:
            d.stop()
        assert_goals_safe(sim, d)
    ahead = {c: g for c, deferred, g in rec.decided if deferred and g is not None}
    assert len(ahead) >= 30, rec.decided[-5:]
    # Every goal written after a decision made ahead is that decision, one cycle later, unless that cycle
    # left the pipeline (a stale reply, or a host that made the cycle late): it then drops the goal decided
    # ahead and decides again from the newer reading, and writes that (CI once saw one such cycle).
    again = {c: g for c, deferred, g in rec.decided if not deferred and g is not None}
    checked, left = 0, 0
    for cycle, goal, _ in rec.written:
        if cycle - 1 not in ahead:
            continue
        expected = again[cycle] if cycle in again else ahead[cycle - 1]
        assert np.array_equal(goal, np.clip(expected, d.lower, d.upper)), cycle
        if cycle in again:
            left += 1
        else:
            checked += 1
    assert checked >= 30
    assert left <= max(2, checked // 10), (left, checked)


def test_pipelined_stamps_are_the_reads_time_not_when_decoded(robot):
    """A pipelined reading is taken and handed over during the next read; its stamp is still the time
    of its own read (within it), before the read during which it was handed over began."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        d = pipelined_driver(robot, sim, stale_limit=1000)
        d.start()
        rec = Recorder(d)
        try:
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles >= 60 and len(rec.handed) >= 60)
        finally:
            d.stop()
    reads = np.array(rec.reads)
    stamps = [snap.stamp_s for snap, _, _ in rec.handed]
    assert stamps == sorted(set(stamps))            # one each, in order
    behind = 0
    for snap, handed_s, _ in rec.handed[5:]:
        k = int(np.searchsorted(reads[:, 0], snap.stamp_s)) - 1
        start, end = reads[k]
        assert start <= snap.stamp_s <= end, (snap.stamp_s, reads[k])
        # Handed over while a later read was on the wire: its stamp is that earlier read's.
        behind += k + 1 < len(reads) and reads[k + 1][0] <= handed_s <= reads[k + 1][1]
    assert behind >= 0.8 * len(rec.handed[5:]), behind


def test_pipelined_stale_servo_holds_and_is_never_published_fresh(robot):
    """A silent servo goes stale (its last good reading kept, never published as fresh), holds the
    robot, and the hold holds: every goal written stays where the hold put it."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        # Fast reads throughout (a silent servo would otherwise switch the line to sync reads).
        d = pipelined_driver(robot, sim, stale_policy='hold', read_mode='fast')
        d.start()
        rec = Recorder(d)
        try:
            assert stream_until(d, robot, lambda: d.mode == 'running' and d.state().fresh.all()
                                and d.counters.pipelined_cycles >= 20)
            piped = d.counters.pipelined_cycles
            sim.command('silent 3 0.6')
            assert stream_until(d, robot, lambda: d.mode == 'hold', 5.0, t0=1.0), d.reasons
            assert any('j3 stale' in r for r in d.reasons), d.reasons
            # The read that first lost j3 was pipelined (every cycle was); those after it are
            # sequential while a servo is missing (the line settles after an incomplete read).
            assert d.counters.pipelined_cycles > piped
            held_from = len(rec.written)
            stream(d, robot, 0.2, t0=2.0)
            held = rec.written[held_from:]
            assert wait_for(lambda: d.state().fresh.all(), 5.0)
            assert stream_until(d, robot, lambda: d.mode == 'running', 5.0, t0=3.0), (d.mode, d.reasons)
            piped = d.counters.pipelined_cycles
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles > piped + 10, 5.0, t0=4.0)
        finally:
            d.stop()
        assert_goals_safe(sim, d)
    snaps = [snap for snap, _, _ in rec.handed]
    k_stale = next(k for k, s in enumerate(snaps) if not s.fresh[2])
    last_good = snaps[k_stale - 1].position_rad[2]
    stale = [s for s in snaps[k_stale:] if not s.fresh[2]]
    assert len(stale) >= d.config.stale_limit
    assert all(s.position_rad[2] == last_good for s in stale[:len(stale) // 2])
    # The hold holds: commands kept coming, the goals did not move.
    held = [goal for _, goal, mode in held if mode == 'hold']
    assert len(held) >= 5 and all(np.array_equal(g, held[0]) for g in held)


def test_switching_between_pipelined_and_sequential_cycles_steps_no_goal_beyond_the_velocity_limit(robot):
    """A command that jumps, an estop (hold) and its release, a command timeout, the line turning noisy
    and clean again, the pipeline switched off and on: between any two cycles no running goal moves more
    than its joint's velocity limit allows."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        d = pipelined_driver(robot, sim, command_timeout_s=0.15, estop_policy='hold')
        d.start()
        rec = Recorder(d)
        jump = np.array([0.9, -0.9, 0.7, -0.9])

        def command_until(q, predicate, seconds=5.0):
            """Send q every 20 ms until predicate() holds, for at least 0.1 s."""
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                d.set_command(robot.joint_names, q)
                if time.monotonic() - start > 0.1 and predicate():
                    return True
                time.sleep(0.02)
            return False
        try:
            assert stream_until(d, robot, lambda: d.mode == 'running' and d.counters.pipelined_cycles >= 10)
            for k in range(3):
                assert command_until(jump * (-1) ** k, lambda: d.mode == 'running')
                d.set_estop(True)
                assert wait_for(lambda: 'estop' in d.reasons, 5.0)
                d.set_estop(False)
                assert command_until(-jump * (-1) ** k, lambda: d.mode == 'running'), d.reasons
                d.pipeline_spare_ms = 0.0           # sequential
                assert command_until(jump * (-1) ** k, lambda: d.mode == 'running')
                d.pipeline_spare_ms = 1e6
                assert command_until(-jump * (-1) ** k, lambda: d.mode == 'running')
                assert wait_for(lambda: d.mode == 'hold', 5.0)   # the command timed out
            sim.command('corrupt 0.03')
            assert stream_until(d, robot, lambda: d.read_strategy.noisy, 10.0, t0=4.0)
            cycles_noisy = d.counters.cycles
            sim.command('corrupt 0')
            piped = d.counters.pipelined_cycles
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles > piped + 10, 15.0, t0=6.0)
        finally:
            d.stop()
    # Goals of a running robot (entering a hold steps each goal back to where its servo is).
    steps = [(c1, g1 - g0) for (c0, g0, _), (c1, g1, mode) in zip(rec.written, rec.written[1:])
             if c1 == c0 + 1 and mode == 'running']
    max_step = d.velocity_limit * d.period_s
    worst = max(float(np.max(np.abs(step) / max_step)) for _, step in steps)
    assert worst <= 1.0 + 1e-9, worst
    # The big steps were taken at the limit (the command jumped), in pipelined cycles too.
    assert worst > 0.99
    switched = {c for c, deferred, _ in rec.decided if deferred}
    assert any(c - 1 in switched for c, _ in steps) and cycles_noisy


@pytest.mark.parametrize('fault', ['trip 2 overload'])
def test_pipelined_alert_torque_off_policy_runs_in_the_next_sequential_cycle(robot, fault):
    """A decision made ahead never writes torque off on a line busy with a read: the cycle after runs
    sequentially and turns every servo off."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        d = pipelined_driver(robot, sim, alert_policy='torque_off')
        d.start()
        rec = Recorder(d)
        try:
            assert stream_until(d, robot, lambda: d.mode == 'running' and d.counters.pipelined_cycles >= 10)
            sim.command(fault)
            assert wait_for(lambda: d.mode == 'torque_off', 5.0)
            assert wait_for(lambda: not any(s.torque for s in d.servos), 5.0)
        finally:
            d.stop()
        assert_goals_safe(sim, d)
    # The decision made ahead was refused (None), and the next cycle decided torque off itself.
    refused = [c for c, deferred, g in rec.decided if deferred and g is None]
    assert refused
    assert any(c == refused[0] + 1 and not deferred for c, deferred, _ in rec.decided)


def test_pipelined_an_earlier_requests_reply_is_never_published_as_fresh(robot):
    """Replies 25 ms late at a 20 ms period come inside the next cycle's read, whole. The read they were
    late for lost them, so that next cycle is sequential and checks them at once; the pipelined cycles
    around it hand each reading over during a later read. A reading published as fresh was sampled after
    its own read's request left, within what the driver can tell (as in test_dynamixel_driver's
    sequential test: one tick, and how loose its bound on the servo's clock was)."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        d = pipelined_driver(robot, sim, stale_limit=1000, read_mode='fast')
        asked = []          # host time each full read was asked (its request left right after)
        sync_read = d.bus.sync_read

        def _sync_read(address, size, ids, fast, *a, **kw):
            if len(ids) == len(d.ids):
                asked.append(time.monotonic())
            return sync_read(address, size, ids, fast, *a, **kw)
        ages = ReadingAges()
        fresh_seen, older = ages.fresh_seen, ages.older
        handed_late = [0]   # snapshots handed over while a later read was on the wire

        def on_state(snap):
            i = int(np.searchsorted(asked, snap.stamp_s)) - 1      # the read this reading came from
            handed_late[0] += i < len(asked) - 1
            ages.judge(d, snap, asked[i])
        d.start()
        d.bus.sync_read, d.on_state = _sync_read, on_state
        try:
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles >= 20)
            sim.command('late 0.3 25')
            fresh0, piped = fresh_seen[0], d.counters.pipelined_cycles
            # Commanded all along (a command that times out holds the robot, and a loaded host then pipelines
            # fewer of the cycles), until the late replies were both seen and pipelined around.
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles >= piped + 20 and handed_late[0] >= 20
                                and fresh_seen[0] >= fresh0 + 100 and sim.state()['counters']['late'] >= 60,
                                timeout_s=60.0), (fresh_seen[0] - fresh0, handed_late[0], pipeline_blockers(d),
                                                  sim.state()['counters'], d.counters)
            sim.command('late 0')
            assert fresh_seen[0] >= 100 and not older, \
                f'{len(older)} of {fresh_seen[0]} fresh readings were older (servo, ms, slack): {older[:10]}'
            assert d.counters.stale_replies > 0
        finally:
            d.stop()
        assert_goals_safe(sim, d)


def test_a_stale_reading_taken_on_leaving_the_pipeline_settles_in_one_sequential_cycle(robot):
    """A pipelined reading with stale replies sends the next cycle to the sequential path, whose own read
    settles the line; then the pipeline resumes. When the reading left pending as the pipeline was left
    held stale replies too, nothing was pending any more to clear the mark, and the driver stayed
    sequential for good (a CI run: 36 pipelined cycles, then none, with late replies)."""
    with SimBusProcess(sim_args(robot.source)) as sim:
        d = pipelined_driver(robot, sim, stale_limit=1000, read_mode='fast')
        take_pending, flushed = d._take_pending, [0]

        def _take_pending(now, pending):
            take_pending(now, pending)
            if d._next_goal is None and d._pending is None and flushed[0] == 0:
                # Taken by _flush_pipeline (a sequential cycle): as if its replies had come stale.
                flushed[0] += 1
                d._pipeline_break = True
        d.start()
        try:
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles >= 20)
            d._take_pending = _take_pending
            d._pipeline_break = True            # one pipelined reading held stale replies
            assert stream_until(d, robot, lambda: flushed[0] == 1)
            piped = d.counters.pipelined_cycles
            assert stream_until(d, robot, lambda: d.counters.pipelined_cycles >= piped + 20), \
                pipeline_blockers(d)
        finally:
            d.stop()
        assert_goals_safe(sim, d)


def test_a_pipelined_reading_is_checked_against_its_own_request_a_cycle_later(robot):
    """A pipelined cycle keeps a whole reply raw and takes it during the next read: its Realtime Ticks
    are judged against the time of the request it came in, not the one then on the wire, and a reply
    sampled before that request (an earlier request's, taken late) is never taken as fresh. The
    emulator cannot put such a reply in a pipelined read (a reply late for its own read leaves that read
    incomplete, and the cycle after it is sequential), so the readings here are made up, in the
    servos' own block layout; the servos' clocks run on the host's milliseconds."""
    d = Driver(robot, '/dev/null', config=config())
    handed = []
    d.on_state = handed.append

    def replies(sampled_s, position_ticks):
        rows = np.zeros(len(d.ids), STATE_BLOCK.dtype)
        rows['present_position'] = position_ticks
        rows['bus_watchdog'] = watchdog_units(d.watchdog_ms)
        rows['realtime_tick'] = int(sampled_s * 1000.0) % 32768
        return {sid: (0, rows[i:i + 1].tobytes()) for i, sid in enumerate(d.ids)}

    t0 = time.monotonic()
    # (replies, IDs asked, asked s, replied s, stamp s): the first sets each servo's clock bound.
    d._take_pending(t0 + 0.003, (replies(t0 + 0.001, 2048), list(d.ids), t0, t0 + 0.002, t0 + 0.001))
    first = handed[-1]
    assert first.fresh.all() and first.stamp_s == t0 + 0.001 and not d._pipeline_break
    # Asked 20 ms later, answered by replies sampled 10 ms before that request: not this read's.
    t1 = t0 + 0.020
    d._take_pending(t1 + 0.003, (replies(t1 - 0.010, 3000), list(d.ids), t1, t1 + 0.002, t1 + 0.001))
    late = handed[-1]
    assert not late.fresh.any() and np.array_equal(late.position_rad, first.position_rad)
    assert late.stamp_s == t1 + 0.001 and d.counters.stale_replies == len(d.ids)
    assert d._pipeline_break            # the next cycle is sequential: the line settles
    # The same replies in a read asked before they were sampled are its own: fresh.
    t2 = t1 - 0.012
    d._take_pending(t2 + 0.003, (replies(t1 - 0.010, 3000), list(d.ids), t2, t2 + 0.002, t2 + 0.001))
    assert handed[-1].fresh.all() and not np.array_equal(handed[-1].position_rad, first.position_rad)
