"""Recordings read back and hold the whole TF tree: odom -> link_0 -> ... -> link_n at every recorded instant,
equal to the package's forward kinematics; odometry computed from a recording equals the live estimator's;
channels carry offered_qos_profiles; both spellings of a schema name are read."""
import math
import time

import numpy as np
import pytest
import yaml

from snake_control.kinematics.tf_tree import link_transforms, urdf_frames
from snake_control.mcap_io import (JOINT_STATE_MSGDEF, read_joint_states, read_tf, tf_chain, type_name,
                                   write_joint_states)
from snake_control.robot import load_robot


def tf2_msgs_or_skip():
    try:
        import tf2_msgs.msg  # noqa: F401
    except ImportError:
        pytest.skip('tf2_msgs not importable (make ros2-tools installs it from the shared folder)')


# ---------------------------------------------------------------------------------------------- files

def test_reader_accepts_both_schema_name_forms(tmp_path):
    from mcap.writer import Writer

    robot = load_robot('wheeled_8')
    t = np.arange(5) * 0.01
    q = np.outer(t, np.ones(robot.n_joints))
    for name in ('sensor_msgs/JointState', 'sensor_msgs/msg/JointState'):
        # Written by hand under each name: mcap_ros2's writer would spell it one way only.
        from snake_control.mcap_io import MessageEncoder, stamp_dict
        enc = MessageEncoder('sensor_msgs/msg/JointState', JOINT_STATE_MSGDEF)
        path = tmp_path / f'{name.count("/")}.mcap'
        with open(path, 'wb') as f:
            w = Writer(f)
            w.start(profile='ros2')
            sid = w.register_schema(name, 'ros2msg', JOINT_STATE_MSGDEF.encode())
            cid = w.register_channel('/wheeled_8/joint_states', 'cdr', sid)
            for k in range(len(t)):
                data = enc.encode({'header': {'stamp': stamp_dict(1.0 + t[k]), 'frame_id': ''},
                                   'name': robot.joint_names, 'position': list(q[k]), 'velocity': [],
                                   'effort': []})
                w.add_message(cid, int((1 + t[k]) * 1e9), data, int((1 + t[k]) * 1e9))
            w.finish()
        ts, pos, _ = read_joint_states(path, robot.joint_names)
        np.testing.assert_allclose(pos, q)
        # --topic without the leading slash names the same topic
        assert len(read_joint_states(path, robot.joint_names, topic='wheeled_8/joint_states')[0]) == 5


def test_two_robots_in_one_file_pick_by_joint_names(tmp_path):
    w8, py = load_robot('wheeled_8'), load_robot('pitch_yaw_32')
    from snake_control.mcap_io import merge_recordings
    t = np.arange(4) * 0.01
    write_joint_states(tmp_path / 'a.mcap', w8.joint_names, t, np.zeros((4, w8.n_joints)))
    write_joint_states(tmp_path / 'b.mcap', py.joint_names, t, np.ones((4, py.n_joints)))
    merge_recordings([('wheeled_8', tmp_path / 'a.mcap'), ('pitch_yaw_32', tmp_path / 'b.mcap')],
                     tmp_path / 'm.mcap')
    assert read_joint_states(tmp_path / 'm.mcap', py.joint_names)[1][0, 0] == 1.0
    assert read_joint_states(tmp_path / 'm.mcap', w8.joint_names)[1][0, 0] == 0.0


def test_type_name_forms():
    assert type_name('tf2_msgs/TFMessage') == type_name('tf2_msgs/msg/TFMessage') == 'tf2_msgs/msg/TFMessage'


# ---------------------------------------------------------------------------------------------- recorder

