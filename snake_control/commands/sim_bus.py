"""snake sim-bus: emulated Dynamixel X-series servos behind a pseudo-terminal."""

from snake_control.commands import options

HELP = 'start an emulated Dynamixel bus on a pseudo-terminal; print its device path; run until stopped'
DESCRIPTION = '''Start emulated Dynamixel Protocol 2.0 X-series servos behind a pseudo-terminal.

The first line printed is the device path (a symlink that stays put when the emulated adapter is
unplugged and plugged back); open it with the driver, `snake dxl` or any dynamixel_sdk program. Runs
until SIGINT/SIGTERM. Servos answer at --baud (their Baud Rate register); replies take the wire time of
request, reply and return delay at that baud.

  snake sim-bus --robot pitch_yaw_32
  snake sim-bus --servos 4 --baud 1000000 --faults corrupt=0.01,silent=3@2+1.5,unplug=5+1

Faults (comma-separated): corrupt=RATE (bytes garbled, both ways), drop=RATE (replies lost),
silent=ID@START+DURATION (servo stops answering; no duration: forever), trip=ID:overload@TIME or
trip=ID:overheating@TIME, unplug=TIME+DURATION, seed=N. Times in seconds from start.

Control channel: commands on stdin (state, goals, silent ID S, trip ID KIND, unplug S, corrupt R,
drop R, set ID REGISTER VALUE), one JSON line back on stdout each.'''


def add_arguments(parser):
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument('--robot', help='robot name or YAML: servo IDs, model and baud from its bus section')
    who.add_argument('--servos', type=int, help='number of servos, IDs 1..N')
    parser.add_argument('--model', default='XM430-W350',
                        help='servo model with --servos (default XM430-W350)')
    parser.add_argument('--baud', type=int, help='bus baud rate (default: the robot YAML, or 1000000)')
    parser.add_argument('--faults', default='', help='fault injection spec (see above)')
    parser.add_argument('--physics', default='motor',
                        help='plant driving the servos by registered name (default: motor, the built-in '
                             'motor model)')
    parser.add_argument('--link', help='device path to create (default: a fresh temporary directory)')
    parser.add_argument('--firmware', type=int, default=46,
                        help='firmware version the servos report (below 45: no fast sync read)')
    parser.add_argument('--return-delay', type=options.int_range(0, 254, ' (units of 2 us)'), default=250,
                        help='initial Return Delay Time register, units of 2 us (factory default 250)')
    parser.add_argument('--spread', type=float, default=0.2,
                        help='initial joint angles uniformly within +-SPREAD rad of zero (seeded)')
    parser.add_argument('--seed', type=int, default=0, help='seed for the initial angles')


def run(args) -> int:
    import random

    from snake_control.dynamixel.emulator import FaultSpec, run as run_bus
    from snake_control.dynamixel.models import SERVO_MODELS

    rng = random.Random(args.seed)
    faults = FaultSpec.parse(args.faults)
    _check_fault_times(faults, args.faults)
    robot = None
    if args.robot:
        from snake_control.robot import load_robot
        robot = load_robot(args.robot)
        ids = robot.servo_ids
        models = robot.bus.servo
        baud = args.baud or robot.bus.baud
        initial = {j.servo_id: j.servo_angle_rad(rng.uniform(-args.spread, args.spread))
                   for j in robot.joints}
    else:
        if not 1 <= args.servos <= 252:
            raise ValueError(f'--servos must be 1..252, got {args.servos}')
        if args.model not in SERVO_MODELS:
            raise ValueError(f'--model {args.model!r} unknown; known: {", ".join(SERVO_MODELS)}')
        ids = list(range(1, args.servos + 1))
        models = SERVO_MODELS[args.model]
        baud = args.baud or 1_000_000
        initial = {i: rng.uniform(-args.spread, args.spread) for i in ids}
    return run_bus(ids, models, baud, faults, args.physics, args.link, args.firmware, args.return_delay,
                   initial, robot)


def _check_fault_times(faults, spec: str) -> None:
    """Fault times and durations must be real times: 'unplug=nan+nan' would otherwise never happen, silently."""
    import math
    times = [start for start, _ in faults.silent.values()]
    times += [when for when, _, _ in faults.trips] + [start for start, _ in faults.unplugs]
    spans = [end - start for start, end in faults.silent.values()] + [dur for _, dur in faults.unplugs]
    if not all(math.isfinite(t) and t >= 0 for t in times) or not all(s > 0 for s in spans):
        raise ValueError(f'--faults {spec!r}: times must be finite and >= 0 s, durations > 0 s '
                         f'(a silent servo may omit its duration: for ever)')
