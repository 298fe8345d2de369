"""3D body motion of pitch-yaw snakes from their ground contacts (docs/estimation.md), pure numpy.

Pipeline for one step from shape r0 to shape r1 (joint angles, rad):

1. ``chain_poses``: every module's rotation and centre in the tail link's frame (fast forward
   kinematics for fixed joint axes).
2. ``virtual_chassis``: a body frame that does not depend on which module is the tail: origin at the
   centroid of the module centres, x the first principal direction (toward the head), y the second,
   z = x cross y. Axis signs are kept continuous from step to step; when the second and third singular
   values are close (a helix or a straight body: y is undefined) y is held from the previous frame.
3. ``support_plane``: the ground under the body, the face of the convex hull of the module centres that
   is nearest to the predicted gravity direction AND has the centroid standing over it (a body of equal
   modules can rest on no other face); it gives gravity in the chassis frame at every step.
4. ``ContactSelector``: the modules touching the ground are the lowest along gravity (a tilted capsule
   by its lower end), with hysteresis so that contacts do not flicker.
5. ``contact_step``: the chassis displacement (v dt, w dt) (m, rad, chassis coordinates) that lets every
   contact point c_i = q_i + rho d (d the unit down vector; with half_length_m, moved toward the lower
   end of a tilted module) roll without slipping. When the ground plane gives the tilt increment, only
   the yaw and the translation are solved from the contacts. With Delta q_i the
   change of module i's centre and delta_i its rotation increment (both relative to the chassis), the
   contact's material point moves by  dv + dw x c_i + Delta q_i + delta_i x (c_i - q_i),  which must
   vanish. The rho term is what makes
   rolling gaits move: module centres barely move in the chassis while the modules spin about their
   own axes. Stacked contacts are solved by (regularised, weighted) least squares; the residual is each
   contact's slip.

All positions in m, rotations as 3x3 matrices, twists (v, w) linear first as in snake_control.kinematics.lie.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.estimation.connection import (DEFAULT_SINGULAR_THRESHOLD, RANK_TOLERANCE,
                                                 regularised_normal_solve, symmetric_eigh)
from snake_control.estimation.kernel_loading import compiled
from snake_control.kinematics.lie import hat3, hat_batch, so3_log

_EYE3 = np.eye(3)

_X, _Y, _Z = np.eye(3)
_ZERO3, _ZERO6 = np.zeros(3), np.zeros(6)
_SKEW_I = np.array([2, 0, 1])
_SKEW_J = np.array([1, 2, 0])
_DIAG3 = (np.arange(3), np.arange(3))


def _cross3(a, b):
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _cross(a, b):
    """Row-wise cross product of (m, 3) arrays (broadcasting), cheaper than np.cross for small arrays."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out


# |module axis . down| from which a tilted module touches the ground with its lower end only.
TILT_FULL_CONTACT = math.sin(math.radians(3.0))

# Narrowest support face (the smallest altitude of its triangle of module centres, m): a narrower triple is three
# modules in a line, whose plane the micrometres they lie off it tilt anyhow (1 um over 50 um is a degree; a
# straight tail of serpentine lying flat gave a 17 deg face for two steps and the heading 3.7 deg; docs/
# estimation.md, "Rolling read 0.90"). Wider, real faces are kept: 0.2 mm changed a demo replay's serpentine.
SUPPORT_MIN_WIDTH_M = 5e-5

# Second/third singular value ratio above which the chassis y axis is held from the previous frame.
DEFAULT_HOLD_RATIO = 0.9
# Second/first singular value ratio below which the module centres are a straight line and y is held too: a
# straight chain's second singular value is rounding, about 1e-8 of its first (the root of the scatter's
# relative rounding), which a smaller ratio took for a direction and turned y at random about the body.
STRAIGHT_RATIO = 1e-6


_AXIS_CACHE = {}


def _axis_matrices(axes):
    """hat(axis) and hat(axis)^2 for every joint axis (n, 3, 3), cached: a robot's axes never change."""
    key = axes.tobytes()
    cached = _AXIS_CACHE.get(key)
    if cached is None:
        k = np.zeros((axes.shape[0], 3, 3))
        k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -axes[:, 2], axes[:, 1], -axes[:, 0]
        k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = axes[:, 2], -axes[:, 1], axes[:, 0]
        if len(_AXIS_CACHE) > 64:
            _AXIS_CACHE.clear()
        cached = _AXIS_CACHE[key] = (k, k @ k)
    return cached


