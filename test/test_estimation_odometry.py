"""Planar odometry: kinematic ground truth, mid-point convergence, frames, singular shapes, covariance."""
import numpy as np
import pytest

from snake_control.estimation.connection import planar_body_frame, planar_connection
from snake_control.estimation.estimator import Estimator, run_offline
from snake_control.kinematics.chain import planar_chain, planar_jacobians
from snake_control.kinematics.lie import se2_compose, se2_inverse
from snake_control.robot import load_robot, reorder_joints

W8 = load_robot('wheeled_8')


def _shape(t):
    i = np.arange(7)
    return 0.5 * np.sin(np.pi * t - 0.9 * i) + 0.1


def _shape_dot(t):
    i = np.arange(7)
    return 0.5 * np.pi * np.cos(np.pi * t - 0.9 * i)


def _ground_truth(t_end, dt=1e-3, frame='middle'):
    """RK4 of g_dot = g xi, xi = -A(r(t)) r_dot(t), in coordinates (x, y, theta)."""
    def f(t, g):
        xi = planar_connection(_shape(t), W8.link_lengths_m, frame).twist(_shape_dot(t))
        c, s = np.cos(g[2]), np.sin(g[2])
        return np.array([c * xi[0] - s * xi[1], s * xi[0] + c * xi[1], xi[2]])
    g = np.zeros(3)
    t = 0.0
    for _ in range(int(round(t_end / dt))):
        k1 = f(t, g)
        k2 = f(t + dt / 2, g + dt / 2 * k1)
        k3 = f(t + dt / 2, g + dt / 2 * k2)
        k4 = f(t + dt, g + dt * k3)
        g = g + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += dt
    return g


def _odometry(rate_hz, t_end, frame='middle'):
    ts = np.arange(0.0, t_end + 1e-9, 1.0 / rate_hz)
    states = run_offline(W8, ts, np.array([_shape(t) for t in ts]), body_frame=frame)
    return states[-1].pose_se2


def test_kinematic_ground_truth_wheeled_8_second_order():
    t_end = 3.0
    truth = _ground_truth(t_end)
    distance = np.hypot(truth[0], truth[1])
    assert distance > 0.2                         # the gait really moves the robot
    errors = []
    for rate in (20.0, 40.0):
        est = _odometry(rate, t_end)
        errors.append(np.hypot(*(est[:2] - truth[:2])) + 0.1 * abs(est[2] - truth[2]))
    assert errors[1] < 0.01 * distance
    # Mid-point rule: halving the step divides the error by about four.
    assert errors[1] < errors[0] / 3.0


def _frame_pose(shape, frame):
    c, h = planar_chain(shape, W8.link_lengths_m)
    dc, dh = planar_jacobians(shape, W8.link_lengths_m)
    return planar_body_frame(c, h, dc, dh, frame)[0]


def test_odometry_does_not_depend_on_body_frame():
    """Start every frame where the tail is at the origin; the tail ends at the same pose."""
    ts = np.arange(0.0, 1.5 + 1e-9, 2e-3)
    shapes = np.array([_shape(t) for t in ts])
    tails = []
    for frame in ('middle', 'head', 'chassis', 0, 5):
        est_end = run_offline(W8, ts, shapes, body_frame=frame,
                              initial_pose=_frame_pose(shapes[0], frame))[-1].pose_se2
        tails.append(se2_compose(est_end, se2_inverse(_frame_pose(shapes[-1], frame))))
    assert np.hypot(*tails[0][:2]) > 0.1
    for tail in tails[1:]:
        np.testing.assert_allclose(tail, tails[0], atol=1e-4)


def test_three_link_singular_crossing_never_nan_and_raises_covariance():
    robot = load_robot('kinematic_snake_3')
    est = Estimator(robot)
    ts = np.arange(0.0, 6.5, 0.01)
    flags, covs = [], []
    for t in ts:
        alpha = np.radians(40) * np.array([np.sin(t), np.sin(t + np.radians(25))])
        s = est.update(t, alpha)
        assert np.all(np.isfinite(s.pose)) and np.all(np.isfinite(s.twist))
        assert np.all(np.isfinite(s.pose_covariance)) and np.all(np.isfinite(s.twist_covariance))
        flags.append(s.singular)
        covs.append(s.twist_covariance[5, 5])
    flags, covs = np.array(flags), np.array(covs)
    # The seed-000 gait crosses alpha1 = alpha2 twice per period: flagged there, with more variance.
    assert flags.any() and not flags.all()
    assert np.median(covs[flags]) > 10 * np.median(covs[~flags & (covs > 0)])
    # A body held straight, and an arc, are singular but stay finite.
    for alpha in (np.zeros(2), np.array([0.5, 0.5])):
        est = Estimator(robot)
        est.update(0.0, alpha)
        s = est.update(0.01, alpha + np.array([0.01, 0.01]))
        assert s.singular and np.all(np.isfinite(s.pose)) and np.all(np.isfinite(s.pose_covariance))


