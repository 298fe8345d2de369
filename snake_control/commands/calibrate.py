"""snake calibrate: measure each gait's net motion per cycle and write the robot's calibration file."""
HELP = "measure gaits' motion per cycle (MuJoCo, or a recorded trajectory) and write a calibration file"
DESCRIPTION = '''Measure, per gait, the body's net motion per gait cycle against the gait's phase rate and
turning parameter, fit D(u, f) and T(u, f) (docs/gaits.md, "Calibration"), and write
<robot>.calibration.yaml beside the robot YAML (or --output). The gait node loads it and maps cmd_vel
through it: phase rate and turning offset for a speed and a yaw rate.

In MuJoCo (the default): 4 runs per gait that turns (offsets -u, 0, +u at one phase rate, 0 at a
second), 2 per gait that does not; a few seconds per gait. The runs use the elliptic friction cone,
the physics cmd_vel is validated on (--cone pyramidal: the running graph's faster one, written to
<robot>.sim.calibration.yaml, which the MuJoCo graph loads). With --gait,
only those gaits' entries in an existing file are replaced; the other gaits are kept.

From a real robot: run the gait at a known phase rate (gait/state phase_rate_rad_s) and turning
offset (turn_offset), record the body pose (the estimator's odom, or motion capture) as a pose CSV
(t,x,y,z,qx,qy,qz,qw), and pass each run with --trajectory FILE --phase-rate R [--turn U] (repeat
the three together; at least one whole gait cycle per file).

  snake calibrate --robot pitch_yaw_32
  snake calibrate --robot pitch_yaw_32 --gait serpentine --gait sidewinding --output /tmp/cal.yaml
  snake calibrate --robot my_snake.yaml --gait serpentine \\
      --trajectory run1.csv --phase-rate 2.0 --turn 0 --trajectory run2.csv --phase-rate 2.0 --turn 1.5'''


def add_arguments(parser):
    parser.add_argument('--robot', required=True, help='robot YAML name or path')
    parser.add_argument('--gait', action='append',
                        help='gait to calibrate (repeatable; default: every gait that moves)')
    parser.add_argument('--output', help='calibration file to write (default: beside the robot YAML, '
                        '<robot>.calibration.yaml; with --cone pyramidal <robot>.sim.calibration.yaml)')
    parser.add_argument('--trajectory', action='append', default=[],
                        help='pose CSV of a recorded run of the (one) --gait (repeatable)')
    parser.add_argument('--phase-rate', action='append', type=float, default=[],
                        help='phase rate (rad/s) of the matching --trajectory')
    parser.add_argument('--turn', action='append', type=float, default=[],
                        help='turning offset of the matching --trajectory (default 0)')
    parser.add_argument('--cone', choices=('elliptic', 'pyramidal'), default='elliptic',
                        help="MuJoCo's friction cone for the runs (default elliptic, the validation physics)")


def run(args) -> int:
    from datetime import datetime, timezone

    from snake_control.commands import CommandError
    from snake_control.gaits.calibration import SIM_SUFFIX, SUFFIX, Calibration, calibration_path
    from snake_control.robot import load_robot
    from snake_control.validation import calibration as V

    robot = load_robot(args.robot)
    known = V.calibratable_gaits(robot)
    for g in args.gait or []:
        if g not in known:
            raise CommandError(f'--gait {g}: not a moving gait of {robot.name}; known: {", ".join(known)}')
    out = args.output or calibration_path(robot, SIM_SUFFIX if args.cone == 'pyramidal' else SUFFIX)
    from pathlib import Path
    old = _other_gaits(out, robot, args.gait) if args.gait and Path(out).is_file() else None
    if args.trajectory or args.phase_rate or args.turn:
        if not args.gait or len(args.gait) != 1:
            raise CommandError('--trajectory needs exactly one --gait')
        if len(args.phase_rate) != len(args.trajectory) or len(args.turn) not in (0, len(args.trajectory)):
            raise CommandError(f'give one --phase-rate (and optionally one --turn) per --trajectory: '
                               f'{len(args.trajectory)} trajectories, {len(args.phase_rate)} phase rates, '
                               f'{len(args.turn)} turns')
        turns = args.turn or [0.0] * len(args.trajectory)
        fitted = V.calibrate_from_trajectories(robot, args.gait[0],
                                               list(zip(args.trajectory, args.phase_rate, turns)))
        new = Calibration(robot.name, {fitted.gait: fitted}, 'trajectory')
    else:
        import dataclasses

        from snake_control.validation.runs import VALIDATION_PHYSICS

        def progress(gait, s):
            print(f'  {gait}: rate {s.phase_rate_rad_s:.2f} rad/s, turn {s.turn:+.3f}: {s.forward_m:+.4f} m '
                  f'forward, {s.left_m:+.4f} m left, {s.turn_rad:+.4f} rad per cycle', flush=True)
        new = V.calibrate(robot, args.gait, progress=progress,
                          options=dataclasses.replace(VALIDATION_PHYSICS, cone=args.cone))
    print(V.format_table(new))
    cal = new
    if args.gait and old is not None:
        # Only the named gaits are re-measured: keep the others, and say how each part was made.
        kept = {k: v for k, v in old.gaits.items() if k not in new.gaits}
        parts = old.method.split(' + ')
        method = new.method if not kept else ' + '.join(parts + [new.method] * (new.method not in parts))
        cal = Calibration(robot.name, {**kept, **new.gaits}, method)
    header = (f'Gait calibration of {robot.name}: net body motion per gait cycle (snake calibrate, '
              f'{datetime.now(timezone.utc):%Y-%m-%d}).\n'
              'drive_per_cycle (m; rad for turn_in_place) and turn_per_cycle_rad over the turning offset u '
              'and phase rate f:\n'
              'c0 + c_u u + c_uu u^2 + c_f f. See docs/gaits.md, "Calibration".')
    cal.save(out, header)
    print(f'calibration: {out}')
    return 0


def _other_gaits(path, robot, replaced):
    """The calibration file at path without the entries of the gaits about to be re-measured: those are
    not validated, so an entry made for another definition of its gait (a turning parameter it no longer
    has) is replaced rather than refused. The other entries are validated as the gait node would."""
    from snake_control.gaits.calibration import calibration_from_dict
    from snake_control.paths import ConfigError
    from snake_control.yaml_file import load_yaml_file
    data = load_yaml_file(path, ConfigError)
    if isinstance(data, dict) and isinstance(data.get('gaits'), dict):
        data = {**data, 'gaits': {k: v for k, v in data['gaits'].items() if k not in replaced}}
    return calibration_from_dict(data, robot, str(path))
