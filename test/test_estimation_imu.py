"""The IMU: the complementary filter on SO(3) as pure functions, the MuJoCo world's IMU, and the estimator
fusing it (heading drift under 1 deg/m on the pitch-yaw gaits in MuJoCo)."""
import math

import numpy as np
import pytest

from snake_control.estimation.estimator import Estimator
from snake_control.estimation.imu import (AttitudeFilter, accel_weight, attitude_step, level_from_accel,
                                          up_error_rad)
from snake_control.kinematics.lie import so3_exp, so3_log
from snake_control.physics import PhysicsOptions, SnakeWorld
from snake_control.validation import runs as V

G = 9.80665


def _random_rotation(rng):
    return so3_exp(rng.normal(size=3))


def _angle_between(a, b):
    return math.acos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1.0, 1.0))


def test_up_error_of_a_rolled_imu_turns_it_back():
    # The docstring's worked example: truly rolled by +0.1 rad about x, estimated level.
    truth = so3_exp(np.array([0.1, 0.0, 0.0]))
    accel = G * truth.T @ np.array([0.0, 0.0, 1.0])
    np.testing.assert_allclose(up_error_rad(np.eye(3), accel), [math.sin(0.1), 0.0, 0.0], atol=1e-12)


def test_the_gravity_correction_moves_the_predicted_up_toward_the_measured_one():
    """d v_hat / dt = k (v - cos(angle) v_hat): the derivation in the module docstring, checked by a
    small step from random attitudes."""
    rng = np.random.default_rng(4)
    k, dt = 0.5, 1e-4
    for _ in range(50):
        estimate, truth = _random_rotation(rng), _random_rotation(rng)
        v = truth.T @ np.array([0.0, 0.0, 1.0])
        v_hat = estimate.T @ np.array([0.0, 0.0, 1.0])
        new, _ = attitude_step(estimate, np.zeros(3), np.zeros(3), G * v, dt, k, 0.0)
        rate = (new.T @ np.array([0.0, 0.0, 1.0]) - v_hat) / dt
        np.testing.assert_allclose(rate, k * (v - (v @ v_hat) * v_hat), atol=1e-4)
        assert _angle_between(new[2], v) < _angle_between(v_hat, v) or _angle_between(v_hat, v) < 1e-9


def test_gyro_alone_integrates_the_rotation_exactly():
    rate = np.array([0.3, -0.2, 0.5])
    f = AttitudeFilter()
    for _ in range(100):
        f.update(0.01, rate)                  # no accelerometer: gyro only
    np.testing.assert_allclose(f.rotation, so3_exp(rate * 1.0), atol=1e-12)


def test_tilt_converges_and_tilt_bias_is_learnt_while_moving():
    """A wrong start tilt and a gyro biased on every axis, the IMU turning about up at 0.2 rad/s: gravity
    pulls the tilt in within a few time constants, and the integral learns the bias of the tilt axes."""
    bias = np.array([0.01, -0.02, 0.0])
    f = AttitudeFilter(time_constant_s=1.0, bias_time_constant_s=5.0)
    f.update(1e-9, np.zeros(3), [0.0, 0.0, G])
    f.rotation = so3_exp(np.array([0.2, -0.15, 0.0]))      # 14 degrees off
    truth = np.eye(3)
    omega = np.array([0.0, 0.0, 0.2])
    for _ in range(6000):                                  # 60 s at 100 Hz
        truth = truth @ so3_exp(omega * 0.01)
        f.update(0.01, omega + bias, G * truth.T @ [0.0, 0.0, 1.0])
    assert math.degrees(_angle_between(f.rotation[2], truth[2])) < 0.2
    np.testing.assert_allclose(f.bias[:2], bias[:2], atol=2e-3)


def test_the_bias_is_the_mean_of_the_still_readings():
    rng = np.random.default_rng(1)
    bias = np.array([0.004, -0.003, 0.005])
    f = AttitudeFilter()
    readings = bias + 0.002 * rng.standard_normal((25, 3))
    assert not f.bias_learnt
    for r in readings:
        f.update(0.01, r, [0.0, 0.0, G], still=True)
    np.testing.assert_allclose(f.bias, readings.mean(axis=0), atol=1e-12)
    assert f.bias_learnt
    # Still, the rate less the (learning) bias integrates to a hair: the readings' spread about their mean.
    assert np.linalg.norm(so3_log(f.rotation)) < 5e-4


