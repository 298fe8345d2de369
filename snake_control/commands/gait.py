"""snake gait: joint trajectories of a gait, with its fit error against its backbone curve."""

import math
from dataclasses import dataclass

from snake_control.commands import options

HELP = 'run a gait offline: joint trajectories (CSV), a plot, and the fit error against its backbone curve'
DESCRIPTION = '''Run the gait scheduler offline for one gait and report what it commands.

The gait starts at phase 0 and is driven at --speed along its own drive direction (forward gaits by
cmd_vel linear.x, sideways gaits by linear.y, turn_in_place by angular.z); --turn adds angular.z.
For backbone (MCC) gaits the RMS distance between the chain and its continuous curve is printed.

  snake gait --list
  snake gait --robot pitch_yaw_32 --fit-report
  snake gait --robot pitch_yaw_32 --gait serpentine --duration 10 --rate 100 --csv serp.csv --plot serp.png
  snake gait --robot pitch_yaw_32 --gait s_crawler --set lam=0.2 --set psi0=0.5 --duration 5
  snake gait --robot kinematic_snake_3 --gait kinematic_snake_preset --duration 6.3 --csv ks3.csv
  snake gait --robot pitch_yaw_32 --gait aeh_sidewinding --speed 0.05 --torques --physics mujoco

CSV: header t,<joint name>,... ; time in s, joint angles in rad (the robot's convention, tail to head).'''


def add_arguments(parser):
    parser.add_argument('--list', action='store_true',
                        help='list every gait with its parameters and what cmd_vel means to it, and exit; with '
                             '--robot also each gait\'s reach on that robot (torque checks: about 30 s for '
                             'pitch_yaw_32)')
    parser.add_argument('--fit-report', action='store_true',
                        help='print the chain-to-curve fit error of every backbone gait on --robot and exit')
    parser.add_argument('--robot', help='shipped robot name or robot YAML path')
    parser.add_argument('--gait', help='gait name (see --list)')
    parser.add_argument('--set', action='append', default=[], metavar='NAME=VALUE', type=options.name_value,
                        help='override a gait parameter (repeatable), in the units shown by --list')
    parser.add_argument('--duration', type=options.in_range('trajectory_duration_s'), default=10.0,
                        help='seconds to run (default 10, at most an hour)')
    parser.add_argument('--rate', type=options.in_range('control_rate_hz'), default=100.0,
                        help='control rate in Hz (default 100)')
    parser.add_argument('--speed', type=float, default=None,
                        help='command along the gait\'s drive direction (m/s, rad/s for turn_in_place); '
                             'default: half a gait cycle per second')
    parser.add_argument('--turn', type=float, default=0.0, help='angular.z command in rad/s (default 0)')
    parser.add_argument('--csv', type=options.output_file, help='write the joint trajectory to this CSV file')
    parser.add_argument('--plot', type=options.output_file, help='write a plot (joint heatmap and the backbone: from above for planar robots, 3D otherwise) to this image file')
    parser.add_argument('--torques', action='store_true',
                        help='estimate the joint torques the gait needs (robot on the ground, seed 001 '
                             'dynamics) and compare peak and RMS with the servo stall torque')
    parser.add_argument('--torque-fraction', type=float, default=0.8, metavar='F',
                        help='joints above this fraction of the stall torque fail the check: exit code 1 '
                             '(default 0.8)')
    parser.add_argument('--physics', choices=('model', 'mujoco'), default='model',
                        help='with --torques: model (default) checks the torque model alone; mujoco also '
                             'drives the trajectory in the MuJoCo world and checks each servo\'s drive there '
                             '(P gain x position error, which also pays the motor\'s back-EMF at speed, '
                             'floor friction and contact forces): exit code 1 if either fails')


def _parse_sets(items):
    """The --set (name, value text) pairs as gait parameters {name: float}."""
    from snake_control.commands import CommandError
    out = {}
    for name, value in items:
        try:
            out[name] = float(value)
        except ValueError:
            raise CommandError(f'--set {name}: value must be a number, got {value.strip()!r}') from None
    return out


TORQUE_FRACTION = 0.8     # the torque check's default fraction of stall (gait_node, snake gait --torques)


