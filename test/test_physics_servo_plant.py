"""The MuJoCo plant behind the emulated servo bus: goals in, physics out, through offsets and directions."""
import dataclasses
import math
import threading
import time

import numpy as np
import pytest

from snake_control.dynamixel.models import CENTER_TICK, RAD_PER_TICK
from snake_control.physics import PhysicsOptions, SnakeWorld
from snake_control.physics.servo_plant import MujocoPlant, mujoco_plant
from snake_control.robot import load_robot


def offset_robot():
    """wheeled_8 with a zero offset and a reversed servo, so the servo/joint mapping is not trivial."""
    robot = load_robot('wheeled_8')
    joints = list(robot.joints)
    joints[1] = dataclasses.replace(joints[1], offset_rad=0.3)
    joints[2] = dataclasses.replace(joints[2], direction=-1, offset_rad=-0.2)
    return dataclasses.replace(robot, joints=tuple(joints))


def configured(robot, servo_angles=None, world=None):
    plant = MujocoPlant(robot, world=world)
    for k, joint in enumerate(robot.joints):
        angle = joint.offset_rad if servo_angles is None else servo_angles[k]
        plant.configure(joint.servo_id, robot.bus.servo, angle)
    return plant


def test_mujoco_physics_factory_named_at_the_edge():
    from snake_control.app.sim_bus import physics_reference
    from snake_control.dynamixel.simbus import plant_factory
    from snake_control.nodes import sim_imu
    robot = load_robot('kinematic_snake_3')
    # The graph's MuJoCo plant: this one, with its IMU published (nodes/sim_imu, tested with real DDS in
    # test_estimation_imu.py).
    assert plant_factory(physics_reference('mujoco')) is sim_imu.mujoco_plant
    plant = mujoco_plant(robot.servo_ids, {i: robot.bus.servo for i in robot.servo_ids}, robot)
    assert isinstance(plant, MujocoPlant)
    with pytest.raises(ValueError, match='--robot'):
        mujoco_plant([1, 2], {}, None)
    with pytest.raises(ValueError, match=r'\[9\]'):
        MujocoPlant(robot, ids=[1, 9])


def test_goals_drive_joints_through_offset_and_direction():
    robot = offset_robot()
    # Weightless, so wheel friction cannot hold a joint off its goal: this checks the mapping alone.
    plant = configured(robot, world=SnakeWorld(robot, options=PhysicsOptions(gravity_m_s2=0.0)))
    joint_goals = np.array([0.3, -0.4, 0.5, 0.0, -0.2, 0.25, -0.1])
    servo_goals = {j.servo_id: j.servo_angle_rad(g) for j, g in zip(robot.joints, joint_goals)}
    torque = {j.servo_id: True for j in robot.joints}
    for _ in range(150):                  # 1.5 s in ragged emulator ticks
        state = plant.step(0.0103, servo_goals, torque)
    # The physics' joints follow the joint-space goals ...
    np.testing.assert_allclose(plant.world.joint_positions_rad(), joint_goals, atol=1e-3)
    # ... and the servos report servo angles, velocities and currents with their own sign.
    q, dq, tau = (plant.world.joint_positions_rad(), plant.world.joint_velocities_rad_s(),
                  plant.world.actuator_torques_nm())
    kt = robot.bus.servo.stall_torque_nm / 2.3
    for k, joint in enumerate(robot.joints):
        pos, vel, cur = state[joint.servo_id]
        assert pos == pytest.approx(joint.servo_angle_rad(q[k]), abs=1e-12)
        assert vel == pytest.approx(joint.direction * dq[k], abs=1e-12)
        assert cur == pytest.approx(joint.direction * tau[k] / kt, abs=1e-12)
    assert plant.world.time_s == pytest.approx(150 * 0.0103, abs=plant.world.timestep_s)


def test_starts_in_the_configured_shape():
    robot = offset_robot()
    joint_start = np.linspace(-0.3, 0.3, robot.n_joints)
    plant = configured(robot, [j.servo_angle_rad(a) for j, a in zip(robot.joints, joint_start)])
    state = plant.step(0.01, {}, {j.servo_id: True for j in robot.joints})
    for k, joint in enumerate(robot.joints):
        assert joint.joint_angle_rad(state[joint.servo_id][0]) == pytest.approx(joint_start[k], abs=0.01)


