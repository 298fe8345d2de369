"""cmd_vel against the motion it gets: a gait driven through the gait controller in the MuJoCo world,
the commanded speed and yaw rate compared with the true ones (issue 13's acceptance).

Measured (achieved_motion, pure numpy) from the recorded link poses:

- the body axis: the floor direction from the centroid of the tail half of the link centres to that of
  the head half (validation.runs.body_motion's axis, shape-independent); its heading theta (unwrapped);
- the window: whole gait cycles where the run holds one or more (the gait's phase at the end equals its
  phase at the start, modulo 2 pi, so the body wave's wiggle cancels), else the whole run;
- yaw rate = (theta_end - theta_start) / T; the centroid's displacement d over the window, stretched from
  the chord to the length of the path (the turn times the centroid's mean distance from the centre of
  the turn, as the stride model measures a cycle) and split along the x (forward) and y (left) of the
  window's mean heading: forward and lateral speed = those / T;
- heading drift (deg/m) = |dtheta| / |d|, judged when no turn is commanded; translation per radian
  (m/rad) = |d| / |dtheta|, judged for turning on the spot.

Acceptance (ACCEPTANCE): speed within +-10 % of the command, yaw rate within +-15 % or +-0.03 rad/s
(whichever is wider, so near-zero yaw rates are held to 0.03 rad/s), heading drift under 2 deg/m
without a turn command, turning on the spot under 0.05 m per radian.

The runs use validation physics (runs.VALIDATION_PHYSICS: MuJoCo's elliptic friction cone; the
pyramidal one propels bodies that Coulomb friction would not, docs/physics.md), and the gait
controller open loop with the robot's calibration (controller_goal_fn).

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

from snake_control.gaits import catalog
from snake_control.gaits.controller import GaitController
from snake_control.gaits.reach import cmd_vel_meaning
from snake_control.physics.world import SnakeWorld
from snake_control.robot import Robot, load_robot
from snake_control.teleop.command_filter import CommandLimits
from snake_control.validation import runs as V

PI = math.pi
_STRAIGHT_RAD = 0.05    # a window turning less is measured along its chord (no centre to speak of)


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
    used), distance (m, |displacement|) and turn (rad) over the window."""

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


