"""Backbone-curve fitting of pitch-yaw chains (Yamada-Hirose, seed 004 section 2; docs/gaits.md).

A chain that cannot twist about its own axis follows a rotation-minimising (Bishop) frame of its
backbone curve c(s). With curvature kappa(s) (signed) and torsion tau(s):

    psi(s) = psi0 + int_0^s tau ds
    k1(s) = kappa cos psi,   k2(s) = kappa sin psi        (Bishop curvatures)
    dT/ds = k1 M1 + k2 M2,  dM1/ds = -k1 T,  dM2/ds = -k2 T

with (T, M1, M2) a right-handed frame. With N = cos psi M1 + sin psi M2 as principal normal this is
the Frenet-Serret system with torsion +tau (B = T x N, dN/ds = -kappa T + tau B).

Sign convention against our forward kinematics (snake_control.kinematics.chain: yaw about link z,
pitch about link y, counter-clockwise positive). A link frame is (x, y, z) = (T, M1, M2):

- the YAW normal is M1 = link +y. A positive yaw rotation tilts x toward +y, so
  theta_yaw = + int k1 = + int kappa cos psi over the joint's window.
- the PITCH normal is M2 = link +z. A positive pitch rotation (about +y) tilts x toward -z, so
  theta_pitch = - int k2 = - int kappa sin psi over the joint's window.

Disagreement with seed 004 (and the team's first notes): both write theta_pitch = + int kappa sin psi. With our FK that
sign builds the MIRROR image of the curve (Frenet torsion -tau, e.g. a left-handed helix for tau > 0),
which no rigid motion aligns with the curve; test_gait_backbone checks this against an independently
written right-handed helix. All closed forms below carry the derived pitch sign (the published helix
theta_pitch = A sin(tau s + psi0) becomes -A sin(tau s + psi0); for tau = a kappa,
theta_pitch = [cos psi(s+l) - cos psi(s-l)] / a).

Joint windows: joint i sits at arc length s_i = s0 + i l and integrates its axis' Bishop curvature
over the window from half-way to the previous joint with the same axis to half-way to the next one.
For alternating pitch-yaw chains this is [s_i - l, s_i + l] (docs/gaits.md); for an all-yaw chain it is
[s_i - l/2, s_i + l/2]. The staggered windows are a symmetric (Strang-like) splitting of the frame
ODE, which is why the chain converges to the curve as O(l^2) (the end windows are made symmetric).

Example: a serpenoid with A = 0, B = 5 1/m, omega = 2 pi rad/m on a 4-joint alternating chain,
l = 0.07 m; yaw joint 1 at s = 0.07 takes (2 B / w) sin(w l) sin(w s) = 0.2885 rad:
    >>> c = MCCCurve(B1=5.0, w1=2 * np.pi)
    >>> np.round(joint_angles(c, ['pitch', 'yaw', 'pitch', 'yaw'], 0.07), 4)
    array([0.    , 0.2885, 0.    , 0.6564])
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from snake_control.kinematics.chain import chain_frames

_AXIS_VEC = {'yaw': (0.0, 0.0, 1.0), 'pitch': (0.0, 1.0, 0.0)}
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(10)
_TINY = 1e-9


@dataclass(frozen=True)
class MCCCurve:
    """Main characteristic curve: kappa = A1 + G1 s + B1 sin(w1 s + phi1), tau = A2 + B2 sin(w2 s + phi2).

    Units: A1, B1, A2, B2 in 1/m; G1 in 1/m^2; w1, w2 in rad/m; phi1, phi2, psi0 in rad. psi0 is the
    Bishop angle psi at s = 0 (rolls the whole shape about the body axis). kappa may be negative (signed
    Bishop curvature). G1, a curvature changing linearly along the body, is not in seed 004's family: it
    makes rolling's arc conical, which steers it (docs/gaits.md).
    """

    A1: float = 0.0
    B1: float = 0.0
    w1: float = 0.0
    phi1: float = 0.0
    A2: float = 0.0
    B2: float = 0.0
    w2: float = 0.0
    phi2: float = 0.0
    psi0: float = 0.0
    G1: float = 0.0

    def kappa(self, s_m):
        """Curvature (1/m) at arc length s_m (any shape)."""
        return self.A1 + self.G1 * np.asarray(s_m) + self.B1 * np.sin(self.w1 * s_m + self.phi1)

    def tau(self, s_m):
        """Torsion (1/m) at arc length s_m."""
        return self.A2 + self.B2 * np.sin(self.w2 * s_m + self.phi2)

    def kappa_integral(self, s_m):
        """int_0^s kappa (rad)."""
        return self.A1 * s_m + 0.5 * self.G1 * np.square(s_m) + self.B1 * _int_sin(self.w1, self.phi1, 0.0, s_m)

    def psi(self, s_m):
        """Bishop angle psi(s) = psi0 + int_0^s tau (rad), closed form."""
        return self.psi0 + self.A2 * s_m + self.B2 * _int_sin(self.w2, self.phi2, 0.0, s_m)

    def with_(self, **kw) -> 'MCCCurve':
        return replace(self, **kw)

    @property
    def torsion_ratio(self):
        """a with tau = a kappa exactly (a generalised helix, e.g. AEH-sidewinding), or None."""
        if self.G1 != 0.0:
            return None
        if self.B1 == 0.0 and self.B2 == 0.0:
            return self.A2 / self.A1 if self.A1 != 0.0 else None
        if self.B1 == 0.0 or self.w1 != self.w2 or self.phi1 != self.phi2:
            return None
        a = self.B2 / self.B1
        if abs(self.A2 - a * self.A1) <= 1e-12 * max(1.0, abs(self.A2)):
            return a
        return None


def _int_sin(w, phi, a, b):
    """int_a^b sin(w s + phi) ds, with the w -> 0 limit."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if abs(w) < _TINY:
        return (b - a) * np.sin(phi)
    return (np.cos(w * a + phi) - np.cos(w * b + phi)) / w


