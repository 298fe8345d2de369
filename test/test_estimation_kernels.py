"""The compiled kernels (snake_control.estimation.kernels) give the numpy path's results to rounding."""
import numpy as np
import pytest

from snake_control.estimation import contact
from snake_control.estimation.contact import chain_poses, contact_step, support_plane
from snake_control.estimation.estimator import Estimator
from snake_control.estimation.kernel_loading import numpy_only
from snake_control.robot import load_robot

pytestmark = pytest.mark.skipif(contact.compiled() is None, reason='numba not installed')


@pytest.fixture
def numpy_path():
    """Switch the kernels off for the duration of a `with`-less call: returns a function running f that way."""
    def run(f, *args, **kwargs):
        with numpy_only():
            return f(*args, **kwargs)
    return run


def _shapes(robot, n, seed):
    rng = np.random.default_rng(seed)
    t = 0.01 * np.arange(n)
    wave = 2 * np.pi * 0.5 * t[:, None] + 0.5 * np.arange(robot.n_joints)[None, :]
    yaw = np.array([a == 'yaw' for a in robot.axes])
    q = np.where(yaw, 0.5 * np.sin(wave), 0.3 * np.sin(wave + np.pi / 2))
    return t, q + 0.2 * np.sin(0.4 * t)[:, None] * rng.standard_normal(robot.n_joints)


def test_chain_and_plane_match_numpy(numpy_path):
    robot = load_robot('pitch_yaw_32')
    _, q = _shapes(robot, 40, 0)
    for shape in q[::7]:
        rot_k, cen_k = chain_poses(shape, robot.axis_vectors, robot.link_lengths_m)
        rot_n, cen_n = numpy_path(chain_poses, shape, robot.axis_vectors, robot.link_lengths_m)
        np.testing.assert_allclose(rot_k, rot_n, atol=1e-13)
        np.testing.assert_allclose(cen_k, cen_n, atol=1e-13)
        guess = np.array([0.05, -0.02, -1.0])
        plane_k, plane_n = support_plane(cen_k, guess), numpy_path(support_plane, cen_k, guess)
        assert (plane_k is None) == (plane_n is None)
        if plane_k is not None:
            np.testing.assert_allclose(plane_k[0], plane_n[0], atol=1e-12)
            assert plane_k[1] == pytest.approx(plane_n[1], abs=1e-12)


