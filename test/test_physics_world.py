"""The MuJoCo world: built from every robot YAML, agreeing with the chain kinematics, deterministic."""
import dataclasses
import math

import mujoco
import numpy as np
import pytest

from snake_control.kinematics.chain import chain_frames, relative_to
from snake_control.paths import robot_names
from snake_control.physics import PhysicsOptions, SnakeWorld, build_mjcf, servo_gains
from snake_control.physics.mjcf import actuator_name, link_name, wheel_names
from snake_control.robot import load_robot

ROBOTS = robot_names()


def shape(robot, scale=0.5, phase=1.0):
    """A bent shape well inside the limits, different at every joint."""
    return scale * np.sin(np.arange(robot.n_joints) * 1.3 + phase) * np.minimum(robot.upper_rad, 1.0)


def test_shipped_robots_are_all_checked():
    assert {'pitch_yaw_32', 'wheeled_8', 'kinematic_snake_3'} <= set(ROBOTS)


@pytest.mark.parametrize('name', ROBOTS)
def test_model_has_indexed_names_and_servo_limits(name):
    robot = load_robot(name)
    model = mujoco.MjModel.from_xml_string(build_mjcf(robot))
    kp, kd = servo_gains(robot)
    stall = robot.bus.servo.stall_torque_nm
    assert model.nu == robot.n_joints
    for k in range(robot.n_links):
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, link_name(k)) >= 0
    for joint in robot.joints:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint.name)
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, actuator_name(joint.name))
        assert jid >= 0 and aid >= 0
        np.testing.assert_allclose(model.jnt_range[jid], [joint.lower_rad, joint.upper_rad])
        np.testing.assert_allclose(model.jnt_axis[jid], joint.axis_vector)
        np.testing.assert_allclose(model.actuator_forcerange[aid], [-stall, stall])
        assert model.actuator_gainprm[aid, 0] == pytest.approx(kp)
        assert model.dof_damping[model.jnt_dofadr[jid]] == pytest.approx(kd)
    if robot.kind == 'planar':
        for k in range(robot.n_links):
            for wheel in wheel_names(k):
                jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, wheel)
                assert model.jnt_type[jid] == mujoco.mjtJoint.mjJNT_HINGE
                np.testing.assert_allclose(model.jnt_axis[jid], [0, 1, 0])   # axle across the link
    else:
        assert model.npair == robot.n_links


def test_servo_gains_worked_example():
    kp, kd = servo_gains(load_robot('pitch_yaw_32'))      # XM430-W350, P gain 800
    assert kp == pytest.approx(4.1 * 6.25 * 4096 / (2 * math.pi) / 885, rel=1e-12)
    assert kp == pytest.approx(18.88, abs=0.01)
    assert kd == pytest.approx(4.1 / (46 * 2 * math.pi / 60), rel=1e-12)


def test_bad_input_is_refused():
    robot = load_robot('wheeled_8')
    with pytest.raises(ValueError, match='wheels'):
        build_mjcf(dataclasses.replace(robot, wheels=None))
    with pytest.raises(ValueError, match='wheel diameter'):
        build_mjcf(dataclasses.replace(robot, wheels=dataclasses.replace(robot.wheels, radius_m=0.1)))
    with pytest.raises(ValueError, match='timestep_s'):
        SnakeWorld(robot, timestep=0.0)
    with pytest.raises(ValueError, match='lateral_friction'):
        build_mjcf(robot, PhysicsOptions(lateral_friction=float('nan')))
    with pytest.raises(ValueError, match='robot must be'):
        build_mjcf(42)
    world = SnakeWorld(robot)
    with pytest.raises(ValueError, match=r'shape \(7,\)'):
        world.set_goals(np.zeros(6))
    with pytest.raises(ValueError, match='finite'):
        world.set_goals([0, 0, 0, float('nan'), 0, 0, 0])
    with pytest.raises(ValueError, match='limits'):
        world.reset(np.full(7, 2.0))
    with pytest.raises(ValueError, match='link'):
        world.link_pose('neck')
    # Goals beyond the limits are clipped, never passed on.
    np.testing.assert_allclose(world.set_goals(np.full(7, 5.0)), robot.upper_rad)


