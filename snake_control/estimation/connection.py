"""The local connection of planar passive-wheel snakes (docs/estimation.md, seeds 000 and 002).

A planar snake of N links (N - 1 yaw joints, shape r = joint angles alpha) carries a wheel pair at each
link centre whose axle is perpendicular to the link. No lateral slip at wheel i means the velocity of
link centre i has no component along the link's lateral unit vector n_i. With the body frame b riding
on the snake and its body velocity xi = (xi_x, xi_y, xi_theta) (m/s, m/s, rad/s), every wheel gives one
linear constraint

    C_xi xi + C_r r_dot = 0,
    row i of C_xi = [-sin phi_i, cos phi_i, p_ix cos phi_i + p_iy sin phi_i]    (N x 3)
    row i of C_r  = n_i^T d p_i / d r                                           (N x (N - 1))

where p_i (m) and phi_i (rad) are link i's centre and heading in the body frame (which itself may move
with the shape: the virtual chassis does). The weighted least-squares solution

    xi = -(C_xi^T W C_xi)^-1 C_xi^T W C_r r_dot = -A(r) r_dot

is the body velocity whose total squared lateral wheel slip is smallest; A (3 x (N - 1)) is the local
connection. For N = 3 it is exact and equals the closed form of seed 000 (``three_link_connection``).
The residual eps = C_xi xi + C_r r_dot is each wheel's lateral slip velocity (m/s).

Near the singular set (all joint angles equal: every axle passes through one point, or all are
parallel) C_xi loses rank and A blows up. ``planar_connection`` then caps the weak direction (the
pseudo-inverse gain along it is limited below a singular-value threshold) so that the result stays
finite; ``ConnectionResult.twist(r_dot, hold=previous_twist)`` instead keeps the previous estimate
along that direction, blending smoothly ("hold the last estimate"), which follows shape paths that cross
the singular set consistently (seed 000's gait crosses alpha1 = alpha2 with alpha1_dot = -alpha2_dot,
where the true twist stays finite). The rank, the smallest normalised singular value and a singularity
flag are reported so that callers raise the covariance.

Body frames (``body_frame`` argument): 'middle' (link N // 2; for an even N the head-side one of the
two middle links), 'head' (link N - 1), 'tail' (link 0), an integer link index, or 'chassis' (the
planar virtual chassis: origin at the centroid of the link centres, x along their principal axis,
pointing toward the head).

Example (docs/estimation.md regression values, L = 1, alpha = (0.3, -0.5)):
    >>> a = three_link_connection(np.array([0.3, -0.5]), 1.0)
    >>> -a @ np.array([1.0, 0.0])
    array([-0.62908941,  0.        ,  0.3212658 ])
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.kinematics.lie import se2_adjoint, se2_inverse

# Below this normalised singular value of W^1/2 C_xi S a direction counts as weak (near-singular).
DEFAULT_SINGULAR_THRESHOLD = 0.02
# Relative singular-value tolerance for the reported numerical rank.
RANK_TOLERANCE = 1e-6

BODY_FRAMES = ('middle', 'head', 'tail', 'chassis')

_J = np.array([[0.0, -1.0], [1.0, 0.0]])   # rotation by +90 degrees: z x (.)


def symmetric_eigh(a):
    """Eigenvalues (ascending) and eigenvectors of a small symmetric matrix.

    LAPACK's dsyev called directly: numpy.linalg.eigh spends most of its time on Python-level checks
    for matrices this small, and this runs several times per joint_states message.
    """
    w, v, info = _dsyev(a)
    if info != 0:
        return np.linalg.eigh(a)
    return w, v


try:
    from scipy.linalg.lapack import dsyev as _dsyev
except ImportError:     # scipy is a dependency; keep working without it all the same
    def _dsyev(a):
        w, v = np.linalg.eigh(a)
        return w, v, 0


def _angles(angles_rad, name='angles_rad') -> np.ndarray:
    a = np.asarray(angles_rad, dtype=float)
    if a.ndim != 1 or a.shape[0] < 1:
        raise ValueError(f'{name} must have shape (n,) with n >= 1 joints, got {a.shape}')
    if not np.all(np.isfinite(a)):
        raise ValueError(f'{name} must be finite, got {a}')
    return a


def three_link_connection(alpha_rad, link_length_m: float) -> np.ndarray:
    """Closed-form local connection A (3 x 2) of the three-link kinematic snake (seed 000).

    Body frame at the middle link's centre, x toward the head; xi = -A(alpha) alpha_dot with
    xi = (xi_x m/s, xi_y m/s, xi_theta rad/s). On the singular set (D = 0) the entries are inf/nan:
    use ``planar_connection`` for a regularised estimate.

    Parameters: alpha_rad (2,) joint angles (alpha_1 tail-side, alpha_2 head-side), link_length_m L.
    """
    if np.shape(alpha_rad) != (2,):
        raise ValueError(f'alpha_rad must have shape (2,), got {np.shape(alpha_rad)}')
    a1, a2 = _angles(alpha_rad, 'alpha_rad')
    half = 0.5 * float(link_length_m)
    d = np.sin(a1) - np.sin(a2) + np.sin(a1 - a2)
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.array([[half * (1.0 + np.cos(a2)), half * (1.0 + np.cos(a1))],
                         [0.0, 0.0],
                         [np.sin(a2), np.sin(a1)]]) / d


def body_frame_index(body_frame, n_links: int):
    """Link index of a link-fixed body frame, or None for 'chassis'. Raises ValueError otherwise."""
    if isinstance(body_frame, (int, np.integer)) and not isinstance(body_frame, bool):
        if not 0 <= int(body_frame) < n_links:
            raise ValueError(f'body_frame link index must be in 0..{n_links - 1}, got {body_frame}')
        return int(body_frame)
    if body_frame == 'middle':
        return n_links // 2
    if body_frame == 'head':
        return n_links - 1
    if body_frame == 'tail':
        return 0
    if body_frame == 'chassis':
        return None
    raise ValueError(f"body_frame must be one of {BODY_FRAMES} or a link index, got {body_frame!r}")


def planar_body_frame(centres_m, headings_rad, dcentres, dheadings, body_frame):
    """Pose h = (x, y, theta) of the body frame in the tail link's frame and its shape Jacobian.

    Parameters: centres_m (N, 2), headings_rad (N,), dcentres (N, 2, n), dheadings (N, n) as returned by
    planar_chain / planar_jacobians; body_frame as in the module docstring.
    Returns: h (3,), dh (3, n) with dh[:, j] = d h / d alpha_j.
    """
    n_links = centres_m.shape[0]
    k = body_frame_index(body_frame, n_links)
    if k is not None:
        h = np.empty(3)
        h[:2] = centres_m[k]
        h[2] = headings_rad[k]
        dh = np.empty((3, dcentres.shape[2]))
        dh[:2] = dcentres[k]
        dh[2] = dheadings[k]
        return h, dh
    # Virtual chassis: centroid and principal axis of the link centres.
    c = centres_m.mean(axis=0)
    dc = dcentres.mean(axis=0)                                   # (2, n)
    d = centres_m - c
    dd = dcentres - dc[None]                                     # (N, 2, n)
    sxx, syy, sxy = d[:, 0] @ d[:, 0], d[:, 1] @ d[:, 1], d[:, 0] @ d[:, 1]
    dsxx = 2.0 * d[:, 0] @ dd[:, 0]
    dsyy = 2.0 * d[:, 1] @ dd[:, 1]
    dsxy = d[:, 0] @ dd[:, 1] + d[:, 1] @ dd[:, 0]
    a, b = sxx - syy, 2.0 * sxy
    psi = 0.5 * np.arctan2(b, a)
    # Point x toward the head: the axis is a line, pick the direction the head lies along.
    tail_to_head = centres_m[-1] - centres_m[0]
    if np.cos(psi) * tail_to_head[0] + np.sin(psi) * tail_to_head[1] < 0:
        psi += np.pi
    den = a * a + b * b
    # A round (isotropic) cloud has no principal axis; its derivative is then left at zero.
    dpsi = 0.5 * (a * 2.0 * dsxy - b * (dsxx - dsyy)) / den if den > 1e-18 else np.zeros_like(dsxx)
    return np.array([c[0], c[1], psi]), np.vstack([dc, dpsi[None, :]])


def _planar_kinematics(angles, lengths):
    """Centres (N, 2), headings (N,), d centres / d r (N, 2, n), d headings / d r (N, n), tail frame.

    The same quantities as kinematics.chain.planar_chain / planar_jacobians, computed once and without
    re-validation: this runs for every joint_states message.
    """
    n = angles.shape[0]
    headings = np.zeros(n + 1)
    np.cumsum(angles, out=headings[1:])
    cs = np.empty((n + 1, 2))
    cs[:, 0] = np.cos(headings)
    cs[:, 1] = np.sin(headings)
    half = 0.5 * lengths[:, None] * cs
    centres = np.zeros((n + 1, 2))
    np.cumsum(half[:-1] + half[1:], axis=0, out=centres[1:])
    joints = centres[:-1] + half[:-1]
    rel = centres[:, None, :] - joints[None, :, :]                          # (N, n, 2)
    mask = _downstream(n)
    dc = np.empty((n + 1, 2, n))
    dc[:, 0, :] = -rel[..., 1] * mask
    dc[:, 1, :] = rel[..., 0] * mask
    return centres, headings, dc, mask


_DOWNSTREAM = {}


def _downstream(n):
    m = _DOWNSTREAM.get(n)
    if m is None:
        m = (np.arange(n + 1)[:, None] > np.arange(n)[None, :]).astype(float)
        m.setflags(write=False)
        _DOWNSTREAM[n] = m
    return m


def _lengths(link_lengths_m, n_links):
    lengths = np.asarray(link_lengths_m, dtype=float)
    if lengths.ndim == 0:
        lengths = np.full(n_links, float(lengths))
    if lengths.shape != (n_links,) or np.any(lengths <= 0):
        raise ValueError(f'link_lengths_m must be a positive scalar or ({n_links},), got {lengths}')
    return lengths


def planar_constraints(angles_rad, link_lengths_m, body_frame='middle'):
    """No-lateral-slip constraint matrices of a planar wheeled snake in the chosen body frame.

    Parameters: angles_rad (n,) joint angles; link_lengths_m (n + 1,) or a scalar; body_frame.
    Returns: (c_xi (N, 3), c_r (N, n), centres_m (N, 2), headings_rad (N,)) with N = n + 1 wheels;
    centres and headings in the body frame. The constraints read c_xi @ xi + c_r @ r_dot = 0.
    """
    angles = _angles(angles_rad)
    return _constraints(angles, _lengths(link_lengths_m, angles.shape[0] + 1), body_frame)


def _constraints(angles, lengths, body_frame):
    """planar_constraints without input checks (angles (n,) finite, lengths (n + 1,) positive)."""
    centres0, headings0, dc0, dh0 = _planar_kinematics(angles, lengths)
    h, dh = planar_body_frame(centres0, headings0, dc0, dh0, body_frame)
    ch, sh = math.cos(h[2]), math.sin(h[2])
    rel = centres0 - h[:2]
    p = np.empty_like(rel)                                        # (N, 2) in the body frame: R(-theta_h) rel
    p[:, 0] = ch * rel[:, 0] + sh * rel[:, 1]
    p[:, 1] = ch * rel[:, 1] - sh * rel[:, 0]
    phi = headings0 - h[2]
    c, s = np.cos(phi), np.sin(phi)
    # d p_i / d r = R(-theta_h) (d p0_i - d h_xy) - J p_i d theta_h, and C_r = n_i . d p_i / d r with
    # n_i = (-s, c); n_i . R(-theta_h) u = (-sin(phi0_i), cos(phi0_i)) . u (rotation invariance) and
    # n_i . (-J p_i) = -(p_ix c + p_iy s).
    s0, c0 = np.sin(headings0), np.cos(headings0)
    d = dc0 - dh[:2]
    c_xi = np.empty((angles.shape[0] + 1, 3))
    c_xi[:, 0] = -s
    c_xi[:, 1] = c
    c_xi[:, 2] = p[:, 0] * c + p[:, 1] * s
    c_r = c0[:, None] * d[:, 1, :] - s0[:, None] * d[:, 0, :] - c_xi[:, 2:3] * dh[2]
    return c_xi, c_r, p, phi


@dataclass(frozen=True)
class Regularised:
    """A regularised least-squares solve in the eigenbasis of its (scaled) normal matrix.

    Directions whose normalised singular value s_i = sqrt(lambda_i / lambda_max) is below the threshold
    are weak. A weak direction's component is blended from the least-squares value and a held value:
    c_i = w_i (v_i . b) / lambda_i + (1 - w_i) held_i with w_i = (s_i / threshold)^2, which is finite for
    every lambda_i >= 0 (the first term is (v_i . b) / (threshold^2 lambda_max)). Without a held value
    (held = 0) this is a capped pseudo-inverse. Strong directions are the exact least squares.

    scale (k,): unknowns are solved as x / scale; basis (k, k) = eigenvectors v_i; gain (k,) =
    w_i / lambda_i; weak (k,) = 1 - w_i.
    """

    scale: np.ndarray
    basis: np.ndarray
    gain: np.ndarray
    weak: np.ndarray

    def solve(self, atb, hold=None) -> np.ndarray:
        """x for right-hand side atb = a^T rhs (k,) or (k, p) (original units); hold (k,) or None."""
        shape = (self.scale.shape[0],) + (1,) * (np.ndim(atb) - 1)
        cs = self.scale.reshape(shape)
        c = self.gain.reshape(shape) * (self.basis.T @ (cs * atb))
        if hold is not None and self.weak.any():
            c = c + self.weak * (self.basis.T @ (np.asarray(hold, dtype=float) / self.scale))
        return cs * (self.basis @ c)


def regularised_normal_solve(normal, column_scale, threshold: float = DEFAULT_SINGULAR_THRESHOLD):
    """Factor the normal matrix normal = a^T a (k, k) for ``Regularised.solve``; never inf or NaN.

    column_scale (k,) makes the unknowns comparable (e.g. 1 / length for a rotation next to
    translations). Returns (Regularised, normal_inverse (k, k) in original units, rank, sigma_min
    normalised by the largest singular value, singular: any weak direction).
    The returned normal_inverse is that of the unregularised least squares, capped: an unobservable
    direction gets a variance 1e4 / threshold^2 times the best observed one instead of infinity.
    """
    scaled = normal * column_scale[:, None] * column_scale
    # Eigenvalues of the scaled normal matrix are the squared singular values of a * column_scale.
    # Squaring the condition number is harmless: directions where it would matter are weak anyway.
    ev, v = symmetric_eigh(scaled)                     # ascending
    ev = np.maximum(ev, 0.0)
    smax2 = ev[-1] if ev[-1] > 0 else 1.0
    sn = np.sqrt(ev / smax2) if ev[-1] > 0 else np.zeros_like(ev)
    rank = int(np.count_nonzero(sn > RANK_TOLERANCE))
    cap = threshold * threshold * smax2
    gain = 1.0 / np.maximum(ev, cap)
    weak = np.maximum(0.0, 1.0 - ev / cap)
    floor = (1e-2 * threshold) ** 2 * smax2
    ninv = (v / np.maximum(ev, floor)) @ v.T
    ninv = column_scale[:, None] * ninv * column_scale
    return Regularised(column_scale, v, gain, weak), ninv, rank, float(sn[0]), bool(weak[0] > 0.0)


def regularised_least_squares(a, rhs, column_scale, threshold: float = DEFAULT_SINGULAR_THRESHOLD, hold=None):
    """x = argmin |a x - rhs|^2 regularised as in ``regularised_normal_solve``; never inf or NaN.

    Parameters: a (m, k); rhs (m,) or (m, p); column_scale (k,); hold (k,) or None: the value to keep
    along weak directions (e.g. the previous estimate). Returns (x, normal_inverse, rank, sigma_min,
    singular).
    """
    a = np.asarray(a, dtype=float)
    reg, ninv, rank, smin, singular = regularised_normal_solve(a.T @ a, column_scale, threshold)
    return reg.solve(a.T @ rhs, hold), ninv, rank, smin, singular


@dataclass(frozen=True)
class ConnectionResult:
    """A regularised weighted least-squares connection at one shape.

    connection: A (3, n), xi = -A r_dot (weak directions capped). normal_inverse: the capped inverse of
    C_xi^T W C_xi (3, 3), the twist covariance per unit wheel-slip variance. c_xi (N, 3), c_r (N, n),
    weights (N,). rank: numerical rank of W^1/2 C_xi. sigma_min: smallest singular value normalised by
    the largest (length-scaled so that it is dimensionless). singular: a direction is weak (near the
    singular set). regularised: the factorisation, for ``twist(r_dot, hold)``.
    """

    connection: np.ndarray
    normal_inverse: np.ndarray
    c_xi: np.ndarray
    c_r: np.ndarray
    weights: np.ndarray
    rank: int
    sigma_min: float
    singular: bool
    regularised: Regularised
    _rhs: np.ndarray          # C_xi^T W C_r (3, n)

    def twist(self, r_dot, hold=None) -> np.ndarray:
        """Body twist (vx, vy, omega) for shape velocity r_dot (n,).

        hold (3,): the twist to keep along weak directions near the singular set (the previous estimate;
        its component there is blended in as the shape approaches the singular set). Without it
        the weak component fades to zero instead.
        """
        r_dot = np.asarray(r_dot, dtype=float)
        if hold is None:
            return -self.connection @ r_dot
        return self.regularised.solve(-(self._rhs @ r_dot), hold)

    def residual(self, r_dot, twist=None) -> np.ndarray:
        """Lateral slip velocity (m/s) of each wheel (N,) for r_dot and the given (or estimated) twist."""
        r_dot = np.asarray(r_dot, dtype=float)
        xi = self.twist(r_dot) if twist is None else np.asarray(twist, dtype=float)
        return self.c_xi @ xi + self.c_r @ r_dot


def solve_connection(c_xi, c_r, weights=None, length_scale_m: float = 1.0,
                     singular_threshold: float = DEFAULT_SINGULAR_THRESHOLD) -> ConnectionResult:
    """Regularised weighted least squares xi = -A r_dot from constraints c_xi xi + c_r r_dot = 0.

    The rotation column of c_xi is scaled by length_scale_m so that the singular values are
    dimensionless. Away from the singular set (normalised smallest singular value >= singular_threshold)
    this is the exact weighted least squares; nearer, the weak direction is capped (see
    ``regularised_normal_solve``), so nothing is ever inf or NaN.
    """
    c_xi = np.asarray(c_xi, dtype=float)
    c_r = np.asarray(c_r, dtype=float)
    m = c_xi.shape[0]
    if c_xi.ndim != 2 or c_r.ndim != 2 or c_r.shape[0] != m:
        raise ValueError(f'c_xi (m, k) and c_r (m, n) must share m rows, got {c_xi.shape} and {c_r.shape}')
    k = c_xi.shape[1]
    scale = np.ones(k)
    scale[-1] = 1.0 / length_scale_m
    if weights is None:
        w = np.ones(m)
        ct = c_xi.T
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != (m,) or np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError(f'weights must be ({m},) non-negative and finite, got {w}')
        ct = c_xi.T * w
    reg, ninv, rank, smin, singular = regularised_normal_solve(ct @ c_xi, scale, singular_threshold)
    rhs = ct @ c_r
    conn = reg.solve(rhs)
    return ConnectionResult(conn, ninv, c_xi, c_r, w, rank, smin, singular, reg, rhs)


def planar_connection(angles_rad, link_lengths_m, body_frame='middle', weights=None,
                      singular_threshold: float = DEFAULT_SINGULAR_THRESHOLD) -> ConnectionResult:
    """Weighted least-squares local connection of an N-link planar wheeled snake.

    Parameters: angles_rad (n,); link_lengths_m (n + 1,) or a scalar; body_frame; weights (n + 1,)
    per-wheel confidence (0: wheel lifted or known to slip; default all 1).
    Returns a ConnectionResult; result.connection is A (3, n) with xi = -A r_dot.

    Example (the three-link snake reduces to the closed form):
        >>> res = planar_connection(np.array([0.3, -0.5]), 1.0)
        >>> np.allclose(res.connection, three_link_connection(np.array([0.3, -0.5]), 1.0))
        True
    """
    angles = _angles(angles_rad)
    return _connection(angles, _lengths(link_lengths_m, angles.shape[0] + 1), body_frame, weights,
                       singular_threshold)


def _connection(angles, lengths, body_frame, weights, singular_threshold) -> ConnectionResult:
    """planar_connection without input checks (the Estimator checks once per message)."""
    c_xi, c_r, _, _ = _constraints(angles, lengths, body_frame)
    return solve_connection(c_xi, c_r, weights, float(lengths.sum()) / lengths.shape[0], singular_threshold)


def planar_frame_change(angles_rad, link_lengths_m, from_frame, to_frame):
    """Map body twists between two body frames of the same snake at the same shape.

    Returns (ad (3, 3), b (3, n)) such that xi_to = ad @ xi_from + b @ r_dot, from
    g_to = g_from h(r) with h the pose of ``to_frame`` in ``from_frame``:
    xi_to = Ad_{h^-1} xi_from + h^-1 dh/dr r_dot.
    """
    _, ad, b = planar_frame_offset(angles_rad, link_lengths_m, from_frame, to_frame)
    return ad, b


def planar_frame_offset(angles_rad, link_lengths_m, from_frame, to_frame):
    """Pose h (3,) of ``to_frame`` in ``from_frame`` and the twist map (ad, b) of planar_frame_change."""
    angles = _angles(angles_rad)
    centres0, headings0, dc0, dh0 = _planar_kinematics(angles, _lengths(link_lengths_m, angles.shape[0] + 1))
    ha, dha = planar_body_frame(centres0, headings0, dc0, dh0, from_frame)
    hb, dhb = planar_body_frame(centres0, headings0, dc0, dh0, to_frame)
    # h = ha^-1 hb; its body Jacobian h^-1 dh/dr in to-frame coordinates.
    ca, sa = math.cos(ha[2]), math.sin(ha[2])
    ra_t = np.array([[ca, sa], [-sa, ca]])
    t = ra_t @ (hb[:2] - ha[:2])
    th = hb[2] - ha[2]
    h = np.array([t[0], t[1], th])
    ad = se2_adjoint(se2_inverse(h))
    # Relative velocity of the to-frame seen from the from-frame, in to-frame coordinates.
    dt = ra_t @ (dhb[:2] - dha[:2]) - (_J @ t)[:, None] * dha[2][None, :]
    ct, st = math.cos(th), math.sin(th)
    rb_t = np.array([[ct, st], [-st, ct]])
    b = np.vstack([rb_t @ dt, (dhb[2] - dha[2])[None, :]])
    return h, ad, b
