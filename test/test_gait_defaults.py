"""Every gait's defaults fit every shipped robot: within the joint limits and under the torque check.

The torque check (dynamics.gait_check, the one the gait node runs before accepting parameters) at its
default fraction of the stall torque, and the joint limits (gaits.feasibility.saturated_joints). The
gamepad's gait cycle (app.graph.TELEOP_GAIT_CYCLES) holds only gaits that pass both.
"""
import pytest

from snake_control.app.graph import default_gait_cycle
from snake_control.dynamics.gait_check import gait_params_torque_report
from snake_control.gaits import catalog, feasibility
from snake_control.paths import robot_names as shipped_robots
from snake_control.robot import load_robot

CASES = [(r, g) for r in shipped_robots() for g in catalog.gaits_for(load_robot(r))]


@pytest.mark.parametrize('robot_name,gait', CASES)
def test_default_gait_fits_the_joints_and_the_servos(robot_name, gait):
    robot = load_robot(robot_name)
    params = catalog.resolve_params(catalog.gait_spec(gait), robot)
    assert feasibility.saturated_joints(robot, gait, params) == []
    report = gait_params_torque_report(robot, gait)
    assert report.ok, report.message


def test_the_check_fails_a_gait_that_overloads_the_servos():
    # The seed's AEH-sidewinding (a = -1, eta = 0.95) asks about 110 % of stall on pitch_yaw_32: the check
    # above would catch a default like it.
    robot = load_robot('pitch_yaw_32')
    assert not gait_params_torque_report(robot, 'aeh_sidewinding', {'a': -1.0, 'eta': 0.95}).ok


@pytest.mark.parametrize('robot_name', shipped_robots())
def test_gamepad_cycle_holds_only_gaits_within_the_servos(robot_name):
    robot = load_robot(robot_name)
    cycle = default_gait_cycle(robot)
    assert cycle
    for gait in cycle:
        assert (robot_name, gait) in CASES