def test_covariance_grows_and_follows_slip():
    ts = np.arange(0.0, 2.0, 0.01)
    clean = np.array([_shape(t) for t in ts])
    rng = np.random.default_rng(7)
    noisy = clean + rng.normal(scale=0.01, size=clean.shape)
    s_clean = run_offline(W8, ts, clean)
    s_noisy = run_offline(W8, ts, noisy)
    traces = [np.trace(s.pose_covariance[:2, :2]) for s in s_clean]
    assert np.all(np.diff(traces[1:]) >= -1e-12) and traces[-1] > traces[10] > 0
    # Joint angles inconsistent with no slip leave a slip residual, which raises the covariance.
    assert np.mean([s.slip_rms_m_s for s in s_noisy]) > 5 * np.mean([s.slip_rms_m_s for s in s_clean])
    assert np.trace(s_noisy[-1].pose_covariance) > 2 * np.trace(s_clean[-1].pose_covariance)


def test_velocities_refine_the_reported_twist_only():
    ts = np.arange(0.0, 1.0, 0.02)
    q = np.array([_shape(t) for t in ts])
    v = np.array([_shape_dot(t) for t in ts])
    a = run_offline(W8, ts, q)
    b = run_offline(W8, ts, q, velocities_rad_s=v)
    np.testing.assert_allclose(a[-1].pose, b[-1].pose)
    # The reported twist uses the measured rates: it agrees with the exact connection at mid-step.
    t_mid = 0.5 * (ts[-1] + ts[-2])
    exact = planar_connection(0.5 * (q[-1] + q[-2]), W8.link_lengths_m).twist(0.5 * (v[-1] + v[-2]))
    np.testing.assert_allclose(b[-1].twist[[0, 1, 5]], exact, atol=1e-12)
    assert not np.allclose(a[-1].twist[[0, 1, 5]], planar_connection(_shape(t_mid), W8.link_lengths_m).twist(
        _shape_dot(t_mid)), atol=1e-9)


def test_initial_pose_and_reset_and_stale_stamps():
    est = Estimator(W8, initial_pose=(1.0, 2.0, 0.5))
    s = est.update(0.0, _shape(0.0))
    np.testing.assert_allclose(s.pose_se2, [1.0, 2.0, 0.5])
    est.update(0.1, _shape(0.1))
    before = est.pose.copy()
    est.update(0.1, _shape(0.3))          # repeated stamp: ignored
    est.update(0.05, _shape(0.3))         # older stamp: ignored
    assert est.skipped == 2
    np.testing.assert_allclose(est.pose, before)
    est.reset((0.0, 0.0, 0.0))
    assert not est.initialised
    np.testing.assert_allclose(est.update(5.0, _shape(0.2)).pose_se2, 0.0)


def test_bad_input_is_named():
    est = Estimator(W8)
    with pytest.raises(ValueError, match='positions_rad'):
        est.update(0.0, np.zeros(6))
    with pytest.raises(ValueError, match='positions_rad'):
        est.update(0.0, np.full(7, np.nan))
    with pytest.raises(ValueError, match='body_frame'):
        Estimator(W8, body_frame='belly')
    with pytest.raises(ValueError, match='weights'):
        Estimator(W8, weights=np.ones(3))
    with pytest.raises(ValueError, match='initial_pose'):
        Estimator(W8, initial_pose=np.zeros(5))


