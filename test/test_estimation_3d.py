"""Pitch-yaw (3D) estimation: kinematics, virtual chassis, contacts, rolling, straight bodies, IMU."""
import dataclasses

import numpy as np
import pytest

from snake_control.estimation.contact import (ContactSelector, chain_poses, contact_step, static_loads,
                                              supporting_contacts, virtual_chassis)
from snake_control.estimation.estimator import Estimator
from snake_control.kinematics.chain import chain_frames
from snake_control.kinematics.lie import quaternion_from_matrix, so3_exp, so3_log
from snake_control.robot import load_robot

PY = load_robot('pitch_yaw_32')
RHO = PY.module_radius_m
L = PY.link_length_m
YAW = np.array([a == 'yaw' for a in PY.axes])


def _arc(kappa, psi):
    """Joint angles of a planar arc of curvature kappa (1/m) whose bending plane is rolled by psi (rad)."""
    return np.where(YAW, 2 * L * kappa * np.cos(psi), 2 * L * kappa * np.sin(psi))


def test_chain_poses_match_chain_frames():
    q = np.random.default_rng(0).uniform(-1.0, 1.0, 32)
    rot, centres = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
    frames = chain_frames(q, PY.axis_vectors, PY.link_lengths_m)
    np.testing.assert_allclose(rot, frames[:, :3, :3], atol=1e-12)
    np.testing.assert_allclose(centres, frames[:, :3, 3], atol=1e-12)


def test_virtual_chassis_frame_and_continuity():
    rng = np.random.default_rng(1)
    _, centres = chain_poses(_arc(1.0, 0.0) + rng.normal(scale=0.05, size=32), PY.axis_vectors,
                             PY.link_lengths_m)
    rot, origin, held, sv = virtual_chassis(centres)
    np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=1e-12)
    assert np.linalg.det(rot) == pytest.approx(1.0)
    np.testing.assert_allclose(origin, centres.mean(axis=0))
    assert rot[:, 0] @ (centres[-1] - centres[0]) > 0 and not held
    assert sv[0] >= sv[1] >= sv[2]
    # Rotating the module cloud rotates the frame with it, without sign flips.
    prev = rot
    for k in range(1, 40):
        turn = so3_exp(np.array([0.3, -0.2, 0.5]) * 0.1 * k)
        r_k, o_k, _, _ = virtual_chassis(centres @ turn.T, prev)
        np.testing.assert_allclose(r_k, turn @ rot, atol=1e-9)
        np.testing.assert_allclose(o_k, turn @ origin, atol=1e-12)
        prev = r_k


def test_virtual_chassis_holds_y_when_undefined():
    # A helix about x: second and third singular values equal, y is not defined by the cloud.
    s = np.linspace(0, 4 * np.pi, 60, endpoint=False)
    helix = np.stack([0.05 * s, 0.1 * np.cos(s), 0.1 * np.sin(s)], axis=1)
    previous = np.eye(3)
    previous[:, 1] = [0.0, np.cos(0.3), np.sin(0.3)]
    previous[:, 2] = np.cross(previous[:, 0], previous[:, 1])
    rot, _, held, _ = virtual_chassis(helix, previous)
    assert held
    projected = previous[:, 1] - (previous[:, 1] @ rot[:, 0]) * rot[:, 0]
    np.testing.assert_allclose(rot[:, 1], projected / np.linalg.norm(projected), atol=1e-12)
    # A straight body: only x is defined; without history y follows 'up'.
    line = np.stack([np.linspace(0, 1, 10), np.zeros(10), np.zeros(10)], axis=1)
    rot, _, held, _ = virtual_chassis(line, None, up=np.array([0.0, 0.0, 1.0]))
    assert held
    np.testing.assert_allclose(rot, np.eye(3), atol=1e-12)


