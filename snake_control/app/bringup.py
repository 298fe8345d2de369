"""`snake bringup`: the whole node graph, for machines without `ros2 launch`.

The node list is snake_control.app.graph.build_graph, the same list gait.launch.py starts. The driver runs
in a child process of its own (as under `ros2 launch`), so nothing in this process (a recorder, the
estimator, a plot) can delay a servo cycle by holding the interpreter lock; the other snake_control nodes
are instantiated here and spun by one events executor (snake_control.nodes.runner). Nodes of other
packages (robot_state_publisher, joy_node, rviz2) are left out; the URDF is published on
robot_description (transient-local) so RViz or Foxglove on another machine can show the model. With
bus='sim' the emulated servo bus runs as a child process too and the driver opens its pseudo-terminal.
A scripted teleop session or the keyboard (snake_control.teleop.keyboard) replaces the gamepad; a
recorder writes every topic to MCAP.

Per-node parameters go in through a generated parameters file and the namespace through a `__ns`
remapping, both global arguments of the rclpy context: this works for every node class, whatever its
constructor takes.
"""
from __future__ import annotations

import collections
import importlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from snake_control.app.graph import GraphArgs, NodeSpec, build_graph, ros_arguments

STARTUP_ORDER = ('driver_node', 'estimator_node', 'gait_node', 'teleop_node')
EXECUTORS = ('events', 'multi')     # multi: rclpy's MultiThreadedExecutor, kept for comparison in benches
MULTI_THREADS = 4
DRIVER_START_TIMEOUT_S = 60.0       # servo check, configuration and torque-on of every servo
SCRIPT_START_TIMEOUT_S = 30.0       # then the gait's start from the measured pose, and discovery
DRIVER_STOP_TIMEOUT_S = 15.0        # torque-off is retried until its own deadline before the driver exits


# What a run's summary holds the controller to; a figure that misses its aim is printed as a WARN line.
RATE_AIM = 0.95             # loop and joint_states rates, of the control rate
FAULT_AIM = 0.001           # stale or failed servo reads, overruns: of the cycles


def loop_warnings(target_hz: float, driver_rate_hz: float | None, joint_states_rate_hz: float | None,
                  counters: dict, servos: int = 1) -> list[str]:
    """WARN lines for the loop figures of a run that miss their aim (empty: the controller kept time).

    driver_rate_hz: the driver's own cycle rate; joint_states_rate_hz: as received by a subscriber;
    counters: the driver's counters (cycles, overruns, read_failures, stale_hold_cycles, ...); servos:
    how many the driver reads each cycle (failed and rejected readings are a share of cycles x servos).

    >>> loop_warnings(100.0, 99.5, 99.8, {'cycles': 1000, 'overruns': 0, 'read_failures': 0})
    []
    >>> loop_warnings(100.0, 50.0, 99.8, {'cycles': 1000, 'overruns': 3})[0]
    'WARN driver loop at 50.0 Hz: below 95% of its 100 Hz target'
    >>> loop_warnings(100.0, 99.5, 99.8, {'cycles': 290, 'read_failures': 882}, servos=32)
    ['WARN 882 servo reads failed in 290 cycles of 32 servos (9.50%; aim under 0.1%)']
    >>> print(loop_warnings(100.0, 99.5, 99.8, {'cycles': 290, 'read_failures': 64, 'late_replies': 64},
    ...                     servos=32)[0].split('); ')[1])
    64 of them late replies (whole, after the deadline: the host, adapter or emulated bus was late, not the line)
    >>> loop_warnings(100.0, 99.5, 99.8, {'cycles': 1000, 'watchdog_trips': 2})[0][:31]
    'WARN 2 servo Bus Watchdog trips'
    """
    out = []
    for what, rate in (('driver loop', driver_rate_hz), ('joint_states', joint_states_rate_hz)):
        if rate is None:
            out.append(f'WARN {what} rate unknown (no figures received)')
        elif rate < RATE_AIM * target_hz:
            out.append(f'WARN {what} at {rate:.1f} Hz: below {RATE_AIM:.0%} of its {target_hz:g} Hz target')
    cycles = int(counters.get('cycles', 0) or 0)
    if cycles > 0:
        servos = max(int(servos), 1)
        for key, what, per in (('overruns', 'cycles overran by a whole period', 1),
                               ('read_failures', 'servo reads failed', servos),
                               ('rejected_readings', 'servo readings were rejected as impossible', servos),
                               ('stale_replies', "servo replies were an earlier request's, late", servos)):
            n, of = int(counters.get(key, 0) or 0), cycles * per
            if n > FAULT_AIM * of:
                where = f'{cycles} cycles' + (f' of {per} servos' if per > 1 else '')
                line = f'WARN {n} {what} in {where} ({n / of:.2%}; aim under {FAULT_AIM:.1%})'
                late = int(counters.get('late_replies', 0) or 0) if key == 'read_failures' else 0
                if late:
                    # A reply that came whole after its deadline was not lost on the line: the host, the
                    # adapter or an emulated bus's process answered late, and the cure differs.
                    line += (f'; {min(late, n)} of them late replies (whole, after the deadline: the host, '
                             f'adapter or emulated bus was late, not the line)')
                out.append(line)
    held = int(counters.get('stale_hold_cycles', 0) or 0)
    if held:
        out.append(f'WARN the driver held the robot for {held} cycles because servo readings went stale')
    trips = int(counters.get('watchdog_trips', 0) or 0)
    if trips:
        # The safety net worked, but the robot stopped: the host or the line stalled past the watchdog.
        out.append(f'WARN {trips} servo Bus Watchdog trips: no packet reached those servos within the '
                   f'watchdog time, so they stopped until the driver re-armed them')
    return out


