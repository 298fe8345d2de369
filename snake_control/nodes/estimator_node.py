"""estimator_node: odometry of a snake robot from its joint states (and optionally an IMU).

A thin rclpy shell: it decodes the messages and publishes. What happens to each message in between (input
gate, decimation, IMU stamp order, re-anchoring, counters) is snake_control.estimation.pipeline
.EstimatorPipeline, which the offline replay (snake odometry --replay) runs too; the mathematics is
snake_control.estimation.estimator.Estimator.

Subscribes: joint_states (sensor_msgs/JointState, best effort: accepts reliable and best-effort
publishers), imu (sensor_msgs/Imu, only with use_imu:=true). An Imu without orientation
(orientation_covariance[0] = -1) is a raw IMU: its gyro and accelerometer go to the estimator's attitude
filter (Estimator.update_imu) at their own stamps, and joint_states wait for the IMU reading at or after
their stamp (snake_control.estimation.stamp_order; at most a quarter second of stamps: then the estimator
bridges the missing readings with the contacts); one with an orientation gives it (and its rate) to the
next joint_states update.
Publishes: odom (nav_msgs/Odometry, frame odom_frame -> base frame, with covariance), /diagnostics
(diagnostic_msgs/DiagnosticArray: slip residual, rank, singularity, message counts, kernels: compiled,
or compiling while a child builds them for the next start), and the odom -> base
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
from dataclasses import fields

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState

from snake_control.estimation.estimator import root_link_pose
from snake_control.estimation.input_gate import KINDS as GATE_KINDS
from snake_control.estimation.kernel_loading import kernels_state, prepare_kernels
from snake_control.estimation.pipeline import EstimatorParams, EstimatorPipeline
from snake_control.kinematics.lie import quaternion_from_matrix
from snake_control.nodes.messages import (IMU_ANGULAR_VELOCITY, IMU_ANGULAR_VELOCITY_COVARIANCE,
                                          IMU_LINEAR_ACCELERATION, IMU_LINEAR_ACCELERATION_COVARIANCE,
                                          IMU_ORIENTATION, IMU_ORIENTATION_COVARIANCE, JointStateReader,
                                          OdometryWriter, imu_values_any, set_stamp)
from snake_control.nodes.qos import DIAGNOSTICS_QOS, SENSOR_QOS, STATE_QOS
from snake_control.nodes.runner import run_node
from snake_control.robot import load_robot


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


class EstimatorNode(Node):
    """joint_states (+ imu) in, odom + /diagnostics (+ tf) out."""

    NODE_NAME = 'estimator_node'

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        d = EstimatorParams()      # the defaults, shared with the offline replay (estimation.replay)

        def p(name, description):
            self.declare_parameter(name, getattr(d, name), description)

        p('robot', _desc('robot name (config/robots) or robot YAML path', read_only=True))
        p('body_frame', _desc("reported body frame: middle, head, tail, chassis or a link index; '' = "
                              'middle for planar robots, chassis for pitch-yaw robots', read_only=True))
        p('odom_frame', _desc('fixed frame of the odometry', read_only=True))
        p('base_frame', _desc("child frame id; '' = link_<k> of the URDF, or virtual_chassis", read_only=True))
        p('publish_rate_hz', _desc('odometry rate limit; 0 publishes on every joint_states message',
                                   float_range=(0.0, 1000.0)))
        p('update_rate_hz', _desc('estimator updates per second at most: joint_states arriving faster '
                                  '(a 400 Hz control loop) are decimated to this; 0 = every message',
                                  float_range=(0.0, 1000.0)))
        p('diagnostics_rate_hz', _desc('rate of /diagnostics', float_range=(0.1, 100.0)))
        p('use_imu', _desc('subscribe to imu (sensor_msgs/Imu) for orientation and rate', read_only=True))
        p('imu_link', _desc('link index carrying the IMU', read_only=True, int_range=(0, 1000)))
        p('imu_attitude_s', _desc('0: each update takes the raw IMU attitude as it is; above 0 the contacts '
                                  'turn the chassis and the IMU attitude pulls it with this time constant (s)',
                                  read_only=True, float_range=(0.0, 100.0)))
        p('imu_gap_s', _desc('raw IMU readings further apart than this are a gap: not integrated, '
                             'bridged with the contacts (a few of the IMU periods)', read_only=True,
                             float_range=(0.001, 10.0)))
        p('axial_weight', _desc('pitch-yaw robots: weight of no-slip along each module axis; '
                                '-1 = the robot YAML link.axial_weight', read_only=True, float_range=(-1.0, 1.0)))
        p('slip_warn_m_s', _desc('slip residual rms that turns diagnostics to WARN', float_range=(0.0, 10.0)))
        p('publish_tf', _desc('publish odom -> link_0 on /tf (needs tf2_msgs)'))
        p('max_stamp_ahead_s', _desc('reject joint_states stamped further ahead of this clock (s)',
                                     read_only=True, float_range=(0.01, 3600.0)))
        p('limit_margin_rad', _desc('reject joint angles beyond the joint limits by more than this',
                                    read_only=True, float_range=(0.0, 3.2)))

        params = EstimatorParams(**{f.name: self.get_parameter(f.name).value for f in fields(d)})
        self.robot = load_robot(params.robot)
        self.body_frame_choice = params.body_frame_choice
        self._body_in_root = None
        # Everything between the decoded message and the estimate (input gate, decimation, IMU stamp order,
        # re-anchoring, counters) lives in the pipeline, which the offline replay runs too.
        self.pipeline = EstimatorPipeline(self.robot, params, publish=self._publish, warn=self._warn)
        self.estimator = self.pipeline.estimator
        self.odom_frame = params.odom_frame
        link = self.estimator.body_link
        self.base_frame = params.base_frame or ('virtual_chassis' if link is None else f'link_{link}')
        self.slip_warn = params.slip_warn_m_s
        self.use_imu = self.pipeline.use_imu
        self.add_on_set_parameters_callback(self._on_parameters)
        # The pitch-yaw estimate's compiled kernels load now, before the node spins; on the first start after
        # an install a child compiles them for the next start and this run takes the numpy path.
        self._kernels = None if self.estimator.planar else prepare_kernels(self._log_kernels)

        self.odom_pub = self.create_publisher(Odometry, 'odom', STATE_QOS)
        self._odom_writer = OdometryWriter(self.odom_frame, self.base_frame)
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', DIAGNOSTICS_QOS)
        self.tf_pub = None
        if params.publish_tf:
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
        self.diag_timer = self.create_timer(1.0 / params.diagnostics_rate_hz, self.publish_diagnostics)
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

    def _log_kernels(self, level: str, text: str):
        log = self.get_logger()
        (log.warning if level == 'warn' else log.info)(text)

    def destroy_node(self):
        if self._kernels is not None:
            self._kernels.stop()
        return super().destroy_node()

    def _on_parameters(self, params):
        for param in params:
            if param.name == 'publish_rate_hz':
                self.pipeline.set_publish_rate_hz(param.value)
            elif param.name == 'update_rate_hz':
                self.pipeline.set_update_rate_hz(param.value)
            elif param.name == 'slip_warn_m_s':
                self.slip_warn = param.value
        return SetParametersResult(successful=True)

    def _warn(self, kind: str, text: str):
        # One call site per kind: each is throttled on its own, as the log lines were.
        log = self.get_logger()
        if kind == 'input':
            log.warning(text, throttle_duration_sec=5.0)
        elif kind == 'imu':
            log.warning(text, throttle_duration_sec=5.0)
        else:
            log.warning(text, throttle_duration_sec=5.0)

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_imu(self, data: bytes):
        stamp, values = imu_values_any(data)
        # sensor_msgs/Imu: covariance[0] == -1 means "no orientation estimate" (or no rate, no acceleration).
        orientation = None if values[IMU_ORIENTATION_COVARIANCE] == -1.0 else values[IMU_ORIENTATION].copy()
        rate = None if values[IMU_ANGULAR_VELOCITY_COVARIANCE] == -1.0 else values[IMU_ANGULAR_VELOCITY].copy()
        accel = None if values[IMU_LINEAR_ACCELERATION_COVARIANCE] == -1.0 else \
            values[IMU_LINEAR_ACCELERATION].copy()
        # The clock is read only for a reading without a stamp (it is a microsecond or two per message).
        self.pipeline.imu(stamp, self._now_s() if stamp <= 0.0 else None, orientation, rate, accel,
                          time.monotonic())

    def _flush_order(self):
        self.pipeline.flush(time.monotonic())

    def _on_joint_states(self, data: bytes):
        wall = time.monotonic()
        now = self._now_s()
        stamp, names, position, velocity = self._joint_reader.read_any(data)
        self.pipeline.joint_states(stamp, now, names, position, velocity, wall)

    def _publish(self, stamp: float, state, q):
        stamp_ns = round(stamp * 1e9)
        # Only what someone listens to is built (a count is a few microseconds; the odom message and the
        # root transform are tens to hundreds).
        if self.odom_pub.get_subscription_count():
            # As bytes: the frame ids are encoded once, each message packs only the stamp and the numbers.
            self.odom_pub.publish(self._odom_writer.pack(stamp_ns, state.pose_xyz_quat, state.pose_covariance,
                                                         state.twist, state.twist_covariance))
        if self.tf_pub is not None:
            # TF carries odom -> link_0, the URDF's root, so robot_state_publisher's tree hangs under the
            # estimate; a transform to the body link itself would give that link a second parent.
            root = None
            if self.robot.kind == 'planar':
                # From the shape, on every message, so the body frame's axes stay continuous whether or not
                # anyone listens.
                root, self._body_in_root = root_link_pose(self.robot, state.pose, q, self.body_frame_choice,
                                                          self._body_in_root)
            if self.tf_pub.get_subscription_count():
                # 3D: from the update's own chain geometry (the pipeline publishes at the update).
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
        pipe = self.pipeline
        status = DiagnosticStatus()
        status.name = f'{self.get_name()}: odometry'
        status.hardware_id = self.robot.name
        now = time.monotonic()
        if pipe.last_receive_s is None or now - pipe.last_receive_s > 2.0:
            status.level = DiagnosticStatus.ERROR if pipe.received else DiagnosticStatus.WARN
            status.message = 'no joint_states for 2 s' if pipe.received else 'waiting for joint_states'
        elif pipe.rejected and pipe.last_error and self.estimator.updates == 0:
            status.level = DiagnosticStatus.ERROR
            status.message = f'joint_states rejected: {pipe.last_error}'
        elif now - pipe.last_input_event_s < INPUT_WARN_S:
            status.level = DiagnosticStatus.WARN
            status.message = pipe.last_input_event
        elif state.singular:
            status.level = DiagnosticStatus.WARN
            status.message = 'near a singular shape: motion partly unobservable, covariance raised'
        elif state.slip_rms_m_s > self.slip_warn:
            status.level = DiagnosticStatus.WARN
            status.message = f'slip residual {state.slip_rms_m_s:.3f} m/s above {self.slip_warn:.3f} m/s'
        else:
            status.level = DiagnosticStatus.OK
            status.message = 'ok'
        c = pipe.counts()
        values = {
            'slip_rms_m_s': f'{state.slip_rms_m_s:.6g}',
            'slip_max_m_s': f'{float(np.max(np.abs(state.slip_residual), initial=0.0)):.6g}',
            'rank': str(state.rank),
            'rank_needed': str(state.rank_needed),
            'singular': str(bool(state.singular)).lower(),
            'contacts': str(int(np.count_nonzero(state.contacts))),
            'kernels': kernels_state(),
            **{k: str(c[k]) for k in ('received', 'imu_received', 'imu_gaps', 'imu_late', 'imu_bridged')},
            'gyro_bias_rad_s': ' '.join(f'{b:.5f}' for b in self.estimator.imu.bias),
            **{k: str(c[k]) for k in ('stale_held', 'held_for_imu', 'imu_timed_out', 'decimated', 'rejected',
                                      'stale_stamps')},
            **{f'input_{kind}': str(c[f'input_{kind}']) for kind in GATE_KINDS},
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
