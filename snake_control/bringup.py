"""`snake bringup`: the whole node graph in one process, for machines without `ros2 launch`.

The node list is snake_control.graph.build_graph, the same list gait.launch.py starts; here every
snake_control node is instantiated in this process and spun by one MultiThreadedExecutor (ros2/examples'
composed.py pattern). Nodes of other packages (robot_state_publisher, joy_node, rviz2) are left out; the
URDF is published on robot_description (transient-local) so RViz or Foxglove on another machine can show
the model. With bus='sim' the emulated servo bus runs as a child process and the driver opens its
pseudo-terminal. A scripted teleop session replaces the gamepad; a recorder writes every topic to MCAP.

Per-node parameters go in through a generated parameters file and the namespace through a `__ns`
remapping, both global arguments of the rclpy context: this works for every node class, whatever its
constructor takes.
"""
from __future__ import annotations

import importlib
import math
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from snake_control.graph import GraphArgs, NodeSpec, build_graph

# Executor threads: callbacks of one node never overlap (one mutually exclusive group each), so more
# threads than busy nodes only add interpreter-lock contention.
EXECUTOR_THREADS = 4
STARTUP_ORDER = ('driver_node', 'estimator_node', 'gait_node', 'teleop_node')


@dataclass
class BringupResult:
    """What a bringup run did: figures for the summary line and for tests."""

    duration_s: float = 0.0
    stop_reason: str = ''
    message_counts: dict = field(default_factory=dict)
    joy_sent: int = 0
    final_odom_xy_yaw: tuple | None = None
    torque_off: bool | None = None
    record_path: str | None = None
    port: str | None = None


@dataclass
class BringupRun:
    """A running bringup, as the on_ready/before_stop hooks see it."""

    nodes: dict
    sim: object
    context: object
    executor: object


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