@dataclass(frozen=True)
class CmdVelRow:
    """cmd_vel for one gait on one robot, as `snake gait --list --robot R` and the README print it."""

    robot: str
    gait: str
    follows: str
    reach: str
    outside: str


def cmd_vel_rows(robot, fraction: float = TORQUE_FRACTION) -> list[CmdVelRow]:
    """Every moving gait's meaning of cmd_vel on robot (gaits.reach), its top speed lowered to where the
    torque check passes at `fraction` of stall (dynamics.gait_check.max_speed_within_torque; slow: about
    3 s per gait on pitch_yaw_32)."""
    from snake_control.dynamics.gait_check import max_speed_within_torque
    from snake_control.gaits import reach

    from snake_control.gaits import catalog

    rows = []
    for m in reach.meanings(robot):
        # The torque check runs the gait through its stride parameter: check it at the same phase rate
        # cap and scale the reach by the share of the cap that passes.
        spec = catalog.gait_spec(m.gait)
        param_top = abs(catalog.resolve_params(spec, robot)['stride']) * m.max_phase_rate_rad_s / (2 * math.pi)
        passed, _ = max_speed_within_torque(robot, m.gait, param_top, fraction=fraction)
        speed = m.max_speed * passed / param_top if param_top > 0 else m.max_speed
        text = m.reach_text()
        outside = m.outside_text()
        if speed < m.max_speed - 1e-9:
            text = text.replace(f'+-{m.max_speed:.3g} {m.speed_unit}',
                                f'+-{speed:.3g} {m.speed_unit} (torque; joint speed {m.max_speed:.3g})', 1)
            outside = (f'above {speed:.3g} {m.speed_unit}: more than {fraction:g} of stall torque, not '
                       f'clamped (the servos fall behind); ' + outside)
        rows.append(CmdVelRow(robot.name, m.gait, ', '.join(m.follows), text, outside))
    return rows


def cmd_vel_table(robots, fraction: float = TORQUE_FRACTION) -> str:
    """The README's markdown table of cmd_vel_rows over robots (Robot objects)."""
    lines = ['| robot | gait | follows | reach | beyond the reach |', '|---|---|---|---|---|']
    for robot in robots:
        for r in cmd_vel_rows(robot, fraction):
            lines.append(f'| {r.robot} | {r.gait} | {r.follows} | {r.reach} | {r.outside} |')
    return '\n'.join(lines) + '\n'


def list_text(robot=None) -> str:
    """Every gait with its robot kinds, cmd_vel meaning, turning and parameters (units, defaults,
    meaning). With a robot, each gait's reach on it too (cmd_vel_rows: torque checks, a few seconds per
    gait)."""
    from snake_control.gaits import catalog
    lines = []
    rows = {} if robot is None else {r.gait: r for r in cmd_vel_rows(robot)}
    for name, spec in catalog.GAITS.items():
        fits = '' if robot is None or robot.kind in spec.kinds else f'  [not for {robot.name}]'
        drive = {'forward': 'linear.x', 'lateral': 'linear.y', 'turn': 'angular.z', None: 'none'}[spec.drive]
        lines.append(f'{name}  ({spec.family}; robots: {", ".join(spec.kinds)}; driven by {drive}){fits}')
        lines.append(f'    {spec.description}')
        if spec.turn_param:
            lines.append(f'    turning: {spec.turn_param} += {spec.turn_gain:g} x angular.z, at most '
                         f'{spec.turn_max:g} {spec.param(spec.turn_param).unit}')
        if name in rows:
            row = rows[name]
            lines.append(f'    cmd_vel on {robot.name}: follows {row.follows}; reach {row.reach}')
            lines.append(f'    beyond the reach: {row.outside}')
        elif robot is None and spec.drive:
            follows = [drive] + (['angular.z'] if spec.turn_param and spec.drive != 'turn' else [])
            ignored = [a for a in ('linear.x', 'linear.y', 'angular.z') if a not in follows]
            lines.append(f'    cmd_vel: follows {", ".join(follows)}; ignores {", ".join(ignored)}; its reach on a '
                         'robot: snake gait --list --robot R')
        for p in spec.params:
            default = p.describe_default()
            if robot is not None and callable(p.default):
                default += f' = {p.resolve(robot):.6g}'
            lines.append(f'    {p.name:<14} {p.unit:<10} default {default:<34} {p.meaning}')
        lines.append('')
    return '\n'.join(lines).rstrip() + '\n'


