"""The estimator over a recording's inputs, as estimator_node runs it (pure: arrays in, a pose track out).

estimator_node hands each joint_states and imu message it receives to an EstimatorPipeline
(snake_control.estimation.pipeline: its input gate, update-rate decimation and, with an IMU, the StampOrder
before the Estimator) and publishes one odom message per estimator update, stamped with the joint_states
stamp it used. ``replay_estimator`` runs the same pipeline over the messages in the order a recorder
received them (its log time stands for the node's receive time). Messages are lost per subscriber (both
topics are best effort): a recording holds what the recorder received, not what the estimator did, so the
replay equals the recorded odom only as far as the two received the same messages; ``compare_tracks``
measures that on the odom stamps.

``read_estimator_inputs`` takes those arrays out of an MCAP recording (snake_control.mcap_io).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from snake_control.estimation.estimator import Estimator
from snake_control.estimation.pipeline import ESTIMATE_PARAMETERS, EstimatorParams, EstimatorPipeline
from snake_control.kinematics.lie import se2_relative, yaw_from_quaternion

# estimator_node's parameters that shape the estimate, at their defaults (EstimatorParams), body_frame and
# axial_weight None for the robot's own.
NODE_DEFAULTS = EstimatorParams().estimate_settings()
# The node's timer flushes joint readings left waiting for the IMU every this many seconds of wall time.
ORDER_FLUSH_PERIOD_S = 0.05


@dataclass
class EstimatorInputs:
    """What estimator_node subscribes to, in the robot's joint order.

    joints_t_s (J,) header stamps (s; the receive time where a header is zero), joints_received_s (J,)
    receive times (s, the recording's log time), positions_rad (J, n), velocities_rad_s (J, n) with NaN
    rows where a message had none. imu_t_s (I,), imu_received_s (I,), and per reading the fields the node
    uses, NaN where the message marks them absent (covariance[0] = -1): imu_orientation_xyzw (I, 4),
    imu_rate_rad_s (I, 3), imu_accel_m_s2 (I, 3). odom_t_s (K,) and odom_xyz_quat (K, 7): the recorded
    odometry (the estimate the graph published), when the recording has it. topics: where each came from.
    """

    joints_t_s: np.ndarray
    joints_received_s: np.ndarray
    positions_rad: np.ndarray
    velocities_rad_s: np.ndarray
    imu_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    imu_received_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    imu_orientation_xyzw: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    imu_rate_rad_s: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    imu_accel_m_s2: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    odom_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    odom_xyz_quat: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))
    topics: dict = field(default_factory=dict)
    rejected: int = 0       # joint_states whose joint names are not the robot's (the node rejects them)


@dataclass
class ReplayTrack:
    """The replay's odometry: one pose per estimator update, as the node publishes them (publish_rate_hz
    0): t_s (k,) the joint_states stamp, pose_xyz_quat (k, 7) the body frame in odom (m, unit quaternion);
    the estimator at the end, and the node's counters (its /diagnostics names)."""

    t_s: np.ndarray
    pose_xyz_quat: np.ndarray
    estimator: Estimator
    counts: dict

    @property
    def xyyaw(self) -> np.ndarray:
        """(k, 3): x m, y m, yaw rad about the odom z axis."""
        return xyyaw_from_xyz_quat(self.pose_xyz_quat)


def xyyaw_from_xyz_quat(poses) -> np.ndarray:
    """(k, 3) x m, y m, yaw rad of poses (k, 7) x, y, z, qx, qy, qz, qw."""
    p = np.asarray(poses, dtype=float).reshape(-1, 7)
    return np.column_stack((p[:, 0], p[:, 1], yaw_from_quaternion(*p[:, 3:7].T)))


