"""The estimator against MuJoCo ground truth: the harness, and bounds that catch a broken estimator.

The bounds here are looser than the issue's aims (planar 3 % and 2 deg/m, pitch-yaw 10 %; `snake
validate` prints those) but far tighter than what a sign error or a missing contact term gives (100 %
and more), and every run must actually move the robot.
"""
import dataclasses
import math

import numpy as np
import pytest

from snake_control import cli
from snake_control.physics import SnakeWorld
from snake_control.validation import runs as V
from snake_control.robot import load_robot


def case(robot, gait):
    return next(c for c in V.CASES if c.robot == robot and c.gait == gait)


def recording(robot_name, gait, duration_s, warmup_s=V.WARMUP_S):
    c = case(robot_name, gait)
    robot = load_robot(robot_name)
    goal = V.gait_goal_fn(robot, c.gait, c.command, c.params)
    return V.simulate(SnakeWorld(robot), goal, duration_s, warmup_s=warmup_s), c


def test_pitch_yaw_runs_weight_axial_slip_by_the_friction_ratio():
    from snake_control.physics import PhysicsOptions
    assert V.matching_axial_weight(PhysicsOptions(axial_friction=0.2, lateral_friction=0.8)) == 0.0625
    assert V.case_estimator_options(case('pitch_yaw_32', 'rolling')) == {
        'axial_weight': pytest.approx((0.15 / 0.9) ** 2)}
    assert V.case_estimator_options(case('wheeled_8', 'lateral_undulation')) == {}


def test_the_issue_validation_set_is_covered():
    runs = {(c.robot, c.gait) for c in V.CASES}
    assert runs == {('wheeled_8', 'lateral_undulation'), ('kinematic_snake_3', 'lateral_undulation'),
                    ('pitch_yaw_32', 'serpentine'), ('pitch_yaw_32', 'sidewinding'),
                    ('pitch_yaw_32', 'aeh_sidewinding'), ('pitch_yaw_32', 'rolling')}


def test_recording_samples_the_run_at_the_control_rate():
    robot = load_robot('kinematic_snake_3')
    goals = lambda t: np.array([0.3 * math.sin(2 * t), 0.3 * math.cos(2 * t)])     # noqa: E731
    rec = V.simulate(SnakeWorld(robot), goals, 1.0, rate_hz=50.0, warmup_s=0.2)
    assert rec.times_s.shape == (51,) and rec.times_s[-1] == pytest.approx(1.0)
    assert rec.link_poses.shape == (51, 3, 4, 4)
    assert rec.contacts.shape == (51, 3) and rec.contacts.all()       # wheels stay on the floor
    # Goals are the function's at (time since settling), the warm-up first.
    np.testing.assert_allclose(rec.goals_rad[0], goals(0.2))
    np.testing.assert_allclose(rec.goals_rad[-1], goals(1.2))
    # Measured angles trail the goals by the servo's lag but follow them.
    assert np.max(np.abs(rec.positions_rad - rec.goals_rad)) < 0.1
    truth = V.true_body_poses(robot, rec.link_poses)
    middle = rec.link_poses[:, 1]                                       # the middle link of three
    np.testing.assert_allclose(truth[:, :2, 3], middle[:, :2, 3], atol=1e-12)
    np.testing.assert_allclose(np.arctan2(truth[:, 1, 0], truth[:, 0, 0]),
                               np.arctan2(middle[:, 1, 0], middle[:, 0, 0]), atol=1e-12)
    with pytest.raises(ValueError, match='whole number of physics timesteps'):
        V.simulate(SnakeWorld(robot), goals, 1.0, rate_hz=300.0)


