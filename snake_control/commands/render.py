"""snake render: a gait, a joint-trajectory CSV or a recording played through MuJoCo to a GIF or MP4."""

from snake_control.commands import options

HELP = 'render a gait, a joint-trajectory CSV or an .mcap recording to a GIF or MP4 through MuJoCo'
DESCRIPTION = '''Play joint angles through the MuJoCo world (they are the servos' goals; the body moves as the
physics makes it move) and draw it with MuJoCo's offscreen renderer, the camera following the body.

  snake render --robot wheeled_8 --gait lateral_undulation --duration 6 --output out/lateral.gif
  snake render --robot pitch_yaw_32 --input gait.csv --output out/serpentine.mp4
  snake render --robot wheeled_8 --input out/demo.mcap --output out/demo_wheeled_8.gif

Offscreen GL: MUJOCO_GL (default egl; osmesa for software rendering). MP4 needs imageio and
imageio-ffmpeg; GIF needs only pillow.'''


def add_arguments(parser):
    parser.add_argument('--robot', required=True, help='shipped robot name or a robot YAML path')
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument('--gait', help='a gait of the catalogue (snake gait --list), run from phase 0')
    src.add_argument('--input', type=options.input_file, help='joint-trajectory .csv or .mcap recording')
    parser.add_argument('--topic', default=None, help='JointState topic in an .mcap (default: the robot\'s joint_states)')
    parser.add_argument('--duration', type=float, default=6.0, help='gait: seconds to play (default 6)')
    parser.add_argument('--output', required=True, type=options.output_file, help='.gif or .mp4 file to write')
    parser.add_argument('--fps', type=float, default=20.0, help='frames per second (default 20)')
    parser.add_argument('--size', default='360x480', help='frame height x width in pixels (default 360x480)')


def run(args) -> int:
    from snake_control.commands import CommandError

    try:
        height, width = (int(v) for v in args.size.lower().split('x'))
    except ValueError:
        raise CommandError(f'--size: expected HEIGHTxWIDTH in pixels, got {args.size!r}') from None
    if not (16 <= height <= 2160 and 16 <= width <= 3840) or not 1 <= args.fps <= 120 or args.duration <= 0:
        raise CommandError('--size 16x16..2160x3840, --fps 1..120 and --duration > 0')
    if not str(args.output).lower().endswith(('.gif', '.mp4')):
        raise CommandError(f'--output {args.output}: expected a .gif or .mp4 file name')
    from snake_control.app.render import NoGL, render_trajectory, set_gl_backend
    set_gl_backend()
    from snake_control.robot import load_robot

    robot = load_robot(args.robot)
    if args.gait:
        from snake_control.gaits import catalog
        from snake_control.gaits.report import run_gait
        catalog.check_gait_fits(catalog.gait_spec(args.gait), robot)
        res = run_gait(robot, args.gait, None, args.duration, 100.0)
        t, q = res.t_s, res.positions_rad
    else:
        from snake_control.estimation.trajectory_io import read_joint_trajectory
        traj = read_joint_trajectory(args.input, robot.joint_names, args.topic)
        t, q = traj.t_s, traj.positions_rad
    try:
        out = render_trajectory(robot, t, q, args.output, fps=args.fps, size=(height, width))
    except NoGL as exc:
        print(f'snake render: {exc}')
        return 1
    print(f'wrote {out["path"]}: {out["frames"]} frames at {args.fps:g} fps, {width}x{height}')
    return 0
