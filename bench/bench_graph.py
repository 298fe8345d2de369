"""Benchmark of the whole node graph (`snake bringup`: the driver in its own process, the other nodes in
this one, the emulated bus in a third), each figure beside the same run with rclpy's
MultiThreadedExecutor and the driver in this process (how the graph shipped before), in one `make bench`.

1. Keeping time: pitch_yaw_32 on the 4 Mbit/s emulated bus coupled to MuJoCo, through the demo's script:
   the share of control cycles on time (a joint_states message within 1.25 periods of the previous
   one, counted against the cycles the run should have had), joint_states rate, p99 period (from the
   messages' stamps: when the servos were read), cycles the driver held because readings went stale,
   and the CPU of the controller processes (driver, gait, estimator, teleop; not the emulator or the
   physics) per control cycle, in all and per process (bringup's own, the driver's), and the rate the
   gait ticked at. The same at 400 Hz with the estimator decimated to its default rate and the gait at 100 Hz (the
   driver moves the goals between its commands). Before each rate, the host's own ceiling: what a bare
   loop with the cycle's wake-ups and no work keeps on time (bench.host_ceiling), named in the WARNs.
2. Latency from a Joy message to the matching goal on the emulated servos' wire. The stimulus is the
   gamepad's e-stop button pressed while the robot moves: the matching goal is the first goal write from
   which every servo's goal stays put (the hold). Joy send times come from the script player (this
   process's monotonic clock); goal-write times from the emulator's log (its monotonic clock minus its
   start time t0). t0 is bracketed by control-channel `state` queries made before the robot moves: a
   query answered with c writes of servo 1 was processed after write c and before write c + 1.

Figures are printed against their aims, never asserted.
"""
from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

from bench.host_ceiling import beside, print_ceiling

ROBOT = 'pitch_yaw_32'
RATE_HZ = 100.0
BAUD = 4_000_000
SYNC_WINDOW = (0.1, 0.95)       # script time (s) of the clock-sync queries (robot still, logs short)
CYCLES = 12                     # e-stop trials
CYCLE_S = 3.0                   # each: 2 s moving, e-stop, release after 0.6 s
FIRST_CYCLE_S = 14.0
ON_TIME_PERIODS = 1.25          # a cycle is on time when it follows the previous within this many periods
# Aims (issue figures): share of cycles on time, joint_states rate and p99 period, CPU per cycle.
AIM_ON_TIME = {100.0: 0.99, 400.0: 0.98}
AIM_P99_PERIOD_MS = 12.0
AIM_CPU_MS_PER_CYCLE = 1.0
AIM_JOY_P99_MS = 20.0
HOST_CEILING_S = 10.0           # the bare loop's run at each rate (bench.host_ceiling)
SHIPPED = dict(executor_kind='events', driver_in_process=False)
BEFORE = dict(executor_kind='multi', driver_in_process=True)

def on_time_share(stamps_s, rate_hz: float, wall_s: float) -> float:
    """Share of a run's control cycles on time: readings (stamps, s) that follow the one before within
    ON_TIME_PERIODS periods, counted against the cycles wall_s holds at rate_hz."""
    periods = np.diff(np.sort(np.asarray(stamps_s, dtype=float)))
    return np.count_nonzero(periods <= ON_TIME_PERIODS / rate_hz) / max(wall_s * rate_hz, 1.0)


def _stat_cpu_s(stat_path: str) -> float:
    """User + system CPU time (s) from a /proc stat file (a process's or a thread's); OSError when gone."""
    fields = Path(stat_path).read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _cpu_s(pid: int) -> float:
    """User + system CPU time of a process in s, from /proc (0 when it is gone)."""
    try:
        return _stat_cpu_s(f'/proc/{pid}/stat')
    except OSError:
        return 0.0


def _thread_cpu_s(pid: int) -> dict:
    """tid -> (thread name, CPU time in s) of every thread of a process, from /proc: the scheduler's ns
    where the kernel keeps them (schedstat), else user + system clock ticks."""
    out = {}
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except OSError:
        return out
    for tid in tids:
        base = f'/proc/{pid}/task/{tid}'
        try:
            name = Path(f'{base}/comm').read_text().strip()
            try:
                cpu = int(Path(f'{base}/schedstat').read_text().split()[0]) * 1e-9
            except (OSError, IndexError, ValueError):
                cpu = _stat_cpu_s(f'{base}/stat')
        except OSError:
            continue                    # the thread ended meanwhile
        out[int(tid)] = (name, cpu)
    return out


