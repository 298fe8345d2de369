"""driver_node: the Dynamixel bus as a ROS 2 node (a thin shell around snake_control.dynamixel.driver).

Subscribes joint_commands (sensor_msgs/JointState, positions by joint name; velocities, optional, lead
the goal by velocity_lead seconds and, from a gait slower than the bus, carry it on between commands for
up to command_extrapolation seconds) and estop (std_msgs/Bool, from any publisher whatever its QoS);
publishes joint_states (position rad, velocity rad/s, effort =
joint torque N·m: motor current times the servo model's torque constant; last good values for stale
servos) and /diagnostics (bus: mode, reasons, cycle rate, jitter, read failures, fast/slow read mode;
per servo: hardware error bits decoded, motor current A, temperature, voltage, stale count).
The bus loop runs in the driver's own thread and publishes joint_states itself at the end of each cycle,
stamped with the time the servos were read; callbacks here only hand over the latest message.

Parameters (read-only ones need a restart: changing them live would reconfigure a powered bus):
robot (YAML name or path), port (one bus) or ports (one per bus of a robot with buses:), baud, rate, read_mode, watchdog_ms, clamp_out_of_limit,
realtime_priority, cpu_affinity, diagnostics_period (read-only);
stale_limit, stale_policy, alert_policy, estop_policy, command_timeout, velocity_lead, command_extrapolation,
auto_reboot (live).

    ros2 run snake_control driver_node --ros-args -r __ns:=/snake -p robot:=pitch_yaw_32 \\
        -p port:=/dev/ttyUSB0
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType,
                                SetParametersResult)
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from snake_control.dynamixel.driver import POLICIES, Driver, DriverConfig, StartupError
from snake_control.dynamixel.driver_config import COMMAND_EXTRAPOLATION_MAX_S, VELOCITY_LEAD_MAX_S
from snake_control.dynamixel.multibus import make_driver
from snake_control.dynamixel.realtime import apply_to_current_thread, parse_cpus
from snake_control.nodes.messages import JointStateReader, JointStateWriter, ros_ns_at
from snake_control.nodes.qos import ESTOP_SUB_QOS, choose_dds_transport
from snake_control.robot import LIMITS, check_rate_hz, command_extrapolation_s, gait_rate_hz, load_robot

LIVE_POLICIES = ('stale_policy', 'alert_policy', 'estop_policy')


def _desc(text, read_only=False, type_=None, lo=None, hi=None, step=0):
    d = ParameterDescriptor(description=text, read_only=read_only)
    if type_ is not None:
        d.type = type_
    if lo is not None and type_ == ParameterType.PARAMETER_DOUBLE:
        d.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi),
                                                     step=float(step))]
    elif lo is not None and type_ == ParameterType.PARAMETER_INTEGER:
        d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=int(step))]
    return d


class DriverNode(Node):
    """The servo driver node; the bus starts in the constructor (StartupError if the bus is wrong)."""

    NODE_NAME = 'driver_node'

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        P = ParameterType
        # name, default, description, read-only, type, range
        for name, default, text, read_only, type_, limits in (
                ('robot', 'pitch_yaw_32', 'robot YAML name or path', True, P.PARAMETER_STRING, None),
                ('port', '', 'serial device of a one-bus robot; empty: the robot YAML bus.port', True,
                 P.PARAMETER_STRING, None),
                ('ports', '', 'serial device of each bus, comma-separated in the YAML\'s order (a robot '
                 'with buses:); empty: the robot YAML\'s', True, P.PARAMETER_STRING, None),
                ('baud', 0, 'baud rate of every bus; 0: the robot YAML\'s', True, P.PARAMETER_INTEGER,
                 (0, 4_500_000)),
                ('rate', 0.0, 'bus loop rate in Hz; 0: the robot YAML control_rate_hz', True,
                 P.PARAMETER_DOUBLE, (0.0, LIMITS['control_rate_hz'].high)),
                ('read_mode', 'auto', 'auto (fast sync read; per-servo packets on a noisy line) | fast | slow (sync read)', True, P.PARAMETER_STRING, None),
                ('watchdog_ms', -1, 'servo Bus Watchdog in ms (units of 20 ms): the servos stop when no '
                 'packet reaches them for this long; -1: five control periods, at least 100 ms; 0: off',
                 True, P.PARAMETER_INTEGER, (-1, 2540)),
                ('clamp_out_of_limit', True, 'true: clamp out-of-limit commands to the joint limits; '
                 'false: reject them', True, P.PARAMETER_BOOL, None),
                ('stale_limit', 5, 'stale cycles of a servo before stale_policy', False,
                 P.PARAMETER_INTEGER, (1, 1000)),
                ('stale_policy', 'hold', 'after stale_limit stale cycles: hold | torque_off', False,
                 P.PARAMETER_STRING, None),
                ('alert_policy', 'hold', 'on a hardware error: hold | torque_off', False,
                 P.PARAMETER_STRING, None),
                ('estop_policy', 'hold', 'on estop: hold | torque_off', False, P.PARAMETER_STRING, None),
                ('command_timeout', 0.5, 's; an older command means hold', False, P.PARAMETER_DOUBLE,
                 (0.01, 10.0)),
                ('velocity_lead', DriverConfig.velocity_lead_s, 's; goal = commanded position + commanded '
                 'velocity x this, to cancel the servo\'s lag; 0: off', False, P.PARAMETER_DOUBLE,
                 (0.0, VELOCITY_LEAD_MAX_S)),
                ('command_extrapolation', -1.0, 's; between commands the goal moves on along the '
                 'commanded velocity for at most this long (a gait slower than the bus); -1: one period of '
                 'the gait\'s default rate when that is below `rate` (100 Hz under a faster bus), else 0; '
                 '0: off', False, P.PARAMETER_DOUBLE, (-1.0, COMMAND_EXTRAPOLATION_MAX_S)),
                ('auto_reboot', False, 'reboot an overloaded servo (rate-limited)', False,
                 P.PARAMETER_BOOL, None),
                ('diagnostics_period', 1.0, 's between /diagnostics messages', True, P.PARAMETER_DOUBLE,
                 (0.05, 60.0)),
                ('realtime_priority', 0, 'SCHED_FIFO priority of the bus thread (1-99; 0 off; needs root, '
                 'CAP_SYS_NICE or an rtprio limit)', True, P.PARAMETER_INTEGER, (0, 99)),
                ('cpu_affinity', '', 'CPUs the bus thread runs on, e.g. "3" or "2-3"; empty: any', True,
                 P.PARAMETER_STRING, None)):
            lo, hi = limits if limits else (None, None)
            self.declare_parameter(name, default, _desc(text, read_only, type_, lo, hi))
        g = lambda name: self.get_parameter(name).value  # noqa: E731
        self.robot = load_robot(g('robot'))
        check_rate_hz(g('rate'), 'parameter rate')     # the descriptor's range cannot exclude (0, 10)
        self._bus_rate_hz = float(g('rate') or self.robot.bus.control_rate_hz)
        config = DriverConfig(rate_hz=g('rate') or None, stale_limit=g('stale_limit'),
                              stale_policy=g('stale_policy'), alert_policy=g('alert_policy'),
                              estop_policy=g('estop_policy'), command_timeout_s=g('command_timeout'),
                              velocity_lead_s=g('velocity_lead'),
                              command_extrapolation_s=self._extrapolation_s(g('command_extrapolation')),
                              clamp_out_of_limit=g('clamp_out_of_limit'), auto_reboot=g('auto_reboot'),
                              read_mode=g('read_mode'),
                              watchdog_ms=None if g('watchdog_ms') < 0 else g('watchdog_ms'))
        cpus = parse_cpus(g('cpu_affinity'))
        priority = int(g('realtime_priority'))
        ports = [p.strip() for p in g('ports').split(',')] if g('ports').strip() else None
        try:
            self.driver = make_driver(self.robot, g('port') or None, g('baud') or None, config, ports)
        except ValueError as exc:
            raise StartupError(f'parameter {exc}') from None
        # A partial, not a lambda: with a process per bus it is pickled into each bus process.
        self.driver.thread_setup = functools.partial(apply_to_current_thread, priority, frozenset(cpus))
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.state_pub = self.create_publisher(JointState, 'joint_states', 10)
        self._state_writer = None
        self._state_lock = threading.Lock()
        # The bus thread publishes each cycle's reading as soon as it has it, stamped with when the
        # servos were read.
        self.driver.on_state = self._publish_state
        # One bus: a cycle late for the next publishes while the next read is on the wire (Driver.
        # publish_behind). Several buses merge their cycles by time slot, which needs each on time.
        self.driver.publish_behind = isinstance(self.driver, Driver)
        # One bus whose wire time fills most of the period (400 Hz, 32 servos at 4 Mbit/s): the host's
        # work on a reading overlaps the next read (Driver.pipeline); reactions come a cycle later.
        self.driver.pipeline = isinstance(self.driver, Driver)
        self._ros_gone = False
        # A program that shuts rclpy down without destroying this node (rclpy's own SIGINT handler does)
        # must not leave the servos holding torque with nothing commanding them.
        self.context.on_shutdown(self._on_context_shutdown)
        self.driver.start()
        for w in self.driver.warnings:
            self.get_logger().warning(w)
        d = self.driver
        self.get_logger().info(f'{len(d.ids)} servos on {d.port} at {d.baud} baud, {d.rate_hz:g} Hz, '
                               f'{"fast " if d.fast else ""}sync read')
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.create_subscription(Bool, 'estop', self._on_estop, ESTOP_SUB_QOS)
        # Taken as bytes and read with snake_control.nodes.messages.JointStateReader (the names decoded once).
        self._command_reader = JointStateReader()
        self.create_subscription(JointState, 'joint_commands', self._on_command, 10, raw=True)
        self.create_timer(g('diagnostics_period'), self._publish_diagnostics)

    def _on_set_parameters(self, params):
        cfg = self.driver.config
        for p in params:
            if p.name in LIVE_POLICIES and p.value not in POLICIES:
                return SetParametersResult(successful=False, reason=f'{p.name} must be one of {POLICIES}')
        for p in params:
            if p.name in LIVE_POLICIES:
                setattr(cfg, p.name, p.value)
            elif p.name == 'stale_limit':
                cfg.stale_limit = int(p.value)
            elif p.name == 'command_timeout':
                cfg.command_timeout_s = float(p.value)
            elif p.name == 'velocity_lead':
                cfg.velocity_lead_s = float(p.value)
            elif p.name == 'command_extrapolation':
                cfg.command_extrapolation_s = self._extrapolation_s(p.value)
            elif p.name == 'auto_reboot':
                cfg.auto_reboot = bool(p.value)
        return SetParametersResult(successful=True)

    def _extrapolation_s(self, value: float) -> float:
        """command_extrapolation in s, -1 (automatic) resolved for the gait node's default rate."""
        if value >= 0:
            return float(value)
        return command_extrapolation_s(self._bus_rate_hz, gait_rate_hz(self._bus_rate_hz))

    def _on_command(self, data: bytes):
        _, names, position, velocity = self._command_reader.read_any(data)
        if not self.driver.set_command(names, position, velocity):
            self.get_logger().warning('joint command rejected (see /diagnostics)', throttle_duration_sec=1.0)

    def _on_estop(self, msg: Bool):
        self.driver.set_estop(msg.data)

    def _publish_state(self, snap):
        """Runs on a bus thread, once per cycle: the message as bytes, the joint names encoded once
        (snake_control.nodes.messages.JointStateWriter; the lock keeps two buses' threads of a multi-bus
        robot from publishing at once)."""
        ns = ros_ns_at(self.get_clock(), snap.stamp_s)
        with self._state_lock:
            if self._state_writer is None or snap.names != self._state_writer.names:   # the same every cycle
                self._state_writer = JointStateWriter(snap.names)
            data = self._state_writer.pack(ns, snap.position_rad, snap.velocity_rad_s, snap.effort)
            try:
                self.state_pub.publish(data)
            except Exception:
                if not self._ros_gone:      # the context went while this cycle published: not an error
                    raise

    def _publish_diagnostics(self):
        self.diag_pub.publish(diagnostic_array(self.driver.diagnostics(), self.get_name(),
                                               self.get_clock().now().to_msg()))

    def shutdown_driver(self) -> bool:
        """Torque off (retried until confirmed or the deadline); an unconfirmed one is published as an
        ERROR on /diagnostics before the node goes. True if every servo is confirmed off."""
        ok = self.driver.stop()
        if not ok:
            with contextlib.suppress(Exception):
                self._publish_diagnostics()
        return ok

    def _on_context_shutdown(self):
        self._ros_gone = True
        self.shutdown_driver()

    def destroy_node(self):
        self.shutdown_driver()          # torque off before the node goes
        return super().destroy_node()


