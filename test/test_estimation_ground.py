"""Ground plane and capsule-end contacts of the pitch-yaw estimator (snake_control.estimation.contact)."""
import math

import numpy as np
import pytest

from snake_control.estimation.contact import contact_step, support_plane
from snake_control.kinematics.lie import so3_exp


def _tilted(points, angle):
    """points seen from a frame turned by angle about x (so the world down becomes rot.T @ down)."""
    rot = so3_exp(np.array([angle, 0.0, 0.0]))
    return points @ rot, rot.T @ np.array([0.0, 0.0, -1.0])


def test_support_plane_finds_the_face_under_a_body_with_lifted_parts():
    # five modules on the floor z = 0 (not in a line) and three lifted, seen from a tilted frame
    floor = np.array([[0, 0, 0], [0.3, 0.05, 0], [0.6, -0.1, 0], [0.2, 0.3, 0], [0.5, 0.25, 0.0]])
    lifted = np.array([[0.1, 0.1, 0.08], [0.4, 0.1, 0.12], [0.3, 0.2, 0.05]])
    pts, down_true = _tilted(np.vstack([floor, lifted]), 0.12)
    down, level = support_plane(pts, np.array([0.0, 0.0, -1.0]))      # a guess 0.12 rad off
    np.testing.assert_allclose(down, down_true, atol=1e-12)
    heights = level - pts @ down
    np.testing.assert_allclose(heights[:5], 0.0, atol=1e-12)
    np.testing.assert_allclose(heights[5:], lifted[:, 2], atol=1e-12)


def test_support_plane_takes_only_a_face_the_centroid_stands_over():
    # A heavy lifted cluster far to the side: the face nearest to the guess would tip the body over.
    base = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    side = np.array([[2.0, 0.5, 0.2]] * 12) + np.linspace(0, 0.01, 12)[:, None]
    pts = np.vstack([base, side])
    down, _ = support_plane(pts, np.array([0.0, 0.0, -1.0]), candidates=16, max_tilt_rad=1.2)
    # The body rests on the face through the two outer base modules and the cluster, not on z = 0.
    assert down[2] > -0.999
    centroid = pts.mean(axis=0)
    assert centroid @ down < (pts @ down).max()          # the centroid is above the chosen plane
    # Without the cluster the flat base is the face.
    flat, _ = support_plane(base, np.array([0.05, 0.0, -1.0]))
    np.testing.assert_allclose(flat, [0.0, 0.0, -1.0], atol=1e-12)


def test_support_plane_gives_up_on_a_line_or_a_far_face():
    line = np.array([[k * 0.1, 0.0, 0.0] for k in range(6)])
    assert support_plane(line, np.array([0.0, 0.0, -1.0])) is None
    flat = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    assert support_plane(flat, np.array([0.0, 1.0, -1.0]), max_tilt_rad=0.3) is None   # 45 deg away
    with pytest.raises(ValueError, match='centres_m'):
        support_plane(np.zeros((2, 3)), np.array([0.0, 0.0, -1.0]))
    with pytest.raises(ValueError, match='down_guess'):
        support_plane(flat, np.zeros(2))


def test_support_plane_takes_no_face_from_modules_in_a_line():
    """A flat body whose lowest modules are its straight tail, each centre a micrometre or so off the line and
    the plane: a triple of them spans a plane tilted by whatever those micrometres say (17 deg here, every
    other module above it). Such a face is refused (narrower than min_width_m), in the kernel and in numpy,
    and the guess is kept (None)."""
    from snake_control.estimation.kernel_loading import numpy_only

    pts, heading, x, y = [], 0.0, 0.0, 0.0
    for i in range(33):
        pts.append([x, y, 0.0])
        heading += 0.12 if i >= 7 else 0.0          # eight straight, then an arc
        x, y = x + 0.07 * math.cos(heading), y + 0.07 * math.sin(heading)
    pts = np.array(pts) + np.random.default_rng(6).normal(0.0, 1e-6, (33, 3))
    pts[8:, 2] += 1e-4                                 # the tail's eight are the lowest
    guess = np.array([0.0, 0.0, -1.0])
    thin = support_plane(pts, guess, min_width_m=0.0)
    assert thin is not None and math.degrees(math.acos(-thin[0][2])) > 10.0
    assert support_plane(pts, guess) is None
    with numpy_only():
        assert support_plane(pts, guess) is None