def test_torque_off_goes_limp_and_back_on_without_a_jump():
    robot = load_robot('pitch_yaw_32')
    plant = configured(robot)
    pitch = robot.servo_ids[0]
    goals = {pitch: 0.5}
    plant.step(0.5, goals, {i: True for i in robot.servo_ids})
    state = plant.step(0.1, goals, {i: True for i in robot.servo_ids})
    assert state[pitch][0] == pytest.approx(0.5, abs=0.05)
    off = {i: i != pitch for i in robot.servo_ids}
    state = plant.step(0.01, goals, off)
    assert plant.world.actuator_torques_nm()[0] == 0.0
    for _ in range(30):
        state = plant.step(0.02, goals, off)
    assert state[pitch][2] == 0.0                      # no current without torque
    assert state[pitch][0] < 0.4                       # gravity and the floor bent it back
    limp = state[pitch][0]
    state = plant.step(0.01, {pitch: limp}, {i: True for i in robot.servo_ids})
    assert abs(state[pitch][0] - limp) < 0.02


def test_profile_velocity_limits_the_motion():
    robot = load_robot('kinematic_snake_3')
    plant = configured(robot)
    plant.set_profile(1, 0.5, math.inf)
    speeds = []
    for _ in range(100):
        state = plant.step(0.01, {1: 1.0, 2: 0.0}, {1: True, 2: True})
        speeds.append(abs(state[1][1]))
    assert max(speeds) < 0.6
    assert state[1][0] == pytest.approx(0.5, abs=0.05)  # 1 s at 0.5 rad/s
    fast = configured(robot)
    for _ in range(20):
        state = fast.step(0.01, {1: 1.0, 2: 0.0}, {1: True, 2: True})
    assert max(abs(state[1][1]), 0.0) > 0.6 or state[1][0] > 0.6   # unlimited is much faster


def test_long_stall_is_not_stepped_in_one_burst():
    robot = load_robot('kinematic_snake_3')
    plant = configured(robot)
    plant.step(5.0, {}, {1: True, 2: True})
    assert plant.world.time_s == pytest.approx(0.1, abs=plant.world.timestep_s)


def test_sdk_reads_physics_through_the_emulated_bus():
    """A real Protocol 2.0 client writes goals and reads present positions that come from MuJoCo."""
    dynamixel_sdk = pytest.importorskip('dynamixel_sdk')
    from snake_control.dynamixel.emulator import BusEmulator

    robot = load_robot('kinematic_snake_3')
    plant = mujoco_plant(robot.servo_ids, {i: robot.bus.servo for i in robot.servo_ids}, robot)
    bus = BusEmulator(robot.servo_ids, robot.bus.servo, 1_000_000, plant=plant)
    thread = threading.Thread(target=bus.serve_forever, daemon=True)
    thread.start()
    port = dynamixel_sdk.PortHandler(bus.path)
    ok = dynamixel_sdk.COMM_SUCCESS

    def retry(call, *args):
        # The emulator shares this interpreter's lock here; a loaded machine can time a packet out.
        for _ in range(5):
            out = call(port, *args)
            if (out[1] if len(out) == 3 else out[0]) == ok:
                return out
        raise AssertionError(f'{call.__name__}{args} failed 5 times')

    try:
        assert port.openPort() and port.setBaudRate(1_000_000)
        packets = dynamixel_sdk.PacketHandler(2.0)
        goal = 0.6
        for sid in robot.servo_ids:
            retry(packets.write1ByteTxRx, sid, 64, 1)
        retry(packets.write4ByteTxRx, 1, 116, int(round(CENTER_TICK + goal / RAD_PER_TICK)))
        deadline = time.monotonic() + 10.0
        present = math.nan
        while time.monotonic() < deadline and not abs(present - goal) < 0.05:
            time.sleep(0.1)
            value = retry(packets.read4ByteTxRx, 1, 132)[0]
            present = (value - CENTER_TICK) * RAD_PER_TICK
        assert present == pytest.approx(goal, abs=0.05)
        assert plant.world.joint_positions_rad()[0] == pytest.approx(present, abs=0.05)
        assert plant.world.time_s > 0.2                 # the physics ran with the wall clock
    finally:
        port.closePort()
        bus.stop_requested = True
        thread.join(timeout=5)
        bus.close()


