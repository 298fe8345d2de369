"""Rolling in the MuJoCo world (validation physics): its arc rolls convex side first within the servos'
torque, the same way every cycle, and its conical taper steers it (docs/gaits.md, "Rolling")."""
import math

import numpy as np
import pytest

from snake_control.gaits import catalog
from snake_control.physics import SnakeWorld
from snake_control.robot import load_robot
from snake_control.validation import calibration as cal
from snake_control.validation.runs import VALIDATION_PHYSICS

PI = math.pi


@pytest.fixture(scope='module')
def py32():
    return load_robot('pitch_yaw_32')


def rolling(robot, **params):
    spec = catalog.gait_spec('rolling')
    return catalog.GaitShape(spec, robot, catalog.resolve_params(spec, robot, params))


def cycles_from_own_shape(robot, shape, rate_rad_s, cycles, warmup_cycles=1):
    """Per whole cycle after warmup_cycles: (left m, turn rad) of the link centroid and body axis, and the
    largest servo torque (N m) over the run; the gait starts in its own shape at rate_rad_s."""
    world = SnakeWorld(robot, options=VALIDATION_PHYSICS)
    world.reset(shape.angles(0.0))
    steps = int(round(0.01 / world.timestep_s))
    marks, peak, k = [], 0.0, 0
    while len(marks) <= warmup_cycles + cycles:
        phase = rate_rad_s * k * 0.01
        if phase >= 2 * PI * len(marks):
            centres = world.link_poses()[:, :2, 3]
            axis = centres[-16:].mean(axis=0) - centres[:16].mean(axis=0)
            marks.append((centres.mean(axis=0), math.atan2(axis[1], axis[0])))
        world.set_goals(shape.angles(phase))
        world.step(steps)
        peak = max(peak, float(np.abs(world.actuator_torques_nm()).max()))
        k += 1
    out = []
    for (p0, h0), (p1, h1) in zip(marks[warmup_cycles:], marks[warmup_cycles + 1:]):
        d, mean = p1 - p0, 0.5 * (h0 + h1)
        out.append((-math.sin(mean) * d[0] + math.cos(mean) * d[1], h1 - h0))
    return np.array(out), peak


@pytest.mark.slow
def test_rolling_rolls_the_same_way_every_cycle_within_the_servos(py32):
    # Rolled toward its concave side, seed 004's arc (A1 = 1.19 1/m) needed more than the servos' stall
    # torque: its roll slipped behind the phase and each cycle went elsewhere (+-0.21 m, +-0.21 rad).
    per_cycle, peak = cycles_from_own_shape(py32, rolling(py32), 3.6, cycles=3)
    left, turn = per_cycle[:, 0], per_cycle[:, 1]
    assert peak < 0.5 * py32.bus.servo.stall_torque_nm, peak
    assert np.all(left > 0.1), left                                  # to the left, about 0.2 m a cycle
    assert np.ptp(left) < 0.01 and np.ptp(turn) < 0.02, per_cycle


@pytest.mark.slow
def test_conical_rolling_turns_with_the_sign_of_its_taper_offset(py32):
    shape = rolling(py32)
    left = cal.measure(py32, shape, 1.8, +0.5)
    right = cal.measure(py32, shape, 1.8, -0.5)
    # On the world's 0.005 s contacts: +0.011 and -0.005 rad per cycle (+0.031 and -0.033 on MuJoCo's own soft
    # ones, whose slide did most of the turning: docs/gaits.md).
    assert left.turn_rad > 0.004 and right.turn_rad < -0.003, (left, right)
    assert left.left_m > 0.1 and right.left_m > 0.1, (left, right)   # it still rolls to the left