def rate_missed(warnings: list[str]) -> bool:
    """Whether the loop_warnings say the controller missed its control rate."""
    return any(' Hz: below ' in w for w in warnings)


@dataclass
class BringupResult:
    """What a bringup run did: figures for the summary line and for tests."""

    duration_s: float = 0.0
    stop_reason: str = ''
    message_counts: dict = field(default_factory=dict)
    joy_sent: int = 0
    odom_distance_m: float = 0.0                   # length of the estimated path (sampled, see BringupNode)
    gaits: list = field(default_factory=list)      # the target gaits in the order they were chosen
    keyboard: object = None                        # KeyboardCounts when the keyboard was the gamepad
    final_odom_xy_yaw: tuple | None = None
    torque_off: bool | None = None
    record_path: str | None = None
    port: str | None = None
    driver_exit_code: int | None = None
    driver_last_line: str = ''                     # the driver's final line (its torque-off outcome)
    driver_diagnostics: dict = field(default_factory=dict)   # the driver's last /diagnostics
    joint_states_rate_hz: float | None = None                # as received in this process
    warnings: list = field(default_factory=list)             # loop_warnings of the run
    host_cpu: object = None         # app.host_cpu.CpuShare: the run's and other programs' CPU; None: unknown


@dataclass
class BringupRun:
    """A running bringup, as the on_ready/before_stop hooks see it."""

    nodes: dict
    sim: object
    context: object
    executor: object
    driver_process: object = None       # DriverProcess, or None when the driver runs in this process


def parameters_file(specs: list[NodeSpec], folder: Path) -> Path:
    """A ROS 2 parameters YAML with one section per node (fully qualified names)."""
    doc = {spec.fqn: {'ros__parameters': dict(spec.parameters)} for spec in specs if spec.parameters}
    path = folder / 'bringup_parameters.yaml'
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def context_arguments(specs: list[NodeSpec], namespace: str, params_path: Path) -> list[str]:
    args = ['--ros-args', '--params-file', str(params_path)]
    if namespace.strip('/'):
        args += ['-r', f'__ns:=/{namespace.strip("/")}']
    for spec in specs:
        for src, dst in spec.remappings:
            args += ['-r', f'{spec.name}:{src}:={dst}']
    return args


def node_class(spec: NodeSpec):
    module = importlib.import_module(spec.module)
    return getattr(module, spec.class_name)


def _destroy(node):
    close = getattr(node, 'close', None)
    if close is not None:
        close()
    node.destroy_node()


