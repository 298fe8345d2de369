"""estimator_node: odometry of a snake robot from its joint states (and optionally an IMU).

A thin rclpy shell around snake_control.estimation.estimator.Estimator (all the mathematics lives there).

Subscribes: joint_states (sensor_msgs/JointState, best effort: accepts reliable and best-effort
publishers), imu (sensor_msgs/Imu, only with use_imu:=true). An Imu without orientation
(orientation_covariance[0] = -1) is a raw IMU: its gyro and accelerometer go to the estimator's attitude
filter (Estimator.update_imu) at their own stamps, and joint_states wait for the IMU reading at or after
their stamp (snake_control.estimation.stamp_order; at most a quarter second of stamps: then the estimator
bridges the missing readings with the contacts); one with an orientation gives it (and its rate) to the
next joint_states update.
Publishes: odom (nav_msgs/Odometry, frame odom_frame -> base frame, with covariance), /diagnostics
(diagnostic_msgs/DiagnosticArray: slip residual, rank, singularity, message counts), and the odom -> base
transform on /tf where tf2_msgs is installed (odom -> link_0, so the URDF tree hangs under it).

Parameters (read-only ones are fixed at start):
  robot (str, read-only)            robot name or YAML path
  body_frame (str, read-only)       middle | head | tail | chassis | link index; '' = robot default
  odom_frame (str, read-only)       default 'odom'
  base_frame (str, read-only)       child frame id; '' = link_<k> of the URDF, or 'virtual_chassis'
  publish_rate_hz (float)           odometry publish rate limit; 0 = every joint_states message
  update_rate_hz (float)            estimator updates per second at most (joint_states arriving faster
                                    are decimated); 0 = every message
  diagnostics_rate_hz (float)       /diagnostics rate
  use_imu (bool, read-only), imu_link (int, read-only)
  imu_gap_s (float, read-only)      raw IMU readings further apart are a gap, bridged with the contacts
  imu_attitude_s (float, read-only) 0: the raw IMU's attitude taken as it is; above 0 it pulls the contacts'
                                    attitude with this time constant (s)
  axial_weight (float, read-only)   pitch-yaw: weight of no-slip along each module (0..1; -1 = robot YAML)
  slip_warn_m_s (float)             slip rms above which diagnostics report WARN
  publish_tf (bool)                 publish odom -> link_0, the URDF root, on /tf (needs tf2_msgs)
  max_stamp_ahead_s (float, read-only)  joint_states stamped further ahead of this node's clock are
                                    rejected (a future stamp would make every later message look old)
  limit_margin_rad (float, read-only)   joint angles beyond the limits by more than this are rejected

Untrusted input (snake_control.estimation.input_gate): future stamps, out-of-order stamps, angles outside
the joint limits and steps faster than the velocity limit are rejected; stamps that went back for good
(a clock step) and a consistent new shape re-anchor the estimate instead of stopping it. Each is counted
in /diagnostics and turns it to WARN for INPUT_WARN_S.
"""
from __future__ import annotations

import math
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState

from snake_control.estimation.estimator import Estimator, root_link_pose
from snake_control.estimation.input_gate import KINDS as GATE_KINDS
from snake_control.estimation.input_gate import ACCEPT, REBASE, REJECT, InputGate
from snake_control.estimation.stamp_order import StampOrder
from snake_control.kinematics.lie import quaternion_from_matrix
from snake_control.nodes.messages import (IMU_ANGULAR_VELOCITY, IMU_ANGULAR_VELOCITY_COVARIANCE,
                                          IMU_LINEAR_ACCELERATION, IMU_LINEAR_ACCELERATION_COVARIANCE,
                                          IMU_ORIENTATION, IMU_ORIENTATION_COVARIANCE, JointStateReader,
                                          OdometryWriter, imu_values_any, set_stamp)
from snake_control.nodes.qos import DIAGNOSTICS_QOS, SENSOR_QOS, STATE_QOS
from snake_control.nodes.runner import run_node
from snake_control.robot import load_robot, reorder_joints


# /diagnostics stay WARN this long (s) after a rejected or re-anchored joint_states message.
INPUT_WARN_S = 10.0


