"""odom -> link_0 (the URDF root) from the body estimate: for a chain placed anywhere in the world, the
body frame's world pose and the shape give back link 0's world pose, for every body frame choice."""
import numpy as np
import pytest

from snake_control.estimation.estimator import Estimator, body_pose_from_links, root_link_pose
from snake_control.kinematics.chain import chain_frames
from snake_control.kinematics.lie import se3_exp
from snake_control.robot import load_robot


@pytest.mark.parametrize('robot_name, body_frame', [
    ('wheeled_8', None), ('wheeled_8', 'head'), ('wheeled_8', 'chassis'), ('kinematic_snake_3', None),
    ('pitch_yaw_32', None), ('pitch_yaw_32', 'middle'), ('pitch_yaw_32', 3)])
def test_root_pose_recovers_link_0(robot_name, body_frame):
    robot = load_robot(robot_name)
    rng = np.random.default_rng(11)
    for _ in range(5):
        q = rng.uniform(robot.lower_rad, robot.upper_rad) * 0.5
        if robot.kind == 'planar':
            world = se3_exp(np.array([*rng.normal(size=2), 0.0, 0.0, 0.0, rng.uniform(-3, 3)]))
        else:
            world = se3_exp(rng.normal(size=6))
        links_world = np.einsum('ab,kbc->kac', world, chain_frames(q, robot.axis_vectors, robot.link_lengths_m))
        body = body_pose_from_links(robot, links_world, body_frame)
        root, body_in_root = root_link_pose(robot, body, q, body_frame)
        np.testing.assert_allclose(root, links_world[0], atol=1e-9)
        np.testing.assert_allclose(root @ body_in_root, body, atol=1e-9)


@pytest.mark.parametrize('body_frame', [None, 'middle', 3, 'head'])
def test_the_estimators_own_root_pose_is_root_link_pose(body_frame):
    """Estimator.root_pose (from the update's own chain geometry) gives what root_link_pose computes
    again from the shape, along a moving gait; planar robots have none."""
    robot = load_robot('pitch_yaw_32')
    est = Estimator(robot, body_frame)
    assert est.root_pose() is None
    k = np.arange(robot.n_joints)
    previous = None
    for t in np.arange(0.0, 3.0, 0.01):
        q = 0.5 * np.sin(0.7 * k - 6.0 * t) * (k % 2) + 0.3 * np.sin(0.35 * k - 3.0 * t) * (1 - k % 2)
        est.update(t, q)
        root, previous = root_link_pose(robot, est.pose, q, body_frame, previous)
        np.testing.assert_allclose(est.root_pose(), root, atol=1e-9)
    planar = Estimator(load_robot('wheeled_8'))
    planar.update(0.0, np.zeros(7))
    assert planar.root_pose() is None
