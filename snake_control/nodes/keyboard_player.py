"""keyboard_player: publishes a KeyboardPad's gamepad state (snake_control.teleop.keyboard) as
sensor_msgs/Joy on `joy`, at the rate joy_node autorepeats, while the pad has something to say. Used
in-process by `snake bringup` when the keyboard is the gamepad; the keys come from the terminal reader
(snake_control.app.keyboard).
"""
from __future__ import annotations

import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Joy

from snake_control.nodes.qos import COMMAND_QOS

RATE_HZ = 20.0      # joy_node's autorepeat_rate: teleop's 0.5 s joystick timeout never fires while held


class KeyboardPlayer(Node):
    NODE_NAME = 'keyboard_player'

    def __init__(self, pad, rate_hz: float = RATE_HZ, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.pad = pad
        self.sent = 0
        self.joy_pub = self.create_publisher(Joy, 'joy', COMMAND_QOS)
        # Steady clock: the pad's key times are monotonic, and sim time must not stop the keyboard.
        self.create_timer(1.0 / rate_hz, self._on_timer, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _on_timer(self):
        joy = self.pad.joy_at(time.monotonic())
        if joy is None:
            return
        msg = Joy(axes=joy[0], buttons=joy[1])
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = 'keyboard'
        self.joy_pub.publish(msg)
        self.sent += 1
