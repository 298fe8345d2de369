"""Seed 001's moving-frame dynamics of a chain of rigid bodies with revolute joints (pure numpy).

Conventions (those of snake_control.kinematics.chain): links 0..n from tail to head, each link frame at
the link's centre (its centre of mass) with x toward the head; joint j sits at the head end of link j
and turns link j + 1 relative to link j about the unit axis a_j (in link j's frame, z for yaw, y for
pitch) by q_j, counter-clockwise positive: R_{j+1} = R_j exp(hat(a_j) q_j).

Generalised velocities nu (seed 001 eq. 60 generalised to a floating base):

- ``base='fixed'``: nu = qdot (n,). Link 0 is clamped to the world (seed 001's wall; its mass is
  irrelevant). Seed 001's own chain, body 1 hinged to the wall, is link 0 = the wall and links 1..n.
- ``base='free'``: nu = (v0, w0, qdot) (6 + n,), v0 the velocity of link 0's centre in the WORLD frame,
  w0 link 0's angular velocity in LINK 0's frame (MuJoCo's free-joint convention, so mj_inverse's
  qfrc_inverse compares entry by entry).

Cartesian velocities Xdot = B nu, stacked per link k = 0..n as (xdot_k in world, w_k in link k's frame)
(seed 001 eq. 59c, 61). The equations of motion are eq. 85-86:

    M* nudot + N* nu = F*,  M* = B^T M B,  N* = B^T (M Bdot + D M B),  F* = B^T F

with M = diag(m_k I3, J_k) and D = diag(0, hat(w_k)) (eq. 65, 76). Where this module and the seed's
extracted text differ, the derivation below was checked against finite differences and MuJoCo
(test/test_dynamics_*.py):

- Kinematic transfer variable (eq. 51, 58b): T_{k+1/k} = hat(R_{k+1/k} d_C + d_J)^T = -hat(...), with
  d_J = (l_k/2, 0, 0) from link k's centre to the joint (seed: d^{(J/k)}) and d_C = (l_{k+1}/2, 0, 0)
  from the joint to link k+1's centre (seed: d^{(k+1/J)}).
- Translational rows (eq. 89): for a column c already present in link k,
      B_x(k+1, c) = B_x(k, c) + R_k T_{k+1/k} B_w(k, c),
  i.e. the seed's "R^{(i-1)} T^{(i/i-1)} R^{(i/j)} g" must read R^{(i-1)} T^{(i/i-1)} (R^{(i-1/j)})^T g
  (the transpose and the frame index were lost), and its "B_{(i-1)j}" is the translational block of
  body i-1. The new column of joint j is R_{j+1} hat(d_C)^T a_j. (Eq. 57c also repeats body 3's d and
  omega where body 4's belong.)
- Rotational rows (eq. 90): B_w(k+1, c) = R_{k+1/k}^T B_w(k, c), new column a_j. Same as the seed.
- Bdot (eq. 91-92) is the time derivative of these recursions, with Rdot_k = R_k hat(w_k),
  Rdot_{k+1/k} = R_{k+1/k} hat(a_j qdot_j) and Tdot = -hat(Rdot_{k+1/k} d_C).
- D carries +hat(w_k) (so D M B nu gives w x J w, Euler's gyroscopic term): with the seed's variation
  dw = d/dt dpi + hat(w) dpi (eq. 75) integration by parts gives this sign.

The joint torque tau_j is the generalised force of q_j (tau_j a_j on link j + 1, -tau_j a_j on link
j), so F* = B^T F_gravity + (0_base, tau).

Everything is batched over leading sample axes (S samples at once), which is what makes a gait's
torque check fast: one Python loop over the links, numpy over the samples.

Example: one link hanging from the wall (n = 1, base fixed, pitch axis, l = 1 m, m = 1 kg, gravity
-z): at q = 0 the link is horizontal and the joint must hold m g l/2 = 4.905 N m:
    >>> model = ChainModel(np.array([[0.0, 1.0, 0.0]]), np.ones(2), np.ones(2), np.zeros((2, 3, 3)))
    >>> inverse_dynamics(model, np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)),
    ...                  gravity_m_s2=np.array([0.0, 0.0, -9.81]))
    array([[-4.905]])

(negative: a positive pitch angle lowers the head end, so holding it up takes a torque about -y.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snake_control.kinematics.lie import hat_batch

BASES = ('fixed', 'free')


@dataclass(frozen=True)
class ChainModel:
    """Inertial and geometric description of a chain: n joints, n + 1 links.

    axes (n, 3) unit joint axes in the frame of the link before each joint; lengths_m (n + 1,) link
    lengths (joint spacing); masses_kg (n + 1,); inertias_kg_m2 (n + 1, 3, 3) about each link's centre
    in its own frame.
    """

    axes: np.ndarray
    lengths_m: np.ndarray
    masses_kg: np.ndarray
    inertias_kg_m2: np.ndarray

    def __post_init__(self):
        axes = np.asarray(self.axes, dtype=float)
        if axes.ndim != 2 or axes.shape[1] != 3:
            raise ValueError(f'axes must have shape (n, 3), got {axes.shape}')
        n = axes.shape[0]
        norms = np.linalg.norm(axes, axis=1)
        if not np.allclose(norms, 1.0, atol=1e-9):
            raise ValueError('axes must be unit vectors')
        for name, shape in (('lengths_m', (n + 1,)), ('masses_kg', (n + 1,)),
                            ('inertias_kg_m2', (n + 1, 3, 3))):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise ValueError(f'{name} must have shape {shape} for {n} joints, got {value.shape}')
            if not np.all(np.isfinite(value)):
                raise ValueError(f'{name} must be finite')
            object.__setattr__(self, name, value)
        object.__setattr__(self, 'axes', axes)
        if np.any(self.lengths_m <= 0) or np.any(self.masses_kg < 0):
            raise ValueError('lengths_m must be positive and masses_kg non-negative')

    @property
    def n_joints(self) -> int:
        return self.axes.shape[0]


def chain_model_from_robot(robot) -> ChainModel:
    """ChainModel of a snake_control.robot.Robot: every link a solid cylinder along x.

    Wheels (planar robots) add their mass to each link as a point mass at the centre and the
    inertia of two thin discs at +-track/2 on y (their spin is not modelled: passive wheels turn
    freely and store little energy).
    """
    n_links = robot.n_links
    inertia = np.diag(robot.link_inertia_kg_m2)
    mass = robot.link_mass_kg
    wheels = getattr(robot, 'wheels', None)
    if wheels is not None:
        mw, rw, half = wheels.mass_kg, wheels.radius_m, wheels.track_m / 2.0
        # Two discs with axles along y at y = +-half: about x and z each mw (rw^2/4 + half^2),
        # about y mw rw^2 / 2 (per disc).
        inertia = inertia + 2.0 * mw * np.diag([rw * rw / 4 + half * half, rw * rw / 2,
                                                rw * rw / 4 + half * half])
        mass = mass + 2.0 * mw
    return ChainModel(axes=robot.axis_vectors, lengths_m=robot.link_lengths_m,
                      masses_kg=np.full(n_links, mass),
                      inertias_kg_m2=np.repeat(inertia[None], n_links, axis=0))


# --- small batched SO(3) helpers ----------------------------------------------------------------

def _cross(a, b):
    """Cross product over the last axis (np.cross's axis handling costs more than the arithmetic)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _rot(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rodrigues for a unit axis (3,) and angles (S,) -> (S, 3, 3)."""
    k = hat_batch(axis)
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + s * k + (1.0 - c) * (k @ k)


# --- B and Bdot ---------------------------------------------------------------------------------

@dataclass
class ChainState:
    """B, Bdot and frames of a chain at S samples.

    rot (S, n + 1, 3, 3) world-from-link rotations; bx, bw (S, n + 1, 3, m) translational (world) and
    rotational (link frame) rows of B per link, m generalised velocities; bx_dot, bw_dot the same for
    Bdot (zero where no velocity was given); omega (S, n + 1, 3) link angular velocities (link frame).
    """

    rot: np.ndarray
    bx: np.ndarray
    bw: np.ndarray
    bx_dot: np.ndarray
    bw_dot: np.ndarray
    omega: np.ndarray

    def b_matrix(self) -> np.ndarray:
        """(S, 6 (n + 1), m) B stacked per link as (xdot_k, w_k), seed 001 eq. 59c."""
        return _stack_rows(self.bx, self.bw)

    def b_dot_matrix(self) -> np.ndarray:
        """(S, 6 (n + 1), m) Bdot in the same layout."""
        return _stack_rows(self.bx_dot, self.bw_dot)


def _stack_rows(bx, bw):
    s, k, _, m = bx.shape
    return np.concatenate([bx, bw], axis=2).reshape(s, 6 * k, m)


def _as_samples(name, value, n):
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != n:
        raise ValueError(f'{name} must have shape (S, {n}) or ({n},), got {np.shape(value)}')
    if not np.all(np.isfinite(arr)):
        raise ValueError(f'{name} must be finite')
    return arr


def n_velocities(model: ChainModel, base: str) -> int:
    """Number of generalised velocities: n (fixed base) or 6 + n (free base)."""
    if base not in BASES:
        raise ValueError(f'base must be one of {BASES}, got {base!r}')
    return model.n_joints + (6 if base == 'free' else 0)



def _state_inputs(model, q_rad, nu, base, base_rot):
    """Checked sample arrays shared by chain_state and chain_state_unrolled:
    (n joints, m velocities, q (S, n), S, has velocities, nu (S, m), base rotations (S, 3, 3),
    column of joint 0 in nu)."""
    n = model.n_joints
    m = n_velocities(model, base)
    q = _as_samples('q_rad', q_rad, n)
    s = q.shape[0]
    has_vel = nu is not None
    v = _as_samples('nu', nu, m) if has_vel else np.zeros((s, m))
    if v.shape[0] != s:
        raise ValueError(f'nu has {v.shape[0]} samples but q_rad has {s}')
    r0 = np.broadcast_to(np.eye(3) if base_rot is None else np.asarray(base_rot, float), (s, 3, 3))
    return n, m, q, s, has_vel, v, r0, m - n

def chain_state(model: ChainModel, q_rad, nu=None, *, base: str = 'fixed',
                base_rot=None) -> ChainState:
    """Build B (eq. 89-90) and, if velocities are given, Bdot (eq. 91-92) at S samples.

    Parameters: q_rad (S, n) joint angles; nu (S, m) generalised velocities (see module docstring) or
    None (Bdot and omega are then zero); base 'fixed' or 'free'; base_rot (S, 3, 3) or (3, 3) world
    rotation of link 0 (identity by default).
    Returns a ChainState.
    """
    n, m, q, s, has_vel, v, r0, off = _state_inputs(model, q_rad, nu, base, base_rot)

    rot = np.empty((s, n + 1, 3, 3))
    bx = np.zeros((s, n + 1, 3, m))
    bw = np.zeros((s, n + 1, 3, m))
    bxd = np.zeros((s, n + 1, 3, m))
    bwd = np.zeros((s, n + 1, 3, m))
    omega = np.zeros((s, n + 1, 3))
    rot[:, 0] = r0
    if base == 'free':
        bx[:, 0, :, 0:3] = np.eye(3)
        bw[:, 0, :, 3:6] = np.eye(3)
        omega[:, 0] = v[:, 3:6]
    for j in range(n):
        a = model.axes[j]
        hat_a = hat_batch(a)
        d_j = np.array([0.5 * model.lengths_m[j], 0.0, 0.0])
        d_c = np.array([0.5 * model.lengths_m[j + 1], 0.0, 0.0])
        hat_dc = hat_batch(d_c)
        sin, cos = np.sin(q[:, j])[:, None, None], np.cos(q[:, j])[:, None, None]
        r_rel = np.eye(3) + sin * hat_a + (1.0 - cos) * (hat_a @ hat_a)   # R_{j+1/j}
        r_rel_t = np.swapaxes(r_rel, 1, 2)
        r_k = rot[:, j]
        r_next = r_k @ r_rel
        rot[:, j + 1] = r_next
        # Kinematic transfer variable T = hat(R_{j+1/j} d_C + d_J)^T (eq. 51); hat(R d) = R hat(d) R^T.
        t_var = -(r_rel @ hat_dc @ r_rel_t + hat_batch(d_j))
        col = off + j
        # Rotational rows (eq. 90) and translational rows (eq. 89, corrected, see module docstring).
        bw[:, j + 1] = r_rel_t @ bw[:, j]
        bw[:, j + 1, :, col] += a
        rt = r_k @ t_var                                            # R_k T (S, 3, 3)
        bx[:, j + 1] = bx[:, j] + rt @ bw[:, j]
        new_dir = -hat_dc @ a                                       # hat(d_C)^T a
        bx[:, j + 1, :, col] += r_next @ new_dir
        if not has_vel:
            continue
        qd = v[:, col][:, None, None]
        # omega^{(j+1)} = R_{j+1/j}^T omega^{(j)} + a qdot (eq. 50).
        omega[:, j + 1] = (r_rel_t @ omega[:, j, :, None])[..., 0] + a * qd[:, 0]
        # Rdot_{j+1/j} = R_{j+1/j} hat(a) qdot;  Rdot_k = R_k hat(w_k).
        r_rel_t_dot = -qd * (hat_a @ r_rel_t)
        bwd[:, j + 1] = r_rel_t_dot @ bw[:, j] + r_rel_t @ bwd[:, j]
        r_k_dot = r_k @ hat_batch(omega[:, j])
        r_rel_dot = qd * (r_rel @ hat_a)
        t_dot = -(r_rel_dot @ hat_dc @ r_rel_t + r_rel @ hat_dc @ r_rel_t_dot)   # Tdot = -hat(Rdot d_C)
        bxd[:, j + 1] = bxd[:, j] + (r_k_dot @ t_var + r_k @ t_dot) @ bw[:, j] + rt @ bwd[:, j]
        bxd[:, j + 1, :, col] += (r_next @ hat_batch(omega[:, j + 1])) @ new_dir
    return ChainState(rot=rot, bx=bx, bw=bw, bx_dot=bxd, bw_dot=bwd, omega=omega)


def chain_state_unrolled(model: ChainModel, q_rad, nu=None, *, base: str = 'fixed',
                         base_rot=None) -> ChainState:
    """The same ChainState as chain_state, with the recursions of eq. 89-92 summed in closed form.

    Unrolling eq. 89 telescopes the transfer terms R_k T_{k+1/k} into a cross product with the
    displacement from the joint: column j of link k (k > j) is a_j^w x (x_k - p_j) in translation and
    R_k^T a_j^w in rotation, with a_j^w = R_j a_j the joint axis and p_j the joint position in the world.
    Its derivative uses d/dt a_j^w = w_j^w x a_j^w. Vectorised over the links as well as the samples (a
    few numpy calls per evaluation instead of a few per link), which is what a sequential integrator
    (RK4, one sample at a time) needs. test_dynamics_moving_frame checks it against chain_state.
    """
    n, m, q, s, has_vel, v, r0, off = _state_inputs(model, q_rad, nu, base, base_rot)
    k_hat = hat_batch(model.axes)                                             # (n, 3, 3)
    sin, cos = np.sin(q)[..., None, None], np.cos(q)[..., None, None]
    r_rel = np.eye(3) + sin * k_hat + (1.0 - cos) * (k_hat @ k_hat)      # (S, n, 3, 3)
    rot = np.empty((s, n + 1, 3, 3))
    rot[:, 0] = r0
    for j in range(n):
        rot[:, j + 1] = rot[:, j] @ r_rel[:, j]
    half = 0.5 * model.lengths_m
    xdir = rot[:, :, :, 0]                                               # (S, n + 1, 3)
    steps = half[:-1, None] * xdir[:, :-1] + half[1:, None] * xdir[:, 1:]
    x = np.concatenate([np.zeros((s, 1, 3)), np.cumsum(steps, axis=1)], axis=1)
    p = x[:, :-1] + half[:-1, None] * xdir[:, :-1]                        # joint positions (S, n, 3)
    aw = np.einsum('sjab,jb->sja', rot[:, :-1], model.axes)               # world joint axes (S, n, 3)
    below = (np.arange(n + 1)[:, None] > np.arange(n)[None, :]).astype(float)   # link k after joint j
    rel = x[:, :, None, :] - p[:, None, :, :]                            # (S, n + 1, n, 3)
    rot_t = np.swapaxes(rot, -1, -2)
    bx = np.zeros((s, n + 1, 3, m))
    bw = np.zeros((s, n + 1, 3, m))
    bx[..., off:] = np.swapaxes(_cross(aw[:, None], rel) * below[None, :, :, None], -1, -2)
    bw[..., off:] = rot_t @ np.swapaxes(aw, -1, -2)[:, None] * below[None, :, None, :]
    if base == 'free':
        bx[..., 0:3] = np.eye(3)
        bx[..., 3:6] = -hat_batch(x - x[:, :1]) @ r0[:, None]
        bw[..., 3:6] = rot_t @ r0[:, None]
    bxd = np.zeros_like(bx)
    bwd = np.zeros_like(bw)
    omega = np.zeros((s, n + 1, 3))
    if has_vel:
        qd = v[:, off:]
        w0 = np.einsum('sab,sb->sa', r0, v[:, 3:6]) if base == 'free' else np.zeros((s, 3))
        ww = w0[:, None] + np.concatenate([np.zeros((s, 1, 3)), np.cumsum(aw * qd[..., None], axis=1)], 1)
        omega = np.einsum('skba,skb->ska', rot, ww)                      # link frames
        vel = np.einsum('skam,sm->ska', bx, v)                           # centre velocities, world
        pd = vel[:, :-1] + _cross(ww[:, :-1], p - x[:, :-1])           # joint velocities
        awd = _cross(ww[:, :-1], aw)                                   # d/dt a_j^w
        rel_d = vel[:, :, None, :] - pd[:, None, :, :]
        bxd[..., off:] = np.swapaxes((_cross(awd[:, None], rel) + _cross(aw[:, None], rel_d))
                                     * below[None, :, :, None], -1, -2)
        dw = ww[:, :-1][:, None] - ww[:, :, None]                        # w_j - w_k (S, n + 1, n, 3)
        bwd[..., off:] = np.swapaxes(np.einsum('skba,skjb->skja', rot, _cross(dw, aw[:, None]))
                                     * below[None, :, :, None], -1, -2)
        if base == 'free':
            w0_hat = hat_batch(w0)
            bxd[..., 3:6] = -(hat_batch(vel - vel[:, :1]) + hat_batch(x - x[:, :1]) @ w0_hat[:, None]) @ r0[:, None]
            bwd[..., 3:6] = rot_t @ hat_batch(w0[:, None] - ww) @ r0[:, None]
    return ChainState(rot=rot, bx=bx, bw=bw, bx_dot=bxd, bw_dot=bwd, omega=omega)


_STATE_METHODS = {'recursive': chain_state, 'unrolled': chain_state_unrolled}


def _state(method):
    if method not in _STATE_METHODS:
        raise ValueError(f'method must be one of {sorted(_STATE_METHODS)}, got {method!r}')
    return _STATE_METHODS[method]


# --- equations of motion ------------------------------------------------------------------------

def _flat(x):
    """(S, K, 3, m) -> (S, 3K, m) so sums over links and components become one matmul."""
    return x.reshape(x.shape[0], -1, x.shape[-1])


def _tr(x):
    return np.swapaxes(x, -1, -2)


def mass_matrix(model: ChainModel, state: ChainState) -> np.ndarray:
    """(S, m, m) M* = B^T M B (eq. 86a), summed link by link without forming the block M."""
    mx = _flat(np.sqrt(model.masses_kg)[None, :, None, None] * state.bx)
    jw = _flat(model.inertias_kg_m2[None] @ state.bw)
    return _tr(mx) @ mx + _tr(_flat(state.bw)) @ jw


def coriolis_matrix(model: ChainModel, state: ChainState) -> np.ndarray:
    """(S, m, m) N* = B^T (M Bdot + D M B) (eq. 86b), D = diag(0, hat(w_k))."""
    mbx_dot = _flat(model.masses_kg[None, :, None, None] * state.bx_dot)
    jw_dot = model.inertias_kg_m2[None] @ state.bw_dot
    gyro = hat_batch(state.omega) @ (model.inertias_kg_m2[None] @ state.bw)
    return _tr(_flat(state.bx)) @ mbx_dot + _tr(_flat(state.bw)) @ _flat(jw_dot + gyro)


def gravity_force(model: ChainModel, state: ChainState, gravity_m_s2) -> np.ndarray:
    """(S, m) generalised gravity force F*_c = B^T F, F = (m_k g, 0) per link, g in the world frame."""
    g = np.asarray(gravity_m_s2, dtype=float)
    if g.shape != (3,):
        raise ValueError(f'gravity_m_s2 must have shape (3,), got {g.shape}')
    return np.einsum('skam,ka->sm', state.bx, model.masses_kg[:, None] * g)


def bias_force(model: ChainModel, state: ChainState, nu) -> np.ndarray:
    """(S, m) N* nu computed as B^T (M Bdot nu + D M B nu) without forming N* (the fast path)."""
    nu = np.asarray(nu, dtype=float)
    acc_x = (state.bx_dot @ nu[:, None, :, None])[..., 0]
    acc_w = (state.bw_dot @ nu[:, None, :, None])[..., 0]
    jw = np.einsum('kab,skb->ska', model.inertias_kg_m2, state.omega)
    moment = np.einsum('kab,skb->ska', model.inertias_kg_m2, acc_w) + np.cross(state.omega, jw)
    force = model.masses_kg[None, :, None] * acc_x
    return (_tr(_flat(state.bx)) @ force.reshape(force.shape[0], -1, 1)
            + _tr(_flat(state.bw)) @ moment.reshape(moment.shape[0], -1, 1))[..., 0]


def inverse_dynamics(model: ChainModel, q_rad, nu, nu_dot, *, base: str = 'fixed', base_rot=None,
                     gravity_m_s2=None, method: str = 'recursive') -> np.ndarray:
    """Generalised forces F*_a = M* nudot + N* nu - F*_c (seed 001 eq. 94) at S samples.

    Parameters: q_rad (S, n); nu, nu_dot (S, m) generalised velocities and their time derivatives
    (free base: the derivative of (v0 world, w0 link-0 frame) component by component, as MuJoCo's
    qacc); gravity_m_s2 (3,) in the world frame or None. Returns (S, m): for a fixed base the joint
    torques (N m); for a free base the wrench on link 0 (force world, torque link-0 frame) that would
    be needed, then the joint torques. method: 'recursive' (eq. 89-92 as written) or 'unrolled'.
    """
    state = _state(method)(model, q_rad, nu, base=base, base_rot=base_rot)
    nu_dot = _as_samples('nu_dot', nu_dot, n_velocities(model, base))
    out = np.einsum('smn,sn->sm', mass_matrix(model, state), nu_dot) + bias_force(
        model, state, np.asarray(nu, float).reshape(nu_dot.shape))
    if gravity_m_s2 is not None:
        out -= gravity_force(model, state, gravity_m_s2)
    return out


def forward_dynamics(model: ChainModel, q_rad, nu, force, *, base: str = 'fixed', base_rot=None,
                     gravity_m_s2=None, method: str = 'recursive') -> np.ndarray:
    """nudot = M*^-1 (F* - N* nu) (eq. 87); force (S, m) applied generalised forces (joint torques)."""
    state = _state(method)(model, q_rad, nu, base=base, base_rot=base_rot)
    m = n_velocities(model, base)
    rhs = _as_samples('force', force, m) - bias_force(model, state, _as_samples('nu', nu, m))
    if gravity_m_s2 is not None:
        rhs = rhs + gravity_force(model, state, gravity_m_s2)
    return np.linalg.solve(mass_matrix(model, state), rhs[..., None])[..., 0]


def link_positions(model: ChainModel, q_rad, base_rot=None, base_pos=None) -> np.ndarray:
    """(S, n + 1, 3) link-centre positions in the world for base pose (base_rot, base_pos)."""
    n = model.n_joints
    q = _as_samples('q_rad', q_rad, n)
    s = q.shape[0]
    r = np.broadcast_to(np.eye(3) if base_rot is None else np.asarray(base_rot, float), (s, 3, 3)).copy()
    x = np.zeros((s, n + 1, 3))
    if base_pos is not None:
        x[:, 0] = base_pos
    for j in range(n):
        r_next = r @ _rot(model.axes[j], q[:, j])
        x[:, j + 1] = (x[:, j] + 0.5 * model.lengths_m[j] * r[:, :, 0]
                       + 0.5 * model.lengths_m[j + 1] * r_next[:, :, 0])
        r = r_next
    return x


def kinetic_energy(model: ChainModel, state: ChainState, nu) -> np.ndarray:
    """(S,) K = 1/2 nu^T M* nu (eq. 66)."""
    nu = np.asarray(nu, dtype=float)
    return 0.5 * np.einsum('sm,smn,sn->s', nu, mass_matrix(model, state), nu)
