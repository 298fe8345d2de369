"""SE(2) and SE(3): exponential, logarithm, adjoint, composition (pure numpy).

Conventions (docs/kinematics.md, seed 000):
- An SE(2) pose is g = (x, y, theta) or its 3x3 homogeneous matrix. A twist is (vx, vy, omega).
- An SE(3) pose is a 4x4 homogeneous matrix; a twist is (vx, vy, vz, wx, wy, wz): linear first,
  the same order as SE(2).
- Body velocity xi = g^-1 g_dot, spatial velocity xi_s = g_dot g^-1 = Ad_g xi.
- Odometry composes on the right: g_{k+1} = g_k exp(xi_k dt) with xi_k a body twist.

Example (a quarter turn on a unit circle, driven forward at 1 m/s with 1 rad/s):
    >>> np.round(se2_exp(np.array([np.pi / 2, 0.0, np.pi / 2])), 6)
    array([1.      , 1.      , 1.570796])
"""
from __future__ import annotations

import math

import numpy as np

# Below this angle the closed forms divide by ~0: use Taylor series instead.
_SMALL_ANGLE = 1e-4


def _check_shape(name: str, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    if value.shape != shape:
        raise ValueError(f'{name} must have shape {shape}, got {value.shape}')
    return value


def wrap_angle(theta):
    """Angle(s) wrapped to [-pi, pi)."""
    return (np.asarray(theta) + np.pi) % (2.0 * np.pi) - np.pi


# --- SE(2) --------------------------------------------------------------------------------------

def se2_relative(poses_xyyaw, origin_xyyaw) -> np.ndarray:
    """Poses (k, 3) (x m, y m, yaw rad in a world frame) expressed in the frame of origin (3,)."""
    p = np.asarray(poses_xyyaw, dtype=float)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f'poses_xyyaw: expected shape (k, 3), got {p.shape}')
    x0, y0, th0 = (float(v) for v in origin_xyyaw)
    c, s = math.cos(th0), math.sin(th0)
    dx, dy = p[:, 0] - x0, p[:, 1] - y0
    yaw = np.arctan2(np.sin(p[:, 2] - th0), np.cos(p[:, 2] - th0))
    return np.column_stack((c * dx + s * dy, -s * dx + c * dy, yaw))


def yaw_from_quaternion(qx, qy, qz, qw):
    """Yaw (rad) about the world z axis of a unit quaternion (arrays or floats)."""
    return np.arctan2(2.0 * (qw * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz))


def xyyaw_from_se3(poses) -> np.ndarray:
    """The planar pose (..., 3) of SE(3) poses (..., 4, 4) (any number of leading axes): x m, y m of the
    origin and yaw rad in (-pi, pi], the heading of the frame's x axis projected on the xy plane
    (atan2(R[1, 0], R[0, 0])).

    >>> g = np.eye(4)
    >>> g[:2, :2] = rot2(np.pi / 2)
    >>> g[:3, 3] = (1.0, 2.0, 0.5)
    >>> xyyaw_from_se3(g).round(6)
    array([1.      , 2.      , 1.570796])
    >>> xyyaw_from_se3(np.stack([np.eye(4), g])).shape
    (2, 3)
    """
    g = np.asarray(poses, dtype=float)
    if g.shape[-2:] != (4, 4):
        raise ValueError(f'poses must have shape (..., 4, 4), got {g.shape}')
    return np.stack((g[..., 0, 3], g[..., 1, 3], np.arctan2(g[..., 1, 0], g[..., 0, 0])), axis=-1)


def rot2(theta: float) -> np.ndarray:
    """2x2 rotation matrix."""
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s], [s, c]])


def se2_matrix(pose) -> np.ndarray:
    """3x3 homogeneous matrix of pose (x, y, theta)."""
    x, y, theta = _check_shape('pose', pose, (3,))
    g = np.eye(3)
    g[:2, :2] = rot2(theta)
    g[:2, 2] = (x, y)
    return g


