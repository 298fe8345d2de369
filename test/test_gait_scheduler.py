"""The gait scheduler: smooth switching within limits, speed and turning, stop, bad input."""
import itertools
import math

import numpy as np
import pytest

from snake_control.gaits import GaitScheduler, catalog
from snake_control.robot import load_robot

DT = 0.02


@pytest.fixture(scope='module')
def py32():
    return load_robot('pitch_yaw_32')


def run(s, seconds, dt=DT):
    ticks = [s.step(dt) for _ in range(int(round(seconds / dt)))]
    return np.array([t.positions_rad for t in ticks]), np.array([t.velocities_rad_s for t in ticks]), ticks


def assert_smooth(robot, q, v, q_before, v_before, dt=DT):
    """No jumps: every tick within the velocity limit, velocity changes within the acceleration limit."""
    q = np.vstack([q_before, q])
    v = np.vstack([v_before, v])
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
    assert np.all(np.abs(np.diff(q, axis=0)) <= robot.velocity_limit_rad_s * dt + 1e-12)
    assert np.all(np.abs(v) <= robot.velocity_limit_rad_s + 1e-12)
    assert np.all(np.abs(np.diff(v, axis=0)) <= robot.acceleration_limit_rad_s2 * dt + 1e-9)
    assert np.all(q >= robot.lower_rad - 1e-12) and np.all(q <= robot.upper_rad + 1e-12)


def target_shape(s):
    """Joint angles of the scheduler's target gait at its current phase, clamped to the joint limits."""
    st = s.state()
    spec = catalog.gait_spec(st.target_gait)
    q = catalog.GaitShape(spec, s.robot, st.params).angles(st.phase_rad, st.turn_offset)
    if st.mirrored:
        q = np.where([a == 'yaw' for a in s.robot.axes], -q, q)
    return np.clip(q, s.robot.lower_rad, s.robot.upper_rad)


def settle_and_check_target(s, target):
    """Run until the switch has finished and the tracker has caught up; the output is the target gait."""
    for _ in range(2000):
        tick = s.step(DT)
        st = s.state()
        if st.layers == 1 and not tick.rate_limited:
            break
    st = s.state()
    assert st.target_gait == st.active_gait == target
    assert st.transition_progress == 1.0
    tick = s.step(DT)
    np.testing.assert_allclose(tick.reference_rad, target_shape(s), atol=1e-12)
    if not tick.rate_limited:
        np.testing.assert_allclose(tick.positions_rad, tick.reference_rad, atol=1e-9)


@pytest.mark.parametrize('robot_name', ['pitch_yaw_32', 'wheeled_8'])
def test_switch_between_every_pair_at_random_phases(robot_name):
    robot = load_robot(robot_name)
    names = catalog.gaits_for(robot)
    rng = np.random.default_rng(7)
    for a, b in itertools.permutations(names, 2):
        s = GaitScheduler(robot, a)
        s.set_command(0.05, 0.04, 0.3)
        q0, v0, _ = run(s, rng.uniform(0.1, 2.0))
        s.select(b)
        q, v, _ = run(s, 0.5)
        assert s.state().target_gait == b
        assert_smooth(robot, q, v, q0[-1], v0[-1])
        settle_and_check_target(s, b)


@pytest.mark.parametrize('robot_name', ['pitch_yaw_32', 'kinematic_snake_3'])
def test_switch_requested_mid_switch(robot_name):
    robot = load_robot(robot_name)
    names = catalog.gaits_for(robot)
    rng = np.random.default_rng(11)
    for a, b in itertools.permutations(names, 2):
        c = names[rng.integers(len(names))]
        s = GaitScheduler(robot, a)
        s.set_command(0.03, -0.04, -0.2)
        q0, v0, _ = run(s, rng.uniform(0.1, 1.0))
        s.select(b)
        q1, v1, _ = run(s, rng.uniform(0.04, 1.0))
        s.select(c)
        q2, v2, _ = run(s, 1.0)
        assert_smooth(robot, np.vstack([q1, q2]), np.vstack([v1, v2]), q0[-1], v0[-1])
        settle_and_check_target(s, c)


def test_blend_reference_itself_is_continuous(py32):
    """The blended reference (before the tracker) has no jump at a switch or a switch mid-switch."""
    s = GaitScheduler(py32, 'serpentine')
    s.set_command(0.05, 0.0, 0.0)
    run(s, 0.5)
    refs = []
    for k in range(150):
        if k == 10:
            s.select('helix_rolling')
        if k == 60:
            s.select('sidewinding')
        refs.append(s.step(DT).reference_rad)
    jumps = np.abs(np.diff(np.array(refs), axis=0)).max(axis=1)
    assert jumps.max() < py32.velocity_limit_rad_s.min() * DT


