"""Where a gait fits a robot: saturated joints and feasible parameter ranges (pure), and the gait node
refusing a change that drives joints past their limits."""
import pytest

from snake_control.gaits import catalog
from snake_control.gaits.feasibility import feasible_range, feasible_ranges, saturated_joints
from snake_control.robot import load_robot


def params(robot, gait, **overrides):
    return catalog.resolve_params(catalog.gait_spec(gait), robot, overrides)


def test_a_huge_serpentine_amplitude_saturates_the_yaw_joints():
    robot = load_robot('pitch_yaw_32')
    assert saturated_joints(robot, 'serpentine', params(robot, 'serpentine')) == []
    bad = saturated_joints(robot, 'serpentine', params(robot, 'serpentine', B1=100.0))
    assert len(bad) >= 12 and all(name in robot.joint_names for name in bad)


def test_feasible_range_stops_where_joints_saturate():
    robot = load_robot('wheeled_8')
    lo, hi = feasible_range(robot, 'wheeled_undulation', 'amplitude')
    spec = catalog.gait_spec('wheeled_undulation').param('amplitude')
    assert spec.lower < lo < 0 < hi < spec.upper
    # Just inside: no joint past its limit; a little outside: some.
    assert saturated_joints(robot, 'wheeled_undulation', params(robot, 'wheeled_undulation', amplitude=hi)) == []
    assert saturated_joints(robot, 'wheeled_undulation',
                            params(robot, 'wheeled_undulation', amplitude=hi + 0.01)) != []
    # The joints' limits bound the amplitude plus the turning offset.
    assert hi == pytest.approx(float(robot.upper_rad.min()), abs=0.01)


def test_every_default_lies_within_its_range_and_ranges_are_cached():
    robot = load_robot('pitch_yaw_32')
    for gait in catalog.gaits_for(robot):
        ranges = feasible_ranges(robot, gait)
        for p in catalog.gait_spec(gait).params:
            lo, hi = ranges[p.name]
            assert lo <= p.resolve(robot) <= hi, (gait, p.name)
        assert feasible_ranges(robot, gait) is ranges