def test_reorder_joints():
    names = ['joint_3', 'joint_1', 'joint_2']
    np.testing.assert_allclose(reorder_joints(names, [3.0, 1.0, 2.0], ['joint_1', 'joint_2', 'joint_3']),
                               [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match='joint_4'):
        reorder_joints(names, [3.0, 1.0, 2.0], ['joint_1', 'joint_4'])


def test_seed000_gait_crosses_the_singular_set_without_losing_the_motion():
    """Seed 000's gait crosses alpha1 = alpha2 with alpha1_dot = -alpha2_dot, where the true twist stays
    finite: the estimator must follow the closed-form motion through the crossing (holding the weak
    direction), not stall there."""
    from snake_control.estimation.connection import three_link_connection
    from snake_control.kinematics.lie import se2_exp
    robot = load_robot('kinematic_snake_3')

    def alpha(t):
        return np.radians(40) * np.array([np.sin(t), np.sin(t + np.radians(25))])
    ts = np.arange(0.0, 4 * np.pi, 0.01)
    fine = np.linspace(0.0, ts[-1], 10001) + 1e-9      # never exactly on the singular set
    truth = np.zeros(3)
    for a, b in zip(fine[:-1], fine[1:]):
        step = -three_link_connection(alpha(0.5 * (a + b)), robot.link_length_m) @ (alpha(b) - alpha(a))
        truth = se2_compose(truth, se2_exp(step))
    est = run_offline(robot, ts, np.array([alpha(t) for t in ts]))[-1].pose_se2
    distance = np.hypot(*truth[:2])
    assert distance > 1.0
    assert np.hypot(*(est[:2] - truth[:2])) < 0.03 * distance
    assert abs(est[2] - truth[2]) < 0.02


def test_body_pose_from_links_matches_the_estimator_frames():
    """The validation helper computes the same body frames from true link poses as the estimator uses."""
    from snake_control.estimation.connection import planar_frame_offset
    from snake_control.estimation.estimator import body_pose_from_links
    shape = _shape(0.3)
    g_mid = np.array([0.4, -0.2, 0.7])
    c, h = planar_chain(shape, W8.link_lengths_m)
    hm = _frame_pose(shape, 'middle')
    links = []
    for k in range(8):
        pose = se2_compose(se2_compose(g_mid, se2_inverse(hm)), np.array([c[k, 0], c[k, 1], h[k]]))
        m = np.eye(4)
        m[:2, :2] = [[np.cos(pose[2]), -np.sin(pose[2])], [np.sin(pose[2]), np.cos(pose[2])]]
        m[:2, 3] = pose[:2]
        links.append(m)
    links = np.array(links)
    got = body_pose_from_links(W8, links, 'middle')
    np.testing.assert_allclose([got[0, 3], got[1, 3], np.arctan2(got[1, 0], got[0, 0])], g_mid, atol=1e-12)
    h_chassis, _, _ = planar_frame_offset(shape, W8.link_lengths_m, 'middle', 'chassis')
    expected = se2_compose(g_mid, h_chassis)
    got = body_pose_from_links(W8, links, 'chassis')
    np.testing.assert_allclose([got[0, 3], got[1, 3], np.arctan2(got[1, 0], got[0, 0])], expected, atol=1e-12)
    # Pitch-yaw: the chassis from world link poses equals the estimator's initial chassis pose.
    from snake_control.estimation.contact import chain_poses
    py = load_robot('pitch_yaw_32')
    q = 0.3 * np.sin(0.4 * np.arange(32))
    est = Estimator(py)
    state = est.update(0.0, q)
    rot, cen = chain_poses(q, py.axis_vectors, py.link_lengths_m)
    world_tail = state.pose @ np.linalg.inv(_chassis_in_tail(rot, cen))
    links3 = np.array([world_tail @ _frame(r, p) for r, p in zip(rot, cen)])
    np.testing.assert_allclose(body_pose_from_links(py, links3), state.pose, atol=1e-9)


def _frame(r, p):
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = p
    return m


def _chassis_in_tail(rot, cen):
    from snake_control.estimation.contact import virtual_chassis
    r, o, _, _ = virtual_chassis(cen)
    return _frame(r, o)


def test_a_straight_snake_at_rest_does_not_drift():
    """Straightening while moving holds the unobservable forward speed only while the shape moves."""
    est = Estimator(W8)
    ts = np.arange(0.0, 1.0, 0.01)
    for t in ts:                                       # undulate, then flatten out linearly to straight
        est.update(t, _shape(t) * max(0.0, 1.0 - t))
    est.update(1.0, np.zeros(7))                       # straight now
    moving = est.pose_se2.copy()
    for t in np.arange(1.01, 3.0, 0.01):               # held straight and still
        s = est.update(t, np.zeros(7))
    np.testing.assert_allclose(s.pose_se2, moving, atol=1e-9)
    assert s.singular and np.all(np.isfinite(s.pose_covariance))


def test_track_error_metrics():
    from snake_control.estimation.metrics import track_error
    import doctest
    import snake_control.estimation.metrics as metrics
    assert doctest.testmod(metrics).failed == 0
    # Alignment: the same motion started elsewhere and turned compares as exact.
    t = np.linspace(0.0, 1.0, 50)
    truth = np.stack([np.sin(t), 1 - np.cos(t), t], axis=1)
    moved = np.array([se2_compose(np.array([3.0, -1.0, 0.8]), p) for p in truth])
    e = track_error(moved, truth)
    assert e['final_position_error_m'] < 1e-12 and e['heading_error_deg'] < 1e-9
    assert e['distance_m'] == pytest.approx(1.0, rel=1e-3)       # a unit-radius arc of 1 rad
    assert track_error(moved, truth, align_start=False)['final_position_error_m'] > 1.0
    with pytest.raises(ValueError, match='same number'):
        track_error(truth[:10], truth)