def test_sim_bus_with_mujoco_physics_in_its_own_process():
    """`snake sim-bus --physics mujoco`: a lifted head falls under gravity when its servo lets go."""
    import signal
    import subprocess
    import sys

    dynamixel_sdk = pytest.importorskip('dynamixel_sdk')
    proc = subprocess.Popen([sys.executable, '-m', 'snake_control.cli', 'sim-bus', '--robot', 'pitch_yaw_32',
                             '--physics', 'mujoco', '--spread', '0', '--baud', '1000000'],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    port = None
    try:
        path = proc.stdout.readline().strip()
        assert path.endswith('ttyDXL')
        port = dynamixel_sdk.PortHandler(path)
        assert port.openPort() and port.setBaudRate(1_000_000)
        packets = dynamixel_sdk.PacketHandler(2.0)

        def call(fn, *args):
            # A loaded machine can starve the emulator process past a packet timeout: retry.
            for _ in range(20):
                out = fn(port, *args)
                result = out[1] if len(out) == 3 else out[0]
                if result == dynamixel_sdk.COMM_SUCCESS:
                    return out
                time.sleep(0.05)
            raise AssertionError(f'{fn.__name__}{args} failed 20 times, last {packets.getTxRxResult(result)}')

        def present(sid):
            return (call(packets.read4ByteTxRx, sid, 132)[0] - CENTER_TICK) * RAD_PER_TICK

        neck = 31                                     # pitch joint carrying the last two modules
        for sid in range(1, 33):
            call(packets.write1ByteTxRx, sid, 64, 1)
        # Negative pitch lifts the head off the floor (pitch is about the link's y, x tilts toward -z).
        call(packets.write4ByteTxRx, neck, 116, int(round(CENTER_TICK - 0.8 / RAD_PER_TICK)))
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not abs(present(neck) + 0.8) < 0.05:
            time.sleep(0.1)
        assert present(neck) == pytest.approx(-0.8, abs=0.05)
        call(packets.write1ByteTxRx, neck, 64, 0)     # torque off: only gravity and the floor act
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not abs(present(neck)) < 0.2:
            time.sleep(0.1)
        assert abs(present(neck)) < 0.2               # the head fell back onto the floor
    finally:
        if port is not None:
            port.closePort()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_ground_truth_pose_csv(tmp_path, monkeypatch):
    from snake_control.estimation.trajectory_io import read_pose_csv
    from snake_control.kinematics.lie import matrix_from_quaternion

    robot = load_robot('wheeled_8')
    path = tmp_path / 'truth.csv'
    monkeypatch.setenv('SNAKE_PHYSICS_TRUTH', str(path))
    plant = mujoco_plant(robot.servo_ids, {i: robot.bus.servo for i in robot.servo_ids}, robot)
    torque = {i: True for i in robot.servo_ids}
    for k in range(100):
        plant.step(0.01, {i: 0.4 * math.sin(2 * k * 0.01 + i) for i in robot.servo_ids}, torque)
    plant.close()
    t, poses = read_pose_csv(path)
    assert t[0] == 0.0 and t[-1] == pytest.approx(1.0, abs=0.011) and len(t) == pytest.approx(51, abs=1)
    # The estimator's planar body frame: the middle link's centre and heading, in the floor plane.
    x, y, heading = plant.world.planar_pose('middle')
    np.testing.assert_allclose(poses[-1, :3], [x, y, 0.0], atol=1e-8)
    c, s = np.cos(heading), np.sin(heading)
    np.testing.assert_allclose(matrix_from_quaternion(poses[-1, 3:]), [[c, -s, 0], [s, c, 0], [0, 0, 1]],
                               atol=1e-8)


def test_the_plant_hands_on_an_imu_reading_every_10_ms_of_simulated_time():
    robot = load_robot('kinematic_snake_3')
    readings = []
    plant = configured(robot)
    plant.on_imu = lambda t, gyro, accel: readings.append((t, gyro, accel))
    for _ in range(50):
        plant.step(0.004, {}, {})                     # 0.2 s in 4 ms ticks
    times = np.array([r[0] for r in readings])
    assert len(readings) == pytest.approx(20, abs=1)
    assert np.all(np.abs(np.diff(times) - 0.01) <= 0.002 + 1e-9)        # whole 2 ms timesteps
    assert np.linalg.norm(readings[-1][2]) == pytest.approx(9.81, abs=0.3)


def test_a_long_tick_hands_on_every_imu_reading_of_its_span():
    """A host stall makes one tick 80 ms long: the plant still reads the IMU every 10 ms of simulated time
    within it (as a real IMU keeps sampling), each reading over its own 10 ms, not one over the tick."""
    robot = load_robot('kinematic_snake_3')
    readings = []
    plant = configured(robot)
    plant.on_imu = lambda t, gyro, accel: readings.append((t, gyro, accel))
    plant.step(0.004, {}, {})
    before = len(readings)
    plant.step(0.08, {}, {})
    times = np.array([r[0] for r in readings[before - 1:]])
    assert len(readings) - before == 8
    assert np.all(np.abs(np.diff(times) - 0.01) <= 0.002 + 1e-9)


def test_a_stalled_host_leaves_the_imu_still_while_the_world_stood():
    """Ticks cut at MAX_CATCH_UP_S: the world stands still for the rest of each (the driver reads the
    joints standing too), and the IMU must say so. Readings stamped as sim_imu stamps them (the wall clock
    less their simulated age) and integrated each over the interval since the last stamp, as the
    estimator does, give back the IMU link's turn; without a still reading before each cut tick, its first
    reading's rate was turned through the whole stood time as well."""
    from snake_control.dynamixel.conversion import joint_to_servo_rad
    from snake_control.kinematics.lie import so3_exp, so3_log
    from snake_control.physics.servo_plant import MAX_CATCH_UP_S

    robot = load_robot('kinematic_snake_3')
    plant = configured(robot)
    stamped = []
    wall = [0.0]
    world = plant.world
    plant.on_imu = lambda t, gyro, accel: stamped.append((wall[0] - (world.time_s - t), gyro))
    head = robot.joints[-1]

    def tick(dt_s):
        # The head joint swings at about 1 rad/s, so its link turns through every tick.
        goal = joint_to_servo_rad(0.8 * math.sin(1.3 * world.time_s), head.direction, head.offset_rad)
        wall[0] += dt_s
        plant.step(dt_s, {head.servo_id: goal}, {})

    for _ in range(50):
        tick(0.004)
    start, first = world._imu_link_rotation(), len(stamped)
    for k in range(40):
        tick(MAX_CATCH_UP_S + 0.06 if k % 4 == 0 else 0.004)       # a 60 ms stall every fourth tick
    bias = np.asarray(world.options.imu_gyro_bias_rad_s)
    rot = np.eye(3)
    for (t0, _), (t1, gyro) in zip(stamped[first - 1:-1], stamped[first:]):
        assert t1 > t0
        rot = rot @ so3_exp((gyro - bias) * (t1 - t0))
    true_turn = start.T @ world._imu_link_rotation()
    assert np.linalg.norm(so3_log(true_turn)) > 0.3                  # the link did turn
    # 0.5 mrad of the 0.62 rad turn is left (noise); 0.41 rad without the still readings.
    assert np.linalg.norm(so3_log(rot.T @ true_turn)) < 0.005


def test_the_world_imu_is_stamped_in_order_however_slowly_it_is_published(monkeypatch):
    """sim_imu stamps a tick's readings back from where the tick began. A host that takes a few ms per
    publish (and a while per step) must not spread them wider than the 10 ms of simulated time they were
    taken apart, nor stamp the next tick's before them (read per reading, the clock ran on with each
    publish: 13 ms apart and stamps going back)."""
    from snake_control.nodes import sim_imu

    stamps = []

    class SlowPublisher:
        def __init__(self, frame_id, namespace=''):
            pass

        @staticmethod
        def now_ns():
            return time.time_ns()

        @staticmethod
        def ns_at(monotonic_s):
            return time.time_ns() - round((time.monotonic() - monotonic_s) * 1e9)

        def publish(self, sim_time_s, gyro, accel, age_s=0.0, now_ns=None):
            stamps.append(((time.time_ns() if now_ns is None else now_ns) - round(age_s * 1e9)) * 1e-9)
            time.sleep(0.003)

    monkeypatch.setattr(sim_imu, 'ImuPublisher', SlowPublisher)
    robot = load_robot('kinematic_snake_3')
    plant = sim_imu.mujoco_plant(robot.servo_ids, {i: robot.bus.servo for i in robot.servo_ids}, robot)
    last = time.monotonic()
    for k in range(60):                   # stepped as the emulator steps it: by the wall time since the last
        time.sleep(0.002 + 0.02 * (k % 3 == 0))
        now = time.monotonic()
        plant.step(now - last, {}, {})
        last = now
    gaps = np.diff(stamps)
    assert len(stamps) > 20 and np.all(gaps > 0.0)
    # 10 ms of simulated time apart (whole 2 ms timesteps), and the wall time between the emulator's step
    # calls is the simulated time they step; only a tick cut at MAX_CATCH_UP_S (a stall of the test host)
    # leaves a longer gap.
    assert np.mean(np.abs(gaps - 0.01) <= 0.0025) > 0.9, gaps