def test_a_thin_face_is_judged_without_dividing_by_zero(numpy_path):
    """Three module centres all but in a line (one 2 nm off it over 1 m) make a face whose edges' Gram
    determinant g00 g11 - g01^2 rounds to 0 though the face's normal is not: the kernel divided by it
    (ZeroDivisionError in a replayed demo recording) and the numpy path got NaN. Both now take the
    determinant as |e0 x e1|^2 and find the face (a face this thin is refused by default, min_width_m: here
    it is let through to reach the division)."""
    p = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 2e-9, 0.0]])
    guess = np.array([0.0, 0.0, -1.0])
    for plane in (support_plane(p, guess, min_width_m=0.0), numpy_path(support_plane, p, guess, min_width_m=0.0)):
        assert plane is not None
        np.testing.assert_allclose(plane[0], guess, atol=1e-12)
        assert plane[1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize('options', [{}, {'axial_weight': 0.2, 'half_length_m': 0.03, 'tilt': True},
                                     {'rotation_increment': np.array([0.0, 0.0, 0.01])},
                                     {'coulomb_iterations': 3, 'tilt': True}, {'coulomb_iterations': 3},
                                     {'coulomb_iterations': 3, 'rotation_increment': np.array([0.0, 0.01, 0.0])},
                                     {'line': True, 'hold': np.array([0.001, -0.002, 0.0, 0.0, 0.0, 0.003])},
                                     {'line': True, 'hold': np.array([0.001, -0.002, 0.0, 0.0, 0.0, 0.003]),
                                      'tilt': True}])
def test_contact_step_matches_numpy(numpy_path, options):
    """The compiled rows and solve against the numpy path: all six unknowns, a known rotation or tilt,
    Coulomb weights, and contacts in a line (a weak direction, which the hold fills)."""
    rng = np.random.default_rng(1)
    n = 12
    q0 = rng.normal(0.0, 0.1, (n, 3))
    if options.get('line'):
        q0[:, 1:] = 1e-4 * rng.normal(size=(n, 2))
    q1 = q0 + rng.normal(0.0, 0.002, (n, 3))
    rot0 = np.array([np.linalg.qr(rng.normal(size=(3, 3)))[0] for _ in range(n)])
    turn = np.array([[1.0, -0.01, 0.0], [0.01, 1.0, 0.0], [0.0, 0.0, 1.0]])
    rot1 = turn @ rot0
    contacts = rng.random(n) > 0.4
    weights = rng.random(n) + 0.5
    kwargs = dict(weights=weights, axial_weight=options.get('axial_weight', 1.0),
                  rotation_increment=options.get('rotation_increment'), length_scale_m=0.07,
                  half_length_m=options.get('half_length_m', 0.0),
                  tilt_increment=np.array([0.001, -0.002, 0.0]) if options.get('tilt') else None,
                  coulomb_iterations=options.get('coulomb_iterations', 0), hold=options.get('hold'))
    args = (q0, rot0, q1, rot1, np.array([0.0, 0.0, -1.0]), 0.03, contacts)
    k, ref = contact_step(*args, **kwargs), numpy_path(contact_step, *args, **kwargs)
    np.testing.assert_allclose(k.displacement, ref.displacement, atol=1e-14)
    np.testing.assert_allclose(k.residual, ref.residual, atol=1e-14)
    np.testing.assert_allclose(k.normal_inverse, ref.normal_inverse, rtol=1e-9, atol=1e-12)
    assert (k.rank, k.singular) == (ref.rank, ref.singular)
    assert k.sigma_min == pytest.approx(ref.sigma_min, rel=1e-9, abs=1e-12)
    if options.get('line') and not options.get('tilt'):
        assert k.singular          # the roll about the line is weak (a known tilt fixes it): the hold fills it


@pytest.mark.parametrize('options', [{}, {'axial_weight': 0.028}, {'body_frame': 'head', 'ground_plane': False}])
def test_estimator_matches_numpy(numpy_path, options):
    robot = load_robot('pitch_yaw_32')
    t, q = _shapes(robot, 300, 2)
    fast, ref = Estimator(robot, **options), Estimator(robot, **options)
    for k in range(len(t)):
        a = fast.update(t[k], q[k])
        b = numpy_path(ref.update, t[k], q[k])
        np.testing.assert_array_equal(a.contacts, b.contacts)
    np.testing.assert_allclose(a.pose, b.pose, atol=1e-9)
    np.testing.assert_allclose(a.pose_covariance, b.pose_covariance, rtol=1e-6, atol=1e-15)
    assert np.linalg.norm(a.pose[:3, 3]) > 0.05       # it moved: the comparison is not of two zeros


def test_static_loads_match_numpy(numpy_path):
    from snake_control.estimation.contact import static_loads
    rng = np.random.default_rng(5)
    for m in (1, 2, 3, 5, 12, 33):
        for _ in range(20):
            xy = rng.normal(0.0, 0.5, (m, 2))
            centre = rng.normal(0.0, 0.3, 2)
            (lk, ok_k), (ln, ok_n) = static_loads(xy, centre), numpy_path(static_loads, xy, centre)
            assert ok_k == ok_n and lk.sum() == pytest.approx(1.0) and ln.sum() == pytest.approx(1.0)
            if ok_n:          # a set that cannot hold the centre leaves a near-singular system: its split is rounding
                np.testing.assert_allclose(lk, ln, atol=1e-9)


def test_supporting_contacts_match_numpy(numpy_path):
    """The compiled widening picks the same contacts and loads as the numpy loop (bodies lying near flat, some
    heights rounded to the millimetre so that levels tie)."""
    from snake_control.estimation.contact import supporting_contacts
    rng = np.random.default_rng(7)
    widened = 0
    for trial in range(200):
        q = rng.normal(size=(33, 3)) * [0.5, 0.2, 0.05]
        down = np.array([0.0, 0.0, -1.0]) + 0.05 * rng.normal(size=3)
        down /= np.linalg.norm(down)
        h = -(q @ down)
        h -= h.min()
        if trial % 3 == 0:
            h = np.round(h, 3)
        mask = h < rng.uniform(0.0, 0.02)
        (mk, lk), (mn, ln) = supporting_contacts(mask, h, q, down), numpy_path(supporting_contacts, mask, h, q, down)
        np.testing.assert_array_equal(mk, mn)
        np.testing.assert_allclose(lk, ln, atol=1e-6)     # load fractions; cofactors against a solve
        assert not mask[~mk].any()          # widened, never narrowed
        widened += int(mk.sum() > mask.sum())
    assert widened > 50                     # the cases exercise the widening, not only sets that hold already


def test_virtual_chassis_matches_numpy(numpy_path):
    """The compiled chassis frame against the numpy one: with and without a previous frame and an up
    vector, for elongated bodies, near-equal second and third moments (y held), and a straight line."""
    from snake_control.estimation.contact import virtual_chassis
    rng = np.random.default_rng(3)
    held = 0
    s = np.linspace(-1.0, 1.0, 33)
    for trial in range(120):
        # Well separated moments (the second principal direction is well conditioned), or a helix round
        # its long axis (second and third moments equal: y is held), turned at random.
        p = rng.normal(size=(33, 3)) * [0.5, 0.2, 0.05]
        if trial % 3 == 0:
            p = np.column_stack([s, 0.1 * np.cos(6 * np.pi * s), 0.1 * np.sin(6 * np.pi * s)])
            p = p @ np.linalg.qr(rng.normal(size=(3, 3)))[0] + 1e-4 * rng.normal(size=(33, 3))
        if trial % 10 == 0:
            p = np.outer(np.linspace(-1.0, 1.0, 33), rng.normal(size=3))  # a straight body
        previous = None if trial % 2 else np.linalg.qr(rng.normal(size=(3, 3)))[0]
        up = None if trial % 4 < 2 else rng.normal(size=3)
        k = virtual_chassis(p, previous, up)
        ref = numpy_path(virtual_chassis, p, previous, up)
        np.testing.assert_allclose(k[0], ref[0], atol=1e-9)
        np.testing.assert_allclose(k[1], ref[1], atol=1e-12)
        assert k[2] == ref[2]
        held += k[2]
        np.testing.assert_allclose(k[3], ref[3], rtol=1e-9, atol=1e-6)     # a straight line: rounding
    assert held >= 30
