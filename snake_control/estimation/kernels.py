"""Compiled (numba) kernels of the pitch-yaw estimator's per-message work, with the numpy code as reference.

The estimator handles one joint_states message at a time: a few hundred numpy calls on arrays of 33
modules, so the fixed cost of each call, not arithmetic, sets its speed. These loops do the same
arithmetic as the numpy functions of ``snake_control.estimation.contact`` (``chain_poses``, the rows of
``contact_step`` and its solve, ``support_plane``, the Coulomb contact weights, ``static_loads``,
``supporting_contacts``, ``virtual_chassis``) in one call each. Results agree with the numpy path to rounding
(test/test_estimation_kernels.py); without numba (``AVAILABLE`` false) the numpy path runs instead.

Signatures are explicit, so compilation happens at import and is cached on disk (``cache=True``): the
first import after an install takes a few seconds, later imports load the machine code.
"""
from __future__ import annotations

import math
import os

import numpy as np

try:
    if os.environ.get('SNAKE_NO_NUMBA'):
        raise ImportError('disabled by SNAKE_NO_NUMBA')
    from numba import njit
    AVAILABLE = True
except ImportError:
    AVAILABLE = False

# |module axis . down| from which a tilted module touches the ground with its lower end only (sin 3 deg);
# the same constant as contact.TILT_FULL_CONTACT.
TILT_FULL_CONTACT = math.sin(math.radians(3.0))


def _chain_poses(angles, axes, lengths, rot, centres):
    """Rotations rot (n+1, 3, 3) and centres (n+1, 3) of the chain, filled in place (contact.chain_poses)."""
    n = angles.shape[0]
    for a in range(3):
        for b in range(3):
            rot[0, a, b] = 1.0 if a == b else 0.0
        centres[0, a] = 0.0
    for j in range(n):
        s, c1 = math.sin(angles[j]), 1.0 - math.cos(angles[j])
        x, y, z = axes[j, 0], axes[j, 1], axes[j, 2]
        # Rodrigues: I + s K + (1 - c) K^2 with K = hat(axis), K^2 = a a^T - |a|^2 I
        n2 = x * x + y * y + z * z
        r00, r01, r02 = 1.0 + c1 * (x * x - n2), -s * z + c1 * x * y, s * y + c1 * x * z
        r10, r11, r12 = s * z + c1 * x * y, 1.0 + c1 * (y * y - n2), -s * x + c1 * y * z
        r20, r21, r22 = -s * y + c1 * x * z, s * x + c1 * y * z, 1.0 + c1 * (z * z - n2)
        for a in range(3):
            p0, p1, p2 = rot[j, a, 0], rot[j, a, 1], rot[j, a, 2]
            rot[j + 1, a, 0] = p0 * r00 + p1 * r10 + p2 * r20
            rot[j + 1, a, 1] = p0 * r01 + p1 * r11 + p2 * r21
            rot[j + 1, a, 2] = p0 * r02 + p1 * r12 + p2 * r22
        h0, h1 = 0.5 * lengths[j], 0.5 * lengths[j + 1]
        for a in range(3):
            centres[j + 1, a] = centres[j, a] + h0 * rot[j, a, 0] + h1 * rot[j + 1, a, 0]


def _to_frame(rot_t, cen_t, r_tc, o_tc, rot_c, cen_c):
    """Module rotations and centres in the chassis frame: r_tc^T rot_t and (cen_t - o_tc) r_tc, in place."""
    for i in range(rot_t.shape[0]):
        for a in range(3):
            cen_c[i, a] = ((cen_t[i, 0] - o_tc[0]) * r_tc[0, a] + (cen_t[i, 1] - o_tc[1]) * r_tc[1, a]
                           + (cen_t[i, 2] - o_tc[2]) * r_tc[2, a])
            for b in range(3):
                rot_c[i, a, b] = r_tc[0, a] * rot_t[i, 0, b] + r_tc[1, a] * rot_t[i, 1, b] + r_tc[2, a] * rot_t[i, 2, b]


