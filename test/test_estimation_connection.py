"""The planar local connection: closed form, N-link least squares, seed 002's constraints, frames."""
import numpy as np
import pytest

from snake_control.estimation.connection import (planar_body_frame, planar_connection, planar_constraints,
                                                 planar_frame_change, three_link_connection)
from snake_control.kinematics.chain import planar_chain, planar_jacobians, planar_relative_to
from snake_control.kinematics.lie import se2_compose, se2_exp


def test_regression_values_from_math_md():
    a = three_link_connection(np.array([0.3, -0.5]), 1.0)
    np.testing.assert_allclose(-a @ [1.0, 0.0], [-0.629089, 0.0, 0.321266], atol=1e-6)
    np.testing.assert_allclose(-a @ [0.0, 1.0], [-0.655141, 0.0, -0.198030], atol=1e-6)
    d = np.sin(0.3) - np.sin(-0.5) + np.sin(0.8)
    assert d == pytest.approx(1.492302, abs=1e-6)
    assert d == pytest.approx(4 * np.sin(0.4) * np.cos(0.15) * np.cos(-0.25), abs=1e-12)


@pytest.mark.parametrize('length', [1.0, 0.2])
def test_closed_form_equals_least_squares_at_three_links(length):
    rng = np.random.default_rng(1)
    for _ in range(200):
        alpha = rng.uniform(-1.4, 1.4, 2)
        if abs(alpha[0] - alpha[1]) < 0.3:
            continue
        res = planar_connection(alpha, length, 'middle')
        assert not res.singular and res.rank == 3
        np.testing.assert_allclose(res.connection, three_link_connection(alpha, length), atol=1e-10)
        # Three wheels, three unknowns: the no-slip solution is exact.
        np.testing.assert_allclose(res.residual(rng.normal(size=2)), 0.0, atol=1e-12)


def _seed002_rows(theta, phi1, phi2):
    """Seed 002 equation (9) as rows acting on (x_dot, y_dot, theta_dot, phi1_dot, phi2_dot).

    (x, y, theta): the tail end and heading of link 1, unit links.
    """
    return np.array([
        [-2 * np.sin(theta), 2 * np.cos(theta), 1.0, 0.0, 0.0],
        [-2 * np.sin(phi1 + theta), 2 * np.cos(phi1 + theta), 2 * np.cos(phi1) + 1.0, 1.0, 0.0],
        [-2 * np.sin(phi1 + phi2 + theta), 2 * np.cos(phi1 + phi2 + theta),
         2 * np.cos(phi2) + 2 * np.cos(phi1 + phi2) + 1.0, 2 * np.cos(phi2) + 1.0, 1.0],
    ])


def test_constraint_rows_equal_seed002_equation_9():
    # Change of variables: the tail link's centre frame is (x, y, theta) moved L/2 along its heading, so
    # xi_tail = T(theta) (x_dot, y_dot, theta_dot) with T = [[c, s, 0], [-s, c, L/2], [0, 0, 1]]; seed 002
    # writes each constraint as 2/L times the lateral velocity of the link centre (L = 1).
    rng = np.random.default_rng(2)
    for _ in range(50):
        theta, phi1, phi2 = rng.uniform(-np.pi, np.pi, 3)
        c_xi, c_r, _, _ = planar_constraints(np.array([phi1, phi2]), 1.0, 'tail')
        t = np.array([[np.cos(theta), np.sin(theta), 0.0], [-np.sin(theta), np.cos(theta), 0.5], [0, 0, 1]])
        ours = 2.0 * np.hstack([c_xi @ t, c_r])
        np.testing.assert_allclose(ours, _seed002_rows(theta, phi1, phi2), atol=1e-12)


@pytest.mark.parametrize('frame', ['middle', 'head', 'tail', 'chassis', 3])
def test_constraints_jacobian_matches_finite_differences(frame):
    """Row i of C_r is n_i . d p_i / d r with p_i in the (shape-dependent) body frame."""
    rng = np.random.default_rng(3)
    alpha = rng.uniform(-0.8, 0.8, 7)
    c_xi, c_r, p, phi = planar_constraints(alpha, 0.14, frame)
    eps = 1e-6
    for j in range(7):
        da = np.zeros(7)
        da[j] = eps
        _, _, pp, _ = planar_constraints(alpha + da, 0.14, frame)
        _, _, pm, _ = planar_constraints(alpha - da, 0.14, frame)
        dp = (pp - pm) / (2 * eps)
        lateral = -np.sin(phi) * dp[:, 0] + np.cos(phi) * dp[:, 1]
        np.testing.assert_allclose(c_r[:, j], lateral, atol=1e-7)
    # C_xi: the lateral velocity of a point p fixed in the body frame moving with twist xi.
    xi = rng.normal(size=3)
    v = xi[:2][None, :] + xi[2] * np.stack([-p[:, 1], p[:, 0]], axis=1)
    np.testing.assert_allclose(c_xi @ xi, -np.sin(phi) * v[:, 0] + np.cos(phi) * v[:, 1], atol=1e-12)


def test_chassis_frame_jacobian_matches_finite_differences():
    rng = np.random.default_rng(4)
    alpha = rng.uniform(-0.8, 0.8, 7)

    def frame(a):
        c, h = planar_chain(a, 0.14)
        dc, dh = planar_jacobians(a, 0.14)
        return planar_body_frame(c, h, dc, dh, 'chassis')
    h0, dh0 = frame(alpha)
    for j in range(7):
        da = np.zeros(7)
        da[j] = 1e-6
        np.testing.assert_allclose((frame(alpha + da)[0] - frame(alpha - da)[0]) / 2e-6, dh0[:, j], atol=1e-6)


