"""The servos' drive measured in the MuJoCo world (validation.servo_load, snake gait --torques --physics
mujoco) against the torque check's model."""
import numpy as np
import pytest

from snake_control.cli import main
from snake_control.dynamics.torques import gait_torque_report
from snake_control.robot import load_robot
from snake_control.validation.servo_load import simulated_torque_report, simulated_torques


def _lifted_head_pose(robot):
    """The head lifted by the pitch joint four links from the head (negative pitch turns the head up)
    over a body bent into an arc by its yaw joints, which it lies on: a cantilever, where the model's
    statics are exact. (A shape bent by one pitch joint alone is planar and lies flat on its side.)"""
    k = max(i for i, a in enumerate(robot.axes) if a == 'pitch' and i <= robot.n_joints - 4)
    yaw = np.array([a == 'yaw' for a in robot.axes])
    q = np.where(yaw & (np.arange(robot.n_joints) < 24), 0.2, 0.0)
    q[k] = -0.6
    t = np.arange(101) / 100.0
    model = gait_torque_report(robot, t, np.tile(q, (t.size, 1)))
    return k, q, model.torque_nm[-1], t


def test_a_held_cantilever_needs_the_same_torque_in_mujoco_as_in_the_model():
    robot = load_robot('pitch_yaw_32')
    k, q, model_nm, t = _lifted_head_pose(robot)
    assert abs(model_nm[k]) > 0.4                                 # the head is lifted: a real load
    measured = simulated_torques(robot, t, np.tile(q, (t.size, 1)))
    # At rest the servo's drive is the holding torque (0.65 N m at the neck in both).
    assert measured[-1, k] == pytest.approx(model_nm[k], rel=0.1)
    assert np.delete(np.abs(measured[-1]), k).max() < 0.4 * abs(measured[-1, k])


def test_a_gait_at_the_checks_speed_overloads_the_servos_in_mujoco_where_the_model_passes(capsys):
    # AEH-sidewinding at half a cycle per second: its joints turn at two thirds of the motor's no-load
    # speed, so the back-EMF leaves too little drive for the lift; the model counts the torque alone.
    args = ['gait', '--robot', 'pitch_yaw_32', '--gait', 'aeh_sidewinding', '--duration', '6', '--torques',
            '--physics', 'mujoco']
    assert main(args) == 1
    text = capsys.readouterr().out
    model_line, mujoco_line = [line for line in text.splitlines() if 'torque check' in line]
    assert 'torque check passed' in model_line
    assert 'FAILED' in mujoco_line and 'MuJoCo world' in mujoco_line
    # Slowly (the gamepad's full stick sideways) the same gait is within the servos in both.
    assert main(args + ['--speed', '0.05']) == 0
    text = capsys.readouterr().out
    assert text.count('torque check passed') == 2


def test_turn_in_place_at_the_node_s_clamp_stays_within_the_servos_in_mujoco(capsys):
    # Scrubbing its body round, turn-in-place at its joint-speed reach (5.35 rad/s of phase rate, where the
    # node's clamp of 0.8 rad/s sent it) drove its servos at 94 % of stall, 34 % in the model; its own cap
    # of 2.4 rad/s keeps the world's drive under 80 %.
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'turn_in_place', '--speed', '0.8', '--duration', '6',
                 '--torques', '--physics', 'mujoco']) == 0
    mujoco_line = [line for line in capsys.readouterr().out.splitlines() if 'MuJoCo world' in line][-1]
    assert 'torque check passed' in mujoco_line


def test_physics_mujoco_needs_torques_and_the_trajectory_must_be_uniform(capsys):
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'serpentine', '--physics', 'mujoco']) == 2
    assert '--physics mujoco checks the torques: add --torques' in capsys.readouterr().err
    robot = load_robot('wheeled_8')
    with pytest.raises(ValueError, match='uniformly spaced'):
        simulated_torque_report(robot, [0.0, 0.01, 0.03], np.zeros((3, robot.n_joints)))
    with pytest.raises(ValueError, match=r'q_rad \(T, 7\)'):
        simulated_torques(robot, [0.0, 0.01], np.zeros((2, 3)))
