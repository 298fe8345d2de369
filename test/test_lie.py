"""SE(2)/SE(3): exp/log round trips, closed-form cases, adjoint identities, small-angle series."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snake_control.kinematics import lie

finite = st.floats(-3.0, 3.0)


def test_quarter_circle_closed_form():
    # Forward 1 m/s while turning 1 rad/s for pi/2 s: a quarter of the unit circle.
    np.testing.assert_allclose(lie.se2_exp(np.array([np.pi / 2, 0, np.pi / 2])), [1, 1, np.pi / 2], atol=1e-12)


def test_se2_exp_matches_matrix_exponential():
    from scipy.linalg import expm
    twist = np.array([0.7, -0.2, 1.3])
    hat = np.array([[0, -twist[2], twist[0]], [twist[2], 0, twist[1]], [0, 0, 0]])
    np.testing.assert_allclose(lie.se2_matrix(lie.se2_exp(twist)), expm(hat), atol=1e-12)


def test_se3_exp_matches_matrix_exponential():
    from scipy.linalg import expm
    twist = np.array([0.3, -0.4, 0.2, 0.5, -1.1, 0.7])
    hat = np.zeros((4, 4))
    hat[:3, :3] = lie.so3_hat(twist[3:])
    hat[:3, 3] = twist[:3]
    np.testing.assert_allclose(lie.se3_exp(twist), expm(hat), atol=1e-12)


@pytest.mark.parametrize('phi', [0.0, 1e-9, 1e-5, 9.99e-5, 1.0001e-4, 1e-3])
def test_se2_small_angle_series_is_continuous(phi):
    exact = lie.se2_exp(np.array([1.0, 0.5, phi]))
    # Reference from a very fine composition of tiny straight steps.
    steps = 2000
    g = np.zeros(3)
    for _ in range(steps):
        g = lie.se2_compose(g, np.array([1.0 / steps, 0.5 / steps, 0.0]))
        g = lie.se2_compose(g, np.array([0.0, 0.0, phi / steps]))
    np.testing.assert_allclose(exact[:2], g[:2], atol=1e-3 * max(phi, 1e-3) + 1e-9)


@settings(max_examples=200, deadline=None)
@given(finite, finite, st.floats(-3.1, 3.1))
def test_se2_exp_log_round_trip(vx, vy, w):
    twist = np.array([vx, vy, w])
    np.testing.assert_allclose(lie.se2_log(lie.se2_exp(twist)), twist, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(finite, finite, finite, finite, finite, finite)
def test_se3_exp_log_round_trip(a, b, c, d, e, f):
    w = np.array([d, e, f])
    if np.linalg.norm(w) > 3.1:
        w = w / np.linalg.norm(w) * 3.1
    twist = np.concatenate([[a, b, c], w])
    np.testing.assert_allclose(lie.se3_log(lie.se3_exp(twist)), twist, atol=1e-8)


def test_so3_log_near_pi():
    axis = np.array([1.0, 2.0, -2.0]) / 3.0
    w = axis * (np.pi - 1e-8)
    back = lie.so3_log(lie.so3_exp(w))
    np.testing.assert_allclose(lie.so3_exp(back), lie.so3_exp(w), atol=1e-7)


def test_se2_adjoint_maps_body_to_spatial_velocity():
    # Numerically: g(t) = g0 exp(t xi); spatial velocity = g_dot g^-1 = Ad_g0 xi.
    g0 = np.array([0.4, -1.2, 0.8])
    xi = np.array([0.3, 0.1, -0.7])
    h = 1e-6
    g1 = lie.se2_matrix(lie.se2_compose(g0, lie.se2_exp(h * xi)))
    gm = lie.se2_matrix(lie.se2_compose(g0, lie.se2_exp(-h * xi)))
    xs_hat = (g1 - gm) / (2 * h) @ np.linalg.inv(lie.se2_matrix(g0))
    spatial = np.array([xs_hat[0, 2], xs_hat[1, 2], xs_hat[1, 0]])
    np.testing.assert_allclose(lie.se2_adjoint(g0) @ xi, spatial, atol=1e-8)


def test_adjoint_is_a_homomorphism():
    a, b = np.array([0.3, 0.2, 1.0]), np.array([-1.0, 0.5, -0.4])
    np.testing.assert_allclose(lie.se2_adjoint(lie.se2_compose(a, b)),
                               lie.se2_adjoint(a) @ lie.se2_adjoint(b), atol=1e-12)
    np.testing.assert_allclose(lie.se2_adjoint(lie.se2_inverse(a)), np.linalg.inv(lie.se2_adjoint(a)), atol=1e-12)
    ga = lie.se3_exp(np.array([0.1, 0.2, 0.3, 0.4, -0.2, 0.9]))
    gb = lie.se3_exp(np.array([-0.5, 0.0, 0.3, 1.0, 0.3, -0.2]))
    np.testing.assert_allclose(lie.se3_adjoint(ga @ gb), lie.se3_adjoint(ga) @ lie.se3_adjoint(gb), atol=1e-12)
    np.testing.assert_allclose(lie.se3_adjoint(lie.se3_inverse(ga)), np.linalg.inv(lie.se3_adjoint(ga)),
                               atol=1e-12)


def test_se3_adjoint_conjugates_twists():
    g = lie.se3_exp(np.array([0.1, 0.2, 0.3, 0.4, -0.2, 0.9]))
    xi = np.array([0.5, -0.1, 0.2, 0.3, 0.7, -0.4])
    hat = np.zeros((4, 4))
    hat[:3, :3] = lie.so3_hat(xi[3:])
    hat[:3, 3] = xi[:3]
    conj = g @ hat @ lie.se3_inverse(g)
    np.testing.assert_allclose(lie.se3_adjoint(g) @ xi, np.concatenate([conj[:3, 3], lie.so3_vee(conj[:3, :3])]),
                               atol=1e-12)


def test_quaternion_round_trip_and_orthonormalize():
    r = lie.so3_exp(np.array([0.3, -2.0, 1.1]))
    np.testing.assert_allclose(lie.matrix_from_quaternion(lie.quaternion_from_matrix(r)), r, atol=1e-12)
    noisy = r + 1e-3 * np.arange(9).reshape(3, 3)
    fixed = lie.orthonormalize(noisy)
    np.testing.assert_allclose(fixed @ fixed.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(fixed) == pytest.approx(1.0)


def test_wrong_shapes_raise_value_error_naming_argument():
    with pytest.raises(ValueError, match='twist'):
        lie.se2_exp(np.zeros(4))
    with pytest.raises(ValueError, match='g must have shape'):
        lie.se3_log(np.eye(3))


def test_batched_quaternions_equal_one_at_a_time_in_every_branch():
    rng = np.random.default_rng(3)
    # Random rotations, and half turns about x, y and z (trace -1: the three largest-diagonal branches).
    rs = [lie.so3_exp(rng.normal(size=3) * rng.uniform(0, np.pi)) for _ in range(200)]
    rs += [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0]), np.eye(3)]
    expected = np.array([lie.quaternion_from_matrix(r) for r in rs])
    np.testing.assert_allclose(lie.quaternions_from_matrices(np.array(rs)), expected, atol=1e-15)
    with pytest.raises(ValueError):
        lie.quaternions_from_matrices(np.eye(3))


def test_xyyaw_from_se3_is_the_planar_pose_of_a_3d_one_at_any_batch_shape():
    """A pose yawed, then pitched and rolled: the projection keeps x, y and the x axis's heading on the floor;
    a batch gives each pose's own."""
    twists = np.random.default_rng(4).uniform(-3.0, 3.0, (2, 3, 6))
    poses = np.array([[lie.se3_exp(t) for t in row] for row in twists])
    got = lie.xyyaw_from_se3(poses)
    assert got.shape == (2, 3, 3)
    for g, xyyaw in zip(poses.reshape(-1, 4, 4), got.reshape(-1, 3)):
        x_axis = g[:3, 0]
        np.testing.assert_allclose(xyyaw, [g[0, 3], g[1, 3], np.arctan2(x_axis[1], x_axis[0])], atol=1e-15)
    # A planar pose through its 4x4 matrix comes back as it was.
    g = np.eye(4)
    g[:2, :2], g[:2, 3] = lie.rot2(-2.5), (0.3, -0.7)
    np.testing.assert_allclose(lie.xyyaw_from_se3(g), [0.3, -0.7, -2.5], atol=1e-15)
    with pytest.raises(ValueError, match=r'\(\.\.\., 4, 4\)'):
        lie.xyyaw_from_se3(np.eye(3))
