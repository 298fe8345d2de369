"""`snake odometry` and `snake connection-plot` end to end (in-process and as a subprocess)."""
import subprocess
import sys

import numpy as np
import pytest

from snake_control.cli import main
from snake_control.estimation.estimator import run_offline
from snake_control.estimation.trajectory_io import read_joint_mcap, read_pose_csv, write_joint_csv
from snake_control.mcap_io import write_joint_states
from snake_control.kinematics.lie import matrix_from_quaternion
from snake_control.robot import load_robot

W8 = load_robot('wheeled_8')


def _gait(ts):
    return np.array([0.5 * np.sin(2 * t - 0.9 * np.arange(7)) for t in ts])


def test_odometry_csv_round_trip(tmp_path, capsys):
    ts = np.arange(0.0, 3.0, 0.01)
    q = _gait(ts)
    # Columns in a different order than the robot's, plus an extra column: matched by name.
    names = list(reversed(W8.joint_names))
    write_joint_csv(tmp_path / 'gait.csv', names + ['extra'], ts,
                    np.hstack([q[:, ::-1], np.zeros((len(ts), 1))]))
    out = tmp_path / 'pose.csv'
    plot = tmp_path / 'pose.png'
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(tmp_path / 'gait.csv'),
                 '--output', str(out), '--plot', str(plot)]) == 0
    printed = capsys.readouterr().out
    assert 'path length' in printed and 'wrote' in printed
    t, poses = read_pose_csv(out)
    np.testing.assert_allclose(t, ts, atol=1e-9)
    expected = run_offline(W8, ts, q)
    np.testing.assert_allclose(poses[:, :3], [s.pose[:3, 3] for s in expected], atol=1e-9)
    for p, s in zip(poses[::37], expected[::37]):
        np.testing.assert_allclose(matrix_from_quaternion(p[3:]), s.pose[:3, :3], atol=1e-9)
    assert np.hypot(*poses[-1, :2]) > 0.05          # the gait moved the robot
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b'\x89PNG'


def test_odometry_mcap_input(tmp_path):
    ts = np.arange(0.0, 2.0, 0.01)
    q = _gait(ts)
    path = tmp_path / 'run.mcap'
    write_joint_states(path, W8.joint_names, ts, q, topic='/snake/joint_states')
    traj = read_joint_mcap(path, W8.joint_names)
    np.testing.assert_allclose(traj.t_s, ts, atol=1e-9)
    np.testing.assert_allclose(traj.positions_rad, q)
    out = tmp_path / 'pose.csv'
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(path), '--output', str(out)]) == 0
    _, poses = read_pose_csv(out)
    np.testing.assert_allclose(poses[-1, :3], run_offline(W8, ts, q)[-1].pose[:3, 3], atol=1e-9)


def test_odometry_bad_input_is_one_line_error(tmp_path, capsys):
    bad = tmp_path / 'bad.csv'
    bad.write_text('t,joint_1\n0,0\n')
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'bad.csv' in err and 'missing joint columns' in err and 'joint_2' in err
    rows = ['t,' + ','.join(W8.joint_names), '0,' + ','.join(['0'] * 7), '0.1,' + ','.join(['0'] * 6 + ['x'])]
    bad.write_text('\n'.join(rows) + '\n')
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'line 3' in err and 'joint_7' in err
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(tmp_path / 'missing.csv')]) == 2
    assert main(['odometry', '--robot', 'wheeled_8', '--input', str(tmp_path / 'x.bag')]) == 2


def test_odometry_pitch_yaw_subprocess(tmp_path):
    robot = load_robot('pitch_yaw_32')
    ts = np.arange(0.0, 1.0, 0.01)
    yaw = np.array([a == 'yaw' for a in robot.axes])
    q = np.array([np.where(yaw, 0.056 * np.cos(t), 0.056 * np.sin(t)) for t in ts])   # rolling arc
    write_joint_csv(tmp_path / 'roll.csv', robot.joint_names, ts, q)
    out = tmp_path / 'pose.csv'
    proc = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'odometry', '--robot', 'pitch_yaw_32',
                           '--input', str(tmp_path / 'roll.csv'), '--output', str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    _, poses = read_pose_csv(out)
    lateral = np.hypot(*(poses[-1, :2] - poses[0, :2]))
    assert lateral == pytest.approx(robot.module_radius_m * ts[-1], rel=0.15)