def test_rolling_moves_psi0_at_the_commanded_rate(py32):
    s = GaitScheduler(py32, 'rolling')
    v = 0.06
    s.set_command(0.0, v, 0.0)
    run(s, 2.0)                                 # past the speed ramp
    psi_a = s.curve()[0].psi0
    run(s, 1.0)
    psi_b = s.curve()[0].psi0
    assert psi_b - psi_a == pytest.approx(v / py32.module_radius_m * 1.0, rel=1e-9)
    assert s.state().phase_rate_rad_s == pytest.approx(v / py32.module_radius_m)
    s.set_command(0.0, -v, 0.0)                 # reverse: the mirror image, convex side first, phase forward
    run(s, 2.0)
    state = s.state()
    assert state.mirrored and state.phase_rate_rad_s == pytest.approx(v / py32.module_radius_m)


def test_rolling_phase_rate_is_capped_at_its_own_limit(py32):
    # Its joints bend by a few hundredths of a radian: their velocity limits would allow 90 rad/s, at
    # which the servos lag by more than the shape (docs/gaits.md): the gait caps itself at 6 rad/s.
    s = GaitScheduler(py32, 'rolling')
    s.set_command(0.0, 5.0, 0.0)
    run(s, 3.0)
    state = s.state()
    assert state.phase_rate_rad_s == pytest.approx(6.0) and not state.reachable


def test_a_mirror_image_turns_its_offset_the_other_way(py32):
    """Rolling right runs the mirror image of rolling left (yaw joints negated), which turns the other way
    for the same kappa_taper offset: a left turn asks the opposite offset of the one rolling left asks."""
    offsets = {}
    for v in (0.06, -0.06):
        s = GaitScheduler(py32, 'rolling')
        s.set_command(0.0, v, 0.02)
        run(s, 3.0)
        state = s.state()
        assert state.mirrored == (v < 0)
        offsets[v] = state.turn_offset
    spec = catalog.gait_spec('rolling')
    assert offsets[0.06] == pytest.approx(spec.turn_gain * 0.02) and offsets[-0.06] == pytest.approx(-offsets[0.06])


def test_forward_command_advances_phi1_and_turning_sets_a1(py32):
    s = GaitScheduler(py32, 'serpentine')
    s.set_command(0.1, 0.0, 0.5)
    run(s, 2.0)
    spec = catalog.gait_spec('serpentine')
    st = s.state()
    stride = st.params['stride']
    assert st.phase_rate_rad_s == pytest.approx(2 * math.pi * 0.1 / stride)
    assert st.turn_offset == pytest.approx(spec.turn_gain * 0.5)
    curve, _ = s.curve()
    assert curve.A1 == pytest.approx(st.params['A1'] + spec.turn_gain * 0.5)
    assert curve.phi1 == pytest.approx(st.params['phi1'] + st.phase_rad)
    s.set_command(0.1, 0.0, 100.0)              # huge turn: capped at turn_max
    run(s, 2.0)
    assert s.state().turn_offset == pytest.approx(spec.turn_max)


def test_stop_ramps_down_and_holds_the_shape(py32):
    s = GaitScheduler(py32, 'sidewinding')
    s.set_command(0.0, 0.1, 0.4)
    q0, v0, _ = run(s, 2.0)
    s.stop()
    q, v, _ = run(s, 3.0)
    assert_smooth(py32, q, v, q0[-1], v0[-1])
    assert s.state().phase_rate_rad_s == 0.0
    assert s.state().turn_offset != 0.0                 # the turning shape is held too
    np.testing.assert_allclose(q[-1], q[-20], atol=1e-12)  # holding still
    assert np.abs(q[-1]).max() > 0.3                       # not snapped to straight


