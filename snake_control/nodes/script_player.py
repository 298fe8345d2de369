"""script_player: replays a scripted teleop session (snake_control.teleop.script) as sensor_msgs/Joy on
`joy`, so the whole graph runs without a gamepad. Used in-process by `snake bringup --script`.

Parameters (read-only): script (path to the YAML). `done` is set when the script's duration has passed.
"""
from __future__ import annotations

import threading
import time

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Joy

from snake_control.nodes.qos import COMMAND_QOS
from snake_control.teleop.script import ScriptClock, load_script


class ScriptPlayer(Node):
    NODE_NAME = 'script_player'

    def __init__(self, script=None, **kwargs):
        super().__init__(kwargs.pop('node_name', self.NODE_NAME), **kwargs)
        self.declare_parameter('script', '', ParameterDescriptor(
            description='teleop script YAML (see config/scripts)', read_only=True))
        self.script = script if script is not None else load_script(self.get_parameter('script').value)
        self.clock = ScriptClock(self.script)
        self.done = threading.Event()
        self.started_s = None
        self.sent = 0
        self.sent_log = []          # (monotonic time just before publishing, event index)
        self.joy_pub = self.create_publisher(Joy, 'joy', COMMAND_QOS)
        self.create_timer(1.0 / self.script.rate_hz, self._on_timer,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))

    def start(self, at_s: float | None = None):
        """Start the script clock now (or at monotonic time at_s); until then nothing is sent."""
        self.started_s = time.monotonic() if at_s is None else at_s

    def elapsed_s(self) -> float:
        return 0.0 if self.started_s is None else time.monotonic() - self.started_s

    def _on_timer(self):
        if self.started_s is None or self.done.is_set():
            return
        t = self.elapsed_s()
        if self.clock.finished(t):
            self.done.set()
            return
        joy = self.clock.joy_at(t)
        if joy is None:
            return
        msg = Joy(axes=joy[0], buttons=joy[1])
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = 'script'
        self.sent_log.append((time.monotonic(), self.script.event_index_at(t)))
        self.joy_pub.publish(msg)
        self.sent += 1