@pytest.mark.parametrize('name', ROBOTS)
def test_joints_settle_on_their_goals(name):
    robot = load_robot(name)
    goals = shape(robot)
    # Without gravity nothing loads the servos: the position servo must reach its goals exactly.
    world = SnakeWorld(robot, options=PhysicsOptions(gravity_m_s2=0.0))
    world.set_goals(goals)
    world.run(1.5)
    np.testing.assert_allclose(world.joint_positions_rad(), goals, atol=1e-3)
    np.testing.assert_allclose(world.joint_velocities_rad_s(), 0.0, atol=1e-2)
    # On the floor, started in the shape, gravity and friction load the servos only a little.
    world = SnakeWorld(robot)
    world.reset(goals)
    world.set_goals(goals)
    world.run(1.0)
    np.testing.assert_allclose(world.joint_positions_rad(), goals, atol=0.03)
    assert np.all(np.abs(world.actuator_torques_nm()) <= robot.bus.servo.stall_torque_nm + 1e-9)


@pytest.mark.parametrize('name', ROBOTS)
def test_link_poses_agree_with_chain_kinematics(name):
    robot = load_robot(name)
    world = SnakeWorld(robot)
    world.reset(shape(robot, 0.3), position_m=(0.4, -0.2), heading_rad=2.0)
    world.set_goals(shape(robot, 0.6, phase=0.2))
    world.run(0.3)      # mid-motion, under load
    q = world.joint_positions_rad()
    expected = chain_frames(q, robot.axis_vectors, robot.link_lengths_m)
    np.testing.assert_allclose(relative_to(world.link_poses(), 0), expected, atol=1e-6)
    poses = world.link_poses()
    np.testing.assert_allclose(np.einsum('kji,kjl->kil', poses[:, :3, :3], poses[:, :3, :3]),
                               np.broadcast_to(np.eye(3), (robot.n_links, 3, 3)), atol=1e-9)


@pytest.mark.parametrize('name', ROBOTS)
def test_reset_places_the_shape_on_the_floor(name):
    robot = load_robot(name)
    world = SnakeWorld(robot)
    world.reset(shape(robot, 0.4), position_m=(1.0, 2.0), heading_rad=-0.7)
    np.testing.assert_allclose(world.planar_pose('middle'), [1.0, 2.0, -0.7], atol=1e-12)
    np.testing.assert_allclose(world.joint_positions_rad(), shape(robot, 0.4))
    np.testing.assert_allclose(world.goals_rad(), shape(robot, 0.4))
    assert world.time_s == 0.0
    z = world.link_poses()[:, 2, 3]
    height = robot.wheels.radius_m if robot.kind == 'planar' else robot.module_radius_m
    assert z.min() >= height - 1e-9
    world.run(0.5)
    # It stays on the floor: nothing sinks, nothing falls from a height.
    z_after = world.link_poses()[:, 2, 3]
    assert z_after.min() > height - 0.005 and z_after.max() < z.max() + 0.01


def test_floor_contacts_follow_a_lifted_head():
    robot = load_robot('pitch_yaw_32')
    world = SnakeWorld(robot)
    assert world.floor_contacts().all()               # lying straight on the floor
    goals = np.zeros(robot.n_joints)
    goals[-4] = -0.8          # negative pitch at joint_29 lifts links 30..32 (30 touches at its joint)
    world.set_goals(goals)
    world.run(1.0)
    contacts = world.floor_contacts()
    assert not contacts[-1] and not contacts[-2] and contacts[:-3].all()
    wheeled = SnakeWorld('wheeled_8')
    assert wheeled.floor_contacts().all()


def test_positive_yaw_turns_the_head_counter_clockwise():
    robot = load_robot('kinematic_snake_3')
    world = SnakeWorld(robot)
    world.reset([0.0, 0.6])
    _, _, heading_mid = world.planar_pose('middle')
    _, _, heading_head = world.planar_pose('head')
    assert heading_head - heading_mid == pytest.approx(0.6)


@pytest.mark.parametrize('name', ROBOTS)
def test_same_commands_same_run(name):
    robot = load_robot(name)

    def run(world):
        out = []
        for k in range(40):
            world.set_goals(shape(robot, 0.5, phase=0.1 * k))
            world.step(5)
            out.append(world.data.qpos.copy())
        return np.array(out)

    a, b = SnakeWorld(robot), SnakeWorld(robot)
    first = run(a)
    np.testing.assert_array_equal(first, run(b))
    a.reset()
    np.testing.assert_array_equal(first, run(a))     # reset restores the whole state
    assert np.ptp(first[:, -robot.n_joints:]) > 0.1     # and something happened


@pytest.mark.parametrize('name', ROBOTS)
def test_same_seed_same_run_different_seed_different_run(name):
    robot = load_robot(name)

    def run(seed):
        world = SnakeWorld(robot)
        start = world.random_angles(seed, 0.4)
        world.reset(start)
        world.set_goals(-start)
        world.run(0.4)
        return start, world.link_poses()

    start_a, poses_a = run(7)
    start_b, poses_b = run(7)
    start_c, poses_c = run(8)
    np.testing.assert_array_equal(start_a, start_b)
    np.testing.assert_array_equal(poses_a, poses_b)
    assert np.all(np.abs(start_a) <= 0.4) and not np.allclose(start_a, start_c)
    assert np.max(np.abs(poses_a - poses_c)) > 1e-3