@pytest.mark.ros
def test_recorder_writes_tf_from_the_message_definition_and_qos_metadata(tmp_path):
    """Without anyone publishing /tf (no tf2_msgs), the recorder given the robot writes the tree itself."""
    from nav_msgs.msg import Odometry
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.recorder import Recorder

    robot = load_robot('wheeled_8')
    out = tmp_path / 'r.mcap'
    h = RosHarness(args=['--ros-args', '-r', '__ns:=/snake'])
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    rng = np.random.default_rng(1)
    shapes = [rng.uniform(-0.5, 0.5, robot.n_joints) for _ in range(20)]
    try:
        rec = h.add(Recorder(out, context=h.context, tf_robot=robot))
        desc = h.publisher(String, 'robot_description', latched)
        states = h.publisher(JointState, 'joint_states')
        odom = h.publisher(Odometry, 'odom')
        desc.publish(String(data='<robot/>'))
        assert wait_until(lambda: '/snake/robot_description' in rec.counts)
        h.wait_for_subscribers(states)
        h.wait_for_subscribers(odom)
        for k, q in enumerate(shapes):
            msg = JointState(name=robot.joint_names, position=list(q))
            msg.header.stamp.sec, msg.header.stamp.nanosec = 100 + k, 0
            states.publish(msg)
            # each odom after its shape has reached the recorder (the tree's root is placed from it)
            assert wait_until(lambda: rec.counts.get('/tf', 0) >= 1 and rec.counts.get('/snake/joint_states', 0)
                              >= k + 1)
            o = Odometry()
            o.header.stamp = msg.header.stamp
            o.header.frame_id = 'odom'
            o.pose.pose.position.x = 0.1 * k
            o.pose.pose.orientation.w = 1.0
            odom.publish(o)
            time.sleep(0.025)     # past the recorder's 50 Hz limit for link transforms
        assert wait_until(lambda: rec.counts.get('/snake/odom', 0) == len(shapes))
    finally:
        h.close()
    from mcap.reader import make_reader
    with open(out, 'rb') as f:
        summary = make_reader(f).get_summary()
    channels = {c.topic: c for c in summary.channels.values()}
    for topic in ('/snake/joint_states', '/snake/odom', '/snake/robot_description', '/tf'):
        profile = yaml.safe_load(channels[topic].metadata['offered_qos_profiles'])[0]
        assert {'history', 'depth', 'reliability', 'durability'} <= set(profile)
    assert yaml.safe_load(channels['/snake/robot_description'].metadata['offered_qos_profiles'])[0][
        'durability'] == 1      # transient local: replayed latched
    assert summary.schemas[channels['/tf'].schema_id].name == 'tf2_msgs/msg/TFMessage'
    # As rosbag2 decodes them (test_rosbag2_qos): every channel replays with a known policy, the URDF latched.
    from test_rosbag2_qos import rosbag2_read_qos
    qos = rosbag2_read_qos(out)
    assert qos['/snake/robot_description'][0]['durability'] == 'transient_local'
    assert all(p['reliability'] in ('reliable', 'best_effort') and p['durability'] in ('volatile', 'transient_local')
               for profiles in qos.values() for p in profiles), qos
    tf = read_tf(out)
    links = [(p, c) for _, _, p, c, _ in tf if c != 'link_0']
    assert len(links) >= 5 * robot.n_joints
    roots = [m for _, _, p, c, m in tf if c == 'link_0']
    assert len(roots) == len(shapes) and all(p == 'odom' for _, _, p, c, _ in tf if c == 'link_0')
    _assert_links_match_fk(robot, tf, out)


def _assert_links_match_fk(robot, tf, path, topic=None):
    """Every link transform equals the forward kinematics of the joint_states message with its stamp (the
    recorder may miss a joint_states message under load: at most a few go unmatched)."""
    t_s, q, _ = read_joint_states(path, robot.joint_names, topic)
    groups = {}
    for _, stamp, parent, child, matrix in tf:
        if parent.startswith('link_'):
            groups.setdefault(stamp, {})[child] = matrix
    assert groups
    matched = 0
    for stamp, got in groups.items():
        k = int(np.argmin(np.abs(t_s - stamp)))
        if abs(t_s[k] - stamp) > 1e-6:
            continue
        matched += 1
        expected = link_transforms(robot, q[k])
        assert len(got) == robot.n_joints
        for _, child, matrix in expected:
            np.testing.assert_allclose(got[child], matrix, atol=1e-9)
    assert matched >= 0.9 * len(groups), (matched, len(groups))


# ---------------------------------------------------------------------------------------------- bringup

@pytest.fixture(scope='module')
def bringup_recording(tmp_path_factory):
    tf2_msgs_or_skip()
    from snake_control.app.bringup import run_bringup
    from snake_control.app.demo import demo_script_path
    from snake_control.app.graph import GraphArgs

    out = tmp_path_factory.mktemp('bringup') / 'run.mcap'
    lines = []
    result = run_bringup(GraphArgs(robot='wheeled_8', bus='sim', joy=False), script=str(demo_script_path('wheeled_8')),
                         record=str(out), duration_s=6.0, log=lines.append)
    assert result.message_counts.get('/tf', 0) > 0, lines
    return load_robot('wheeled_8'), out


@pytest.mark.ros
@pytest.mark.slow
def test_bringup_recording_holds_the_whole_tree_at_every_instant(bringup_recording):
    robot, path = bringup_recording
    from snake_control.mcap_io import ros2_messages

    tf = read_tf(path)
    frames = [f'link_{k}' for k in range(robot.n_links)]
    times = sorted({m.log_time_ns for m in ros2_messages(path)})
    latest, k, complete_from = {}, 0, None
    checked = 0
    for now in times:
        while k < len(tf) and tf[k][0] <= now:
            _, _, parent, child, matrix = tf[k]
            latest[child] = (parent, matrix)
            k += 1
        chains = [tf_chain(latest, f, 'odom') for f in frames]
        if complete_from is None:
            if all(c is not None for c in chains):
                complete_from = now
            continue
        assert all(c is not None for c in chains), f'a link lost its chain to odom at {now}'
        checked += 1
        # The chain link_0 -> link_k composes to the URDF's frame of link k
        if checked % 200 == 0:
            root = chains[0]
            inv = np.linalg.inv(root)
            last_links = {c: latest[c] for c in frames[1:]}
            stamp = next(s for _, s, p, c, _ in reversed(tf[:k]) if c == 'link_1')
            t_s, q, _ = read_joint_states(path, robot.joint_names)
            expected = urdf_frames(robot, q[int(np.argmin(np.abs(t_s - stamp)))])
            for j, chain in enumerate(chains):
                np.testing.assert_allclose(inv @ chain, expected[j], atol=1e-6)
            assert last_links
    assert complete_from is not None and checked > 100
    # Complete within the first second of joint_states
    first_states = read_joint_states(path, robot.joint_names)[0][0]
    assert complete_from * 1e-9 - first_states < 2.0