# --- windows --------------------------------------------------------------------------------------

def joint_windows(axes, spacing_m: float, s0_m: float = 0.0):
    """Integration windows of every joint along the backbone.

    Parameters: axes (n,) of 'pitch'/'yaw' from tail to head; spacing_m: distance l between adjacent
    joint axes; s0_m: arc length of joint 0. Returns (s_joint (n,), lo (n,), hi (n,)) in m: joint i
    at s0 + i l integrates over [lo_i, hi_i], half-way to its same-axis neighbours.
    """
    axes = list(axes)
    n = len(axes)
    if n == 0:
        raise ValueError('axes must name at least one joint')
    if not spacing_m > 0 or not np.isfinite(spacing_m):
        raise ValueError(f'spacing_m must be positive and finite, got {spacing_m}')
    for a in axes:
        if a not in _AXIS_VEC:
            raise ValueError(f"axes entries must be 'pitch' or 'yaw', got {a!r}")
    idx = np.arange(n, dtype=float)
    s = s0_m + idx * spacing_m
    half_lo = np.empty(n)
    half_hi = np.empty(n)
    for axis in ('pitch', 'yaw'):
        sel = np.array([i for i in range(n) if axes[i] == axis], dtype=int)
        if sel.size == 0:
            continue
        if sel.size == 1:
            half_lo[sel] = half_hi[sel] = 0.5 * spacing_m * (2 if 'pitch' in axes and 'yaw' in axes else 1)
            continue
        gaps = np.diff(sel) * spacing_m
        half_hi[sel[:-1]] = 0.5 * gaps
        half_lo[sel[1:]] = 0.5 * gaps
        half_lo[sel[0]] = half_hi[sel[0]]        # end windows symmetric
        half_hi[sel[-1]] = half_lo[sel[-1]]
    return s, s - half_lo, s + half_hi


@lru_cache(maxsize=64)
def _masks_cached(axes: tuple):
    yaw = np.array([a == 'yaw' for a in axes])
    yaw.setflags(write=False)
    return yaw, ~yaw


def _axis_masks(axes):
    return _masks_cached(tuple(axes))


# --- joint angles ---------------------------------------------------------------------------------

def _pitch_offsets(axes):
    """pi/2 for pitch joints, 0 for yaw: kappa cos(psi + pi/2) = -kappa sin(psi) is the pitch integrand."""
    yaw, _ = _axis_masks(axes)
    return np.where(yaw, 0.0, 0.5 * np.pi)


def joint_angles_quadrature(curve: MCCCurve, axes, spacing_m: float, s0_m: float = 0.0,
                            windows=None) -> np.ndarray:
    """Joint angles (n,) rad by 10-point Gauss-Legendre quadrature of the Bishop curvatures.

    theta_yaw = int kappa cos psi, theta_pitch = -int kappa sin psi over each joint's window (see the
    module docstring for the pitch sign). Works for any MCC curve (S-crawler has no closed form).
    """
    _, lo, hi = windows if windows is not None else joint_windows(axes, spacing_m, s0_m)
    half = 0.5 * (hi - lo)
    s = 0.5 * (hi + lo)[:, None] + half[:, None] * _GL_NODES[None, :]
    f = curve.kappa(s) * np.cos(curve.psi(s) + _pitch_offsets(axes)[:, None])
    return half * (f @ _GL_WEIGHTS)


