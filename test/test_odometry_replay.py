"""`snake odometry --replay`: a recording of the graph replayed through the estimator as estimator_node runs it
gives the odometry the graph recorded; settings changed on the command line change it; bad recordings are
refused with one line naming the file and the topic."""
import json

import numpy as np
import pytest

from snake_control.cli import main
from snake_control.estimation.replay import NODE_DEFAULTS, EstimatorInputs, compare_tracks, replay_estimator
from snake_control.mcap_io import write_joint_states
from snake_control.robot import load_robot


def _replay_json(capsys, path, robot, *extra):
    assert main(['odometry', '--robot', robot, '--input', str(path), '--replay', '--json', *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope='module')
def mujoco_recording(tmp_path_factory):
    """A short scripted wheeled_8 session of the graph in the MuJoCo world, recorded: joint_states, imu,
    the estimator's odom and the truth tree."""
    from snake_control.app.bringup import run_bringup
    from snake_control.app.demo import demo_script_path
    from snake_control.app.graph import GraphArgs
    from snake_control.app.truth import TRUTH_TOPIC

    out = tmp_path_factory.mktemp('replay') / 'run.mcap'
    lines = []
    result = run_bringup(GraphArgs(robot='wheeled_8', bus='sim', physics='mujoco', joy=False),
                         script=str(demo_script_path('wheeled_8')), record=str(out), duration_s=6.0,
                         log=lines.append)
    counts = result.message_counts
    assert counts.get('/snake/odom', 0) > 100 and counts.get('/snake/imu', 0) > 100, (counts, lines[-20:])
    assert counts.get(TRUTH_TOPIC, 0) > 50, counts
    return out


@pytest.mark.ros
@pytest.mark.slow
def test_replay_reproduces_the_recorded_odometry_and_a_changed_setting_changes_it(mujoco_recording, capsys,
                                                                                  tmp_path):
    got = _replay_json(capsys, mujoco_recording, 'wheeled_8')
    # The graph's parameters in the MuJoCo world: the IMU fused from the head link.
    assert got['world'] == 'mujoco' and got['parameters']['use_imu'] is True
    assert got['parameters']['imu_link'] == 7 and got['counts']['imu_received'] > 100
    end, recorded_end = got['end'], got['recorded_end']
    assert end['distance_m'] > 0.2, end          # the script drove it
    # The truth tree read back is the robot's motion: the graph's estimate ends within a few cm of it.
    assert recorded_end['error_m'] < 0.15, recorded_end
    diff = got['difference']
    # The node stamps each odom message with the joint_states stamp it used: most are in the replay too
    # (the recorder and the estimator may each lose a few best-effort messages).
    assert diff['common'] > 0.9 * got['samples'], diff
    tolerance_m = 0.01 * end['distance_m']
    assert diff['max_position_m'] < tolerance_m and diff['max_heading_deg'] < 0.5, diff
    assert abs(end['error_m'] - recorded_end['error_m']) < tolerance_m, (end, recorded_end)
    assert abs(end['heading_error_deg'] - recorded_end['heading_error_deg']) < 0.5
    # The demo's script segments, each with its own error, the replay's beside the recorded odom's.
    labels = [s['label'] for s in got['segments']]
    assert 'wheeled_undulation' in labels and labels[0].startswith('blend into'), labels
    for mine, theirs in zip(got['segments'], got['recorded_segments']):
        assert mine['label'] == theirs['label']
        assert abs(mine['error_m'] - theirs['error_m']) < tolerance_m

    # Without the gyro the wheels' skid turns the estimate away from the graph's.
    no_imu = _replay_json(capsys, mujoco_recording, 'wheeled_8', '--no-imu')
    assert no_imu['parameters']['use_imu'] is False and no_imu['counts']['imu_received'] == 0
    assert no_imu['difference']['max_heading_deg'] > max(1.0, 4 * diff['max_heading_deg']), no_imu['difference']

    # The text form names what it compared; the picture shows the three paths.
    from pictures import assert_picture

    picture = tmp_path / 'replay.png'
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(mujoco_recording), '--replay',
                 '--plot', str(picture)]) == 0
    text = capsys.readouterr().out
    assert 'against the recorded odom (/snake/odom' in text and 'end error' in text
    assert 'blend into wheeled_undulation' in text
    assert_picture(picture)