def write_csv(path, robot, t, q) -> None:
    import numpy as np
    header = 't,' + ','.join(robot.joint_names)
    np.savetxt(path, np.column_stack([t, q]), delimiter=',', header=header, comments='', fmt='%.9g')


def plot(path, robot, name, params, t, q, phases, instants=4) -> None:
    """Heatmap of joint angles (joint x time) and the 3D backbone at a few instants against its curve."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    from snake_control.gaits import backbone
    from snake_control.gaits.report import gait_shape
    from snake_control.kinematics.chain import robot_frames

    shape = gait_shape(robot, name, params)
    fig = plt.figure(figsize=(13, 5.5))
    ax = fig.add_subplot(1, 2, 1)
    im = ax.imshow(q.T, aspect='auto', origin='lower', cmap='RdBu_r',
                   extent=[t[0], t[-1], -0.5, q.shape[1] - 0.5],
                   vmin=-np.abs(q).max(), vmax=np.abs(q).max(), interpolation='nearest')
    ax.set_xlabel('time (s)')
    ax.set_ylabel('joint (0 = tail)')
    ax.set_title(f'{name} on {robot.name}: joint angles')
    fig.colorbar(im, ax=ax, label='rad')
    planar = robot.kind == 'planar'
    # A planar robot never leaves the floor: draw it from above, without a made-up height.
    ax3 = fig.add_subplot(1, 2, 2) if planar else fig.add_subplot(1, 2, 2, projection='3d')
    span_hint = 0.25 * robot.n_links * robot.link_length_m
    picks = np.linspace(0, len(t) - 1, instants).round().astype(int)
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for k, i in enumerate(picks):
        frames = robot_frames(robot, q[i])
        joints = frames[:-1, :3, 3] + frames[:-1, :3, 0] * (0.5 * robot.link_length_m)
        pts = np.vstack([frames[0, :3, 3], joints, frames[-1, :3, 3]])
        # Show each instant in its principal-axis frame (virtual chassis: x along the body), side by side.
        centre = pts.mean(0)
        _, _, vt = np.linalg.svd(pts - centre)
        if vt[0] @ (pts[-1] - pts[0]) < 0:
            vt[0] *= -1
        vt[2] = np.cross(vt[0], vt[1])
        if planar:      # keep the floor's normal as z: the top view is the x-y plane of the body
            heading = np.arctan2(vt[0, 1], vt[0, 0])
            vt = np.array([[np.cos(heading), np.sin(heading), 0.0], [-np.sin(heading), np.cos(heading), 0.0],
                           [0.0, 0.0, 1.0]])
        offset = np.array([0.0, -0.5 * k * span_hint, 0.0]) if planar else np.array([0.0, 0.0, -0.5 * k * span_hint])
        place = lambda p: (p - centre) @ vt.T + offset  # noqa: E731
        chain = place(pts)
        if shape.spec.family == 'mcc':
            # the target curve at this instant's phase, aligned onto the chain's joints
            curve, s0 = shape.curve(phases[i])
            s, _, _ = backbone.joint_windows(robot.axes, robot.link_length_m, s0)
            s_fine = np.linspace(s[0], s[-1], 8 * len(s) - 7)
            c = backbone.curve_points(curve, s_fine, 16)
            r, tr = backbone.kabsch_align(c[::8], joints)
            ax3.plot(*place(c @ r.T + tr).T[:2 if planar else 3], '-', color='0.6', lw=4, alpha=0.6,
                     label='target curve' if k == 0 else None)
        ax3.plot(*chain.T[:2 if planar else 3], '-o', ms=2, lw=1.2, label=f'chain t = {t[i]:.2f} s')
        lo, hi = np.minimum(lo, chain.min(0)), np.maximum(hi, chain.max(0))
    ax3.set_title(('backbone from above, ' if planar else 'backbone ') + 'in its principal axes (chain FK'
                  + ('; grey: target curve)' if shape.spec.family == 'mcc' else ')')
                  + ('; instants stacked in y' if planar else '; instants stacked in z'), fontsize=10)
    ax3.set_xlabel('x (m), along the body toward the head')
    ax3.set_ylabel('y (m), left of the body')
    if planar:
        ax3.set_aspect('equal', adjustable='datalim')
        ax3.grid(alpha=0.3)
    else:
        ax3.set_box_aspect(np.maximum(hi - lo, 1e-3))
        ax3.set_zlabel('z (m), up from the body')
        ax3.tick_params(labelsize=7)
    ax3.legend(fontsize=7, loc='upper left')
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args) -> int:
    import numpy as np

    from snake_control.commands import CommandError
    from snake_control.gaits import catalog
    from snake_control.gaits.report import gait_fit_error, run_gait
    from snake_control.robot import load_robot

    robot = load_robot(args.robot) if args.robot else None
    if args.list:
        print(list_text(robot), end='')
        return 0
    if args.fit_report:
        if robot is None:
            raise CommandError('--fit-report needs --robot')
        from snake_control.gaits.report import fit_report, format_fit_table
        rows = fit_report(robot)
        if not rows:
            print(f'{robot.name} has no backbone (MCC) gaits: they need pitch and yaw joints')
        else:
            print(f'RMS distance between chain FK and continuous curve after best rigid alignment, '
                  f'{robot.name}, default parameters, mean and worst of 8 phases:')
            print(format_fit_table(rows))
        return 0
    if robot is None or not args.gait:
        raise CommandError('--robot and --gait are required (or --list)')
    if args.physics != 'model' and not args.torques:
        raise CommandError('--physics mujoco checks the torques: add --torques')
    params = _parse_sets(args.set)
    spec = catalog.gait_spec(args.gait)
    catalog.check_gait_fits(spec, robot)
    catalog.resolve_params(spec, robot, params)       # fail on bad --set before running
    if round(args.duration * args.rate) < 1:
        raise CommandError(f'--duration {args.duration:g} s is shorter than one tick at --rate {args.rate:g} Hz')
    res = run_gait(robot, args.gait, params, args.duration, args.rate, args.speed, args.turn)
    t, q, ticks = res.t_s, res.positions_rad, res.ticks
    st = res.scheduler.state()
    print(f'{args.gait} on {robot.name}: {len(t) - 1} ticks at {args.rate:g} Hz over {t[-1]:.3f} s; '
          f'final phase {st.phase_rad:.3f} rad, phase rate {st.phase_rate_rad_s:.3f} rad/s')
    vel = np.abs(np.array([tk.velocities_rad_s for tk in ticks]))
    print(f'max joint speed {vel.max():.3f} rad/s (limit {robot.velocity_limit_rad_s.min():.3f}); '
          f'ticks with a joint at its limit: {sum(1 for tk in ticks if tk.saturated)}; '
          f'ticks rate-limited: {sum(1 for tk in ticks if tk.rate_limited)}')
    fit = gait_fit_error(robot, args.gait, params, np.linspace(0, 2 * np.pi, 8, endpoint=False))
    if fit is None:
        print('fit error: none (a joint-space gait has no backbone curve)')
    else:
        print(f'fit error against the backbone curve: RMS {1e3 * fit["rms_m"]:.3f} mm '
              f'(worst phase {1e3 * fit["max_rms_m"]:.3f} mm; angles beyond joint limits by up to '
              f'{fit["limit_excess_rad"]:.3f} rad)')
    over_torque = False
    if args.torques:
        from snake_control.dynamics.torques import gait_torque_report
        report = gait_torque_report(robot, t, q, args.torque_fraction, phase_rad=res.phases_rad)
        print(report.table())
        print(('' if report.ok else 'warning: ') + report.message)
        over_torque = not report.ok
        if args.physics == 'mujoco':
            from snake_control.validation.servo_load import simulated_torque_report
            measured = simulated_torque_report(robot, t, q, args.torque_fraction, phase_rad=res.phases_rad)
            print('in the MuJoCo world:')
            print(measured.table())
            print(('' if measured.ok else 'warning: ') + measured.message)
            over_torque = over_torque or not measured.ok
    if args.csv:
        write_csv(args.csv, robot, t, q)
        print(f'wrote {args.csv}')
    if args.plot:
        plot(args.plot, robot, args.gait, params, t, q, res.phases_rad)
        print(f'wrote {args.plot}')
    # Like `snake torques`: a script can refuse a gait that overloads the servos (files still written).
    return 1 if over_torque else 0