def se2_from_matrix(g) -> np.ndarray:
    """(x, y, theta) of a 3x3 homogeneous matrix."""
    g = _check_shape('g', g, (3, 3))
    return np.array([g[0, 2], g[1, 2], np.arctan2(g[1, 0], g[0, 0])])


def se2_compose(a, b) -> np.ndarray:
    """Pose a * b: b expressed in a's frame, then a applied."""
    ax, ay, at = _check_shape('a', a, (3,))
    bx, by, bt = _check_shape('b', b, (3,))
    c, s = np.cos(at), np.sin(at)
    return np.array([ax + c * bx - s * by, ay + s * bx + c * by, wrap_angle(at + bt)])


def se2_inverse(g) -> np.ndarray:
    """Pose g^-1."""
    x, y, t = _check_shape('g', g, (3,))
    c, s = np.cos(t), np.sin(t)
    return np.array([-c * x - s * y, s * x - c * y, wrap_angle(-t)])


def _se2_v(phi: float) -> np.ndarray:
    """V(phi) = (1/phi)[[sin, -(1-cos)], [1-cos, sin]], by series near phi = 0."""
    if abs(phi) < _SMALL_ANGLE:
        a = 1.0 - phi * phi / 6.0            # sin(phi)/phi
        b = phi / 2.0 - phi ** 3 / 24.0      # (1 - cos(phi))/phi
    else:
        a = np.sin(phi) / phi
        b = (1.0 - np.cos(phi)) / phi
    return np.array([[a, -b], [b, a]])


def se2_exp(twist) -> np.ndarray:
    """Pose reached from the identity by holding body twist (vx, vy, omega) for unit time.

    Multiply the twist by dt first for a step of length dt.
    """
    vx, vy, phi = _check_shape('twist', twist, (3,))
    x, y = _se2_v(phi) @ np.array([vx, vy])
    return np.array([x, y, wrap_angle(phi)])


def se2_log(pose) -> np.ndarray:
    """Twist (vx, vy, omega), omega in [-pi, pi), whose unit-time exponential is pose."""
    x, y, theta = _check_shape('pose', pose, (3,))
    theta = float(wrap_angle(theta))
    v = np.linalg.solve(_se2_v(theta), np.array([x, y]))
    return np.array([v[0], v[1], theta])


def se2_adjoint(pose) -> np.ndarray:
    """3x3 Ad_g acting on twists (vx, vy, omega): spatial twist = Ad_g @ body twist."""
    x, y, theta = _check_shape('pose', pose, (3,))
    ad = np.eye(3)
    ad[:2, :2] = rot2(theta)
    ad[0, 2] = y
    ad[1, 2] = -x
    return ad


# --- SO(3) and SE(3) ----------------------------------------------------------------------------

def so3_hat(w) -> np.ndarray:
    """3x3 skew matrix with hat(w) @ v == cross(w, v)."""
    wx, wy, wz = _check_shape('w', w, (3,))
    return np.array([[0.0, -wz, wy], [wz, 0.0, -wx], [-wy, wx, 0.0]])


def so3_vee(m) -> np.ndarray:
    """Inverse of so3_hat (takes the skew part)."""
    m = _check_shape('m', m, (3, 3))
    return 0.5 * np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])


def so3_exp(w) -> np.ndarray:
    """Rotation matrix of rotation vector w (axis * angle, rad), by Rodrigues' formula."""
    w = _check_shape('w', w, (3,))
    theta = np.linalg.norm(w)
    k = so3_hat(w)
    if theta < _SMALL_ANGLE:
        a = 1.0 - theta ** 2 / 6.0
        b = 0.5 - theta ** 2 / 24.0
    else:
        a = np.sin(theta) / theta
        b = (1.0 - np.cos(theta)) / theta ** 2
    return np.eye(3) + a * k + b * (k @ k)


