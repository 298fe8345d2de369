"""estimator_node's per-message logic (input gate, decimation, IMU stamp order and its flush, re-anchoring,
counters) on hand-made stamps, through the offline replay that runs it as the node does."""
import math

import numpy as np
import pytest

from snake_control.estimation.estimator import Estimator
from snake_control.estimation.replay import EstimatorInputs, replay_estimator
from snake_control.robot import load_robot


@pytest.fixture(scope='module')
def robot():
    return load_robot('wheeled_8')


def _shape(robot, t):
    """A slow undulation (rad) at stamps t (k,): well inside the joint and velocity limits."""
    t = np.asarray(t, dtype=float)
    return 0.4 * np.sin(2 * np.pi * 0.5 * t[:, None] - np.arange(robot.n_joints)[None, :])


def _joints(robot, t, received=None):
    q = _shape(robot, t)
    return EstimatorInputs(np.asarray(t, dtype=float), np.asarray(t if received is None else received, dtype=float),
                           q, np.full(q.shape, np.nan))


def test_decimation_keeps_to_the_update_rate(robot):
    """400 Hz joint_states at update_rate_hz 100: the second message still passes (the first sets the
    next update half a period on), then one in four, each on the 10 ms grid; the rest are counted."""
    t = 100.0 + 0.0025 * np.arange(41)
    track = replay_estimator(robot, _joints(robot, t), update_rate_hz=100.0)
    kept = np.round((track.t_s - 100.0) / 0.0025).astype(int).tolist()
    assert kept == [0, 1, 5, 9, 13, 17, 21, 25, 29, 33, 37]
    assert track.counts['decimated'] == 41 - len(kept) and track.counts['received'] == 41
    # Jittered stamps keep the rate: a message up to 30 % of a period early is not decimated.
    jitter = t + 0.0008 * np.sin(np.arange(41) * 1.7)
    assert len(replay_estimator(robot, _joints(robot, jitter), update_rate_hz=100.0).t_s) == len(kept)
    # update_rate_hz 0: every message.
    assert len(replay_estimator(robot, _joints(robot, t), update_rate_hz=0.0).t_s) == 41


def test_a_sender_clock_stepped_back_rebases_after_old_stamps_and_restarts_the_decimation(robot):
    """Stamps go back 10 s while the receiver's clock goes on: four are rejected as old, the fifth re-anchors
    the time base (the estimator's last stamp moved to one control period before it), and decimation
    starts again at once instead of waiting 10 s of stamps."""
    before = 100.0 + 0.01 * np.arange(20)
    after = 90.2 + 0.01 * np.arange(20)
    t = np.concatenate([before, after])
    received = 1000.0 + 0.01 * np.arange(40)
    track = replay_estimator(robot, _joints(robot, t, received), update_rate_hz=100.0)
    c = track.counts
    assert c['input_old_stamp'] == 4 and c['input_time_rebase'] == 1 and c['decimated'] == 0
    np.testing.assert_allclose(track.t_s, np.concatenate([before, after[4:]]))
    # The estimator saw the rebase: its updates after it are the ones of a fresh time base.
    est = Estimator(robot)
    for tk, qk in zip(before, _shape(robot, before)):
        est.update(tk, qk)
    est.rebase_time(after[4] - 0.01)
    for tk, qk in zip(after[4:], _shape(robot, after[4:])):
        est.update(tk, qk)
    np.testing.assert_allclose(track.pose_xyz_quat[-1], est.pose_xyz_quat, atol=1e-12)
    assert track.estimator.skipped == 0


def test_a_future_stamp_is_rejected_and_does_not_steer_the_decimation(robot):
    t = 100.0 + 0.01 * np.arange(10)
    stamps = t.copy()
    stamps[3] = 100.0 + 86400.0
    track = replay_estimator(robot, _joints(robot, stamps, t), update_rate_hz=100.0)
    assert track.counts['input_future_stamp'] == 1 and track.counts['decimated'] == 0
    np.testing.assert_allclose(track.t_s, np.delete(t, 3))


def _raw_imu(inputs, t, received, rate=(0.0, 0.0, 0.3)):
    n = len(t)
    inputs.imu_t_s, inputs.imu_received_s = np.asarray(t, dtype=float), np.asarray(received, dtype=float)
    inputs.imu_orientation_xyzw = np.full((n, 4), np.nan)
    inputs.imu_rate_rad_s = np.tile(np.asarray(rate, dtype=float), (n, 1))
    inputs.imu_accel_m_s2 = np.tile([0.0, 0.0, 9.80665], (n, 1))
    return inputs


