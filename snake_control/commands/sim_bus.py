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

Physics: motor (the built-in motor model, default) or mujoco (the robot's MuJoCo world; needs --robot).

Faults (comma-separated): corrupt=RATE (bytes garbled, both ways), drop=RATE (replies lost),
silent=ID@START+DURATION (servo stops answering; no duration: forever), trip=ID:overload@TIME or
trip=ID:overheating@TIME, unplug=TIME+DURATION, seed=N. Times in seconds from start.

Control channel: commands on stdin (state, goals, silent ID S, trip ID KIND, unplug S, corrupt R,
drop R, set ID REGISTER VALUE, stall S), one JSON line back on stdout each.'''

# The plants this command offers by name. The physics package depends on the Dynamixel package, so the
# name of the MuJoCo plant is known here, at the edge, and handed to the emulator as a reference.
PHYSICS = {'motor': 'motor', 'mujoco': 'snake_control.physics.servo_plant:mujoco_plant'}


def physics_reference(name: str) -> str:
    """The emulator's --physics value for a physics name; ValueError naming the known ones."""
    if ':' in name:
        return name             # already a MODULE:FACTORY reference
    if name not in PHYSICS:
        raise ValueError(f'--physics {name!r} unknown; known: {", ".join(PHYSICS)}')
    return PHYSICS[name]


def sim_bus_args(robot: str, baud: int | None = None, physics: str | None = None) -> list[str]:
    """Emulator options for a robot's bus (for SimBusProcess): its YAML, a baud, a physics name."""
    args = ['--robot', str(robot)]
    if baud:
        args += ['--baud', str(baud)]
    if physics and physics != 'none':
        args += ['--physics', physics_reference(physics)]
    return args


def add_arguments(parser):
    from snake_control.dynamixel.simbus import add_arguments as emulator_arguments
    emulator_arguments(parser, physics_help=f'plant moving the servos: {" or ".join(PHYSICS)} (default motor, '
                                            'the built-in motor model; mujoco needs --robot)')


def run(args) -> int:
    from snake_control.dynamixel.simbus import run as run_bus
    args.physics = physics_reference(args.physics)
    return run_bus(args)
