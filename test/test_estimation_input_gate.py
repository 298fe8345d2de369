"""InputGate: which joint_states the estimator believes (stamps, joint limits, velocity limits)."""
import numpy as np
import pytest

from snake_control.estimation.estimator import Estimator
from snake_control.estimation.input_gate import ACCEPT, REBASE, REJECT, InputGate
from snake_control.robot import load_robot

N = 4
LOWER, UPPER, VMAX = -np.ones(N), np.ones(N), np.full(N, 2.0)
NOW = 1_700_000_000.0


def _gate(**kw):
    return InputGate(LOWER, UPPER, VMAX, **kw)


def test_a_future_stamp_is_rejected_and_later_samples_still_accepted():
    gate = _gate()
    q = np.zeros(N)
    assert gate.check(NOW, NOW, q).action == ACCEPT
    v = gate.check(NOW + 1e6, NOW + 0.01, q)
    assert v.action == REJECT and v.kind == 'future_stamp' and 'ahead' in v.reason
    for k in range(2, 10):
        assert gate.check(NOW + 0.01 * k, NOW + 0.01 * k, q).action == ACCEPT
    assert gate.counts['future_stamp'] == 1


def test_a_clock_stepped_back_re_anchors_at_once():
    gate = _gate()
    q = np.zeros(N)
    assert gate.check(NOW, NOW, q).action == ACCEPT
    back = NOW - 3600.0        # sender and receiver clocks both stepped back an hour
    v = gate.check(back, back, q)
    assert v.action == REBASE and v.kind == 'time_rebase'
    assert gate.check(back + 0.01, back + 0.01, q).action == ACCEPT


def test_a_sender_clock_stepped_back_alone_re_anchors_after_a_few_samples():
    gate = _gate(recover_after=5)
    q = np.zeros(N)
    gate.check(NOW, NOW, q)
    actions = [gate.check(NOW - 60 + 0.01 * k, NOW + 0.01 * k, q).action for k in range(6)]
    assert actions[:4] == [REJECT] * 4 and actions[4] == REBASE and actions[5] == ACCEPT
    assert gate.counts['old_stamp'] == 4 and gate.counts['time_rebase'] == 1


def test_angles_beyond_the_limits_are_rejected():
    gate = _gate(limit_margin_rad=0.2)
    assert gate.check(NOW, NOW, np.full(N, 1.15)).action == ACCEPT
    v = gate.check(NOW + 0.01, NOW + 0.01, np.array([0.0, 1.3, 0.0, 0.0]))
    assert v.action == REJECT and v.kind == 'out_of_limits' and 'joint 1' in v.reason


def test_a_step_beyond_the_velocity_limit_is_rejected_a_lone_spoof_never_accepted():
    gate = _gate(recover_after=5)
    q = np.zeros(N)
    gate.check(NOW, NOW, q)
    t = NOW
    for k in range(20):       # real samples interleaved with a spoofer's far-away pose
        t += 0.01
        assert gate.check(t, t, q).action == ACCEPT
        v = gate.check(t + 0.001, t + 0.001, np.full(N, 0.9))
        assert v.action == REJECT and v.kind == 'too_fast'
        t += 0.001
    assert gate.counts['too_fast'] == 20 and gate.counts['shape_jump'] == 0


def test_a_consistent_new_shape_is_accepted_after_a_few_samples():
    gate = _gate(recover_after=3)
    gate.check(NOW, NOW, np.zeros(N))
    actions = [gate.check(NOW + 0.01 * k, NOW + 0.01 * k, np.full(N, 0.9)).action for k in range(1, 5)]
    assert actions == [REJECT, REJECT, REBASE, ACCEPT]


def test_estimator_recovers_from_a_future_stamp_with_the_gate():
    """Without the gate one future stamp stops the estimator for good (every later stamp is older)."""
    robot = load_robot('wheeled_8')
    ts = np.arange(0.0, 2.0, 0.01)
    shapes = 0.5 * np.sin(2 * np.pi * ts[:, None] - 0.9 * np.arange(robot.n_joints))

    def run(gate):
        est = Estimator(robot)
        for k, (t, q) in enumerate(zip(ts, shapes)):
            if k == 50:
                t_bad = t + 1e6
                if gate is None or gate.check(NOW + t_bad, NOW + t, q).action != REJECT:
                    est.update(NOW + t_bad, q)
                continue
            if gate is None:
                est.update(NOW + t, q)
                continue
            v = gate.check(NOW + t, NOW + t, q)
            if v.action == REJECT:
                continue
            if v.kind == 'time_rebase':
                est.rebase_time(NOW + t - 0.01)
            est.update(NOW + t, q)
        return est

    ungated = run(None)
    assert ungated.updates < 60          # the failure this gate exists for
    gated = run(_robot_gate(robot))
    assert gated.updates == len(ts) - 1
    reference = Estimator(robot)
    for t, q in zip(np.delete(ts, 50), np.delete(shapes, 50, axis=0)):
        reference.update(t, q)
    np.testing.assert_allclose(gated.pose, reference.pose, atol=1e-9)


def _robot_gate(robot):
    return InputGate(robot.lower_rad, robot.upper_rad, robot.velocity_limit_rad_s)


def test_reanchor_keeps_the_pose_and_does_not_integrate_the_jump():
    robot = load_robot('pitch_yaw_32')
    est = Estimator(robot)
    ts = np.arange(0.0, 1.0, 0.01)
    for t in ts:
        est.update(t, 0.3 * np.sin(2 * np.pi * t - 0.5 * np.arange(robot.n_joints)))
    before = est.pose.copy()
    est.reanchor()
    est.update(1.0, np.zeros(robot.n_joints))    # a different shape: no motion integrated
    np.testing.assert_allclose(est.pose[:2, 3], before[:2, 3], atol=1e-6)
    assert est.updates == len(ts) + 1


def test_bad_gate_settings_are_refused():
    with pytest.raises(ValueError):
        InputGate(LOWER, UPPER, VMAX, speed_factor=0.5)
    with pytest.raises(ValueError):
        InputGate(LOWER, UPPER[:2], VMAX)