class DriverProcess:
    """driver_node in a child process, started the way `ros2 run` starts it: its output is passed to
    `log` line by line, and stop() ends it the way Ctrl-C does, waiting for its torque-off."""

    def __init__(self, spec: NodeSpec, log=print):
        from snake_control.dynamixel.simproc import detach_but_follow_parent

        self.spec = spec
        self.output: collections.deque = collections.deque(maxlen=200)
        cmd = [sys.executable, '-m', spec.module] + ros_arguments(spec)
        env = {**os.environ, 'PYTHONUNBUFFERED': '1', 'RCUTILS_LOGGING_BUFFERED_STREAM': '0'}
        # Its own process group (a terminal's Ctrl-C reaches bringup, which stops the driver before the
        # bus), and SIGTERM if bringup dies, so the driver still turns torque off.
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=env, preexec_fn=detach_but_follow_parent)
        self._log = log
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self):
        for line in self.process.stdout:
            line = line.rstrip()
            self.output.append(line)
            self._log(f'  driver: {line}')
        self.process.stdout.close()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = DRIVER_STOP_TIMEOUT_S) -> int:
        """SIGINT, then wait for the driver's own torque-off; SIGKILL only past timeout_s. Returns the
        exit code (negative: killed by that signal)."""
        if self.alive:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=2.0)
        return self.process.returncode

    def failure(self) -> str:
        return ' | '.join(list(self.output)[-8:]) or 'no output'