class ShiftedQuadrature:
    """joint_angles_quadrature(curve, axes, spacing_m, s0) for many s0 (a body sliding along a curve).

    The quadrature nodes are fixed relative to the body, so sin/cos of the node phases are tabulated
    once and shifted by angle addition: per call only two scalar sines and one array cosine remain.
    """

    def __init__(self, curve: MCCCurve, axes, spacing_m: float):
        _, lo, hi = joint_windows(axes, spacing_m, 0.0)
        half = 0.5 * (hi - lo)
        self.curve = curve
        self.x = 0.5 * (hi + lo)[:, None] + half[:, None] * _GL_NODES[None, :]
        self.weights = half[:, None] * _GL_WEIGHTS[None, :]
        self.offset = _pitch_offsets(axes)[:, None]
        c = curve
        self.s1, self.c1 = np.sin(c.w1 * self.x + c.phi1), np.cos(c.w1 * self.x + c.phi1)
        self.s2, self.c2 = np.sin(c.w2 * self.x + c.phi2), np.cos(c.w2 * self.x + c.phi2)

    def angles(self, s0_m: float) -> np.ndarray:
        c = self.curve
        cw1, sw1 = math.cos(c.w1 * s0_m), math.sin(c.w1 * s0_m)
        kappa = c.A1 + c.G1 * (self.x + s0_m) + c.B1 * (self.s1 * cw1 + self.c1 * sw1)
        if abs(c.w2) < _TINY:
            psi = c.psi0 + (c.A2 + c.B2 * math.sin(c.phi2)) * (self.x + s0_m)
        else:
            cw2, sw2 = math.cos(c.w2 * s0_m), math.sin(c.w2 * s0_m)
            cos_now = self.c2 * cw2 - self.s2 * sw2                 # cos(w2 (x + s0) + phi2)
            r2 = c.B2 / c.w2
            psi = (c.psi0 + c.A2 * s0_m + r2 * math.cos(c.phi2)) + c.A2 * self.x - r2 * cos_now
        return (kappa * np.cos(psi + self.offset) * self.weights).sum(axis=1)


def serpenoid_joint_angles(curve: MCCCurve, axes, spacing_m: float, s0_m: float = 0.0,
                           windows=None) -> np.ndarray:
    """Closed form for tau = 0 (serpentine, rolling): psi = psi0 everywhere.

    int_lo^hi kappa = A1 (hi - lo) + G1 (hi^2 - lo^2) / 2 + B1 [cos(w lo + phi) - cos(w hi + phi)] / w,
    which for the window [s - l, s + l] is docs/gaits.md's 2 l A + (2 B / w) sin(w l) sin(w s + phi).
    theta_yaw = cos(psi0) int kappa, theta_pitch = -sin(psi0) int kappa.
    """
    if curve.A2 != 0.0 or curve.B2 != 0.0:
        raise ValueError('serpenoid_joint_angles needs tau = 0 (A2 = B2 = 0)')
    _, lo, hi = windows if windows is not None else joint_windows(axes, spacing_m, s0_m)
    yaw, _ = _axis_masks(axes)
    total = (curve.A1 * (hi - lo) + 0.5 * curve.G1 * (hi * hi - lo * lo)
             + curve.B1 * _int_sin(curve.w1, curve.phi1, lo, hi))
    return np.where(yaw, np.cos(curve.psi0), -np.sin(curve.psi0)) * total + 0.0     # + 0.0: no -0.0


