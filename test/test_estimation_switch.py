"""Gait switches (issue 14 item 4): the heading through a blend from serpentine into AEH-sidewinding in
MuJoCo, measured against the truth.

The blend turns a flat body into a 3D tread in 1.5 s. Without the IMU the ground-plane attitude is lost
on the way (the hull of module centres is a biased floor while the body rests on the ends of tilted
modules: the roll error reaches 90 degrees, the heading 35), which is the ~70 degree jump the issue
reported from the graph. With the IMU the attitude comes from gravity and the gyro, and the contacts
only give the translation. The graph lets the contacts turn the chassis and the IMU pull it
(imu_attitude_s); there the contacts are too few in the blend to turn it, and the IMU's turn does.
"""
import math

import numpy as np
import pytest

from snake_control.app.graph import GRAPH_IMU_ATTITUDE_S
from snake_control.estimation.contact import shape_turn
from snake_control.estimation.estimator import Estimator
from snake_control.kinematics.lie import se2_relative, so3_exp, so3_log, xyyaw_from_se3
from snake_control.physics import SnakeWorld
from snake_control.physics.mjcf import matching_axial_weight
from snake_control.robot import load_robot
from snake_control.validation import runs as V

SWITCH_S = 4.0          # into the recording (after the 3 s warm-up of serpentine)


@pytest.fixture(scope='module')
def blend():
    robot = load_robot('pitch_yaw_32')
    goal = V.gait_goal_fn(robot, 'serpentine', (0.25, 0.0, 0.0),
                          switches=[(V.WARMUP_S + SWITCH_S, 'aeh_sidewinding', (0.0, 0.15, 0.0), None)])
    return V.simulate(SnakeWorld(robot), goal, 10.0, warmup_s=V.WARMUP_S)


def heading_errors_deg(rec, imu: bool, imu_attitude_s: float = 0.0) -> np.ndarray:
    """(T,) the estimate's heading error about the vertical (deg): the z part of the rotation error
    log(R_est R_true^T) of the virtual chassis, defined however the chassis is tilted."""
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    est = Estimator(rec.robot, initial_pose=truth[0], axial_weight=matching_axial_weight(), imu_link=rec.imu_link,
                    imu_attitude_s=imu_attitude_s)
    if imu:
        V.feed_rest(est, rec)            # the settling: the gyro bias is learnt there
    out = np.empty(len(rec.times_s))
    for k, t in enumerate(rec.times_s):
        if imu:
            est.update_imu(t, rec.gyro_rad_s[k], rec.accel_m_s2[k])
        pose = est.update(t, rec.positions_rad[k]).pose
        out[k] = math.degrees(so3_log(pose[:3, :3] @ truth[k, :3, :3].T)[2])
    return out


@pytest.mark.slow
def test_no_heading_jump_through_a_blend_with_the_imu(blend):
    err = heading_errors_deg(blend, imu=True)
    during = (blend.times_s > SWITCH_S - 0.5) & (blend.times_s < SWITCH_S + 2.5)
    print(f'with the IMU: max |heading error| {np.abs(err).max():.2f} deg, through the blend '
          f'{np.abs(err[during]).max():.2f}, largest step {np.abs(np.diff(err)).max():.2f}')
    assert np.abs(err).max() < 1.0
    assert np.abs(np.diff(err)).max() < 0.5
    # The blend did happen: the body's shape changed from flat to a tread (modules lifted off the floor).
    assert blend.contacts[blend.times_s < SWITCH_S].mean() > 0.9 > blend.contacts[-100:].mean()


@pytest.mark.slow
def test_no_heading_jump_through_a_blend_with_the_graphs_imu_pull(blend):
    """The graph's fusion (imu_attitude_s, GRAPH_IMU_ATTITUDE_S): the contacts turn the chassis and the IMU
    pulls it. In the blend the contacts fall to a few modules and the hull's face flips: they would turn
    the heading by 14 degrees before the pull drew it back. With weak contacts the chassis turns as the
    IMU did."""
    err = heading_errors_deg(blend, imu=True, imu_attitude_s=GRAPH_IMU_ATTITUDE_S)
    print(f'with the graph IMU pull: max |heading error| {np.abs(err).max():.2f} deg, largest step '
          f'{np.abs(np.diff(err)).max():.2f}')
    assert np.abs(err).max() < 3.0


@pytest.fixture(scope='module')
def blend_into_a_tread_turning_its_axes():
    """The same blend into AEH-sidewinding with psi0 = 1.2: the tread's second and third principal moments
    come near-equal, and the virtual chassis turns upside down within 0.3 s while the body stays upright."""
    robot = load_robot('pitch_yaw_32')
    goal = V.gait_goal_fn(robot, 'serpentine', (0.25, 0.0, 0.0),
                          switches=[(V.WARMUP_S + SWITCH_S, 'aeh_sidewinding', (0.0, 0.15, 0.0), {'psi0': 1.2})])
    return V.simulate(SnakeWorld(robot), goal, 10.0, warmup_s=V.WARMUP_S)