def _desc(text, read_only=False, float_range=None, int_range=None):
    d = ParameterDescriptor(description=text, read_only=read_only)
    if float_range is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(float_range[0]),
                                                     to_value=float(float_range[1]), step=0.0)]
    if int_range is not None:
        d.integer_range = [IntegerRange(from_value=int(int_range[0]), to_value=int(int_range[1]), step=1)]
    return d


def _body_frame(text: str):
    text = text.strip()
    if not text:
        return None
    return int(text) if text.lstrip('-').isdigit() else text


class EstimatorNode(Node):
    """joint_states (+ imu) in, odom + /diagnostics (+ tf) out."""

    NODE_NAME = 'estimator_node'

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        p = self.declare_parameter
        p('robot', 'pitch_yaw_32', _desc('robot name (config/robots) or robot YAML path', read_only=True))
        p('body_frame', '', _desc("reported body frame: middle, head, tail, chassis or a link index; '' = "
                                  'middle for planar robots, chassis for pitch-yaw robots', read_only=True))
        p('odom_frame', 'odom', _desc('fixed frame of the odometry', read_only=True))
        p('base_frame', '', _desc("child frame id; '' = link_<k> of the URDF, or virtual_chassis",
                                  read_only=True))
        p('publish_rate_hz', 0.0, _desc('odometry rate limit; 0 publishes on every joint_states message',
                                        float_range=(0.0, 1000.0)))
        p('update_rate_hz', 100.0, _desc('estimator updates per second at most: joint_states arriving faster '
                                         '(a 400 Hz control loop) are decimated to this; 0 = every message',
                                         float_range=(0.0, 1000.0)))
        p('diagnostics_rate_hz', 1.0, _desc('rate of /diagnostics', float_range=(0.1, 100.0)))
        p('use_imu', False, _desc('subscribe to imu (sensor_msgs/Imu) for orientation and rate',
                                  read_only=True))
        p('imu_link', 0, _desc('link index carrying the IMU', read_only=True, int_range=(0, 1000)))
        p('imu_attitude_s', 0.0, _desc('0: each update takes the raw IMU attitude as it is; above 0 the contacts '
                                       'turn the chassis and the IMU attitude pulls it with this time constant (s)',
                                       read_only=True, float_range=(0.0, 100.0)))
        p('imu_gap_s', 0.05, _desc('raw IMU readings further apart than this are a gap: not integrated, '
                                   'bridged with the contacts (a few of the IMU periods)', read_only=True,
                                   float_range=(0.001, 10.0)))
        p('axial_weight', -1.0, _desc('pitch-yaw robots: weight of no-slip along each module axis; '
                                      '-1 = the robot YAML link.axial_weight', read_only=True,
                                      float_range=(-1.0, 1.0)))
        p('slip_warn_m_s', 0.05, _desc('slip residual rms that turns diagnostics to WARN',
                                       float_range=(0.0, 10.0)))
        p('publish_tf', True, _desc('publish odom -> link_0 on /tf (needs tf2_msgs)'))
        p('max_stamp_ahead_s', 1.0, _desc('reject joint_states stamped further ahead of this clock (s)',
                                          read_only=True, float_range=(0.01, 3600.0)))
        p('limit_margin_rad', 0.2, _desc('reject joint angles beyond the joint limits by more than this',
                                         read_only=True, float_range=(0.0, 3.2)))

        gp = self.get_parameter
        self.robot = load_robot(gp('robot').value)
        self.body_frame_choice = _body_frame(gp('body_frame').value)
        self._last_q = None
        self._body_in_root = None
        self.estimator = Estimator(self.robot, self.body_frame_choice,
                                   imu_link=gp('imu_link').value, imu_gap_s=gp('imu_gap_s').value,
                                   imu_attitude_s=gp('imu_attitude_s').value,
                                   axial_weight=None if gp('axial_weight').value < 0 else gp('axial_weight').value)
        self.gate = InputGate(self.robot.lower_rad, self.robot.upper_rad, self.robot.velocity_limit_rad_s,
                              limit_margin_rad=gp('limit_margin_rad').value,
                              max_stamp_ahead_s=gp('max_stamp_ahead_s').value)
        self.last_input_event = ''
        self.last_input_event_wall = -math.inf
        self.odom_frame = gp('odom_frame').value
        self._joint_names = list(self.robot.joint_names)    # a property that builds a new list
        base = gp('base_frame').value
        link = self.estimator.body_link
        self.base_frame = base or ('virtual_chassis' if link is None else f'link_{link}')
        self.publish_period = self._period(gp('publish_rate_hz').value)
        self.update_period = self._period(gp('update_rate_hz').value)
        self._next_update = -math.inf
        self.decimated = 0
        self.slip_warn = gp('slip_warn_m_s').value
        self.use_imu = bool(gp('use_imu').value)
        self.add_on_set_parameters_callback(self._on_parameters)

        self.received = 0
        self.imu_received = 0
        self.rejected = 0
        self.last_error = ''
        self.last_publish = -math.inf
        self.last_receive_wall = None
        self._imu = (None, None)
        # Raw IMU readings and joint_states are handed to the estimator in stamp order: a joint reading
        # waits (at most StampOrder.hold_s of stamps) for the IMU reading at or after its stamp.
        self.order = StampOrder()
        self.last_order_wall = time.monotonic()

        self.odom_pub = self.create_publisher(Odometry, 'odom', STATE_QOS)
        self._odom_writer = OdometryWriter(self.odom_frame, self.base_frame)
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', DIAGNOSTICS_QOS)
        self.tf_pub = None
        if gp('publish_tf').value:
            try:
                # The message package is all publishing takes (tf2_ros's broadcaster is this publisher).
                from geometry_msgs.msg import TransformStamped
                from tf2_msgs.msg import TFMessage
                self.tf_pub = self.create_publisher(TFMessage, '/tf', STATE_QOS)
                # Built once; each publish writes only the stamp and the numbers.
                self._tf_msg = TFMessage(transforms=[TransformStamped(child_frame_id='link_0')])
                self._tf_msg.transforms[0].header.frame_id = self.odom_frame
            except ImportError:
                self.get_logger().info('tf2_msgs not installed: odom -> link_0 not published on /tf')
        period = 1.0 / gp('diagnostics_rate_hz').value
        self.diag_timer = self.create_timer(period, self.publish_diagnostics)
        # Both streams are taken as bytes and read with snake_control.nodes.messages (a tenth of the cost of
        # the messages rclpy would build).
        self._joint_reader = JointStateReader()
        if self.use_imu:
            self.create_subscription(Imu, 'imu', self._on_imu, SENSOR_QOS, raw=True)
            # Joint readings left waiting when both streams stop go out after hold_s of wall time.
            self.order_timer = self.create_timer(0.05, self._flush_order)
        # Subscribe last, once everything the callback touches exists.
        self.create_subscription(JointState, 'joint_states', self._on_joint_states, SENSOR_QOS, raw=True)
        self.get_logger().info(f'estimating {self.robot.name} ({self.robot.kind}) in {self.odom_frame} -> '
                               f'{self.base_frame}')

    def _decimated(self, stamp: float) -> bool:
        """Whether to skip this message to keep to update_rate_hz."""
        if self.update_period <= 0.0:
            return False
        if stamp < self._next_update - 1.5 * self.update_period:
            self._next_update = -math.inf    # the clock stepped back: never decimate forever
        if stamp < self._next_update - 0.3 * self.update_period:
            self.decimated += 1      # shapes between updates add nothing the mid-point step misses
            return True
        self._next_update = max(self._next_update + self.update_period, stamp + 0.5 * self.update_period)
        return False

    def _nominal_dt(self) -> float:
        """The sample period (s) assumed across a re-anchored stamp: the robot's control period."""
        return 1.0 / self.robot.bus.control_rate_hz

    @staticmethod
    def _period(rate_hz):
        return 0.0 if rate_hz <= 0 else 1.0 / rate_hz

    def _on_parameters(self, params):
        for param in params:
            if param.name == 'publish_rate_hz':
                self.publish_period = self._period(param.value)
            elif param.name == 'update_rate_hz':
                self.update_period = self._period(param.value)
            elif param.name == 'slip_warn_m_s':
                self.slip_warn = param.value
        return SetParametersResult(successful=True)

    def _on_imu(self, data: bytes):
        stamp, values = imu_values_any(data)
        quat = values[IMU_ORIENTATION].copy()
        # sensor_msgs/Imu: covariance[0] == -1 means "no orientation estimate" (or no rate, no acceleration).
        orientation = None if values[IMU_ORIENTATION_COVARIANCE] == -1.0 or np.linalg.norm(quat) < 0.5 else quat
        rate = None if values[IMU_ANGULAR_VELOCITY_COVARIANCE] == -1.0 else values[IMU_ANGULAR_VELOCITY].copy()
        self.imu_received += 1
        if orientation is None and rate is not None:
            # A raw IMU (gyro and accelerometer, like the MuJoCo world's): the estimator's attitude filter
            # integrates every reading at its own stamp; joint_states then take the attitude from it.
            accel = None if values[IMU_LINEAR_ACCELERATION_COVARIANCE] == -1.0 else \
                values[IMU_LINEAR_ACCELERATION].copy()
            self._imu = (None, None)
            self.last_order_wall = time.monotonic()
            self._process(self.order.imu(stamp if stamp > 0.0 else self.get_clock().now().nanoseconds * 1e-9,
                                         (rate, accel)))
            return
        self._imu = (orientation, rate)

    def _flush_order(self):
        if self.order.waiting and time.monotonic() - self.last_order_wall > self.order.hold_s:
            self._process(self.order.flush())

    def _process(self, readings):
        """Hand readings released by the StampOrder to the estimator, in their order."""
        for kind, stamp, item in readings:
            if kind == 'imu':
                try:
                    self.estimator.update_imu(stamp, *item)
                except ValueError as exc:
                    self.get_logger().warning(f'imu rejected: {exc}', throttle_duration_sec=5.0)
            else:
                self._update(stamp, *item)

    def _on_joint_states(self, data: bytes):
        self.received += 1
        self.last_receive_wall = time.monotonic()
        now = self.get_clock().now().nanoseconds * 1e-9
        stamp, names, position, velocity = self._joint_reader.read_any(data)
        if stamp <= 0.0:
            stamp = now
        try:
            q = reorder_joints(names, position, self._joint_names)
            # The gate sees every message (a future stamp must not steer the decimation either).
            verdict = self.gate.check(stamp, now, q)
            if verdict.action != ACCEPT:
                self.last_input_event = f'joint_states {verdict.kind.replace("_", " ")}: {verdict.reason}'
                self.last_input_event_wall = time.monotonic()
                self.get_logger().warning(self.last_input_event, throttle_duration_sec=5.0)
            if verdict.action == REJECT:
                return
            if verdict.action == REBASE:
                self._next_update = -math.inf
                self._process(self.order.flush())      # what came before the jump goes in first
                self.order.reset()
                if verdict.kind == 'time_rebase':
                    self.estimator.rebase_time(stamp - self._nominal_dt())
                    self.last_publish = -math.inf     # the rate limit restarts in the new time base too
                else:
                    self.estimator.reanchor()
            elif self._decimated(stamp):
                return
            v = None
            if velocity is not None and len(velocity) == len(names):
                v = reorder_joints(names, velocity, self._joint_names)
        except ValueError as exc:
            self._reject(exc)
            return
        if self.use_imu:
            self.last_order_wall = time.monotonic()
            self._process(self.order.joints(stamp, (q, v)))
        else:
            self._update(stamp, q, v)

    def _reject(self, exc):
        self.rejected += 1
        self.last_error = str(exc)
        self.get_logger().warning(f'joint_states rejected: {exc}', throttle_duration_sec=5.0)

    def _update(self, stamp, q, v):
        orientation, rate = self._imu if self.use_imu else (None, None)
        try:
            state = self.estimator.update(stamp, q, v, orientation, rate)
        except ValueError as exc:
            self._reject(exc)
            return
        self._last_q = q
        if stamp - self.last_publish < self.publish_period:
            return
        self.last_publish = stamp
        self._publish(state, round(stamp * 1e9))

    def _publish(self, state, stamp_ns: int):
        # Only what someone listens to is built (a count is a few microseconds; the odom message and the
        # root transform are tens to hundreds).
        if self.odom_pub.get_subscription_count():
            # As bytes: the frame ids are encoded once, each message packs only the stamp and the numbers.
            self.odom_pub.publish(self._odom_writer.pack(stamp_ns, state.pose_xyz_quat, state.pose_covariance,
                                                         state.twist, state.twist_covariance))
        if self.tf_pub is not None and self._last_q is not None:
            # TF carries odom -> link_0, the URDF's root, so robot_state_publisher's tree hangs under the
            # estimate; a transform to the body link itself would give that link a second parent.
            root = None
            if self.robot.kind == 'planar':
                # From the shape, on every message, so the body frame's axes stay continuous whether or not
                # anyone listens.
                root, self._body_in_root = root_link_pose(self.robot, self.estimator.pose, self._last_q,
                                                          self.body_frame_choice, self._body_in_root)
            if self.tf_pub.get_subscription_count():
                # 3D: from the update's own chain geometry (it exists once _last_q does).
                self._publish_root(self.estimator.root_pose() if root is None else root, stamp_ns)

    def _publish_root(self, root, stamp_ns: int):
        t = self._tf_msg.transforms[0]
        set_stamp(t.header.stamp, stamp_ns)
        tr, rot = t.transform.translation, t.transform.rotation
        tr.x, tr.y, tr.z = root[:3, 3].tolist()
        rot.x, rot.y, rot.z, rot.w = quaternion_from_matrix(root[:3, :3]).tolist()
        self.tf_pub.publish(self._tf_msg)

    def publish_diagnostics(self):
        state = self.estimator.state
        status = DiagnosticStatus()
        status.name = f'{self.get_name()}: odometry'
        status.hardware_id = self.robot.name
        stale = self.last_receive_wall is None or time.monotonic() - self.last_receive_wall > 2.0
        if stale:
            status.level = DiagnosticStatus.ERROR if self.received else DiagnosticStatus.WARN
            status.message = 'no joint_states for 2 s' if self.received else 'waiting for joint_states'
        elif self.rejected and self.last_error and self.estimator.updates == 0:
            status.level = DiagnosticStatus.ERROR
            status.message = f'joint_states rejected: {self.last_error}'
        elif time.monotonic() - self.last_input_event_wall < INPUT_WARN_S:
            status.level = DiagnosticStatus.WARN
            status.message = self.last_input_event
        elif state.singular:
            status.level = DiagnosticStatus.WARN
            status.message = 'near a singular shape: motion partly unobservable, covariance raised'
        elif state.slip_rms_m_s > self.slip_warn:
            status.level = DiagnosticStatus.WARN
            status.message = f'slip residual {state.slip_rms_m_s:.3f} m/s above {self.slip_warn:.3f} m/s'
        else:
            status.level = DiagnosticStatus.OK
            status.message = 'ok'
        values = {
            'slip_rms_m_s': f'{state.slip_rms_m_s:.6g}',
            'slip_max_m_s': f'{float(np.max(np.abs(state.slip_residual), initial=0.0)):.6g}',
            'rank': str(state.rank),
            'rank_needed': str(state.rank_needed),
            'singular': str(bool(state.singular)).lower(),
            'contacts': str(int(np.count_nonzero(state.contacts))),
            'received': str(self.received),
            'imu_received': str(self.imu_received),
            'imu_gaps': str(self.estimator.imu_gaps),
            'imu_late': str(self.estimator.imu_late),
            'imu_bridged': str(self.estimator.imu_bridged),
            'gyro_bias_rad_s': ' '.join(f'{b:.5f}' for b in self.estimator.imu.bias),
            'stale_held': str(self.estimator.stale_held),
            'held_for_imu': str(self.order.held),
            'imu_timed_out': str(self.order.timed_out),
            'decimated': str(self.decimated),
            'rejected': str(self.rejected),
            'stale_stamps': str(self.estimator.skipped),
            **{f'input_{kind}': str(self.gate.counts[kind]) for kind in GATE_KINDS},
            'x_m': f'{state.pose[0, 3]:.4f}',
            'y_m': f'{state.pose[1, 3]:.4f}',
            'position_sd_m': f'{math.sqrt(max(float(np.trace(state.pose_covariance[:2, :2])), 0.0)):.4g}',
        }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [status]
        self.diag_pub.publish(msg)


def main(args=None):
    return run_node(EstimatorNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
