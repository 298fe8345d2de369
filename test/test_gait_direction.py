"""Direction of travel: a positive command moves the robot the commanded way in the MuJoCo world.

cmd_vel semantics (GaitScheduler.set_command): linear.x forward = toward the head, linear.y = to the
robot's left, angular.z = counter-clockwise seen from above. Each run drives the gait the way the gait
node would (validation.gait_goal_fn) and measures the motion in the robot's own mean body frame
(validation.body_motion). A sign error in a gait's parameterisation reverses the motion and fails here.
"""
import math

import numpy as np
import pytest

from snake_control.physics import SnakeWorld
from snake_control.validation import runs as V
from snake_control.robot import load_robot

DURATION_S = 6.0
WARMUP_S = 2.0


def motion(robot_name, gait, command, params=None, duration_s=DURATION_S, window_s=1.5):
    """(forward m, left m, turn rad) in the mean body frame; poses averaged over window_s at each end."""
    robot = load_robot(robot_name)
    rec = V.simulate(SnakeWorld(robot), V.gait_goal_fn(robot, gait, command, params), duration_s,
                     warmup_s=WARMUP_S)
    return V.body_motion(rec.link_poses, window=int(window_s * robot.bus.control_rate_hz))


def _straight_body(angle, offset, n=5, length=0.1):
    poses = np.tile(np.eye(4), (n, 1, 1))
    axis = np.array([math.cos(angle), math.sin(angle)])
    for k in range(n):
        poses[k, :2, 3] = offset + (k - (n - 1) / 2) * length * axis
    return poses


def test_body_motion_resolves_displacement_in_the_body_frame():
    # a body along world +y sliding by (-0.2, 0.1): forward 0.1 (toward the head), left 0.2
    before = _straight_body(math.pi / 2, np.zeros(2))
    after = _straight_body(math.pi / 2, np.array([-0.2, 0.1]))
    f, left, turn = V.body_motion(np.stack([before, after]))
    assert (f, left, turn) == pytest.approx((0.1, 0.2, 0.0), abs=1e-12)
    # turning CCW by 0.4 rad about the centroid in steps: no displacement, turn +0.4
    turning = np.stack([_straight_body(a, np.zeros(2)) for a in np.linspace(0.0, 0.4, 9)])
    f, left, turn = V.body_motion(turning)
    assert turn == pytest.approx(0.4) and abs(f) < 1e-12 and abs(left) < 1e-12
    with pytest.raises(ValueError, match='link_poses'):
        V.body_motion(np.zeros((3, 4, 4)))


@pytest.mark.slow
@pytest.mark.parametrize('gait', ['serpentine', 'lateral_undulation'])
def test_forward_gaits_move_toward_the_head(gait):
    forward, left, _ = motion('pitch_yaw_32', gait, (0.1, 0.0, 0.0))
    assert forward > 0.3, (forward, left)                # about 0.8 m in 6 s
    assert abs(left) < 0.3 * forward, (forward, left)
    back, _, _ = motion('pitch_yaw_32', gait, (-0.1, 0.0, 0.0))
    assert back < -0.3, back


@pytest.mark.slow
@pytest.mark.parametrize('gait', ['sidewinding', 'aeh_sidewinding', 'rolling', 'serpenoid_rolling'])
def test_lateral_gaits_move_to_the_left(gait):
    forward, left, _ = motion('pitch_yaw_32', gait, (0.0, 0.1, 0.0))
    assert left > 0.15, (forward, left)                  # 0.33 m (rolling) to 1.7 m (AEH) in 6 s
    assert left > abs(forward), (forward, left)


@pytest.mark.slow
def test_a_negative_lateral_command_sidewinds_to_the_right():
    _, left, _ = motion('pitch_yaw_32', 'sidewinding', (0.0, -0.1, 0.0))
    assert left < -0.15, left


@pytest.mark.slow
def test_positive_turn_turns_counter_clockwise_on_wheeled_8():
    # At 0.2 m/s one wave takes about 4 s (the no-slip stride): the heading is averaged over a whole wave
    # at each end, or the wave's own swing (tens of degrees) would read as a turn.
    def turn(command):
        return motion('wheeled_8', 'wheeled_undulation', command, duration_s=10.0, window_s=4.0)[2]
    straight, ccw, cw = turn((0.2, 0.0, 0.0)), turn((0.2, 0.0, 0.5)), turn((0.2, 0.0, -0.5))
    assert abs(straight) < math.radians(15), math.degrees(straight)
    assert ccw > math.radians(45) and cw < -math.radians(45), (math.degrees(ccw), math.degrees(cw))


@pytest.mark.slow
def test_positive_turn_turns_serpentine_counter_clockwise_on_pitch_yaw_32():
    _, _, ccw = motion('pitch_yaw_32', 'serpentine', (0.1, 0.0, 0.3))
    _, _, cw = motion('pitch_yaw_32', 'serpentine', (0.1, 0.0, -0.3))
    assert ccw > math.radians(5) and cw < -math.radians(5), (math.degrees(ccw), math.degrees(cw))