def _contact_rows(q0, rot0, q1, rot1, idx, down, radius, k_axial, half_length, sw, rows, rhs):
    """Weighted no-slip rows (m, 3, 6) and right-hand sides (m, 3) of contact_step, filled in place.

    Returns False when a module turned by more than 3 rad in the step (the caller then takes the numpy
    path, which has the robust logarithm near pi).
    """
    m = idx.shape[0]
    skew = np.empty((m, 3))
    sin2 = np.empty(m)
    trace = np.empty(m)
    fast = True
    for i in range(m):
        j = idx[i]
        rel = np.empty((3, 3))
        for a in range(3):
            for b in range(3):
                rel[a, b] = rot1[j, a, 0] * rot0[j, b, 0] + rot1[j, a, 1] * rot0[j, b, 1] + rot1[j, a, 2] * rot0[j, b, 2]
        skew[i, 0] = 0.5 * (rel[2, 1] - rel[1, 2])
        skew[i, 1] = 0.5 * (rel[0, 2] - rel[2, 0])
        skew[i, 2] = 0.5 * (rel[1, 0] - rel[0, 1])
        s2 = skew[i, 0] * skew[i, 0] + skew[i, 1] * skew[i, 1] + skew[i, 2] * skew[i, 2]
        sin2[i] = s2
        tr = rel[0, 0] + rel[1, 1] + rel[2, 2]
        if s2 >= 0.0025 or tr <= 1.0:
            fast = False
        trace[i] = tr
    dx, dy, dz = down[0], down[1], down[2]
    for i in range(m):
        j = idx[i]
        s2 = sin2[i]
        if fast:
            f = 1.0 + s2 * (1.0 / 6.0 + 0.075 * s2)
        else:
            sin_t = math.sqrt(s2)
            ang = math.atan2(sin_t, min(max(0.5 * (trace[i] - 1.0), -1.0), 1.0))
            if ang > 3.0:
                return False
            f = ang / sin_t if sin_t > 1e-12 else 1.0
        tx, ty, tz = skew[i, 0] * f, skew[i, 1] * f, skew[i, 2] * f
        cx = 0.5 * (q0[j, 0] + q1[j, 0]) + radius * dx
        cy = 0.5 * (q0[j, 1] + q1[j, 1]) + radius * dy
        cz = 0.5 * (q0[j, 2] + q1[j, 2]) + radius * dz
        # b = -rho dtheta x d - dq
        bx = -radius * (ty * dz - tz * dy) - (q1[j, 0] - q0[j, 0])
        by = -radius * (tz * dx - tx * dz) - (q1[j, 1] - q0[j, 1])
        bz = -radius * (tx * dy - ty * dx) - (q1[j, 2] - q0[j, 2])
        ax, ay, az = 0.0, 0.0, 0.0
        if k_axial > 0.0 or half_length > 0.0:
            ax, ay, az = rot0[j, 0, 0] + rot1[j, 0, 0], rot0[j, 1, 0] + rot1[j, 1, 0], rot0[j, 2, 0] + rot1[j, 2, 0]
            na = math.sqrt(ax * ax + ay * ay + az * az)
            ax, ay, az = ax / na, ay / na, az / na
        if half_length > 0.0:
            reach = min(max((ax * dx + ay * dy + az * dz) * (1.0 / TILT_FULL_CONTACT), -1.0), 1.0)
            ex, ey, ez = ax * half_length * reach, ay * half_length * reach, az * half_length * reach
            cx, cy, cz = cx + ex, cy + ey, cz + ez
            bx -= ty * ez - tz * ey
            by -= tz * ex - tx * ez
            bz -= tx * ey - ty * ex
        # rows = [I, -hat(c)]
        r = rows[i]
        r[0, 0], r[0, 1], r[0, 2], r[0, 3], r[0, 4], r[0, 5] = 1.0, 0.0, 0.0, 0.0, cz, -cy
        r[1, 0], r[1, 1], r[1, 2], r[1, 3], r[1, 4], r[1, 5] = 0.0, 1.0, 0.0, -cz, 0.0, cx
        r[2, 0], r[2, 1], r[2, 2], r[2, 3], r[2, 4], r[2, 5] = 0.0, 0.0, 1.0, cy, -cx, 0.0
        if k_axial > 0.0:
            for col in range(6):
                u = ax * r[0, col] + ay * r[1, col] + az * r[2, col]
                r[0, col] -= k_axial * ax * u
                r[1, col] -= k_axial * ay * u
                r[2, col] -= k_axial * az * u
            ab = ax * bx + ay * by + az * bz
            bx, by, bz = bx - k_axial * ax * ab, by - k_axial * ay * ab, bz - k_axial * az * ab
        w = sw[i]
        if w != 1.0:
            for a in range(3):
                for col in range(6):
                    r[a, col] *= w
            bx, by, bz = bx * w, by * w, bz * w
        rhs[i, 0], rhs[i, 1], rhs[i, 2] = bx, by, bz
    return True


