"""snake validate: score the state estimator against MuJoCo ground truth."""
HELP = 'drive robots with gaits in MuJoCo and score the state estimator against the ground truth'
DESCRIPTION = '''Drive each robot with a gait in the MuJoCo world (snake_control.physics), run the state
estimator on the joint angles the servos measure, and compare its final pose with the ground truth.

Printed per run: distance travelled (path length of the robot's centroid), final position error (m and
% of the distance), final heading error (deg and deg per metre), the estimator's RMS slip residual, for
pitch-yaw robots how well its ground contacts match the modules really on the floor (1 = always the
same set), and the aim (planar wheeled snakes: 3 % and 2 deg/m; pitch-yaw gaits: 10 %, and with the
IMU 1 deg/m). Pitch-yaw runs are scored twice from the same motion: without and with the world's IMU
(a gyro and accelerometer in the head, with noise and bias, fused by the estimator). A WARN line
follows the table for each run that misses its aim.

Runs (the issue's validation set): lateral undulation on wheeled_8 and kinematic_snake_3; serpentine,
sidewinding (serpenoid and AEH) and rolling on pitch_yaw_32. Each starts after a warm-up in which the
gait blends in. Serpenoid sidewinding's contacts slip in MuJoCo, so it misses the aim by design of the
no-slip contact model; AEH-sidewinding is the sidewinding run the aim is for.

  snake validate
  snake validate --robot pitch_yaw_32 --gait rolling --duration 30 --plot paths.png
  snake validate --check          # exit 1 when a run misses its aim'''


def add_arguments(parser):
    parser.add_argument('--robot', action='append',
                        help='only runs on this robot (repeatable; default: all of them)')
    parser.add_argument('--gait', action='append', help='only runs of this gait (repeatable)')
    parser.add_argument('--duration', type=float, default=20.0,
                        help='simulated seconds scored per run (default 20)')
    parser.add_argument('--warmup', type=float, default=None,
                        help='simulated seconds of gait before scoring starts (default 3)')
    parser.add_argument('--plot',
                        help='save a figure of estimated against true paths to this file (.png, .pdf)')
    parser.add_argument('--imu', nargs='?', const='sensor', default='both',
                        choices=('both', 'off', 'sensor', 'truth'),
                        help='pitch-yaw robots: score the estimator without the IMU (off), with the '
                             "world's IMU (sensor: gyro and accelerometer, noise and bias; --imu alone), "
                             'both from the same run (default), or given the true orientation of its IMU '
                             'link (truth)')
    parser.add_argument('--check', action='store_true', help='exit with status 1 if any run misses its aim')


def run(args) -> int:
    from snake_control.commands import CommandError
    from snake_control.validation import runs as V

    cases = [c for c in V.CASES if (not args.robot or c.robot in args.robot)
             and (not args.gait or c.gait in args.gait)]
    if not cases:
        known = ', '.join(f'{c.robot}/{c.gait}' for c in V.CASES)
        raise CommandError(f'no validation run matches --robot {args.robot} --gait {args.gait}; '
                           f'runs: {known}')
    if not args.duration > 0:
        raise CommandError(f'--duration must be positive, got {args.duration}')
    warmup = V.WARMUP_S if args.warmup is None else args.warmup
    if warmup < 0:
        raise CommandError(f'--warmup must not be negative, got {warmup}')
    modes = ('off', 'sensor') if args.imu == 'both' else (args.imu,)
    results = []
    for case in cases:
        results.extend(V.run_case_imu(case, args.duration, warmup, imu=modes))
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
