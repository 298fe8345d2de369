"""snake odometry: run the state estimator offline on a joint trajectory."""

import sys

from snake_control.commands import options

HELP = ('offline state estimation (odometry) from a joint-trajectory CSV or an .mcap recording; --replay: a '
        'recording as estimator_node runs it, against the truth')
DESCRIPTION = '''Run the same estimator as estimator_node over recorded joint angles and write the pose track.

Planar wheeled robots use the nonholonomic local connection of their passive wheels; pitch-yaw robots use
the virtual chassis and their ground contacts. Input: a joint-trajectory CSV (header t,<joint name>,...,
time in s, angles in rad) or an .mcap recording with sensor_msgs/JointState on joint_states.
Output: a pose CSV (t,x,y,z,qx,qy,qz,qw: the body frame in odom) and optionally a plot.

  snake gait --robot wheeled_8 --gait lateral_undulation --duration 20 --rate 100 --csv gait.csv
  snake odometry --robot wheeled_8 --input gait.csv --output pose.csv --plot pose.png
  snake odometry --robot pitch_yaw_32 --input run.mcap --body-frame chassis

--replay runs the estimator on an .mcap recording as estimator_node runs it in the graph: its input gate,
update-rate decimation and IMU fusion (imu beside joint_states, in stamp order), measurement times from
the message headers, the node's defaults and the robot YAML's, and in a recording of the MuJoCo world
(one with the truth tree /truth/tf) the parameters the graph gives the node there. It prints how far the
replay is from the odom the graph recorded and, with the truth, the end error (% of the distance
travelled, heading) and the error of each script segment (the demo's figures). Change a setting to try it
on the same inputs (--no-imu, --axial-weight, --contact-band, --set NAME=VALUE); --json for scripts.

  snake odometry --robot pitch_yaw_32 --input out/demo.mcap --replay
  snake odometry --robot pitch_yaw_32 --input out/demo.mcap --replay --contact-band 7.5 15 --json'''


def add_arguments(parser):
    parser.add_argument('--robot', required=True,
                        help='shipped robot name (pitch_yaw_32, wheeled_8, kinematic_snake_3) or a robot '
                             'YAML path')
    parser.add_argument('--input', required=True, type=options.input_file, help='joint-trajectory .csv or .mcap recording')
    parser.add_argument('--output', type=options.output_file, help='pose CSV to write (t,x,y,z,qx,qy,qz,qw)')
    parser.add_argument('--plot', type=options.output_file, help='image file for the estimated path (PNG, PDF or SVG)')
    parser.add_argument('--body-frame', default=None,
                        help="reported frame: middle, head, tail, chassis or a link index "
                             "(default: middle for planar robots, chassis for pitch-yaw robots)")
    parser.add_argument('--topic', default=None,
                        help='JointState topic in an .mcap (default: the one named joint_states)')
    parser.add_argument('--axial-weight', type=float, default=None,
                        help='pitch-yaw robots: weight of the no-slip condition along each module, '
                             '(axial / lateral skin friction)^2 (0..1; default: the robot YAML\'s '
                             'link.axial_weight)')
    replay = parser.add_argument_group('replay (--replay, .mcap recordings)')
    replay.add_argument('--replay', action='store_true',
                        help='run the estimator as estimator_node does (input gate, decimation, IMU fusion) '
                             'and compare with the recorded odom and the truth tree')
    replay.add_argument('--no-imu', action='store_true', help='do not fuse the recording\'s imu')
    replay.add_argument('--world', choices=('auto', 'mujoco', 'none'), default='auto',
                        help='the node parameters of the graph in this world (default auto: mujoco when the '
                             'recording has the truth tree)')
    replay.add_argument('--contact-band', nargs=2, type=float, metavar=('ENTER_MM', 'EXIT_MM'),
                        help='pitch-yaw robots: height above the lowest module at which a module enters and '
                             'leaves ground contact, mm (default half the module radius and the radius)')
    replay.add_argument('--imu-attitude-s', type=float, default=None,
                        help='the node\'s imu_attitude_s: 0 takes the IMU attitude as it is, above 0 it pulls '
                             'the contacts\' with this time constant (s)')
    replay.add_argument('--set', action='append', default=[], metavar='NAME=VALUE', type=options.name_value,
                        help='any other estimator parameter (an Estimator keyword or an estimator_node '
                             'parameter, e.g. contact_loads=false, update_rate_hz=0); repeatable')
    replay.add_argument('--json', action='store_true', help='print the replay\'s figures as one JSON object')