def chain_poses(angles_rad, axes, link_lengths_m):
    """Rotations (N, 3, 3) and centres (N, 3) (m) of every link of a chain, in the tail link's frame.

    Same convention as snake_control.kinematics.chain.chain_frames (link frames at link centres, x toward
    the head, joint j at the head end of link j), vectorised for speed: one Rodrigues formula for all
    joints, then a running product.
    Parameters: angles_rad (n,), axes (n, 3) unit joint axes, link_lengths_m (n + 1,).
    """
    angles = np.asarray(angles_rad, dtype=float)
    axes = np.asarray(axes, dtype=float)
    lengths = np.asarray(link_lengths_m, dtype=float)
    n = angles.shape[0]
    if angles.ndim != 1 or axes.shape != (n, 3) or lengths.shape != (n + 1,):
        raise ValueError(f'angles_rad (n,), axes (n, 3) and link_lengths_m (n + 1,) expected, got '
                         f'{angles.shape}, {axes.shape}, {lengths.shape}')
    kern = compiled()
    if kern is not None:
        rot = np.empty((n + 1, 3, 3))
        centres = np.empty((n + 1, 3))
        kern.chain_poses_kernel(np.ascontiguousarray(angles), np.ascontiguousarray(axes),
                                np.ascontiguousarray(lengths), rot, centres)
        return rot, centres
    k, k2 = _axis_matrices(axes)
    rel = _EYE3 + np.sin(angles)[:, None, None] * k + (1.0 - np.cos(angles))[:, None, None] * k2
    # Running product R_k = rel_0 ... rel_{k-1} as a log-depth (Hillis-Steele) scan of batched 3x3
    # products: six numpy calls for 33 links instead of 32.
    rot = np.empty((n + 1, 3, 3))
    rot[0] = np.eye(3)
    rot[1:] = rel
    offset = 1
    while offset <= n:
        upper = rot[:-offset] @ rot[offset:]
        rot[offset:] = upper
        offset *= 2
    half = 0.5 * lengths[:, None] * rot[:, :, 0]
    centres = np.zeros((n + 1, 3))
    np.cumsum(half[:-1] + half[1:], axis=0, out=centres[1:])
    return rot, centres


def virtual_chassis(centres_m, previous=None, up=None, hold_ratio: float = DEFAULT_HOLD_RATIO):
    """Virtual chassis frame of a set of module centres.

    Parameters: centres_m (N, 3) in any frame F; previous: the previous chassis rotation (3, 3) in the
    same frame F (for continuous signs and holding y), or None; up: a unit vector in F used to fix the
    sign of z (and y when it is undefined) when there is no previous frame (default F's z).
    Returns (rotation (3, 3) columns x, y, z of the chassis in F, origin (3,), held: bool, singular
    values (3,)).
    """
    p = np.asarray(centres_m, dtype=float)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 2:
        raise ValueError(f'centres_m must have shape (N >= 2, 3), got {p.shape}')
    kern = compiled()
    if kern is not None:
        rot, origin, sv3 = np.empty((3, 3)), np.empty(3), np.empty(3)
        held = kern.virtual_chassis_kernel(np.ascontiguousarray(p), _EYE3 if previous is None else
                                           np.ascontiguousarray(previous, dtype=float), previous is not None,
                                           _Z if up is None else np.ascontiguousarray(up, dtype=float), float(hold_ratio),
                                           STRAIGHT_RATIO, rot, origin, sv3)
        return rot, origin, bool(held), sv3
    origin = p.sum(axis=0) / p.shape[0]
    d = p - origin
    # Principal directions from the 3x3 scatter matrix (cheaper than an SVD of the N x 3 cloud).
    ev, vecs = symmetric_eigh(d.T @ d)
    sv = np.sqrt(np.maximum(ev[::-1], 0.0))
    vt = vecs[:, ::-1].T
    x = vt[0]
    # x toward the head; with a previous frame keep its sign continuous instead (a U-shaped body can
    # have its head behind its tail along the principal axis).
    if (x @ np.asarray(previous)[:, 0] < 0) if previous is not None else (x @ (p[-1] - p[0]) < 0):
        x = -x
    sv3 = np.zeros(3)
    sv3[:sv.size] = sv
    close = sv3[1] < STRAIGHT_RATIO * max(sv3[0], 1e-12) or sv3[2] > hold_ratio * sv3[1]
    ref = None
    if previous is not None:
        ref = np.asarray(previous)[:, 1]
    if close or ref is None:
        if ref is None:
            up_v = _Z if up is None else np.asarray(up, dtype=float)
            ref = _cross3(up_v, x)
            if ref @ ref < 1e-18:
                ref = _cross3(_Y if abs(x[1]) < 0.9 else _X, x)
            if not close:
                y = vt[1]
                ref = y if y @ ref >= 0 else -y
        y = ref - (ref @ x) * x
        y /= math.sqrt(y @ y)
    else:
        y = vt[1]
        if y @ ref < 0:
            y = -y
    rot = np.empty((3, 3))
    rot[:, 0] = x
    rot[:, 1] = y
    rot[:, 2] = _cross3(x, y)
    return rot, origin, bool(close), sv3


