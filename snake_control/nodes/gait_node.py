"""gait_node: the gait scheduler at a fixed rate, publishing joint_commands.

Subscribes:
  cmd_vel (geometry_msgs/Twist)   linear.x forward m/s, linear.y sideways m/s, angular.z turn rad/s.
                                  Non-finite values are rejected, large ones clamped to the max_*
                                  parameters; without a fresh one for cmd_timeout_s the speed ramps to 0.
  gait/select (std_msgs/String)   name of the gait to switch to (smooth transition); unknown names are
                                  rejected with a warning.
  odom (nav_msgs/Odometry)        the estimator's body pose: the closed loop's cycle averages
                                  (gaits/trim.py) when closed_loop is true.
  estop (std_msgs/Bool, any publisher QoS)  true: hold the current joint positions with zero velocity from
                                  the next tick on (the driver applies its own stop policy too); false:
                                  resume from zero speed.
Publishes:
  joint_commands (sensor_msgs/JointState)  names from the robot YAML, position rad, velocity rad/s.
  gait/state (diagnostic_msgs/DiagnosticStatus)  name 'gait', level OK / WARN (saturating) / ERROR
                                  (e-stop), message a one-line summary, values (all strings):
                                  active_gait, target_gait, transition_progress (0..1), phase_rad,
                                  phase_rate_rad_s, turn_offset, command_forward_m_s,
                                  command_sideways_m_s, command_turn_rad_s (after clamping and ramping),
                                  estop, saturated_joints (comma-separated names), max_saturation_rad,
                                  rejected_commands, rate_limited_joints, the target gait's
                                  parameters as <gait>.<param>, mapping (calibration, no-slip
                                  model, stride parameter), reachable, modelled_speed_m_s and
                                  modelled_turn_rad_s (mapped gaits), closed_loop (off, waiting,
                                  tracking, cannot reach, at limit, no progress), trim_speed_gain,
                                  trim_turn_rad_s, measured_drive, measured_turn_rad_s. Level WARN
                                  with 'cannot reach the command' when the gait cannot do it.
Parameters:
  robot (string, read-only)       robot YAML name or path
  rate_hz (double, read-only)     tick rate of the gait and of joint_commands; 0: the robot YAML's
                                  bus.control_rate_hz, at most 100 Hz (robot.GAIT_RATE_MAX_HZ). Under a
                                  faster bus the driver moves the goals between ticks along the velocities
  gait (string)                   the active gait; setting it is the same as gait/select
  start_from_joint_states (bool, read-only)  wait for the first joint_states and start from that pose
  startup_still_s (double, read-only)  then hold that pose this long before the gait blends in (commands
                                  wait): the estimator learns the IMU's gyro bias from a rest (1 s)
  startup_imu_wait_s (double, read-only)  a robot with an IMU: before that rest, wait up to this long
                                  for a message on imu (0, the default: no IMU, no wait)
  cmd_timeout_s, max_forward_m_s, max_sideways_m_s, max_turn_rad_s, accel_* (double)
  state_rate_hz (double, read-only)  rate of gait/state
  calibration (string, read-only) '' : <robot>.calibration.yaml beside the robot YAML if present;
                                  'none': no calibration; else a calibration file path
  closed_loop (bool)              trim the drive speed and yaw rate from odom (gaits/trim.py)
  closed_loop_skip_gaits (string array, read-only)  gaits the loop leaves alone (default: those whose
                                  odometry is known to be wrong in MuJoCo: serpenoid and conical
                                  sidewinding, the rolling gaits, the S-crawler)
  closed_loop_time_constant_cycles (double, read-only)  the loop's time constant in gait cycles
  <gait>.<param> (double)         every parameter of every gait of this robot, with its range; a change
                                  goes through the scheduler's smooth transition, an invalid value is
                                  rejected with the scheduler's reason.

The loop runs on a steady (monotonic) clock; dt is measured, not assumed, and bounded so a stalled
process never makes the gait leap.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, String

from snake_control.gaits.calibration import find_calibration, load_calibration
from snake_control.gaits.controller import ERROR, OK, WARN, GaitController, default_gait
from snake_control.gaits.feasibility import feasible_ranges
from snake_control.gaits.trim import TrimSettings, heading_from_quaternion
from snake_control.nodes.messages import JointStateWriter, odometry_pose_any
from snake_control.nodes.qos import COMMAND_QOS, ESTOP_SUB_QOS, SENSOR_QOS, STATE_QOS
from snake_control.nodes.runner import run_node
from snake_control.robot import GAIT_RATE_MAX_HZ, LIMITS, check_rate_hz, gait_rate_hz, load_robot
from snake_control.teleop.command_filter import (DEFAULT_MAX_FORWARD_M_S, DEFAULT_MAX_SIDEWAYS_M_S,
                                                   DEFAULT_MAX_TURN_RAD_S, CommandLimits)

COMMAND_PARAMETERS = {
    # name: (default, low, high, description)
    'cmd_timeout_s': (0.5, 0.05, 10.0, 'without a cmd_vel for this long the speed ramps to zero (s)'),
    'max_forward_m_s': (DEFAULT_MAX_FORWARD_M_S, 0.001, 2.0, 'cmd_vel.linear.x is clamped to +-this (m/s)'),
    'max_sideways_m_s': (DEFAULT_MAX_SIDEWAYS_M_S, 0.001, 2.0, 'cmd_vel.linear.y is clamped to +-this (m/s)'),
    'max_turn_rad_s': (DEFAULT_MAX_TURN_RAD_S, 0.001, 10.0, 'cmd_vel.angular.z is clamped to +-this (rad/s)'),
    'accel_forward_m_s2': (0.3, 0.001, 100.0, 'forward command changes at most this fast (m/s^2)'),
    'accel_sideways_m_s2': (0.3, 0.001, 100.0, 'sideways command changes at most this fast (m/s^2)'),
    'accel_turn_rad_s2': (2.0, 0.001, 1000.0, 'turn command changes at most this fast (rad/s^2)'),
}
# CommandLimits' fields, in order.
LIMIT_PARAMETERS = ('max_forward_m_s', 'max_sideways_m_s', 'max_turn_rad_s', 'accel_forward_m_s2',
                    'accel_sideways_m_s2', 'accel_turn_rad_s2')
# The closed loop trims toward the odometry; where the estimator is known to misread a gait it would
# trim the wrong way (docs/gaits.md, "Closed loop", measured in MuJoCo): serpenoid sidewinding (it reads
# 0.6-0.75 of the true speed: the loop drove it to 1.6x), conical sidewinding (0.2 of it), the rolling
# gaits (rolling read 1.5x the speed and -0.6 rad/s of yaw against +0.1) and the S-crawler (unvalidated).
CLOSED_LOOP_SKIP = ('sidewinding', 'conical_sidewinding', 'rolling', 'serpenoid_rolling', 'helix_rolling',
                    's_crawler')
STARTUP_STILL_S = 1.0      # the estimator's gyro-bias rest needs 0.5 s of still joints (docs/estimation.md)
POSE_TOLERANCE_RAD = 0.05   # a measured start pose may exceed the joint limits by this much (calibration)
LEVELS = {OK: DiagnosticStatus.OK, WARN: DiagnosticStatus.WARN, ERROR: DiagnosticStatus.ERROR}


def _kv(key, value) -> KeyValue:
    if isinstance(value, float):
        value = f'{value:.6g}'
    return KeyValue(key=key, value=str(value))


class GaitNode(Node):
    NODE_NAME = 'gait_node'

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        from snake_control.gaits import catalog
        from snake_control.dynamics.gait_check import torque_estimator

        ro = dict(read_only=True)
        self.declare_parameter('robot', 'pitch_yaw_32', ParameterDescriptor(
            description='robot YAML name or path', **ro))
        self.robot = load_robot(self.get_parameter('robot').value)
        self.declare_parameter('rate_hz', 0.0, ParameterDescriptor(
            description=f'tick rate of the gait and of joint_commands (Hz); 0: the robot YAML\'s '
                        f'bus.control_rate_hz, at most {GAIT_RATE_MAX_HZ:g} Hz',
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=LIMITS['control_rate_hz'].high)],
            **ro))
        rate_hz = check_rate_hz(self.get_parameter('rate_hz').value, 'parameter rate_hz')
        self.rate_hz = float(rate_hz or gait_rate_hz(self.robot.bus.control_rate_hz))
        self.period_s = 1.0 / self.rate_hz
        self.declare_parameter('state_rate_hz', 10.0, ParameterDescriptor(
            description='rate of gait/state (Hz)',
            floating_point_range=[FloatingPointRange(from_value=0.1, to_value=200.0)], **ro))
        for name, (default, low, high, text) in COMMAND_PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(
                description=text, floating_point_range=[FloatingPointRange(from_value=low, to_value=high)]))

        self.declare_parameter('torque_check_fraction', 0.8, ParameterDescriptor(
            description='refuse a gait parameter change whose estimated peak joint torque exceeds this '
                        'fraction of the servo stall torque and is higher than before (seed 001 dynamics, '
                        'robot on the ground); 0 disables the check',
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=1.0)]))
        self.gait_names = list(catalog.gaits_for(self.robot))
        self.declare_parameter('gait', default_gait(self.robot), ParameterDescriptor(
            description=f'active gait, one of: {", ".join(self.gait_names)}'))
        self.declare_parameter('calibration', '', ParameterDescriptor(
            description="calibration file (snake calibrate): '' for <robot>.calibration.yaml beside the "
                        "robot YAML when it exists, 'none' for none, or a path", **ro))
        self.declare_parameter('closed_loop', True, ParameterDescriptor(
            description='trim the gait\'s drive speed and yaw rate from the odometry\'s cycle averages '
                        '(slow integral loop; gaits/trim.py)'))
        self.declare_parameter('closed_loop_skip_gaits', list(CLOSED_LOOP_SKIP), ParameterDescriptor(
            description='gaits the closed loop leaves alone: their odometry is not good enough to trim '
                        'against (e.g. serpenoid sidewinding: its slipping contacts make the estimator read '
                        '0.6-0.75 of the true speed; docs/gaits.md)', **ro))
        self.declare_parameter('closed_loop_time_constant_cycles', TrimSettings.time_constant_cycles,
                               ParameterDescriptor(
            description='time constant of the closed loop, in gait cycles',
            floating_point_range=[FloatingPointRange(from_value=0.5, to_value=100.0)], **ro))
        self.declare_parameter('start_from_joint_states', True, ParameterDescriptor(
            description='wait for the first joint_states and start the gait from that measured pose (so '
                        'nothing jumps); false: start from the gait\'s own shape', **ro))
        self.declare_parameter('startup_still_s', STARTUP_STILL_S, ParameterDescriptor(
            description='after starting from the measured pose, hold it this long before the gait blends in '
                        '(commands wait): a rest of the joints in which the estimator learns the IMU\'s gyro '
                        'bias (it needs 0.5 s); 0: blend in at once',
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=10.0)], **ro))
        self.declare_parameter('startup_imu_wait_s', 0.0, ParameterDescriptor(
            description='a robot with an IMU on imu: before the power-up rest, wait up to this long for its '
                        'first message (another process\'s IMU can be discovered seconds after the driver, '
                        'and a rest the estimator does not hear teaches it no bias); then start anyway, with '
                        'a warning; 0: no IMU, no wait',
            floating_point_range=[FloatingPointRange(from_value=0.0, to_value=60.0)], **ro))
        # Every gait's parameters as <gait>.<param>, with units, meaning and the range in which the gait
        # fits this robot's joint limits (within the catalogue's range).
        self.gait_param_names = {}
        overrides = {g: {} for g in self.gait_names}
        for gait in self.gait_names:
            ranges = feasible_ranges(self.robot, gait)
            for p in catalog.gait_spec(gait).params:
                full = f'{gait}.{p.name}'
                self.gait_param_names[full] = (gait, p.name)
                lo, hi = ranges[p.name]
                rng = [FloatingPointRange(from_value=float(lo), to_value=float(hi))] \
                    if math.isfinite(lo) and math.isfinite(hi) else []
                default = p.resolve(self.robot)
                try:
                    self.declare_parameter(full, default, ParameterDescriptor(
                        description=f'{p.meaning} ({p.unit}); within [{lo:.6g}, {hi:.6g}] the gait fits '
                                    f'{self.robot.name}\'s joint limits', floating_point_range=rng))
                except InvalidParameterValueException:
                    raise ValueError(f'parameter {full}: the value given is outside [{lo:.6g}, {hi:.6g}] '
                                     f'{p.unit}, where {gait} fits {self.robot.name}\'s joint limits') from None
                value = float(self.get_parameter(full).value)
                if value != default:
                    overrides[gait][p.name] = value

        initial = self.get_parameter('gait').value
        if initial not in self.gait_names:
            raise ValueError(f'parameter gait: unknown gait {initial!r} for robot {self.robot.name}; '
                             f'known: {", ".join(self.gait_names)}')
        # Every decision lives in the controller; the lock serialises it between the executor's
        # callbacks and the tick thread.
        self.lock = threading.Lock()
        calibration_file = self.get_parameter('calibration').value
        if calibration_file == 'none':
            calibration = None
        elif calibration_file:
            calibration = load_calibration(calibration_file, self.robot)
        else:
            calibration = find_calibration(self.robot)
        self.controller = GaitController(
            self.robot, initial, period_s=self.period_s, limits=self._limits(),
            cmd_timeout_s=float(self.get_parameter('cmd_timeout_s').value), overrides=overrides,
            torque_fraction=float(self.get_parameter('torque_check_fraction').value),
            torque_estimator=torque_estimator(self.robot), calibration=calibration,
            trim=TrimSettings(time_constant_cycles=float(
                self.get_parameter('closed_loop_time_constant_cycles').value)),
            closed_loop=bool(self.get_parameter('closed_loop').value),
            closed_loop_skip=tuple(self.get_parameter('closed_loop_skip_gaits').value))
        if not self.get_parameter('start_from_joint_states').value:
            self._start_scheduler(None)
        self.estop_stamps_ns = []   # when each e-stop reached this node (ROS time, ns): tests compare stamps
        self.estop_received_s = []  # the same in monotonic time (benchmarks)
        self._warn_s = {}
        self.waiting_for = 'no joint_states from the driver yet'   # why the gait has not started
        self.joint_names = list(self.robot.joint_names)
        self.lower = np.asarray(self.robot.lower_rad, dtype=float)
        self.upper = np.asarray(self.robot.upper_rad, dtype=float)

        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.joint_pub = self.create_publisher(JointState, 'joint_commands', COMMAND_QOS)
        self._writer = JointStateWriter(self.joint_names)
        self._msg_lock = threading.Lock()
        self.state_pub = self.create_publisher(DiagnosticStatus, 'gait/state', STATE_QOS)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / self.get_parameter('state_rate_hz').value, self._publish_state, clock=steady)
        # Subscriptions last, once the scheduler and publishers exist.
        self.command_subs = (self.create_subscription(Twist, 'cmd_vel', self._on_cmd_vel, COMMAND_QOS),
                             self.create_subscription(String, 'gait/select', self._on_select, COMMAND_QOS))
        self.create_subscription(Bool, 'estop', self._on_estop, ESTOP_SUB_QOS)
        # Taken as bytes: the pose is all the loop reads (snake_control.nodes.messages.odometry_pose).
        self.create_subscription(Odometry, 'odom', self._on_odom, STATE_QOS, raw=True)
        if self.scheduler is None:
            from snake_control.gaits.start_pose import StartPose
            self._start_pose = StartPose(self.lower, self.upper, self.robot.velocity_limit_rad_s,
                                         tolerance_rad=POSE_TOLERANCE_RAD)
            self._joint_states_sub = self.create_subscription(JointState, 'joint_states',
                                                              self._on_joint_states,
                                                              STATE_QOS)
            self._imu_wait_s = float(self.get_parameter('startup_imu_wait_s').value)
            self._imu_heard = False
            self._imu_wait_since = None
            if self._imu_wait_s > 0.0:
                self._imu_sub = self.create_subscription(Imu, 'imu', self._on_first_imu, SENSOR_QOS)
        # The control tick keeps its own time on its own thread: no callback of the executor (a
        # parameter change's torque check takes about 0.1 s) can delay it.
        self._tick_stop = threading.Event()
        self.tick_overruns = 0
        self.ticks = 0          # ticks run (benchmarks read the gait's rate from it)
        self._tick_thread = threading.Thread(target=self._tick_loop, name='gait-tick', daemon=True)
        self._tick_thread.start()
        self.get_logger().info(f'{self.robot.name}: {len(self.joint_names)} joints at {self.rate_hz:g} Hz, '
                               f'gait {initial}; gaits: {", ".join(self.gait_names)}')

    @property
    def scheduler(self):
        """The controller's GaitScheduler, None until the start pose is known."""
        return self.controller.scheduler

    @property
    def initial_gait(self) -> str:
        return self.controller.initial_gait

    @property
    def estopped(self) -> bool:
        return self.controller.estopped

    def _start_scheduler(self, positions_rad):
        self.controller.start(positions_rad, still_s=float(self.get_parameter('startup_still_s').value))

    def _on_joint_states(self, msg: JointState):
        """The measured pose starts the gait, once trusted (snake_control.gaits.start_pose): from the
        driver this node commands only, and steady over a few consecutive messages."""
        if self.scheduler is not None:
            return
        index = {n: i for i, n in enumerate(msg.name)}
        if len(msg.position) != len(msg.name) or not all(n in index for n in self.joint_names):
            self._start_pose.reset()
            self._not_started('waiting for joint_states naming every joint of the robot')
            return
        reason = self._untrusted_joint_states()
        if reason:
            self._start_pose.reset()
            self._not_started(reason)
            return
        q = np.array([msg.position[index[n]] for n in self.joint_names], dtype=float)
        pose, reason = self._start_pose.offer(q, time.monotonic())
        if pose is None:
            if reason:
                self._not_started(reason)
            return
        if self._imu_wait_s > 0.0 and not self._imu_heard:
            now = time.monotonic()
            if self._imu_wait_since is None:
                self._imu_wait_since = now
            if now - self._imu_wait_since < self._imu_wait_s:
                self._start_pose.reset()
                self._not_started('waiting for the IMU on imu: the estimator learns its gyro bias in the '
                                  'power-up rest')
                return
            self.get_logger().warning(f'no IMU message on {self.resolve_topic_name("imu")} after '
                                      f'{self._imu_wait_s:g} s: starting without the power-up rest for its '
                                      f'gyro bias')
            self._imu_heard = True
        with self.lock:
            self._start_scheduler(pose)
        self.get_logger().info(f'measured pose received: starting {self.initial_gait} from it')
        self.destroy_subscription(self._joint_states_sub)

    def _untrusted_joint_states(self) -> str:
        """Why joint_states cannot be trusted for the start pose now, or ''. Trusted: every publisher of
        joint_states is a driver, a node that also subscribes to this node's joint_commands, and the
        middleware has matched no more publishers than the graph shows (a newcomer not yet named)."""
        def nodes(infos):
            return {(i.node_namespace.rstrip('/') + '/' + i.node_name) for i in infos}
        publishers = nodes(self.get_publishers_info_by_topic(self._joint_states_sub.topic_name))
        drivers = publishers & nodes(self.get_subscriptions_info_by_topic(self.joint_pub.topic_name))
        if not drivers:
            return 'waiting for the driver: no node both takes joint_commands and publishes joint_states'
        others = sorted(publishers - drivers)
        if others:
            return (f'joint_states also published by {", ".join(others)}, not the driver this node commands: '
                    f'not starting from them')
        if self._joint_states_sub.get_publisher_count() > len(self.get_publishers_info_by_topic(
                self._joint_states_sub.topic_name)):
            return 'joint_states has a publisher the graph does not name yet: waiting'
        return ''

    def _on_first_imu(self, msg: Imu):
        self._imu_heard = True
        self.destroy_subscription(self._imu_sub)

    # -- inputs -----------------------------------------------------------------------------------
    def _not_started(self, reason: str):
        """Why the gait cannot start from joint_states yet: kept for the caller (waiting_for) and warned."""
        self.waiting_for = reason
        self._warn('joint_states', reason)

    def _warn(self, key: str, text: str, every_s: float = 2.0):
        """Warn at most every every_s per kind, so a flood of garbage does not flood the log."""
        now = time.monotonic()
        if now - self._warn_s.get(key, -math.inf) >= every_s:
            self._warn_s[key] = now
            self.get_logger().warn(text)

    def _limits(self, changed=()) -> CommandLimits:
        current = {n: self.get_parameter(n).value for n in LIMIT_PARAMETERS}
        current.update({p.name: p.value for p in changed if p.name in LIMIT_PARAMETERS})
        return CommandLimits(*(float(current[n]) for n in LIMIT_PARAMETERS))

    def _on_cmd_vel(self, msg: Twist):
        with self.lock:
            reason = self.controller.offer_command(msg.linear.x, msg.linear.y, msg.angular.z, time.monotonic())
        if reason:
            self._warn('cmd_vel', f'{reason} ({self.controller.commands.rejected} rejected so far)')

    def _on_odom(self, data: bytes):
        x, y, _, qx, qy, qz, qw = odometry_pose_any(data)
        heading = heading_from_quaternion(qx, qy, qz, qw)
        with self.lock:
            self.controller.offer_odometry(time.monotonic(), x, y, heading)

    def _select(self, name) -> str | None:
        with self.lock:
            return self.controller.select(name)

    def _on_select(self, msg: String):
        reason = self._select(msg.data)
        if reason:
            self._warn('select', f'gait/select rejected: {reason}')
        else:
            self.get_logger().info(f'switching to gait {msg.data}')

    def _on_estop(self, msg: Bool):
        hold = None
        with self.lock:
            if msg.data and self.controller.engage_estop():
                self.estop_stamps_ns.append(self.get_clock().now().nanoseconds)
                self.estop_received_s.append(time.monotonic())
                hold = self.controller.hold()
                self.get_logger().warn('E-STOP: holding the current shape')
            elif not msg.data and self.controller.release_estop():
                self.get_logger().info('e-stop released: resuming from zero speed')
        if hold is not None:
            self._publish(hold)

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name == 'gait':
                reason = self._select(p.value)
                if reason:
                    return SetParametersResult(successful=False, reason=reason)
            elif p.name in self.gait_param_names:
                gait, name = self.gait_param_names[p.name]
                # The torque check (about 0.1 s) runs without the lock, so the control tick goes on.
                reason = self.controller.param_refusal(gait, name, p.value)
                if reason:
                    return SetParametersResult(successful=False, reason=f'{p.name}: {reason}')
                with self.lock:
                    self.controller.set_param(gait, name, p.value)
        for p in params:
            if p.name == 'torque_check_fraction':
                self.controller.torque_fraction = float(p.value)
            elif p.name == 'closed_loop':
                with self.lock:
                    self.controller.trim.set_enabled(bool(p.value))
        if any(p.name in COMMAND_PARAMETERS for p in params):
            timeout = next((p.value for p in params if p.name == 'cmd_timeout_s'),
                           self.get_parameter('cmd_timeout_s').value)
            limits = self._limits(params)
            with self.lock:
                self.controller.set_command_limits(limits, float(timeout))
        return SetParametersResult(successful=True)

    # -- the loop ---------------------------------------------------------------------------------
    def _publish(self, out):
        # As bytes, the joint names encoded once (snake_control.nodes.messages.JointStateWriter); the lock:
        # the tick thread and an e-stop's hold publish in stamp order.
        with self._msg_lock:
            self.joint_pub.publish(self._writer.pack(self.get_clock().now().nanoseconds, out.positions_rad,
                                                     out.velocities_rad_s))

    def _tick_loop(self):
        next_t = time.monotonic()
        while not self._tick_stop.is_set():
            delay = next_t - time.monotonic()
            if delay > 0 and self._tick_stop.wait(delay):
                break
            self.ticks += 1
            try:
                self._on_tick()
            except Exception as exc:     # keep ticking: the next tick holds or recovers
                self._warn('tick', f'control tick failed: {type(exc).__name__}: {exc}')
            next_t += self.period_s
            now = time.monotonic()
            if now > next_t + self.period_s:     # a whole period late: start again from now
                self.tick_overruns += 1
                next_t = now

    def close(self):
        """Stop the control tick (before the node is destroyed)."""
        self._tick_stop.set()
        if self._tick_thread.is_alive() and self._tick_thread is not threading.current_thread():
            self._tick_thread.join(timeout=2.0)

    def destroy_node(self):
        self.close()
        return super().destroy_node()

    def _on_tick(self):
        with self.lock:
            out = self.controller.tick(time.monotonic())
        if out is not None:
            if out.warning:
                self._warn('tick', out.warning)
            self._publish(out)

    def _publish_state(self):
        with self.lock:
            status = self.controller.status()
        if status is None:
            return
        level, message, values = status.summary()
        msg = DiagnosticStatus(name='gait', hardware_id=self.robot.name, level=LEVELS[level], message=message)
        msg.values = [_kv(k, v) for k, v in values]
        self.state_pub.publish(msg)


def main(args=None):
    return run_node(GaitNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
