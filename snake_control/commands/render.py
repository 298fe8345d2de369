"""snake render: a gait, a joint-trajectory CSV or a recording played through MuJoCo to a GIF or MP4."""

from snake_control.commands import options

HELP = 'render a gait, a joint-trajectory CSV or an .mcap recording to a GIF or MP4 through MuJoCo'
DESCRIPTION = '''Play joint angles through the MuJoCo world (they are the servos' goals; the body moves as the
physics makes it move) and draw it with MuJoCo's offscreen renderer, the camera following the body.

  snake render --robot wheeled_8 --gait lateral_undulation --duration 6 --output out/lateral.gif
  snake render --robot pitch_yaw_32 --input gait.csv --output out/serpentine.mp4
  snake render --robot wheeled_8 --input out/demo.mcap --output out/demo_wheeled_8.gif
  snake render --update-docs        # the README's gait loops, docs/gait_<gait>.gif

The estimator runs on the joint angles the world measures: its path (magenta) and the true path of the
same body frame (green) are drawn on the floor. Offscreen GL: MUJOCO_GL (default egl; osmesa for software
rendering). MP4 is written with imageio and its ffmpeg (both pinned in requirements.txt); GIF needs only
pillow.'''


def add_arguments(parser):
    parser.add_argument('--robot', help='shipped robot name or a robot YAML path')
    src = parser.add_mutually_exclusive_group()
    src.add_argument('--gait', help='a gait of the catalogue (snake gait --list), run from phase 0')
    src.add_argument('--input', type=options.input_file, help='joint-trajectory .csv or .mcap recording')
    parser.add_argument('--topic', default=None, help='JointState topic in an .mcap (default: the robot\'s joint_states)')
    parser.add_argument('--duration', type=float, default=6.0, help='gait: seconds to play (default 6)')
    parser.add_argument('--output', type=options.output_file, help='.gif or .mp4 file to write')
    parser.add_argument('--fps', type=float, default=20.0, help='frames per second (default 20)')
    parser.add_argument('--size', default='360x480', help='frame height x width in pixels (default 360x480)')
    parser.add_argument('--speed', type=float, default=1.0, help='playback speed, x real time (default 1)')
    parser.add_argument('--update-docs', action='store_true',
                        help='render the README\'s gait loops into docs/ of this source checkout (alone)')


def run(args) -> int:
    from snake_control.commands import CommandError

    if args.update_docs:
        return _update_docs(args)
    missing = [opt for opt, value in (('--robot', args.robot), ('--gait or --input', args.gait or args.input),
                                      ('--output', args.output)) if not value]
    if missing:
        raise CommandError(f'{", ".join(missing)} required (or --update-docs alone)')

    try:
        height, width = (int(v) for v in args.size.lower().split('x'))
    except ValueError:
        raise CommandError(f'--size: expected HEIGHTxWIDTH in pixels, got {args.size!r}') from None
    if (not (16 <= height <= 2160 and 16 <= width <= 3840) or not 1 <= args.fps <= 120 or not args.duration > 0
            or not 0.1 <= args.speed <= 20):
        raise CommandError('--size 16x16..2160x3840, --fps 1..120, --duration > 0 and --speed 0.1..20')
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
        out = render_trajectory(robot, t, q, args.output, fps=args.fps, size=(height, width), speed=args.speed)
    except NoGL as exc:
        print(f'snake render: {exc}')
        return 1
    print(f'wrote {out["path"]}: {out["frames"]} frames at {args.fps:g} fps, {width}x{height}')
    return 0


def _update_docs(args) -> int:
    from snake_control.commands import CommandError
    from snake_control.paths import share_dir

    if args.robot or args.gait or args.input or args.output:
        raise CommandError('--update-docs renders the README\'s loops alone: leave out --robot, --gait, --input '
                           'and --output')
    root = share_dir()
    if not (root / 'README.md').is_file():
        raise CommandError(f'--update-docs needs a source checkout ({root} has no README.md)')
    from snake_control.app.render import NoGL, set_gl_backend, update_doc_loops
    set_gl_backend()
    try:
        update_doc_loops(root / 'docs', log=lambda line: print(line, flush=True))
    except NoGL as exc:
        print(f'snake render: {exc}')
        return 1
    return 0
