"""Gait torques under the support models, and the torque report against the servo's stall torque."""
import numpy as np
import pytest

from dynamics_helpers import mjcf
from snake_control.dynamics.moving_frame import chain_model_from_robot, chain_state, mass_matrix
from snake_control.dynamics.torques import (
    floating_joint_torques, gait_torque_report, joint_rates, joint_torques, lifted_gravity_torques)
from snake_control.robot import load_robot

G = 9.80665


@pytest.fixture(scope='module')
def snake():
    return load_robot('pitch_yaw_32')


def _lift_head(robot, joint, angle):
    """Pose with every joint straight except pitch joint `joint`, raising the head side by `angle`."""
    q = np.zeros(robot.n_joints)
    q[joint] = -angle          # positive pitch turns x toward -z: a negative angle raises the head side
    return q


def test_lifted_head_needs_the_cantilever_moment(snake):
    """Closed form: links j+1..n held straight at angle phi above the ground by pitch joint j."""
    j, phi = 24, 0.5
    assert snake.axes[j] == 'pitch'
    q = _lift_head(snake, j, phi)[None]
    tau = joint_torques(snake, q, np.zeros_like(q), np.zeros_like(q))[0]
    l, m, n = snake.link_length_m, snake.link_mass_kg, snake.n_joints
    lifted = n - j                                   # links j+1..n
    arms = (np.arange(lifted) + 0.5) * l * np.cos(phi)
    np.testing.assert_allclose(tau[j], -m * G * arms.sum(), rtol=1e-9)
    # Further pitch joints on the lifted part hold what lies beyond them.
    for jj in range(j + 2, n, 2):
        arms = (np.arange(n - jj) + 0.5) * l * np.cos(phi)
        np.testing.assert_allclose(tau[jj], -m * G * arms.sum(), rtol=1e-9)
    # Joints on the flat part and yaw joints (vertical axes on the flat part) hold nothing.
    np.testing.assert_allclose(tau[:j], 0.0, atol=1e-9)


def test_lifted_tail_is_mirrored(snake):
    """The same cantilever on the tail side: joint 2 lifts links 0..2 (the tail)."""
    j, phi = 2, 0.4
    q = np.zeros(snake.n_joints)
    q[j] = -phi                # a V: the long (heavy) head side lies on the ground, the tail rises
    tau, supported = lifted_gravity_torques(chain_model_from_robot(snake), q[None], G, None, 0.0075)
    assert not supported[0, :j + 1].any() and supported[0, j + 1:].all()
    arms = (np.arange(j + 1) + 0.5) * snake.link_length_m * np.cos(phi)
    np.testing.assert_allclose(abs(tau[0, j]), snake.link_mass_kg * G * arms.sum(), rtol=1e-9)


def test_symmetric_arch_is_simply_supported(snake):
    """An arch between two contacts (links 10 and 17): each contact carries half of its weight."""
    q = np.zeros(snake.n_joints)
    phi = 0.3
    # Pitch joints: 10 up, 12 level, 14 down, 16 level: links 11..16 lifted, symmetric about joint 13.
    q[10], q[12], q[14], q[16] = -phi, phi, phi, -phi
    model = chain_model_from_robot(snake)
    tau, supported = lifted_gravity_torques(model, q[None], G, np.array([0.0, 0.0, 1.0]), 1e-6)
    np.testing.assert_array_equal(np.flatnonzero(~supported[0]), [11, 12, 13, 14, 15, 16])
    l, m, c = snake.link_length_m, snake.link_mass_kg, np.cos(phi)
    xs = np.array([0.5 * c, 1.5 * c, 2 * c + 0.5, 2 * c + 1.5, 2 * c + 2 + 0.5 * c, 3.5 * c + 2]) * l
    x17 = (4 * c + 2.5) * l                          # horizontal distances from joint 10
    expected = -(m * G * xs.sum() - 3 * m * G * x17)
    np.testing.assert_allclose(tau[0, 10], expected, rtol=1e-9)
    np.testing.assert_allclose(tau[0, 16], tau[0, 10], rtol=1e-9)     # mirror image: same angle, same torque
    # The ground plane found from the shape alone is the same.
    tau_auto, supported_auto = lifted_gravity_torques(model, q[None], G, None, 1e-6)
    np.testing.assert_array_equal(supported_auto, supported)
    np.testing.assert_allclose(tau_auto, tau, atol=1e-9)


def test_flat_lateral_undulation_loads_only_yaw_joints(snake):
    n = snake.n_joints
    t = np.linspace(0, 2, 201)
    yaw = np.array([a == 'yaw' for a in snake.axes])
    q = np.where(yaw, 0.7 * np.sin(np.pi * t[:, None] - 0.5 * np.arange(n)), 0.0)
    qd, qdd = joint_rates(t, q)
    tau = joint_torques(snake, q, qd, qdd)
    np.testing.assert_allclose(tau[:, ~yaw], 0.0, atol=1e-10)
    assert np.abs(tau[:, yaw]).max() > 1e-3