def run_bringup(args: GraphArgs, script: str | None = None, record: str | None = None,
                duration_s: float | None = None, log=print, status_period_s: float = 2.0,
                stop_event: threading.Event | None = None, on_ready=None, before_stop=None,
                executor_kind: str = 'events', driver_in_process: bool = False,
                keyboard=None, truth_links: str | Path | None = None) -> BringupResult:
    """Run the graph until duration_s (or the script's end), SIGINT/SIGTERM/SIGHUP or stop_event.

    keyboard: a snake_control.teleop.keyboard.KeyboardPad to publish as the gamepad (its keys are fed by
    the caller, snake_control.app.keyboard.KeyboardTerminal); not together with script.

    truth_links: with MuJoCo physics, the file the plant writes every link's true pose to
    (snake_control.app.truth.read_truth_links reads it), kept after the run; without it the plant writes
    them to a temporary file only when recording (they become the recording's truth tree either way).

    on_ready(run) is called once every node exists and the driver publishes joint_states, and
    before_stop(run) when the run ends, before anything is shut down (tests and benchmarks hook in
    here); run is a BringupRun (nodes, sim, context, executor). Shutdown order: script and teleop first,
    then gait, then the driver (which turns torque off), then the emulated bus, then the recorder's file
    is finished. executor_kind and driver_in_process exist for benchmarks that compare the graph as
    shipped with rclpy's multi-threaded executor and everything in one process.
    """
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from snake_control.nodes.qos import choose_dds_transport

    choose_dds_transport()      # before the emulated bus and the driver's process start: they inherit it

    from snake_control.nodes.bringup_node import BringupNode
    from snake_control.nodes.runner import SWITCH_INTERVAL_S, make_executor, spin_until, stop_executor

    if executor_kind not in EXECUTORS:
        raise ValueError(f'executor_kind: expected one of {EXECUTORS}, got {executor_kind!r}')
    args = args.validated()
    if script and keyboard is not None:
        raise ValueError('a scripted session and the keyboard cannot both be the gamepad')
    loaded_script = None
    if script:
        from snake_control.teleop.script import load_script
        loaded_script = load_script(script)
        if args.teleop == GraphArgs.teleop:
            # The script names controls of its gamepad: teleop must read the same map.
            from dataclasses import replace
            args = replace(args, teleop=loaded_script.gamepad.source)
    if duration_s is None and loaded_script is not None:
        duration_s = loaded_script.duration_s
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise ValueError(f'--duration: expected a time > 0 in s, got {duration_s!r}')

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    from snake_control.app.host_cpu import CpuWatch
    cpu_watch = CpuWatch()          # before any of the run's processes starts: they count as the run's
    result = BringupResult(record_path=record)
    stop = stop_event or threading.Event()
    sim = None
    nodes: dict = {}
    driver_proc = None
    executor = None
    context = None
    spin = None
    previous = {}
    links_path = Path(truth_links) if truth_links is not None else None
    truth_links = None
    with tempfile.TemporaryDirectory(prefix='snake_bringup_') as tmp:
        try:
            if args.bus == 'sim':
                from snake_control.app.sim_bus import sim_bus_args
                from snake_control.dynamixel.simproc import SimBusProcess
                from snake_control.robot import load_robot
                baud = args.baud or load_robot(args.robot).bus.baud
                truth_links = None
                if args.physics == 'mujoco' and (record or links_path is not None):
                    # The plant writes its links' poses; they become the recording's truth/ tree at the end.
                    from snake_control.physics.servo_plant import TRUTH_LINKS_ENV
                    truth_links = links_path or Path(tmp) / 'truth_links.csv'
                    os.environ[TRUTH_LINKS_ENV] = str(truth_links)
                from snake_control.nodes.sim_imu import NAMESPACE_ENV
                # The world's IMU publishes into the graph's namespace (snake_control.nodes.sim_imu).
                os.environ[NAMESPACE_ENV] = args.namespace
                try:
                    sim = SimBusProcess(sim_bus_args(args.robot, baud, args.physics))
                finally:
                    os.environ.pop(NAMESPACE_ENV, None)
                    if truth_links is not None:
                        os.environ.pop(TRUTH_LINKS_ENV, None)
                log(f'emulated bus on {", ".join(sim.paths)} at {baud} bit/s' +
                    (f' with {args.physics} physics' if args.physics != 'none' else ''))
            result.port = ','.join(sim.paths) if sim else None      # one device per bus
            specs = [s for s in build_graph(args, port=result.port) if s.in_process]
            by_name = {s.name: s for s in specs}
            in_process = [s for s in specs if driver_in_process or s.name != 'driver_node']
            params = parameters_file(in_process, Path(tmp))
            context = rclpy.context.Context()
            rclpy.init(args=context_arguments(in_process, args.namespace, params), context=context,
                       signal_handler_options=SignalHandlerOptions.NO)
            if executor_kind == 'multi':
                from rclpy.executors import MultiThreadedExecutor
                executor = MultiThreadedExecutor(num_threads=MULTI_THREADS, context=context)
            else:
                executor = make_executor(context)

            signalled = []

            def request_stop(signum, frame):
                # Once only: a signal arriving inside stop.set() would wait on the lock the frame it
                # interrupted holds (runner.install_stop_signals).
                if not signalled:
                    signalled.append(True)
                    result.stop_reason = signal.Signals(signum).name
                    stop.set()
            if threading.current_thread() is threading.main_thread():
                # SIGHUP: the terminal or ssh session closed; stop as for Ctrl-C.
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    previous[sig] = signal.signal(sig, request_stop)

            # No robot_state_publisher here: the links' transforms come from link_tf_node, or where tf2_msgs
            # is missing (nobody can publish /tf) the recorder writes them into the file itself.
            from snake_control.nodes.link_tf_node import tf2_msgs_available
            has_tf = tf2_msgs_available()
            if not has_tf:
                log('tf2_msgs not installed: no /tf published' + ('; the recording gets /tf from the recorder'
                                                                  if record else ''))
            if record:
                from snake_control.nodes.recorder import Recorder
                nodes['recorder'] = Recorder(record, context=context,
                                             tf_robot=None if has_tf else by_name['estimator_node'].parameters['robot'])
                executor.add_node(nodes['recorder'])
            if has_tf:
                from rclpy.parameter import Parameter

                from snake_control.nodes.link_tf_node import LinkTfNode
                nodes['link_tf_node'] = LinkTfNode(context=context, parameter_overrides=[
                    Parameter('robot', value=by_name['estimator_node'].parameters['robot'])])
                executor.add_node(nodes['link_tf_node'])
            bringup = BringupNode(args.robot, context=context)
            nodes['bringup'] = bringup
            executor.add_node(bringup)
            for name in STARTUP_ORDER:
                spec = by_name[name]
                log(f'starting {spec.fqn}' + (' (own process)' if spec not in in_process else ''))
                if spec not in in_process:
                    driver_proc = DriverProcess(spec, log)
                    continue
                # The graph's node name, whatever name the class gives itself.
                node = node_class(spec)(context=context, cli_args=['--ros-args', '-r',
                                                                   f'__node:={spec.name}'])
                nodes[name] = node
                executor.add_node(node)
            if loaded_script is not None:
                from snake_control.nodes.script_player import ScriptPlayer
                nodes['script_player'] = ScriptPlayer(script=loaded_script, context=context)
                executor.add_node(nodes['script_player'])
            if keyboard is not None:
                from snake_control.nodes.keyboard_player import KeyboardPlayer
                nodes['keyboard_player'] = KeyboardPlayer(keyboard, context=context)
                executor.add_node(nodes['keyboard_player'])
            spin = threading.Thread(target=spin_until, args=(executor, context, stop), daemon=True)
            spin.start()
            _wait_for_driver(bringup, driver_proc, stop)

            run = BringupRun(nodes, sim, context, executor, driver_proc)
            if on_ready is not None:
                on_ready(run)
            if 'script_player' in nodes:
                _wait_for_script_audience(bringup, nodes, stop)
                nodes['script_player'].start()
            start = time.monotonic()
            states_at_start = bringup.joint_states
            next_status = start + status_period_s
            log(f'running {len(nodes) + (driver_proc is not None)} nodes' +
                (f' for {duration_s:g} s' if duration_s else ' until Ctrl-C'))
            while not stop.is_set():
                now = time.monotonic()
                if duration_s is not None and now - start >= duration_s:
                    result.stop_reason = result.stop_reason or 'duration'
                    break
                if not spin.is_alive():
                    result.stop_reason = 'executor stopped'
                    break
                if driver_proc is not None and not driver_proc.alive:
                    result.stop_reason = f'driver exited ({driver_proc.process.returncode})'
                    break
                if now >= next_status:
                    log(bringup.status_line(now - start))
                    next_status += status_period_s
                stop.wait(0.05)
            result.stop_reason = result.stop_reason or 'stop requested'
            result.duration_s = time.monotonic() - start
            if before_stop is not None:
                before_stop(run)
            result.final_odom_xy_yaw = bringup.odom_xy_yaw
            result.odom_distance_m = bringup.odom_distance_m
            result.gaits = list(bringup.gaits_chosen)
            result.driver_diagnostics = d = bringup.driver_diagnostics()
            if result.duration_s > 0:
                result.joint_states_rate_hz = (bringup.joint_states - states_at_start) / result.duration_s
            if d:
                # The whole run's rate, not the driver's last 2 s.
                d['cycle_rate_hz'] = bringup.driver_cycle_rate_hz(start) or d.get('cycle_rate_hz')
            target_hz = float(d.get('rate_hz_target') or by_name['driver_node'].parameters['rate'])
            result.warnings = loop_warnings(target_hz, d.get('cycle_rate_hz'), result.joint_states_rate_hz,
                                            d.get('counters', {}), len(d.get('servos') or ()) or 1)
            if 'script_player' in nodes:
                result.joy_sent = nodes['script_player'].sent
        finally:
            stop.set()
            if spin is not None:
                spin.join(timeout=5)
                if spin.is_alive():
                    log('the executor was still inside a callback 5 s after the stop: stopping the nodes anyway')
            if executor is not None:
                # No callback runs from here on, so none can touch a node being destroyed.
                for exc in stop_executor(executor, timeout_sec=5):
                    log(f'error in a callback while stopping: {exc!r}')
            # Stop the producers of motion first, the driver (torque off) last, then the bus.
            for name in ('script_player', 'keyboard_player', 'teleop_node', 'gait_node', 'estimator_node', 'link_tf_node',
                         'bringup', 'driver_node'):
                if name in nodes:
                    try:
                        _destroy(nodes.pop(name))
                    except Exception as exc:  # keep shutting the rest down
                        log(f'error while stopping {name}: {exc}')
            if driver_proc is not None:
                result.driver_exit_code = driver_proc.stop()
                result.driver_last_line = next((ln for ln in reversed(driver_proc.output)
                                                if ln.startswith('driver_node: ')), '')
            if sim is not None:
                result.torque_off = torque_is_off(sim)
            if sim is not None:
                sim.stop()
            if 'recorder' in nodes:
                recorder = nodes.pop('recorder')
                result.message_counts = dict(recorder.counts)
                _destroy(recorder)
                if truth_links is not None and truth_links.is_file():
                    from snake_control.app.truth import TRUTH_TOPIC, add_truth_tree
                    try:
                        result.message_counts[TRUTH_TOPIC] = add_truth_tree(record, truth_links, args.robot)
                    except (OSError, ValueError) as exc:
                        log(f'ground truth not added to {record}: {exc}')
            if context is not None:
                context.try_shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    # Every process of the run has been waited for: their CPU is the run's.
    result.host_cpu = cpu_watch.stop()
    cpu_warning = result.host_cpu.warning() if result.host_cpu is not None else None
    if cpu_warning:
        result.warnings.append(cpu_warning)
    d = result.driver_diagnostics
    if d:
        c = d.get('counters', {})
        log(f'loop: driver {d.get("cycle_rate_hz", 0):.1f} Hz (target {d.get("rate_hz_target", 0):g} Hz), '
            f'joint_states {result.joint_states_rate_hz or 0:.1f} Hz; {c.get("cycles", 0)} cycles, '
            f'{c.get("overruns", 0)} overruns, {c.get("read_failures", 0)} failed reads, '
            f'{c.get("stale_hold_cycles", 0)} stale holds, {c.get("late_replies", 0)} late replies, '
            f'{c.get("stale_replies", 0)} stale replies'
            f' ({d.get("read_mode", "?")} read)')
    if result.final_odom_xy_yaw is not None:
        x, y, yaw = result.final_odom_xy_yaw
        log(f'odometry: {result.odom_distance_m:.2f} m travelled; at x {x:+.3f} m, y {y:+.3f} m, '
            f'yaw {math.degrees(yaw):+.1f} deg' + (f'; gaits: {" -> ".join(result.gaits)}' if result.gaits else ''))
    if keyboard is not None:
        result.keyboard = keyboard.finish(time.monotonic())
        log(result.keyboard.line())
    if result.host_cpu is not None:
        log(result.host_cpu.line())
    for line in result.warnings:
        log(line)
    log(f'stopped ({result.stop_reason}) after {result.duration_s:.1f} s' +
        ('' if result.torque_off is None else f'; torque {"off" if result.torque_off else "STILL ON"}') +
        (f'; recorded {sum(result.message_counts.values())} messages to {record}' if record else ''))
    return result