def test_huge_and_nan_commands_are_safe(py32):
    s = GaitScheduler(py32, 'serpentine')
    with pytest.raises(ValueError, match='forward_m_s must be finite'):
        s.set_command(float('nan'), 0.0, 0.0)
    with pytest.raises(ValueError, match='turn_rad_s must be a number'):
        s.set_command(0.0, 0.0, 'fast')
    assert s.state().command_forward_m_s == 0.0
    s.set_command(1e12, -1e12, 1e12)
    q0, v0, _ = run(s, 0.02)
    q, v, ticks = run(s, 4.0)
    assert_smooth(py32, q, v, q0[-1], v0[-1])
    assert not ticks[-1].rate_limited       # the phase-rate cap keeps the gait within velocity limits
    with pytest.raises(ValueError, match='dt_s'):
        s.step(0.0)
    with pytest.raises(ValueError, match='dt_s'):
        s.step(float('inf'))


def test_set_params_validated_and_applied_smoothly(py32):
    s = GaitScheduler(py32, 'serpentine')
    s.set_command(0.1, 0.0, 0.0)
    q0, v0, _ = run(s, 1.0)
    with pytest.raises(ValueError, match="no parameter 'amplitude'"):
        s.set_params({'amplitude': 1.0})
    with pytest.raises(ValueError, match="'B1' .* must be finite"):
        s.set_params({'B1': float('inf')})
    assert s.state().layers == 1
    s.set_params({'B1': 2.0})
    assert s.state().params['B1'] == 2.0 and s.state().transition_progress == 0.0
    q, v, _ = run(s, 0.6)
    assert_smooth(py32, q, v, q0[-1], v0[-1])
    settle_and_check_target(s, 'serpentine')
    with pytest.raises(ValueError, match="needs a planar robot"):
        s.select('wheeled_undulation')


def test_joint_limits_clamped_and_reported(py32):
    s = GaitScheduler(py32, 'lateral_undulation', {'A_yaw': 1.4, 'beta_yaw': 0.6})
    s.set_command(0.1, 0.0, 0.0)
    q, v, ticks = run(s, 3.0)
    saturated = [t.saturated for t in ticks if t.saturated]
    assert saturated
    name, excess = next(iter(saturated[-1].items()))
    assert name in py32.joint_names and excess > 0       # above the upper limit
    assert np.all(q <= py32.upper_rad + 1e-12) and np.all(q >= py32.lower_rad - 1e-12)
    assert np.all(np.abs(v) <= py32.velocity_limit_rad_s + 1e-12)


def test_starts_from_a_measured_pose_without_jumping(py32):
    rng = np.random.default_rng(3)
    pose = rng.uniform(-1.0, 1.0, py32.n_joints)
    s = GaitScheduler(py32, 'helix_rolling', initial_positions_rad=pose)
    assert s.state().active_gait == 'hold'
    q, v, _ = run(s, 0.5)
    assert_smooth(py32, q, v, pose, np.zeros(py32.n_joints))
    settle_and_check_target(s, 'helix_rolling')
    with pytest.raises(ValueError, match='initial_positions_rad'):
        GaitScheduler(py32, initial_positions_rad=np.zeros(3))


def test_many_overlapping_switches_stay_smooth(py32):
    s = GaitScheduler(py32, 'serpentine')
    s.set_command(0.05, 0.05, 0.1)
    q0, v0, _ = run(s, 0.2)
    names = s.gait_names()
    qs, vs = [], []
    for k in range(20):                          # a new switch every 0.1 s
        s.select(names[k % len(names)])
        q, v, _ = run(s, 0.1)
        qs.append(q)
        vs.append(v)
        assert s.state().layers <= 8
    assert_smooth(py32, np.vstack(qs), np.vstack(vs), q0[-1], v0[-1])
    settle_and_check_target(s, names[19 % len(names)])


def test_stop_during_a_switch_finishes_the_switch_and_holds(py32):
    s = GaitScheduler(py32, 'serpentine')
    s.set_command(0.1, 0.0, 0.0)
    q0, v0, _ = run(s, 1.0)
    s.select('sidewinding')
    q1, v1, _ = run(s, 0.3)
    s.stop()
    q2, v2, _ = run(s, 4.0)
    assert_smooth(py32, np.vstack([q1, q2]), np.vstack([v1, v2]), q0[-1], v0[-1])
    st = s.state()
    assert st.target_gait == st.active_gait == 'sidewinding' and st.phase_rate_rad_s == 0.0
    np.testing.assert_allclose(q2[-1], target_shape(s), atol=1e-9)
    np.testing.assert_allclose(q2[-1], q2[-10], atol=1e-12)


def test_a_non_finite_shape_never_reaches_the_output(py32):
    s = GaitScheduler(py32, 'serpentine')
    s.set_command(0.1, 0.0, 0.0)
    q0, v0, _ = run(s, 0.5)
    s._layers[-1].shape.angles = lambda phase, turn: np.full(py32.n_joints, np.nan)
    q, v, _ = run(s, 0.5)
    assert_smooth(py32, q, v, q0[-1], v0[-1])


