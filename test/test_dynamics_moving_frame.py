"""Seed 001's B matrix, Bdot and equations of motion against finite differences, energy and MuJoCo."""
import numpy as np
import pytest

from dynamics_helpers import mjcf, random_chain
from snake_control.dynamics.moving_frame import (
    chain_model_from_robot, chain_state, coriolis_matrix, forward_dynamics, gravity_force,
    inverse_dynamics, kinetic_energy, link_positions, mass_matrix, ChainModel)
from snake_control.kinematics.chain import chain_jacobian, robot_frames
from snake_control.kinematics.lie import so3_exp, so3_log
from snake_control.robot import load_robot


def _frames(model, q, r0, x0):
    """World rotations (n + 1, 3, 3) and centres (n + 1, 3) by plain forward kinematics."""
    rots = [r0]
    for j in range(model.n_joints):
        rots.append(rots[-1] @ so3_exp(model.axes[j] * q[j]))
    x = link_positions(model, q, base_rot=r0, base_pos=x0)[0]
    return np.array(rots), x


@pytest.mark.parametrize('base', ['fixed', 'free'])
def test_b_matches_finite_differences_of_forward_kinematics(base):
    rng = np.random.default_rng(1)
    model = random_chain(6, rng)
    n = model.n_joints
    q = rng.uniform(-1, 1, n)
    r0 = so3_exp(rng.normal(size=3))
    x0 = rng.normal(size=3)
    b = chain_state(model, q, base=base, base_rot=r0).b_matrix()[0]
    m = b.shape[1]
    eps = 1e-6
    for c in range(m):
        def pose(sign):
            qq, rr, xx = q.copy(), r0.copy(), x0.copy()
            if base == 'free' and c < 3:
                xx[c] += sign * eps
            elif base == 'free' and c < 6:
                rr = r0 @ so3_exp(np.eye(3)[c - 3] * sign * eps)      # w0 in link 0's frame
            else:
                qq[c - (m - n)] += sign * eps
            return _frames(model, qq, rr, xx)
        (rp, xp), (rm, xm) = pose(1), pose(-1)
        for k in range(n + 1):
            np.testing.assert_allclose(b[6 * k:6 * k + 3, c], (xp[k] - xm[k]) / (2 * eps), atol=1e-8)
            w = so3_log(rm[k].T @ rp[k]) / (2 * eps)                   # body-frame rate of link k
            np.testing.assert_allclose(b[6 * k + 3:6 * k + 6, c], w, atol=1e-8)


def test_b_agrees_with_chain_jacobian_of_the_robot():
    robot = load_robot('pitch_yaw_32')
    model = chain_model_from_robot(robot)
    q = np.random.default_rng(2).uniform(-0.8, 0.8, robot.n_joints)
    state = chain_state(model, q)
    jv, jw = chain_jacobian(q, robot.axis_vectors, robot.link_lengths_m)
    np.testing.assert_allclose(state.bx[0], jv, atol=1e-12)
    # B's rotational rows are in each link's own frame; chain_jacobian's in the tail frame.
    np.testing.assert_allclose(np.einsum('kab,kbn->kan', state.rot[0], state.bw[0]), jw, atol=1e-12)
    np.testing.assert_allclose(state.rot[0], robot_frames(robot, q)[:, :3, :3], atol=1e-12)


@pytest.mark.parametrize('base', ['fixed', 'free'])
def test_b_dot_is_the_time_derivative_of_b(base):
    rng = np.random.default_rng(3)
    model = random_chain(5, rng)
    n = model.n_joints
    q = rng.uniform(-1, 1, n)
    r0 = so3_exp(rng.normal(size=3))
    nu = rng.normal(size=n + (6 if base == 'free' else 0))
    state = chain_state(model, q, nu, base=base, base_rot=r0)
    eps = 1e-6
    qd = nu[-n:]

    def b_at(h):
        r = r0 @ so3_exp(nu[3:6] * h) if base == 'free' else r0
        return chain_state(model, q + qd * h, base=base, base_rot=r).b_matrix()[0]
    np.testing.assert_allclose(state.b_dot_matrix()[0], (b_at(eps) - b_at(-eps)) / (2 * eps), atol=1e-7)


