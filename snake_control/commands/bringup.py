"""snake bringup: the whole node graph without ros2 launch."""

from snake_control.commands import options

HELP = 'run the whole node graph (no ros2 launch needed; the driver in its own process)'
DESCRIPTION = '''Run the node list of gait.launch.py, for machines without `ros2 launch`: the driver in
a process of its own (nothing else can delay a servo cycle), the gait, estimator and teleop nodes in
this one on rclpy's events executor.

With --bus sim the emulated servo bus (`snake sim-bus`) starts as a child process and the driver opens
its pseudo-terminal; add --physics mujoco to couple it to a MuJoCo world. --script replays a scripted
teleop session (config/scripts/*.yaml) instead of a gamepad; --record writes every topic to an MCAP file
(open it with Foxglove or `ros2 bag info`). Torque goes off when it stops (after --duration, at the end
of the script, or on Ctrl-C).

Without --script, in a terminal (in the foreground), the keyboard is the gamepad (the teleop_twist_keyboard layout, through
the --teleop map's deadman, speed scales, gait buttons and latched e-stop): hold i/j/l/, ... to move
(motion stops --key-timeout after the last key repeat), q/z speed scale, n/p next/previous gait, space
e-stop, R release. The key help is printed at the start; --no-keyboard leaves the terminal alone (for
a real gamepad's joy_node publishing on <namespace>/joy).

  snake bringup --robot pitch_yaw_32 --bus sim --script config/scripts/forward_turn_stop.yaml \\
      --record out/session.mcap
  snake bringup --robot wheeled_8 --bus sim --physics mujoco          # drive it with the keyboard
  snake bringup --robot wheeled_8 --bus real --port /dev/ttyUSB0 --no-keyboard   # and run joy_node'''


def add_arguments(parser):
    parser.add_argument('--robot', default='pitch_yaw_32',
                        help='shipped robot name (pitch_yaw_32, wheeled_8, kinematic_snake_3) or a robot '
                             'YAML path')
    parser.add_argument('--bus', choices=('sim', 'real'), required=True,
                        help='sim: start the emulated bus; real: a USB adapter on --port')
    parser.add_argument('--port', default='', help='serial device (default: the robot YAML\'s bus.port)')
    parser.add_argument('--baud', type=int, default=0, help='bus baud rate (default: the robot YAML\'s)')
    parser.add_argument('--rate', type=options.in_range('control_rate_hz', zero_means_default=True), default=0.0,
                        help='control rate in Hz of the bus loop (default: the robot YAML\'s)')
    parser.add_argument('--gait-rate', type=options.in_range('control_rate_hz', zero_means_default=True),
                        default=0.0, metavar='HZ',
                        help='rate in Hz of the gait and its joint_commands, at most --rate (default: --rate '
                             'up to 100 Hz; slower than the bus, the driver moves the goals between commands '
                             'along their velocities)')
    parser.add_argument('--physics', choices=('mujoco',), default=None,
                        help='with --bus sim: couple the emulated servos to a MuJoCo world')
    parser.add_argument('--script', default=None, help='scripted teleop session YAML (see config/scripts)')
    parser.add_argument('--record', default=None, metavar='F.mcap', type=options.output_file,
                        help='write every topic to this MCAP file')
    parser.add_argument('--duration', type=options.positive_seconds, default=None, metavar='S',
                        help='stop after S seconds (default: the script\'s duration, else run until Ctrl-C)')
    parser.add_argument('--watchdog-ms', type=int, default=-1, metavar='MS',
                        help='servo Bus Watchdog: the servos stop when no packet reaches them for MS ms '
                             '(-1, the default: five control periods, at least 100 ms; 0: off)')
    parser.add_argument('--namespace', default='snake', help='ROS namespace (default snake)')
    parser.add_argument('--teleop', default='xbox',
                        help='gamepad map: xbox, playstation or a teleop YAML path')
    parser.add_argument('--gait', default='', help='gait at start (default: the first for the robot)')
    parser.add_argument('--no-keyboard', action='store_true',
                        help='do not read the keyboard as a gamepad (it is read only without --script and '
                             'when stdin is the terminal of the foreground job)')
    parser.add_argument('--key-timeout', type=float, default=None, metavar='S',
                        help='keyboard deadman: motion stops S s after the last key repeat (default 0.7; '
                             'above your terminal\'s initial key-repeat delay)')


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def run(args) -> int:
    import signal
    import sys

    from snake_control.app.bringup import run_bringup
    from snake_control.commands import CommandError
    from snake_control.app.graph import GraphArgs

    if args.physics and args.bus != 'sim':
        raise CommandError('--physics needs --bus sim')
    graph_args = GraphArgs(robot=args.robot, bus=args.bus, port=args.port, baud=args.baud, rate=args.rate,
                           gait_rate=args.gait_rate,
                           watchdog_ms=args.watchdog_ms, namespace=args.namespace, joy=False,
                           teleop=args.teleop, gait=args.gait,
                           physics=args.physics or 'none')
    log = lambda line: print(line, flush=True)   # noqa: E731
    from snake_control.app.keyboard import foreground_terminal
    graph_args.validated()     # a bad robot, gait or map is refused before the terminal changes
    pad = None
    try:
        stdin_fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):     # stdin closed or replaced (an embedding program)
        stdin_fd = None
    if not args.script and not args.no_keyboard and stdin_fd is not None and foreground_terminal(stdin_fd):
        from snake_control.teleop.keyboard import HELP as KEY_HELP
        from snake_control.teleop.keyboard import KEY_TIMEOUT_S, KeyboardPad
        from snake_control.teleop.mapping import load_teleop_config
        try:
            pad = KeyboardPad(load_teleop_config(args.teleop),
                              KEY_TIMEOUT_S if args.key_timeout is None else args.key_timeout)
        except ValueError as exc:
            raise CommandError(f'--key-timeout: {exc}') from None
        print(KEY_HELP, flush=True)
    elif args.key_timeout is not None:
        raise CommandError('--key-timeout is for the keyboard, which is read only without --script, '
                           'without --no-keyboard and from a terminal')
    try:
        if pad is None:
            result = run_bringup(graph_args, script=args.script, record=args.record, duration_s=args.duration,
                                 log=log)
        else:
            from snake_control.app.keyboard import KeyboardTerminal
            # Until bringup installs its own handlers, SIGTERM/SIGHUP unwind through the with block, which
            # gives the terminal back its echo.
            previous = {sig: signal.signal(sig, _raise_exit) for sig in (signal.SIGTERM, signal.SIGHUP)}
            try:
                with KeyboardTerminal(stdin_fd, pad, log):
                    result = run_bringup(graph_args, record=args.record, duration_s=args.duration, log=log,
                                         keyboard=pad)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
    except RuntimeError as exc:  # the emulated bus or the driver could not start
        raise CommandError(str(exc)) from None
    if result.torque_off is False:
        print('snake bringup: error: torque is still on after shutdown', flush=True)
        return 1
    if result.driver_exit_code:
        # The driver's own last line names the servos it could not confirm off: repeat it last.
        print(f'snake bringup: error: the driver exited with code {result.driver_exit_code}'
              + (f' ({result.driver_last_line})' if result.driver_last_line else ''), flush=True)
        return 1
    return 0