@pytest.mark.slow
def test_no_heading_jump_when_the_chassis_axes_turn_over_in_the_blend(blend_into_a_tread_turning_its_axes):
    """With the graph's IMU pull. The chassis the IMU gives passed through 45-135 degrees of tilt only
    because its axes turned with the shape; taken for a body rolling over, that left the weak contacts
    alone to turn it: a 22 degree heading jump. The body itself is judged now (Estimator._rolling_over)."""
    rec = blend_into_a_tread_turning_its_axes
    truth = V.true_body_poses(rec.robot, rec.link_poses)
    tilt_deg = np.degrees(np.arccos(np.clip(truth[:, 2, 2], -1.0, 1.0)))
    # The chassis did turn over, and the body under it did not: the modules' own best-fit turn over the
    # flip keeps the vertical within a few degrees.
    flip = np.flatnonzero(tilt_deg > 45.0)[0]
    assert tilt_deg[-1] > 150.0
    body = rec.link_poses[:, :, :3, 3]
    turn = shape_turn(body[flip - 5], body[flip + 10])
    assert tilt_deg[flip + 10] > 60.0 and math.degrees(math.acos(turn[2, 2])) < 10.0
    err = heading_errors_deg(rec, imu=True, imu_attitude_s=GRAPH_IMU_ATTITUDE_S)
    print(f'chassis axes turning over: max |heading error| {np.abs(err).max():.2f} deg')
    assert np.abs(err).max() < 3.0


def test_shape_turn_is_the_best_fit_rotation_of_the_module_centres():
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(33, 3))
    turn = so3_exp(np.array([0.3, -1.2, 2.0]))
    assert np.allclose(shape_turn(centres, centres @ turn.T + [1.0, 2.0, 3.0]), turn, atol=1e-12)
    # A mirror image is not a rotation: the best proper one is returned.
    mirrored = centres * [1.0, 1.0, -1.0]
    assert np.linalg.det(shape_turn(centres, mirrored)) > 0.0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason='without an IMU the ground-plane attitude is lost in the blend '
                                       '(issue 14 item 4, left open)')
def test_no_heading_jump_through_a_blend_without_the_imu(blend):
    err = heading_errors_deg(blend, imu=False)
    print(f'without the IMU: max |heading error| {np.abs(err).max():.2f} deg')
    assert np.abs(err).max() < 5.0


@pytest.fixture(scope='module')
def roll_over():
    """AEH-sidewinding at rest blended into rolling: the body rolls over (its chassis turns upside down).
    Rolling's arc as seed 004 has it (A1 = 1 / (12 l), psi0 = 0, no taper), the blend this was measured on."""
    robot = load_robot('pitch_yaw_32')
    arc = {'A1': 1.0 / (12 * robot.link_length_m), 'psi0': 0.0, 'kappa_taper': 0.0}
    goal = V.gait_goal_fn(robot, 'aeh_sidewinding', switches=[(V.WARMUP_S + 2.0, 'rolling', None, arc)])
    return V.simulate(SnakeWorld(robot), goal, 7.0, warmup_s=V.WARMUP_S)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason='the body tumbles in this blend: its contacts slide at 0.3-0.9 m/s for '
                                       '0.2-0.6 s, which no-slip contacts cannot see (issue 14 item 4, left open)')
def test_a_body_rolling_over_in_a_blend_is_left_to_its_contacts(roll_over):
    """With the graph's IMU pull, the IMU's turn is not imposed on a body rolling over (Estimator._rolling_over):
    in the graph's recordings of the demo its few contacts then carried the travel sideways (the blend into
    rolling 0.52-0.59 m off with it, 0.05-0.08 m without). Here, in MuJoCo directly, the body falls over its
    edge and slides: the truth's contact points move 0.3-0.9 m/s for 0.2-0.6 s. Over 12 such blends (psi0
    0-1.3, from rest and from moving) the end error was 0.02-0.35 m with the chassis-tilt rule and 0.05-0.36 m
    with the body's own turn; this one gave 0.023 m with the chassis-tilt rule, 0.053 m now."""
    truth = V.true_body_poses(roll_over.robot, roll_over.link_poses)
    est = Estimator(roll_over.robot, initial_pose=truth[0], axial_weight=matching_axial_weight(),
                    imu_link=roll_over.imu_link, imu_attitude_s=GRAPH_IMU_ATTITUDE_S)
    for k, (gyro, accel) in enumerate(zip(roll_over.still_gyro_rad_s, roll_over.still_accel_m_s2)):
        est.update_imu((k - len(roll_over.still_gyro_rad_s)) * 0.01, gyro, accel)
    for k, t in enumerate(roll_over.times_s):
        est.update_imu(t, roll_over.gyro_rad_s[k], roll_over.accel_m_s2[k])
        est.update(t, roll_over.positions_rad[k])
    error_m = float(np.linalg.norm(est.pose[:2, 3] - truth[-1, :2, 3]))
    print(f'rolling over: end position error {error_m:.3f} m')
    assert np.degrees(np.arccos(np.clip(truth[:, 2, 2], -1.0, 1.0))).max() > 150.0     # it did roll over
    assert error_m < 0.035