class _CallbackClock:
    """CPU time (time.thread_time, s) spent inside each in-process node's subscription and timer callbacks,
    and the ids of the executor threads they ran on (one for the events executor, its pool's for the
    multi-threaded one). Wrapping costs about a microsecond per call."""

    def __init__(self):
        self.cpu_s: dict = {}           # node name -> s
        self.executor_tids: set = set()

    def wrap_nodes(self, nodes: dict):
        for name, node in nodes.items():
            for entity in (*node.subscriptions, *node.timers):
                entity.callback = self._wrap(name, entity.callback)

    def _wrap(self, name: str, callback):
        self.cpu_s.setdefault(name, 0.0)
        clock = time.thread_time

        def timed(*args):
            start = clock()
            try:
                return callback(*args)
            finally:
                self.cpu_s[name] += clock() - start
                self.executor_tids.add(threading.get_native_id())
        return timed

    def snapshot(self) -> dict:
        return dict(self.cpu_s)


class _TimingProbe:
    """Records joint_states stamps and the controller processes' CPU over the steady part of a run."""

    def __init__(self, warmup_s: float = 3.0):
        self.stamps = []
        self.warmup_s = warmup_s
        self.cpu = {}
        self.callbacks = _CallbackClock()
        self.stop = threading.Event()

    def on_ready(self, run):
        self.run = run
        # bringup's own joint_states subscription keeps the stamps: a probe of its own in the process it
        # measures would add its cost to the controller's figure.
        run.nodes['bringup'].joint_state_stamps = self.stamps
        self.callbacks.wrap_nodes(run.nodes)
        self.gait = run.nodes.get('gait_node')
        tick = getattr(self.gait, '_tick_thread', None)
        self.gait_tick_tid = tick.native_id if tick is not None else None
        self.gait_ticks = {}
        threading.Thread(target=self._worker, daemon=True).start()

    def _pids(self):
        pids = [os.getpid()]
        if self.run.driver_process is not None:
            pids.append(self.run.driver_process.process.pid)
        return pids

    def _sample(self):
        pids = self._pids()
        return (time.monotonic(), [_cpu_s(p) for p in pids], len(self.stamps),
                {p: _thread_cpu_s(p) for p in pids}, self.callbacks.snapshot())

    def _worker(self):
        if not self.stop.wait(self.warmup_s):
            self.cpu['start'] = self._sample()
            self.gait_ticks['start'] = getattr(self.gait, 'ticks', 0)

    def before_stop(self, run):
        self.cpu['end'] = self._sample()
        self.gait_ticks['end'] = getattr(self.gait, 'ticks', 0)
        self.stop.set()

    def breakdown_ms(self, cycles: float) -> dict:
        """Where each controller process's CPU went over the measured cycles, in ms per cycle: process
        pid -> {part: ms}. This process: each node's callbacks, the rest of the threads that ran them
        (taking messages into Python, dispatch), gait_node's tick thread, DDS threads, other threads. The
        driver's: its main thread (the executor: joint_commands, estop, diagnostics), its other Python
        threads (the bus loop), DDS threads."""
        (_, _, _, threads0, cb0), (_, _, _, threads1, cb1) = self.cpu['start'], self.cpu['end']
        per = 1000.0 / max(cycles, 1.0)
        out = {}
        for pid, after in threads1.items():
            before = threads0.get(pid, {})
            used = {tid: cpu - before.get(tid, (name, 0.0))[1] for tid, (name, cpu) in after.items()}
            parts: dict = {}

            def add(part, s):
                parts[part] = parts.get(part, 0.0) + s * per
            if pid == os.getpid():
                for node, s in cb1.items():
                    add(f'{node} callbacks', s - cb0.get(node, 0.0))
                callbacks = sum(cb1.values()) - sum(cb0.values())
                for tid, s in used.items():
                    name = after[tid][0]
                    if tid in self.callbacks.executor_tids:
                        add('executor (messages into Python, dispatch)', s)
                    elif tid == self.gait_tick_tid:
                        add('gait_node tick thread', s)
                    elif name.startswith('dds.'):
                        add('DDS threads', s)
                    else:
                        add('other threads', s)
                if 'executor (messages into Python, dispatch)' in parts:
                    parts['executor (messages into Python, dispatch)'] -= callbacks * per
            else:
                for tid, s in used.items():
                    name = after[tid][0]
                    add('main thread (executor)' if tid == pid else
                        'DDS threads' if name.startswith('dds.') else 'other threads (bus loop)', s)
            out[pid] = parts
        return out