def test_turn_in_place_turns_right_as_the_mirror_image_of_its_left_turn():
    # Run backwards, turn_in_place drifted toward its tail (0.15 m/rad in MuJoCo, against 0.045 left);
    # its mirror image (yaw joints negated) turns right exactly as the left turn turns left.
    robot = load_robot('pitch_yaw_32')
    yaw = np.array([a == 'yaw' for a in robot.axes])
    sched = GaitScheduler(robot, 'turn_in_place')
    shape = catalog.GaitShape(catalog.gait_spec('turn_in_place'), robot,
                              catalog.resolve_params(catalog.gait_spec('turn_in_place'), robot, None))
    sched.set_command(0.0, 0.0, 0.1)
    for _ in range(300):
        tick = sched.step(0.01)
    assert np.allclose(tick.reference_rad, shape.angles(tick.phase_rad))
    sched.set_command(0.0, 0.0, -0.1)
    for _ in range(600):
        tick = sched.step(0.01)
    state = sched.state()
    assert state.layers == 1 and state.phase_rate_rad_s > 0, 'the mirror image runs forward'
    mirrored = shape.angles(tick.phase_rad)
    assert np.allclose(tick.reference_rad[~yaw], mirrored[~yaw])
    assert np.allclose(tick.reference_rad[yaw], -mirrored[yaw])
    # ... and back to the left turn through a blend again, not a jump.
    sched.set_command(0.0, 0.0, 0.1)
    previous = tick.positions_rad
    for _ in range(600):
        tick = sched.step(0.01)
        assert np.all(np.abs(tick.positions_rad - previous) <= robot.velocity_limit_rad_s * 0.01 + 1e-9)
        previous = tick.positions_rad
    assert np.allclose(tick.reference_rad, shape.angles(tick.phase_rad))


def test_a_start_holds_the_measured_pose_for_still_s_then_blends_in():
    # The rest at start-up is when the estimator learns the gyro bias: nothing may move during it, even
    # with a command waiting.
    robot = load_robot('pitch_yaw_32')
    q0 = np.clip(0.1 * np.sin(np.arange(robot.n_joints)), robot.lower_rad, robot.upper_rad)
    sched = GaitScheduler(robot, 'serpentine', initial_positions_rad=q0, still_s=1.0)
    sched.set_command(0.1, 0.0, 0.0)
    for _ in range(99):
        tick = sched.step(0.01)
        assert np.array_equal(tick.positions_rad, q0) and not np.any(tick.velocities_rad_s)
    assert sched.state().transition_progress == 0.0 and sched.state().target_gait == 'serpentine'
    for _ in range(300):
        tick = sched.step(0.01)
    assert np.max(np.abs(tick.positions_rad - q0)) > 0.05, 'the gait blended in after the rest'


def test_from_a_straight_body_rolling_forms_its_arc_lying_on_the_floor(py32):
    """A straight body is equally close to every phase of a uniform arc (rolling's as seed 004 has it):
    the scheduler takes the one that bends the yaw joints (an arc on the floor), not one that stands the
    arc up on its ends to fall over. In MuJoCo the blend then moves the body about 1 cm, against about
    8 cm at the first phase. The default arc is flat and tapered (no tie): it forms without moving the body."""
    from snake_control.physics import SnakeWorld
    from snake_control.validation import runs as V

    arc = {'A1': 1.0 / (12 * py32.link_length_m), 'psi0': 0.0, 'kappa_taper': 0.0}
    s = GaitScheduler(py32, 'straight', initial_positions_rad=np.zeros(py32.n_joints))
    run(s, 0.5)
    s.select('rolling', arc)
    pitch = np.array([a == 'pitch' for a in py32.axes])
    q = target_shape(s)
    assert np.sqrt(np.mean(q[pitch] ** 2)) < 0.05 * np.sqrt(np.mean(q[~pitch] ** 2))

    for params in (arc, None):
        goal = V.gait_goal_fn(py32, 'straight', switches=[(0.5, 'rolling', None, params)])
        rec = V.simulate(SnakeWorld(py32), goal, 3.5)
        centroid = np.asarray(rec.link_poses)[:, :, :2, 3].mean(axis=1)
        assert np.linalg.norm(centroid[-1] - centroid[0]) < 0.03, params
