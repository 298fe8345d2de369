"""bringup_node: the in-process companion of `snake bringup`. Publishes the URDF on robot_description
(transient-local, as robot_state_publisher does) and follows odom, gait/state, joint_states and the
driver's /diagnostics (the driver runs in its own process) for the progress line and the summary."""
from __future__ import annotations

import math
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from snake_control.nodes.messages import header_stamp_s, odometry_pose_any
from snake_control.nodes.qos import DESCRIPTION_QOS, STATE_QOS


ODOM_STEP_M = 0.02


class BringupNode(Node):
    NODE_NAME = 'bringup'

    def __init__(self, robot: str, driver_node_name: str = 'driver_node', **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.odom_xy_yaw = None
        self.odom_distance_m = 0.0
        self._odom_sample = None        # (x, y) where the last path step ended
        self.gait = {}
        self.gait_since_s = None        # monotonic time of the first gait/state: the gait has started
        self.gaits_chosen: list = []    # target gaits in the order they were chosen
        self.joint_states = 0
        # A list here gets (receive monotonic s, stamp s) of every joint_states message, for benchmarks:
        # one subscription in the process measured rather than a second one of their own.
        self.joint_state_stamps: list | None = None
        self.description_pub = self.create_publisher(String, 'robot_description', DESCRIPTION_QOS)
        try:
            from snake_control.description import urdf_xml
            self.description_pub.publish(String(data=urdf_xml(robot)))
        except Exception as exc:  # the model is for viewers only: never stop the robot for it
            self.get_logger().warn(f'robot_description not published: {exc}')
        self.create_subscription(Odometry, 'odom', self._on_odom, STATE_QOS, raw=True)
        self.create_subscription(DiagnosticStatus, 'gait/state', self._on_gait, STATE_QOS)
        # odom and joint_states as bytes, not messages built from them: the pose is read from odom's, and
        # joint_states are counted only.
        self.create_subscription(JointState, 'joint_states', self._on_joints, STATE_QOS, raw=True)
        self.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)
        self.driver_bus: dict = {}          # the driver's bus status values (strings), latest
        self.driver_servos: dict = {}       # servo status name -> values (strings), latest
        self.driver_node_name = driver_node_name
        self.driver_cycles: list = []       # (received monotonic s, stamp s, cycles) of each bus status

    def driver_cycle_rate_hz(self, since_monotonic_s: float) -> float | None:
        """The driver's mean cycle rate between the first bus status received after since_monotonic_s and
        the last, from the statuses' own stamps and cycle counters (None with fewer than two)."""
        window = [(t, c) for r, t, c in self.driver_cycles if r >= since_monotonic_s]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return None
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])

    def _on_diagnostics(self, msg: DiagnosticArray):
        prefix = f'{self.driver_node_name}: '
        for st in msg.status:
            if not st.name.startswith(prefix):
                continue
            values = {kv.key: kv.value for kv in st.values}
            if st.name.startswith(prefix + 'bus'):
                self.driver_bus = values
                stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                cycles = _number(values.get('cycles', ''))
                if isinstance(cycles, int):
                    self.driver_cycles.append((time.monotonic(), stamp, cycles))
            else:
                self.driver_servos[st.name[len(prefix):]] = values

    def driver_diagnostics(self) -> dict:
        """The driver's last diagnostics in the shape of Driver.diagnostics(): figures as numbers,
        counters under 'counters', one dict per servo under 'servos'."""
        if not self.driver_bus:
            return {}
        plain = ('mode', 'read_mode', 'reply_failure_rate', 'cycle_rate_hz', 'rate_hz_target', 'jitter_p99_ms',
                 'baud')
        out = {k: _number(v) for k, v in self.driver_bus.items() if k in plain}
        out['counters'] = {k: _number(v) for k, v in self.driver_bus.items() if k not in plain}
        out['servos'] = [{k: _number(v) for k, v in values.items()} | {'name': name}
                         for name, values in self.driver_servos.items()]
        return out

    def _on_odom(self, data: bytes):
        x, y, _, qx, qy, qz, qw = odometry_pose_any(data)
        yaw = math.atan2(2.0 * (qw * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz))
        self.odom_xy_yaw = (x, y, yaw)
        # Path length in steps of at least ODOM_STEP_M: the base frame's wiggle within a gait cycle is not
        # travel, and summing every 100 Hz sample would count it.
        if self._odom_sample is None:
            self._odom_sample = (x, y)
        step = math.hypot(x - self._odom_sample[0], y - self._odom_sample[1])
        if step >= ODOM_STEP_M:
            self.odom_distance_m += step
            self._odom_sample = (x, y)

    def _on_gait(self, msg: DiagnosticStatus):
        if self.gait_since_s is None:
            self.gait_since_s = time.monotonic()
        self.gait = {kv.key: kv.value for kv in msg.values}
        self.gait['_message'] = msg.message
        target = self.gait.get('target_gait')
        if target and (not self.gaits_chosen or self.gaits_chosen[-1] != target):
            self.gaits_chosen.append(target)

    def _on_joints(self, data: bytes):
        self.joint_states += 1
        if self.joint_state_stamps is not None:
            self.joint_state_stamps.append((time.monotonic(), header_stamp_s(data)))

    def status_line(self, t_s: float) -> str:
        odom = 'odom: none yet' if self.odom_xy_yaw is None else \
            'odom x {:+.3f} m y {:+.3f} m yaw {:+.1f} deg'.format(
                self.odom_xy_yaw[0], self.odom_xy_yaw[1], math.degrees(self.odom_xy_yaw[2]))
        g = self.gait
        gait = g.get('_message', 'gait: no state yet')
        cmd = 'cmd x {:+.3f} y {:+.3f} m/s turn {:+.2f} rad/s'.format(
            float(g.get('command_forward_m_s', 0)), float(g.get('command_sideways_m_s', 0)),
            float(g.get('command_turn_rad_s', 0))) if g else ''
        return f'[{t_s:6.1f} s] {gait} | {cmd} | {odom} | joint_states {self.joint_states}'


def _number(text: str):
    """A diagnostics value back as int or float where it is one."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            pass
    return text