def shape_turn(before_m, after_m) -> np.ndarray:
    """Rotation (3, 3) that best carries module centres before_m onto after_m (both (N, 3), one frame), each
    set about its own centroid: the least-squares turn of the body as a cloud of points (Kabsch, no mirror).

    Given the centres in the last and this step's virtual chassis frames, it is how the chassis axes turned
    against the body itself: near the identity when the chassis turns with the body, large when its axes
    swap (second and third principal moments near-equal) while the body stays where it is.
    """
    a = np.asarray(before_m, dtype=float)
    b = np.asarray(after_m, dtype=float)
    a = a - a.sum(axis=0) / a.shape[0]
    b = b - b.sum(axis=0) / b.shape[0]
    u, _, vt = np.linalg.svd(b.T @ a)
    if np.linalg.det(u) * np.linalg.det(vt) < 0.0:
        u[:, 2] = -u[:, 2]
    return u @ vt


def resting_down(centres_m, down_guess) -> np.ndarray:
    """Unit down direction (3,) for a body resting on flat ground, nearest to down_guess.

    The body rests on a face of the convex hull of its module centres: of the hull faces, the one whose
    outward normal is closest to down_guess is taken as the floor contact. Collinear modules (a straight
    body) have no face: down_guess is returned (normalised). Frames: whatever frame the inputs share.
    """
    guess = np.asarray(down_guess, dtype=float)
    guess = guess / np.linalg.norm(guess)
    p = np.asarray(centres_m, dtype=float)
    _, sv, vt = np.linalg.svd(p - p.mean(axis=0), full_matrices=False)
    if sv[1] < 1e-6 * sv[0]:
        return guess                          # a straight body has no face to rest on
    if sv[2] < 1e-6 * sv[0]:
        return vt[2] if vt[2] @ guess >= 0 else -vt[2]      # a flat body lies flat
    try:
        from scipy.spatial import ConvexHull
        hull = ConvexHull(p)
    except Exception:       # qhull refuses degenerate input: keep the guess
        return guess
    normals = hull.equations[:, :3]
    best = normals[int(np.argmax(normals @ guess))]
    return best / np.linalg.norm(best)


_TRIPLES = {}
_CYC1 = np.array([1, 2, 0])
_CYC2 = np.array([2, 0, 1])


def _triples(k: int):
    """Index array (3, T) of every unordered triple of k candidates, cached."""
    cached = _TRIPLES.get(k)
    if cached is None:
        cached = _TRIPLES[k] = np.array([(a, b, c) for a in range(k) for b in range(a + 1, k)
                                         for c in range(b + 1, k)], dtype=int).reshape(-1, 3).T
    return cached