def timing_run(rate_hz: float, script: Path, physics: str = 'mujoco', **kind) -> dict:
    """One scripted run of the graph: figures of how it kept time."""
    from snake_control.app.bringup import run_bringup
    from snake_control.app.graph import GraphArgs

    probe = _TimingProbe()
    try:
        result = run_bringup(GraphArgs(robot=ROBOT, bus='sim', rate=rate_hz, baud=BAUD, physics=physics, joy=False),
                             script=str(script), log=lambda line: None, on_ready=probe.on_ready,
                             before_stop=probe.before_stop, **kind)
    except RuntimeError as exc:     # the run never got going (its script could not start): no figures, say why
        return {'stop': str(exc)}
    out = {'torque_off': result.torque_off, 'stop': result.stop_reason, 'host_cpu': result.host_cpu}
    if {'start', 'end'} > set(probe.cpu):
        return out
    (w0, per0, n0, _, _), (w1, per1, n1, _, _) = probe.cpu['start'], probe.cpu['end']
    # Per process: this one (gait, estimator, teleop, link TF; the driver too when it runs in-process),
    # then the driver's own process where it has one.
    per_ms = [1000 * (b - a) / max((w1 - w0) * rate_hz, 1.0) for a, b in zip(per0, per1)]
    c0, c1 = sum(per0), sum(per1)
    stamps = np.array([s for _, s in probe.stamps[n0:n1]])
    periods = np.diff(np.sort(stamps))
    expected = (w1 - w0) * rate_hz
    d = result.driver_diagnostics
    ticks = probe.gait_ticks
    out.update(on_time=on_time_share(stamps, rate_hz, w1 - w0), states_hz=(n1 - n0) / (w1 - w0),
               gait_hz=(ticks.get('end', 0) - ticks.get('start', 0)) / (w1 - w0),
               p99_ms=1000 * float(np.percentile(periods, 99)) if len(periods) else float('nan'),
               cpu_ms=1000 * (c1 - c0) / max(expected, 1.0), cpu_pct=100 * (c1 - c0) / (w1 - w0),
               cpu_ms_per_process=per_ms, cpu_ms_breakdown=list(probe.breakdown_ms(expected).values()),
               stale_holds=int(d.get('counters', {}).get('stale_hold_cycles', -1)),
               overruns=int(d.get('counters', {}).get('overruns', -1)))
    return out


def _timing_line(label: str, f: dict, rate_hz: float, host_on_time: float | None = None) -> str:
    """One run's figures against their aims; host_on_time: the host's ceiling at this rate (host_ceiling),
    named beside an on-time share below its aim."""
    if 'on_time' not in f:
        return f'  {label}: no figures ({f["stop"]})  WARN the run did not start'
    aim = AIM_ON_TIME.get(rate_hz, 0.98)
    warn = []
    if f['on_time'] < aim:
        warn.append(f'on time below {aim:.0%}' + beside(host_on_time))
    if rate_hz == 100.0 and f['p99_ms'] > AIM_P99_PERIOD_MS:
        warn.append(f'p99 period above {AIM_P99_PERIOD_MS:g} ms')
    if f['stale_holds']:
        warn.append('stale holds')
    if rate_hz == 100.0 and f['cpu_ms'] > AIM_CPU_MS_PER_CYCLE:
        warn.append(f'CPU above {AIM_CPU_MS_PER_CYCLE:g} ms per cycle')
    return (f'  {label}: {f["on_time"]:.1%} of cycles on time, joint_states {f["states_hz"]:.1f} Hz, '
            f'gait {f["gait_hz"]:.1f} Hz, '
            f'p99 period {f["p99_ms"]:.1f} ms, {f["overruns"]} overruns, {f["stale_holds"]} stale holds; '
            f'controller CPU {f["cpu_ms"]:.2f} ms per cycle'
            + (f', aim {AIM_CPU_MS_PER_CYCLE:g} ms' if rate_hz == 100.0 else '')
            + f' ({f["cpu_pct"]:.0f} % of a core; '
            + ('bringup process {:.2f} ms, driver process {:.2f} ms'.format(*f['cpu_ms_per_process'])
               if len(f['cpu_ms_per_process']) == 2 else 'one process') + ')'
            + (f'; other programs {f["host_cpu"].other_cores:.2f} of {f["host_cpu"].cores} cores'
               if f.get('host_cpu') is not None else '')
            + (f'  WARN {", ".join(warn)}' if warn else '')
            + ('  WARN the computer was saturated, partly by other programs'
               if f.get('host_cpu') is not None and f['host_cpu'].warning() else ''))