def test_floating_torques_agree_with_mujoco_at_zero_momentum():
    """The base motion we infer leaves MuJoCo's base wrench at zero and gives the same joint torques."""
    mujoco = pytest.importorskip('mujoco')
    robot = load_robot('pitch_yaw_32')
    model = chain_model_from_robot(robot)
    n = model.n_joints
    rng = np.random.default_rng(11)
    q, qd, qdd = rng.uniform(-0.8, 0.8, (1, n)), rng.normal(size=(1, n)), rng.normal(size=(1, n))
    tau = floating_joint_torques(model, q, qd, qdd)[0]
    # Recover the base velocity and acceleration the function used, and hand all of it to MuJoCo.
    m_star = mass_matrix(model, chain_state(model, q, base='free'))[0]
    nu_b = -np.linalg.solve(m_star[:6, :6], m_star[:6, 6:] @ qd[0])
    mj = mujoco.MjModel.from_xml_string(mjcf(model))
    data = mujoco.MjData(mj)
    data.qpos[:] = np.concatenate([[0, 0, 0, 1, 0, 0, 0], q[0]])
    data.qvel[:] = np.concatenate([nu_b, qd[0]])
    # Base acceleration: the one that needs no base wrench. Solve it with MuJoCo's own equations.
    data.qacc[:] = np.concatenate([np.zeros(6), qdd[0]])
    mujoco.mj_inverse(mj, data)
    resid = data.qfrc_inverse[:6].copy()
    full = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, data, full)
    acc_b = -np.linalg.solve(full[:6, :6], resid)
    data.qacc[:] = np.concatenate([acc_b, qdd[0]])
    mujoco.mj_inverse(mj, data)
    assert np.max(np.abs(data.qfrc_inverse[:6])) < 1e-9 * np.max(np.abs(data.qfrc_inverse))
    np.testing.assert_allclose(tau, data.qfrc_inverse[6:], rtol=1e-6, atol=1e-6 * np.abs(tau).max())


def test_fixed_support_matches_static_gravity(snake):
    q = np.zeros((1, snake.n_joints))
    tau = joint_torques(snake, q, q, q, support='fixed')[0]
    l, m = snake.link_length_m, snake.link_mass_kg
    n = snake.n_joints
    np.testing.assert_allclose(tau[0], -m * G * l * sum(k + 0.5 for k in range(n)), rtol=1e-12)


def _lift_trajectory(robot, joint, angle, period, t):
    """Raise the head side by `angle` during phase 0.25..0.5 (smooth raised-cosine bump), else flat."""
    phase = (t / period) % 1.0
    bump = np.where((phase > 0.25) & (phase < 0.5), np.sin(np.pi * (phase - 0.25) / 0.25) ** 2, 0.0)
    q = np.zeros((t.size, robot.n_joints))
    q[:, joint] = -angle * bump
    return q


def test_report_names_the_joint_and_the_phase_that_exceed(snake):
    period = 4.0
    t = np.arange(0, 2 * period, 0.01)
    q = _lift_trajectory(snake, 20, 0.8, period, t)      # joint 20 lifts 12 links: above 80% of stall
    report = gait_torque_report(snake, t, q, fraction=0.8, period_s=period)
    assert not report.ok
    assert 'joint_21' in report.exceeding
    assert 'joint_21' in report.message and 'FAILED' in report.message
    spans = report.intervals['joint_21']
    assert spans and all(0.25 <= a <= b <= 0.5 for a, b in spans)
    assert report.peak_nm[20] > snake.bus.servo.stall_torque_nm
    assert report.rms_nm[20] < report.peak_nm[20]
    assert 1.0 < report.peak_time_s[20] % period < 2.0     # during the bump (phase 0.25..0.5)
    assert 'joint_21' in report.table()


def test_report_passes_a_gentle_gait_and_fraction_matters(snake):
    period = 4.0
    t = np.arange(0, period, 0.01)
    q = _lift_trajectory(snake, 28, 0.3, period, t)      # lifts the last 4 links a little
    report = gait_torque_report(snake, t, q, period_s=period)
    assert report.ok and 'passed' in report.message
    peak = report.peak_nm.max()
    strict = gait_torque_report(snake, t, q, fraction=0.9 * peak / snake.bus.servo.stall_torque_nm,
                                period_s=period)
    assert not strict.ok and strict.exceeding == ('joint_29',)


def test_report_uses_exact_rates_when_given(snake):
    t = np.linspace(0, 1, 51)
    n = snake.n_joints
    w = 2 * np.pi
    q = 0.3 * np.sin(w * t)[:, None] * np.ones(n)
    qd = 0.3 * w * np.cos(w * t)[:, None] * np.ones(n)
    qdd = -0.3 * w * w * np.sin(w * t)[:, None] * np.ones(n)
    exact = gait_torque_report(snake, t, q, qd_rad_s=qd, qdd_rad_s2=qdd)
    approx = gait_torque_report(snake, t, q)
    np.testing.assert_allclose(approx.peak_nm, exact.peak_nm, rtol=0.05, atol=1e-3)


def test_bad_input_is_refused(snake):
    t = np.linspace(0, 1, 10)
    q = np.zeros((10, snake.n_joints))
    with pytest.raises(ValueError, match='q_rad'):
        gait_torque_report(snake, t, q[:, :3])
    with pytest.raises(ValueError, match='fraction'):
        gait_torque_report(snake, t, q, fraction=1.5)
    with pytest.raises(ValueError, match='t_s'):
        gait_torque_report(snake, t[::-1], q)
    bad = q.copy()
    bad[3, 3] = np.nan
    with pytest.raises(ValueError, match='finite'):
        gait_torque_report(snake, t, bad)
    with pytest.raises(ValueError, match='support'):
        gait_torque_report(snake, t, q, support='wall')


def test_planar_wheeled_robot_report(snake):
    robot = load_robot('wheeled_8')
    t = np.linspace(0, 2, 201)
    q = 0.6 * np.sin(np.pi * t[:, None] + 0.7 * np.arange(robot.n_joints))
    report = gait_torque_report(robot, t, q, period_s=2.0)
    assert report.ok and report.peak_nm.max() > 0
    assert report.torque_nm.shape == (t.size, robot.n_joints)
