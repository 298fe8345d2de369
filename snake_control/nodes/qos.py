"""QoS profiles of the snake_control topics, chosen per stream (docs/architecture.md), for every node.

Commands and states are reliable and shallow (the newest value is the one that matters; reliable so
robot_state_publisher and RViz, which subscribe reliably, can hear them). The e-stop is published
reliable and transient-local, and teleop repeats an engaged e-stop every ESTOP_REPEAT_S, so a node that
starts late still learns that the robot is stopped. An e-stop subscriber must hear every publisher,
whatever QoS it offers (`ros2 topic pub` offers volatile, a microcontroller may offer best-effort):
ESTOP_SUB_QOS is best-effort and volatile, which DDS matches with every publisher. (A second,
transient-local subscription for latched messages would deliver each message twice in an order that
rclpy's events executor cannot reconcile: a late duplicate of a stop could undo a release, or of a
release undo a stop.) Gamepads are sensor data: best-effort subscription, which also matches
joy_node's reliable publisher, 100 deep so a press is not lost to a busy executor. The estimator reads
joint_states and imu best-effort (it wants the newest sample, and matches any publisher); diagnostics are
reliable, depth 10.
"""
import os

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
# Streams where every message counts (joint_states for the estimator): rclpy's events executor, under
# load, lost about 8 % of a 100 Hz stream on subscriptions 5 or 10 deep with no gap over 30 ms in its
# callbacks; 100 deep (1 s of it) lost none. Publishers keep their own shallow queues.
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.VOLATILE)
ESTOP_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
ESTOP_SUB_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                           reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE)
ESTOP_REPEAT_S = 0.5
# robot_description: latched, so RViz and robot_state_publisher get it whenever they start.
DESCRIPTION_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
# joy: best effort like a sensor, but deep: an executor that catches up after a busy quarter second must
# still see a button pressed in it (joy_node sends 20-50 messages a second), not only the last five.
JOY_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.BEST_EFFORT,
                     durability=DurabilityPolicy.VOLATILE)
SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.VOLATILE)
DIAGNOSTICS_QOS = COMMAND_QOS

# Fast DDS's shared-memory transport can hold a publish for about a third of a second while it opens a
# port to a peer (its health check of the new port waits out its timeout), and rclpy holds the interpreter
# lock through the publish. Measured in the MuJoCo graph: one publish of the world's IMU took 332 ms, the
# world's process stopped (the emulated bus with it), and 7 servos' bus watchdogs tripped; the driver
# publishes joint_states from its bus loop, which such a publish would stop the same way. The package's
# processes use Fast DDS's UDP transport on the host instead, unless the user chose a transport; peers that
# keep the default transports (ros2 topic, RViz) still talk to them over UDP. Other DDS vendors ignore it.
DDS_TRANSPORT_ENV = 'FASTDDS_BUILTIN_TRANSPORTS'
DDS_TRANSPORT = 'UDPv4'


def choose_dds_transport(environ=None) -> str:
    """Set DDS_TRANSPORT_ENV to DDS_TRANSPORT unless it is set (call before rclpy.init, and before starting
    processes that should inherit it); returns the transport in force."""
    environ = os.environ if environ is None else environ
    if not environ.get(DDS_TRANSPORT_ENV, '').strip():
        environ[DDS_TRANSPORT_ENV] = DDS_TRANSPORT
    return environ[DDS_TRANSPORT_ENV]