def test_replay_without_imu_equals_the_estimator_on_every_message():
    """No IMU and no decimation: the replay is the estimator updated on each joint_states in turn (what
    `snake odometry` without --replay runs)."""
    from snake_control.estimation.estimator import Estimator

    robot = load_robot('wheeled_8')
    t = 100.0 + np.arange(200) * 0.01
    q = 0.4 * np.sin(2 * np.pi * 0.5 * t[:, None] - np.arange(robot.n_joints)[None, :])
    inputs = EstimatorInputs(t, t + 0.002, q, np.full(q.shape, np.nan))
    track = replay_estimator(robot, inputs, update_rate_hz=0.0)
    est = Estimator(robot)
    expected = np.array([est.update(tk, qk).pose_xyz_quat for tk, qk in zip(t, q)])
    np.testing.assert_allclose(track.pose_xyz_quat, expected, atol=1e-12)
    # At 100 Hz the 100 Hz stream passes whole; at the node's 50 Hz every other message is decimated.
    assert replay_estimator(robot, inputs, update_rate_hz=100.0).counts['decimated'] == 0
    half = replay_estimator(robot, inputs)
    kept = len(half.t_s)
    assert abs(kept - 100) <= 1 and half.counts['decimated'] == 200 - kept
    diff = compare_tracks(half.t_s, half.xyyaw, track.t_s, track.xyyaw)
    assert diff.common == kept and diff.recorded_only == 200 - kept and diff.replay_only == 0
    # Following a node's updates (its odom stamps) keeps exactly those, whatever message came first.
    odd = replay_estimator(robot, inputs, updates_at=t[1::2])
    np.testing.assert_array_equal(odd.t_s, t[1::2])
    assert odd.counts['decimated'] == 100 and not np.array_equal(half.t_s, odd.t_s)


def test_the_replays_defaults_are_the_estimator_nodes():
    """The replay takes the node's defaults from the one place the node declares them from
    (test_estimation_node checks the node's side)."""
    from snake_control.estimation.pipeline import ESTIMATE_PARAMETERS, EstimatorParams

    node = EstimatorParams()
    assert set(NODE_DEFAULTS) == set(ESTIMATE_PARAMETERS)
    for name, value in NODE_DEFAULTS.items():
        if name == 'axial_weight':
            assert node.axial_weight < 0 and value is None      # -1: the robot YAML's
        elif name == 'body_frame':
            assert node.body_frame == '' and value is None      # '': the robot kind's default
        else:
            assert getattr(node, name) == value, name


def test_replay_refuses_a_recording_without_joint_states(tmp_path, capsys):
    from mcap.writer import Writer

    path = tmp_path / 'chatter.mcap'
    with open(path, 'wb') as f:
        w = Writer(f)
        w.start(profile='ros2')
        sid = w.register_schema('std_msgs/msg/String', 'ros2msg', b'string data')
        cid = w.register_channel('/chatter', 'cdr', sid)
        w.add_message(cid, log_time=1000, data=b'\x00\x01\x00\x00\x01\x00\x00\x00\x00', publish_time=1000)
        w.finish()
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(path), '--replay']) == 2
    err = capsys.readouterr().err
    assert 'chatter.mcap' in err and 'joint_states' in err and err.count('\n') == 1, err

    # A named topic that is not there is named too.
    robot = load_robot('wheeled_8')
    run = tmp_path / 'run.mcap'
    write_joint_states(run, robot.joint_names, np.arange(5) * 0.01, np.zeros((5, robot.n_joints)),
                       topic='/w8/joint_states')
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(run), '--replay', '--topic', '/x/joint_states']) == 2
    err = capsys.readouterr().err
    assert 'run.mcap' in err and '/x/joint_states' in err and '/w8/joint_states' in err

    # Without the truth or the recorded odom it still replays, and says what it cannot compare.
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(run), '--replay']) == 0
    assert 'no ground truth' in capsys.readouterr().out
    # The IMU cannot be fused from a recording without one; a setting the estimator lacks is refused.
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(run), '--replay', '--set', 'use_imu=true']) == 2
    assert 'no sensor_msgs/Imu' in capsys.readouterr().err
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(run), '--replay', '--set', 'band=1']) == 2
    assert 'unknown estimator parameter' in capsys.readouterr().err
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(run), '--replay', '--set', 'use_imu']) == 2
    assert "argument --set: expected NAME=VALUE, got 'use_imu'" in capsys.readouterr().err
    # Replay options belong to --replay, and --replay to recordings.
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(run), '--no-imu']) == 2
    csv = tmp_path / 'q.csv'
    csv.write_text('t,' + ','.join(robot.joint_names) + '\n0,' + ','.join(['0'] * robot.n_joints) + '\n')
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(csv), '--replay']) == 2


