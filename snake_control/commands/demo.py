"""snake demo: what `make demo` runs."""

from snake_control.commands import options

HELP = 'run the demo (what `make demo` runs): both robots through their scripts in MuJoCo, full node graph'
DESCRIPTION = '''Drive pitch_yaw_32 (serpentine, a left turn, sidewinding, rolling, stops) and then wheeled_8
(lateral undulation with turns both ways) through the whole node graph: driver on the emulated bus at
4 Mbit/s coupled to MuJoCo, gait, estimator, and teleop fed by config/scripts/demo_<robot>.yaml.
Writes OUT/demo.mcap (both sessions, one namespace per robot: /pitch_yaw_32/..., /wheeled_8/...; each
session's /diagnostics is stored as /<robot>/diagnostics), OUT/demo_<robot>.png (true and estimated
paths, joint-angle heatmap with gait switches, loop timing), OUT/demo_<robot>.mp4 (the session replayed
through MuJoCo at twice real time, paths on the floor) and OUT/models.png (the robot models), and
prints a summary: distance, estimator error, loop rate against the bus limit, commanded against achieved
speed, faults. It writes nothing outside OUT; --update-docs refreshes the README's pictures in docs/.'''


def add_arguments(parser):
    parser.add_argument('--out', default='out', type=options.output_dir, help='output folder (default: out)')
    parser.add_argument('--quick', action='store_true',
                        help='wheeled_8 only, the first 10 s of its script (a smoke test)')
    parser.add_argument('--update-docs', action='store_true',
                        help='also copy the pictures to docs/ of this source checkout (the README shows them)')


def draw_models(out_dir):
    """Draw each shipped robot's chain (top and side views) into out_dir/models.png; return the path."""
    from pathlib import Path

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    from snake_control.kinematics.chain import robot_frames
    from snake_control.paths import robot_names
    from snake_control.robot import load_robot

    names = robot_names()
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 3.2 * len(names)), squeeze=False)
    for row, name in zip(axes, names):
        robot = load_robot(name)
        # A recognisable pose: one and a half serpenoid waves in yaw, a small wave in pitch.
        s = (np.arange(robot.n_joints) + 0.5) / robot.n_joints * 3 * np.pi
        yaw = np.array([a == 'yaw' for a in robot.axes])
        q = np.where(yaw, robot.upper_rad / 3 * np.sin(s) * 2 / max(1, yaw.sum() / 8), 0.15 * np.cos(s))
        frames = robot_frames(robot, q)
        p = frames[:, :3, 3]
        for ax, (i, j), label in ((row[0], (0, 1), 'top (x, y)'), (row[1], (0, 2), 'side (x, z)')):
            ax.plot(p[:, i], p[:, j], '-o', ms=3, lw=2, color='tab:orange')
            ax.plot(p[-1, i], p[-1, j], 'o', ms=8, color='tab:red', label='head')
            ax.set_aspect('equal', adjustable='datalim')
            ax.set_title(f'{name} ({robot.n_joints} joints, {robot.kind}): {label}')
            ax.set_xlabel('m')
            ax.grid(alpha=0.3)
        row[0].legend(loc='best')
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / 'models.png'
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


DEMO_DOMAINS = (102, 232)   # above the tests' 1-101 (test/conftest.py); Fast DDS accepts up to 232


def private_domain(environ) -> str | None:
    """Give the demo a DDS domain of its own unless the caller chose one (returned when chosen here): a
    second demo, a test run or a robot's graph on this machine then cannot hear it, nor it them."""
    if environ.get('ROS_DOMAIN_ID', '').strip():
        return None
    import random
    environ['ROS_DOMAIN_ID'] = str(random.SystemRandom().randint(*DEMO_DOMAINS))
    return environ['ROS_DOMAIN_ID']


def run(args) -> int:
    import os
    import sys

    from snake_control.app.render import set_gl_backend
    set_gl_backend()            # the session videos: before anything imports mujoco
    from snake_control.app.demo import run_demo
    from snake_control.paths import share_dir

    docs = None
    if args.update_docs:
        root = share_dir()
        if args.quick or not (root / 'README.md').is_file():
            print('snake demo: error: --update-docs needs the full demo (no --quick) in a source checkout',
                  file=sys.stderr)
            return 2
        docs = root / 'docs'
    domain = private_domain(os.environ)
    if domain is not None:
        print(f'DDS domain {domain}, private to this demo (set ROS_DOMAIN_ID to choose one)', flush=True)
    summaries = run_demo(args.out, quick=args.quick, docs_dir=docs)
    print(f'wrote {draw_models(args.out)}')
    missed = [s.robot for s in summaries if s.missed_rate()]
    if missed:
        print(f'snake demo: error: the controller missed its control rate ({", ".join(missed)}); see the WARN '
              f'lines above', flush=True)
        return 1
    return 0 if summaries else 1
