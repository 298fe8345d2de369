"""Ground truth in a recording: the MuJoCo pose of every link as a second TF tree, truth/link_0..truth/link_n.

The plant writes its links' poses with the wall clock (snake_control.physics.servo_plant, SNAKE_PHYSICS_TRUTH_LINKS);
after the session they are added to the MCAP on /truth/tf, each message holding odom -> truth/world and
truth/world -> truth/link_k. odom -> truth/world puts the true body frame on the estimated one at the first
odometry message (the robot is still then), as the demo's comparison does, so from there on the two trees
drift apart exactly as far as the estimate is wrong. The alignment is level (a turn about the vertical and
a shift): the virtual chassis of a body lying straight has no roll of its own, so the estimated and the true
chassis may differ by any turn about their x axis there, and laying one on the other in 3D tilted the true
world's floor in odom (18.6 degrees in two of five demo sessions), which shrank the true planar motion
across the tilt by cos 18.6 (5 %) and made the replay's figures disagree with the demo's. Recordings made
with such a tilted alignment are levelled when read back (read_truth_tree). The truth/link_k frames are the URDF's link frames, so
a second copy of the model can be drawn on them (Foxglove's URDF layer with frame prefix truth/).
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

TRUTH_TOPIC = '/truth/tf'
TRUTH_PREFIX = 'truth/'


def read_truth_links(path, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """The plant's links CSV: (t_wall_s (k,), link-centre poses (k, n_links, 4, 4) in the world, m).
    Lines cut short (the plant stopped while writing) are skipped."""
    from snake_control.kinematics.lie import matrix_from_quaternion

    times, poses = [], []
    with open(path, newline='') as f:
        rows = csv.reader(f)
        next(rows, None)
        for row in rows:
            if len(row) != 2 + 7 * n_links:
                continue
            try:
                values = np.array([float(v) for v in row])
            except ValueError:
                continue
            frames = np.tile(np.eye(4), (n_links, 1, 1))
            for k in range(n_links):
                x = values[2 + 7 * k: 9 + 7 * k]
                frames[k, :3, 3] = x[:3]
                frames[k, :3, :3] = matrix_from_quaternion(x[3:])
            times.append(values[0])
            poses.append(frames)
    if not times:
        raise ValueError(f'{path}: no complete ground-truth rows')
    return np.array(times), np.array(poses)


def alignment(odom_body_pose, true_body_pose) -> np.ndarray:
    """odom -> truth/world (4x4): the level transform (a turn about z and a shift) that lays the true body
    pose (world, 4x4) on the estimated one (odom, 4x4) at one instant: the same origin, and the same heading
    of the x axis on the floor; the world's vertical stays odom's (see the module docstring)."""
    from snake_control.kinematics.lie import xyyaw_from_se3

    odom, true = np.asarray(odom_body_pose, dtype=float), np.asarray(true_body_pose, dtype=float)
    turn = float(xyyaw_from_se3(odom)[2] - xyyaw_from_se3(true)[2])
    c, s = np.cos(turn), np.sin(turn)
    out = np.eye(4)
    out[:2, :2] = [[c, -s], [s, c]]
    out[:3, 3] = odom[:3, 3] - out[:3, :3] @ true[:3, 3]
    return out


def truth_messages(robot, t_wall_s, centre_poses, odom_t_s: float, odom_body_pose, odom_frame='odom'):
    """[(log_time_ns, TFMessage dict)] of the truth tree, aligned at the odometry instant odom_t_s."""
    from snake_control.estimation.estimator import BodyFrameTracker
    from snake_control.kinematics.tf_tree import link_name, urdf_frames_from_centres
    from snake_control.mcap_io import tf_message

    k0 = int(np.argmin(np.abs(np.asarray(t_wall_s) - odom_t_s)))
    tracker = BodyFrameTracker(robot)
    for k in range(k0 + 1):   # the tracker keeps the virtual chassis' axes continuous from the start
        body = tracker(centre_poses[k])
    align = alignment(odom_body_pose, body)
    world = TRUTH_PREFIX + 'world'
    out = []
    for t, centres in zip(t_wall_s, centre_poses):
        frames = urdf_frames_from_centres(centres, robot.link_lengths_m)
        transforms = [(odom_frame, world, align)] + [(world, link_name(j, TRUTH_PREFIX), frames[j])
                                                      for j in range(len(frames))]
        out.append((int(round(t * 1e9)), tf_message(float(t), transforms)))
    return out


def add_truth_tree(record_path, links_csv, robot) -> int:
    """Add the truth tree to a recording (see the module docstring); returns the messages added, 0 when
    the recording has no odometry to align to."""
    from snake_control.kinematics.lie import matrix_from_quaternion
    from snake_control.mcap_io import TF_MESSAGE_MSGDEF, TF_MESSAGE_TYPE, add_messages, ros2_messages
    from snake_control.robot import load_robot

    robot = load_robot(robot) if isinstance(robot, (str, Path)) else robot
    first = None
    for m in ros2_messages(record_path):
        if m.channel.topic.rstrip('/').endswith('/odom') and m.schema.name.endswith('Odometry'):
            first = m.ros_msg
            break
    if first is None:
        return 0
    p, o = first.pose.pose.position, first.pose.pose.orientation
    body = np.eye(4)
    body[:3, :3] = matrix_from_quaternion(np.array([o.x, o.y, o.z, o.w]))
    body[:3, 3] = (p.x, p.y, p.z)
    t_s, centres = read_truth_links(links_csv, robot.n_links)
    stamp = first.header.stamp.sec + 1e-9 * first.header.stamp.nanosec
    messages = truth_messages(robot, t_s, centres, stamp, body, first.header.frame_id or 'odom')
    return add_messages(record_path, TRUTH_TOPIC, TF_MESSAGE_TYPE, TF_MESSAGE_MSGDEF, messages)


def truth_topic_of(topics, namespace: str) -> str | None:
    """The truth tree's topic in a recording with these topics: TRUTH_TOPIC, or under the robot's namespace
    in a merged file (the demo's demo.mcap, snake_control.mcap_io.merge_recordings); None without one."""
    ns = '/' + namespace.strip('/') if namespace.strip('/') else ''
    for topic in (ns + TRUTH_TOPIC, TRUTH_TOPIC):
        if topic in topics:
            return topic
    return None


def read_truth_tree(path, robot, topic: str = TRUTH_TOPIC) -> tuple[np.ndarray, np.ndarray]:
    """The truth tree of a recording (add_truth_tree) as (t_s (k,) the plant's wall-clock stamps, link-centre
    poses (k, n_links, 4, 4) in the odom frame, m; levelled, see alignment). Messages missing a link are skipped; ValueError naming
    the file and topic when none is whole."""
    from snake_control.kinematics.tf_tree import centres_from_urdf_frames, link_name
    from snake_control.mcap_io import read_tf

    n = robot.n_links
    index = {link_name(k, TRUTH_PREFIX): k for k in range(n)}
    messages = {}       # log time (ns) -> (stamp s, odom -> truth/world, truth/world -> each link)
    for log_ns, stamp, _, child, matrix in read_tf(path, topics=[topic]):
        entry = messages.setdefault(log_ns, [stamp, np.eye(4), np.full((n, 4, 4), np.nan)])
        if child == TRUTH_PREFIX + 'world':
            entry[1] = matrix
        elif child in index:
            entry[2][index[child]] = matrix
    whole = [(stamp, align, links) for stamp, align, links in messages.values() if not np.isnan(links).any()]
    if not whole:
        raise ValueError(f'{path}: {topic}: no whole truth tree (truth/link_0..truth/link_{n - 1})')
    centres = centres_from_urdf_frames(np.array([w[2] for w in whole]), robot.link_lengths_m)
    align = whole[0][1]
    if abs(float(align[2, 2])) < 1.0 - 1e-9:
        # Recorded before the alignment was level: level it where it lays the first true body pose.
        from snake_control.estimation.estimator import body_pose_from_links

        body = body_pose_from_links(robot, centres[0])
        align = alignment(align @ body, body)
    return np.array([w[0] for w in whole]), np.einsum('ij,knjl->knil', align, centres)