def support_plane(centres_m, down_guess, candidates: int = 8, max_tilt_rad: float = 0.35,
                  tolerance_m: float = 1e-6, min_width_m: float = SUPPORT_MIN_WIDTH_M):
    """The ground plane a body of equal spheres/capsules rests on: (unit down (3,), offset) or None.

    A rigid body of modules of one radius on flat ground rests on a face of the convex hull of its module
    centres; of the faces, the one whose outward normal is nearest to down_guess (the gravity direction
    predicted from the last pose) is the floor. Only the ``candidates`` modules lowest along down_guess
    can span it, so every triple of them is tried (56 triples for 8, vectorised) and a triple's plane is
    kept when no module lies below it (by more than tolerance_m). Returns (down, d) with down the face's
    outward unit normal and d = max_i centres_i . down (the plane is {p : p . down = d}; heights above
    it are d - centres . down), or None when no face lies within max_tilt_rad of down_guess (a straight
    or flat body, or a body tumbling: keep the guess then). A triple narrower than min_width_m (its
    smallest altitude) spans no face: three modules in a line tilt their plane by whatever micrometres
    their centres lie off it. Frames: whatever frame the inputs share.

    Example: three modules on the floor and one lifted, seen from a frame tilted 0.1 rad about x:
    support_plane gives that frame's true down, not the guess [0, 0, -1].
    """
    p = np.asarray(centres_m, dtype=float)
    guess = np.asarray(down_guess, dtype=float)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 3:
        raise ValueError(f'centres_m must have shape (N >= 3, 3), got {p.shape}')
    if guess.shape != (3,):
        raise ValueError(f'down_guess must have shape (3,), got {guess.shape}')
    guess = guess / math.sqrt(guess @ guess)
    kern = compiled()
    if kern is not None:
        down = np.empty(3)
        if not kern.support_plane_kernel(np.ascontiguousarray(p), guess, int(candidates), math.cos(max_tilt_rad),
                                         float(tolerance_m), float(min_width_m), down):
            return None
        return down, float((p @ down).max())
    k = min(candidates, p.shape[0])
    cand = p[np.argpartition(p @ guess, p.shape[0] - k)[-k:]] if k < p.shape[0] else p
    tri = cand[_triples(k)]                                        # (3, T, 3) corners
    a = tri[0]
    e = tri[1:] - a                                                # (2, T, 3) edges
    n = e[0][:, _CYC1] * e[1][:, _CYC2] - e[0][:, _CYC2] * e[1][:, _CYC1]     # face normals (T, 3)
    norm2 = np.einsum('ta,ta->t', n, n)
    # |e0 x e1| is twice the area: over the longest edge, the triangle's smallest altitude.
    longest2 = np.maximum(np.maximum(np.einsum('ta,ta->t', e[0], e[0]), np.einsum('ta,ta->t', e[1], e[1])),
                          np.einsum('ta,ta->t', e[1] - e[0], e[1] - e[0]))
    wide = norm2 > min_width_m * min_width_m * longest2
    cos = n @ guess
    # outward (toward the ground) unit normals; degenerate triples get cos = 0 and drop out below
    inv = np.sign(cos) / np.sqrt(np.maximum(norm2, 1e-300))
    n *= inv[:, None]
    cos *= inv
    # A supporting face has every module on its upper side: max_i (p_i - a) . n <= tolerance.
    below = (p @ n.T).max(axis=0) - np.einsum('ta,ta->t', a, n)
    good = (below <= tolerance_m) & (cos >= math.cos(max_tilt_rad)) & (norm2 > 1e-18) & wide
    if not good.any():
        return None
    # Equal modules: the body can rest only on a face over which its centroid stands (barycentric
    # coordinates of the centroid's projection all >= 0). On a rounded body (a helix) faces next to
    # each other differ by a degree; nearness to the guess alone would let the estimate roll away.
    idx = np.flatnonzero(good)
    eg = e[:, idx]
    gram = np.einsum('kta,lta->klt', eg, eg)                      # (2, 2, m) edge dot products
    rhs = np.einsum('kta,ta->kt', eg, p.sum(axis=0) / p.shape[0] - a[idx])
    det = norm2[idx]              # = gram[0, 0] gram[1, 1] - gram[0, 1]^2, without its cancellation
    u = (gram[1, 1] * rhs[0] - gram[0, 1] * rhs[1]) / det
    v = (gram[0, 0] * rhs[1] - gram[0, 1] * rhs[0]) / det
    stable = (u >= -1e-9) & (v >= -1e-9) & (u + v <= 1.0 + 1e-9)
    if stable.any():
        idx = idx[stable]
    best = int(idx[np.argmax(cos[idx])])
    down = n[best]
    return down, float((p @ down).max())


class ContactSelector:
    """Which modules touch the ground: the lowest along gravity, with hysteresis.

    A module whose height above the lowest module is below enter_m becomes a contact; a contact stays
    one until its height exceeds exit_m (> enter_m).
    """

    def __init__(self, enter_m: float, exit_m: float):
        if not 0 <= enter_m <= exit_m:
            raise ValueError(f'need 0 <= enter_m <= exit_m, got enter_m={enter_m}, exit_m={exit_m}')
        self.enter_m = float(enter_m)
        self.exit_m = float(exit_m)
        self.mask = None

    def reset(self):
        self.mask = None

    def update(self, heights_m) -> np.ndarray:
        """Boolean contact mask (N,) from module heights (N,) (m, along 'up', any origin)."""
        h = np.asarray(heights_m, dtype=float)
        rel = h - h.min()
        enter = rel <= self.enter_m
        if self.mask is None or self.mask.shape != h.shape:
            self.mask = enter
        else:
            self.mask = enter | (self.mask & (rel <= self.exit_m))
        return self.mask.copy()

    def widen(self, mask) -> None:
        """Take ``mask`` (N,) bool as the contacts the hysteresis goes on from: modules added because the
        ones chosen by height could not hold the body stay contacts until they rise above exit_m."""
        self.mask = np.array(mask, dtype=bool)


# Loads below this fraction of the largest still count a little in contact_step: a contact the statics leave
# unloaded may carry some weight all the same (the attitude, and so the heights, are a degree or two off).
LOAD_FLOOR = 0.05