def test_mass_matrix_is_symmetric_positive_and_n_star_is_consistent():
    """M* is symmetric positive definite and Mdot* = N* + N*^T for this N* (power balance)."""
    rng = np.random.default_rng(4)
    model = random_chain(7, rng)
    n = model.n_joints
    q = rng.uniform(-1, 1, n)
    nu = rng.normal(size=n + 6)
    r0 = so3_exp(rng.normal(size=3))
    state = chain_state(model, q, nu, base='free', base_rot=r0)
    mstar = mass_matrix(model, state)[0]
    np.testing.assert_allclose(mstar, mstar.T, atol=1e-14)
    assert np.all(np.linalg.eigvalsh(mstar) > 0)
    # d/dt (1/2 nu^T M* nu) with no forces equals 0 only if nu^T (Mdot*/2 - N*) nu = 0.
    eps = 1e-6

    def m_at(h):
        return mass_matrix(model, chain_state(model, q + nu[6:] * h, base='free',
                                              base_rot=r0 @ so3_exp(nu[3:6] * h)))[0]
    m_dot = (m_at(eps) - m_at(-eps)) / (2 * eps)
    nstar = coriolis_matrix(model, state)[0]
    assert abs(nu @ (0.5 * m_dot - nstar) @ nu) < 1e-7 * (1 + abs(nu @ nstar @ nu))


def _rk4(f, y, dt, steps):
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def test_energy_of_the_fixed_chain_under_gravity_is_conserved():
    rng = np.random.default_rng(5)
    model = random_chain(6, rng)
    n = model.n_joints
    g = np.array([0.0, 0.0, -9.81])

    def f(y):
        qdd = forward_dynamics(model, y[:n], y[n:], np.zeros(n), gravity_m_s2=g)[0]
        return np.concatenate([y[n:], qdd])

    def energy(y):
        state = chain_state(model, y[:n], y[n:])
        x = link_positions(model, y[:n])[0]
        return kinetic_energy(model, state, y[n:][None])[0] - model.masses_kg @ x @ g

    y0 = np.concatenate([rng.uniform(-1, 1, n), rng.normal(size=n)])
    y1 = _rk4(f, y0, 1e-3, 500)
    assert np.max(np.abs(y1[n:])) > 0.5            # it really moved
    assert abs(energy(y1) - energy(y0)) < 1e-6 * abs(energy(y0)) + 1e-9


def test_energy_and_momentum_of_the_free_chain_are_conserved():
    """Free-floating chain in space, no torques: kinetic energy and world linear momentum stay put."""
    rng = np.random.default_rng(6)
    model = random_chain(5, rng)
    n = model.n_joints

    def f(y):
        r0 = y[:9].reshape(3, 3)
        nu = y[9:]
        q = y[9 + 6 + n:]
        acc = forward_dynamics(model, q, nu[:6 + n], np.zeros(6 + n), base='free', base_rot=r0)[0]
        r_dot = r0 @ np.array([[0, -nu[5], nu[4]], [nu[5], 0, -nu[3]], [-nu[4], nu[3], 0]])
        return np.concatenate([r_dot.ravel(), acc, nu[6:6 + n]])

    def totals(y):
        r0 = y[:9].reshape(3, 3)
        nu, q = y[9:9 + 6 + n], y[9 + 6 + n:]
        state = chain_state(model, q, nu, base='free', base_rot=r0)
        p = np.einsum('k,kam,m->a', model.masses_kg, state.bx[0], nu)
        return kinetic_energy(model, state, nu[None])[0], p

    nu0 = rng.normal(size=6 + n)
    y0 = np.concatenate([so3_exp(rng.normal(size=3)).ravel(), nu0, rng.uniform(-1, 1, n)])
    # nu is stored twice so the state carries q: layout (R0, nu (6 + n), q (n)).
    y1 = _rk4(f, y0, 5e-4, 600)
    e0, p0 = totals(y0)
    e1, p1 = totals(y1)
    assert abs(e1 - e0) < 1e-6 * e0
    np.testing.assert_allclose(p1, p0, atol=1e-8 * (1 + np.linalg.norm(p0)))