@pytest.mark.parametrize('numpy_path', [False, True])
def test_a_straight_body_in_any_direction_holds_y(numpy_path):
    """A straight chain laid along a random direction: its second singular value is rounding (about 1e-8 of
    the first, not 0), and the chassis must still hold y from the last frame, not take that rounding for a
    direction (it turned y at random about the body from one message to the next)."""
    from snake_control.estimation.kernel_loading import numpy_only
    rng = np.random.default_rng(11)
    held_all = []
    for _ in range(20):
        line = np.outer(np.linspace(-1.0, 1.0, 33), rng.normal(size=3)) + rng.normal(size=3)
        previous = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        if numpy_path:
            with numpy_only():
                rot, _, held, sv = virtual_chassis(line, previous)
        else:
            rot, _, held, sv = virtual_chassis(line, previous)
        held_all.append(held)
        projected = previous[:, 1] - (previous[:, 1] @ rot[:, 0]) * rot[:, 0]
        np.testing.assert_allclose(rot[:, 1], projected / np.linalg.norm(projected), atol=1e-9)
    assert all(held_all)


def test_contact_selector_hysteresis():
    sel = ContactSelector(0.01, 0.02)
    np.testing.assert_array_equal(sel.update([0.0, 0.005, 0.015, 0.03]), [1, 1, 0, 0])
    # Module 1 rises to 0.015: between the thresholds it stays a contact; module 2 does not enter.
    np.testing.assert_array_equal(sel.update([0.0, 0.015, 0.015, 0.03]), [1, 1, 0, 0])
    np.testing.assert_array_equal(sel.update([0.0, 0.025, 0.005, 0.03]), [1, 0, 1, 0])
    with pytest.raises(ValueError, match='exit_m'):
        ContactSelector(0.02, 0.01)


def test_contact_selector_keeps_a_widened_set_until_its_modules_rise():
    """Modules added to hold the body (widen) stay contacts within exit_m, like ones chosen by height."""
    sel = ContactSelector(0.01, 0.02)
    np.testing.assert_array_equal(sel.update([0.0, 0.015, 0.015, 0.03]), [1, 0, 0, 0])
    sel.widen([True, True, False, False])
    np.testing.assert_array_equal(sel.update([0.0, 0.015, 0.015, 0.03]), [1, 1, 0, 0])
    np.testing.assert_array_equal(sel.update([0.0, 0.025, 0.015, 0.03]), [1, 0, 0, 0])


def _roll(psi_end, kappa=0.4, steps=200, **options):
    est = Estimator(PY, **options)
    states = [est.update(0.01 * k, _arc(kappa, psi_end * k / steps)) for k in range(steps + 1)]
    return est, states


def test_rolling_moves_sideways_by_radius_times_roll_angle():
    psi = np.pi / 2
    est, states = _roll(psi)
    start, end = states[0].pose, states[-1].pose
    move = end[:3, 3] - start[:3, 3]
    lateral = np.hypot(move[0], move[1])
    assert lateral == pytest.approx(RHO * psi, rel=0.1)
    # Sideways: perpendicular to the body axis, and the body stays flat on the ground.
    assert abs(move @ start[:3, 0]) < 0.1 * lateral
    assert abs(move[2]) < 0.05 * lateral
    assert end[2, 2] > np.cos(np.radians(2))
    assert all(s.contacts.all() for s in states)
    # The direction is that of a cylinder rolling on the floor: centre velocity = rho * (omega x up).
    k = PY.n_links // 2
    est_mid = Estimator(PY, body_frame=k)
    mids = [est_mid.update(0.01 * i, _arc(0.4, psi * i / 200)) for i in range(201)]
    spin = so3_log(mids[-1].pose[:3, :3] @ mids[0].pose[:3, :3].T)
    predicted = RHO * np.cross(spin, [0.0, 0.0, 1.0])
    moved = mids[-1].pose[:3, 3] - mids[0].pose[:3, 3]
    assert np.linalg.norm(spin) == pytest.approx(psi, rel=0.1)
    assert moved @ predicted / (np.linalg.norm(moved) * np.linalg.norm(predicted)) > 0.95


