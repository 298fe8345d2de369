"""QoS profiles of the snake_control topics, chosen per stream (ARCHITECTURE.md).

Commands and states are reliable and shallow (the newest value is the one that matters; reliable so
robot_state_publisher and RViz, which subscribe reliably, can hear them). The e-stop is reliable and
transient-local: a node that starts late still learns that the robot is stopped. Gamepads are sensor
data: best-effort subscription, which also matches joy_node's reliable publisher.
"""
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
STATE_QOS = COMMAND_QOS
ESTOP_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
JOY_QOS = qos_profile_sensor_data
