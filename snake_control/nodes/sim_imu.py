"""The MuJoCo world's IMU on `imu` (sensor_msgs/Imu), published from the emulated bus's process.

The world lives in the servo-bus emulator's process (snake_control.physics.servo_plant); this module is
that process's plant factory for `--physics mujoco` in the graph: the same MujocoPlant, plus a small node
``sim_imu`` that publishes every reading of the world's IMU (100 Hz of simulated time: gyro and
accelerometer of the IMU link with their noise and bias, PhysicsOptions) as a real IMU driver would:
stamped with the ROS clock at the time the reading was taken (the plant steps the world in ticks; a tick
that spans several readings publishes them after it, each stamped back by its simulated age from the
instant the tick began, which it brought the world up to), frame ``link_<k>`` of the IMU link, no orientation (orientation_covariance[0] = -1: the
estimator fuses the raw rates and forces itself).

The namespace comes from SNAKE_SIM_IMU_NAMESPACE (bringup and the launch file set it to the graph's).
Without rclpy the plant runs without publishing and says so once.
"""
from __future__ import annotations

import atexit
import os
import sys

from snake_control.nodes.messages import ros_ns_at
from snake_control.physics.mjcf import imu_link_index
from snake_control.physics.servo_plant import mujoco_plant as physics_plant

NAMESPACE_ENV = 'SNAKE_SIM_IMU_NAMESPACE'
# Per-axis variances for the message: the world's default noise (PhysicsOptions) squared.
GYRO_VARIANCE = 0.002 ** 2
ACCEL_VARIANCE = 0.03 ** 2


class ImuPublisher:
    """A node of its own context publishing sensor_msgs/Imu on `imu`; ``publish`` may be called from
    any thread (the plant's stepping thread)."""

    def __init__(self, frame_id: str, namespace: str = ''):
        import rclpy
        from sensor_msgs.msg import Imu

        from snake_control.nodes.qos import SENSOR_QOS, choose_dds_transport

        choose_dds_transport()
        self._context = rclpy.Context()
        rclpy.init(context=self._context)
        self.node = rclpy.create_node('sim_imu', namespace=namespace or '', context=self._context)
        self._pub = self.node.create_publisher(Imu, 'imu', SENSOR_QOS)
        self._msg_type = Imu
        self.frame_id = frame_id
        self.published = 0
        atexit.register(self.close)

    def now_ns(self) -> int:
        """The ROS clock (ns)."""
        return self.node.get_clock().now().nanoseconds

    def ns_at(self, monotonic_s: float) -> int:
        """The ROS clock (ns) at an instant of time.monotonic() (s) (messages.ros_ns_at)."""
        return ros_ns_at(self.node.get_clock(), monotonic_s)

    def publish(self, sim_time_s: float, gyro_rad_s, accel_m_s2, age_s: float = 0.0,
                now_ns: int | None = None) -> None:
        """Publish one reading, stamped now (or now_ns, ns on the ROS clock) less age_s (s): how much
        simulated time has passed since it was taken (a tick that spans several readings publishes them
        together after it)."""
        msg = self._msg_type()
        stamp_ns = (self.now_ns() if now_ns is None else int(now_ns)) - int(round(max(age_s, 0.0) * 1e9))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        msg.header.frame_id = self.frame_id
        msg.orientation_covariance[0] = -1.0
        av, la = msg.angular_velocity, msg.linear_acceleration
        av.x, av.y, av.z = (float(v) for v in gyro_rad_s)
        la.x, la.y, la.z = (float(v) for v in accel_m_s2)
        for k in (0, 4, 8):
            msg.angular_velocity_covariance[k] = GYRO_VARIANCE
            msg.linear_acceleration_covariance[k] = ACCEL_VARIANCE
        self._pub.publish(msg)
        self.published += 1

    def close(self) -> None:
        if self._context.ok():
            self.node.destroy_node()
            self._context.try_shutdown()


def mujoco_plant(ids, models_by_id, robot=None):
    """The emulator's plant factory: physics.servo_plant.mujoco_plant with the IMU published."""
    plant = physics_plant(ids, models_by_id, robot)
    try:
        publisher = ImuPublisher(f'link_{imu_link_index(plant.robot, plant.world.options)}',
                                 os.environ.get(NAMESPACE_ENV, ''))
    except ImportError as exc:
        print(f'sim_imu: rclpy not available ({exc}): the world runs without publishing its IMU',
              file=sys.stderr)
        return plant
    world = plant.world
    tick = {'sim_s': None, 'now_ns': 0}

    def on_imu(t, gyro, accel):
        # A tick's readings are stamped back from where the tick began (it brought the world up to that
        # instant), one clock reading for them all. Read per reading after the stepping, the clock ran on
        # with the stepping and with each publish (a few ms each on a loaded host): a tick's readings came
        # out spread wider than the 10 ms they were taken apart, and the next tick's stamped before them
        # (11-80 per demo run, up to 79 ms back; the estimator drops those and turns the ones before over
        # the stretched intervals: one such burst turned its heading 11 deg).
        if tick['sim_s'] != world.time_s:
            tick['sim_s'] = world.time_s
            tick['now_ns'] = publisher.ns_at(plant.tick_started_s)
        publisher.publish(t, gyro, accel, age_s=world.time_s - t, now_ns=tick['now_ns'])

    plant.on_imu = on_imu
    return plant