def test_true_chassis_is_the_virtual_chassis_of_the_true_links():
    rec, _ = recording('pitch_yaw_32', 'sidewinding', 0.5, warmup_s=1.0)
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    centres = rec.link_poses[:, :, :3, 3]
    np.testing.assert_allclose(truth[:, :3, 3], centres.mean(axis=1), atol=1e-12)
    for pose, c in zip(truth, centres):
        np.testing.assert_allclose(pose[:3, :3].T @ pose[:3, :3], np.eye(3), atol=1e-9)
        # x is the principal direction, pointing from tail to head.
        spread = (c - c.mean(axis=0)) @ pose[:3, :3]
        assert np.var(spread[:, 0]) >= np.var(spread[:, 1]) >= np.var(spread[:, 2]) - 1e-12
        assert spread[-1, 0] > spread[0, 0]
    # Axis signs are continuous from sample to sample.
    assert np.min(np.einsum('tij,tij->t', truth[1:, :3, :3], truth[:-1, :3, :3])) > 2.5


def test_a_sign_error_is_caught():
    """Mirrored joint angles (a sign convention broken somewhere) must fail the planar bound."""
    rec, c = recording('wheeled_8', 'lateral_undulation', 6.0)
    good = V.evaluate(rec, c.gait, **V.case_estimator_options(c))
    mirrored = dataclasses.replace(rec, positions_rad=-rec.positions_rad)
    bad = V.evaluate(mirrored, c.gait, **V.case_estimator_options(c))
    assert good.distance_m > 1.0
    assert good.position_error_pct < 12.0 and good.heading_error_deg_per_m < 4.0
    assert bad.position_error_pct > 50.0


@pytest.fixture(scope='module')
def rolling():
    return recording('pitch_yaw_32', 'rolling', 6.0)


def test_a_missing_contact_radius_term_is_caught(rolling):
    """Rolling moves only through the module radius: an estimator without it sees no motion."""
    rec, c = rolling
    good = V.evaluate(rec, c.gait, **V.case_estimator_options(c))
    no_radius = dataclasses.replace(rec, robot=dataclasses.replace(rec.robot, module_radius_m=1e-6))
    bad = V.evaluate(no_radius, c.gait, **V.case_estimator_options(c))
    assert good.distance_m > 0.4
    assert good.position_error_pct < 50.0
    assert 0.5 < good.contact_agreement <= 1.0        # a rolling arc lies on most of its modules
    assert bad.position_error_pct > 70.0


def test_true_imu_orientation_removes_the_heading_error(rolling):
    rec, c = rolling
    result = V.evaluate(rec, c.gait, imu='truth', **V.case_estimator_options(c))
    assert result.gait == 'rolling' and result.imu == 'truth'
    assert abs(result.heading_error_deg) < 0.01
    np.testing.assert_allclose(result.estimated_heading_rad, result.true_heading_rad, atol=1e-6)


def _rolled_straight_body(robot, t, roll_rate_rad_s, velocity_m_s):
    """(T, n_links, 4, 4): a straight body along x lying on the floor, turned about its axis at
    roll_rate_rad_s and moved at velocity_m_s (x, y)."""
    poses = np.zeros((t.size, robot.n_links, 4, 4))
    for k, tk in enumerate(t):
        c, s = math.cos(roll_rate_rad_s * tk), math.sin(roll_rate_rad_s * tk)
        poses[k, :, :3, :3] = [[1, 0, 0], [0, c, -s], [0, s, c]]
        poses[k, :, 0, 3] = np.arange(robot.n_links) * robot.link_length_m + velocity_m_s[0] * tk
        poses[k, :, 1, 3] = velocity_m_s[1] * tk
        poses[k, :, 2, 3] = robot.module_radius_m
        poses[k, :, 3, 3] = 1.0
    return poses


def _poses_recording(robot, t, poses, contacts):
    z = np.zeros((t.size, robot.n_joints))
    return V.Recording(robot, t, z, z, z, z, poses, contacts)