def test_connection_plot_writes_the_figure(tmp_path, capsys):
    out = tmp_path / 'connection.png'
    assert main(['connection-plot', '--output', str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.stat().st_size > 20_000 and out.read_bytes()[:4] == b'\x89PNG'
    # Seed 000's gait crosses alpha1 = alpha2, where the connection is infinite: no number is printed
    # for its net motion (it used to print y +1.19 m beside a panel saying sideways motion is impossible).
    assert 'net motion per gait cycle: not defined' in printed and 'crosses the singular line' in printed
    assert main(['connection-plot', '--output', str(out), '--gait', '40,40']) == 2
    assert main(['connection-plot', '--output', str(out), '--robot', 'wheeled_8']) == 2


def test_pitch_yaw_axial_weight_comes_from_the_robot_yaml_and_matches_the_world():
    from snake_control.estimation.estimator import Estimator
    from snake_control.physics.mjcf import matching_axial_weight
    robot = load_robot('pitch_yaw_32')
    assert robot.axial_weight == pytest.approx(matching_axial_weight(), rel=0.01)
    assert Estimator(robot).axial_weight == robot.axial_weight
    assert Estimator(robot, axial_weight=1.0).axial_weight == 1.0
    assert W8.axial_weight == 1.0            # absent from the YAML: no axial sliding


def test_robot_yaml_refuses_an_axial_weight_out_of_range(tmp_path):
    import yaml
    from snake_control.paths import resolve_robot
    from snake_control.robot import ConfigError, robot_from_dict
    data = yaml.safe_load(resolve_robot('pitch_yaw_32').read_text())
    data['link']['axial_weight'] = 1.5
    with pytest.raises(ConfigError, match='axial_weight'):
        robot_from_dict(data)


def _serpentine(robot, ts):
    yaw = np.array([a == 'yaw' for a in robot.axes])
    i = np.arange(robot.n_joints)
    return np.array([np.where(yaw, 0.7 * np.sin(2 * np.pi * 0.5 * t - 0.4 * i), 0.0) for t in ts])


def test_odometry_pitch_yaw_serpentine_moves_by_default_and_warns_at_axial_weight_1(tmp_path, capsys):
    robot = load_robot('pitch_yaw_32')
    ts = np.arange(0.0, 4.0, 0.01)
    write_joint_csv(tmp_path / 'serp.csv', robot.joint_names, ts, _serpentine(robot, ts))
    out = tmp_path / 'pose.csv'
    assert main(['odometry', '--robot', 'pitch_yaw_32', '--input', str(tmp_path / 'serp.csv'),
                 '--output', str(out)]) == 0
    _, poses = read_pose_csv(out)
    moved = np.hypot(*(poses[-1, :2] - poses[0, :2]))
    assert moved > 0.1                                     # the robot YAML's skin: serpentine moves
    assert 'warning' not in capsys.readouterr().err
    assert main(['odometry', '--robot', 'pitch_yaw_32', '--input', str(tmp_path / 'serp.csv'),
                 '--axial-weight', '1', '--output', str(out)]) == 0
    _, poses = read_pose_csv(out)
    assert np.hypot(*(poses[-1, :2] - poses[0, :2])) < 0.2 * moved
    assert 'slip residual' in capsys.readouterr().err       # and says why


def test_odometry_warns_about_angles_outside_the_limits(tmp_path, capsys):
    robot = load_robot('pitch_yaw_32')
    ts = np.arange(0.0, 1.0, 0.01)
    write_joint_csv(tmp_path / 'deg.csv', robot.joint_names, ts, np.degrees(_serpentine(robot, ts)) / 10)
    assert main(['odometry', '--robot', 'pitch_yaw_32', '--input', str(tmp_path / 'deg.csv')]) == 0
    assert 'outside the limits' in capsys.readouterr().err