def helix_joint_angles(curve: MCCCurve, axes, spacing_m: float, s0_m: float = 0.0,
                       windows=None) -> np.ndarray:
    """Closed form for a circular helix, kappa = A1, tau = A2 (B1 = B2 = 0), A2 != 0.

    psi = A2 s + psi0: theta_yaw = (A1/A2)[sin psi(hi) - sin psi(lo)],
    theta_pitch = (A1/A2)[cos psi(hi) - cos psi(lo)]. For the window [s - l, s + l] these are
    A cos(A2 s + psi0) and -A sin(A2 s + psi0), A = 2 A1 sin(A2 l) / A2 (docs/gaits.md, with the pitch sign
    derived in the module docstring).
    """
    if curve.B1 != 0.0 or curve.B2 != 0.0 or curve.G1 != 0.0 or abs(curve.A2) < _TINY:
        raise ValueError('helix_joint_angles needs B1 = B2 = G1 = 0 and A2 != 0')
    _, lo, hi = windows if windows is not None else joint_windows(axes, spacing_m, s0_m)
    yaw, _ = _axis_masks(axes)
    p_lo, p_hi = curve.psi(lo), curve.psi(hi)
    r = curve.A1 / curve.A2
    return np.where(yaw, r * (np.sin(p_hi) - np.sin(p_lo)), r * (np.cos(p_hi) - np.cos(p_lo)))


def generalized_helix_joint_angles(curve: MCCCurve, axes, spacing_m: float, s0_m: float = 0.0,
                                   windows=None) -> np.ndarray:
    """Closed form for tau = a kappa (a != 0): AEH-sidewinding, and helices.

    Then psi(s) = psi0 + a int_0^s kappa and kappa = psi'/a, so
    theta_yaw = [sin psi(hi) - sin psi(lo)] / a, theta_pitch = [cos psi(hi) - cos psi(lo)] / a.
    """
    a = curve.torsion_ratio
    if a is None or abs(a) < _TINY:
        raise ValueError('generalized_helix_joint_angles needs tau = a kappa with a != 0')
    _, lo, hi = windows if windows is not None else joint_windows(axes, spacing_m, s0_m)
    yaw, _ = _axis_masks(axes)
    p_lo = curve.psi0 + a * curve.kappa_integral(lo)
    p_hi = curve.psi0 + a * curve.kappa_integral(hi)
    return np.where(yaw, (np.sin(p_hi) - np.sin(p_lo)) / a, (np.cos(p_hi) - np.cos(p_lo)) / a)


def joint_angles(curve: MCCCurve, axes, spacing_m: float, s0_m: float = 0.0, windows=None) -> np.ndarray:
    """Joint angles (n,) rad of a chain fitted to an MCC curve: closed form where one exists.

    Parameters: curve; axes (n,) 'pitch'/'yaw' from tail to head (robot.axes); spacing_m: l;
    s0_m: arc length of joint 0 on the curve (moving it slides the body along the curve);
    windows: precomputed joint_windows(axes, spacing_m, s0_m) to save time in a control loop.
    """
    if windows is None:
        windows = joint_windows(axes, spacing_m, s0_m)
    if curve.A2 == 0.0 and curve.B2 == 0.0:
        return serpenoid_joint_angles(curve, axes, spacing_m, s0_m, windows)
    a = curve.torsion_ratio
    if a is not None and abs(a) >= _TINY:
        return generalized_helix_joint_angles(curve, axes, spacing_m, s0_m, windows)
    return joint_angles_quadrature(curve, axes, spacing_m, s0_m, windows)


# --- the continuous curve and the fit check -------------------------------------------------------

def integrate_curve(curve: MCCCurve, s_start_m: float, s_end_m: float, steps: int = 4000):
    """Integrate the Bishop frame ODE (module docstring) from s_start_m to s_end_m.

    The frame at s_start_m is the identity (T = x, M1 = y, M2 = z) at the origin. Frames use the
    4th-order two-point Magnus step, positions the trapezoid rule with its Euler-Maclaurin end
    correction (4th order, since dT/ds = k1 M1 + k2 M2 is known exactly).
    Returns (s (steps + 1,), positions_m (steps + 1, 3), frames (steps + 1, 3, 3) columns T, M1, M2).
    """
    if steps < 1 or not np.isfinite(s_start_m) or not np.isfinite(s_end_m) or s_end_m <= s_start_m:
        raise ValueError('integrate_curve needs s_end_m > s_start_m and steps >= 1')
    s = np.linspace(s_start_m, s_end_m, steps + 1)
    h = s[1] - s[0]
    c1, c2 = 0.5 - np.sqrt(3) / 6, 0.5 + np.sqrt(3) / 6

    def body_rate(x):       # angular velocity in the frame (T, M1, M2): dT/ds = k1 M1 + k2 M2
        k, p = curve.kappa(x), curve.psi(x)
        return np.stack([np.zeros_like(x), -k * np.sin(p), k * np.cos(p)], axis=-1)

    w1, w2 = body_rate(s[:-1] + c1 * h), body_rate(s[:-1] + c2 * h)
    omega = 0.5 * h * (w1 + w2) + (np.sqrt(3) * h * h / 12.0) * np.cross(w1, w2)
    steps_r = _rodrigues(omega)
    frames = np.empty((steps + 1, 3, 3))
    frames[0] = np.eye(3)
    for i in range(steps):
        frames[i + 1] = frames[i] @ steps_r[i]
    tangents = frames[:, :, 0]
    k, p = curve.kappa(s), curve.psi(s)
    dt = (k * np.cos(p))[:, None] * frames[:, :, 1] + (k * np.sin(p))[:, None] * frames[:, :, 2]
    pos = np.zeros((steps + 1, 3))
    pos[1:] = np.cumsum(0.5 * h * (tangents[1:] + tangents[:-1]), axis=0)
    pos -= (h * h / 12.0) * (dt - dt[0])
    return s, pos, frames