def test_rolling_path_is_a_straight_line_and_reverses():
    _, states = _roll(2 * np.pi, steps=400)
    xy = np.array([s.pose[:2, 3] for s in states])
    chord = xy[-1] - xy[0]
    assert np.linalg.norm(chord) == pytest.approx(2 * np.pi * RHO, rel=0.1)
    normal = np.array([-chord[1], chord[0]]) / np.linalg.norm(chord)
    assert np.max(np.abs((xy - xy[0]) @ normal)) < 0.02 * np.linalg.norm(chord)
    _, back = _roll(-2 * np.pi, steps=400)
    np.testing.assert_allclose(back[-1].pose[:2, 3] - back[0].pose[:2, 3], -chord,
                               atol=0.05 * np.linalg.norm(chord))


def test_centre_point_model_would_not_roll():
    """Without the radius term the same rolling shape change predicts (almost) no motion."""
    q0, q1 = _arc(0.4, 0.0), _arc(0.4, 0.05)
    geo = []
    prev = None
    for q in (q0, q1):
        rot_t, cen_t = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
        r_tc, o_tc, _, _ = virtual_chassis(cen_t, prev)
        prev = r_tc
        geo.append(((cen_t - o_tc) @ r_tc, np.einsum('ba,kbc->kac', r_tc, rot_t)))
    down = prev.T @ np.array([0.0, 0.0, -1.0])      # the tail frame's z is up
    contacts = np.ones(33, bool)
    with_radius = contact_step(*geo[0], *geo[1], down, RHO, contacts).displacement
    without = contact_step(*geo[0], *geo[1], down, 0.0, contacts).displacement
    assert np.linalg.norm(with_radius[:3]) == pytest.approx(RHO * 0.05, rel=0.15)
    assert np.linalg.norm(without[:3]) < 0.1 * np.linalg.norm(with_radius[:3])


def test_straight_body_stays_put_and_flags_the_free_roll():
    est = Estimator(PY)
    for k in range(20):
        s = est.update(0.01 * k, np.zeros(32))
    np.testing.assert_allclose(s.pose[:3, 3], [0.0, 0.0, RHO], atol=1e-12)
    np.testing.assert_allclose(s.pose[:3, :3], np.eye(3), atol=1e-12)
    assert s.rank == 5 and s.singular
    assert np.all(np.isfinite(s.pose_covariance)) and np.all(np.isfinite(s.twist_covariance))
    # The roll about the body axis is unobservable: its variance dwarfs the others.
    assert s.twist_covariance[3, 3] > 100 * s.twist_covariance[0, 0]


def test_flat_undulation_with_axial_slip_matches_the_planar_connection():
    """Yaw-only undulation on the floor, modules free to slide lengthwise: the 3D contact model must give
    the planar wheeled-snake connection of the same chain (pitch joints held at zero)."""
    planar = dataclasses.replace(PY, kind='planar',
                                 joints=tuple(dataclasses.replace(j, axis='yaw') for j in PY.joints))
    ts = np.arange(0.0, 1.5, 0.002)
    shapes = np.array([np.where(YAW, 0.5 * np.sin(2 * np.pi * t - 0.7 * np.arange(32) / 2) + 0.05, 0.0)
                       for t in ts])
    # Plain least squares on both sides (the planar connection has no Coulomb reweighting of its wheels).
    est3 = Estimator(PY, axial_weight=0.0, coulomb_iterations=0)
    est2 = Estimator(planar, body_frame='chassis')
    for t, q in zip(ts, shapes):
        s3 = est3.update(t, q)
        s2 = est2.update(t, q)
    assert np.hypot(*s2.pose[:2, 3]) > 0.1
    np.testing.assert_allclose(s3.pose_se2, s2.pose_se2, atol=2e-3)
    assert abs(s3.pose[2, 3] - RHO) < 1e-6 and s3.pose[2, 2] > 1 - 1e-9


def test_gyro_rate_sets_the_rotation():
    est = Estimator(PY)
    q = _arc(0.8, 0.0)
    for k in range(101):
        s = est.update(0.01 * k, q, imu_rate_rad_s=np.array([0.0, 0.0, 0.5]))
    assert s.rank_needed == 3
    yaw = np.arctan2(s.pose[1, 0], s.pose[0, 0])
    assert yaw == pytest.approx(0.5, abs=1e-6)


