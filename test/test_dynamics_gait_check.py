"""The gait node's check of a proposed gait parameter change against the servos' torque."""
import numpy as np
import pytest

from snake_control.dynamics.gait_check import gait_params_torque_report
from snake_control.robot import load_robot


@pytest.fixture(scope='module')
def snake():
    return load_robot('pitch_yaw_32')


def test_bigger_pitch_waves_need_more_torque_and_get_refused(snake):
    # A long wave (w_s 0.4 rad per joint) lifts many modules at once.
    gentle = gait_params_torque_report(snake, 'vertical_undulation', {'A_pitch': 0.02, 'w_s': 0.4}, rate_hz=25.0)
    steep = gait_params_torque_report(snake, 'vertical_undulation', {'A_pitch': 0.6, 'w_s': 0.4}, rate_hz=25.0)
    assert gentle.ok, gentle.message
    assert not steep.ok
    assert steep.peak_nm.max() > 2 * gentle.peak_nm.max()
    assert steep.exceeding[0] in steep.message and 'phase' in steep.message
    # Two periods of the gait were checked, in phase terms.
    assert steep.phased


def test_flat_gait_passes_with_yaw_torques_only(snake):
    report = gait_params_torque_report(snake, 'lateral_undulation', {}, rate_hz=25.0)
    assert report.ok
    pitch = np.array([a == 'pitch' for a in snake.axes])
    assert np.all(report.peak_nm[pitch] < 1e-9) and np.all(report.peak_nm[~pitch] >= 0)


def test_bad_requests_are_refused(snake):
    with pytest.raises(ValueError):
        gait_params_torque_report(snake, 'no_such_gait', {})
    with pytest.raises(ValueError, match='fraction'):
        gait_params_torque_report(snake, 'serpentine', {}, fraction=0.0)