def _support_plane(p, guess, candidates, cos_min, tolerance, min_width, out):
    """The support face of contact.support_plane: writes its outward unit normal to out (3,), returns False
    when no face qualifies. p (N, 3) centres, guess (3,) unit down guess."""
    n_pts = p.shape[0]
    depth = np.empty(n_pts)
    cx, cy, cz = 0.0, 0.0, 0.0
    for i in range(n_pts):
        depth[i] = p[i, 0] * guess[0] + p[i, 1] * guess[1] + p[i, 2] * guess[2]
        cx, cy, cz = cx + p[i, 0], cy + p[i, 1], cz + p[i, 2]
    cx, cy, cz = cx / n_pts, cy / n_pts, cz / n_pts
    k = min(candidates, n_pts)
    cand = np.argsort(-depth)[:k]
    best_cos, best_stable = -2.0, False
    for ia in range(k):
        a = cand[ia]
        for ib in range(ia + 1, k):
            b = cand[ib]
            e0x, e0y, e0z = p[b, 0] - p[a, 0], p[b, 1] - p[a, 1], p[b, 2] - p[a, 2]
            for ic in range(ib + 1, k):
                c = cand[ic]
                e1x, e1y, e1z = p[c, 0] - p[a, 0], p[c, 1] - p[a, 1], p[c, 2] - p[a, 2]
                nx, ny, nz = e0y * e1z - e0z * e1y, e0z * e1x - e0x * e1z, e0x * e1y - e0y * e1x
                norm2 = nx * nx + ny * ny + nz * nz
                if not norm2 > 1e-18:
                    continue
                # Narrower than min_width (the triangle's smallest altitude, twice its area over its longest
                # edge): three modules in a line span no plane.
                e2x, e2y, e2z = e1x - e0x, e1y - e0y, e1z - e0z
                longest2 = max(e0x * e0x + e0y * e0y + e0z * e0z, e1x * e1x + e1y * e1y + e1z * e1z,
                               e2x * e2x + e2y * e2y + e2z * e2z)
                if not norm2 > min_width * min_width * longest2:
                    continue
                cos = nx * guess[0] + ny * guess[1] + nz * guess[2]
                inv = (1.0 if cos > 0 else (-1.0 if cos < 0 else 0.0)) / math.sqrt(max(norm2, 1e-300))
                nx, ny, nz, cos = nx * inv, ny * inv, nz * inv, cos * inv
                if cos < cos_min:
                    continue
                if best_stable and cos <= best_cos:
                    continue
                level = p[a, 0] * nx + p[a, 1] * ny + p[a, 2] * nz
                ok = True
                for i in range(n_pts):
                    if p[i, 0] * nx + p[i, 1] * ny + p[i, 2] * nz - level > tolerance:
                        ok = False
                        break
                if not ok:
                    continue
                # Barycentric coordinates of the centroid's projection on the face.
                g00 = e0x * e0x + e0y * e0y + e0z * e0z
                g11 = e1x * e1x + e1y * e1y + e1z * e1z
                g01 = e0x * e1x + e0y * e1y + e0z * e1z
                rx, ry, rz = cx - p[a, 0], cy - p[a, 1], cz - p[a, 2]
                r0 = e0x * rx + e0y * ry + e0z * rz
                r1 = e1x * rx + e1y * ry + e1z * rz
                # g00 g11 - g01^2 is |e0 x e1|^2: norm2, which a thin face's cancellation took to 0 (division by
                # zero in a replayed demo).
                det = norm2
                u = (g11 * r0 - g01 * r1) / det
                v = (g00 * r1 - g01 * r0) / det
                stable = u >= -1e-9 and v >= -1e-9 and u + v <= 1.0 + 1e-9
                if (stable and not best_stable) or (stable == best_stable and cos > best_cos):
                    best_cos, best_stable = cos, stable
                    out[0], out[1], out[2] = nx, ny, nz
    return best_cos > -2.0


def _matmul(a, b, out):
    """out = a b for small matrices (no BLAS call: these are 3x3 to 6x6)."""
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = 0.0
            for m in range(a.shape[1]):
                acc += a[i, m] * b[m, j]
            out[i, j] = acc


def _heights(q, rot, down, half_length, out):
    """Module heights above a plane of normal -down (m, any origin): -q . down, less half_length |axis . down|
    (a tilted capsule's lowest point is its lower end), in place (estimator contact selection)."""
    for i in range(q.shape[0]):
        h = -(q[i, 0] * down[0] + q[i, 1] * down[1] + q[i, 2] * down[2])
        if half_length:
            h -= half_length * abs(rot[i, 0, 0] * down[0] + rot[i, 1, 0] * down[1] + rot[i, 2, 0] * down[2])
        out[i] = h