def test_joint_states_wait_for_the_raw_imu_reading_at_their_stamp(robot):
    """Raw IMU readings (stamped 5 ms before the joint_states of the same period) arriving 15 ms late:
    before the first reading joint_states pass at once; from then on each waits for the reading at or
    after its stamp, and the estimator gets both streams in stamp order."""
    t = 100.0 + 0.01 * np.arange(60)
    inputs = _raw_imu(_joints(robot, t, t + 0.001), t - 0.005, t + 0.015)
    track = replay_estimator(robot, inputs, update_rate_hz=0.0)
    c = track.counts
    assert c['imu_received'] == 60 and c['held_for_imu'] == 58 and c['imu_timed_out'] == 1, c
    est = Estimator(robot)
    q = _shape(robot, t)
    expected = [est.update(t[0], q[0]).pose_xyz_quat, est.update(t[1], q[1]).pose_xyz_quat]
    for k in range(60):
        est.update_imu(t[k] - 0.005, [0.0, 0.0, 0.3], [0.0, 0.0, 9.80665])
        if k >= 3:              # the reading at t[k] - 5 ms lets the joint_states at t[k - 1] go
            expected.append(est.update(t[k - 1], q[k - 1]).pose_xyz_quat)
    expected.append(est.update(t[59], q[59]).pose_xyz_quat)   # waits for a reading that never comes
    np.testing.assert_allclose(track.pose_xyz_quat, np.array(expected), atol=1e-12)
    assert abs(track.xyyaw[-1, 2] - track.xyyaw[0, 2]) > 0.1        # the gyro turned it


def test_waiting_joint_states_go_out_when_both_streams_fall_silent(robot):
    """The node's timer lets waiting joint readings go once nothing has been received for hold_s (0.25 s)
    and its next tick (every 0.05 s) has come. Five joint_states wait for the IMU, then both streams
    are silent, then an IMU reading at the third one's stamp comes: 0.29 s later it lets three of them
    go after it (the other two at the end); 0.31 s later the timer had let all five go before it."""
    t = 100.0 + 0.01 * np.arange(5)
    for gap, timed_out in ((0.29, 2), (0.31, 5)):
        inputs = _raw_imu(_joints(robot, t), [99.995, 100.02], [99.996, 100.04 + gap])
        track = replay_estimator(robot, inputs, update_rate_hz=0.0)
        c = track.counts
        assert c['imu_timed_out'] == timed_out and c['held_for_imu'] == 5, (gap, c)
        np.testing.assert_allclose(track.t_s, t)


def test_an_imu_orientation_goes_to_the_next_joint_updates():
    """An Imu with an orientation (and rate) is held and given to each later joint update (a pitch-yaw
    robot takes its attitude from it)."""
    robot = load_robot('pitch_yaw_32')
    t = 100.0 + 0.01 * np.arange(10)
    inputs = _joints(robot, t)
    inputs.positions_rad *= 0.2
    without = replay_estimator(robot, inputs, update_rate_hz=0.0)
    inputs.imu_t_s, inputs.imu_received_s = np.array([100.045]), np.array([100.045])
    yaw = 0.7
    inputs.imu_orientation_xyzw = np.array([[0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]])
    inputs.imu_rate_rad_s = np.array([[0.0, 0.0, 0.2]])
    inputs.imu_accel_m_s2 = np.full((1, 3), np.nan)
    track = replay_estimator(robot, inputs, update_rate_hz=0.0)
    est = Estimator(robot)
    for k in range(10):
        held = (inputs.imu_orientation_xyzw[0], inputs.imu_rate_rad_s[0]) if t[k] > 100.045 else (None, None)
        est.update(t[k], inputs.positions_rad[k], None, *held)
    np.testing.assert_allclose(track.pose_xyz_quat[-1], est.pose_xyz_quat, atol=1e-12)
    assert abs(track.xyyaw[-1, 2] - without.xyyaw[-1, 2]) > 0.3
    assert track.counts['held_for_imu'] == 0 and track.counts['imu_received'] == 1


# The pipeline itself, as estimator_node calls it.

def _pipeline(robot, **params):
    from snake_control.estimation.pipeline import EstimatorParams, EstimatorPipeline

    out, events = [], []
    pipe = EstimatorPipeline(robot, EstimatorParams(**params), publish=lambda t, state, q: out.append(t),
                             warn=lambda kind, text: events.append((kind, text)))
    return pipe, out, events