@pytest.mark.parametrize('gravity', [(0.0, 0.0, 0.0), (0.3, -1.2, -9.81)])
def test_inverse_dynamics_agrees_with_mujoco(gravity):
    mujoco = pytest.importorskip('mujoco')
    rng = np.random.default_rng(7)
    model = random_chain(8, rng)
    n = model.n_joints
    mj = mujoco.MjModel.from_xml_string(mjcf(model, gravity))
    data = mujoco.MjData(mj)
    assert mj.nv == 6 + n
    for _ in range(5):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        q = rng.uniform(-1.5, 1.5, n)
        data.qpos[:] = np.concatenate([rng.normal(size=3), quat, q])
        data.qvel[:] = rng.normal(size=6 + n)
        data.qacc[:] = rng.normal(size=6 + n)
        mujoco.mj_inverse(mj, data)
        r0 = np.zeros(9)
        mujoco.mju_quat2Mat(r0, quat)
        ours = inverse_dynamics(model, q, data.qvel.copy(), data.qacc.copy(), base='free',
                                base_rot=r0.reshape(3, 3), gravity_m_s2=np.array(gravity))[0]
        theirs = data.qfrc_inverse.copy()
        assert np.max(np.abs(ours - theirs)) <= 1e-6 * np.max(np.abs(theirs))
        # MuJoCo's own mass matrix too.
        full = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, data, full)   # MuJoCo 4 signature
        state = chain_state(model, q, base='free', base_rot=r0.reshape(3, 3))
        np.testing.assert_allclose(mass_matrix(model, state)[0], full, atol=1e-9 * np.max(np.abs(full)))


def test_fixed_base_gravity_torque_of_a_horizontal_chain_is_the_static_moment():
    """Closed form: a straight horizontal chain clamped at the tail holds sum m g (x_k - x_joint)."""
    robot = load_robot('pitch_yaw_32')
    model = chain_model_from_robot(robot)
    n = robot.n_joints
    state = chain_state(model, np.zeros(n))
    g = np.array([0.0, 0.0, -9.81])
    tau = -gravity_force(model, state, g)[0]
    l, m = robot.link_length_m, robot.link_mass_kg
    x = np.arange(n + 1) * l
    joints = x[:-1] + l / 2
    moment = np.array([m * 9.81 * np.sum(x[j + 1:] - joints[j]) for j in range(n)])
    pitch = np.array([a == 'pitch' for a in robot.axes])
    np.testing.assert_allclose(tau[pitch], -moment[pitch], rtol=1e-12)
    np.testing.assert_allclose(tau[~pitch], 0.0, atol=1e-12)


def test_bad_shapes_are_refused():
    model = random_chain(3, np.random.default_rng(8))
    with pytest.raises(ValueError, match='q_rad'):
        chain_state(model, np.zeros(4))
    with pytest.raises(ValueError, match='nu'):
        chain_state(model, np.zeros(3), np.zeros(3), base='free')
    with pytest.raises(ValueError, match='base'):
        chain_state(model, np.zeros(3), base='floating')
    with pytest.raises(ValueError, match='axes'):
        ChainModel(np.ones((2, 3)), np.ones(3), np.ones(3), np.zeros((3, 3, 3)))


@pytest.mark.parametrize('base', ['fixed', 'free'])
def test_unrolled_b_equals_the_recursion(base):
    """The closed-form sum of eq. 89-92 (used for fast RK4) is the same B, Bdot and omega."""
    from snake_control.dynamics.moving_frame import chain_state_unrolled
    rng = np.random.default_rng(9)
    model = random_chain(7, rng)
    n = model.n_joints
    q = rng.normal(size=(4, n))
    nu = rng.normal(size=(4, n + (6 if base == 'free' else 0)))
    r0 = np.array([so3_exp(rng.normal(size=3)) for _ in range(4)])
    a = chain_state(model, q, nu, base=base, base_rot=r0)
    b = chain_state_unrolled(model, q, nu, base=base, base_rot=r0)
    for name in ('rot', 'bx', 'bw', 'bx_dot', 'bw_dot', 'omega'):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), atol=1e-12, err_msg=name)
    with pytest.raises(ValueError, match='method'):
        inverse_dynamics(model, q, nu, nu, base=base, method='magic')


def test_docstring_examples_run():
    import doctest

    from snake_control.dynamics import moving_frame, torques
    for module in (moving_frame, torques):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