def test_imu_orientation_sets_the_attitude():
    est = Estimator(PY)
    q = _arc(0.8, 0.0)
    rot_t, _ = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
    turn = so3_exp(np.array([0.0, 0.0, 0.7]))
    # The IMU on the tail link reports the tail turned by 0.7 rad about the vertical.
    for k in range(5):
        s = est.update(0.01 * k, q, imu_orientation_xyzw=quaternion_from_matrix(turn))
    _, cen_t = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
    r_tc, _, _, _ = virtual_chassis(cen_t)
    np.testing.assert_allclose(s.pose[:3, :3], turn @ r_tc, atol=1e-9)
    with pytest.raises(ValueError, match='imu_orientation_xyzw'):
        est.update(1.0, q, imu_orientation_xyzw=np.zeros(4))


def test_resting_down_picks_the_supporting_face():
    from snake_control.estimation.contact import resting_down
    # A tripod of low points and one raised point: resting on the three low ones, down is -z.
    pts = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.3, 0.5]])
    np.testing.assert_allclose(resting_down(pts, [0.1, 0.0, -1.0]), [0.0, 0.0, -1.0], atol=1e-12)
    # Guessing "up is x" it rests on the face whose outward normal is nearest to -x.
    d = resting_down(pts, [-1.0, 0.0, 0.0])
    np.testing.assert_allclose(d, [-1.0, 0.0, 0.0], atol=1e-12)
    line = np.stack([np.linspace(0, 1, 5), np.zeros(5), np.zeros(5)], axis=1)
    guess = np.array([0.0, 0.2, -1.0])
    np.testing.assert_allclose(resting_down(line, guess), guess / np.linalg.norm(guess))


def test_three_dimensional_shape_rests_on_the_floor_and_flat_ground_removes_tilt():
    rng = np.random.default_rng(3)
    q = np.where(YAW, 0.4 * np.sin(0.5 * np.arange(32)), 0.25 * np.cos(0.5 * np.arange(32)))
    est = Estimator(PY)
    s = est.update(0.0, q)
    rot, centres = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
    world_tail = s.pose @ np.linalg.inv(_frame_of_chassis(centres))
    z = (centres @ world_tail[:3, :3].T + world_tail[:3, 3])[:, 2]
    assert z.min() == pytest.approx(RHO, abs=1e-9)
    assert np.sum(z < RHO + 1e-6) >= 3          # resting on a face of its hull, not on an edge
    # A wrong start (tilted 10 degrees) on a held shape is levelled by the flat-ground correction.
    tilt = np.eye(4)
    tilt[:3, :3] = so3_exp(np.array([np.radians(10), 0.0, 0.0]))
    est = Estimator(PY, initial_pose=tilt @ s.pose)
    est.update(0.0, q)
    for k in range(1, 4):
        s2 = est.update(0.01 * k, q + rng.normal(scale=1e-6, size=32))
    # Attitude restored to about a degree (the fit runs through every module in the contact band; the
    # yaw is not observable), height to a few millimetres.
    assert np.degrees(np.arccos(np.clip(s2.pose[2, :3] @ s.pose[2, :3], -1, 1))) < 1.5
    assert s2.pose[2, 3] == pytest.approx(s.pose[2, 3], abs=5e-3)
    # Without the correction the tilt stays.
    est = Estimator(PY, initial_pose=tilt @ s.pose, flat_ground=False)
    est.update(0.0, q)
    s3 = est.update(0.01, q)
    assert np.degrees(np.arccos(np.clip(s3.pose[2, :3] @ s.pose[2, :3], -1, 1))) > 8.0


def _frame_of_chassis(centres):
    r, o, _, _ = virtual_chassis(centres)
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = o
    return m