class DriverStopped(RuntimeError):
    """The driver's bus loop ended by itself (a bug; torque was turned off)."""


def diagnostic_array(d, node_name: str, stamp) -> DiagnosticArray:
    """/diagnostics from a DriverDiagnostics: one status for the bus, one per servo. Torque off not
    confirmed on some servo, or a loop that died, is an ERROR."""
    arr = DiagnosticArray()
    arr.header.stamp = stamp
    kv = lambda k, v: KeyValue(key=k, value=str(v))  # noqa: E731
    bus = DiagnosticStatus(name=f'{node_name}: bus {d.port}', hardware_id=d.port)
    bus.level = {'running': DiagnosticStatus.OK, 'hold': DiagnosticStatus.WARN,
                 'torque_off': DiagnosticStatus.WARN, 'stopped': DiagnosticStatus.OK}.get(
                     d.mode, DiagnosticStatus.ERROR)
    unconfirmed = d.torque_off_unconfirmed or [s.name for s in d.servos if s.torque] \
        if d.mode == 'torque_off' else d.torque_off_unconfirmed
    if unconfirmed:
        bus.level = DiagnosticStatus.ERROR
    bus.message = d.mode + (': ' + '; '.join(d.reasons) if d.reasons else '')
    bus.values = [kv('mode', d.mode), kv('cycle_rate_hz', f'{d.cycle_rate_hz:.1f}'),
                  kv('rate_hz_target', d.rate_hz_target), kv('jitter_p99_ms', f'{d.jitter_p99_ms:.3f}'),
                  kv('read_mode', d.read_mode), kv('reply_failure_rate', f'{d.reply_failure_rate:.3f}'),
                  kv('baud', d.baud), kv('watchdog_ms', d.watchdog_ms),
                  kv('torque_off_unconfirmed', ','.join(unconfirmed))]
    bus.values += [kv(k, v) for k, v in d.counters.items()]
    arr.status.append(bus)
    for s in d.servos:
        st = DiagnosticStatus(name=f'{node_name}: servo {s.name} (ID {s.id})', hardware_id=f'dynamixel:{s.id}')
        if s.name in unconfirmed:
            st.level, st.message = DiagnosticStatus.ERROR, 'torque off not confirmed'
        elif s.hardware_error:
            st.level, st.message = DiagnosticStatus.ERROR, ', '.join(s.hardware_error_names)
        elif s.stale_cycles:
            st.level, st.message = DiagnosticStatus.WARN, f'stale for {s.stale_cycles} cycles'
        else:
            st.level, st.message = DiagnosticStatus.OK, 'ok'
        st.values = [kv('hardware_error', s.hardware_error),
                     kv('hardware_error_names', ','.join(s.hardware_error_names)),
                     kv('current_a', f'{s.current_a:.3f}'),
                     kv('temperature_c', 'unknown' if s.temperature_c is None else s.temperature_c),
                     kv('voltage_v', 'unknown' if s.voltage_v is None else s.voltage_v),
                     kv('health_stale', s.health_stale), kv('health_failures', s.health_failures),
                     kv('stale_count', s.stale_count), kv('stale_cycles', s.stale_cycles),
                     kv('torque', s.torque), kv('reboots', s.reboots)]
        arr.status.append(st)
    return arr