def test_contact_slip_reads_a_rolling_module_as_static_and_a_sliding_one_at_its_speed():
    robot = load_robot('pitch_yaw_32')
    t = np.arange(6) * 0.01
    touching = np.ones((t.size, robot.n_links), dtype=bool)
    # Rolling about its own axis at 2 rad/s, the body moves sideways at 2 r: the touching skin stands
    # still (the module centres themselves move at 0.06 m/s).
    rolling = V.contact_slip(_poses_recording(robot, t, _rolled_straight_body(
        robot, t, 2.0, (0.0, -2.0 * robot.module_radius_m)), touching))
    assert rolling.mean_m_s < 1e-4 and rolling.lateral_mean_m_s < 1e-4
    assert rolling.path_speed_m_s == pytest.approx(0.06) and rolling.net_speed_m_s == pytest.approx(0.06)
    # Sliding: sideways the slip is lateral, along the body it is not.
    across = V.contact_slip(_poses_recording(robot, t, _rolled_straight_body(robot, t, 0.0, (0.0, 0.1)), touching))
    assert across.median_m_s == pytest.approx(0.1) and across.lateral_mean_m_s == pytest.approx(0.1)
    assert across.ratio == pytest.approx(1.0) and across.lateral_ratio == pytest.approx(1.0)
    along = V.contact_slip(_poses_recording(robot, t, _rolled_straight_body(robot, t, 0.0, (0.1, 0.0)), touching))
    assert along.median_m_s == pytest.approx(0.1) and along.lateral_mean_m_s == pytest.approx(0.0, abs=1e-9)
    # Off the floor a module has no slip; the ends of the run have no central difference.
    lifted = touching.copy()
    lifted[:, 5] = False
    some = V.contact_slip(_poses_recording(robot, t, _rolled_straight_body(robot, t, 0.0, (0.0, 0.1)), lifted))
    assert np.isnan(some.speeds_m_s[:, 5]).all() and np.isnan(some.speeds_m_s[[0, -1]]).all()
    assert some.touching[5] == 0.0 and some.contacts_per_sample == robot.n_links - 1


def test_contact_slip_takes_the_lower_end_of_a_tilted_module():
    # A module tilted 0.3 rad (head end up) pitching further up at 0.5 rad/s with its lower end cap
    # rolling on the floor: the skin under that end stands still while the module's centre moves
    # (about 18 mm/s). Turned in place about the cap's centre instead, the skin slides at 0.5 r.
    robot = load_robot('pitch_yaw_32')
    t = np.arange(5) * 0.01
    half, r = 0.5 * robot.link_length_m, robot.module_radius_m
    touching = np.ones((t.size, robot.n_links), dtype=bool)

    def tilting(roll_on_the_floor):
        poses = np.zeros((t.size, robot.n_links, 4, 4))
        for k, tk in enumerate(t):
            a = 0.3 + 0.5 * tk
            rot = np.array([[math.cos(a), 0, -math.sin(a)], [0, 1, 0], [math.sin(a), 0, math.cos(a)]])
            cap = np.array([-0.5 * r * tk if roll_on_the_floor else 0.0, 0.0, r])    # the lower cap's centre
            poses[k, :, :3, :3] = rot
            poses[k, :, :3, 3] = cap - rot @ np.array([-half, 0.0, 0.0])
            poses[k, :, 3, 3] = 1.0
        return V.contact_slip(_poses_recording(robot, t, poses, touching))

    assert tilting(True).mean_m_s < 1e-4
    assert tilting(False).mean_m_s == pytest.approx(0.5 * r, rel=1e-3)
    with pytest.raises(ValueError, match='pitch-yaw'):
        wheeled = load_robot('wheeled_8')
        V.contact_slip(_poses_recording(wheeled, t, np.zeros((t.size, wheeled.n_links, 4, 4)),
                                        touching[:, :wheeled.n_links]))


def test_format_table_and_plot(tmp_path):
    rec, c = recording('kinematic_snake_3', 'lateral_undulation', 2.0, warmup_s=1.0)
    result = V.evaluate(rec, c.gait)
    table = V.format_table([result])
    assert 'kinematic_snake_3' in table and '< 3 %, < 2 deg/m' in table
    assert f'{result.position_error_pct:.2f}' in table
    assert result.contact_agreement == 1.0
    path = tmp_path / 'paths.png'
    V.plot_paths([result, result], path)
    from pictures import assert_picture
    assert_picture(path)


