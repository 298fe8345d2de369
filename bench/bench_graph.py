"""Benchmark of the whole node graph (`snake bringup` in this process, the emulated bus in its own):

1. Latency from a Joy message to the matching goal on the emulated servos' wire. The stimulus is the
   gamepad's e-stop button pressed while the robot moves: the matching goal is the first goal write from
   which every servo's goal stays put (the hold). Joy send times come from the script player (this
   process's monotonic clock); goal-write times from the emulator's log (its monotonic clock minus its
   start time t0). t0 is bracketed by control-channel `state` queries made before the robot moves: a
   query answered with c writes of servo 1 was processed after write c and before write c + 1.
2. CPU use of the whole graph at 100 Hz for 32 joints (pitch_yaw_32 on a 4 Mbit/s bus): this process
   (driver, gait, estimator, teleop, script player) and the emulator process, over a window of steady
   motion, as a percentage of one core; and the achieved joint_commands / joint_states rates.

Figures are printed, never asserted.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

ROBOT = 'pitch_yaw_32'
RATE_HZ = 100.0
CPU_WINDOW = (3.0, 13.0)        # script time (s) of steady forward motion measured for CPU
SYNC_WINDOW = (0.1, 0.95)       # script time (s) of the clock-sync queries (robot still, logs short)
CYCLES = 12                     # e-stop trials
CYCLE_S = 3.0                   # each: 2 s moving, e-stop, release after 0.6 s
FIRST_CYCLE_S = 14.0


def _cpu_s(pid: int) -> float:
    """User + system CPU time of a process in s, from /proc."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _script(path: Path) -> float:
    events = [{'t': 0.0}, {'t': 0.5, 'tap': ['Y']}, {'t': 0.7},                 # (gait cycle: next gait)
              {'t': 1.0, 'hold': ['LB'], 'axes': {'dpad_y': 1.0}},               # faster: full speed scale
              {'t': 1.2, 'hold': ['LB'], 'axes': {'left_y': 1.0}}]               # forward
    t = FIRST_CYCLE_S
    for _ in range(CYCLES):
        events += [{'t': t, 'hold': ['LB', 'B'], 'axes': {'left_y': 1.0}},      # e-stop while moving
                   {'t': t + 0.6, 'hold': ['View', 'Menu']},                     # release combination
                   {'t': t + 0.9, 'hold': ['LB'], 'axes': {'left_y': 1.0}}]      # moving again
        t += CYCLE_S
    path.write_text(yaml.safe_dump({'gamepad': 'xbox', 'rate_hz': 20, 'duration_s': t + 0.5,
                                    'events': events}))
    return t + 0.5


class _Probe:
    def __init__(self):
        self.sync = []                  # (t_send, t_recv, servo-1 goal-write count)
        self.counts = {'joint_commands': 0, 'joint_states': 0}
        self.window_counts = {}
        self.cpu = {}
        self.stop = threading.Event()

    def on_ready(self, run):
        from rclpy.node import Node
        from sensor_msgs.msg import JointState

        self.run = run
        node = Node('bench_probe', context=run.context)
        for topic in self.counts:
            node.create_subscription(JointState, topic, lambda m, t=topic: self._count(t), 10)
        run.executor.add_node(node)
        threading.Thread(target=self._worker, daemon=True).start()

    def _count(self, topic):
        self.counts[topic] += 1

    def _worker(self):
        run = self.run
        player = run.nodes['script_player']
        while player.started_s is None:
            time.sleep(0.01)
        marks = {CPU_WINDOW[0]: 'start', CPU_WINDOW[1]: 'end'}
        rng = np.random.default_rng(1)
        while not self.stop.is_set():
            t = player.elapsed_s()
            for mark, name in list(marks.items()):
                if t >= mark:
                    self.cpu[name] = (time.monotonic(), _cpu_s(os.getpid()), _cpu_s(run.sim.process.pid),
                                      dict(self.counts))
                    del marks[mark]
            # Clock-sync queries at random phases of the bus cycle, only before the robot moves: `state`
            # scans every goal log, so later it would slow the emulator and disturb what is measured.
            if SYNC_WINDOW[0] <= t <= SYNC_WINDOW[1]:
                t_send = time.monotonic()
                answer = run.sim.command('state')
                t_recv = time.monotonic()
                self.sync.append((t_send, t_recv, answer['servos']['1']['goal_writes']))
                time.sleep(0.004 + 0.013 * rng.random())
            else:
                time.sleep(0.01)

    def before_stop(self, run):
        self.stop.set()
        time.sleep(0.1)
        self.goals = run.sim.command('goals', timeout_s=60)['goals']
        self.sent_log = list(run.nodes['script_player'].sent_log)
        self.script = run.nodes['script_player'].script
        self.player_start = run.nodes['script_player'].started_s
        self.gait_estop_s = list(run.nodes['gait_node'].estop_received_s)


