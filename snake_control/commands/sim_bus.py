"""snake sim-bus: emulated Dynamixel X-series servos behind a pseudo-terminal."""
HELP = 'start an emulated Dynamixel bus on a pseudo-terminal; print its device path; run until stopped'
DESCRIPTION = '''Start emulated Dynamixel Protocol 2.0 X-series servos behind a pseudo-terminal.

The first line printed is the device path (a symlink that stays put when the emulated adapter is
unplugged and plugged back); open it with the driver, `snake dxl` or any dynamixel_sdk program. Runs
until SIGINT/SIGTERM. Servos answer at --baud (their Baud Rate register); replies take the wire time of
request, reply and return delay at that baud.

  snake sim-bus --robot pitch_yaw_32
  snake sim-bus --robot pitch_yaw_32 --physics mujoco
  snake sim-bus --servos 4 --baud 1000000 --faults corrupt=0.01,silent=3@2+1.5,unplug=5+1

Faults (comma-separated): corrupt=RATE (bytes garbled, both ways), drop=RATE (replies lost),
late=RATE+MS (that share of requests answered whole but MS ms late; MS 5 when left out),
silent=ID@START+DURATION (servo stops answering; no duration: forever), trip=ID:overload@TIME or
trip=ID:overheating@TIME, unplug=TIME+DURATION, seed=N. Times in seconds from start.

Control channel: commands on stdin (state, goals, silent ID S, trip ID KIND, unplug S, corrupt R,
drop R, late R [MS], set ID REGISTER VALUE, stall S), one JSON line back on stdout each.'''


def add_arguments(parser):
    from snake_control.app.sim_bus import PHYSICS
    from snake_control.dynamixel.simbus import add_arguments as emulator_arguments

    who = emulator_arguments(parser, physics_help=f'plant moving the servos: {" or ".join(PHYSICS)} '
                                                  '(default motor, the built-in motor model; mujoco needs --robot)')
    who.add_argument('--robot', help='robot name or YAML: servo IDs, model, baud and initial angles from it')


def run(args) -> int:
    from snake_control.app.sim_bus import physics_reference, robot_bus
    from snake_control.dynamixel.simbus import run as run_bus

    if args.robot:
        for name, value in robot_bus(args.robot, args.baud, args.physics, args.spread, args.seed).items():
            setattr(args, name, value)
    elif args.physics not in ('motor', 'none'):
        if ':' not in args.physics:
            raise ValueError(f'--physics {args.physics}: needs --robot (the world is built from its YAML)')
        args.physics = physics_reference(args.physics)
    return run_bus(args)
