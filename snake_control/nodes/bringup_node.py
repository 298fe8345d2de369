"""bringup_node: the in-process companion of `snake bringup`. Publishes the URDF on robot_description
(transient-local, as robot_state_publisher does) and follows odom, gait/state and joint_states for the
progress line."""
from __future__ import annotations

import math

from diagnostic_msgs.msg import DiagnosticStatus
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from snake_control.nodes.qos import DESCRIPTION_QOS, STATE_QOS


class BringupNode(Node):
    NODE_NAME = 'bringup'

    def __init__(self, robot: str, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.odom_xy_yaw = None
        self.gait = {}
        self.joint_states = 0
        self.description_pub = self.create_publisher(String, 'robot_description', DESCRIPTION_QOS)
        try:
            from snake_control.description import urdf_xml
            self.description_pub.publish(String(data=urdf_xml(robot)))
        except Exception as exc:  # the model is for viewers only: never stop the robot for it
            self.get_logger().warn(f'robot_description not published: {exc}')
        self.create_subscription(Odometry, 'odom', self._on_odom, STATE_QOS)
        self.create_subscription(DiagnosticStatus, 'gait/state', self._on_gait, STATE_QOS)
        self.create_subscription(JointState, 'joint_states', self._on_joints, STATE_QOS)

    def _on_odom(self, msg: Odometry):
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        self.odom_xy_yaw = (p.x, p.y, yaw)

    def _on_gait(self, msg: DiagnosticStatus):
        self.gait = {kv.key: kv.value for kv in msg.values}
        self.gait['_message'] = msg.message

    def _on_joints(self, msg: JointState):
        self.joint_states += 1

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
