"""snake validate: score the state estimator, and cmd_vel against the motion it gets, in MuJoCo."""
HELP = ('drive robots with gaits in MuJoCo: commanded against achieved speed and yaw rate, and the state '
        'estimator against the ground truth')
DESCRIPTION = '''Drive robots with gaits in the MuJoCo world (snake_control.physics, elliptic friction cone:
docs/physics.md), run the state estimator on the joint angles the servos measure, and compare with the
ground truth.

With a command (--speed, --lateral, --turn), or a robot or gait outside the issue's validation set, each
--robot (a shipped name or any robot YAML path) runs each --gait (default: the robot's default gait)
through the gait controller at that cmd_vel, for one gait cycle within 6-16 s unless --duration says
otherwise, and prints per run: the command (linear.x, linear.y m/s, angular.z rad/s), the achieved
forward and left speed and yaw rate (over whole gait cycles, in the mean body frame), their ratios to the
command, the heading drift (deg/m, without a turn command) or the translation per radian (turning on the
spot), and the estimator's final position error (% of the distance). A run outside the acceptance (speed
within 10 %, yaw rate within 15 % or 0.03 rad/s, drift under 2 deg/m, turning on the spot under 0.05 m
per radian) is marked WARN with what it missed; a command along a field the gait does not follow (snake
gait --list --robot R) is listed, not run. Without a command for a gait, it runs at 0.6 of the gait's
reach (at most the gait node's clamp).

Without a command, the issue's validation set: lateral undulation on wheeled_8 and kinematic_snake_3;
serpentine, sidewinding (serpenoid and AEH) and rolling on pitch_yaw_32, 20 s each after a warm-up,
printed as distance travelled (path length of the robot's centroid), final position error (m and % of
the distance), final heading error (deg and deg per metre), the estimator's RMS slip residual, for
pitch-yaw robots how well its ground contacts match the modules really on the floor (1 = always the
same set), and the aim (planar wheeled snakes: 3 % and 2 deg/m; pitch-yaw gaits: 10 %, and with the
IMU 1 deg/m). Pitch-yaw runs are scored twice from the same motion: without and with the world's IMU
(a gyro and accelerometer in the head, with noise and bias, fused by the estimator). A WARN line
follows the table for each run that misses its aim.

  snake validate
  snake validate --robot pitch_yaw_32 --gait rolling --duration 30 --plot paths.png
  snake validate --robot my_robot.yaml --gait wheeled_undulation --speed 0.1 --turn 0.3
  snake validate --robot pitch_yaw_32 --gait sidewinding --lateral 0.08
  snake validate --check          # exit 1 when a run misses its aim or the acceptance'''


def add_arguments(parser):
    parser.add_argument('--robot', action='append',
                        help='a shipped robot name or a robot YAML path (repeatable; default: the validation '
                             'set\'s robots)')
    parser.add_argument('--gait', action='append', help='a gait (repeatable; see snake gait --list)')
    parser.add_argument('--speed', type=float, default=None, help='cmd_vel linear.x, m/s toward the head')
    parser.add_argument('--lateral', type=float, default=None, help='cmd_vel linear.y, m/s to the left')
    parser.add_argument('--turn', type=float, default=None, help='cmd_vel angular.z, rad/s counter-clockwise')
    parser.add_argument('--duration', type=float, default=None,
                        help='simulated seconds scored per run (default 20; with a command, one gait cycle '
                             'within 6-16 s)')
    parser.add_argument('--warmup', type=float, default=None,
                        help='simulated seconds of gait before scoring starts (default 3; with a command, the '
                             'blend from rest and two gait cycles within 2-12 s, while the heading settles)')
    parser.add_argument('--plot',
                        help='save a figure of estimated against true paths to this file (.png, .pdf)')
    parser.add_argument('--imu', nargs='?', const='sensor', default='both',
                        choices=('both', 'off', 'sensor', 'truth'),
                        help='validation set: score the estimator without the IMU (off), with the world\'s '
                             'IMU (sensor: gyro and accelerometer, noise and bias; --imu alone; a wheeled '
                             'robot takes only its heading from it), both from the same run (default), or, '
                             'pitch-yaw robots, given the true orientation of its IMU link (truth)')
    parser.add_argument('--check', action='store_true',
                        help='exit with status 1 if any run misses its aim or the acceptance')