def torque_off_line(prog: str, unconfirmed: list[str]) -> str:
    """The last line a controller prints: whether torque is off everywhere, naming the servos if not."""
    if unconfirmed:
        return (f'{prog}: error: torque off NOT confirmed on {len(unconfirmed)} servo(s): '
                f'{", ".join(unconfirmed)}; cut their power')
    return f'{prog}: torque off confirmed on every servo'


def main(args=None):
    from rclpy.exceptions import ParameterException
    from rclpy.signals import SignalHandlerOptions

    from snake_control.nodes.runner import (HANG_DEADLINE_S, SPIN_TIMEOUT_S, SWITCH_INTERVAL_S, follow_parent,
                                            ignore_stop_signals, install_stop_signals, launcher_gone,
                                            make_executor, say_raw)

    # SIGINT, SIGTERM and SIGHUP end the spin loop (within SPIN_TIMEOUT_S) and reach the finally below,
    # which turns torque off before the process exits. A second signal (Ctrl-C under ros2 launch reaches
    # a node twice) must not interrupt that torque off: only its deadline ends it.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    choose_dds_transport()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stopping = threading.Event()
    install_stop_signals(stopping, on_repeat=lambda name: say_raw(f'driver_node: {name} ignored: turning torque off'),
                         hang_deadline_s=HANG_DEADLINE_S)
    follow_parent()     # ros2 launch killed or sent SIGTERM leaves its nodes running: torque off then too
    node = None
    code = 0
    try:
        node = DriverNode()
        if not stopping.is_set():     # during start-up the node is built first, then stopped below
            executor = make_executor()
            executor.add_node(node)
            context = rclpy.get_default_context()
            # The bus loop ends by itself only on a bug (it has turned torque off by then): the node must
            # not go on as if it drove the robot.
            while context.ok() and node.driver.running and not stopping.is_set() and not launcher_gone():
                executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)
            if launcher_gone() and not stopping.is_set():
                say_raw('driver_node: the launch that started it has gone: turning torque off')
            if context.ok() and not node.driver.running and not stopping.is_set():
                raise DriverStopped(node.driver.fatal_error or 'the bus loop ended')
    except KeyboardInterrupt:
        pass
    except DriverStopped as exc:
        print(f'driver_node: error: the driver stopped: {exc}', file=sys.stderr, flush=True)
        code = 1
    except (StartupError, ValueError, ParameterException) as exc:  # bus, robot YAML or a parameter not as
        print(f'driver_node: {exc}', file=sys.stderr)                 # expected: one clear line
        return 1
    finally:
        stopping.set()
        if node is not None:
            ok = node.shutdown_driver()
            print(torque_off_line('driver_node', node.driver.torque_off_unconfirmed),
                  file=sys.stdout if ok else sys.stderr, flush=True)
            code = code or (0 if ok else 2)
            node.destroy_node()
        rclpy.try_shutdown()
        ignore_stop_signals()
    return code


if __name__ == '__main__':
    sys.exit(main())