def _se3_step(gc, disp, p3, cov_add, gc_out, p3_out):
    """gc_out = gc exp(disp) and p3_out = Ad_{exp(-disp)} p3 Ad^T + cov_add (estimator pose and
    right-perturbation covariance), in place; twists (v, w) linear first."""
    wx, wy, wz = disp[3], disp[4], disp[5]
    th2 = wx * wx + wy * wy + wz * wz
    if th2 < 1e-8:
        a, b, c = 1.0 - th2 / 6.0, 0.5 - th2 / 24.0, 1.0 / 6.0 - th2 / 120.0
    else:
        th = math.sqrt(th2)
        sin_th = math.sin(th)
        a, b, c = sin_th / th, (1.0 - math.cos(th)) / th2, (th - sin_th) / (th2 * th)
    k = np.array([[0.0, -wz, wy], [wz, 0.0, -wx], [-wy, wx, 0.0]])
    k2 = np.empty((3, 3))
    _matmul(k, k, k2)
    e = np.eye(4)
    for i in range(3):
        for j in range(3):
            e[i, j] += a * k[i, j] + b * k2[i, j]
    for i in range(3):
        e[i, 3] = disp[i]
        for j in range(3):
            e[i, 3] += (b * k[i, j] + c * k2[i, j]) * disp[j]
    _matmul(gc, e, gc_out)
    # Ad_{e^-1} = [[R^T, -R^T hat(p)], [0, R^T]]
    ad = np.zeros((6, 6))
    px, py, pz = e[0, 3], e[1, 3], e[2, 3]
    hp = np.array([[0.0, -pz, py], [pz, 0.0, -px], [-py, px, 0.0]])
    for i in range(3):
        for j in range(3):
            ad[i, j] = e[j, i]
            ad[i + 3, j + 3] = e[j, i]
            ad[i, j + 3] = -(e[0, i] * hp[0, j] + e[1, i] * hp[1, j] + e[2, i] * hp[2, j])
    tmp = np.empty((6, 6))
    _matmul(ad, p3, tmp)
    for i in range(6):
        for j in range(6):
            acc = cov_add[i, j]
            for m in range(6):
                acc += tmp[i, m] * ad[j, m]
            p3_out[i, j] = acc


def _rest_on_plane(gc, down_c, centres, mask, radius, out):
    """The estimator's _rest_on_plane over the contact modules mask of centres (N, 3), into out (4, 4)."""
    r = gc[:3, :3]
    vx = r[0, 0] * down_c[0] + r[0, 1] * down_c[1] + r[0, 2] * down_c[2]
    vy = r[1, 0] * down_c[0] + r[1, 1] * down_c[1] + r[1, 2] * down_c[2]
    vz = r[2, 0] * down_c[0] + r[2, 1] * down_c[1] + r[2, 2] * down_c[2]
    k = 1.0 / (1.0 - vz) if vz < 1.0 - 1e-12 else 0.0
    fix = np.array([[1.0 - k * vx * vx, -k * vx * vy, vx],
                    [-k * vx * vy, 1.0 - k * vy * vy, vy],
                    [-vx, -vy, 1.0 - k * (vx * vx + vy * vy)]])
    for i in range(4):
        for j in range(4):
            out[i, j] = gc[i, j]
    for i in range(3):
        for j in range(3):
            out[i, j] = fix[i, 0] * r[0, j] + fix[i, 1] * r[1, j] + fix[i, 2] * r[2, j]
    n = 0
    sx, sy, sz = 0.0, 0.0, 0.0
    depth = -np.inf
    for i in range(centres.shape[0]):
        if mask[i]:
            n += 1
            sx, sy, sz = sx + centres[i, 0], sy + centres[i, 1], sz + centres[i, 2]
            depth = max(depth, centres[i, 0] * down_c[0] + centres[i, 1] * down_c[1] + centres[i, 2] * down_c[2])
    if n:
        c = (sx / n, sy / n, sz / n)
        d = np.empty(3)
        pivot = np.empty(3)
        for i in range(3):
            pivot[i] = r[i, 0] * c[0] + r[i, 1] * c[1] + r[i, 2] * c[2] + gc[i, 3]
            d[i] = gc[i, 3] - pivot[i]
        for i in range(3):
            out[i, 3] = fix[i, 0] * d[0] + fix[i, 1] * d[1] + fix[i, 2] * d[2] + pivot[i]
        out[2, 3] = radius + depth