def test_the_receivers_clock_stepped_back_rebases_at_once(robot):
    """Stamps and the receive clock both go back 10 s (the system clock stepped): the first message after
    it re-anchors, and odom goes on at once (the publish rate limit restarts in the new time base)."""
    pipe, out, events = _pipeline(robot, update_rate_hz=0.0, publish_rate_hz=20.0)
    t = np.concatenate([100.0 + 0.01 * np.arange(20), 90.1 + 0.01 * np.arange(20)])
    names = list(robot.joint_names)
    for tk, qk in zip(t, _shape(robot, t)):
        pipe.joint_states(tk, tk + 0.001, names, qk)
    c = pipe.counts()
    assert c['input_time_rebase'] == 1 and c['input_old_stamp'] == 0 and c['received'] == 40
    # publish_rate_hz 20 of 100 Hz stamps, from the first of each time base: every fifth (a stamp 0.05 s on
    # is 0.04999... s on in floating point, and still due).
    np.testing.assert_allclose(out, np.concatenate([t[0:20:5], t[20:40:5]]))
    assert events == [('input', pipe.last_input_event)] and 'stamps went back' in pipe.last_input_event
    assert pipe.last_input_event_s == pytest.approx(90.101)


def _published(robot, t, **params):
    """The stamps the pipeline publishes of joint_states at stamps t (received 1 ms after each)."""
    pipe, out, _ = _pipeline(robot, update_rate_hz=0.0, **params)
    names = list(robot.joint_names)
    for tk, qk in zip(t, _shape(robot, t)):
        pipe.joint_states(tk, tk + 0.001, names, qk)
    return np.asarray(out)


@pytest.mark.parametrize('rate_hz', [20.0, 30.0, 100.0])
@pytest.mark.parametrize('jitter_s', [0.0, 0.001])
def test_the_publish_rate_is_the_asked_one(robot, rate_hz, jitter_s):
    """publish_rate_hz of 100 Hz joint_states for 10 s, with and without 1 ms of jitter in the stamps: never
    more than the rate asked, and not fewer either (no drift below it over the run)."""
    k = np.arange(1001)
    t = 100.0 + 0.01 * k + jitter_s * np.sin(1.7 * k)
    out = _published(robot, t, publish_rate_hz=rate_hz)
    # Published by each stamp: at most one more than rate * elapsed, at least one fewer. A stamp up to a
    # quarter of the input interval early counts as due, so that jitter does not skip it.
    n = np.searchsorted(out, t, side='right')
    elapsed = 0.01 * k      # the sender's time, without the jitter
    assert np.all(n <= np.floor(rate_hz * (elapsed + 0.0025 + jitter_s) + 1e-6) + 1)
    assert np.all(n >= rate_hz * elapsed - 1)
    assert len(out) == round(10 * rate_hz) + 1
    if rate_hz == 20.0:
        np.testing.assert_array_equal(out, t[::5])


def test_the_publish_rate_starts_over_after_a_gap(robot):
    """joint_states pause 0.523 s: the first after the gap is published and the rate counts from it."""
    t = np.concatenate([100.0 + 0.01 * np.arange(20), 100.713 + 0.01 * np.arange(20)])
    out = _published(robot, t, publish_rate_hz=20.0)
    np.testing.assert_allclose(out, np.concatenate([t[0:20:5], t[20:40:5]]))


def test_joint_names_in_any_order_and_messages_without_them(robot):
    pipe, out, events = _pipeline(robot, update_rate_hz=0.0)
    names = list(reversed(robot.joint_names))
    q = _shape(robot, [100.0, 100.01])
    pipe.joint_states(100.0, 100.0, names, q[0][::-1], q[0][::-1] * 0.0)
    pipe.joint_states(100.01, 100.01, ['joint_1'], [0.0])
    assert out == [100.0] and pipe.rejected == 1 and 'joint_2' in pipe.last_error
    assert events[-1][0] == 'joint_states'
    np.testing.assert_allclose(pipe.estimator._q, q[0])
    # A zero stamp takes the receive time.
    pipe.joint_states(0.0, 100.02, names, q[1][::-1])
    assert out[-1] == 100.02


def test_the_order_flush_waits_hold_s_of_wall_time(robot):
    """flush(wall_s), the node's timer: waiting joint readings go once nothing reached the StampOrder for
    more than hold_s of wall time."""
    pipe, out, _ = _pipeline(robot, update_rate_hz=0.0, use_imu=True)
    pipe.imu(99.995, None, None, [0.0, 0.0, 0.1], [0.0, 0.0, 9.80665], wall_s=5.0)
    names = list(robot.joint_names)
    pipe.joint_states(100.0, 100.0, names, _shape(robot, [100.0])[0], wall_s=5.01)
    assert pipe.order.waiting == 1 and out == []
    pipe.flush(5.25)
    assert pipe.order.waiting == 1
    pipe.flush(5.27)
    assert pipe.order.waiting == 0 and out == [100.0] and pipe.counts()['imu_timed_out'] == 1