def whole_cycle_window(phases_rad: np.ndarray) -> tuple[int, int, int]:
    """(first, last, cycles): the longest window from sample 0 spanning whole gait cycles (the phase at
    `last` differs from the phase at 0 by cycles x 2 pi, to the nearest sample); (0, T - 1, 0) when the
    phase moves less than one cycle. Works for either direction of the phase."""
    phases = np.asarray(phases_rad, dtype=float)
    if phases.ndim != 1 or phases.size < 2:
        raise ValueError(f'phases_rad must have shape (T >= 2,), got {phases.shape}')
    moved = np.abs(phases - phases[0])
    cycles = int(moved.max() // (2 * PI))
    if cycles < 1:
        return 0, phases.size - 1, 0
    # The last sample nearest the phase of `cycles` whole cycles (the phase is monotonic once running).
    last = int(np.argmin(np.abs(moved - cycles * 2 * PI)))
    return 0, last, cycles


def achieved_motion(times_s: np.ndarray, link_poses: np.ndarray, phases_rad: np.ndarray) -> Achieved:
    """The true motion of a recorded run (module docstring): times (T,) s, poses (T, n_links, 4, 4) world,
    the gait's phase (T,) rad at each sample.

    Example: a straight body (head toward +x) sliding 1 m along +y in 10 s without turning moves
    0 m/s forward, 0.1 m/s left, at yaw rate 0.
    """
    times = np.asarray(times_s, dtype=float)
    heading, centroid = body_axis_headings(link_poses)
    if times.shape != heading.shape or np.asarray(phases_rad).shape != heading.shape:
        raise ValueError(f'times_s {times.shape}, phases_rad {np.shape(phases_rad)} and link_poses '
                         f'{np.shape(link_poses)[:1]} must have the same number of samples')
    i0, i1, cycles = whole_cycle_window(phases_rad)
    span = float(times[i1] - times[i0])
    if span <= 0:
        raise ValueError('the run must last longer than one sample')
    turn = float(heading[i1] - heading[i0])
    d = centroid[i1] - centroid[i0]
    chord = float(np.linalg.norm(d))
    stretch = 1.0
    if abs(turn) > _STRAIGHT_RAD and chord > 0:
        # The path's length is the turn times the centroid's mean distance from the turn's centre, the
        # fixed point z of the window's rigid motion (R z + t = z): the centroid at one phase can sit
        # inside or outside its mean path by the wave's wiggle, so the chord alone would make left and
        # right turns differ (the stride model uses the same mean distance, gaits/stride.py).
        c, s_ = math.cos(turn), math.sin(turn)
        rot = np.array([[c, -s_], [s_, c]])
        t = centroid[i1] - rot @ centroid[i0]
        z = np.linalg.solve(np.eye(2) - rot, t)
        radius = float(np.mean(np.linalg.norm(centroid[i0:i1 + 1] - z, axis=1)))
        stretch = radius * abs(turn) / chord
    # The mean body axis over the window: over whole cycles the wave's swing of the axis cancels (the
    # axis at one phase can point well off the direction of travel), and a steady turn averages to its
    # middle.
    mid = float(np.mean(heading[i0:i1 + 1]))
    x, y = np.array([math.cos(mid), math.sin(mid)]), np.array([-math.sin(mid), math.cos(mid)])
    return Achieved(float(d @ x) * stretch / span, float(d @ y) * stretch / span, turn / span, span, cycles,
                    float(np.linalg.norm(d)), turn)


@dataclass
class CommandResult:
    """One run: robot and gait, the command (linear.x, linear.y, angular.z), what it achieved, and the
    estimator scored on the same run (validation.runs.ValidationResult, None when not run). followed:
    the command fields the gait follows (gaits.reach); run False: not simulated (a turn for a gait that
    does not turn)."""

    robot: str
    gait: str
    command: tuple
    follows: tuple
    achieved: Achieved | None = None
    estimate: V.ValidationResult | None = field(default=None, repr=False)
    run: bool = True


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


def controller_goal_fn(robot: Robot, gait: str, command, params=None, period_s: float | None = None):
    """(goal_fn(t) -> joint goals rad, phase_fn(t) -> the gait's phase rad then): the gait controller, as
    the gait node runs it, started from the straight body and offered `command` at every tick. goal_fn's
    t (s) must not decrease; phase_fn reads the phases goal_fn went through (interpolated in t).

    Open loop: cmd_vel is mapped through the robot's calibration where one is shipped beside its YAML
    (as the gait node loads it), else the no-slip model or the stride parameter; the closed loop is off,
    because it trims over several gait cycles of odometry and these runs last one
    (validation/command_runs.py runs it with the estimator).
    """
    period = period_s or 1.0 / robot.bus.control_rate_hz
    controller = GaitController(robot, gait, period_s=period, limits=_LIMITS, cmd_timeout_s=0.5,
                                overrides={gait: dict(params or {})}, closed_loop=False)
    controller.start(np.zeros(robot.n_joints))
    times, phases = [], []
    last = {'q': None}

    def goal_fn(t_s: float) -> np.ndarray:
        if times and t_s < times[-1]:
            raise ValueError(f'gait time went backwards: {t_s} after {times[-1]}')
        if not times or t_s > times[-1]:
            controller.offer_command(*command, now_s=t_s)
            last['q'] = controller.tick(t_s).positions_rad
            times.append(t_s)
            phases.append(controller.status().gait.phase_rad)
        return last['q']

    def phase_fn(t_s):
        return np.interp(t_s, times, phases)

    return goal_fn, phase_fn


def run_command(robot: Robot | str, gait: str, command, params=None, duration_s: float = 10.0,
                warmup_s: float = V.WARMUP_S, options=None, estimate: bool = True) -> CommandResult:
    """Drive `gait` at `command` (linear.x m/s, linear.y m/s, angular.z rad/s) in MuJoCo for duration_s
    after warmup_s and measure what it achieved; estimate: also score the estimator on the run."""
    if isinstance(robot, (str, Path)):
        robot = load_robot(robot)
    command = tuple(float(c) for c in command)
    if len(command) != 3 or not all(math.isfinite(c) for c in command):
        raise ValueError(f'command must be three finite numbers (linear.x, linear.y, angular.z), got {command}')
    follows = cmd_vel_meaning(robot, gait, params).follows
    goal_fn, phase_fn = controller_goal_fn(robot, gait, command, params)
    world = SnakeWorld(robot, options=options or V.VALIDATION_PHYSICS)
    rate = robot.bus.control_rate_hz
    rec = V.simulate(world, goal_fn, duration_s, rate, warmup_s=warmup_s)
    offset = round(warmup_s * rate) / rate
    phases = phase_fn(rec.times_s + offset)
    achieved = achieved_motion(rec.times_s, rec.link_poses, phases)
    est = None
    if estimate:
        options_ = {'axial_weight': V.matching_axial_weight(world.options)} if robot.kind == 'pitch_yaw' else {}
        est = V.evaluate(rec, gait, **options_)
    return CommandResult(robot.name, gait, command, follows, achieved, est)


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
    clamp = {'linear.x': 0.15, 'linear.y': 0.1, 'angular.z': 0.8}[m.drive]
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


def run_acceptance(robot: Robot, gait: str, commands=None, estimate: bool = True, progress=None
                   ) -> list[CommandResult]:
    """The acceptance runs of one gait (acceptance_commands unless given), each one gait cycle long
    within cycle_duration_s's bounds; a command the gait does not follow is listed, not run."""
    results = []
    follows = cmd_vel_meaning(robot, gait).follows
    for command in commands if commands is not None else acceptance_commands(robot, gait):
        unfollowed = [a for a, v in zip(('linear.x', 'linear.y', 'angular.z'), command) if v and a not in follows]
        if unfollowed:
            results.append(CommandResult(robot.name, gait, tuple(command), follows, run=False))
        else:
            results.append(run_command(robot, gait, command, duration_s=cycle_duration_s(robot, gait, command),
                                       estimate=estimate))
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