def replay_estimator(robot, inputs: EstimatorInputs, *, use_imu: bool | None = None, updates_at=None,
                     **settings) -> ReplayTrack:
    """Run the Estimator over inputs exactly as estimator_node would have received them.

    use_imu: fuse the imu readings (None: when the inputs have any). settings: the node's parameters that
    shape the estimate (ESTIMATE_PARAMETERS: update_rate_hz, limit_margin_rad, max_stamp_ahead_s,
    body_frame, imu_link, imu_gap_s, imu_attitude_s, axial_weight; the node's defaults otherwise), and
    any other Estimator keyword (e.g. contact_enter_m, contact_exit_m, to try them). Every update is kept
    (the node's publish_rate_hz 0). updates_at: stamps (s) to update on instead of the update rate's
    choice (EstimatorPipeline.follow_updates; a recording's odom stamps).
    """
    use_imu = bool(len(inputs.imu_t_s)) if use_imu is None else bool(use_imu)
    node = {name: settings.pop(name) for name in ESTIMATE_PARAMETERS if name in settings}
    params = EstimatorParams(**{**node, 'use_imu': use_imu, 'publish_rate_hz': 0.0})
    out_t, out_pose = [], []

    def publish(stamp, state, q):
        out_t.append(stamp)
        out_pose.append(state.pose_xyz_quat)

    pipe = EstimatorPipeline(robot, params, publish=publish, **settings)
    if updates_at is not None:
        pipe.follow_updates(updates_at)
    names = pipe.joint_names
    # The node's two callbacks, in the order the messages were received (joint_states first on a tie,
    # as a recorder writes a message before the next one it receives).
    events = [(t, 0, k) for k, t in enumerate(inputs.joints_received_s)]
    if use_imu:
        events += [(t, 1, k) for k, t in enumerate(inputs.imu_received_s)]
    events.sort()
    for now, kind, k in events:
        if use_imu:
            # The node's flush timer, at its latest: its tick comes up to one period after hold_s ran out.
            pipe.flush(now - ORDER_FLUSH_PERIOD_S)
        if kind == 1:
            # NaN marks a field the message had not (its covariance[0] = -1).
            fields = (inputs.imu_orientation_xyzw[k], inputs.imu_rate_rad_s[k], inputs.imu_accel_m_s2[k])
            pipe.imu(inputs.imu_t_s[k], now, *(None if np.isnan(f).any() else f for f in fields))
            continue
        v = inputs.velocities_rad_s[k]
        pipe.joint_states(float(inputs.joints_t_s[k]), now, names, inputs.positions_rad[k],
                          None if np.isnan(v).any() else v)
    if use_imu:
        pipe.flush()
    counts = pipe.counts()
    counts['rejected'] += inputs.rejected
    return ReplayTrack(np.asarray(out_t, dtype=float), np.asarray(out_pose, dtype=float).reshape(-1, 7),
                       pipe.estimator, counts)


IMU_TYPE = 'sensor_msgs/msg/Imu'
ODOMETRY_TYPE = 'nav_msgs/msg/Odometry'


def _stamp_s(header) -> float:
    return header.stamp.sec + 1e-9 * header.stamp.nanosec