def _number(name, value, positive=False):
    import math
    from snake_control.commands import CommandError
    if value is not None and (not math.isfinite(value) or (positive and value <= 0) or value < 0):
        need = 'a positive number' if positive else 'a number >= 0'
        raise CommandError(f'{name} must be {need}, got {value}')


def run(args) -> int:
    import math

    from snake_control.commands import CommandError
    from snake_control.validation import runs as V

    _number('--duration', args.duration, positive=True)
    _number('--warmup', args.warmup)
    for name in ('speed', 'lateral', 'turn'):
        value = getattr(args, name)
        if value is not None and not math.isfinite(value):
            raise CommandError(f'--{name} must be a finite number, got {value}')
    warmup = args.warmup
    commanded = any(getattr(args, n) is not None for n in ('speed', 'lateral', 'turn'))
    known = {(c.robot, c.gait) for c in V.CASES}
    in_set = all(r in {c.robot for c in V.CASES} for r in args.robot or []) and \
        all(g in {c.gait for c in V.CASES} for g in args.gait or [])
    cases = [c for c in V.CASES if (not args.robot or c.robot in args.robot)
             and (not args.gait or c.gait in args.gait)]
    if not commanded and in_set and cases:
        return _validation_set(args, cases, V.WARMUP_S if warmup is None else warmup)
    if not args.robot:
        raise CommandError('--robot is needed with --gait outside the validation set ('
                           + ', '.join(f'{r}/{g}' for r, g in sorted(known)) + ') or with a command')
    return _commands(args, warmup)


def _validation_set(args, cases, warmup) -> int:
    from snake_control.validation import runs as V

    modes = ('off', 'sensor') if args.imu == 'both' else (args.imu,)
    results = []
    for case in cases:
        results.extend(V.run_case_imu(case, args.duration or 20.0, warmup, imu=modes))
        print(f'  {case.robot} {case.gait}: done', flush=True)
    print(V.format_table(results))
    for line in V.warnings(results):
        print(line)
    if args.plot:
        V.plot_paths(results, args.plot)
        print(f'paths: {args.plot}')
    missed = [r for r in results if not V.meets_aim(r)]
    if args.check and missed:
        print('missed the aim: ' + ', '.join(f'{r.robot}/{r.gait}' for r in missed))
        return 1
    return 0


def _commands(args, warmup) -> int:
    from snake_control.commands import CommandError
    from snake_control.gaits import catalog
    from snake_control.gaits.controller import default_gait
    from snake_control.robot import load_robot
    from snake_control.validation import cmdvel as C
    from snake_control.validation import runs as V

    plans = []
    for name in args.robot:
        robot = load_robot(name)
        for gait in args.gait or [default_gait(robot)]:
            if gait not in catalog.gaits_for(robot):
                raise CommandError(f'--gait {gait}: not a gait of {robot.name} (a {robot.kind} robot); its '
                                   f'gaits: {", ".join(catalog.gaits_for(robot))}')
            if not catalog.gait_spec(gait).drive:
                raise CommandError(f'--gait {gait}: a static shape, it does not follow cmd_vel')
            if any(getattr(args, n) is not None for n in ('speed', 'lateral', 'turn')):
                command = (args.speed or 0.0, args.lateral or 0.0, args.turn or 0.0)
            else:
                command = C.acceptance_commands(robot, gait)[1]
            plans.append((robot, gait, command))
    results = []
    for robot, gait, command in plans:
        follows = C.cmd_vel_meaning(robot, gait).follows
        unfollowed = [a for a, v in zip(('linear.x', 'linear.y', 'angular.z'), command) if v and a not in follows]
        if unfollowed:
            results.append(C.CommandResult(robot.name, gait, command, follows, run=False))
        else:
            duration = args.duration or C.cycle_duration_s(robot, gait, command)
            settle = C.settle_s(robot, gait, command) if warmup is None else warmup
            results.append(C.run_command(robot, gait, command, duration_s=duration, warmup_s=settle))
        print(f'  {robot.name} {gait} {command}: done', flush=True)
    print(C.format_rows(results))
    missed = [r for r in results if C.misses(r)]
    print(f'{len(results) - len(missed)} of {len(results)} runs within the acceptance (speed +-10 %, yaw rate '
          f'+-15 % or +-0.03 rad/s, drift < 2 deg/m, turning on the spot < 0.05 m/rad)')
    estimates = [r.estimate for r in results if r.estimate is not None]
    if args.plot and estimates:
        V.plot_paths(estimates, args.plot)
        print(f'paths: {args.plot}')
    return 1 if args.check and missed else 0