def _modules_pivoting_on_their_lower_ends(half, radius, tilt, dtilt):
    """Five tilted modules, each turning by dtilt about a horizontal axis through its lower end's ground
    contact point: the ground does not move under them, so the true chassis displacement is zero."""
    down = np.array([0.0, 0.0, -1.0])
    q0, q1, r0, r1 = [], [], [], []
    for k, (x, y, yaw) in enumerate([(0, 0, 0.0), (0.3, 0.2, 1.0), (0.6, -0.1, 2.0), (0.2, 0.5, -1.2),
                                     (0.7, 0.4, 0.4)]):
        rz = so3_exp(np.array([0.0, 0.0, yaw]))
        ra = rz @ so3_exp(np.array([0.0, tilt, 0.0]))             # x axis dips: lower end at +x
        contact = np.array([x, y, 0.0])
        end = ra[:, 0] * half                                      # centre -> lower end
        centre0 = contact - radius * down - end
        turn = so3_exp(rz @ np.array([0.0, dtilt * (1 if k % 2 else -1), 0.0]))
        rb = turn @ ra
        centre1 = contact + turn @ (centre0 - contact)          # rolls on its end: the contact stays
        q0.append(centre0)
        q1.append(centre1)
        r0.append(ra)
        r1.append(rb)
    return np.array(q0), np.array(r0), np.array(q1), np.array(r1), down


def test_tilted_modules_touch_with_their_lower_end():
    half, radius = 0.035, 0.03
    q0, r0, q1, r1, down = _modules_pivoting_on_their_lower_ends(half, radius, 0.3, 0.01)
    contacts = np.ones(5, bool)
    with_ends = contact_step(q0, r0, q1, r1, down, radius, contacts, half_length_m=half)
    # zero up to the mid-point rule's second-order term (half dtilt^2 = 3.5e-6 m)
    np.testing.assert_allclose(with_ends.displacement, 0.0, atol=1e-5)
    assert np.max(np.abs(with_ends.residual)) < 1e-5
    # The old model (contact below the centre) reads the pivoting as slip of about half * dtilt each.
    centre_only = contact_step(q0, r0, q1, r1, down, radius, contacts)
    assert np.max(np.linalg.norm(centre_only.residual, axis=1)) > 0.5 * half * 0.01


def test_known_tilt_leaves_only_yaw_and_translation_to_the_contacts():
    # Flat modules translated by t and turned by yaw (as seen from the chassis: the body moved by the
    # inverse). Given the tilt (here zero), the 4-unknown solve recovers the same motion as the full one.
    rng = np.random.default_rng(3)
    q0 = np.column_stack([rng.uniform(-0.5, 0.5, 8), rng.uniform(-0.3, 0.3, 8), np.zeros(8)])
    r0 = np.array([so3_exp(np.array([0.0, 0.0, a])) for a in rng.uniform(-1, 1, 8)])
    move = so3_exp(np.array([0.0, 0.0, 0.02]))
    t = np.array([0.01, -0.004, 0.0])
    q1 = (q0 - t) @ move            # points fixed in the world, seen from the moved chassis
    r1 = np.einsum('ij,kjl->kil', move.T, r0)
    down = np.array([0.0, 0.0, -1.0])
    contacts = np.ones(8, bool)
    full = contact_step(q0, r0, q1, r1, down, 0.03, contacts)
    known = contact_step(q0, r0, q1, r1, down, 0.03, contacts, tilt_increment=np.zeros(3))
    np.testing.assert_allclose(known.displacement, full.displacement, atol=1e-9)
    assert known.rank_needed == 4
    assert known.displacement[5] == pytest.approx(0.02, rel=1e-3)
    # A given tilt is applied as is.
    tilted = contact_step(q0, r0, q1, r1, down, 0.03, contacts, tilt_increment=np.array([0.01, 0.0, 0.0]))
    assert tilted.displacement[3] == pytest.approx(0.01)
    assert math.isfinite(tilted.displacement[5])
