"""Seed 001's own validation: polynomial joint motions -> applied torques -> RK4 recovers the motion.

Seed 001 (section 6.2) drives a 20-body chain hinged to a wall with theta_i(t) = a t^2 + b (eq. 93,
table 1: cobra, accordion, helix), computes the applied moments from eq. 94
(F*_a = M* q'' + N* q' - F*_c), feeds them to eq. 87 and integrates with RK4; the desired and
replicated angles differ by a summed 3.1434e-5 rad. The paper gives neither the link properties, the
time span nor the step, so we use our pitch-yaw module (0.07 m, 0.14 kg, radius 0.03 m), no gravity
(see seed001_validation), t in [0, 2] s (the span over which table 1's helix joints travel their
0.7 rad, as in the paper's figure 6) and a fixed RK4 step.

What we find (bench/bench_dynamics.py): with a 1 ms step the accordion is recovered to 5e-9 rad over
2 s and the cobra to 2.6e-4 rad; the helix to 3.8e-7 rad over 1 s, but its open-loop replay is
unstable and diverges at about 1.35 s. MuJoCo's own dynamics and RK4, fed the same torques, land on
the same angles (test_dynamics_seed001: at 1.2 s, when the error has grown a thousandfold) and
diverge at the same time, so that is the motion's sensitivity, not a modelling error (with 2 ms and
1 ms steps alike the replay diverges before 2 s).
"""
from __future__ import annotations

import numpy as np

from snake_control.dynamics.moving_frame import ChainModel, forward_dynamics, inverse_dynamics

PITCH = np.array([0.0, 1.0, 0.0])
YAW = np.array([0.0, 0.0, 1.0])
PAPER_SUMMED_ERROR_RAD = 3.1434e-5


# Seed 001, table 1: theta_i(t) = a t^2 + b on 20 bodies, numbered 0..19 (= our joints 0..19).
# Extraction lost details, so these choices are ours and are documented here:
# - cobra lists body 5 in both groups; the second group must mean 6 (0..19 otherwise misses 6).
# - accordion gives a = +-pi/14 (or pi/24), b = +-pi/3 without saying which sign where: we alternate
#   the sign along the listed bodies (+, -, +, -) so the body folds back and forth like an accordion.
# - axes: cobra rises in the vertical plane (all pitch), accordion folds in the ground plane (all
#   yaw), helix needs 3D (pitch and yaw alternating, pitch first, as on our pitch-yaw robot).

def seed001_cases() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """name -> (axes (20, 3), a (20,), b (20,)) for theta_j(t) = a_j t^2 + b_j."""
    n = 20
    pi = np.pi
    cases = {}
    a, b = np.zeros(n), np.zeros(n)
    a[[3, 5, 7]], b[[3, 5, 7]] = pi / 24, -pi / 6
    a[[13, 15, 17]], b[[13, 15, 17]] = -pi / 24, pi / 6
    cases['cobra'] = (np.tile(PITCH, (n, 1)), a, b)
    a, b = np.zeros(n), np.zeros(n)
    for sign, body in zip((1, -1, 1, -1), (2, 6, 14, 18)):
        a[body], b[body] = sign * pi / 14, sign * pi / 3
    for sign, body in zip((1, -1, 1, -1), (4, 8, 12, 16)):
        a[body], b[body] = sign * pi / 24, sign * pi / 3
    cases['accordion'] = (np.tile(YAW, (n, 1)), a, b)
    a, b = np.zeros(n), np.zeros(n)
    up = [2, 3, 4, 5, 6, 7, 9, 11, 13, 18]
    a[up], b[up] = pi / 18, -2 * pi / 9
    a[[12, 14, 16]], b[[12, 14, 16]] = -pi / 18, 2 * pi / 9
    cases['helix'] = (np.array([PITCH if j % 2 == 0 else YAW for j in range(n)]), a, b)
    return cases


def seed001_model(axes, length_m: float = 0.07, mass_kg: float = 0.14, radius_m: float = 0.03) -> ChainModel:
    """Wall (link 0) plus one solid-cylinder body per joint, as in seed 001's figure 3."""
    n = len(axes)
    across = mass_kg * (3 * radius_m ** 2 + length_m ** 2) / 12
    inertia = np.diag([mass_kg * radius_m ** 2 / 2, across, across])
    return ChainModel(np.asarray(axes, float), np.full(n + 1, length_m), np.full(n + 1, mass_kg),
                      np.repeat(inertia[None], n + 1, axis=0))


def seed001_validation(case: str, duration_s: float = 2.0, dt_s: float = 2e-3,
                       gravity_m_s2=None, forward_method: str = 'unrolled') -> dict:
    """Run seed 001's validation for one table-1 case.

    The applied torques come from eq. 94 with B built by the recursion of eq. 89-92; the forward
    integration (eq. 87, RK4) builds B with forward_method ('unrolled', the same B summed in closed
    form and several times faster one sample at a time, or 'recursive'). Gravity is off by default:
    seed 001's force list (eq. 79) pairs every weight with a ground normal force, and a 20-link chain
    hanging from a wall under gravity is an open-loop unstable multiple pendulum whose replay diverges
    whatever the dynamics code.

    Returns a dict: summed_error_rad (sum over joints of |theta - theta_desired| at the end),
    max_summed_error_rad (largest such sum over all steps), peak_torque_nm, steps, diverged_at_s (None,
    or the time at which the summed error passed 1 rad and the run was stopped), final_q_rad and
    desired_q_rad (20,) at the end of the run.
    """
    cases = seed001_cases()
    if case not in cases:
        raise ValueError(f'case must be one of {sorted(cases)}, got {case!r}')
    axes, a, b = cases[case]
    model = seed001_model(axes)
    g = None if gravity_m_s2 is None else np.asarray(gravity_m_s2, dtype=float)
    steps = int(round(duration_s / dt_s))
    if steps < 1:
        raise ValueError('duration_s must be at least one step dt_s')
    # The applied torques at every RK4 stage time (t, t + dt/2, t + dt): one batched eq. 94 call.
    t = np.arange(2 * steps + 1) * (dt_s / 2)
    q = a * t[:, None] ** 2 + b
    qd = 2 * a * t[:, None]
    qdd = np.broadcast_to(2 * a, q.shape)
    tau = inverse_dynamics(model, q, qd, qdd, gravity_m_s2=g)
    n = model.n_joints

    def f(y, k):
        acc = forward_dynamics(model, y[:n], y[n:], tau[k], gravity_m_s2=g, method=forward_method)[0]
        return np.concatenate([y[n:], acc])

    y = np.concatenate([b, np.zeros(n)])
    worst = 0.0
    diverged_at = None
    for i in range(steps):
        h = dt_s
        k1 = f(y, 2 * i)
        k2 = f(y + 0.5 * h * k1, 2 * i + 1)
        k3 = f(y + 0.5 * h * k2, 2 * i + 1)
        k4 = f(y + h * k3, 2 * i + 2)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        err = float(np.sum(np.abs(y[:n] - q[2 * i + 2])))
        worst = max(worst, err)
        if err > 1.0:
            # Open-loop replay is unstable for some motions: past a summed radian it only blows up.
            diverged_at = (i + 1) * dt_s
            break
    return {'case': case, 'summed_error_rad': err, 'max_summed_error_rad': worst,
            'peak_torque_nm': float(np.max(np.abs(tau))), 'steps': steps, 'diverged_at_s': diverged_at,
            'final_q_rad': y[:n].copy(), 'desired_q_rad': q[min(2 * i + 2, len(q) - 1)].copy()}
