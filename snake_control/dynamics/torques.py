"""Joint torques a gait needs, and the check against the servos' stall torque.

A gait is a joint trajectory q(t) (T, n) sampled at times t (T,). ``joint_torques`` turns it into joint
torques (T, n) with seed 001's equations of motion (snake_control.dynamics.moving_frame) under one of
three support models; ``gait_torque_report`` compares their peak and RMS with the servo's stall
torque and names the joints and gait phases above a fraction of it.

Support models (what holds the robot up; be aware of what each leaves out):

- ``'ground'`` (default, a robot lying on the ground):
  1. Dynamics: the chain is free-floating with the weight of every link carried by the ground and no
     friction, starting at rest: no external force acts in the ground plane, so its total momentum stays
     zero. The base velocity follows from zero momentum, the base acceleration from the six base rows of
     M* nudot + N* nu = 0, and the joint torques from the joint rows. These are the torques that
     accelerate the links (in-plane for yaw joints, and the inertial part of lifting for pitch joints).
  2. Gravity, quasi-static: "up" is the mass-weighted mean of the links' z (yaw) axes unless given
     (right for gaits that keep the yaw axes roughly vertical: lateral undulation, vertical undulation,
     sidewinding; pass ``up`` for rolling gaits, e.g. from the estimator's gravity vector). Links whose
     centres lie within ``contact_tolerance_m`` of the lowest link centre rest on the ground and carry
     their own weight. Every contiguous run of lifted links next to a joint is held by that joint as a
     cantilever: the joint torque is the gravity moment of the lifted run on its head side or on its
     tail side, whichever is larger. A run that ends at a head or tail end (cobra, lifted head) is exact
     statically; a run bridging two contacts (an arch) in reality shares its weight with the far
     contact, so there this is an upper bound.
  Left out: ground friction (it loads yaw joints during lateral undulation and sidewinding and depends
  on the surface: add a margin through ``fraction``), the passive wheels' lateral constraint forces of
  a planar wheeled snake, and impacts when links touch down.
  Sensitivity: the chain is rigid and the ground flat, so a link a centimetre up counts as lifted and
  its whole run is held as a cantilever or an arch, however low. Shallow pitch waves therefore depend on
  ``contact_tolerance_m`` (vertical undulation on pitch_yaw_32 with A_pitch = 0.05 rad: peak 4.8 N m at
  7.5 mm, 1.7 N m at 15 mm, 0.09 N m at 30 mm); from A_pitch = 0.3 rad on the peak is 5.5-8 N m
  whatever the tolerance. Servo compliance and backlash let barely lifted links sag onto the ground:
  raise the tolerance for a compliant robot. The check errs on the safe side.
- ``'free'``: the chain floats in space (no gravity, no contacts), zero momentum. Part 1 above alone.
- ``'fixed'``: link 0 (the tail) is clamped, gravity acts along -up in link 0's frame (default z up):
  a snake held by its tail, or seed 001's chain hinged to a wall. Exact rigid-body inverse dynamics.

Speed: the dynamics is batched over the samples (one Python loop over the links); the ground plane
costs one small convex hull per sample. A report for a 32-joint robot over two gait periods of 200
samples each takes about 0.1-0.5 s on a busy 2-core machine (bench/bench_dynamics.py prints the
figure; about half of it is the ground plane): cheap enough for the gait node to check a parameter
change before accepting it (snake_control.dynamics.gait_check, at a lower sample rate if needed).

Example (a 3-link planar snake lying still: no torque needed):
    >>> from snake_control.robot import load_robot
    >>> robot = load_robot('kinematic_snake_3')
    >>> t = np.linspace(0.0, 1.0, 11)
    >>> report = gait_torque_report(robot, t, np.zeros((11, 2)))
    >>> bool(report.ok), float(report.peak_nm.max())
    (True, 0.0)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from snake_control.dynamics.moving_frame import (
    ChainModel, bias_force, chain_model_from_robot, chain_state, gravity_force, mass_matrix)

SUPPORTS = ('ground', 'free', 'fixed')
STANDARD_GRAVITY_M_S2 = 9.80665


def _trajectory(t_s, q_rad, n):
    t = np.asarray(t_s, dtype=float)
    q = np.asarray(q_rad, dtype=float)
    if t.ndim != 1 or t.shape[0] < 3:
        raise ValueError(f't_s must have shape (T,) with T >= 3, got {t.shape}')
    if q.shape != (t.shape[0], n):
        raise ValueError(f'q_rad must have shape (T, n) = ({t.shape[0]}, {n}), got {q.shape}')
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(q))):
        raise ValueError('t_s and q_rad must be finite')
    if np.any(np.diff(t) <= 0):
        raise ValueError('t_s must be strictly increasing')
    return t, q


def joint_rates(t_s, q_rad):
    """Joint velocities and accelerations (T, n) by second-order finite differences in time."""
    t = np.asarray(t_s, dtype=float)
    qd = np.gradient(q_rad, t, axis=0, edge_order=2)
    qdd = np.gradient(qd, t, axis=0, edge_order=2)
    return qd, qdd


def _up_vectors(model, state, up):
    s = state.rot.shape[0]
    if up is None:
        # Mass-weighted mean of the links' z axes, in link 0's frame.
        u = np.einsum('k,ska->sa', model.masses_kg, state.rot[:, :, :, 2])
    else:
        u = np.broadcast_to(np.asarray(up, dtype=float), (s, 3)).copy()
    norm = np.linalg.norm(u, axis=1, keepdims=True)
    if np.any(norm < 1e-9):
        raise ValueError('up must be a non-zero vector (or the links\' mean z axis vanished: pass up)')
    return u / norm


def floating_joint_torques(model: ChainModel, q, qd, qdd, state=None) -> np.ndarray:
    """(T, n) joint torques of a free-floating chain with zero momentum and no external force.

    state: chain_state(model, q, base='free') if already computed (only B is used from it).
    """
    n = model.n_joints
    s = q.shape[0]
    m_star = mass_matrix(model, chain_state(model, q, base='free') if state is None else state)
    mbb, mbj = m_star[:, :6, :6], m_star[:, :6, 6:]
    # Zero momentum (the base rows of M* nu are the chain's momentum): nu_b = -Mbb^-1 Mbj qdot.
    nu_b = -np.linalg.solve(mbb, np.einsum('sbj,sj->sb', mbj, qd)[..., None])[..., 0]
    nu = np.concatenate([nu_b, qd], axis=1)
    state = chain_state(model, q, nu, base='free')
    h = bias_force(model, state, nu)
    # Base rows with no external wrench give the base acceleration; joint rows give the torques.
    acc_b = -np.linalg.solve(mbb, (np.einsum('sbj,sj->sb', mbj, qdd) + h[:, :6])[..., None])[..., 0]
    tau = (np.einsum('sjb,sb->sj', m_star[:, 6:, :6], acc_b)
           + np.einsum('sij,sj->si', m_star[:, 6:, 6:], qdd) + h[:, 6:])
    assert tau.shape == (s, n)
    return tau


def _support_normal(points, up, centre):
    """Up from the convex-hull face (3D) or edge (2D) the points rest on.

    A body rests stably only on a face that its centre of mass lies over; among those, the face whose
    outward normal points most nearly along -up is taken. Returns -(that normal), unit.
    """
    from scipy.spatial import ConvexHull, QhullError
    try:
        hull = ConvexHull(points)
    except QhullError:
        return up
    normals = hull.equations[:, :-1]
    verts = points[hull.simplices]                                   # (F, d, d)
    # Centre of mass projected onto each face plane, in the face's barycentric coordinates.
    offset = normals @ centre + hull.equations[:, -1]
    proj = centre[None, :] - offset[:, None] * normals
    edges = verts[:, 1:, :] - verts[:, :1, :]                        # (F, d - 1, d)
    rhs = proj - verts[:, 0, :]
    gram = np.einsum('fia,fja->fij', edges, edges)
    coef = np.linalg.solve(gram + 1e-15 * np.eye(gram.shape[-1]),
                           np.einsum('fia,fa->fi', edges, rhs)[..., None])[..., 0]
    bary = np.concatenate([1.0 - coef.sum(axis=1, keepdims=True), coef], axis=1)
    stable = np.all(bary >= -1e-9, axis=1)
    score = normals @ -up
    best = normals[np.argmax(np.where(stable, score, -np.inf))] if stable.any() else normals[np.argmax(score)]
    return -best / np.linalg.norm(best)


def ground_up(centres_m, up_guess, may_stand=None) -> np.ndarray:
    """(S, 3) up direction of the ground plane the body rests on, in link 0's frame.

    centres_m (S, K, 3) link centres; up_guess (S, 3) unit; may_stand (S,) bool or None. A truly 3D
    shape rests on a face of the convex hull of its link centres: among the faces its centre of mass
    lies over (stable ones), the one whose outward normal points most nearly along -up_guess. A planar
    shape lies flat, unless may_stand (S,) says so and its plane is more than 45 degrees from up_guess:
    then it stands on an edge of its 2D hull (a shape bent by pitch joints only, with its yaw axes up:
    vertical undulation, a lifted head). A straight one has
    up perpendicular to its line, as near up_guess as possible. (One shape alone cannot tell a rolling
    arc lying flat from a standing one; lying flat is the stable state of a mixed pitch-yaw arc.)
    """
    centres = np.asarray(centres_m, dtype=float)
    guess = np.asarray(up_guess, dtype=float)
    out = guess.copy()
    for i in range(centres.shape[0]):
        pts_all = centres[i]
        k = pts_all.shape[0]
        u = guess[i]
        centre = pts_all.mean(axis=0)                        # equal link masses
        _, sv_all, vt_all = np.linalg.svd(pts_all - centre)
        flat = 1e-6 * sv_all[0]                              # numerically degenerate below this
        if k >= 4 and sv_all[2] > flat:
            u = _support_normal(pts_all, u, centre)          # 3D shape: a hull facet
        elif k >= 3 and sv_all[1] > flat:
            normal = vt_all[2]                               # planar shape
            if (may_stand is not None and not may_stand[i]) or abs(normal @ u) >= np.sqrt(0.5):
                u = normal if normal @ u >= 0 else -normal   # lying flat
            else:                                            # standing up: an edge of its 2D hull
                basis = vt_all[:2]
                u = basis.T @ _support_normal(pts_all @ basis.T, basis @ u, basis @ centre)
        else:
            u = u - (u @ vt_all[0]) * vt_all[0]              # straight: up perpendicular to the line
        u = u / np.linalg.norm(u)
        out[i] = u
    return out


def lifted_gravity_torques(model: ChainModel, q, gravity_m_s2: float = STANDARD_GRAVITY_M_S2,
                           up=None, contact_tolerance_m: float = 0.0075, state=None):
    """Quasi-static joint torques (T, n) holding lifted runs of links, and the support mask (T, n + 1).

    See the module docstring ('ground', part 2). up: (3,) or (T, 3) in link 0's frame, or None (then
    the ground plane comes from the convex hull, ``ground_up``, seeded with the links' mean z axis).
    state: a chain_state of q with link 0 at the identity, if already computed (its rotations are used).
    """
    n = model.n_joints
    state = chain_state(model, q) if state is None else state
    rot = state.rot                                                        # (S, n + 1, 3, 3)
    half = 0.5 * model.lengths_m
    steps = half[:-1, None] * rot[:, :-1, :, 0] + half[1:, None] * rot[:, 1:, :, 0]
    s = q.shape[0]
    centres = np.concatenate([np.zeros((s, 1, 3)), np.cumsum(steps, axis=1)], axis=1)
    joints = centres[:, :-1] + half[:-1, None] * rot[:, :-1, :, 0]         # (S, n, 3)
    axes_w = np.einsum('sjab,jb->sja', rot[:, :-1], model.axes)             # (S, n, 3)
    u = _up_vectors(model, state, up)
    if up is None:
        # Shapes bent by pitch joints alone (axes along the link's y) may stand in their vertical plane.
        pitch = np.abs(model.axes[:, 1]) > 1.0 - 1e-9
        may_stand = np.all(pitch[None, :] | (np.abs(q) < 1e-6), axis=1)
        u = ground_up(centres, u, may_stand)
    height = np.einsum('ska,sa->sk', centres, u)
    supported = height <= height.min(axis=1, keepdims=True) + contact_tolerance_m
    idx = np.arange(n + 1)
    # Nearest supported link at or after k, and at or before k (n + 1 / -1: none).
    nxt = np.minimum.accumulate(np.where(supported, idx, n + 1)[:, ::-1], axis=1)[:, ::-1]
    prv = np.maximum.accumulate(np.where(supported, idx, -1), axis=1)
    j = np.arange(n)[None, :, None]
    k = idx[None, None, :]
    sup_a = prv[:, :-1]                                                    # (S, n) last support <= j
    sup_b = nxt[:, 1:]                                                     # (S, n) first support >= j + 1
    head = ((k >= j + 1) & (k < sup_b[:, :, None])).astype(float)          # (S, n, n + 1)
    tail = ((k > sup_a[:, :, None]) & (k <= j)).astype(float)
    m = model.masses_kg
    mc = m[None, :, None] * centres                                        # (S, n + 1, 3)
    g_vec = -gravity_m_s2 * u                                              # per kg, (S, 3)

    def moment(mask):
        """Sum over the masked links of m_k (c_k - p_j) x g, as (S, n, 3)."""
        lever = np.einsum('sjk,ska->sja', mask, mc) - np.einsum('sjk,k->sj', mask, m)[..., None] * joints
        return np.cross(lever, g_vec[:, None, :])

    # Joint j applies +tau a_j to link j + 1 and -tau a_j to link j: statics of the head side gives
    # tau = -a . (moments on the head side), of the tail side tau = +a . (moments on the tail side).
    m_head, m_tail = moment(head), moment(tail)
    tau_head = -np.einsum('sja,sja->sj', axes_w, m_head)
    tau_tail = np.einsum('sja,sja->sj', axes_w, m_tail)
    tau = np.where(np.abs(tau_head) >= np.abs(tau_tail), tau_head, tau_tail)
    # A run between two contacts A < j < B (an arch) is simply supported at their centres: the
    # reaction at B balances the run's weight moment about A along the horizontal A -> B, and the
    # joint holds the head part of the run plus that reaction.
    bridge = (sup_a >= 0) & (sup_b <= n)
    c_a = np.take_along_axis(centres, np.clip(sup_a, 0, n)[..., None], axis=1)   # (S, n, 3)
    c_b = np.take_along_axis(centres, np.clip(sup_b, 0, n)[..., None], axis=1)
    span = c_b - c_a
    span -= np.einsum('sja,sa->sj', span, u)[..., None] * u[:, None, :]
    span_len = np.linalg.norm(span, axis=-1)
    ok = bridge & (span_len > 0.5 * model.lengths_m.min())
    e = span / np.where(span_len > 0, span_len, 1.0)[..., None]
    run = head + tail
    lever_a = (np.einsum('sjk,ska,sja->sj', run, mc, e)
               - np.einsum('sjk,k->sj', run, m) * np.einsum('sja,sja->sj', c_a, e))
    reaction = gravity_m_s2 * lever_a / np.where(ok, span_len, 1.0)       # N, along +u at c_B
    m_reaction = np.cross(c_b - joints, reaction[..., None] * u[:, None, :])
    tau_bridge = -np.einsum('sja,sja->sj', axes_w, m_head + m_reaction)
    tau = np.where(ok, tau_bridge, tau)
    tau = np.where(sup_a == -1, tau_tail, tau)                             # tail end lifted: exact
    tau = np.where(sup_b == n + 1, tau_head, tau)                          # head end lifted: exact
    return tau, supported


def joint_torques(robot_or_model, q_rad, qd_rad_s, qdd_rad_s2, *, support: str = 'ground',
                  gravity_m_s2: float = STANDARD_GRAVITY_M_S2, up=None,
                  contact_tolerance_m: float | None = None) -> np.ndarray:
    """Joint torques (T, n) in N m that the motion q(t) needs under a support model.

    Parameters: robot_or_model a snake_control Robot or a ChainModel; q_rad, qd_rad_s, qdd_rad_s2
    (T, n) joint angles, rates, accelerations; support 'ground' | 'free' | 'fixed' (module docstring);
    gravity_m_s2 magnitude; up (3,) or (T, 3) in link 0's frame or None; contact_tolerance_m for
    'ground' (default a quarter of the module radius, or 7.5 mm for a bare ChainModel).
    Positive torque turns the joint's head side counter-clockwise about the joint axis.
    """
    if isinstance(robot_or_model, ChainModel):
        model, radius = robot_or_model, 0.03
    else:
        model, radius = chain_model_from_robot(robot_or_model), robot_or_model.module_radius_m
    n = model.n_joints
    arrays = []
    for name, value in (('q_rad', q_rad), ('qd_rad_s', qd_rad_s), ('qdd_rad_s2', qdd_rad_s2)):
        arr = np.asarray(value, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != n or (arrays and arr.shape != arrays[0].shape):
            raise ValueError(f'{name} must have shape (T, {n}) like q_rad, got {arr.shape}')
        if not np.all(np.isfinite(arr)):
            raise ValueError(f'{name} must be finite')
        arrays.append(arr)
    q, qd, qdd = arrays
    if support not in SUPPORTS:
        raise ValueError(f'support must be one of {SUPPORTS}, got {support!r}')
    if support == 'fixed':
        state = chain_state(model, q, qd, base='fixed')
        u = np.array([0.0, 0.0, 1.0]) if up is None else np.asarray(up, dtype=float)
        if u.shape != (3,) or np.linalg.norm(u) < 1e-9:
            raise ValueError('up must be a non-zero (3,) vector for the fixed support')
        g = -gravity_m_s2 * u / np.linalg.norm(u)
        return (np.einsum('sij,sj->si', mass_matrix(model, state), qdd) + bias_force(model, state, qd)
                - gravity_force(model, state, g))
    state = chain_state(model, q, base='free')
    tau = floating_joint_torques(model, q, qd, qdd, state)
    if support == 'ground':
        tol = 0.25 * radius if contact_tolerance_m is None else float(contact_tolerance_m)
        tau = tau + lifted_gravity_torques(model, q, gravity_m_s2, up, tol, state)[0]
    return tau


# --- the report -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TorqueReport:
    """Peak and RMS joint torques of a gait against the servo's stall torque.

    torque_nm (T, n); peak_nm, rms_nm, peak_time_s (n,); exceeding: names of the joints whose |torque|
    goes above limit_nm = fraction * stall_torque_nm; intervals: joint name -> list of (start, end)
    intervals where it does, in gait phase [0, 1) if phased (a period or phases were given), else in s.
    """

    robot: str
    servo: str
    support: str
    joint_names: tuple[str, ...]
    stall_torque_nm: float
    fraction: float
    t_s: np.ndarray
    torque_nm: np.ndarray
    peak_nm: np.ndarray
    rms_nm: np.ndarray
    peak_time_s: np.ndarray
    exceeding: tuple[str, ...]
    intervals: dict = field(default_factory=dict)
    period_s: float | None = None
    phased: bool = False

    @property
    def limit_nm(self) -> float:
        return self.fraction * self.stall_torque_nm

    @property
    def ok(self) -> bool:
        return not self.exceeding

    @property
    def message(self) -> str:
        """One paragraph for a log line, a CLI warning or a refused parameter change."""
        worst = int(np.argmax(self.peak_nm))
        source = ('measured in the MuJoCo world: the servo model\'s drive, its speed\'s back-EMF included'
                  if self.support == 'mujoco' else f'{self.support} support')
        head = (f'{self.servo} stall torque {self.stall_torque_nm:.2f} N m, limit {self.fraction:.0%} = '
                f'{self.limit_nm:.2f} N m ({source})')
        if self.ok:
            return (f'torque check passed: peak {self.peak_nm[worst]:.3f} N m at {self.joint_names[worst]} '
                    f'({self.peak_nm[worst] / self.stall_torque_nm:.0%} of stall); {head}')
        unit = 'phase' if self.phased else 't s'
        parts = []
        for name in self.exceeding:
            i = self.joint_names.index(name)
            spans = ', '.join(f'{a:.2f}-{b:.2f}' for a, b in self.intervals.get(name, []))
            parts.append(f'{name} peak {self.peak_nm[i]:.2f} N m '
                         f'({self.peak_nm[i] / self.stall_torque_nm:.0%}) at {unit} {spans}')
        return (f'torque check FAILED: {len(self.exceeding)} joint(s) above {self.fraction:.0%} of stall: '
                + '; '.join(parts) + f'. {head}')

    def table(self) -> str:
        """Per-joint text table: name, peak, RMS, peak/stall, time of the peak."""
        lines = [f'{"joint":<12} {"peak N m":>9} {"RMS N m":>9} {"peak/stall":>10} {"at t s":>8}']
        for i, name in enumerate(self.joint_names):
            flag = '  !' if name in self.exceeding else ''
            lines.append(f'{name:<12} {self.peak_nm[i]:9.3f} {self.rms_nm[i]:9.3f} '
                         f'{self.peak_nm[i] / self.stall_torque_nm:10.0%} {self.peak_time_s[i]:8.3f}{flag}')
        return '\n'.join(lines)


def _runs(mask_t, t, cycles=None):
    """Intervals (start, end) where mask_t is true: in gait phase [0, 1) if cycles (T,) (the gait phase
    in cycles, unwrapped) is given, else in seconds; overlapping phase intervals of several periods
    are merged."""
    idx = np.flatnonzero(mask_t)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = idx[np.concatenate([[0], breaks + 1])]
    ends = idx[np.concatenate([breaks, [idx.size - 1]])]
    if cycles is None:
        return [(float(t[a]), float(t[b])) for a, b in zip(starts, ends)]
    step = float(np.median(np.abs(np.diff(cycles)))) if cycles.size > 1 else 0.0
    pieces = []
    for a, b in zip(starts, ends):
        if abs(cycles[b] - cycles[a]) >= 1.0 - step:
            return [(0.0, 1.0)]
        lo, hi = sorted((cycles[a], cycles[b]))                            # the phase may run backwards
        pa, pb = lo % 1.0, hi % 1.0
        if pb < pa:                                                        # wraps past phase 1
            pieces += [(pa, 1.0), (0.0, pb)]
        else:
            pieces.append((pa, pb))
    pieces.sort()
    merged = [list(pieces[0])]
    for a, b in pieces[1:]:
        if a <= merged[-1][1] + 2.5 * step:                                # one-sample flicker
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(float(a), float(b)) for a, b in merged]


def gait_torque_report(robot, t_s, q_rad, fraction: float = 0.8, *, period_s: float | None = None,
                       phase_rad=None, support: str = 'ground', qd_rad_s=None, qdd_rad_s2=None, up=None,
                       gravity_m_s2: float = STANDARD_GRAVITY_M_S2,
                       contact_tolerance_m: float | None = None) -> TorqueReport:
    """Check the joint torques a gait needs against fraction * the servo's stall torque.

    Parameters: robot (snake_control.robot.Robot); t_s (T,) increasing sample times; q_rad (T, n)
    joint angles (joint order of the robot YAML); fraction in (0, 1]; period_s the gait period (phases
    are then reported in [0, 1), measured from t_s[0]), or phase_rad (T,) the gait phase of each sample
    (2 pi per cycle, as the scheduler reports it; wins over period_s); support, up, gravity_m_s2,
    contact_tolerance_m as in joint_torques; qd_rad_s, qdd_rad_s2 (T, n) if known exactly (else
    finite differences of q).
    Returns a TorqueReport (ok, message, table(), per-joint peak and RMS, exceeding joints, intervals).
    Takes 0.1-0.5 s for 32 joints and 400 samples on a busy 2-core machine (bench/bench_dynamics.py).
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f'fraction must be in (0, 1], got {fraction}')
    if period_s is not None and not period_s > 0:
        raise ValueError(f'period_s must be positive, got {period_s}')
    t, q = _trajectory(t_s, q_rad, robot.n_joints)
    qd_fd, qdd_fd = (None, None) if qd_rad_s is not None and qdd_rad_s2 is not None else joint_rates(t, q)
    qd = qd_fd if qd_rad_s is None else qd_rad_s
    qdd = qdd_fd if qdd_rad_s2 is None else qdd_rad_s2
    tau = joint_torques(robot, q, qd, qdd, support=support, gravity_m_s2=gravity_m_s2, up=up,
                        contact_tolerance_m=contact_tolerance_m)
    return torque_report(robot, t, tau, fraction, period_s=period_s, phase_rad=phase_rad, support=support)