def test_reported_frame_does_not_change_the_3d_estimate():
    """Head, tail and chassis estimates describe one rigid motion: head = chassis * (head in chassis)."""
    shapes = [_arc(0.4, 0.6 * k / 100) + 0.05 * np.sin(0.3 * np.arange(32)) for k in range(101)]
    runs = {}
    for frame in ('chassis', 'head', 'tail', 7):
        est = Estimator(PY, body_frame=frame)
        runs[frame] = [est.update(0.01 * k, q) for k, q in enumerate(shapes)][-1]
    rot, cen = chain_poses(shapes[-1], PY.axis_vectors, PY.link_lengths_m)
    r_tc, o_tc, _, _ = virtual_chassis(cen)
    chassis = runs['chassis'].pose
    for frame, link in (('head', 32), ('tail', 0), (7, 7)):
        link_in_chassis = np.eye(4)
        link_in_chassis[:3, :3] = r_tc.T @ rot[link]
        link_in_chassis[:3, 3] = r_tc.T @ (cen[link] - o_tc)
        np.testing.assert_allclose(runs[frame].pose, chassis @ link_in_chassis, atol=1e-9)
    assert np.hypot(*chassis[:2, 3]) > 0.01


def test_static_loads_balance_the_weight_and_say_when_the_contacts_cannot_hold_it():
    # Three contacts around the centre: the unique loads that balance the moments, summing to 1.
    loads, ok = static_loads(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), np.array([0.2, 0.2]))
    assert ok and np.allclose(loads, [0.6, 0.2, 0.2])
    # Four around it: the most even split.
    loads, ok = static_loads(np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]), np.zeros(2))
    assert ok and np.allclose(loads, 0.25)
    # A contact on the far side of the centre from the others cannot pull: it is dropped (load 0), and
    # the two left cannot hold a centre off their line.
    loads, ok = static_loads(np.array([[1.0, 0.0], [1.0, 1.0], [-1.0, 5.0]]), np.zeros(2))
    assert not ok and loads.min() >= 0.0 and np.isclose(loads.sum(), 1.0)


def test_a_lone_contact_is_widened_until_the_body_stands_on_its_contacts():
    """A body lying flat with the attitude a little off: only the tail module is within the contact band,
    yet it cannot carry the body. The set grows, lowest module first, until the centroid stands over it."""
    q = _arc(1.0, 0.0)
    _, centres = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
    centres = centres - centres.mean(axis=0)
    down = np.array([0.0, 0.0, -1.0])
    heights = 0.02 * np.linspace(0.0, 1.0, centres.shape[0]) ** 0.5 + 0.001 * (centres[:, 1] > 0)
    alone = np.zeros(centres.shape[0], bool)
    alone[0] = True
    mask, loads = supporting_contacts(alone, heights, centres, down)
    assert mask[0] and mask.sum() >= 3
    idx = np.flatnonzero(mask)
    # the centroid (the origin) over the contacts: their loads balance its moments
    assert np.isclose(loads.sum(), 1.0) and np.all(loads[~mask] == 0.0)
    assert np.abs(centres[idx, :2].T @ loads[idx]).max() < 1e-3
    # A set that holds the body is kept as it is.
    kept, _ = supporting_contacts(mask, heights, centres, down)
    assert np.array_equal(kept, mask)


def test_a_tilted_attitude_does_not_leave_the_body_on_one_end():
    """A body lying flat, its IMU's attitude 2 degrees off about the body's long axis' normal: by height
    alone only the modules at the lower end are contacts (the demo's blend into AEH-sidewinding: the
    tail alone for 0.25 s, the estimate running 0.2 m on its lever arm). With contact_loads the set grows
    until the body's centroid stands over it."""
    q = _arc(0.3, 0.0)
    rot_t, centres = chain_poses(q, PY.axis_vectors, PY.link_lengths_m)
    tilt = so3_exp(np.array([0.0, np.radians(2.0), 0.0]))       # about y: the tail end reads lowest
    imu = quaternion_from_matrix(tilt @ rot_t[0])
    held = {}
    for loads in (False, True):
        est = Estimator(PY, imu_link=0, contact_loads=loads)
        est.update(0.0, q, imu_orientation_xyzw=imu)
        state = est.update(0.01, q + 1e-4, imu_orientation_xyzw=imu)
        idx = np.flatnonzero(state.contacts)
        xy = centres[idx, :2]
        held[loads] = (len(idx), static_loads(xy, centres[:, :2].mean(axis=0))[1])
    assert held[False][1] is False and held[False][0] < PY.n_links // 2
    assert held[True][1] is True