def _coulomb_weights(a, r, iterations, static, w):
    """Contact weights w (m,) of contact._coulomb_weights for stacked rows a (3m, k), rhs r (3m,), in place."""
    n_rows, k = a.shape
    m = n_rows // 3
    for c in range(m):
        w[c] = 1.0
    normal = np.empty((k, k))
    b = np.empty(k)
    for _ in range(iterations):
        for i in range(k):
            b[i] = 0.0
            for j in range(k):
                normal[i, j] = 0.0
        for row in range(n_rows):
            wc = w[row // 3]
            for i in range(k):
                ai = wc * a[row, i]
                b[i] += ai * r[row]
                for j in range(k):
                    normal[i, j] += ai * a[row, j]
        trace = 0.0
        for i in range(k):
            trace += normal[i, i]
        for i in range(k):
            normal[i, i] += 1e-9 * trace + 1e-300
        x = np.linalg.solve(normal, b)
        for c in range(m):
            s2 = 0.0
            for row in range(3 * c, 3 * c + 3):
                e = -r[row]
                for j in range(k):
                    e += a[row, j] * x[j]
                s2 += e * e
            w[c] = static / max(math.sqrt(s2), static)


def _add_outer3(g, v0, v1, v2):
    """g (3, 3) += v v^T on and above the diagonal (_mirror3 fills the rest once the sum is done)."""
    g[0, 0] += v0 * v0
    g[0, 1] += v0 * v1
    g[0, 2] += v0 * v2
    g[1, 1] += v1 * v1
    g[1, 2] += v1 * v2
    g[2, 2] += v2 * v2


def _mirror3(g):
    """Copy the upper triangle of a symmetric (3, 3) into the lower."""
    g[1, 0], g[2, 0], g[2, 1] = g[0, 1], g[0, 2], g[1, 2]


def _static_loads(xy, centre, loads):
    """Least-norm non-negative loads (contact.static_loads) of contacts xy (m, 2) under a centre (2,), filled
    into loads (m,); returns whether they hold it (the moments balance to 1 mm of lever)."""
    m = xy.shape[0]
    active = np.ones(m, dtype=np.bool_)
    n = np.zeros(m)
    for _ in range(m):
        g = np.zeros((3, 3))
        count = 0
        for i in range(m):
            if active[i]:
                count += 1
                _add_outer3(g, 1.0, xy[i, 0] - centre[0], xy[i, 1] - centre[1])
        _mirror3(g)
        ridge = 1e-12 * (g[0, 0] + g[1, 1] + g[2, 2] + 1.0)
        for a in range(3):
            g[a, a] += ridge
        # Solve g y = (1, 0, 0): y is the first column of g's inverse (cofactors over the determinant).
        c00 = g[1, 1] * g[2, 2] - g[1, 2] * g[2, 1]
        c01 = g[1, 2] * g[2, 0] - g[1, 0] * g[2, 2]
        c02 = g[1, 0] * g[2, 1] - g[1, 1] * g[2, 0]
        det = g[0, 0] * c00 + g[0, 1] * c01 + g[0, 2] * c02
        y0, y1, y2 = c00 / det, c01 / det, c02 / det
        worst, low = -1, 0.0
        for i in range(m):
            if active[i]:
                n[i] = y0 + y1 * (xy[i, 0] - centre[0]) + y2 * (xy[i, 1] - centre[1])
                if worst < 0 or n[i] < low:
                    worst, low = i, n[i]
        if low >= -1e-12 or count == 1:
            break
        active[worst] = False
    total = 0.0
    for i in range(m):
        loads[i] = max(n[i], 0.0) if active[i] else 0.0
        total += loads[i]
    if total > 0.0:
        for i in range(m):
            loads[i] /= total
    mx, my = 0.0, 0.0
    for i in range(m):
        mx += (xy[i, 0] - centre[0]) * loads[i]
        my += (xy[i, 1] - centre[1]) * loads[i]
    return max(abs(mx), abs(my)) < 1e-3


def _regularised_solve(normal, scale, threshold, rank_tolerance, atb, hold, use_hold, x, ninv):
    """connection.regularised_normal_solve and Regularised.solve for a normal matrix (k, k): x (k,) and the
    capped inverse ninv (k, k) in original units, in place; returns (rank, sigma_min, singular)."""
    k = normal.shape[0]
    scaled = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            scaled[i, j] = normal[i, j] * scale[i] * scale[j]
    ev, v = np.linalg.eigh(scaled)                      # ascending
    for i in range(k):
        ev[i] = max(ev[i], 0.0)
    top = ev[k - 1]
    smax2 = top if top > 0.0 else 1.0
    rank = 0
    for i in range(k):
        if top > 0.0 and math.sqrt(ev[i] / smax2) > rank_tolerance:
            rank += 1
    sigma_min = math.sqrt(ev[0] / smax2) if top > 0.0 else 0.0
    cap = threshold * threshold * smax2
    floor = (1e-2 * threshold) ** 2 * smax2
    c = np.empty(k)
    for i in range(k):
        vb = 0.0
        for j in range(k):
            vb += v[j, i] * scale[j] * atb[j]
        c[i] = vb / max(ev[i], cap)
        weak = max(0.0, 1.0 - ev[i] / cap)
        if use_hold and weak > 0.0:
            vh = 0.0
            for j in range(k):
                vh += v[j, i] * hold[j] / scale[j]
            c[i] += weak * vh
    for j in range(k):
        acc = 0.0
        for i in range(k):
            acc += v[j, i] * c[i]
        x[j] = scale[j] * acc
    for a in range(k):
        for b in range(k):
            acc = 0.0
            for i in range(k):
                acc += v[a, i] * v[b, i] / max(ev[i], floor)
            ninv[a, b] = scale[a] * acc * scale[b]
    return rank, sigma_min, ev[0] < cap


def _solve_contact_rows(a, rhs, down, mode, known, hold, use_hold, scale, threshold, rank_tolerance, iterations,
                        static, disp, ninv):
    """contact._solve_contact_rows for rows a (3m, 6) and rhs (3m,): mode 6 solves all six unknowns, 3 the
    translation given the rotation known (3,), 4 the translation and the yaw about down given the tilt known
    (3,); Coulomb-weighted first with iterations > 0. Fills disp (6,) and ninv (6, 6); returns (rank,
    sigma_min, singular)."""
    n_rows = a.shape[0]
    k = mode
    ak = np.empty((n_rows, k))
    rk = np.empty(n_rows)
    for row in range(n_rows):
        turn = a[row, 3] * known[0] + a[row, 4] * known[1] + a[row, 5] * known[2]
        for j in range(3):
            ak[row, j] = a[row, j]
        if k == 6:
            for j in range(3, 6):
                ak[row, j] = a[row, j]
            rk[row] = rhs[row]
        else:
            rk[row] = rhs[row] - turn
            if k == 4:
                ak[row, 3] = a[row, 3] * down[0] + a[row, 4] * down[1] + a[row, 5] * down[2]
    if iterations > 0:
        w = np.empty(n_rows // 3)
        coulomb_weights_kernel(ak, rk, iterations, static, w)
        for row in range(n_rows):
            sw = math.sqrt(w[row // 3])
            rk[row] *= sw
            for j in range(k):
                ak[row, j] *= sw
    normal = np.zeros((k, k))
    atb = np.zeros(k)
    for row in range(n_rows):
        for i in range(k):
            ai = ak[row, i]
            atb[i] += ai * rk[row]
            for j in range(k):
                normal[i, j] += ai * ak[row, j]
    sk = np.empty(k)
    hk = np.zeros(k)
    for i in range(k):
        sk[i] = scale[i]
    if use_hold:
        for i in range(3):
            hk[i] = hold[i]
        if k == 6:
            for i in range(3, 6):
                hk[i] = hold[i]
        elif k == 4:
            hk[3] = hold[3] * down[0] + hold[4] * down[1] + hold[5] * down[2]
    y = np.empty(k)
    nk = np.empty((k, k))
    rank, sigma_min, singular = _regularised_solve(normal, sk, threshold, rank_tolerance, atb, hk, use_hold, y, nk)
    for i in range(6):
        for j in range(6):
            ninv[i, j] = 0.0
    if k == 6:
        for i in range(6):
            disp[i] = y[i]
            for j in range(6):
                ninv[i, j] = nk[i, j]
    elif k == 3:
        for i in range(3):
            disp[i] = y[i]
            disp[3 + i] = known[i]
            for j in range(3):
                ninv[i, j] = nk[i, j]
    else:
        # x = T y with T = [[I3, 0], [0, down]]: ninv = T nk T^T.
        for i in range(3):
            disp[i] = y[i]
            disp[3 + i] = known[i] + y[3] * down[i]
            for j in range(3):
                ninv[i, j] = nk[i, j]
                ninv[3 + i, 3 + j] = nk[3, 3] * down[i] * down[j]
            for j in range(3):
                ninv[i, 3 + j] = nk[i, 3] * down[j]
                ninv[3 + j, i] = nk[3, i] * down[j]
    return rank, sigma_min, singular


def _virtual_chassis(p, previous, has_previous, up, hold_ratio, straight_ratio, rot, origin, sv):
    """contact.virtual_chassis of module centres p (N, 3): rotation rot (3, 3) and origin (3,) filled in
    place with the singular values sv (3,); previous (3, 3) the last chassis rotation when has_previous,
    up (3,) the vector that fixes z's sign without one. Returns whether y was held (near-equal moments)."""
    n = p.shape[0]
    for a in range(3):
        acc = 0.0
        for i in range(n):
            acc += p[i, a]
        origin[a] = acc / n
    scatter = np.zeros((3, 3))
    for i in range(n):
        _add_outer3(scatter, p[i, 0] - origin[0], p[i, 1] - origin[1], p[i, 2] - origin[2])
    _mirror3(scatter)
    ev, vecs = np.linalg.eigh(scatter)                  # ascending: the principal directions are 2, 1, 0
    for a in range(3):
        sv[a] = math.sqrt(max(ev[2 - a], 0.0))
    x = vecs[:, 2].copy()
    if has_previous:
        flip = x[0] * previous[0, 0] + x[1] * previous[1, 0] + x[2] * previous[2, 0] < 0.0
    else:
        flip = (x[0] * (p[n - 1, 0] - p[0, 0]) + x[1] * (p[n - 1, 1] - p[0, 1])
                + x[2] * (p[n - 1, 2] - p[0, 2])) < 0.0
    if flip:
        for a in range(3):
            x[a] = -x[a]
    close = sv[1] < straight_ratio * max(sv[0], 1e-12) or sv[2] > hold_ratio * sv[1]
    ref = np.empty(3)
    if has_previous:
        for a in range(3):
            ref[a] = previous[a, 1]
    y = np.empty(3)
    if close or not has_previous:
        if not has_previous:
            ref[0] = up[1] * x[2] - up[2] * x[1]
            ref[1] = up[2] * x[0] - up[0] * x[2]
            ref[2] = up[0] * x[1] - up[1] * x[0]
            if ref[0] * ref[0] + ref[1] * ref[1] + ref[2] * ref[2] < 1e-18:
                # up along x: any axis across it (y, or x when x is near y)
                o0, o1, o2 = (0.0, 1.0, 0.0) if abs(x[1]) < 0.9 else (1.0, 0.0, 0.0)
                ref[0] = o1 * x[2] - o2 * x[1]
                ref[1] = o2 * x[0] - o0 * x[2]
                ref[2] = o0 * x[1] - o1 * x[0]
            if not close:
                s = 1.0 if vecs[0, 1] * ref[0] + vecs[1, 1] * ref[1] + vecs[2, 1] * ref[2] >= 0.0 else -1.0
                for a in range(3):
                    ref[a] = s * vecs[a, 1]
        along = ref[0] * x[0] + ref[1] * x[1] + ref[2] * x[2]
        for a in range(3):
            y[a] = ref[a] - along * x[a]
        norm = math.sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2])
        for a in range(3):
            y[a] /= norm
    else:
        s = 1.0 if vecs[0, 1] * ref[0] + vecs[1, 1] * ref[1] + vecs[2, 1] * ref[2] >= 0.0 else -1.0
        for a in range(3):
            y[a] = s * vecs[a, 1]
    for a in range(3):
        rot[a, 0] = x[a]
        rot[a, 1] = y[a]
    rot[0, 2] = x[1] * y[2] - x[2] * y[1]
    rot[1, 2] = x[2] * y[0] - x[0] * y[2]
    rot[2, 2] = x[0] * y[1] - x[1] * y[0]
    return close


def _supporting_contacts(mask, h, q, u, v, order, min_contacts, tie, out):
    """contact.supporting_contacts: widen mask (N,) in place, lowest module (order: h ascending, stable)
    first, until at least min_contacts contacts hold the body (static loads, the centre the mean of the
    module centres q (N, 3) in the floor plane spanned by u, v (3,)); fills out (N,) with the contacts'
    load fractions, 0 elsewhere. Modules within tie (m) of the next lowest join with it."""
    n = mask.shape[0]
    xy = np.empty((n, 2))
    centre = np.zeros(2)
    for i in range(n):
        xy[i, 0] = q[i, 0] * u[0] + q[i, 1] * u[1] + q[i, 2] * u[2]
        xy[i, 1] = q[i, 0] * v[0] + q[i, 1] * v[1] + q[i, 2] * v[2]
        centre[0] += xy[i, 0]
        centre[1] += xy[i, 1]
    centre[0] /= n
    centre[1] /= n
    sub = np.empty((n, 2))
    loads = np.zeros(n)
    k = 0
    while True:
        m = 0
        for i in range(n):
            if mask[i]:
                sub[m, 0], sub[m, 1] = xy[i, 0], xy[i, 1]
                m += 1
        if m >= min_contacts:
            if static_loads_kernel(sub[:m], centre, loads[:m]) or m == n:
                break
        while k < n and mask[order[k]]:
            k += 1
        if k >= n:
            static_loads_kernel(sub[:m], centre, loads[:m])
            break
        level = h[order[k]] + tie
        for i in range(n):
            if h[i] <= level:
                mask[i] = True
    j = 0
    for i in range(n):
        out[i] = 0.0
        if mask[i]:
            out[i] = loads[j]
            j += 1


if AVAILABLE:
    _f8_1, _f8_2, _f8_3 = 'float64[::1]', 'float64[:, ::1]', 'float64[:, :, ::1]'
    chain_poses_kernel = njit(f'void({_f8_1}, {_f8_2}, {_f8_1}, {_f8_3}, {_f8_2})', cache=True)(_chain_poses)
    to_frame_kernel = njit(f'void({_f8_3}, {_f8_2}, {_f8_2}, {_f8_1}, {_f8_3}, {_f8_2})', cache=True)(_to_frame)
    contact_rows_kernel = njit(f'boolean({_f8_2}, {_f8_3}, {_f8_2}, {_f8_3}, int64[::1], {_f8_1}, float64, '
                               f'float64, float64, {_f8_1}, {_f8_3}, {_f8_2})', cache=True)(_contact_rows)
    support_plane_kernel = njit(f'boolean({_f8_2}, {_f8_1}, int64, float64, float64, float64, {_f8_1})',
                                cache=True)(_support_plane)
    _matmul = njit(cache=True)(_matmul)
    _add_outer3 = njit(cache=True)(_add_outer3)
    _mirror3 = njit(cache=True)(_mirror3)
    heights_kernel = njit(f'void({_f8_2}, {_f8_3}, {_f8_1}, float64, {_f8_1})', cache=True)(_heights)
    se3_step_kernel = njit(f'void({_f8_2}, {_f8_1}, {_f8_2}, {_f8_2}, {_f8_2}, {_f8_2})', cache=True)(_se3_step)
    rest_on_plane_kernel = njit(f'void({_f8_2}, {_f8_1}, {_f8_2}, boolean[::1], float64, {_f8_2})',
                                cache=True)(_rest_on_plane)
    coulomb_weights_kernel = njit(f'void({_f8_2}, {_f8_1}, int64, float64, {_f8_1})',
                                  cache=True)(_coulomb_weights)
    static_loads_kernel = njit(f'boolean({_f8_2}, {_f8_1}, {_f8_1})', cache=True)(_static_loads)
    _regularised_solve = njit(cache=True)(_regularised_solve)
    solve_contact_rows_kernel = njit(f'Tuple((int64, float64, boolean))({_f8_2}, {_f8_1}, {_f8_1}, int64, {_f8_1}, '
                                     f'{_f8_1}, boolean, {_f8_1}, float64, float64, int64, float64, {_f8_1}, {_f8_2})',
                                     cache=True)(_solve_contact_rows)
    virtual_chassis_kernel = njit(f'boolean({_f8_2}, {_f8_2}, boolean, {_f8_1}, float64, float64, {_f8_2}, {_f8_1}, '
                                  f'{_f8_1})',
                                  cache=True)(_virtual_chassis)
    supporting_contacts_kernel = njit(f'void(boolean[::1], {_f8_1}, {_f8_2}, {_f8_1}, {_f8_1}, int64[::1], int64, '
                                      f'float64, {_f8_1})', cache=True)(_supporting_contacts)
else:
    chain_poses_kernel = to_frame_kernel = contact_rows_kernel = support_plane_kernel = None
    heights_kernel = se3_step_kernel = rest_on_plane_kernel = coulomb_weights_kernel = None
    static_loads_kernel = supporting_contacts_kernel = solve_contact_rows_kernel = virtual_chassis_kernel = None
