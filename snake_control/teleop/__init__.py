"""Teleoperation, pure Python (no rclpy; teleop_node and gait_node are the shells).

- mapping: gamepad (sensor_msgs/Joy axes and buttons) -> velocity command, gait choice, e-stop,
  from a gamepad map in config/teleop/.
- script: scripted sessions, a YAML of timed gamepad states replayed as Joy.
- command_filter: cmd_vel validation, clamping, timeout and acceleration limits for the gait loop.
"""
