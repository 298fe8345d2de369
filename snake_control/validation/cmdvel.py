"""cmd_vel against the motion it gets: a gait driven through the gait controller in the MuJoCo world,
the commanded speed and yaw rate compared with the true ones (issue 13's acceptance).

Measured (achieved_motion, pure numpy) from the recorded link poses:

- the body axis: the floor direction from the centroid of the tail half of the link centres to that of
  the head half (validation.runs.body_motion's axis, shape-independent); its heading theta (unwrapped);
- per whole gait cycle (gaits.calibration.cycle_motion, the measure the calibration is fitted with): the
  centroid's displacement between the cycle's phase-aligned ends (interpolated to the exact phase, so
  the body wave's wiggle cancels), split along the x (forward) and y (left) of the cycle's mean heading,
  stretched from chord to the centroid's mean path (mean_path_stretch: its mean distance from the point
  the cycle turns about, times the turn, as the stride model measures it), and the heading's change; the cycles' mean times
  the cycles per second gives forward and lateral speed and yaw rate. A run holding less than one cycle
  is measured over its whole length the same way (cycles 0: the wave's swing stays in);
- heading drift (deg/m) = |turn| / distance, judged when no turn is commanded; translation per radian
  (m/rad) = distance / |turn|, judged for turning on the spot.

Acceptance (ACCEPTANCE): speed within +-10 % of the command, yaw rate within +-15 % or +-0.03 rad/s
(whichever is wider, so near-zero yaw rates are held to 0.03 rad/s), heading drift under 2 deg/m
without a turn command, turning on the spot under 0.05 m per radian.

The runs use validation physics (runs.VALIDATION_PHYSICS: MuJoCo's elliptic friction cone; the
pyramidal one propels bodies that Coulomb friction would not, docs/physics.md), and the gait
controller open loop with the robot's calibration (controller_goal_fn); run_command also runs it
closed loop, fed odometry by the state estimator on the measured joint angles (as in the node graph,
in one thread on simulated time) or by the true body pose. options=PhysicsOptions() runs on the floor
`snake calibrate` measures on, to score a calibration where it was made.

Example:
    >>> from snake_control.robot import load_robot
    >>> r = run_command(load_robot('wheeled_8'), 'wheeled_undulation', (0.15, 0.0, 0.0), duration_s=6.0)
    >>> r.achieved.cycles, abs(r.achieved.forward_m_s - 0.15) < 0.015, misses(r) == []   # one 5.5 s cycle
    (1, True, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from snake_control.estimation.estimator import BodyFrameTracker, Estimator
from snake_control.gaits import catalog
from snake_control.gaits.calibration import arc_factor, cycle_motion
from snake_control.gaits.controller import GaitController
from snake_control.gaits.scheduler import GaitScheduler
from snake_control.gaits.reach import cmd_vel_meaning
from snake_control.gaits.trim import TrimSettings, TrimState, heading_from_quaternion
from snake_control.kinematics.lie import quaternion_from_matrix, xyyaw_from_se3
from snake_control.physics.world import SnakeWorld
from snake_control.robot import Robot, load_robot
from snake_control.teleop.command_filter import CommandLimits
from snake_control.validation import runs as V
from snake_control.validation.calibration import DRIVE_CLAMPS

PI = math.pi


@dataclass(frozen=True)
class Acceptance:
    """Issue 13's acceptance: speed_rel of the speed; yaw_rel of the yaw rate or yaw_abs_rad_s, the wider;
    drift_deg_per_m without a turn command; spin_m_per_rad when turning on the spot."""

    speed_rel: float = 0.10
    yaw_rel: float = 0.15
    yaw_abs_rad_s: float = 0.03
    drift_deg_per_m: float = 2.0
    spin_m_per_rad: float = 0.05


ACCEPTANCE = Acceptance()


@dataclass(frozen=True)
class Achieved:
    """True motion over a run's window: speeds (m/s) in the mean body frame (x toward the head, y left),
    yaw rate (rad/s, CCW), window length (s) and whole gait cycles in it (0: fewer than one, the whole run
    used), distance (m: the mean cycle's displacement times the cycles) and turn (rad) over the window."""

    forward_m_s: float
    lateral_m_s: float
    yaw_rate_rad_s: float
    window_s: float
    cycles: int
    distance_m: float
    turn_rad: float

    @property
    def drift_deg_per_m(self) -> float:
        return math.degrees(abs(self.turn_rad)) / max(self.distance_m, 1e-9)

    @property
    def translation_m_per_rad(self) -> float:
        return self.distance_m / max(abs(self.turn_rad), 1e-9)


def body_axis_headings(link_poses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((T,) unwrapped heading rad of the body axis, (T, 2) centroid m) from (T, n_links, 4, 4) poses.

    The axis runs from the centroid of the tail half of the link centres to that of the head half.
    """
    poses = np.asarray(link_poses, dtype=float)
    if poses.ndim != 4 or poses.shape[2:] != (4, 4) or poses.shape[1] < 2:
        raise ValueError(f'link_poses must have shape (T, n_links >= 2, 4, 4), got {poses.shape}')
    centres = poses[:, :, :2, 3]
    half = centres.shape[1] // 2
    axis = centres[:, -half:].mean(axis=1) - centres[:, :half].mean(axis=1)
    return np.unwrap(np.arctan2(axis[:, 1], axis[:, 0])), centres.mean(axis=1)


def mean_path_stretch(times_s, phases_rad, centroid_m, heading_rad, cycles: int) -> float:
    """Mean over whole cycles of (length of the centroid's mean path) / (chord between the cycle's
    phase-aligned ends), 1 for a cycle that does not turn.

    A cycle that turns by dtheta is a rotation about one point z (its ends give it); the centroid circles
    z at a distance that swings with the body wave, so the chord between its ends depends on the phase
    the cycle starts at (wheeled_8 turning right in lateral undulation: 0.90 m or 1.14 m per cycle by
    start phase, 1.02 from a third). The mean path is that distance's mean over the cycle times
    |dtheta|, as the no-slip stride model takes it (gaits.stride.cycle_motion), whatever the start.
    """
    t, ph = np.asarray(times_s, dtype=float), np.asarray(phases_rad, dtype=float)
    c, hd = np.asarray(centroid_m, dtype=float), np.asarray(heading_rad, dtype=float)
    marks = ph[0] + 2 * PI * np.arange(cycles + 1)
    tm = np.interp(marks, ph, t)
    stretches = []
    for k in range(cycles):
        p0 = np.array([np.interp(tm[k], t, c[:, 0]), np.interp(tm[k], t, c[:, 1])])
        p1 = np.array([np.interp(tm[k + 1], t, c[:, 0]), np.interp(tm[k + 1], t, c[:, 1])])
        dth = float(np.interp(tm[k + 1], t, hd) - np.interp(tm[k], t, hd))
        chord = float(np.linalg.norm(p1 - p0))
        if abs(dth) < 0.02 or chord < 1e-9:
            stretches.append(arc_factor(dth))
            continue
        co, si = math.cos(dth), math.sin(dth)
        rot = np.array([[co, -si], [si, co]])
        z = np.linalg.solve(np.eye(2) - rot, p1 - rot @ p0)          # R (p0 - z) + z = p1
        inside = (t >= tm[k]) & (t <= tm[k + 1])
        ts = t[inside]
        radius = np.linalg.norm(c[inside] - z, axis=1)
        mean_radius = float(np.trapezoid(radius, ts) / (ts[-1] - ts[0])) if ts.size > 1 else float(radius.mean())
        stretches.append(mean_radius * abs(dth) / chord)
    return float(np.mean(stretches))


def achieved_motion(times_s: np.ndarray, link_poses: np.ndarray, phases_rad: np.ndarray) -> Achieved:
    """The true motion of a recorded run (module docstring): times (T,) s, poses (T, n_links, 4, 4) world,
    the gait's phase (T,) rad at each sample (either direction).

    Measured per whole cycle rather than over one window from the first to the last whole cycle: each
    cycle is split along its own mean heading, so a run that turns far (a closed loop run of tens of
    seconds turns several radians) still splits forward from lateral motion, where one window's mean
    heading and chord lose their meaning past half a turn; the cycle ends are interpolated to the exact
    phase, not the nearest sample; and it is the measure `snake calibrate` fits (gaits.calibration), so
    achieved speed is in the units cmd_vel is mapped with. The chord-to-arc stretch assumes the
    phase-aligned points move on a circle; the centroid's mean path differs by the wave's wiggle only.

    Example: a straight body (head toward +x) sliding 1 m along +y in 10 s without turning moves
    0 m/s forward, 0.1 m/s left, at yaw rate 0.
    """
    times = np.asarray(times_s, dtype=float)
    heading, centroid = body_axis_headings(link_poses)
    phases = np.asarray(phases_rad, dtype=float)
    if times.shape != heading.shape or phases.shape != heading.shape:
        raise ValueError(f'times_s {times.shape}, phases_rad {phases.shape} and link_poses '
                         f'{np.shape(link_poses)[:1]} must have the same number of samples')
    if times.size < 2 or not times[-1] > times[0]:
        raise ValueError('the run must last longer than one sample')
    if phases[-1] < phases[0]:
        phases = -phases            # a gait run backwards: cycle_motion wants a rising phase
    cycles = int(math.floor((phases[-1] - phases[0]) / (2 * PI) + 1e-9))
    if cycles >= 1:
        fwd, left, turn, _ = cycle_motion(times, phases, centroid, heading)
        span = float(np.interp(phases[0] + 2 * PI * cycles, phases, times) - times[0])
        per_run = cycles
        stretch = mean_path_stretch(times, phases, centroid, heading, cycles)
    else:
        # Less than a cycle: the whole run as one (time-weighted) mean-heading frame.
        mean = float(np.trapezoid(heading, times) / (times[-1] - times[0]))
        d = centroid[-1] - centroid[0]
        c, s_ = math.cos(mean), math.sin(mean)
        fwd, left, turn = c * d[0] + s_ * d[1], -s_ * d[0] + c * d[1], float(heading[-1] - heading[0])
        span, per_run = float(times[-1] - times[0]), 1
        stretch = arc_factor(turn)
    arc = stretch * per_run / span      # m per cycle of chord -> m/s along the mean path
    return Achieved(fwd * arc, left * arc, turn * per_run / span, span, cycles,
                    math.hypot(fwd, left) * per_run, turn * per_run)


@dataclass
class CommandResult:
    """One run: robot and gait, the command (linear.x, linear.y, angular.z), what it achieved, and the
    estimator scored on the same run (validation.runs.ValidationResult, None when not run). follows:
    the command fields the gait follows (gaits.reach); run False: not simulated (a turn for a gait that
    does not turn). trim: the closed loop at the end (gaits.trim.TrimState; OFF open loop); mapping and
    reachable: how the controller mapped the command (gaits.scheduler's state)."""

    robot: str
    gait: str
    command: tuple
    follows: tuple
    achieved: Achieved | None = None
    estimate: V.ValidationResult | None = field(default=None, repr=False)
    run: bool = True
    trim: TrimState | None = None
    mapping: str = ''
    reachable: bool = True


def misses(result: CommandResult, accept: Acceptance = ACCEPTANCE) -> list[str]:
    """What a run missed of the acceptance, one short phrase each ([] when it met all of it)."""
    vx, vy, wz = result.command
    if not result.run:
        return [f'{result.gait} does not follow ' + ', '.join(
            a for a, v in zip(('linear.x', 'linear.y', 'angular.z'), result.command)
            if v and a not in result.follows)]
    a = result.achieved
    out = []
    for name, want, got in (('speed', vx, a.forward_m_s), ('lateral speed', vy, a.lateral_m_s)):
        if want and abs(got - want) > accept.speed_rel * abs(want):
            out.append(f'{name} x{got / want:.2f}')
    if wz and abs(a.yaw_rate_rad_s - wz) > max(accept.yaw_rel * abs(wz), accept.yaw_abs_rad_s):
        out.append(f'yaw rate x{a.yaw_rate_rad_s / wz:.2f}')
    if not wz and abs(a.yaw_rate_rad_s) > accept.yaw_abs_rad_s:
        out.append(f'yaw rate {a.yaw_rate_rad_s:+.3f} rad/s without a turn command')
    if not wz and (vx or vy) and a.drift_deg_per_m > accept.drift_deg_per_m:
        out.append(f'drift {a.drift_deg_per_m:.1f} deg/m')
    if wz and not (vx or vy) and a.translation_m_per_rad > accept.spin_m_per_rad:
        out.append(f'translates {a.translation_m_per_rad:.3f} m/rad')
    return out


# Wide enough never to clamp an acceptance command: the table shows the gait, not the node's limits
# (gait_node clamps at max_forward_m_s 0.15, max_sideways_m_s 0.1, max_turn_rad_s 0.8 by default).
_LIMITS = CommandLimits(10.0, 10.0, 10.0, 0.3, 0.3, 2.0)


def controller_goal_fn(robot: Robot, gait: str, command, params=None, period_s: float | None = None,
                       calibration='auto', closed_loop: bool = False, trim: TrimSettings | None = None,
                       from_rest: bool = True, odometry_fn=None):
    """(goal_fn(t) -> joint goals rad, phase_fn(t) -> the gait's phase rad then, the GaitController):
    the gait controller, as the gait node runs it, offered `command` at every tick (a (linear.x,
    linear.y, angular.z) tuple, or a function of t giving one). goal_fn's t (s) must
    not decrease; phase_fn reads the phases goal_fn went through (interpolated in t).

    from_rest: start from the straight body (the gait blends in), else in the gait's own shape.
    calibration ('auto': the one shipped beside the robot's YAML, as the gait node loads it; None: the
    no-slip model or the stride parameter; or a Calibration), closed_loop and trim as GaitController's.
    odometry_fn(t) -> (x m, y m, heading rad): the body pose offered before every tick after the first
    (the closed loop trims on it).
    """
    period = period_s or 1.0 / robot.bus.control_rate_hz
    controller = GaitController(robot, gait, period_s=period, limits=_LIMITS, cmd_timeout_s=0.5,
                                overrides={gait: dict(params or {})}, calibration=calibration, trim=trim,
                                closed_loop=closed_loop)
    controller.start(np.zeros(robot.n_joints) if from_rest else None)
    times, phases = [], []
    last = {'q': None}

    def goal_fn(t_s: float) -> np.ndarray:
        if times and t_s < times[-1]:
            raise ValueError(f'gait time went backwards: {t_s} after {times[-1]}')
        if not times or t_s > times[-1]:
            # Not before the first tick: the first goal is the start shape, asked before the world is reset.
            if odometry_fn is not None and times:
                controller.offer_odometry(t_s, *odometry_fn(t_s))
            controller.offer_command(*(command(t_s) if callable(command) else command), now_s=t_s)
            last['q'] = controller.tick(t_s).positions_rad
            times.append(t_s)
            phases.append(controller.status().gait.phase_rad)
        return last['q']

    def phase_fn(t_s):
        return np.interp(t_s, times, phases)

    return goal_fn, phase_fn, controller


def turn_step_cycles(robot: Robot, gait: str, command, step_s: float, cycles: int = 2, calibration='auto',
                     options=None) -> list[Achieved]:
    """What a gait does when a turn command starts: from its own shape, `command` (linear.x, linear.y,
    angular.z) without its yaw rate until step_s (s), then with it, through the gait controller in MuJoCo
    (physics options, default the validation physics; calibration as controller_goal_fn's). Returns the
    achieved motion (achieved_motion) of each of the first `cycles` whole gait cycles after the step.
    The steady state is what the calibration was measured on; this is the transient a driver sees."""
    command = tuple(float(c) for c in command)
    straight = (command[0], command[1], 0.0)
    goal_fn, phase_fn, controller = controller_goal_fn(
        robot, gait, lambda t_s: command if t_s >= step_s else straight, calibration=calibration, from_rest=False)
    # Long enough for `cycles` cycles at the turning phase rate, as the scheduler maps the command.
    probe = GaitScheduler(robot, gait, calibration=controller.calibration)
    probe.set_command(*command)
    for _ in range(500):
        probe.step(0.01)
    rate = abs(probe.state().phase_rate_rad_s)
    if not rate > 0:
        raise ValueError(f'{gait} does not move at {command}')
    duration = step_s + (cycles + 0.5) * 2 * PI / rate
    world = SnakeWorld(robot, options=options or V.VALIDATION_PHYSICS)
    rec = V.simulate(world, goal_fn, duration, robot.bus.control_rate_hz)
    after = rec.times_s >= step_s
    t, poses = rec.times_s[after], rec.link_poses[after]
    ph = phase_fn(t)
    ph = ph if ph[-1] >= ph[0] else -ph
    marks = ph[0] + 2 * PI * np.arange(cycles + 1)
    out = []
    for k in range(cycles):
        if marks[k + 1] > ph[-1]:
            break
        inside = (ph >= marks[k] - 1e-9) & (ph <= marks[k + 1] + 2 * PI * 0.02)
        out.append(achieved_motion(t[inside], poses[inside], ph[inside]))
    return out


def _odometry_fn(robot: Robot, world: SnakeWorld, source: str):
    """odometry_fn(t) -> (x m, y m, heading rad) of the world's robot now: 'truth' (the tracked body
    frame, as motion capture would give) or 'estimator' (the state estimator on the measured joint
    angles, as in the node graph, started at the true pose of its first call)."""
    tracker = BodyFrameTracker(robot)
    options = {'axial_weight': V.matching_axial_weight(world.options)} if robot.kind == 'pitch_yaw' else {}
    state = {}

    def odometry(t_s: float):
        truth = tracker(world.link_poses())
        if source == 'truth':
            pose = truth
        else:
            if 'est' not in state:
                initial = truth if robot.kind == 'pitch_yaw' else xyyaw_from_se3(truth)
                state['est'] = Estimator(robot, initial_pose=initial, **options)
            pose = state['est'].update(t_s, world.joint_positions_rad()).pose
        return pose[0, 3], pose[1, 3], heading_from_quaternion(*quaternion_from_matrix(pose[:3, :3]))

    return odometry


def run_command(robot: Robot | str, gait: str, command, duration_s: float = 10.0, params=None, *,
                warmup_s: float = V.WARMUP_S, score_s: float | None = None, options=None,
                calibration='auto', closed_loop: bool = False, trim: TrimSettings | None = None,
                odometry: str = 'estimator', from_rest: bool = True, estimate: bool = True) -> CommandResult:
    """Drive `gait` at `command` (linear.x m/s, linear.y m/s, angular.z rad/s) in MuJoCo for duration_s
    after warmup_s and measure what it achieved over the last score_s (default: all of duration_s).

    options: physics (default runs.VALIDATION_PHYSICS); calibration, closed_loop, trim, from_rest as
    controller_goal_fn's; odometry ('estimator' or 'truth') feeds the closed loop; estimate: also score
    the estimator on the run (runs.evaluate).
    """
    if isinstance(robot, (str, Path)):
        robot = load_robot(robot)
    command = tuple(float(c) for c in command)
    if len(command) != 3 or not all(math.isfinite(c) for c in command):
        raise ValueError(f'command must be three finite numbers (linear.x, linear.y, angular.z), got {command}')
    if odometry not in ('estimator', 'truth'):
        raise ValueError(f"odometry must be 'estimator' or 'truth', got {odometry!r}")
    follows = cmd_vel_meaning(robot, gait, params).follows
    world = SnakeWorld(robot, options=options or V.VALIDATION_PHYSICS)
    odometry_fn = _odometry_fn(robot, world, odometry) if closed_loop else None
    goal_fn, phase_fn, controller = controller_goal_fn(robot, gait, command, params, calibration=calibration,
                                                       closed_loop=closed_loop, trim=trim, from_rest=from_rest,
                                                       odometry_fn=odometry_fn)
    rate = robot.bus.control_rate_hz
    rec = V.simulate(world, goal_fn, duration_s, rate, warmup_s=warmup_s)
    offset = round(warmup_s * rate) / rate
    phases = phase_fn(rec.times_s + offset)
    first = 0 if score_s is None else max(0, rec.times_s.size - 1 - int(round(score_s * rate)))
    achieved = achieved_motion(rec.times_s[first:], rec.link_poses[first:], phases[first:])
    est = None
    if estimate:
        options_ = {'axial_weight': V.matching_axial_weight(world.options)} if robot.kind == 'pitch_yaw' else {}
        est = V.evaluate(rec, gait, **options_)
    status = controller.status().gait
    return CommandResult(robot.name, gait, command, follows, achieved, est, trim=controller.trim.state(),
                         mapping=status.mapping, reachable=status.reachable)


def acceptance_commands(robot: Robot, gait: str) -> list[tuple]:
    """The acceptance table's commands for a gait: two speeds along the field that drives it, then a left
    and a right turn at the higher speed (turn_in_place: two rates left, the higher one right).

    Speeds: the higher is 0.6 of the gait's joint-velocity reach (gaits.reach), at most the gait node's
    default clamp (0.15 m/s forward, 0.1 m/s sideways, 0.8 rad/s); the lower 0.6 of it (a gait cycle
    short enough to measure whole in a bounded run). Turns: at the
    higher speed v, angular.z = v x kappa, kappa half the path curvature the stride model reaches on
    passive wheels, else one turn radius of a body length (1 / body length), a turn a user would ask for.
    """
    m = cmd_vel_meaning(robot, gait)
    if not m.follows:
        return []
    clamp = DRIVE_CLAMPS[catalog.gait_spec(gait).drive]
    hi = float(f'{min(0.6 * m.max_speed, clamp):.2g}')
    lo = float(f'{0.6 * hi:.2g}')
    slot = ('linear.x', 'linear.y', 'angular.z').index(m.drive)

    def cmd(v, wz=0.0):
        c = [0.0, 0.0, wz]
        c[slot] = v
        return tuple(c)
    if m.drive == 'angular.z':
        return [cmd(lo), cmd(hi), cmd(-hi)]
    body_m = robot.n_links * robot.link_length_m
    kappa = 0.5 * m.curvature_max_rad_m if m.curvature_max_rad_m else 1.0 / body_m
    wz = float(f'{hi * kappa:.2g}')
    return [cmd(lo), cmd(hi), cmd(hi, wz), cmd(hi, -wz)]


def cycle_duration_s(robot: Robot, gait: str, command, cycles: float = 1.0, lowest_s: float = 6.0,
                     highest_s: float = 16.0) -> float:
    """A run length holding `cycles` gait cycles at `command`, within [lowest_s, highest_s] (s): whole
    cycles measure best (achieved_motion), the bounds keep a table's run time in check."""
    m = cmd_vel_meaning(robot, gait)
    if not m.follows:
        return lowest_s
    v = abs(command[('linear.x', 'linear.y', 'angular.z').index(m.drive)])
    period = abs(m.stride) / v if v > 0 else math.inf
    # 5 % more than the cycles: the last sample must reach the phase of the last whole cycle.
    return float(min(max(1.05 * cycles * period, lowest_s), highest_s))


# The scheduler's blend from the straight body into a gait (GaitScheduler's default transition_s).
BLEND_S = 1.5
# Gait cycles after the blend before measuring: the body's heading settles over them. Serpentine on
# pitch_yaw_32 turning at 0.23 rad/s reaches 0.083, 0.181, 0.205, 0.213 rad/s in its first four cycles
# from rest (elliptic cone); a 10-joint wheeled robot going straight turns -0.25, -0.005, -0.001 rad in
# its first three: a start transient, not the gait's steady motion.
SETTLE_CYCLES = 2.0


def settle_s(robot: Robot, gait: str, command, settle_cycles: float = SETTLE_CYCLES, lowest_s: float = 2.0,
             highest_s: float = 12.0) -> float:
    """The warm-up (s) before measuring a run from rest: the blend into the gait and `settle_cycles` gait
    cycles at `command`, within [lowest_s, highest_s] (a slow gait settles for highest_s)."""
    m = cmd_vel_meaning(robot, gait)
    v = abs(command[('linear.x', 'linear.y', 'angular.z').index(m.drive)]) if m.follows else 0.0
    period = abs(m.stride) / v if v > 0 else 0.0
    return float(min(max(BLEND_S + settle_cycles * period, lowest_s), highest_s))


def run_acceptance(robot: Robot, gait: str, commands=None, estimate: bool = True, progress=None
                   ) -> list[CommandResult]:
    """The acceptance runs of one gait (acceptance_commands unless given), each one gait cycle long
    within cycle_duration_s's bounds after settle_s's warm-up; a command the gait does not follow is
    listed, not run."""
    results = []
    follows = cmd_vel_meaning(robot, gait).follows
    for command in commands if commands is not None else acceptance_commands(robot, gait):
        unfollowed = [a for a, v in zip(('linear.x', 'linear.y', 'angular.z'), command) if v and a not in follows]
        if unfollowed:
            results.append(CommandResult(robot.name, gait, tuple(command), follows, run=False))
        else:
            results.append(run_command(robot, gait, command, duration_s=cycle_duration_s(robot, gait, command),
                                       warmup_s=settle_s(robot, gait, command), estimate=estimate))
        if progress:
            progress(results[-1])
    return results


def format_rows(results: list[CommandResult], accept: Acceptance = ACCEPTANCE) -> str:
    """A text table, one row per run: command, achieved speed and yaw rate, their ratios to the command,
    drift or translation per radian, whole gait cycles measured, the estimator's error (% of the distance,
    or deg of heading when turning on the spot), and 'ok' or 'WARN <what missed>'."""
    header = (f'{"robot":<18} {"gait":<22} {"command x,y m/s; z rad/s":<26} {"achieved x, y, z":<24} '
              f'{"ratio":>7} {"yaw ratio":>9} {"deg/m":>6} {"m/rad":>6} {"cyc":>3} {"est err":>9}  verdict')
    lines = [header, '-' * len(header)]
    for r in results:
        c = r.command
        cmd = f'{c[0]:+.3g}, {c[1]:+.3g}, {c[2]:+.3g}'
        missed = misses(r, accept)
        verdict = 'ok' if not missed else 'WARN ' + '; '.join(missed)
        if not r.run:
            lines.append(f'{r.robot:<18} {r.gait:<22} {cmd:<26} {"(not run)":<24} {"":>7} {"":>9} {"":>6} '
                         f'{"":>6} {"":>3} {"":>9}  {verdict}')
            continue
        a = r.achieved
        if a.cycles == 0:
            # Ends at different phases of the wave: the body axis swings with it, so drift and yaw rate
            # carry the swing (speeds less so).
            verdict += ' (less than one gait cycle measured)'
        got = f'{a.forward_m_s:+.3f}, {a.lateral_m_s:+.3f}, {a.yaw_rate_rad_s:+.3f}'
        drive = c[0] or c[1]
        speed = (a.forward_m_s if c[0] else a.lateral_m_s)
        ratio = f'{speed / drive:.2f}' if drive else '-'
        yaw = f'{a.yaw_rate_rad_s / c[2]:.2f}' if c[2] else '-'
        drift = f'{a.drift_deg_per_m:.1f}' if drive and not c[2] else '-'
        spin = f'{a.translation_m_per_rad:.3f}' if c[2] and not drive else '-'
        # The estimator's error: of the distance when the run travels, of the heading when it spins.
        est = '-' if r.estimate is None else (f'{r.estimate.position_error_pct:.1f} %' if drive else
                                              f'{r.estimate.heading_error_deg:.1f} deg')
        lines.append(f'{r.robot:<18} {r.gait:<22} {cmd:<26} {got:<24} {ratio:>7} {yaw:>9} {drift:>6} {spin:>6} '
                     f'{a.cycles:>3} {est:>9}  {verdict}')
    return '\n'.join(lines)


def write_wheeled_robot(path, joints: int = 10, link_length_m: float = 0.12) -> Path:
    """Write a custom planar wheeled robot YAML (wheeled_8's with `joints` yaw joints and another link
    length) to path, the acceptance set's robot that is not shipped; returns the path."""
    import yaml

    from snake_control.paths import robots_dir

    data = yaml.safe_load((robots_dir() / 'wheeled_8.yaml').read_text())
    data['name'] = f'wheeled_custom_{joints}'
    data['description'] = f'{joints + 1} links on passive wheels, {joints} yaw joints (acceptance set)'
    data['link']['length_m'] = link_length_m
    data['joints'] = [{'name': f'joint_{i + 1}', 'axis': 'yaw', 'id': i + 1} for i in range(joints)]
    path = Path(path)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def locomotion_gaits(robot: Robot) -> list[str]:
    """The gaits of the acceptance table: every gait of the robot that moves it (catalog, drive set)."""
    return [g for g in catalog.gaits_for(robot) if catalog.gait_spec(g).drive]