def torque_report(robot, t_s, torque_nm, fraction: float = 0.8, *, period_s: float | None = None,
                  phase_rad=None, support: str = 'ground') -> TorqueReport:
    """TorqueReport of joint torques (T, n) N m at times t_s (T,) against fraction * stall torque.

    period_s and phase_rad as in gait_torque_report (neither: intervals in seconds); support names where
    the torques come from (a support model, or 'mujoco' for torques measured in the MuJoCo world:
    snake_control.validation.servo_load).
    """
    t, tau = np.asarray(t_s, dtype=float), np.asarray(torque_nm, dtype=float)
    cycles = None
    if phase_rad is not None:
        cycles = np.asarray(phase_rad, dtype=float) / (2 * np.pi)
        if cycles.shape != t.shape or not np.all(np.isfinite(cycles)):
            raise ValueError(f'phase_rad must be finite with shape {t.shape}, got {np.shape(phase_rad)}')
    elif period_s is not None:
        cycles = (t - t[0]) / period_s
    servo = robot.bus.servo
    stall = float(servo.stall_torque_nm)
    mag = np.abs(tau)
    peak_i = np.argmax(mag, axis=0)
    limit = fraction * stall
    names = tuple(robot.joint_names)
    exceeding = tuple(name for i, name in enumerate(names) if mag[peak_i[i], i] > limit)
    intervals = {name: _runs(mag[:, names.index(name)] > limit, t, cycles) for name in exceeding}
    return TorqueReport(robot=robot.name, servo=servo.name, support=support, joint_names=names,
                        stall_torque_nm=stall, fraction=float(fraction), t_s=t, torque_nm=tau,
                        peak_nm=mag.max(axis=0), rms_nm=np.sqrt(np.mean(tau ** 2, axis=0)),
                        peak_time_s=t[peak_i], exceeding=exceeding, intervals=intervals,
                        period_s=period_s, phased=cycles is not None)