def run_bringup(args: GraphArgs, script: str | None = None, record: str | None = None,
                duration_s: float | None = None, log=print, status_period_s: float = 2.0,
                stop_event: threading.Event | None = None, on_ready=None, before_stop=None) -> BringupResult:
    """Run the graph until duration_s (or the script's end), SIGINT/SIGTERM or stop_event.

    on_ready(run) is called once every node exists and before_stop(run) when the run ends, before anything
    is shut down (tests and benchmarks hook in here); run is a BringupRun (nodes, sim, context, executor).
    Shutdown order: script and teleop first, then gait, then the driver (which turns torque off), then
    the emulated bus, then the recorder's file is finished.
    """
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from snake_control.nodes.bringup_node import BringupNode

    args = args.validated()
    loaded_script = None
    if script:
        from snake_control.teleop_script import load_script
        loaded_script = load_script(script)
        if args.teleop == GraphArgs.teleop:
            # The script names controls of its gamepad: teleop must read the same map.
            from dataclasses import replace
            args = replace(args, teleop=loaded_script.gamepad.source)
    if duration_s is None and loaded_script is not None:
        duration_s = loaded_script.duration_s
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise ValueError(f'--duration: expected a time > 0 in s, got {duration_s!r}')

    result = BringupResult(record_path=record)
    stop = stop_event or threading.Event()
    sim = None
    nodes: dict = {}
    executor = None
    context = None
    spin = None
    with tempfile.TemporaryDirectory(prefix='snake_bringup_') as tmp:
        try:
            if args.bus == 'sim':
                from snake_control.commands.sim_bus import sim_bus_args
                from snake_control.dynamixel.simproc import SimBusProcess
                from snake_control.robot import load_robot
                baud = args.baud or load_robot(args.robot).bus.baud
                sim = SimBusProcess(sim_bus_args(args.robot, baud, args.physics))
                log(f'emulated bus on {sim.path} at {baud} bit/s' +
                    (f' with {args.physics} physics' if args.physics != 'none' else ''))
            result.port = sim.path if sim else None
            specs = [s for s in build_graph(args, port=result.port) if s.in_process]
            params = parameters_file(specs, Path(tmp))
            context = rclpy.context.Context()
            rclpy.init(args=context_arguments(specs, args.namespace, params), context=context,
                       signal_handler_options=SignalHandlerOptions.NO)
            executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS, context=context)

            if record:
                from snake_control.nodes.recorder import Recorder
                nodes['recorder'] = Recorder(record, context=context)
                executor.add_node(nodes['recorder'])
            by_name = {s.name: s for s in specs}
            for name in STARTUP_ORDER:
                spec = by_name[name]
                log(f'starting {spec.fqn}')
                # The graph's node name, whatever name the class gives itself.
                node = node_class(spec)(context=context, cli_args=['--ros-args', '-r',
                                                                   f'__node:={spec.name}'])
                nodes[name] = node
                executor.add_node(node)
            bringup = BringupNode(args.robot, context=context)
            nodes['bringup'] = bringup
            executor.add_node(bringup)
            if loaded_script is not None:
                from snake_control.nodes.script_player import ScriptPlayer
                nodes['script_player'] = ScriptPlayer(script=loaded_script, context=context)
                executor.add_node(nodes['script_player'])

            previous = {}

            def request_stop(signum, frame):
                result.stop_reason = signal.Signals(signum).name
                stop.set()
            if threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    previous[sig] = signal.signal(sig, request_stop)

            spin = threading.Thread(target=_spin, args=(executor, context, stop), daemon=True)
            spin.start()
            run = BringupRun(nodes, sim, context, executor)
            if on_ready is not None:
                on_ready(run)
            if 'script_player' in nodes:
                nodes['script_player'].start()
            start = time.monotonic()
            next_status = start + status_period_s
            log(f'running {len(nodes)} nodes' + (f' for {duration_s:g} s' if duration_s else ' until Ctrl-C'))
            while not stop.is_set():
                now = time.monotonic()
                if duration_s is not None and now - start >= duration_s:
                    result.stop_reason = result.stop_reason or 'duration'
                    break
                if not spin.is_alive():
                    result.stop_reason = 'executor stopped'
                    break
                if now >= next_status:
                    log(bringup.status_line(now - start))
                    next_status += status_period_s
                stop.wait(0.05)
            result.stop_reason = result.stop_reason or 'stop requested'
            result.duration_s = time.monotonic() - start
            if before_stop is not None:
                before_stop(run)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            result.final_odom_xy_yaw = bringup.odom_xy_yaw
            if 'script_player' in nodes:
                result.joy_sent = nodes['script_player'].sent
        finally:
            stop.set()
            if spin is not None:
                spin.join(timeout=5)
            if executor is not None:
                # No callback runs from here on, so none can touch a node being destroyed.
                executor.shutdown(timeout_sec=5)
            # Stop the producers of motion first, the driver (torque off) last, then the bus.
            for name in ('script_player', 'teleop_node', 'gait_node', 'estimator_node', 'bringup',
                         'driver_node'):
                if name in nodes:
                    try:
                        _destroy(nodes.pop(name))
                    except Exception as exc:  # keep shutting the rest down
                        log(f'error while stopping {name}: {exc}')
            if sim is not None:
                result.torque_off = torque_is_off(sim)
            if sim is not None:
                sim.stop()
            if 'recorder' in nodes:
                recorder = nodes.pop('recorder')
                result.message_counts = dict(recorder.counts)
                _destroy(recorder)
            if context is not None:
                context.try_shutdown()
    log(f'stopped ({result.stop_reason}) after {result.duration_s:.1f} s' +
        ('' if result.torque_off is None else f'; torque {"off" if result.torque_off else "STILL ON"}') +
        (f'; recorded {sum(result.message_counts.values())} messages to {record}' if record else ''))
    return result


def _spin(executor, context, stop):
    while context.ok() and not stop.is_set():
        executor.spin_once(timeout_sec=0.05)


def torque_is_off(sim) -> bool | None:
    """Ask the emulated bus whether every servo's torque is off (None when it does not answer)."""
    try:
        servos = sim.command('state', timeout_s=5.0)['servos']
    except (RuntimeError, KeyError, OSError, ValueError):
        return None
    return all(not s['torque'] for s in servos.values())