def test_servo_torque_is_limited_to_stall():
    robot = load_robot('wheeled_8')
    world = SnakeWorld(robot)
    world.set_goals(robot.upper_rad)
    world.step(3)
    tau = world.actuator_torques_nm()
    assert np.max(np.abs(tau)) == pytest.approx(robot.bus.servo.stall_torque_nm)


def test_wheels_roll_but_do_not_slide_sideways():
    """Seed 000's gait on the three-link snake: link centres move along their links, not across."""
    robot = load_robot('kinematic_snake_3')
    world = SnakeWorld(robot)
    amp, lag = math.radians(40), math.radians(25)
    world.reset([0.0, amp * math.sin(lag)])
    dt = 0.02
    prev = world.link_poses()
    start = prev[1, :3, 3].copy()
    along, across = [], []
    for k in range(1, 300):
        t = k * dt
        world.set_goals([amp * math.sin(2 * t), amp * math.sin(2 * t + lag)])
        world.run(dt)
        poses = world.link_poses()
        step = poses[:, :3, 3] - prev[:, :3, 3]
        along.append(np.einsum('ki,ki->k', step, prev[:, :3, 0]))
        across.append(np.einsum('ki,ki->k', step, prev[:, :3, 1]))
        prev = poses
    along, across = np.abs(np.array(along)), np.abs(np.array(across))
    assert np.sum(along) > 0.3                               # the wheels roll
    assert np.sum(across) < 0.05 * np.sum(along)             # and barely slide sideways
    assert np.linalg.norm(prev[1, :2, 3] - start[:2]) > 0.05  # the snake gets somewhere


def test_module_friction_is_anisotropic_along_the_capsule():
    """The justification of the pitch-yaw friction: the contact's first tangent is the module axis."""
    world = SnakeWorld('pitch_yaw_32', options=PhysicsOptions(axial_friction=0.1, lateral_friction=0.8))
    robot = world.robot
    flat = shape(robot, 0.3) * (np.array(robot.axes) == 'yaw')     # every module on the floor
    world.reset(flat, heading_rad=0.4)
    world.run(0.2)
    m, d = world.model, world.data
    poses = world.link_poses()
    checked = 0
    for i in range(d.ncon):
        c = d.contact[i]
        body = m.geom_bodyid[c.geom2] if c.geom1 == 0 else m.geom_bodyid[c.geom1]
        k = int(np.nonzero(world.link_body_ids == body)[0][0])
        axis = poses[k, :3, 0]
        tangent = c.frame[3:6]
        # The module axis lies in the contact plane; the first tangent is its projection.
        projected = axis - (axis @ c.frame[:3]) * c.frame[:3]
        assert abs(tangent @ projected) == pytest.approx(np.linalg.norm(projected), rel=1e-6)
        np.testing.assert_allclose(c.friction[:2], [0.1, 0.8])
        checked += 1
    assert checked >= robot.n_links


def test_contact_time_constant_sets_every_floor_contact():
    """contact_timeconst_s reaches the module pairs and the wheels; the default is 0.005 s, harder than
    MuJoCo's own 0.02 s (docs/physics.md, "Soft contacts slide")."""
    default = SnakeWorld('pitch_yaw_32')
    np.testing.assert_allclose(default.model.pair_solref, [[0.005, 1.0]] * default.robot.n_links)
    soft = SnakeWorld('pitch_yaw_32', options=PhysicsOptions(contact_timeconst_s=0.02))
    np.testing.assert_allclose(soft.model.pair_solref[:, 0], 0.02)
    wheeled = SnakeWorld('wheeled_8', options=PhysicsOptions(contact_timeconst_s=0.006))
    m = wheeled.model
    # A geom-geom contact mixes both geoms' solref: the wheels' and the floor's are both set.
    touching = m.geom_contype > 0
    touching |= m.geom_conaffinity > 0
    assert touching.sum() > wheeled.robot.n_links
    np.testing.assert_allclose(m.geom_solref[touching, 0], 0.006)
    # MuJoCo would quietly take two timesteps for a harder contact.
    with pytest.raises(ValueError, match='contact_timeconst_s'):
        PhysicsOptions(contact_timeconst_s=0.003).validate()
    with pytest.raises(ValueError, match='contact_timeconst_s'):
        PhysicsOptions(contact_timeconst_s=float('nan')).validate()