def _t0_bracket(sync, servo1_times):
    """Emulator start time t0 in this process's monotonic clock: (low, high)."""
    low, high = -np.inf, np.inf
    for t_send, t_recv, count in sync:
        if count >= 1:
            high = min(high, t_recv - servo1_times[count - 1])
        if count < len(servo1_times):
            low = max(low, t_send - servo1_times[count])
    return low, high


def main():
    # Our own DDS domain on localhost, so other runs on this machine neither hear nor disturb this one.
    os.environ.setdefault('ROS_DOMAIN_ID', str(np.random.default_rng().integers(1, 102)))
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    from snake_control.bringup import run_bringup
    from snake_control.graph import GraphArgs

    probe = _Probe()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / 'bench.yaml'
        duration = _script(script)
        print(f'{ROBOT}, {RATE_HZ:g} Hz, emulated bus at 4 Mbit/s; {duration:.0f} s scripted session',
              flush=True)
        result = run_bringup(GraphArgs(robot=ROBOT, bus='sim', rate=RATE_HZ, joy=False), script=str(script),
                             log=lambda line: None, on_ready=probe.on_ready, before_stop=probe.before_stop)
    print(f'run ended: {result.stop_reason}; torque off at the end: {result.torque_off}')

    # --- CPU -----------------------------------------------------------------------------------------
    if {'start', 'end'} <= set(probe.cpu):
        (w0, g0, s0, c0), (w1, g1, s1, c1) = probe.cpu['start'], probe.cpu['end']
        wall = w1 - w0
        print(f'CPU over {wall:.1f} s of steady motion (% of one core): '
              f'graph process {100 * (g1 - g0) / wall:.1f} %, '
              f'emulated bus {100 * (s1 - s0) / wall:.1f} %, total {100 * (g1 - g0 + s1 - s0) / wall:.1f} %')
        for topic in ('joint_commands', 'joint_states'):
            print(f'  {topic}: {(c1[topic] - c0[topic]) / wall:.1f} Hz (target {RATE_HZ:g} Hz)')
    else:
        print('CPU window not reached')

    # --- latency -------------------------------------------------------------------------------------
    goals = np.array(probe.goals, dtype=float)        # t_rel, id, ticks, accepted
    servo1 = np.sort(goals[goals[:, 1] == 1, 0])
    low, high = _t0_bracket(probe.sync, servo1)
    if not np.isfinite(low) or not np.isfinite(high) or high < low:
        print(f'clock sync failed (t0 in [{low}, {high}])')
        return
    t0 = 0.5 * (low + high)
    ids = np.unique(goals[:, 1]).astype(int)
    times = np.unique(goals[:, 0])
    index = {t: i for i, t in enumerate(times)}
    table = np.full((len(times), len(ids)), np.nan)
    col = {sid: k for k, sid in enumerate(ids)}
    for t, sid, ticks, _ in goals:
        table[index[t], col[int(sid)]] = ticks
    # Forward-fill servos missing from a write (a sync write always carries all of them, but be safe).
    for k in range(1, len(table)):
        missing = np.isnan(table[k])
        table[k, missing] = table[k - 1, missing]
    estop_events = [i for i, e in enumerate(probe.script.events) if e.buttons[1] == 1]   # B held
    latencies, to_gait, no_hold = [], [], 0
    for ev in estop_events:
        sends = [t for t, i in probe.sent_log if i == ev]
        if not sends:
            continue
        t_joy = sends[0] - t0                      # emulator time of the Joy message
        releases = [t for t, i in probe.sent_log if i == ev + 1]
        t_release = (releases[0] - t0) if releases else times[-1]
        received = [t for t in probe.gait_estop_s if t >= sends[0]]
        if received:
            to_gait.append(received[0] - sends[0])
        k, end = int(np.searchsorted(times, t_joy)), int(np.searchsorted(times, t_release))
        # The hold: the first write from which every goal stays put until the release is sent.
        while k + 3 <= end:
            if np.all(table[k:end] == table[k]):
                latencies.append(times[k] - t_joy)
                break
            k += 1
        else:
            no_hold += 1
    if not latencies:
        print('no e-stop latency measured')
        return
    lat_ms = 1000 * np.array(latencies)
    period_ms = 1000 / RATE_HZ
    print(f'Joy (e-stop button) -> held goal on the servos\' wire, {len(lat_ms)} trials: median '
          f'{np.median(lat_ms):.1f} ms, p99 {np.percentile(lat_ms, 99):.1f} ms, max {lat_ms.max():.1f} ms '
          f'(aim: under two control periods = {2 * period_ms:.0f} ms)')
    print(f'  clock sync: emulator t0 known to +-{1000 * (high - low) / 2:.2f} ms '
          f'from {len(probe.sync)} queries')
    print(f'  every trial (ms): {" ".join(f"{x:.1f}" for x in lat_ms)}' +
          (f'; {no_hold} trials without a steady hold before the release' if no_hold else ''))
    if to_gait:
        g = 1000 * np.array(to_gait)
        print(f'  of which Joy -> e-stop in gait_node (teleop and DDS, one process): '
              f'median {np.median(g):.1f} ms, '
              f'max {g.max():.1f} ms')