def _wait_for_driver(bringup, driver_proc: DriverProcess | None, stop: threading.Event):
    """Until the driver publishes joint_states (its servos are checked, configured and under torque);
    RuntimeError with its last lines when it exits first or takes too long."""
    deadline = time.monotonic() + DRIVER_START_TIMEOUT_S
    while bringup.joint_states == 0 and not stop.is_set():
        if driver_proc is not None and not driver_proc.alive:
            raise RuntimeError(f'the driver exited with code {driver_proc.process.returncode} while starting: '
                               f'{driver_proc.failure()}')
        if time.monotonic() > deadline:
            raise RuntimeError(f'the driver published no joint_states within {DRIVER_START_TIMEOUT_S:g} s' +
                               (f': {driver_proc.failure()}' if driver_proc is not None else ''))
        stop.wait(0.05)


def _script_audience_missing(bringup, nodes) -> list[str]:
    """What still stands between the script's Joy and a moving gait ([] when nothing)."""
    missing = []
    if nodes['script_player'].joy_pub.get_subscription_count() == 0:
        missing.append('no teleop subscribes to joy yet')
    gait = nodes.get('gait_node')
    if gait is not None:
        if any(sub.get_publisher_count() == 0 for sub in gait.command_subs):
            missing.append('the gait node has not yet discovered the teleop\'s cmd_vel and gait/select')
        if not bringup.gait:
            missing.append(f'the gait has not started: {gait.waiting_for}')
    return missing


def _wait_for_script_audience(bringup, nodes, stop: threading.Event):
    """Until the script's Joy reaches the teleop, the teleop's commands reach the gait node, and the gait
    has started from the measured pose (its first gait/state). A script started earlier loses its first
    events (a speed scale-up, a gait switch) to discovery or a slow start, and the run is not the script.
    RuntimeError naming what is missing after SCRIPT_START_TIMEOUT_S."""
    deadline = time.monotonic() + SCRIPT_START_TIMEOUT_S
    while not stop.is_set():
        missing = _script_audience_missing(bringup, nodes)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f'the script could not start within {SCRIPT_START_TIMEOUT_S:g} s of the driver: '
                               + '; '.join(missing))
        stop.wait(0.02)


def torque_is_off(sim) -> bool | None:
    """Ask the emulated bus whether every servo's torque is off (None when it does not answer)."""
    try:
        servos = sim.command('state', timeout_s=5.0)['servos']
    except (RuntimeError, KeyError, OSError, ValueError):
        return None
    return all(not s['torque'] for s in servos.values())