def static_loads(contact_xy_m, centre_xy_m):
    """Normal loads (m,) (fractions of the body's weight, >= 0, summing to 1) of contacts at contact_xy_m
    (m, 2) (m, in the floor plane) holding a body whose centre of mass is over centre_xy_m (2,), and
    whether they can hold it: (loads, supported).

    A rigid body on more than three contacts is statically indeterminate; this takes the least-norm loads
    that balance the weight and its two moments (the most even split), dropping the most negative one until
    all are >= 0 (an active set; kernels.static_loads_kernel compiles it). The body is supported when the centre stands over the hull of the
    contacts that remain, i.e. the moments balance. Modules of one mass: the centre is the centroid of the
    module centres, the virtual chassis origin.
    """
    p = np.asarray(contact_xy_m, dtype=float)
    m = p.shape[0]
    if m == 0:
        return np.zeros(0), False
    kern = compiled()
    if kern is not None:
        loads = np.empty(m)
        ok = kern.static_loads_kernel(np.ascontiguousarray(p), np.ascontiguousarray(centre_xy_m, dtype=float), loads)
        return loads, bool(ok)
    r = p - np.asarray(centre_xy_m, dtype=float)
    a = np.empty((3, m))
    a[0] = 1.0
    a[1:] = r.T
    rhs = np.array([1.0, 0.0, 0.0])
    active = np.ones(m, dtype=bool)
    loads = np.zeros(m)
    for _ in range(m):
        aa = a[:, active]
        gram = aa @ aa.T
        gram[_DIAG3] += 1e-12 * (np.trace(gram) + 1.0)
        n = aa.T @ np.linalg.solve(gram, rhs)
        if n.min() >= -1e-12 or active.sum() == 1:
            break
        active[np.flatnonzero(active)[int(np.argmin(n))]] = False
    loads[active] = np.maximum(n, 0.0)
    total = loads.sum()
    if total > 0.0:
        loads /= total
    # Supported: the loads balance the moments (the centre over the contacts' hull), to 1 mm of lever.
    supported = bool(np.abs(r.T @ loads).max() < 1e-3)
    return loads, supported


# Heights this close count as level when supporting_contacts widens the contact set (m).
TIE_M = 1e-9


def supporting_contacts(mask, heights_m, centres_m, down, min_contacts: int = 3):
    """The contact mask (N,) bool widened, lowest module first, until the contacts can hold the body: at
    least min_contacts of them and the centroid of the module centres over their hull (static_loads).

    mask (N,) the contacts chosen by height; heights_m (N,) each module's lowest point above the lowest
    (m); centres_m (N, 3) module centres and down (3,) unit, one frame (the chassis's). A body on flat
    ground rests on contacts around its centre of mass: one or two modules chosen (their neighbours
    were taken for lifted by a degree or two of attitude) cannot hold it, and a single contact fixes the
    translation only through its lever arm, times the rotation's error.
    Returns (mask, loads (N,) the static load fractions of the contacts, 0 elsewhere).
    """
    mask = np.asarray(mask, dtype=bool).copy()
    h = np.asarray(heights_m, dtype=float)
    q = np.asarray(centres_m, dtype=float)
    d = np.asarray(down, dtype=float)
    # Floor-plane coordinates: two unit vectors perpendicular to down.
    u = _cross3(d, _X if abs(d[0]) < 0.9 else _Y)
    u /= math.sqrt(u @ u)
    v = _cross3(d, u)
    kern = compiled()
    if kern is not None:
        out = np.empty(mask.size)
        kern.supporting_contacts_kernel(mask, np.ascontiguousarray(h), np.ascontiguousarray(q), u, v,
                                        np.argsort(h, kind='stable'), min_contacts, TIE_M, out)
        return mask, out
    xy = np.column_stack([q @ u, q @ v])
    centre = xy.sum(axis=0) / xy.shape[0]
    order = np.argsort(h, kind='stable')
    k = 0
    while True:
        idx = np.flatnonzero(mask)
        if idx.size >= min_contacts:
            loads, ok = static_loads(xy[idx], centre)
            if ok or idx.size == mask.size:
                break
        while k < order.size and mask[order[k]]:
            k += 1
        if k >= order.size:
            loads, _ = static_loads(xy[idx], centre)
            break
        # Modules level with the next lowest (within rounding) join with it: which of two equal heights
        # comes first must not depend on the last bit of a sum.
        mask |= h <= h[order[k]] + TIE_M
    out = np.zeros(mask.size)
    out[idx] = loads
    return mask, out


@dataclass(frozen=True)
class ContactStep:
    """Result of ``contact_step``.

    displacement (6,): chassis body displacement (dv (m), dw (rad)) in the chassis frame at the step's
    start (apply as g1 = g0 se3_exp(displacement)). normal_inverse (6, 6): regularised inverse normal
    matrix (per unit slip variance). residual (m, 3): each contact point's slip displacement (m).
    rank of the contact constraints (6 needed, 3 with a known angular velocity). singular: a weak
    direction was capped or held.
    """

    displacement: np.ndarray
    normal_inverse: np.ndarray
    residual: np.ndarray
    rank: int
    rank_needed: int
    sigma_min: float
    singular: bool


