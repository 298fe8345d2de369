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

  snake bringup --robot pitch_yaw_32 --bus sim --script config/scripts/forward_turn_stop.yaml \\
      --record out/session.mcap
  snake bringup --robot wheeled_8 --bus real --port /dev/ttyUSB0      # then drive with a joy publisher'''


def add_arguments(parser):
    parser.add_argument('--robot', default='pitch_yaw_32',
                        help='shipped robot name (pitch_yaw_32, wheeled_8, kinematic_snake_3) or a robot '
                             'YAML path')
    parser.add_argument('--bus', choices=('sim', 'real'), required=True,
                        help='sim: start the emulated bus; real: a USB adapter on --port')
    parser.add_argument('--port', default='', help='serial device (default: the robot YAML\'s bus.port)')
    parser.add_argument('--baud', type=int, default=0, help='bus baud rate (default: the robot YAML\'s)')
    parser.add_argument('--rate', type=options.in_range('control_rate_hz', zero_means_default=True), default=0.0,
                        help='control rate in Hz (default: the robot YAML\'s)')
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


def run(args) -> int:
    from snake_control.app.bringup import run_bringup
    from snake_control.commands import CommandError
    from snake_control.app.graph import GraphArgs

    if args.physics and args.bus != 'sim':
        raise CommandError('--physics needs --bus sim')
    graph_args = GraphArgs(robot=args.robot, bus=args.bus, port=args.port, baud=args.baud, rate=args.rate,
                           watchdog_ms=args.watchdog_ms, namespace=args.namespace, joy=False,
                           teleop=args.teleop, gait=args.gait,
                           physics=args.physics or 'none')
    try:
        result = run_bringup(graph_args, script=args.script, record=args.record, duration_s=args.duration,
                             log=lambda line: print(line, flush=True))
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
