"""Strides from the model: the no-slip connection's net motion per gait cycle maps cmd_vel (m/s, rad/s)
to the phase rate and the turning offset of passive-wheel gaits (snake_control.gaits.stride)."""
import math

import numpy as np
import pytest
import yaml
from scipy.special import j0

from snake_control.gaits import catalog, stride
from snake_control.gaits.scheduler import GaitScheduler
from snake_control.paths import robots_dir
from snake_control.physics import SnakeWorld
from snake_control.robot import load_robot, robot_from_dict
from snake_control.validation import runs as V


def wheeled_robot(joints: int, link_length_m: float = 0.14):
    """A custom planar wheeled robot: wheeled_8's YAML with another number of joints and link length."""
    data = yaml.safe_load((robots_dir() / 'wheeled_8.yaml').read_text())
    data['name'] = f'wheeled_custom_{joints}'
    data['link']['length_m'] = link_length_m
    data['joints'] = [{'name': f'joint_{i + 1}', 'axis': 'yaw', 'id': i + 1} for i in range(joints)]
    return robot_from_dict(data, '<test>')


def test_a_slip_free_serpenoid_advances_its_wavelength_times_j0_of_its_amplitude():
    n, l, amplitude, delta = 60, 0.05, 0.3, 0.25
    arc, turn = stride.cycle_motion(lambda ph: amplitude * np.sin(ph + delta * np.arange(n)), l)
    wavelength, alpha = 2 * math.pi * l / delta, amplitude / (2 * math.sin(delta / 2))
    assert arc == pytest.approx(wavelength * j0(alpha), rel=0.015)      # 0.9 % for 60 links
    assert abs(turn) < 1e-9


def test_the_model_inverts_speed_and_turn():
    robot = load_robot('wheeled_8')
    spec = catalog.gait_spec('wheeled_undulation')
    model = stride.StrideModel(catalog.GaitShape(spec, robot, catalog.resolve_params(spec, robot)))
    lo, hi = model.curvature_range()
    assert lo == pytest.approx(-hi) and hi > 1.0          # mirror-symmetric turning
    cmd = model.command(0.1, 0.2)
    assert cmd.reachable and cmd.speed_m_s == pytest.approx(0.1) and cmd.yaw_rate_rad_s == pytest.approx(0.2, rel=1e-3)
    back = model.command(-0.1, 0.2)
    assert back.phase_rate_rad_s < 0 and back.yaw_rate_rad_s == pytest.approx(0.2, rel=1e-3)
    tight = model.command(0.05, 5.0)                      # curvature 100 rad/m: beyond the reach
    assert not tight.reachable and tight.speed_m_s == pytest.approx(0.05) and tight.yaw_rate_rad_s < 5.0
    capped = model.command(10.0, 0.0, max_rate_rad_s=3.0)
    assert not capped.reachable and capped.phase_rate_rad_s == pytest.approx(3.0)


def test_the_scheduler_reports_what_the_model_gives():
    scheduler = GaitScheduler(load_robot('wheeled_8'), 'wheeled_undulation')
    scheduler.set_command(0.1, 0.0, 0.3)
    scheduler.step(0.01)
    modelled = scheduler.state().modelled
    assert modelled.reachable and modelled.speed_m_s == pytest.approx(0.1)
    assert modelled.yaw_rate_rad_s == pytest.approx(0.3, rel=1e-3)


def achieved(robot, gait, command, duration_s=8.0, warmup_s=3.0):
    """(speed m/s along the mean path, yaw rate rad/s) in a short MuJoCo run."""
    rec = V.simulate(SnakeWorld(robot), V.gait_goal_fn(robot, gait, command), duration_s, warmup_s=warmup_s)
    centroid = rec.link_poses[:, :, :2, 3].mean(axis=1)
    window = int(robot.bus.control_rate_hz)          # headings averaged over 1 s at each end
    forward, left, turn = V.body_motion(rec.link_poses, window=window)
    chord = math.hypot(forward, left)
    half = 0.5 * turn
    arc = chord * (half / math.sin(half) if abs(half) > 1e-6 else 1.0)
    assert np.all(np.isfinite(centroid))
    return math.copysign(arc, forward) / duration_s, turn / duration_s


@pytest.mark.slow
@pytest.mark.parametrize('robot', [load_robot('wheeled_8'), wheeled_robot(10, 0.12)], ids=['wheeled_8', 'custom_10'])
@pytest.mark.parametrize('command', [
    (0.1, 0.0, 0.0), (0.1, 0.0, 0.25), (0.1, 0.0, -0.25)])
def test_mujoco_achieves_the_commanded_speed_and_yaw_rate(robot, command, request):
    if robot.name != 'wheeled_8' and command[2] > 0:
        request.applymarker(pytest.mark.xfail(
            reason='custom_10 turning left reaches about 72 % of the yaw rate (0.18 of 0.25 rad/s)', strict=False))
    speed, yaw_rate = achieved(robot, 'wheeled_undulation', command)
    assert speed == pytest.approx(command[0], rel=0.10), (speed, yaw_rate)
    assert yaw_rate == pytest.approx(command[2], rel=0.15, abs=0.03), (speed, yaw_rate)