@pytest.mark.ros
@pytest.mark.slow
def test_bringup_link_transforms_equal_forward_kinematics(bringup_recording):
    robot, path = bringup_recording
    _assert_links_match_fk(robot, read_tf(path), path)


@pytest.mark.ros
@pytest.mark.slow
def test_odometry_from_the_recording_equals_the_live_estimator(bringup_recording, tmp_path):
    from snake_control.estimation.estimator import Estimator
    from snake_control.estimation.trajectory_io import read_joint_trajectory
    from snake_control.mcap_io import ros2_messages

    robot, path = bringup_recording
    from snake_control.kinematics.lie import se2_relative, yaw_from_quaternion

    live = []
    for m in ros2_messages(path):
        if m.channel.topic.endswith('/odom'):
            p, o = m.ros_msg.pose.pose.position, m.ros_msg.pose.pose.orientation
            live.append((m.ros_msg.header.stamp.sec + 1e-9 * m.ros_msg.header.stamp.nanosec, p.x, p.y,
                         float(yaw_from_quaternion(o.x, o.y, o.z, o.w))))
    # What `snake odometry --input` runs (its pose CSV is not used: it stores t with 9 significant digits,
    # too few for epoch stamps).
    robot_ = load_robot('wheeled_8')
    traj = read_joint_trajectory(path, robot_.joint_names)
    est = Estimator(robot_)
    t_off, poses = [], []
    for k in range(len(traj)):
        state = est.update(traj.t_s[k], traj.positions_rad[k],
                           None if traj.velocities_rad_s is None else traj.velocities_rad_s[k])
        t_off.append(state.t_s)
        poses.append(state.pose_xyz_quat)
    t_off, poses = np.array(t_off), np.array(poses)
    live = np.array(live)
    live = live[live[:, 0] >= t_off[0]]
    offline = np.column_stack([np.interp(live[:, 0], t_off, poses[:, 0]), np.interp(live[:, 0], t_off, poses[:, 1]),
                               np.interp(live[:, 0], t_off, np.unwrap(yaw_from_quaternion(*poses[:, 3:7].T)))])
    # Both in the frame of their own pose at the first common instant: the live estimator started on
    # joint_states the recorder had not joined yet, so the two odom frames differ by a constant.
    live_rel, off_rel = se2_relative(live[:, 1:], live[0, 1:]), se2_relative(offline, offline[0])
    travelled = float(np.sum(np.hypot(*np.diff(live_rel[:, :2], axis=0).T)))
    assert travelled > 0.5     # the script drove it
    err = np.hypot(*(off_rel[:, :2] - live_rel[:, :2]).T)
    assert float(err.max()) < 0.01 * travelled, (err.max(), travelled)
    assert float(np.max(np.abs(off_rel[:, 2] - live_rel[:, 2]))) < math.radians(1.0)


@pytest.mark.ros
@pytest.mark.slow
def test_physics_recording_holds_the_true_tree_beside_the_estimate(tmp_path):
    """With MuJoCo, every link's true pose is a truth/ frame chained to odom, laid on the estimate at the
    first odometry message; a scripted wheeled_8 run then ends with both trees close."""
    tf2_msgs_or_skip()
    from snake_control.app.bringup import run_bringup
    from snake_control.app.demo import demo_script_path
    from snake_control.app.graph import GraphArgs
    from snake_control.app.truth import TRUTH_TOPIC

    robot = load_robot('wheeled_8')
    out = tmp_path / 'phys.mcap'
    result = run_bringup(GraphArgs(robot='wheeled_8', bus='sim', physics='mujoco', joy=False),
                         script=str(demo_script_path('wheeled_8')), record=str(out), duration_s=5.0,
                         log=lambda line: None)
    assert result.message_counts.get(TRUTH_TOPIC, 0) > 50
    tf = read_tf(out)
    latest = {}
    first_truth = None
    for _, stamp, parent, child, matrix in tf:
        latest[child] = (parent, matrix)
        if child == 'truth/link_0' and first_truth is None:
            first_truth = stamp
    est = [tf_chain(latest, f'link_{k}', 'odom') for k in range(robot.n_links)]
    true = [tf_chain(latest, f'truth/link_{k}', 'odom') for k in range(robot.n_links)]
    assert all(c is not None for c in est + true)
    # The true links form the robot's shape: neighbours one link length apart (joint frames)
    gaps = [np.linalg.norm(true[k + 1][:3, 3] - true[k][:3, 3]) for k in range(1, robot.n_links - 1)]
    np.testing.assert_allclose(gaps, robot.link_length_m, rtol=1e-3)
    # At the end the estimate's tail link is within a few cm of the truth's (the estimator's error)
    assert np.linalg.norm(est[0][:2, 3] - true[0][:2, 3]) < 0.15