def _body_frame(text):
    if text is None:
        return None
    return int(text) if text.lstrip('-').isdigit() else text


def _value(text: str):
    low = text.strip().lower()
    if low in ('true', 'false'):
        return low == 'true'
    if low in ('none', ''):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def replay_overrides(args) -> dict:
    """The estimator settings the command line changes for a replay."""
    from snake_control.commands import CommandError

    out = {name: _value(value) for name, value in args.set}
    if args.no_imu:
        out['use_imu'] = False
    if args.axial_weight is not None:
        out['axial_weight'] = args.axial_weight
    if args.body_frame is not None:
        out['body_frame'] = _body_frame(args.body_frame)
    if args.imu_attitude_s is not None:
        out['imu_attitude_s'] = args.imu_attitude_s
    if args.contact_band is not None:
        enter, exit_ = args.contact_band
        if not 0 < enter <= exit_:
            raise CommandError(f'--contact-band: expected 0 < ENTER_MM <= EXIT_MM, got {enter:g} {exit_:g}')
        out['contact_enter_m'], out['contact_exit_m'] = enter / 1000.0, exit_ / 1000.0
    return out


def run_replay(args) -> int:
    import json
    from pathlib import Path

    from snake_control.app.replay import replay_recording
    from snake_control.commands import CommandError

    if Path(args.input).suffix.lower() != '.mcap':
        raise CommandError(f'--replay: {args.input}: expected an .mcap recording')
    report = replay_recording(args.input, args.robot, topic=args.topic, world=args.world,
                              **replay_overrides(args))
    if args.output:
        from snake_control.estimation.trajectory_io import write_pose_csv
        write_pose_csv(args.output, report.track.t_s, report.track.pose_xyz_quat)
    if args.plot:
        from snake_control.app.replay import plot_replay
        plot_replay(report, args.plot)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print('\n'.join(report.lines()))
        for written in (args.output, args.plot):
            if written:
                print(f'wrote {written}')
    return 0


def _announce_compile(robot_arg: str) -> None:
    """Say so before a pitch-yaw estimate waits on numba's first compile (a planar robot needs no kernels)."""
    from snake_control.estimation.kernel_loading import first_compile_notice
    from snake_control.robot import load_robot

    notice = first_compile_notice() if load_robot(robot_arg).kind != 'planar' else ''
    if notice:
        print(notice, file=sys.stderr, flush=True)