def read_estimator_inputs(path, robot, topic: str | None = None, imu_topic: str | None = None,
                          odom_topic: str | None = None) -> EstimatorInputs:
    """The estimator's inputs (and the recorded odometry) from an MCAP recording.

    topic: the sensor_msgs/JointState topic (default: the one named joint_states, the robot's in a file
    with several; snake_control.mcap_io.joint_states_topic). imu_topic, odom_topic: default the imu
    (sensor_msgs/Imu) and odom (nav_msgs/Odometry) beside it, when the file has them. ValueError naming
    the file and the topic when there is no such topic or fewer than two joint_states.
    """
    from pathlib import Path

    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from snake_control.mcap_io import joint_states_topic, type_name
    from snake_control.robot import joint_index

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no such .mcap file')
    names = list(robot.joint_names)
    n = len(names)
    joints, imu, odom = [], [], []
    rejected = 0
    with path.open('rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        topic = joint_states_topic(path, reader, names, topic)
        summary = reader.get_summary()
        types = {c.topic: type_name(summary.schemas[c.schema_id].name) for c in summary.channels.values()
                 if c.schema_id in summary.schemas}
        namespace = topic[:-len('joint_states')] if topic.endswith('joint_states') else '/'
        for given, default, wanted, what in ((imu_topic, namespace + 'imu', IMU_TYPE, 'imu'),
                                             (odom_topic, namespace + 'odom', ODOMETRY_TYPE, 'odom')):
            if given is not None and types.get(given) != wanted:
                raise ValueError(f'{path}: no {wanted} topic {given!r} (have {sorted(types)})')
        imu_topic = imu_topic or (namespace + 'imu' if types.get(namespace + 'imu') == IMU_TYPE else None)
        odom_topic = odom_topic or (namespace + 'odom' if types.get(namespace + 'odom') == ODOMETRY_TYPE
                                    else None)
        index = None
        wanted_topics = [t for t in (topic, imu_topic, odom_topic) if t]
        for _, channel, message, msg in reader.iter_decoded_messages(topics=wanted_topics):
            received = message.log_time * 1e-9
            if channel.topic == topic:
                stamp = _stamp_s(msg.header)
                position = np.asarray(msg.position, dtype=float)
                message_names = list(msg.name)
                if index is None or message_names != index[1]:
                    try:
                        index = (joint_index(message_names, names), message_names)
                    except ValueError:
                        rejected += 1       # the node rejects a message without the robot's joints
                        index = None
                        continue
                if len(position) != len(message_names):
                    rejected += 1
                    continue
                velocity = np.asarray(msg.velocity, dtype=float)
                velocity = velocity[index[0]] if len(velocity) == len(message_names) else np.full(n, np.nan)
                joints.append((stamp if stamp > 0.0 else received, received, position[index[0]], velocity))
            elif channel.topic == imu_topic:
                q, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
                nan = (math.nan,) * 4
                imu.append((_stamp_s(msg.header), received,
                            nan if msg.orientation_covariance[0] == -1.0 else (q.x, q.y, q.z, q.w),
                            nan[:3] if msg.angular_velocity_covariance[0] == -1.0 else (w.x, w.y, w.z),
                            nan[:3] if msg.linear_acceleration_covariance[0] == -1.0 else (a.x, a.y, a.z)))
            else:
                p, o = msg.pose.pose.position, msg.pose.pose.orientation
                odom.append((_stamp_s(msg.header), p.x, p.y, p.z, o.x, o.y, o.z, o.w))
    if len(joints) < 2:
        raise ValueError(f'{path}: {topic}: needs at least two joint_states messages with the joints of '
                         f'{robot.name}, found {len(joints)}')
    out = EstimatorInputs(np.array([j[0] for j in joints]), np.array([j[1] for j in joints]),
                          np.array([j[2] for j in joints]), np.array([j[3] for j in joints]),
                          topics={'joint_states': topic, 'imu': imu_topic, 'odom': odom_topic},
                          rejected=rejected)
    if imu:
        out.imu_t_s, out.imu_received_s = np.array([r[0] for r in imu]), np.array([r[1] for r in imu])
        out.imu_orientation_xyzw = np.array([r[2] for r in imu], dtype=float)
        out.imu_rate_rad_s = np.array([r[3] for r in imu], dtype=float)
        out.imu_accel_m_s2 = np.array([r[4] for r in imu], dtype=float)
    if odom:
        a = np.array(odom)
        out.odom_t_s, out.odom_xyz_quat = a[:, 0], a[:, 1:]
    return out


@dataclass(frozen=True)
class TrackDifference:
    """A replay against the recorded odometry at the stamps both have (the node stamps each odom message
    with the joint_states stamp it used): common (count), recorded_only (odom stamps the replay has not:
    joint_states the estimator received and the recorder lost, or another decimation), replay_only;
    over the common stamps, each track relative to its own pose at the first: the largest and the last
    position difference (m), the largest heading difference (deg)."""

    common: int
    recorded_only: int
    replay_only: int
    max_position_m: float
    end_position_m: float
    max_heading_deg: float


def compare_tracks(replay_t_s, replay_xyyaw, recorded_t_s, recorded_xyyaw) -> TrackDifference:
    """TrackDifference of a replay (times (k,), poses (k, 3) x m, y m, yaw rad) and the recorded odometry
    (times (m,), poses (m, 3)), matched on equal stamps (within a microsecond)."""
    a_t, b_t = np.asarray(replay_t_s, dtype=float), np.asarray(recorded_t_s, dtype=float)
    a_p, b_p = np.asarray(replay_xyyaw, dtype=float), np.asarray(recorded_xyyaw, dtype=float)
    a_key, b_key = np.round(a_t * 1e6).astype(np.int64), np.round(b_t * 1e6).astype(np.int64)
    common, ia, ib = np.intersect1d(a_key, b_key, return_indices=True)
    if len(common) == 0:
        return TrackDifference(0, len(np.unique(b_key)), len(np.unique(a_key)), math.nan, math.nan, math.nan)
    ra, rb = se2_relative(a_p[ia], a_p[ia][0]), se2_relative(b_p[ib], b_p[ib][0])
    gap = np.hypot(ra[:, 0] - rb[:, 0], ra[:, 1] - rb[:, 1])
    dyaw = np.degrees(np.abs(np.angle(np.exp(1j * (ra[:, 2] - rb[:, 2])))))
    return TrackDifference(len(common), len(np.setdiff1d(b_key, a_key)), len(np.setdiff1d(a_key, b_key)),
                           float(gap.max()), float(gap[-1]), float(dyaw.max()))