def _contact_rows(q0, rot0, q1, rot1, idx, down, radius_m, axial_weight, half_length_m, sw):
    """The weighted no-slip rows (m, 3, 6) and right-hand sides (m, 3) of contact_step (numpy reference of
    kernels.contact_rows_kernel); sw (m,) square roots of the weights or None."""
    qm = 0.5 * (q0[idx] + q1[idx])
    dq = q1[idx] - q0[idx]
    r0, r1 = np.asarray(rot0)[idx], np.asarray(rot1)[idx]
    rel = r1 @ r0.transpose(0, 2, 1)                        # rotation increment in chassis coordinates
    skew = 0.5 * (rel[:, _SKEW_I, _SKEW_J] - rel[:, _SKEW_J, _SKEW_I])   # sin(angle) * axis
    sin2 = np.einsum('ka,ka->k', skew, skew)
    if sin2.max() < 0.0025 and np.trace(rel, axis1=1, axis2=2).min() > 1.0:
        # Every increment under 0.05 rad (the usual case per message): angle / sin(angle) by its series
        # arcsin(s) / s = 1 + s^2 / 6 + 3 s^4 / 40, relative error below 1e-7.
        dtheta = skew * (1.0 + sin2 * (1.0 / 6.0 + 0.075 * sin2))[:, None]
    else:
        sin_t = np.sqrt(sin2)
        ang = np.arctan2(sin_t, np.clip(0.5 * (np.trace(rel, axis1=1, axis2=2) - 1.0), -1.0, 1.0))
        dtheta = skew * np.where(sin_t > 1e-12, ang / np.maximum(sin_t, 1e-300), 1.0)[:, None]
        for i in np.flatnonzero(ang > 3.0):     # near pi the skew part loses the axis: use the robust log
            dtheta[i] = so3_log(rel[i])
    # The contact point lies one radius below the module centre: c = q + rho d with d pointing down.
    # (docs/estimation.md writes c = q - rho d; with d the *down* vector that point would be on top of the
    # module and rolling would move the wrong way: a cylinder spinning by +w about x rolls toward -y.)
    c = qm + radius_m * down
    # Unknowns x = (dv, dw); contact i demands A_i x = b_i with A_i = [I, -hat(c_i)] and
    # b_i = -dq_i - rho dtheta_i x d  (from dtheta x (c - q) with c - q = rho d); row-wise a x d = a hat(d).
    b = dtheta @ (-radius_m * hat3(down)) - dq
    m = qm.shape[0]
    gamma = 1.0 - axial_weight
    if gamma > 0.0 or half_length_m > 0.0:
        axis = r0[:, :, 0] + r1[:, :, 0]                      # module axes at mid-step
        axis /= np.sqrt(np.einsum('ka,ka->k', axis, axis))[:, None]
    if half_length_m > 0.0:
        reach = np.minimum(np.maximum(axis @ down * (1.0 / TILT_FULL_CONTACT), -1.0), 1.0)
        end = axis * (half_length_m * reach)[:, None]
        c += end
        b -= _cross(dtheta, end)
    # The weighted rows, built once and used for the normal equations and the residual alike: the weight
    # W_i = w_i (I - gamma a_i a_i^T) (axial sliding weighted by axial_weight = 1 - gamma) is the square
    # of sqrt(w_i) P_i with P_i = I - k a_i a_i^T, k = 1 - sqrt(axial_weight); P_i A_i = A_i - k a_i u_i^T
    # with u_i = A_i^T a_i = (a_i, c_i x a_i), the Pluecker coordinates of the module axis.
    rows = np.empty((m, 3, 6))
    rows[:, :, :3] = _EYE3
    rows[:, :, 3:] = hat_batch(-c)
    if gamma > 0.0:
        k = 1.0 - math.sqrt(axial_weight)
        ka = k * axis
        rows -= ka[:, :, None] * np.einsum('ka,kab->kb', axis, rows)[:, None, :]
        b -= ka * np.einsum('ka,ka->k', axis, b)[:, None]
    if sw is not None:
        rows *= sw[:, None, None]
        b *= sw[:, None]
    return rows, b


def _coulomb_weights(a, r, iterations: int, static: float) -> np.ndarray:
    """Contact weights (m,) for stacked rows a (3m, k) and rhs r (3m,): iteratively reweighted least
    squares toward min sum_c |slip_c| (see contact_step): each pass solves the weighted normal
    equations (a hair of ridge keeps a rank-deficient set solvable) and weights each contact by
    static / max(|slip_c|, static), 1 for a contact that sticks. The numpy reference of
    kernels.coulomb_weights_kernel."""
    m, k = a.shape[0] // 3, a.shape[1]
    w = np.ones(m)
    for _ in range(iterations):
        wr = np.repeat(w, 3)
        aw = a * wr[:, None]
        normal = aw.T @ a
        normal[np.diag_indices(k)] += 1e-9 * np.trace(normal) + 1e-300
        x = np.linalg.solve(normal, aw.T @ r)
        e = (a @ x - r).reshape(m, 3)
        w = static / np.maximum(np.sqrt(np.einsum('ca,ca->c', e, e)), static)
    return w