def _breakdown_lines(f: dict) -> list[str]:
    """The controller CPU per cycle by process and part, largest first (parts under 0.005 ms left out)."""
    lines = []
    for name, parts in zip(('bringup process', 'driver process'), f.get('cpu_ms_breakdown', ())):
        shown = sorted(((ms, part) for part, ms in parts.items() if ms >= 0.005), reverse=True)
        lines.append(f'    {name}, ms per cycle: ' + ', '.join(f'{part} {ms:.3f}' for ms, part in shown))
    return lines


def bench_timing() -> dict:
    """The timing runs at 100 and 400 Hz; returns the host ceiling's on-time share by rate."""
    from snake_control.app.demo import demo_script_path
    from snake_control.estimation.pipeline import EstimatorParams
    from snake_control.robot import gait_rate_hz
    script = demo_script_path(ROBOT)
    ceilings = {}
    est_hz = EstimatorParams.update_rate_hz
    print(f'Keeping time: {ROBOT} on the {BAUD / 1e6:g} Mbit/s emulated bus with MuJoCo, script {script.name}',
          flush=True)
    for rate in (RATE_HZ, 400.0):
        print(f'{rate:g} Hz control' + (f' (estimator decimated to {est_hz:g} Hz, gait at {gait_rate_hz(rate):g} Hz)'
                                        if rate > RATE_HZ else ''), flush=True)
        host = ceilings[rate] = print_ceiling(rate, AIM_ON_TIME.get(rate, 0.98), HOST_CEILING_S, indent='  ')
        figures = {}
        for label, kind in (('shipped (events executor, driver in its own process)', SHIPPED),
                            ('before (multi-threaded executor, one process)', BEFORE)):
            figures[label] = timing_run(rate, script, **kind)
            print(_timing_line(label, figures[label], rate, host), flush=True)
            for line in _breakdown_lines(figures[label]):
                print(line, flush=True)
        a, b = figures.values()
        if 'cpu_ms' in a and 'cpu_ms' in b and a['cpu_ms'] > 0:
            on_time = (f'x{a["on_time"] / b["on_time"]:.2f}' if b['on_time'] >= 0.01 else     # no ratio from ~0
                       f'{a["on_time"]:.1%} against {b["on_time"]:.1%}')
            print(f'  shipped / before: on time {on_time}, CPU per cycle x{a["cpu_ms"] / b["cpu_ms"]:.2f}', flush=True)
    return ceilings


def _t0_bracket(sync, servo1_times):
    """Emulator start time t0 in this process's monotonic clock: (low, high)."""
    low, high = -np.inf, np.inf
    for t_send, t_recv, count in sync:
        if count >= 1:
            high = min(high, t_recv - servo1_times[count - 1])
        if count < len(servo1_times):
            low = max(low, t_send - servo1_times[count])
    return low, high


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


class _LatencyProbe:
    def __init__(self):
        self.sync = []                  # (t_send, t_recv, servo-1 goal-write count)
        self.stop = threading.Event()

    def on_ready(self, run):
        self.run = run
        threading.Thread(target=self._worker, daemon=True).start()

    def _worker(self):
        run = self.run
        player = run.nodes['script_player']
        while player.started_s is None:
            time.sleep(0.01)
        rng = np.random.default_rng(1)
        while not self.stop.is_set():
            t = player.elapsed_s()
            # Clock-sync queries at random phases of the bus cycle, only before the robot moves: `state`
            # scans every goal log, so later it would slow the emulator and disturb what is measured.
            if SYNC_WINDOW[0] <= t <= SYNC_WINDOW[1]:
                t_send = time.monotonic()
                answer = run.sim.command('state')
                t_recv = time.monotonic()
                self.sync.append((t_send, t_recv, answer['servos']['1']['goal_writes']))
                time.sleep(0.004 + 0.013 * rng.random())
            elif t > SYNC_WINDOW[1]:
                return
            else:
                time.sleep(0.01)

    def before_stop(self, run):
        self.stop.set()
        self.goals = run.sim.command('goals', timeout_s=60)['goals']
        self.sent_log = list(run.nodes['script_player'].sent_log)
        self.script = run.nodes['script_player'].script
        self.gait_estop_s = list(run.nodes['gait_node'].estop_received_s)


def bench_latency(label: str, **kind):
    from snake_control.app.bringup import run_bringup
    from snake_control.app.graph import GraphArgs

    probe = _LatencyProbe()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / 'bench.yaml'
        _script(script)
        result = run_bringup(GraphArgs(robot=ROBOT, bus='sim', rate=RATE_HZ, joy=False), script=str(script),
                             log=lambda line: None, on_ready=probe.on_ready, before_stop=probe.before_stop,
                             **kind)
    print(f'Joy -> goal, {label}: run ended ({result.stop_reason}); torque off at the end: {result.torque_off}')
    report_latency(probe)