def test_validate_command_rejects_bad_options(capsys):
    # Any robot and gait runs (test_validation_cmdvel); a bad duration is refused before any run.
    assert cli.main(['validate', '--duration', '-1']) == 2
    assert '--duration must be a positive number' in capsys.readouterr().err
    assert cli.main(['validate', '--warmup', '-1']) == 2


# Looser than the aims, far tighter than a broken estimator: (position % of distance, deg/m, minimum
# distance travelled in m). Serpenoid sidewinding is only required to move and give a finite estimate: its
# contacts slip (about 35 % of the body's speed in MuJoCo), so the no-slip contact model misses by ~100 %.
# AEH-sidewinding's contacts hold (slip under 20 % of the speed): about 9 % and 4 deg/m.
BOUNDS = {
    ('wheeled_8', 'lateral_undulation'): (10.0, 4.0, 3.0),
    ('kinematic_snake_3', 'lateral_undulation'): (10.0, 4.0, 0.8),
    ('pitch_yaw_32', 'serpentine'): (40.0, 3.0, 3.0),
    ('pitch_yaw_32', 'rolling'): (40.0, 15.0, 1.0),
    ('pitch_yaw_32', 'sidewinding'): (None, None, 2.0),
    ('pitch_yaw_32', 'aeh_sidewinding'): (30.0, 10.0, 2.0),
}


@pytest.mark.slow
@pytest.mark.parametrize('robot,gait', list(BOUNDS))
def test_twenty_second_runs(robot, gait):
    pct, dpm, distance = BOUNDS[(robot, gait)]
    result = V.run_case(case(robot, gait), 20.0)
    print(V.format_table([result]))
    assert result.distance_m > distance
    assert np.all(np.isfinite(result.estimated_xy_m))
    if pct is not None:
        assert result.position_error_pct < pct
        assert result.heading_error_deg_per_m < dpm


@pytest.mark.slow
def test_validate_command_prints_the_table(tmp_path, capsys):
    plot = tmp_path / 'p.png'
    args = ['validate', '--robot', 'kinematic_snake_3', '--duration', '20', '--plot', str(plot)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert 'kinematic_snake_3' in out and 'lateral_undulation' in out and 'met' in out
    from pictures import assert_picture
    assert_picture(plot)


def _path_m(xy):
    return float(np.sum(np.linalg.norm(np.diff(xy, axis=0), axis=1)))


def test_the_estimate_rolls_as_far_as_the_body_on_the_validation_floor():
    """Rolling as it ships (the validation case), on the floor the estimator is scored on: the body rolls at
    its modules' radius times their roll rate, and the estimated path is within 3 % of the true one. On
    MuJoCo's default soft contacts (0.02 s) the body slid 6 % faster in these 6 s (12 % over 20 s) and the
    estimate read 0.94 of its path (0.90; docs/physics.md, "Soft contacts slide")."""
    from snake_control.kinematics.lie import so3_log

    c = case('pitch_yaw_32', 'rolling')
    robot = load_robot(c.robot)
    assert V.VALIDATION_PHYSICS.cone == 'elliptic'
    rec = V.simulate(SnakeWorld(robot, options=V.VALIDATION_PHYSICS), V.gait_goal_fn(robot, c.gait, c.command),
                     6.0, warmup_s=V.WARMUP_S)
    result = V.evaluate(rec, c.gait, **V.case_estimator_options(c))
    middle = rec.link_poses[:, robot.n_links // 2, :3, :3]
    roll_rad = sum(abs(so3_log(a.T @ b)[0]) for a, b in zip(middle[:-1], middle[1:]))
    rolled_m = robot.module_radius_m * roll_rad
    assert rolled_m > 0.5
    assert result.distance_m == pytest.approx(rolled_m, rel=0.03)
    assert _path_m(result.estimated_xy_m) == pytest.approx(_path_m(result.true_xy_m), rel=0.03)
    assert result.position_error_pct < 5.0