def _graph_estimate(rec, truth, **options):
    """(T, 4, 4) the estimate with the graph's fusion (the IMU pulling, GRAPH_IMU_ATTITUDE_S) after the rest."""
    est = Estimator(rec.robot, initial_pose=truth[0], axial_weight=matching_axial_weight(), imu_link=rec.imu_link,
                    imu_attitude_s=GRAPH_IMU_ATTITUDE_S, **options)
    V.feed_rest(est, rec)
    poses = np.empty((len(rec.times_s), 4, 4))
    for k, t in enumerate(rec.times_s):
        est.update_imu(t, rec.gyro_rad_s[k], rec.accel_m_s2[k])
        poses[k] = est.update(t, rec.positions_rad[k]).pose
    return poses


@pytest.mark.slow
def test_the_ground_plane_holds_through_a_blend_with_the_graphs_imu_pull(blend):
    """Issue 14: hold the ground plane consistently through a blend. With the graph's fusion the floor was the
    hull's face nearest the IMU's down; in the blend the body tips on edges and capsule ends, that face
    changes as the shape morphs (up to 17 degrees from the IMU's down) and each change turned the chassis and
    moved it: 10 degrees of tilt error and a 22 mm step of its own. An IMU seen to agree with the floor
    while the body lay flat (serpentine) now stands for it: the tilt follows the truth's and no step jumps."""
    truth = V.true_body_poses(blend.robot, blend.link_poses)
    poses = _graph_estimate(blend, truth)
    during = (blend.times_s >= SWITCH_S) & (blend.times_s <= SWITCH_S + 2.0)
    # Chassis z against the truth's, either sign (the chassis's y and z have no sign of their own).
    tilt_error_deg = np.degrees(np.arccos(np.clip(np.abs(np.einsum('ka,ka->k', poses[:, :3, 2], truth[:, :3, 2])),
                                                  0.0, 1.0)))
    # Each step's move on the floor beyond the truth's (mm).
    excess_mm = 1000.0 * np.linalg.norm(np.diff(poses[:, :2, 3], axis=0) - np.diff(truth[:, :2, 3], axis=0), axis=1)
    print(f'through the blend: tilt error up to {tilt_error_deg[during].max():.1f} deg, a step up to '
          f'{excess_mm[during[1:]].max():.1f} mm beyond the truth\'s')
    assert tilt_error_deg[during].max() < 5.0
    assert excess_mm[during[1:]].max() < 12.0
    # The blend did lift the body off its flat floor (few contacts: the IMU's turn held the chassis).
    assert blend.contacts[during].mean() < 0.5


@pytest.mark.slow
def test_the_blend_into_a_tread_moves_with_the_modules_on_the_floor(blend):
    """Issue 14: the blend into AEH-sidewinding with the graph's fusion. The tread stands on a few modules while
    the rest lift and pass over the floor; with the whole contact band (15/30 mm) those passing 8-30 mm up
    counted as contacts. While the contacts are weak the band is now half (weak_contact_band).

    How far the blend's 2 s end off depends on when the switch comes: 0.02-0.23 m over switches 3.9-4.2 s
    into the run, with the half band as with the whole one (mean 0.133 and 0.134 m over six); the tread after
    it is where the half band holds (0.008-0.015 m against 0.029-0.054 m in five of six). So three switch
    times are judged together: the blend's mean error, and the tread after each."""
    robot = blend.robot
    errors = []
    for switch_s in (SWITCH_S, SWITCH_S + 0.05, SWITCH_S + 0.1):
        if switch_s == SWITCH_S:
            rec = blend
        else:
            goal = V.gait_goal_fn(robot, 'serpentine', (0.25, 0.0, 0.0),
                                  switches=[(V.WARMUP_S + switch_s, 'aeh_sidewinding', (0.0, 0.15, 0.0), None)])
            rec = V.simulate(SnakeWorld(robot), goal, 10.0, warmup_s=V.WARMUP_S)
        truth = V.true_body_poses(robot, rec.link_poses)
        poses = _graph_estimate(rec, truth)

        def error_m(a_s, b_s):
            ka, kb = np.searchsorted(rec.times_s, [a_s, b_s - 1e-9])
            est = xyyaw_from_se3(poses[kb])[None], xyyaw_from_se3(poses[ka])
            true = xyyaw_from_se3(truth[kb])[None], xyyaw_from_se3(truth[ka])
            return float(np.hypot(*(se2_relative(*est)[0, :2] - se2_relative(*true)[0, :2])))

        errors.append((error_m(switch_s, switch_s + 2.0), error_m(switch_s + 2.0, rec.times_s[-1])))
        print(f'switch at {switch_s:.2f} s: blend into the tread {errors[-1][0]:.3f} m off; the tread after it: '
              f'{errors[-1][1]:.3f} m off')
    in_blend, tread = np.array(errors).T
    assert in_blend.mean() < 0.12
    assert tread.max() < 0.03