def so3_log(r) -> np.ndarray:
    """Rotation vector (axis * angle, angle in [0, pi]) of rotation matrix r."""
    r = _check_shape('r', r, (3, 3))
    cos_theta = np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)
    theta = np.arccos(cos_theta)
    if theta < _SMALL_ANGLE:
        return so3_vee(r) * (1.0 + theta ** 2 / 6.0)  # so3_vee(r) = sin(theta) axis; times theta/sin(theta)
    if np.pi - theta < 1e-6:
        # Near pi the skew part vanishes: take the axis from the symmetric part.
        m = (r + np.eye(3)) / 2.0
        i = int(np.argmax(np.diag(m)))
        axis = m[:, i] / np.sqrt(m[i, i])
        return axis / np.linalg.norm(axis) * theta
    return so3_vee(r) * theta / np.sin(theta)


def se3_matrix(rotation, translation) -> np.ndarray:
    """4x4 homogeneous matrix from a rotation matrix and a translation vector."""
    g = np.eye(4)
    g[:3, :3] = _check_shape('rotation', rotation, (3, 3))
    g[:3, 3] = _check_shape('translation', translation, (3,))
    return g


def se3_inverse(g) -> np.ndarray:
    g = _check_shape('g', g, (4, 4))
    r, p = g[:3, :3], g[:3, 3]
    return se3_matrix(r.T, -r.T @ p)


def _so3_left_jacobian(w: np.ndarray) -> np.ndarray:
    theta = np.linalg.norm(w)
    k = so3_hat(w)
    if theta < _SMALL_ANGLE:
        b = 0.5 - theta ** 2 / 24.0
        c = 1.0 / 6.0 - theta ** 2 / 120.0
    else:
        b = (1.0 - np.cos(theta)) / theta ** 2
        c = (theta - np.sin(theta)) / theta ** 3
    return np.eye(3) + b * k + c * (k @ k)


def se3_exp(twist) -> np.ndarray:
    """4x4 pose reached by holding body twist (v, w) (6,) for unit time."""
    twist = _check_shape('twist', twist, (6,))
    v, w = twist[:3], twist[3:]
    return se3_matrix(so3_exp(w), _so3_left_jacobian(w) @ v)


def se3_log(g) -> np.ndarray:
    """Twist (v, w) (6,) whose unit-time exponential is g."""
    g = _check_shape('g', g, (4, 4))
    w = so3_log(g[:3, :3])
    v = np.linalg.solve(_so3_left_jacobian(w), g[:3, 3])
    return np.concatenate([v, w])


def se3_adjoint(g) -> np.ndarray:
    """6x6 Ad_g on twists (v, w): [[R, hat(p) R], [0, R]]."""
    g = _check_shape('g', g, (4, 4))
    r, p = g[:3, :3], g[:3, 3]
    ad = np.zeros((6, 6))
    ad[:3, :3] = r
    ad[:3, 3:] = so3_hat(p) @ r
    ad[3:, 3:] = r
    return ad


def orthonormalize(r) -> np.ndarray:
    """Nearest rotation matrix to r (SVD), for keeping integrated rotations on SO(3)."""
    u, _, vt = np.linalg.svd(_check_shape('r', r, (3, 3)))
    d = np.sign(np.linalg.det(u @ vt))
    return u @ np.diag([1.0, 1.0, d]) @ vt


def quaternion_from_matrix(r) -> np.ndarray:
    """Unit quaternion (qx, qy, qz, qw), qw >= 0, of a rotation matrix."""
    r = _check_shape('r', r, (3, 3))
    tr = np.trace(r)
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = np.array([(r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, s / 4])
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k])
        q = np.zeros(4)
        q[i] = s / 4
        q[j] = (r[j, i] + r[i, j]) / s
        q[k] = (r[k, i] + r[i, k]) / s
        q[3] = (r[k, j] - r[j, k]) / s
    q /= np.linalg.norm(q)
    return q if q[3] >= 0 else -q