def _solve_contact_rows(a, rhs, down, rotation_increment, tilt_increment, hold, scale, singular_threshold,
                        coulomb_iterations: int = 0, static_slip_m: float = 1e-4):
    """The weighted least squares of contact_step for stacked rows a (3m, 6) and rhs (3m,): all six
    unknowns, the translation given a known rotation, or translation and yaw given the tilt; with
    coulomb_iterations, each contact's rows weighted first (_coulomb_weights).
    Returns (displacement (6,), normal_inverse (6, 6), rank, sigma_min, singular, rank_needed)."""
    if rotation_increment is None and tilt_increment is not None:
        # x = (dv, tilt + yaw down): a 4-unknown least squares for y = (dv, yaw about down).
        tilt = np.asarray(tilt_increment, dtype=float)
        a4 = np.empty((a.shape[0], 4))
        a4[:, :3] = a[:, :3]
        a4[:, 3] = a[:, 3:] @ down
        r4 = rhs - a[:, 3:] @ tilt
        if coulomb_iterations:
            a4, r4 = _coulomb_weighted(a4, r4, coulomb_iterations, static_slip_m)
        normal4 = a4.T @ a4
        reg, ninv4, rank, smin, singular = regularised_normal_solve(normal4, scale[:4], singular_threshold)
        hold4 = None if hold is None else np.array([hold[0], hold[1], hold[2], hold[3:] @ down])
        y = reg.solve(a4.T @ r4, hold4)
        disp = np.empty(6)
        disp[:3] = y[:3]
        disp[3:] = tilt + y[3] * down
        t = np.zeros((6, 4))
        t[_DIAG3] = 1.0
        t[3:, 3] = down
        ninv = t @ ninv4 @ t.T
        needed = 4
    elif rotation_increment is not None:
        dw = np.asarray(rotation_increment, dtype=float)
        av = a[:, :3]
        r3 = rhs - a[:, 3:] @ dw
        if coulomb_iterations:
            av, r3 = _coulomb_weighted(np.ascontiguousarray(av), r3, coulomb_iterations, static_slip_m)
        reg, ninv3, rank, smin, singular = regularised_normal_solve(av.T @ av, scale[:3], singular_threshold)
        dv = reg.solve(av.T @ r3, None if hold is None else hold[:3])
        disp = np.concatenate([dv, dw])
        ninv = np.zeros((6, 6))
        ninv[:3, :3] = ninv3
        needed = 3
    else:
        if coulomb_iterations:
            a, rhs = _coulomb_weighted(a, rhs, coulomb_iterations, static_slip_m)
        reg, ninv, rank, smin, singular = regularised_normal_solve(a.T @ a, scale, singular_threshold)
        disp = reg.solve(a.T @ rhs, hold)
        needed = 6
    return disp, ninv, rank, smin, singular, needed