def test_accelerometer_trust_and_the_level_start():
    assert accel_weight([0.0, 0.0, G], 0.2) == 1.0
    assert accel_weight([0.0, 0.0, 1.3 * G], 0.2) == 0.0
    assert accel_weight([0.0, 0.0, 1.1 * G], 0.2) == pytest.approx(0.5)
    r = level_from_accel([0.0, G, 0.0])
    np.testing.assert_allclose(r @ [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(level_from_accel([0.0, 0.0, -G]) @ [0.0, 0.0, -1.0], [0.0, 0.0, 1.0])


def test_a_reading_in_free_fall_does_not_level_the_filter():
    """The world's first IMU reading came while the robot dropped onto the floor: (0.05, -0.06, 0.04)
    m/s^2. Levelled on it the filter started 37 degrees pitched and 54 rolled, and the heading taken from
    it swung by 15 degrees while gravity pulled it back. The first reading of about g levels it."""
    f = AttitudeFilter()
    f.update(0.01, [0.0, 0.0, 0.0], [0.05, -0.06, 0.04])
    assert not f.initialised
    np.testing.assert_allclose(f.rotation, np.eye(3))
    tilted = [0.0, G * math.sin(0.1), G * math.cos(0.1)]
    f.update(0.01, [0.0, 0.0, 0.0], tilted)
    assert f.initialised
    np.testing.assert_allclose(f.rotation.T @ [0.0, 0.0, 1.0], np.array(tilted) / G, atol=1e-12)


def test_bad_imu_input_is_refused():
    with pytest.raises(ValueError, match='nonzero'):
        up_error_rad(np.eye(3), np.zeros(3))
    with pytest.raises(ValueError, match=r'gyro_rad_s must be \(3,\)'):
        AttitudeFilter().update(0.01, [0.0, 0.0])
    with pytest.raises(ValueError, match='accel_m_s2'):
        AttitudeFilter().update(0.01, np.zeros(3), [np.nan, 0.0, 9.8])
    with pytest.raises(ValueError, match='dt_s'):
        attitude_step(np.eye(3), np.zeros(3), np.zeros(3), None, 0.0, 1.0, 0.1)
    with pytest.raises(ValueError, match='time_constant_s'):
        AttitudeFilter(time_constant_s=0.0)
    with pytest.raises(ValueError, match='gyro_rad_s'):
        Estimator('pitch_yaw_32').update_imu(0.0, [1.0, np.inf, 0.0])
    with pytest.raises(ValueError, match='imu_link'):
        SnakeWorld('kinematic_snake_3', options=PhysicsOptions(imu_link=5))
    with pytest.raises(ValueError, match='imu_gyro_bias_rad_s'):
        PhysicsOptions(imu_gyro_bias_rad_s=(0.0, 0.0)).validate()


# --- the MuJoCo world's IMU ---------------------------------------------------------------------------

def test_world_imu_at_rest_reads_gravity_up_and_the_bias():
    options = PhysicsOptions(imu_gyro_noise_rad_s=0.0, imu_accel_noise_m_s2=0.0)
    world = SnakeWorld('pitch_yaw_32', options=options)
    world.run(0.6)
    world.imu_reading()
    world.run(0.2)
    gyro, accel = world.imu_reading()
    np.testing.assert_allclose(gyro, options.imu_gyro_bias_rad_s, atol=2e-3)
    up = world.link_pose(world.imu_link)[:3, :3].T @ [0.0, 0.0, 1.0]      # world up in the IMU frame
    np.testing.assert_allclose(accel - np.array(options.imu_accel_bias_m_s2), G * up, atol=0.05)
    assert world.imu_link == 32                                             # the head by default


def test_world_gyro_integrates_back_to_the_link_pose_while_rolling():
    """The delta-angle gyro, integrated, follows the world's own pose of the IMU link (MuJoCo's mean
    body rate drifts from it by about 0.1 deg/s while rolling, see SnakeWorld.imu_reading)."""
    robot = V.load_robot('pitch_yaw_32')
    case = next(c for c in V.CASES if c.gait == 'rolling')
    options = PhysicsOptions(imu_gyro_noise_rad_s=0.0, imu_gyro_bias_rad_s=(0.0, 0.0, 0.0))
    rec = V.simulate(SnakeWorld(robot, options=options), V.gait_goal_fn(robot, case.gait, case.command, case.params),
                     3.0, warmup_s=2.0)
    rot = rec.link_poses[0, rec.imu_link, :3, :3]
    for k in range(1, len(rec.times_s)):
        rot = rot @ so3_exp(rec.gyro_rad_s[k] * 0.01)
    assert np.abs(rec.gyro_rad_s[:, 0]).mean() > 1.0                     # it does roll
    # One physics step of lag (2 ms at up to 4 rad/s) is all that separates them.
    assert math.degrees(np.linalg.norm(so3_log(rot.T @ rec.link_poses[-1, rec.imu_link, :3, :3]))) < 1.0
    yaw_err = so3_log(rot @ rec.link_poses[-1, rec.imu_link, :3, :3].T)[2]
    assert abs(math.degrees(yaw_err)) < 0.05


# --- the estimator with the IMU ------------------------------------------------------------------------

def test_the_bias_is_learnt_only_while_the_joints_are_still():
    est = Estimator('pitch_yaw_32', imu_link=32)
    q = np.zeros(32)
    bias = np.array([0.0, 0.0, 0.01])
    for k in range(80):            # STILL_MIN_S and the rest's tail, STILL_TAIL_S
        t = 0.01 * k
        est.update_imu(t, bias, [0.0, 0.0, G])
        est.update(t, q)
    np.testing.assert_allclose(est.imu.bias, bias, atol=1e-9)
    for k in range(80, 140):       # joints moving: a gyro reading of 0.02 rad/s is a real turn
        t = 0.01 * k
        est.update(t, q + 0.1 * math.sin(t))     # (stillness is judged at the last joint update)
        est.update_imu(t + 0.005, bias + [0.0, 0.0, 0.02], [0.0, 0.0, G])
    np.testing.assert_allclose(est.imu.bias, bias, atol=1e-9)


def test_the_bias_is_the_mean_of_a_rest_of_the_joints_never_of_the_gyro_alone():
    """Readings before any joint update teach nothing; then the joints rest (judged against where they
    stopped) and the bias is nothing until the rest has lasted STILL_MIN_S beyond its last STILL_TAIL_S,
    then the mean of its readings before that tail; a joint that moves by two encoder ticks starts the rest
    again. (The filter's gravity term learns a
    hair of tilt-axis bias meanwhile, under 3e-4 rad/s; the yaw bias comes from rests alone.)"""
    rng = np.random.default_rng(3)
    est = Estimator('pitch_yaw_32', imu_link=32)
    bias = np.array([0.004, -0.003, 0.005])
    tick = 2.0 * math.pi / 4096
    for k in range(100):                         # the gyro and accelerometer alone look still
        est.update_imu(0.01 * k, bias + 0.002 * rng.standard_normal(3), [0.0, 0.0, G])
    assert est.imu.bias[2] == 0.0 and np.linalg.norm(est.imu.bias) < 3e-4
    q = np.zeros(32)
    window = []
    for k in range(100, 190):
        t = 0.01 * k
        reading = bias + 0.002 * rng.standard_normal(3)
        est.update_imu(t, reading, [0.0, 0.0, G])
        est.update(t, q + np.eye(32)[5] * tick * (k // 3 % 2))     # one servo flickering by a tick
        if k > 100:
            window.append((t, reading))
        if est.imu.bias[2] != 0.0:
            break
        assert np.linalg.norm(est.imu.bias) < 3e-4      # not one reading
    assert t - 1.0 == pytest.approx(est.STILL_MIN_S + est.STILL_TAIL_S, abs=0.0101)
    # Its first STILL_MIN_S: the tail after it waits for the rest to go on.
    first = [r for tk, r in window if tk <= 1.0 + est.STILL_MIN_S + 1e-9]
    np.testing.assert_allclose(est.imu.bias, np.mean(first, axis=0), atol=1e-12)
    learnt = est.imu.bias.copy()
    q = q + 2 * tick * np.eye(32)[7]                                   # a move: the rest starts again
    for k in range(190, 230):
        t = 0.01 * k
        est.update_imu(t, bias + [0.0, 0.0, 0.02], [0.0, 0.0, G])
        est.update(t, q)
    assert est.imu.bias[2] == learnt[2]
    np.testing.assert_allclose(est.imu.bias, learnt, atol=3e-4)


@pytest.fixture(scope='module')
def serpentine():
    robot = V.load_robot('pitch_yaw_32')
    case = next(c for c in V.CASES if c.gait == 'serpentine')
    rec = V.simulate(SnakeWorld(robot), V.gait_goal_fn(robot, case.gait, case.command, case.params), 8.0,
                     warmup_s=V.WARMUP_S)
    return rec, case


def test_the_imu_holds_the_heading_that_a_miscalibrated_joint_loses(serpentine):
    """Eight yaw servos read 0.05 rad off (a calibration error): the joints alone see a curved body and
    turn the estimate by tens of degrees; the fused gyro keeps the heading within a degree."""
    import dataclasses
    rec, case = serpentine
    yaw = np.flatnonzero([a == 'yaw' for a in rec.robot.axes])[:8]
    q = rec.positions_rad.copy()
    q[:, yaw] += 0.05
    broken = dataclasses.replace(rec, positions_rad=q)
    off = V.evaluate(broken, case.gait, imu='off', **V.case_estimator_options(case))
    on = V.evaluate(broken, case.gait, imu='sensor', **V.case_estimator_options(case))
    assert on.imu == 'sensor' and off.imu == 'off'
    assert abs(off.heading_error_deg) > 10.0
    assert on.heading_error_deg_per_m < 1.0
    # What is left is the distance the bent joints misread (8.5 % against 23.5 % without the gyro).
    assert on.position_error_pct < off.position_error_pct / 2


def test_lost_imu_messages_do_not_throw_the_estimate(serpentine):
    """40 % of the IMU readings lost (as in the loaded graph): each joint update carries the last attitude
    on at the last rate to its own stamp, and the few runs of lost readings longer than imu_gap_s are
    bridged with the contacts, so the estimate stays with the one that got every reading."""
    rec, case = serpentine
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    keep = np.random.default_rng(1).random(len(rec.times_s)) > 0.4

    def final_error_m(mask):
        est = Estimator(rec.robot, initial_pose=truth[0], imu_link=rec.imu_link, **V.case_estimator_options(case))
        V.feed_rest(est, rec)            # the settling: the gyro bias is learnt there
        for k, t in enumerate(rec.times_s):
            if mask[k]:
                est.update_imu(t, rec.gyro_rad_s[k], rec.accel_m_s2[k])
            est.update(t, rec.positions_rad[k])
        return float(np.linalg.norm(est.pose[:2, 3] - truth[-1, :2, 3]))

    every, lossy = final_error_m(np.ones_like(keep)), final_error_m(keep)
    assert lossy < every + 0.05, (every, lossy)      # 3.9 cm against 1.5 cm over 2.7 m (0.5 m held)


def test_a_driver_repeating_stale_readings_does_not_move_the_estimate_sideways(serpentine):
    """Half the joint_states repeat the last reading exactly for 1-5 cycles (a driver holding stale servo
    reads, as in the loaded graph) while every IMU reading arrives: the frozen shape would pivot about its
    contacts as the IMU turns the chassis (15 % of distance off); the estimator waits for a fresh reading
    instead and stays with the estimate from fresh readings."""
    rec, case = serpentine
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    stale = rec.positions_rad.copy()
    rng = np.random.default_rng(7)
    k = 1
    while k < len(stale):
        if rng.random() < 0.5:
            m = int(rng.integers(1, 6))
            stale[k:k + m] = stale[k - 1]
            k += m
        k += 1

    def run(positions):
        est = Estimator(rec.robot, initial_pose=truth[0], imu_link=rec.imu_link, **V.case_estimator_options(case))
        V.feed_rest(est, rec)            # the settling: the gyro bias is learnt there
        for k, t in enumerate(rec.times_s):
            est.update_imu(t, rec.gyro_rad_s[k], rec.accel_m_s2[k])
            est.update(t, positions[k])
        return est

    fresh, held = run(rec.positions_rad), run(stale)
    assert held.stale_held > len(stale) / 4
    assert np.linalg.norm(held.pose[:2, 3] - fresh.pose[:2, 3]) < 0.05


def test_joints_lagging_their_stamps_are_pulled_by_the_imu_not_overruled(serpentine):
    """Joint vectors that lag their stamps by 0-70 ms (an emulated bus answering with the plant's last
    tick under load) while the IMU is on time: the IMU attitude taken as it is turns the chassis by the
    head's swing each message and the contacts pivot (14 % of distance off); with imu_attitude_s the contacts
    turn the chassis and the IMU pulls it, and the estimate stays close."""
    rec, case = serpentine
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    rng = np.random.default_rng(5)
    lagged = np.maximum.accumulate(np.arange(len(rec.times_s)) - rng.integers(0, 8, len(rec.times_s)))
    positions = rec.positions_rad[np.maximum(lagged, 0)]

    def error_m(attitude_s):
        est = Estimator(rec.robot, initial_pose=truth[0], imu_link=rec.imu_link, imu_attitude_s=attitude_s,
                        **V.case_estimator_options(case))
        V.feed_rest(est, rec)            # the settling: the gyro bias is learnt there
        for k, t in enumerate(rec.times_s):
            est.update_imu(t, rec.gyro_rad_s[k], rec.accel_m_s2[k])
            est.update(t, positions[k])
        return float(np.linalg.norm(est.pose[:2, 3] - truth[-1, :2, 3]))

    taken, pulled = error_m(0.0), error_m(1.0)
    assert pulled < taken / 3, (taken, pulled)
    with pytest.raises(ValueError, match='imu_attitude_s'):
        Estimator(rec.robot, imu_attitude_s=-1.0)


def test_without_imu_readings_the_estimate_is_unchanged(serpentine):
    rec, case = serpentine
    a = V.evaluate(rec, case.gait, **V.case_estimator_options(case))
    b = V.evaluate(rec, case.gait, imu='off', **V.case_estimator_options(case))
    np.testing.assert_array_equal(a.estimated_xy_m, b.estimated_xy_m)
    with pytest.raises(ValueError, match='imu must be one of'):
        V.evaluate(rec, case.gait, imu='magnetometer')


@pytest.mark.slow
@pytest.mark.parametrize('gait', ['serpentine', 'sidewinding', 'aeh_sidewinding', 'rolling'])
def test_heading_drift_with_the_imu_is_under_a_degree_per_metre(gait):
    """Issue 14's acceptance for the IMU, in MuJoCo: the validation runs (20 s), the world's IMU in the
    head with its noise and bias, the bias learnt during the settling."""
    case = next(c for c in V.CASES if c.robot == 'pitch_yaw_32' and c.gait == gait)
    off, on = V.run_case_imu(case, 20.0)
    print(V.format_table([off, on]))
    assert on.distance_m > 1.0
    assert on.heading_error_deg_per_m < 1.0


# --- in the graph: the world's IMU on `imu` ------------------------------------------------------------

@pytest.mark.ros
def test_the_emulated_bus_publishes_the_world_imu_on_imu():
    """`--physics mujoco` (the graph's world) publishes the IMU of its head at 100 Hz, stamped with the
    ROS clock like joint_states, without an orientation; at rest it reads gravity up."""
    pytest.importorskip('rclpy')
    from sensor_msgs.msg import Imu

    from rosutil import RosHarness, wait_until
    from snake_control.app.sim_bus import sim_bus_args
    from snake_control.dynamixel.simproc import SimBusProcess
    from snake_control.nodes.qos import SENSOR_QOS

    ros = RosHarness()
    try:
        got = ros.record(Imu, 'imu', SENSOR_QOS)
        with SimBusProcess(sim_bus_args('kinematic_snake_3', 1000000, 'mujoco')):
            assert wait_until(lambda: len(got) >= 120, timeout_s=30.0), f'{len(got)} imu messages'
            now = ros.probe.get_clock().now().nanoseconds * 1e-9
        msgs = [m for _, m in got]
        stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in msgs])
        assert abs(stamps[-1] - now) < 1.0                      # the ROS clock, as joint_states are
        rate = (len(stamps) - 21) / (stamps[-1] - stamps[20])
        assert 50.0 < rate < 150.0, rate                        # 100 Hz of simulated time, about real time
        last = msgs[-1]
        assert last.header.frame_id == 'link_2' and last.orientation_covariance[0] == -1.0
        accel = np.array([last.linear_acceleration.x, last.linear_acceleration.y, last.linear_acceleration.z])
        assert np.linalg.norm(accel) == pytest.approx(G, abs=0.3)
        assert last.angular_velocity_covariance[0] > 0.0
    finally:
        ros.close()


def test_joints_starting_to_move_within_the_still_band_are_not_learnt_as_bias():
    """As at the demo's power-up: a rest of a second, then the gait blends in and the joints move, for 0.2 s
    less than STILL_JOINT_RAD from where they stopped, while the body already turns at 0.04 rad/s (under
    the 0.05 the gyro alone calls quiet). That turn is the rest's tail, not bias (learnt, the bias was
    0.013 rad/s off)."""
    est = Estimator('pitch_yaw_32', imu_link=32)
    bias = np.array([0.004, -0.003, 0.005])
    tick = 2.0 * math.pi / 4096
    q = np.zeros(32)
    for k in range(100):                         # at rest, one servo flickering by a tick
        t = 0.01 * k
        est.update(t, q + np.eye(32)[5] * tick * (k // 3 % 2))
        est.update_imu(t + 0.005, bias, [0.0, 0.0, G])
    # (The filter's gravity term learns a hair of tilt-axis bias too, under 1e-4 rad/s.)
    np.testing.assert_allclose(est.imu.bias, bias, atol=1e-4)
    learnt = est.imu.bias.copy()
    for k in range(100, 120):                    # starting to move: within the still band, turning
        t = 0.01 * k
        est.update(t, q + 0.0001 * (k - 99))
        est.update_imu(t + 0.005, bias + [0.0, 0.0, 0.04], [0.0, 0.0, G])
    for k in range(120, 160):                    # moving
        t = 0.01 * k
        est.update(t, q + 0.01 * (k - 99))
        est.update_imu(t + 0.005, bias + [0.0, 0.0, 0.3], [0.0, 0.0, G])
    assert est.imu.bias[2] == pytest.approx(learnt[2], abs=1e-4)


def test_a_slow_turn_before_the_joints_is_not_kept_as_the_bias():
    """As in the demo's pitch_yaw_32 run: the body still settles at 0.03 rad/s about up (below the 0.05 rad/s
    the gyro alone calls quiet) when the IMU starts, before any joint update; then it rests for a second and
    a half, the joints reading still but for one servo's one-tick (1.5 mrad) flicker. The bias must be the
    gyro's own by the end of the rest, not the settling turn (held through a gait it turns the heading by
    1.7 deg/s)."""
    est = Estimator('pitch_yaw_32', imu_link=32)
    bias = np.array([0.004, -0.003, 0.005])
    tick = 2.0 * math.pi / 4096
    for k in range(40):                          # settling, no joint update yet
        est.update_imu(0.01 * k, bias + [0.0, 0.0, 0.03], [0.0, 0.0, G])
    q = np.zeros(32)
    for k in range(40, 190):                     # at rest, joints at 100 Hz, one of them flickering
        t = 0.01 * k
        est.update(t, q + np.eye(32)[5] * tick * (k // 3 % 2))
        est.update_imu(t + 0.005, bias, [0.0, 0.0, G])
    np.testing.assert_allclose(est.imu.bias, bias, atol=2e-3)


# --- planar robots: the heading from the gyro ------------------------------------------------------------

def _wheeled_gyro_run(shape_fn, turn_rate_fn, bias, seconds, use_imu=True):
    """wheeled_8 with its IMU in the head: joint angles shape_fn(t), and a gyro reading the head's turn
    as the no-slip connection has it (a second estimator without the IMU) plus turn_rate_fn(t), a turn
    of the whole body the connection cannot see (wheels skidding), plus the bias. Returns the estimator
    with the IMU and the connection-only heading of the integrated link at the end."""
    from snake_control.physics.mjcf import imu_link_index
    from snake_control.robot import load_robot
    robot = load_robot('wheeled_8')
    head = imu_link_index(robot)
    est = Estimator(robot, imu_link=head)
    plain = Estimator(robot)
    k = plain._int_link
    dt = 0.01
    skid = 0.0
    last = None
    for i in range(int(round(seconds / dt)) + 1):
        t = i * dt
        q = shape_fn(t)
        s = plain.update(t, q)
        head_heading = math.atan2(s.pose[1, 0], s.pose[0, 0]) + float(np.sum(q[k:head])) + skid
        if last is not None:
            rate = math.remainder(head_heading - last, math.tau) / dt
            if use_imu:
                est.update_imu(t, np.array([0.0, 0.0, rate]) + bias, [0.0, 0.0, G])
        last = head_heading
        est.update(t, q)
        skid += turn_rate_fn(t) * dt
    return est, math.atan2(s.pose[1, 0], s.pose[0, 0])


def test_a_wheeled_robot_takes_its_heading_from_the_gyro_when_its_wheels_skid():
    """After a rest (which gives the gyro's bias), the body turns on the spot at 0.3 rad/s for 2 s with its
    joints held (wheels skidding): the connection sees no turn, the gyro sees 0.6 rad, and the estimate
    turns with the gyro."""
    bent = 0.3 * np.sin(np.arange(7))
    bias = np.array([0.002, -0.001, 0.005])
    est, plain_heading = _wheeled_gyro_run(lambda t: bent, lambda t: 0.3 if t >= 1.0 else 0.0, bias, 3.0)
    heading = math.atan2(est.pose[1, 0], est.pose[0, 0])
    assert abs(plain_heading) < 1e-9
    assert heading == pytest.approx(0.6, abs=0.02)
    np.testing.assert_allclose(est.pose[:2, 3], 0.0, atol=1e-9)     # the connection's translation: none


def wave_after_a_rest(t):
    return 0.5 * np.sin(2 * math.pi * 0.5 * t - 0.9 * np.arange(7)) * min(1.0, max(0.0, t - 1.0)) + 0.1


def test_a_wheeled_robot_follows_its_gait_with_the_gyro_as_with_the_connection():
    """No skid: a gait whose turns the connection sees in full gives the same estimate with the gyro."""
    bias = np.array([0.002, -0.001, 0.005])
    est, plain_heading = _wheeled_gyro_run(wave_after_a_rest, lambda t: 0.0, bias, 7.0)
    heading = math.atan2(est.pose[1, 0], est.pose[0, 0])
    assert est.imu.bias_learnt and abs(plain_heading) > 0.2          # the gait turns the body
    assert heading == pytest.approx(plain_heading, abs=0.01)


def test_a_wheeled_robot_ignores_a_gyro_whose_bias_no_rest_has_given():
    """Moving from the first reading (no rest, so no bias), the gyro's 0.005 rad/s bias would turn the
    heading by 1.7 degrees in 6 s: the estimate stays the connection's until a rest."""
    def wave(t):
        return 0.5 * np.sin(2 * math.pi * 0.5 * t - 0.9 * np.arange(7)) * min(1.0, t) + 0.1
    est, plain_heading = _wheeled_gyro_run(wave, lambda t: 0.0, np.array([0.0, 0.0, 0.005]), 6.0)
    assert not est.imu.bias_learnt
    assert math.atan2(est.pose[1, 0], est.pose[0, 0]) == pytest.approx(plain_heading, abs=1e-9)


def test_a_wheeled_robots_joints_creeping_at_rest_are_not_learnt_as_gyro_bias():
    """Servos holding a pose settle by a tick or so: the head turns a little with the joints while every
    joint stays within STILL_JOINT_RAD. That turn is predicted from the joints, so the bias learnt over
    the rest is the gyro's own (not the gyro's plus the creep, 2 mrad/s here)."""
    bent = 0.3 * np.sin(np.arange(7))
    creep = np.zeros(7)
    creep[-1] = 1.0
    bias = np.array([0.001, -0.002, 0.004])
    est, _ = _wheeled_gyro_run(lambda t: bent + 0.002 * min(t, 1.2) * creep, lambda t: 0.0, bias, 1.2)
    assert est.imu.bias[2] == pytest.approx(bias[2], abs=2e-4)


@pytest.mark.parametrize('robot_name', ['wheeled_8', 'pitch_yaw_32'])
def test_a_joint_update_after_a_clock_step_before_any_imu_reading_bridges(robot_name):
    """rebase_time (the stamps went back: estimator_node's input gate re-anchored) forgets the IMU's last
    stamp; joint_states come before the next IMU reading. They are bridged with the joints and contacts
    (a wheeled robot's update used to raise TypeError there and stop estimator_node), and the readings in
    the new time base are used again."""
    from snake_control.robot import load_robot

    robot = load_robot(robot_name)
    est = Estimator(robot)
    q = 0.1 * np.sin(np.arange(robot.n_joints))
    for k in range(80):                 # at rest: the bias is learnt
        est.update_imu(100.0 + 0.01 * k, [0.0, 0.0, 0.002], [0.0, 0.0, G])
        est.update(100.0 + 0.01 * k + 0.001, q)
    est.rebase_time(90.0)
    bridged, updates = est.imu_bridged, est.updates
    est.update(90.01, q + 0.001)
    assert est.imu_bridged == bridged + 1 and est.updates == updates + 1
    # The first reading in the new time base: a pitch-yaw robot anchors the filter to the joints' attitude
    # at the next update (bridged once more), then both take the IMU's.
    est.update_imu(90.015, [0.0, 0.0, 0.002], [0.0, 0.0, G])
    est.update(90.02, q + 0.002)
    est.update_imu(90.025, [0.0, 0.0, 0.002], [0.0, 0.0, G])
    after = est.imu_bridged
    est.update(90.03, q + 0.003)
    assert after <= bridged + 2 and est.imu_bridged == after and est.updates == updates + 3


def _rolled_links(roll_deg):
    """pitch_yaw_32 in a 3D shape with its tail rolled roll_deg about its axis: (robot, q, link poses)."""
    from snake_control.estimation.contact import chain_poses
    from snake_control.kinematics.lie import se3_matrix
    from snake_control.robot import load_robot

    robot = load_robot('pitch_yaw_32')
    k = np.arange(robot.n_joints)
    q = np.where(k % 2 == 0, 0.15 * np.sin(0.4 * k), 0.7 * np.sin(0.5 * k))
    rot_t, cen_t = chain_poses(q, np.asarray(robot.axis_vectors, float), np.asarray(robot.link_lengths_m, float))
    tail = se3_matrix(so3_exp(np.array([math.radians(roll_deg), 0.2, 0.3])), np.array([1.0, -2.0, 0.05]))
    return robot, q, np.array([tail @ se3_matrix(r, c) for r, c in zip(rot_t, cen_t)])


@pytest.mark.parametrize('roll_deg', [0.0, 150.0, -120.0])
def test_a_given_chassis_pose_is_taken_in_the_convention_it_was_made_in(roll_deg):
    """A virtual chassis's y and z have no sign of their own: body_pose_from_links takes the tail's z for
    up. A pose it made, given with an IMU (whose gravity would pick the other sign when the tail is rolled
    over), must still put every link where it is, not the body upside down in odom (the IMU's filter then
    spent seconds pulling the wrong tilt: AEH-sidewinding 127 deg off)."""
    from snake_control.estimation.estimator import body_pose_from_links
    from snake_control.kinematics.lie import quaternion_from_matrix

    robot, q, links = _rolled_links(roll_deg)
    est = Estimator(robot, initial_pose=body_pose_from_links(robot, links))
    est.update(0.0, q, imu_orientation_xyzw=quaternion_from_matrix(links[est.imu_link, :3, :3]))
    np.testing.assert_allclose(est.root_pose(), links[0], atol=1e-6)


def test_a_reanchored_shape_continues_the_estimators_own_chassis_signs():
    """reanchor() keeps the estimator's own pose, in its own chassis frame: the next shape's axes continue
    that frame's signs (here gravity's, the tail rolled over), so the links stay where they were."""
    from snake_control.kinematics.lie import quaternion_from_matrix

    robot, q, links = _rolled_links(150.0)
    quat = quaternion_from_matrix(links[0, :3, :3])
    est = Estimator(robot, imu_link=0)
    est.update(0.0, q, imu_orientation_xyzw=quat)
    before = est.root_pose().copy()
    est.reanchor()
    est.update(0.01, q, imu_orientation_xyzw=quat)
    np.testing.assert_allclose(est.root_pose(), before, atol=1e-6)
