"""teleop_node: a gamepad (sensor_msgs/Joy on `joy`) drives the snake.

Publishes cmd_vel (geometry_msgs/Twist), gait/select (std_msgs/String) and estop (std_msgs/Bool,
transient-local). The mapping (deadman, axes, speed scales, gait buttons, latched e-stop and its release
combination, joystick timeout) is snake_control.teleop.mapping.TeleopMapper, configured by a YAML in
config/teleop/ (parameter `teleop`: a shipped name such as xbox or playstation, or a path).

Parameters (read-only: they are read once at start):
  robot (string)           robot YAML name or path, for the graph's uniformity; unused here
  teleop (string)          gamepad map, default xbox
  gait_cycle (string[])    gaits the next/previous buttons cycle through; empty: the map's gaits.cycle
  timeout_check_hz (double) how often the joystick timeout is checked
"""
from __future__ import annotations

import time

from geometry_msgs.msg import Twist
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, ParameterType
from rclpy.node import Node
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool, String

from snake_control.nodes.qos import COMMAND_QOS, ESTOP_QOS, ESTOP_REPEAT_S, JOY_QOS
from snake_control.nodes.runner import run_node
from snake_control.teleop.mapping import TeleopMapper, load_teleop_config


class TeleopNode(Node):
    NODE_NAME = 'teleop_node'

    def __init__(self, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.declare_parameter('robot', 'pitch_yaw_32', ParameterDescriptor(
            description='robot YAML name or path (unused by teleop)', read_only=True))
        self.declare_parameter('teleop', 'xbox', ParameterDescriptor(
            description='gamepad map: xbox, playstation or a path to a teleop YAML', read_only=True))
        self.declare_parameter('gait_cycle', [''], ParameterDescriptor(
            type=ParameterType.PARAMETER_STRING_ARRAY, read_only=True,
            description='gaits the next/previous buttons cycle through (empty: the map\'s gaits.cycle)'))
        self.declare_parameter('timeout_check_hz', 20.0, ParameterDescriptor(
            description='rate of the joystick-timeout check (Hz)', read_only=True,
            floating_point_range=[FloatingPointRange(from_value=1.0, to_value=200.0)]))

        config = load_teleop_config(self.get_parameter('teleop').value)
        cycle = [g for g in self.get_parameter('gait_cycle').value if g]
        self.mapper = TeleopMapper(config, cycle or None)

        self.cmd_pub = self.create_publisher(Twist, 'cmd_vel', COMMAND_QOS)
        self.gait_pub = self.create_publisher(String, 'gait/select', COMMAND_QOS)
        self.estop_pub = self.create_publisher(Bool, 'estop', ESTOP_QOS)
        self.create_timer(1.0 / self.get_parameter('timeout_check_hz').value, self._on_timer)
        # An engaged e-stop is repeated, so a node that starts (or restarts) late hears it too.
        self.create_timer(ESTOP_REPEAT_S, self._repeat_estop)
        # Subscription last: no Joy is handled before every publisher exists.
        self.create_subscription(Joy, 'joy', self._on_joy, JOY_QOS)
        self.get_logger().info(f'gamepad map {config.name} ({config.source}); hold the deadman to move; '
                               f'gaits {", ".join(self.mapper.gait_cycle)}')

    def _publish(self, out):
        if out.estop is not None:
            self.estop_pub.publish(Bool(data=out.estop))
            if out.estop:
                self.get_logger().warn('E-STOP engaged from the gamepad '
                                       '(latched until the release combination)')
            else:
                self.get_logger().info('e-stop released from the gamepad')
        if out.gait is not None:
            self.gait_pub.publish(String(data=out.gait))
        if out.twist is not None:
            msg = Twist()
            msg.linear.x, msg.linear.y, msg.angular.z = out.twist
            self.cmd_pub.publish(msg)

    def _repeat_estop(self):
        if self.mapper.estopped:
            self.estop_pub.publish(Bool(data=True))

    def _on_joy(self, msg: Joy):
        self._publish(self.mapper.update(list(msg.axes), list(msg.buttons), time.monotonic()))

    def _on_timer(self):
        self._publish(self.mapper.tick(time.monotonic()))


def main(args=None):
    return run_node(TeleopNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
