"""snake torques: the joint torques a recorded or generated joint trajectory needs, against the servos."""

from snake_control.commands import options

HELP = 'check a joint-trajectory CSV against the servo stall torque (seed 001 dynamics)'
DESCRIPTION = '''Estimate the joint torques a joint trajectory needs and compare them with the stall torque.

Reads a joint-trajectory CSV (header t,<joint name>,...; time in s, angles in rad, every joint of the
robot, any column order), as written by `snake gait --csv`, differentiates it in time, and computes the
joint torques with seed 001's moving-frame dynamics. Support models (--support): ground (default: the
robot lies on the ground, weight carried by the contacts, lifted runs of links held by the joints),
free (floating in space), fixed (tail clamped, gravity along -z of the tail link). Friction is not
included: keep a margin with --fraction. Prints peak and RMS torque per joint and the joints and
times (or gait phases, with --period) above the fraction; exit code 1 if any joint exceeds it.

  snake gait --robot pitch_yaw_32 --gait sidewinding --duration 4 --csv side.csv
  snake torques --robot pitch_yaw_32 --csv side.csv --period 2 --fraction 0.7'''


def add_arguments(parser):
    parser.add_argument('--robot', required=True, help='shipped robot name or robot YAML path')
    parser.add_argument('--csv', required=True, type=options.input_file, help='joint-trajectory CSV: t,<joint names>')
    parser.add_argument('--fraction', type=float, default=0.8,
                        help='fraction of the stall torque that counts as too much (default 0.8)')
    parser.add_argument('--period', type=float, default=None,
                        help='gait period in s: report gait phases (from the first row) instead of times')
    parser.add_argument('--support', choices=('ground', 'free', 'fixed'), default='ground',
                        help='what holds the robot (default ground)')
    parser.add_argument('--contact-tolerance', type=float, default=None, metavar='M',
                        help='ground support: link centres this close to the lowest rest on the ground '
                             '(default a quarter of the module radius)')


def read_trajectory_csv(path, robot):
    """(t (T,), q (T, n)) from a joint-trajectory CSV, columns reordered to the robot's joint order."""
    import numpy as np

    try:
        with open(path, encoding='utf-8') as f:
            header = f.readline().strip()
    except UnicodeDecodeError:
        raise ValueError(f'{path}: not a UTF-8 CSV file') from None
    names = [h.strip() for h in header.split(',')]
    if not names or names[0] != 't':
        raise ValueError(f'{path}: the header must start with t, got {header!r}')
    missing = [n for n in robot.joint_names if n not in names]
    unknown = [n for n in names[1:] if n not in robot.joint_names]
    if missing or unknown:
        def few(items):
            return ', '.join(items[:4]) + (f' and {len(items) - 4} more' if len(items) > 4 else '') or 'none'
        raise ValueError(f'{path}: columns do not match robot {robot.name}: missing {few(missing)}; '
                         f'unknown {few(unknown)}')
    try:
        data = np.loadtxt(path, delimiter=',', skiprows=1, ndmin=2)
    except ValueError as exc:
        raise ValueError(f'{path}: not a numeric CSV below the header ({exc})') from None
    if data.shape[1] != len(names):
        raise ValueError(f'{path}: {data.shape[1]} values per row, header has {len(names)}')
    order = [names.index(n) for n in robot.joint_names]
    return data[:, 0], data[:, order]


def run(args) -> int:
    from snake_control.dynamics.torques import gait_torque_report
    from snake_control.robot import load_robot

    robot = load_robot(args.robot)
    t, q = read_trajectory_csv(args.csv, robot)
    report = gait_torque_report(robot, t, q, args.fraction, period_s=args.period, support=args.support,
                                contact_tolerance_m=args.contact_tolerance)
    print(f'{robot.name}: {len(t)} samples over {t[-1] - t[0]:.3f} s from {args.csv}')
    print(report.table())
    print(('' if report.ok else 'warning: ') + report.message)
    return 0 if report.ok else 1