@pytest.mark.parametrize('frame', ['head', 'tail', 'chassis', 2])
def test_estimate_does_not_depend_on_body_frame(frame):
    """The world motion of every wheel is the same whichever frame carries the estimate."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        alpha = rng.uniform(-0.9, 0.9, 7)
        r_dot = rng.normal(size=7)
        xi_mid = planar_connection(alpha, 0.14, 'middle').twist(r_dot)
        xi_other = planar_connection(alpha, 0.14, frame).twist(r_dot)
        ad, b = planar_frame_change(alpha, 0.14, 'middle', frame)
        np.testing.assert_allclose(xi_other, ad @ xi_mid + b @ r_dot, atol=1e-10)


def test_three_link_motion_has_no_lateral_wheel_slip_by_finite_differences():
    """Integrate xi = -A alpha_dot finely and differentiate the world wheel positions numerically."""
    def alpha(t):
        return np.radians(40) * np.array([np.sin(t), np.sin(t + np.radians(25))])

    def alpha_dot(t):
        return np.radians(40) * np.array([np.cos(t), np.cos(t + np.radians(25))])
    dt = 1e-4
    ts = np.arange(0.0, 1.0, dt)
    g = np.zeros(3)
    poses = []
    for t in ts:
        poses.append(g)
        xi = -three_link_connection(alpha(t + dt / 2), 0.2) @ alpha_dot(t + dt / 2)
        g = se2_compose(g, se2_exp(xi * dt))

    def wheels(k):
        c, h = planar_relative_to(*planar_chain(alpha(ts[k]), 0.2), 1)    # middle link frame
        gx, gy, gt = poses[k]
        rot = np.array([[np.cos(gt), -np.sin(gt)], [np.sin(gt), np.cos(gt)]])
        return c @ rot.T + [gx, gy], h + gt
    for k in range(100, 9000, 731):
        pm, _ = wheels(k - 1)
        pp, _ = wheels(k + 1)
        _, h = wheels(k)
        v = (pp - pm) / (2 * dt)
        lateral = -np.sin(h) * v[:, 0] + np.cos(h) * v[:, 1]
        assert np.max(np.abs(lateral)) < 1e-5 * max(1.0, np.max(np.abs(v)))
        assert np.max(np.abs(v)) > 1e-2      # it does move


@pytest.mark.parametrize('n_joints', [2, 7])
def test_singular_set_stays_finite_with_raised_covariance(n_joints):
    regular = planar_connection(np.linspace(-0.6, 0.6, n_joints), 0.2)
    assert not regular.singular
    for value in [0.0, 0.3, -0.7, 1.2]:
        for offset in [0.0, 1e-9, 1e-5]:
            alpha = np.full(n_joints, value)
            alpha[0] += offset
            res = planar_connection(alpha, 0.2)
            assert np.all(np.isfinite(res.connection)) and np.all(np.isfinite(res.normal_inverse))
            assert res.singular
            assert res.rank <= 3
            # Covariance raised: the poorly observed direction has far more variance than anywhere regular.
            assert np.max(np.linalg.eigvalsh(res.normal_inverse)) > 100 * np.max(np.linalg.eigvalsh(
                regular.normal_inverse))
            assert np.all(np.isfinite(res.twist(np.ones(n_joints))))
    # The closed form itself is undefined there, which is why the estimator never uses it directly.
    assert not np.all(np.isfinite(three_link_connection(np.array([0.4, 0.4]), 0.2)))


def test_straight_body_rank_and_sideways_blocked():
    res = planar_connection(np.zeros(7), 0.14)
    assert res.rank == 2 and res.singular
    # A straight snake can roll forward freely (x is unobservable from shape) but never sideways.
    c_xi = res.c_xi
    np.testing.assert_allclose(c_xi[:, 0], 0.0, atol=1e-15)


def test_weights_drop_a_wheel():
    rng = np.random.default_rng(6)
    alpha = rng.uniform(-0.8, 0.8, 7)
    w = np.ones(8)
    w[3] = 0.0
    res = planar_connection(alpha, 0.14, weights=w)
    r_dot = rng.normal(size=7)
    full = planar_connection(alpha, 0.14).twist(r_dot)
    assert not np.allclose(res.twist(r_dot), full)
    # Equivalent to deleting the row.
    keep = np.arange(8) != 3
    c_xi, c_r, _, _ = planar_constraints(alpha, 0.14)
    xi = -np.linalg.lstsq(c_xi[keep], c_r[keep] @ r_dot, rcond=None)[0]
    np.testing.assert_allclose(res.twist(r_dot), xi, atol=1e-10)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match='alpha_rad'):
        three_link_connection(np.zeros(3), 1.0)
    with pytest.raises(ValueError, match='angles_rad'):
        planar_connection(np.array([np.nan, 0.0]), 1.0)
    with pytest.raises(ValueError, match='body_frame'):
        planar_connection(np.zeros(2), 1.0, 'nose')
    with pytest.raises(ValueError, match='weights'):
        planar_connection(np.zeros(2), 1.0, weights=np.ones(2))


@pytest.mark.parametrize('module', ['snake_control.estimation.connection',
                                    'snake_control.estimation.estimator'])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