def test_link_centres_from_the_urdf_frames_of_the_truth_tree():
    from snake_control.kinematics.chain import chain_frames
    from snake_control.kinematics.tf_tree import centres_from_urdf_frames, urdf_frames_from_centres

    robot = load_robot('pitch_yaw_32')
    q = np.random.default_rng(3).uniform(-0.6, 0.6, (4, robot.n_joints))
    centres = np.array([chain_frames(qk, robot.axis_vectors, robot.link_lengths_m) for qk in q])
    frames = np.array([urdf_frames_from_centres(c, robot.link_lengths_m) for c in centres])
    assert not np.allclose(frames, centres)
    np.testing.assert_allclose(centres_from_urdf_frames(frames, robot.link_lengths_m), centres, atol=1e-12)


def _rolled_body(angle_rad):
    """(n_links, 4, 4) link centres of pitch_yaw_32 lying straight along world x, every link rolled about x by
    angle_rad, at x 0.3 m, y 0.2 m, z the module radius."""
    from snake_control.kinematics.chain import chain_frames

    robot = load_robot('pitch_yaw_32')
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    roll = np.eye(4)
    roll[1:3, 1:3] = [[c, -s], [s, c]]
    roll[:3, 3] = (0.3, 0.2, robot.module_radius_m)
    return robot, roll @ chain_frames(np.zeros(robot.n_joints), robot.axis_vectors, robot.link_lengths_m)


def test_the_truth_tree_is_aligned_level_and_a_tilted_one_is_levelled_when_read(tmp_path):
    """A straight body's virtual chassis has no roll of its own: the estimate's and the truth's may differ by
    a turn about x. Laying one on the other in 3D tilted the true floor in odom (the replay then judged
    the motion projected on a tilted plane: 7.1 % where the demo, in the world, said 5.0 %)."""
    from snake_control.app.truth import TRUTH_TOPIC, alignment, read_truth_tree, truth_messages
    from snake_control.estimation.estimator import body_pose_from_links
    from snake_control.kinematics.lie import xyyaw_from_se3
    from snake_control.kinematics.tf_tree import xyz_quat
    from snake_control.mcap_io import TF_MESSAGE_MSGDEF, TF_MESSAGE_TYPE, add_messages

    robot, links = _rolled_body(0.0)
    true_body = body_pose_from_links(robot, links)
    estimated = np.eye(4)          # the estimate's chassis: 18.6 degrees of roll from the truth's
    c, s = np.cos(0.325), np.sin(0.325)
    estimated[1:3, 1:3] = [[c, -s], [s, c]]
    estimated[:3, 3] = (1.0, -0.5, 0.04)
    turned = estimated @ _yaw(0.7)
    align = alignment(turned, true_body)
    np.testing.assert_allclose(align[:3, 2], [0.0, 0.0, 1.0], atol=1e-12)      # level
    np.testing.assert_allclose(xyyaw_from_se3(align @ true_body), xyyaw_from_se3(turned), atol=1e-12)
    np.testing.assert_allclose((align @ true_body)[:3, 3], turned[:3, 3], atol=1e-12)

    # A recording with a tilted alignment (as written before) reads back level, its motion unshrunk.
    times = np.array([1.0, 2.0])
    moved = links.copy()
    moved[:, 1, 3] += 0.5               # the body slid 0.5 m sideways, across the tilt's axis
    path = tmp_path / 'tilted.mcap'
    write_joint_states(path, robot.joint_names, times, np.zeros((2, robot.n_joints)))
    messages = truth_messages(robot, times, np.stack([links, moved]), 1.0, estimated)
    tilted = estimated @ np.linalg.inv(true_body)
    (x, y, z), (qx, qy, qz, qw) = xyz_quat(tilted)
    for _, msg in messages:
        msg['transforms'][0]['transform'] = {'translation': {'x': x, 'y': y, 'z': z},
                              'rotation': {'x': qx, 'y': qy, 'z': qz, 'w': qw}}
    add_messages(path, TRUTH_TOPIC, TF_MESSAGE_TYPE, TF_MESSAGE_MSGDEF, messages)
    _, centres = read_truth_tree(path, robot)
    up = centres[:, :, :3, 2]
    np.testing.assert_allclose(up[..., 2], 1.0, atol=1e-9)
    slid = centres[1, :, :3, 3] - centres[0, :, :3, 3]
    np.testing.assert_allclose(np.linalg.norm(slid[:, :2], axis=1), 0.5, atol=1e-9)
    np.testing.assert_allclose(slid[:, 2], 0.0, atol=1e-9)


def _yaw(angle_rad):
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    out = np.eye(4)
    out[:2, :2] = [[c, -s], [s, c]]
    return out