def run(args) -> int:
    _announce_compile(args.robot)
    if args.replay:
        return run_replay(args)
    if args.no_imu or args.contact_band or args.set or args.json or args.imu_attitude_s is not None \
            or args.world != 'auto':
        from snake_control.commands import CommandError
        raise CommandError('--no-imu, --world, --contact-band, --imu-attitude-s, --set and --json go with --replay')
    import numpy as np

    from snake_control.estimation.estimator import Estimator
    from snake_control.estimation.trajectory_io import read_joint_trajectory, write_pose_csv
    from snake_control.robot import load_robot

    robot = load_robot(args.robot)
    traj = read_joint_trajectory(args.input, robot.joint_names, args.topic)
    est = Estimator(robot, _body_frame(args.body_frame), axial_weight=args.axial_weight)
    times, poses, slips, singular = [], [], [], []
    for k in range(len(traj)):
        vel = None if traj.velocities_rad_s is None else traj.velocities_rad_s[k]
        before = est.skipped
        state = est.update(traj.t_s[k], traj.positions_rad[k], vel)
        if est.skipped != before:
            continue
        times.append(state.t_s)
        poses.append(state.pose_xyz_quat)
        slips.append(state.slip_rms_m_s)
        singular.append(state.singular)
    times, poses = np.array(times), np.array(poses)
    steps = np.linalg.norm(np.diff(poses[:, :3], axis=0), axis=1)
    final = est.state
    import sys
    outside = np.any((traj.positions_rad < robot.lower_rad - 0.05) | (traj.positions_rad > robot.upper_rad + 0.05),
                     axis=1)
    if outside.any():
        print(f'warning: {int(outside.sum())} of {len(outside)} samples have joint angles outside the limits of '
              f'{robot.name} (another robot, or degrees for radians?): the estimate is not meaningful there',
              file=sys.stderr)
    duration = times[-1] - times[0] if len(times) > 1 else 0.0
    speed = steps.sum() / duration if duration > 0 else 0.0
    if robot.kind == 'pitch_yaw' and len(slips) and np.mean(slips) > max(speed, 1e-3):
        print(f'warning: slip residual ({np.mean(slips):.3g} m/s) exceeds the estimated speed ({speed:.3g} m/s): '
              f'the contact model does not explain this motion; axial weight {est.axial_weight:g} '
              f'(--axial-weight, robot YAML link.axial_weight) may not match the skin', file=sys.stderr)
    print(f'robot {robot.name} ({robot.kind}), body frame {est.body_frame}, {len(times)} samples over '
          f'{times[-1] - times[0]:.3f} s' + (f', {est.skipped} stale stamps skipped' if est.skipped else ''))
    net = np.linalg.norm(poses[-1, :3] - poses[0, :3])
    print(f'path length {steps.sum():.4f} m, net displacement {net:.4f} m')
    x, y, theta = final.pose_se2
    sd = np.sqrt(max(final.pose_covariance[0, 0] + final.pose_covariance[1, 1], 0.0))
    print(f'final pose x {x:.4f} m, y {y:.4f} m, z {final.pose[2, 3]:.4f} m, '
          f'heading {np.degrees(theta):.2f} deg; position sd {sd:.4f} m')
    print(f'slip rms mean {np.mean(slips):.4g} m/s, max {np.max(slips):.4g} m/s; '
          f'near-singular in {100.0 * np.mean(singular):.1f} % of samples')
    if args.output:
        write_pose_csv(args.output, times, poses)
        print(f'wrote {args.output}')
    if args.plot:
        _plot(args.plot, robot, times, poses, np.array(slips), np.array(singular))
        print(f'wrote {args.plot}')
    return 0


def _plot(path, robot, times, poses, slips, singular):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    from snake_control.kinematics.lie import matrix_from_quaternion

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={'width_ratios': [1.3, 1]})
    ax.plot(poses[:, 0], poses[:, 1], '-', color='tab:blue', lw=1.5, label='estimated path')
    every = max(1, len(poses) // 25)
    heads = np.array([matrix_from_quaternion(q)[:, 0] for q in poses[::every, 3:]])
    ax.quiver(poses[::every, 0], poses[::every, 1], heads[:, 0], heads[:, 1], color='tab:gray', width=0.003,
              scale=25, label='body x axis')
    ax.plot(poses[0, 0], poses[0, 1], 'o', color='tab:green', label='start')
    ax.plot(poses[-1, 0], poses[-1, 1], 's', color='tab:red', label='end')
    ax.set_aspect('equal', adjustable='datalim')
    ax.set_xlabel('x (m)')
    ax.set_ylabel('y (m)')
    ax.set_title(f'{robot.name}: estimated path in odom')
    ax.grid(True, alpha=0.3)
    ax.legend(loc='best', fontsize=8)
    bx.plot(times - times[0], slips, color='tab:orange', lw=1, label='slip rms (m/s)')
    if singular.any():
        top = max(float(slips.max()), 1e-6)
        bx.fill_between(times - times[0], 0, top, where=singular, color='tab:red', alpha=0.15,
                        label='near-singular shape')
    bx.set_xlabel('t (s)')
    bx.set_ylabel('slip residual rms (m/s)')
    bx.set_title('no-slip residual')
    bx.grid(True, alpha=0.3)
    bx.legend(loc='best', fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