def report_latency(probe):
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
        print('  no e-stop latency measured')
        return
    lat_ms = 1000 * np.array(latencies)
    period_ms = 1000 / RATE_HZ
    p99 = np.percentile(lat_ms, 99)
    print(f'  Joy (e-stop button) -> held goal on the servos\' wire, {len(lat_ms)} trials: median '
          f'{np.median(lat_ms):.1f} ms, p99 {p99:.1f} ms, max {lat_ms.max():.1f} ms (aim: p99 under '
          f'{AIM_JOY_P99_MS:g} ms, two control periods = {2 * period_ms:.0f} ms)'
          + (f'  WARN p99 above {AIM_JOY_P99_MS:g} ms' if p99 > AIM_JOY_P99_MS else ''))
    print(f'  clock sync: emulator t0 known to +-{1000 * (high - low) / 2:.2f} ms '
          f'from {len(probe.sync)} queries')
    print(f'  every trial (ms): {" ".join(f"{x:.1f}" for x in lat_ms)}' +
          (f'; {no_hold} trials without a steady hold before the release' if no_hold else ''))
    if to_gait:
        g = 1000 * np.array(to_gait)
        print(f'  of which Joy -> e-stop in gait_node (teleop and DDS, one process): '
              f'median {np.median(g):.1f} ms, '
              f'max {g.max():.1f} ms')


def bench_launch(seconds: float = 30.0, host_on_time: float | None = None):
    """The graph as `ros2 launch` runs it (one process per node) from a colcon workspace: pitch_yaw_32 on
    the 4 Mbit/s emulated bus with MuJoCo, robot still, joint_states timing seen by a subscriber here."""
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    from bench.ros2_workspace import build_workspace, ros2_tools_missing, shell

    missing = ros2_tools_missing()
    if missing:
        print(f'ros2 launch: skipped ({missing})')
        return
    import signal
    import subprocess
    with tempfile.TemporaryDirectory() as tmp:
        ws = build_workspace(Path(tmp))
        log = open(Path(tmp) / 'launch.log', 'w')
        proc = subprocess.Popen(shell(ws, f'ros2 launch snake_control gait.launch.py robot:={ROBOT} bus:=sim '
                                          f'baud:={BAUD} physics:=mujoco joy:=false rviz:=false'),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        from snake_control.nodes.runner import make_executor
        stamps = []
        rclpy.init()
        node = Node('bench_launch_probe')
        executor = make_executor()
        executor.add_node(node)
        node.create_subscription(JointState, '/snake/joint_states',
                                 lambda m: stamps.append(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec), 100)
        try:
            deadline = time.monotonic() + 120
            while len(stamps) < 50 and time.monotonic() < deadline and proc.poll() is None:
                executor.spin_once(timeout_sec=0.1)
            time.sleep(3.0)
            stamps.clear()
            # The subscription's queue still holds messages from the sleep: count by stamp, not arrival.
            start_ros = node.get_clock().now().nanoseconds * 1e-9
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                executor.spin_once(timeout_sec=0.1)
            wall = time.monotonic() - start
            stamps[:] = [t for t in stamps if start_ros <= t <= start_ros + wall]
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            executor.shutdown(timeout_sec=1.0)
            node.destroy_node()
            rclpy.try_shutdown()
            log.close()
        text = (Path(tmp) / 'launch.log').read_text(errors='replace')
    periods = np.diff(np.sort(stamps)) if len(stamps) > 1 else np.array([np.inf])
    on_time = on_time_share(stamps, RATE_HZ, wall)
    rate = len(stamps) / wall
    torque = re.search(r'emulated bus: torque [^\n]*', text)
    print(f'ros2 launch (one process per node), {ROBOT} at {RATE_HZ:g} Hz: joint_states {rate:.1f} Hz, '
          f'{on_time:.1%} of cycles on time, p99 period {1000 * np.percentile(periods, 99):.1f} ms; '
          f'{torque.group(0) if torque else "torque state not reported"}'
          + (f'  WARN below {AIM_ON_TIME[RATE_HZ]:.0%} on time' + beside(host_on_time)
             if on_time < AIM_ON_TIME[RATE_HZ] else ''),
          flush=True)


def main():
    # Our own DDS domain on localhost, so other runs on this machine neither hear nor disturb this one.
    os.environ.setdefault('ROS_DOMAIN_ID', str(np.random.default_rng().integers(1, 102)))
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    ceilings = bench_timing()
    bench_launch(host_on_time=ceilings.get(RATE_HZ))
    bench_latency('shipped', **SHIPPED)
    bench_latency('before (multi-threaded executor, one process)', **BEFORE)
