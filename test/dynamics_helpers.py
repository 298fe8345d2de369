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


def mjcf(model: ChainModel, gravity=(0.0, 0.0, 0.0), free: bool = True, timestep: float = 0.002) -> str:
    """MJCF of the chain: body frames at the link centres, hinges at the joints; link 0 free-floating
    (free=True) or welded to the world (seed 001's wall).

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
    base = '<freejoint name="base"/>' if free else ''
    return (f'<mujoco><option gravity="{g}" integrator="RK4" timestep="{timestep!r}"/>'
            f'<compiler angle="radian"/><worldbody><body name="link_0">{base}{inertial(0)}{body}</body>'
            f'</worldbody></mujoco>')
