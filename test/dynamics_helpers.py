"""Shared helpers for the dynamics tests: random chains, an MJCF of the same chain, seed-001 cases."""
from __future__ import annotations

import numpy as np

from snake_control.dynamics.moving_frame import ChainModel

PITCH = np.array([0.0, 1.0, 0.0])
YAW = np.array([0.0, 0.0, 1.0])


def random_chain(n: int, rng: np.random.Generator, any_axes: bool = True) -> ChainModel:
    """A chain with n joints, unequal links, full (non-diagonal) inertias and arbitrary unit axes."""
    if any_axes:
        axes = rng.normal(size=(n, 3))
        axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    else:
        axes = np.array([PITCH if j % 2 == 0 else YAW for j in range(n)])
    lengths = rng.uniform(0.05, 0.2, n + 1)
    masses = rng.uniform(0.1, 0.5, n + 1)
    inertias = []
    for m, l in zip(masses, lengths):
        diag = m * np.array([0.0005, l * l / 12 + 0.0003, l * l / 12 + 0.0004])
        a = rng.normal(size=(3, 3))
        q, _ = np.linalg.qr(a)
        inertias.append(q @ np.diag(diag) @ q.T)
    return ChainModel(axes, lengths, masses, np.array(inertias))


def mjcf(model: ChainModel, gravity=(0.0, 0.0, 0.0)) -> str:
    """MJCF of the chain with a free-floating link 0: body frames at the link centres, hinges at the joints.

    No geoms (no contacts), no damping or armature, so mj_inverse is the rigid-body inverse dynamics.
    """
    def inertial(k):
        i = model.inertias_kg_m2[k]
        full = f'{i[0, 0]:.17g} {i[1, 1]:.17g} {i[2, 2]:.17g} {i[0, 1]:.17g} {i[0, 2]:.17g} {i[1, 2]:.17g}'
        return f'<inertial pos="0 0 0" mass="{model.masses_kg[k]:.17g}" fullinertia="{full}"/>'

    n = model.n_joints
    body = ''
    for k in range(n, 0, -1):
        j = k - 1
        a = model.axes[j]
        pos = 0.5 * (model.lengths_m[j] + model.lengths_m[k])
        body = (f'<body name="link_{k}" pos="{pos:.17g} 0 0">'
                f'<joint name="j{j}" type="hinge" pos="{-0.5 * model.lengths_m[k]:.17g} 0 0" '
                f'axis="{a[0]:.17g} {a[1]:.17g} {a[2]:.17g}"/>{inertial(k)}{body}</body>')
    g = ' '.join(f'{x:.17g}' for x in gravity)
    return (f'<mujoco><option gravity="{g}" integrator="RK4"/><compiler angle="radian"/>'
            f'<worldbody><body name="link_0"><freejoint name="base"/>{inertial(0)}{body}</body>'
            f'</worldbody></mujoco>')


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
