"""Chain forward kinematics and Jacobians: finite differences, seed 003's closed form (eq. 18),
planar/3D agreement, frame changes."""
import numpy as np
import pytest

from snake_control.kinematics import chain
from snake_control.robot import load_robot

rng = np.random.default_rng(7)


def test_seed_003_eq18_head_centre_with_virtual_link():
    # Seed 003: a virtual link DL from the global origin at angle q0, then three links of length L with
    # joint angles q1, q2, q3; eq. 18 is the head link's centre of mass. Our chain: link 0 is the virtual
    # link (its frame rotated by q0), so eq. 18 is the head centre expressed from the virtual link's tail.
    dl, l = 0.35, 0.2
    for q in rng.uniform(-1.2, 1.2, size=(20, 4)):
        q0, q1, q2, q3 = q
        eq18 = np.array([
            dl * np.cos(q0) + l * np.cos(q0 + q1) + l * np.cos(q0 + q1 + q2) + l * np.cos(q0 + q1 + q2 + q3) / 2,
            dl * np.sin(q0) + l * np.sin(q0 + q1) + l * np.sin(q0 + q1 + q2) + l * np.sin(q0 + q1 + q2 + q3) / 2,
        ])
        # Links: [virtual DL, L, L, L(head)]; joints q1, q2, q3. The chain origin is link 0's centre,
        # which seed 003 places DL/2 from the global origin along q0.
        centres, _ = chain.planar_chain(np.array([q1, q2, q3]), np.array([dl, l, l, l]), base_heading_rad=q0)
        origin = 0.5 * dl * np.array([np.cos(q0), np.sin(q0)])
        np.testing.assert_allclose(origin + centres[3], eq18, atol=1e-12)


def test_planar_matches_3d_chain_with_yaw_axes():
    n = 7
    q = rng.uniform(-1, 1, n)
    lengths = rng.uniform(0.05, 0.3, n + 1)
    centres, headings = chain.planar_chain(q, lengths)
    frames = chain.chain_frames(q, np.tile([0.0, 0.0, 1.0], (n, 1)), lengths)
    np.testing.assert_allclose(frames[:, :2, 3], centres, atol=1e-12)
    np.testing.assert_allclose(np.arctan2(frames[:, 1, 0], frames[:, 0, 0]), np.angle(np.exp(1j * headings)),
                               atol=1e-12)
    np.testing.assert_allclose(frames[:, 2, 3], 0, atol=1e-15)


def test_planar_chain_batches():
    q = rng.uniform(-1, 1, (4, 5, 3))
    centres, headings = chain.planar_chain(q, 0.1)
    assert centres.shape == (4, 5, 4, 2) and headings.shape == (4, 5, 4)
    single, _ = chain.planar_chain(q[2, 3], 0.1)
    np.testing.assert_allclose(centres[2, 3], single)


def test_planar_jacobians_against_finite_differences():
    n, h = 6, 1e-6
    q = rng.uniform(-1, 1, n)
    lengths = rng.uniform(0.1, 0.2, n + 1)
    dc, dh = chain.planar_jacobians(q, lengths)
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        cp, hp = chain.planar_chain(q + e, lengths)
        cm, hm = chain.planar_chain(q - e, lengths)
        np.testing.assert_allclose(dc[:, :, j], (cp - cm) / (2 * h), atol=1e-8)
        np.testing.assert_allclose(dh[:, j], (hp - hm) / (2 * h), atol=1e-8)


@pytest.mark.parametrize('robot_name', ['pitch_yaw_32', 'wheeled_8'])
def test_chain_jacobian_against_finite_differences(robot_name):
    robot = load_robot(robot_name)
    q = rng.uniform(-0.8, 0.8, robot.n_joints)
    jv, jw = chain.chain_jacobian(q, robot.axis_vectors, robot.link_lengths_m)
    h = 1e-6
    for j in rng.choice(robot.n_joints, size=min(6, robot.n_joints), replace=False):
        e = np.zeros(robot.n_joints)
        e[j] = h
        fp = chain.robot_frames(robot, q + e)
        fm = chain.robot_frames(robot, q - e)
        np.testing.assert_allclose(jv[:, :, j], (fp[:, :3, 3] - fm[:, :3, 3]) / (2 * h), atol=1e-8)
        # Angular: (R+ - R-)/2h R^T is the skew matrix of the angular velocity per unit joint rate.
        f0 = chain.robot_frames(robot, q)
        for k in range(robot.n_links):
            skew = (fp[k, :3, :3] - fm[k, :3, :3]) / (2 * h) @ f0[k, :3, :3].T
            np.testing.assert_allclose(jw[k, :, j], [skew[2, 1], skew[0, 2], skew[1, 0]], atol=1e-8)


def test_pitch_rotates_toward_minus_z_and_yaw_toward_plus_y():
    frames = chain.chain_frames(np.array([0.5]), np.array([[0.0, 1.0, 0.0]]), 1.0)
    assert frames[1, 2, 3] < 0          # positive pitch about +y tilts the next link down
    frames = chain.chain_frames(np.array([0.5]), np.array([[0.0, 0.0, 1.0]]), 1.0)
    assert frames[1, 1, 3] > 0          # positive yaw turns it to the left


def test_relative_to_puts_the_chosen_link_at_identity():
    robot = load_robot('pitch_yaw_32')
    frames = chain.robot_frames(robot, rng.uniform(-0.5, 0.5, robot.n_joints))
    rel = chain.relative_to(frames, 16)
    np.testing.assert_allclose(rel[16], np.eye(4), atol=1e-12)
    # Distances between links are invariant.
    np.testing.assert_allclose(np.linalg.norm(rel[3, :3, 3] - rel[20, :3, 3]),
                               np.linalg.norm(frames[3, :3, 3] - frames[20, :3, 3]), atol=1e-12)
    centres, headings = chain.planar_chain(rng.uniform(-1, 1, 5), 0.2)
    c2, h2 = chain.planar_relative_to(centres, headings, 2)
    np.testing.assert_allclose(c2[2], 0, atol=1e-12)
    assert h2[2] == pytest.approx(0)


def test_straight_chain_is_along_x():
    robot = load_robot('pitch_yaw_32')
    frames = chain.robot_frames(robot, np.zeros(robot.n_joints))
    np.testing.assert_allclose(frames[:, 0, 3], np.arange(robot.n_links) * robot.link_length_m, atol=1e-12)
    np.testing.assert_allclose(frames[:, 1:3, 3], 0, atol=1e-15)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match='link_lengths_m'):
        chain.planar_chain(np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match='axes'):
        chain.chain_frames(np.zeros(3), np.zeros((2, 3)), 1.0)
