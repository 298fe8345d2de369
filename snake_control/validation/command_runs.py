"""cmd_vel against the MuJoCo truth: the gait node's pure controller (gaits.controller.GaitController:
command filter, closed loop, calibration, scheduler) driving the MuJoCo world at the control rate, the
state estimator on the measured joint angles feeding the closed loop its odometry, as in the node
graph but in one thread on simulated time (no DDS, no servo bus), so a run takes seconds.

Achieved motion is scored on the truth over the whole gait cycles of the last `score_s` seconds, the
way the calibration measures (gaits.calibration.cycle_motion): per cycle, the centroid of the link
centres between phase-aligned instants in the frame of the cycle's mean body axis (tail half to head
half), scaled from chord to arc (a turning cycle's path), and the body axis' turn; times the cycles
per second.

    >>> r = run_command('pitch_yaw_32', 'serpentine', (0.2, 0.0, 0.0), 40.0)   # doctest: +SKIP
    >>> r.forward_m_s / 0.2                                                     # doctest: +SKIP
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.estimation.estimator import Estimator
from snake_control.gaits.calibration import CycleSample, cycle_motion
from snake_control.gaits.controller import GaitController
from snake_control.gaits.trim import TrimSettings, TrimState, heading_from_quaternion
from snake_control.kinematics.lie import quaternion_from_matrix
from snake_control.physics.mjcf import matching_axial_weight
from snake_control.physics.world import SnakeWorld
from snake_control.robot import Robot, load_robot
from snake_control.teleop.command_filter import CommandLimits

LIMITS = CommandLimits(2.0, 2.0, 10.0, 0.3, 0.3, 2.0)


@dataclass
class CommandResult:
    """Commanded against achieved (truth) over the scored window, and the closed loop at the end."""

    robot: str
    gait: str
    command: tuple
    forward_m_s: float
    left_m_s: float
    yaw_rate_rad_s: float
    trim: TrimState
    mapping: str
    reachable: bool
    times_s: np.ndarray
    gain_history: np.ndarray           # (T,) the closed loop's drive gain per tick

    def achieved(self, drive: str) -> float:
        return {'forward': self.forward_m_s, 'lateral': self.left_m_s, 'turn': self.yaw_rate_rad_s}[drive]


def _axis_heading(link_poses) -> tuple[np.ndarray, float]:
    centres = link_poses[:, :2, 3]
    half = centres.shape[0] // 2
    axis = centres[-half:].mean(axis=0) - centres[:half].mean(axis=0)
    return centres.mean(axis=0), math.atan2(axis[1], axis[0])


def run_command(robot: Robot | str, gait: str, command, duration_s: float, score_s: float | None = None,
                calibration='auto', closed_loop: bool = True, trim: TrimSettings | None = None,
                odometry: str = 'estimator', rate_hz: float = 100.0, params: dict | None = None
                ) -> CommandResult:
    """Drive `gait` at cmd_vel `command` (forward m/s, lateral m/s, turn rad/s) for duration_s of
    simulated time; score the last score_s (default: the second half). odometry: 'estimator' (the
    estimator on measured joint angles, as in the graph) or 'truth' (the true body pose, as motion
    capture would give)."""
    robot = load_robot(robot) if isinstance(robot, str) else robot
    if odometry not in ('estimator', 'truth'):
        raise ValueError(f"odometry must be 'estimator' or 'truth', got {odometry!r}")
    period = 1.0 / rate_hz
    ctrl = GaitController(robot, gait, period_s=period, limits=LIMITS, cmd_timeout_s=1e9,
                          overrides={gait: dict(params or {})}, calibration=calibration, trim=trim,
                          closed_loop=closed_loop)
    world = SnakeWorld(robot)
    steps = int(round(period / world.timestep_s))
    ctrl.start(None)
    # Start in the gait's own shape, settled on the floor, so no blend from a straight body is scored.
    world.reset(np.clip(ctrl.scheduler.positions_rad, robot.lower_rad, robot.upper_rad))
    world.run(0.5)
    options = {'axial_weight': matching_axial_weight()} if robot.kind == 'pitch_yaw' else {}
    from snake_control.estimation.estimator import BodyFrameTracker
    tracker = BodyFrameTracker(robot)
    truth0 = tracker(world.link_poses())
    initial = truth0 if robot.kind == 'pitch_yaw' else np.array(
        [truth0[0, 3], truth0[1, 3], math.atan2(truth0[1, 0], truth0[0, 0])])
    est = Estimator(robot, initial_pose=initial, **options)
    count = int(round(duration_s * rate_hz))
    times = np.arange(count) * period
    gains = np.zeros(count)
    centroids = np.zeros((count, 2))
    headings = np.zeros(count)
    phases = np.zeros(count)
    for k, t in enumerate(times):
        ctrl.offer_command(*command, t)
        out = ctrl.tick(t)
        world.set_goals(out.positions_rad)
        world.step(steps)
        poses = world.link_poses()
        q = world.joint_positions_rad()
        if odometry == 'estimator':
            pose = est.update(t + period, q).pose
        else:
            pose = tracker(poses)
        quat = quaternion_from_matrix(pose[:3, :3])
        ctrl.offer_odometry(t + period, pose[0, 3], pose[1, 3], heading_from_quaternion(*quat))
        centroids[k], headings[k] = _axis_heading(poses)
        gains[k] = math.exp(ctrl.trim._log_g) if ctrl.trim.enabled else 1.0
        phases[k] = ctrl.scheduler.state().phase_rad
    score = duration_s / 2 if score_s is None else score_s
    first = max(0, count - int(round(score * rate_hz)))
    sl = slice(first, None)
    phase = phases[sl] if phases[-1] >= phases[first] else -phases[sl]      # backwards: mirror the phase
    fwd, left, turn, cycles = cycle_motion(times[sl], phase, centroids[sl], headings[sl])
    duration = float(np.interp(phase[0] + 2 * math.pi * cycles, phase, times[sl]) - times[first])
    per_s = cycles / duration
    arc = CycleSample(0.0, 0.0, fwd, left, turn, cycles)
    state = ctrl.status()
    return CommandResult(robot.name, gait, tuple(command), arc.drive('forward') * per_s,
                         arc.drive('lateral') * per_s, turn * per_s, ctrl.trim.state(), state.gait.mapping,
                         state.gait.reachable, times, gains)