def _coulomb_weighted(a, r, iterations, static):
    """Rows a and rhs r scaled by the square roots of their contacts' Coulomb weights."""
    kern = compiled()
    if kern is not None:
        w = np.empty(a.shape[0] // 3)
        kern.coulomb_weights_kernel(np.ascontiguousarray(a), np.ascontiguousarray(r), iterations, static, w)
    else:
        w = _coulomb_weights(a, r, iterations, static)
    sw = np.repeat(np.sqrt(w), 3)
    return a * sw[:, None], r * sw


def contact_step(q0, rot0, q1, rot1, down, radius_m: float, contacts, weights=None,
                 axial_weight: float = 1.0, rotation_increment=None, length_scale_m: float = 1.0,
                 singular_threshold: float = DEFAULT_SINGULAR_THRESHOLD, hold=None,
                 half_length_m: float = 0.0, tilt_increment=None, coulomb_iterations: int = 0,
                 static_slip_m: float = 1e-4) -> ContactStep:
    """Chassis displacement over one step from the no-slip contact constraints (mid-point rule).

    Parameters: q0, q1 (N, 3) module centres (m) and rot0, rot1 (N, 3, 3) module rotations, each in its
    own step's chassis frame; down (3,) unit gravity direction in the chassis frame; radius_m module
    radius rho; contacts (N,) bool; weights (N,) per-module confidence; axial_weight in [0, 1]: weight
    of the no-slip condition along each module's axis (0 lets modules slide lengthwise);
    rotation_increment (3,) or None: a known chassis rotation (rad, e.g. gyro rate * dt), leaving only
    the translation to estimate; length_scale_m: scale that makes rotation and translation comparable;
    hold (6,) or None: the displacement to keep along unobservable directions (e.g. the previous twist
    times dt), see snake_control.estimation.connection.regularised_normal_solve.
    half_length_m: half the length of a module's capsule (the joint spacing / 2). A module tilted along
    gravity touches the ground with its lower end, not below its centre; the contact point moves toward
    that end as the tilt grows (all the way at TILT_FULL_CONTACT = sin 3 degrees), which matters for
    gaits that lift and lower modules (sidewinding): the module's pitch rate then moves the contact.
    0 keeps every contact below the module centre.
    tilt_increment (3,) or None: the chassis rotation increment perpendicular to ``down`` when it is
    known (from the ground plane seen at both ends of the step, see support_plane): only the rotation
    about ``down`` (yaw) and the translation are then solved from the contacts. A tread of contacts
    in a line (sidewinding) cannot fix the roll about that line; the ground plane can.
    coulomb_iterations: re-solve this many times with each contact weighted by 1 / max(|its slip|,
    static_slip_m) (iteratively reweighted least squares). Least squares minimises the sum of squared
    slip velocities, the power a viscous floor would take; these weights turn it into the sum of slip
    speeds, the power Coulomb friction dissipates, whose minimum is the quasi-static motion of a body on
    a dry floor (equal normal loads assumed). A contact that slips then weighs less than one that holds,
    in proportion: the estimate follows the contacts that stick. static_slip_m (m per step): slips under
    this count as sticking.
    """
    q0, q1 = np.asarray(q0, float), np.asarray(q1, float)
    down = np.asarray(down, dtype=float)
    mask = np.asarray(contacts, dtype=bool)
    idx = np.flatnonzero(mask)
    m = idx.shape[0]
    scale = _column_scale(length_scale_m)
    if m == 0:
        disp = np.zeros(6)
        if rotation_increment is not None:
            disp[3:] = rotation_increment
        ninv = np.diag(scale ** 2) / (1e-2 * singular_threshold) ** 2
        return ContactStep(disp, ninv, np.zeros((q0.shape[0], 3)), 0, 6 if rotation_increment is None else 3,
                           0.0, True)
    rows = b = None
    kern = compiled()
    k_axial = 1.0 - math.sqrt(axial_weight)
    sw = np.ones(m) if weights is None else np.sqrt(np.asarray(weights, dtype=float)[idx])
    if kern is not None:
        rows, b = np.empty((m, 3, 6)), np.empty((m, 3))
        if not kern.contact_rows_kernel(np.ascontiguousarray(q0), np.ascontiguousarray(rot0, dtype=float),
                                        np.ascontiguousarray(q1), np.ascontiguousarray(rot1, dtype=float), idx, down, float(radius_m),
                                        k_axial, float(half_length_m), sw, rows, b):
            rows = None       # a module turned by nearly pi: the numpy path has the robust logarithm
    if rows is None:
        rows, b = _contact_rows(q0, rot0, q1, rot1, idx, down, radius_m, axial_weight, half_length_m,
                                None if weights is None else sw)
    a = rows.reshape(3 * m, 6)
    rhs = b.reshape(3 * m)
    if kern is not None:
        needed = 3 if rotation_increment is not None else 4 if tilt_increment is not None else 6
        known = rotation_increment if rotation_increment is not None else tilt_increment
        disp, ninv = np.empty(6), np.empty((6, 6))
        rank, smin, singular = kern.solve_contact_rows_kernel(
            np.ascontiguousarray(a), np.ascontiguousarray(rhs), np.ascontiguousarray(down),
            needed, _ZERO3 if known is None else np.ascontiguousarray(known, dtype=float),
            _ZERO6 if hold is None else np.ascontiguousarray(hold, dtype=float), hold is not None, scale,
            float(singular_threshold), RANK_TOLERANCE, int(coulomb_iterations), float(static_slip_m), disp, ninv)
    else:
        disp, ninv, rank, smin, singular, needed = _solve_contact_rows(
            a, rhs, down, rotation_increment, tilt_increment, hold, scale, singular_threshold,
            int(coulomb_iterations), float(static_slip_m))
    # Slip as weighted for the fit (axial slip counts only as much as axial_weight allows): the rows' misfit.
    resid = np.zeros((q0.shape[0], 3))
    resid[idx] = (a @ disp - rhs).reshape(m, 3)
    return ContactStep(disp, ninv, resid, rank, needed, smin, singular)


_SCALES = {}


def _column_scale(length_scale_m: float) -> np.ndarray:
    """(1, 1, 1, 1/L, 1/L, 1/L): makes rotations comparable with translations; cached per length."""
    scale = _SCALES.get(length_scale_m)
    if scale is None:
        if len(_SCALES) > 64:
            _SCALES.clear()
        scale = _SCALES[length_scale_m] = np.array([1.0, 1.0, 1.0] + [1.0 / length_scale_m] * 3)
    return scale