def _rodrigues(w):
    """(k, 3, 3) rotation matrices of (k, 3) rotation vectors (vectorised so3_exp)."""
    theta = np.linalg.norm(w, axis=1)
    small = theta < 1e-6
    ts = np.where(small, 1.0, theta)
    a = np.where(small, 1.0 - theta ** 2 / 6.0, np.sin(ts) / ts)
    b = np.where(small, 0.5 - theta ** 2 / 24.0, (1.0 - np.cos(ts)) / ts ** 2)
    k = np.zeros((w.shape[0], 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -w[:, 2], w[:, 1], -w[:, 0]
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = w[:, 2], -w[:, 1], w[:, 0]
    return np.eye(3) + a[:, None, None] * k + b[:, None, None] * (k @ k)


def kabsch_align(points_m, reference_m):
    """Best proper rigid motion (r (3, 3), t (3,)) taking points onto reference: min sum |r p + t - q|^2.

    Both (k, 3). Reflections are excluded (det r = +1), so a mirror image does not align.
    """
    p = np.asarray(points_m, dtype=float)
    q = np.asarray(reference_m, dtype=float)
    if p.shape != q.shape or p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f'points_m and reference_m must both be (k, 3), got {p.shape} and {q.shape}')
    pm, qm = p.mean(0), q.mean(0)
    u, _, vt = np.linalg.svd((p - pm).T @ (q - qm))
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    r = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    return r, qm - r @ pm


def kabsch_rms(points_m, reference_m) -> float:
    """RMS distance (m) between two (k, 3) point sets after the best proper rigid motion (no mirror)."""
    r, t = kabsch_align(points_m, reference_m)
    d = np.asarray(points_m, dtype=float) @ r.T + t - np.asarray(reference_m, dtype=float)
    return float(np.sqrt(np.mean(np.sum(d * d, axis=1))))


def chain_joint_positions(angles_rad, axes, spacing_m: float) -> np.ndarray:
    """(n, 3) joint positions of a chain with equal links of length spacing_m (tail link frame)."""
    axes = list(axes)
    vec = np.array([_AXIS_VEC[a] for a in axes])
    frames = chain_frames(angles_rad, vec, spacing_m)
    return frames[:-1, :3, 3] + frames[:-1, :3, 0] * (0.5 * spacing_m)


def curve_points(curve: MCCCurve, s_points_m, substeps: int = 64) -> np.ndarray:
    """(k, 3) points of the continuous curve at the equally spaced arc lengths s_points_m."""
    s_points = np.asarray(s_points_m, dtype=float)
    if s_points.ndim != 1 or s_points.size < 2:
        raise ValueError('s_points_m must be a 1-D array of at least two arc lengths')
    steps = substeps * (s_points.size - 1)
    _, pos, _ = integrate_curve(curve, float(s_points[0]), float(s_points[-1]), steps)
    return pos[::substeps]


def chain_fit_error(curve: MCCCurve, axes, spacing_m: float, s0_m: float = 0.0, angles_rad=None,
                    substeps: int = 64) -> float:
    """RMS distance (m) between the fitted chain's joints and the curve at s_i, after Kabsch alignment.

    angles_rad defaults to joint_angles(curve, axes, spacing_m, s0_m).
    """
    axes = list(axes)
    if angles_rad is None:
        angles_rad = joint_angles(curve, axes, spacing_m, s0_m)
    s, _, _ = joint_windows(axes, spacing_m, s0_m)
    return kabsch_rms(chain_joint_positions(angles_rad, axes, spacing_m), curve_points(curve, s, substeps))