def quaternions_from_matrices(r) -> np.ndarray:
    """Unit quaternions (n, 4) as (qx, qy, qz, qw), qw >= 0, of rotation matrices (n, 3, 3): what
    quaternion_from_matrix gives for each, computed for all at once (the same branch per matrix: the
    trace when positive, else the largest diagonal entry).

    >>> half_turn_z = np.diag([-1.0, -1.0, 1.0])
    >>> quaternions_from_matrices([np.eye(3), half_turn_z]).round(12).tolist()
    [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]]
    """
    r = np.asarray(r, dtype=float)
    if r.ndim != 3 or r.shape[1:] != (3, 3):
        raise ValueError(f'r must have shape (n, 3, 3), got {r.shape}')
    d0, d1, d2 = r[:, 0, 0], r[:, 1, 1], r[:, 2, 2]
    # The four candidates' scale factors; each matrix uses one, the others may be 0 or imaginary.
    s = 2.0 * np.sqrt(np.maximum(np.stack([1.0 + d0 - d1 - d2, 1.0 + d1 - d2 - d0, 1.0 + d2 - d0 - d1,
                                           1.0 + d0 + d1 + d2], axis=1), 1e-300))
    tr = d0 + d1 + d2
    branch = np.where(tr > 0, 3, np.argmax(np.stack([d0, d1, d2], axis=1), axis=1))
    sb = s[np.arange(len(r)), branch]
    sum_01, sum_02, sum_12 = r[:, 0, 1] + r[:, 1, 0], r[:, 0, 2] + r[:, 2, 0], r[:, 1, 2] + r[:, 2, 1]
    dif_x, dif_y, dif_z = r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0], r[:, 1, 0] - r[:, 0, 1]
    candidates = np.stack([
        np.stack([sb / 4, sum_01 / sb, sum_02 / sb, dif_x / sb], axis=1),       # x largest
        np.stack([sum_01 / sb, sb / 4, sum_12 / sb, dif_y / sb], axis=1),       # y largest
        np.stack([sum_02 / sb, sum_12 / sb, sb / 4, dif_z / sb], axis=1),       # z largest
        np.stack([dif_x / sb, dif_y / sb, dif_z / sb, sb / 4], axis=1)])        # positive trace
    q = candidates[branch, np.arange(len(r))]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.where(q[:, 3:] >= 0, q, -q)


def matrix_from_quaternion(q) -> np.ndarray:
    """Rotation matrix of a quaternion (qx, qy, qz, qw) (normalised first)."""
    x, y, z, w = _check_shape('q', q, (4,)) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


# --- fast kernels for hot loops (no input checks: callers pass float arrays of the right shape) ----

_EYE4 = np.eye(4)
_GENERATORS = np.array([[[0, 0, 0], [0, 0, -1], [0, 1, 0]],
                        [[0, 0, 1], [0, 0, 0], [-1, 0, 0]],
                        [[0, -1, 0], [1, 0, 0], [0, 0, 0]]], dtype=float).reshape(3, 9)


def hat3(w) -> np.ndarray:
    """so3_hat of a (3,) vector without the shape check."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def hat_batch(v: np.ndarray) -> np.ndarray:
    """(..., 3) -> (..., 3, 3) skew matrices, hat(v) u = v x u, in one matrix product."""
    return (v @ _GENERATORS).reshape(v.shape[:-1] + (3, 3))


def se3_exp_fast(twist) -> np.ndarray:
    """se3_exp of a (6,) twist (v, w) with fewer numpy calls (the estimator runs it on every message).

    >>> twist = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.5])
    >>> bool(np.allclose(se3_exp_fast(twist), se3_exp(twist)))
    True
    """
    w = twist[3:]
    th2 = float(w @ w)
    if th2 < 1e-8:
        a, b, c = 1.0 - th2 / 6.0, 0.5 - th2 / 24.0, 1.0 / 6.0 - th2 / 120.0
    else:
        th = math.sqrt(th2)
        sin_th = math.sin(th)
        a, b, c = sin_th / th, (1.0 - math.cos(th)) / th2, (th - sin_th) / (th2 * th)
    k = hat3(w)
    k2 = k @ k
    g = _EYE4.copy()
    g[:3, :3] += a * k + b * k2
    g[:3, 3] = twist[:3] + (b * k + c * k2) @ twist[:3]
    return g
