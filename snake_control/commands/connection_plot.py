"""snake connection-plot: seed 000's connection vector fields of the three-link kinematic snake."""

from snake_control.commands import options

HELP = "draw the three-link snake's local connection as vector fields with a gait's path (seed 000)"
DESCRIPTION = '''Draw the local connection of the three-link passive-wheel snake (docs/estimation.md) as three
vector fields over the shape space (alpha1, alpha2), one per body-velocity component xi_x, xi_y, xi_theta:
the arrow at a shape is the row of -A(alpha), so xi = arrow . alpha_dot. A gait's closed path is drawn
on each field (default seed 000's lateral undulation alpha1 = 40 deg sin t, alpha2 = 40 deg sin(t + 25 deg)),
and the net motion of one gait cycle is printed. The dashed line alpha1 = alpha2 is the singular set.

  snake connection-plot --output connection.png
  snake connection-plot --gait 60,60,90 --output wide.png'''


def add_arguments(parser):
    parser.add_argument('--output', default='connection.png', type=options.output_file,
                        help='image file (PNG, PDF or SVG); default connection.png')
    parser.add_argument('--gait', default='40,40,25',
                        help='AMP1,AMP2,PHASE in degrees: alpha1 = AMP1 sin t, alpha2 = AMP2 sin(t + PHASE) '
                             '(default 40,40,25, seed 000)')
    parser.add_argument('--robot', default='kinematic_snake_3',
                        help='a three-link planar robot for the link length (default kinematic_snake_3)')
    parser.add_argument('--range', type=float, default=90.0, dest='range_deg',
                        help='half-width of the plotted shape space in degrees (default 90)')
    parser.add_argument('--grid', type=int, default=21, help='arrows per axis (default 21)')


def parse_gait(text):
    """(amp1_rad, amp2_rad, phase_rad) from 'AMP1,AMP2,PHASE' in degrees."""
    import math
    parts = text.split(',')
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ValueError(f'--gait must be AMP1,AMP2,PHASE in degrees (three numbers), got {text!r}')
    return tuple(math.radians(v) for v in values)


def gait_cycle_motion(amp1, amp2, phase, length_m, steps=2000):
    """Net body displacement (x, y, theta) over one cycle of the sinusoidal gait, integrated with the
    regularised connection at mid-point shapes (holding the twist across the singular set)."""
    import numpy as np

    from snake_control.estimation.connection import planar_connection
    from snake_control.kinematics.lie import se2_compose, se2_exp

    t = np.linspace(0.0, 2.0 * np.pi, steps + 1)
    alpha = np.stack([amp1 * np.sin(t), amp2 * np.sin(t + phase)], axis=1)
    g = np.zeros(3)
    last = np.zeros(3)
    for k in range(steps):
        res = planar_connection(0.5 * (alpha[k] + alpha[k + 1]), length_m)
        # Hold the previous step's displacement along a weak direction where the path crosses alpha1 = alpha2.
        last = res.twist(alpha[k + 1] - alpha[k], hold=last)
        g = se2_compose(g, se2_exp(last))
    return g, alpha


def crosses_singular_line(path_rad) -> bool:
    """Whether a closed shape path (k, 2) of (alpha1, alpha2) in rad crosses or touches alpha1 = alpha2.

    >>> import numpy as np
    >>> t = np.linspace(0, 2 * np.pi, 50)
    >>> crosses_singular_line(np.column_stack([np.sin(t), np.sin(t + 1.0)]))
    True
    >>> crosses_singular_line(np.column_stack([np.sin(t) + 2.0, np.sin(t)]))
    False
    """
    import numpy as np

    d = np.asarray(path_rad, dtype=float)
    gap = d[:, 0] - d[:, 1]
    return bool(np.any(gap == 0.0) or (gap.min() < 0.0 < gap.max()))


def run(args) -> int:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    from snake_control.estimation.connection import three_link_connection
    from snake_control.robot import load_robot

    amp1, amp2, phase = parse_gait(args.gait)
    robot = load_robot(args.robot)
    if robot.kind != 'planar' or robot.n_joints != 2:
        raise ValueError(f'--robot {args.robot}: connection-plot needs a three-link planar robot '
                         f'(kind planar, 2 joints), got kind {robot.kind} with {robot.n_joints} joints')
    if args.grid < 3 or not 0 < args.range_deg <= 180:
        raise ValueError('--grid must be >= 3 and --range in (0, 180] degrees')
    length = float(robot.link_length_m)
    span = np.radians(args.range_deg)
    axis = np.linspace(-span, span, args.grid) + span / (2 * args.grid)
    a1, a2 = np.meshgrid(axis, axis, indexing='xy')
    # The closed form of seed 000 (docs/estimation.md); points on the singular set alpha1 = alpha2 are left
    # out (the grid is offset by half a cell so that no point lands exactly on it).
    field = np.full((3, args.grid, args.grid, 2), np.nan)
    with np.errstate(divide='ignore', invalid='ignore'):
        for i in range(args.grid):
            for j in range(args.grid):
                field[:, i, j, :] = -three_link_connection(np.array([a1[i, j], a2[i, j]]), length)
    field[~np.isfinite(field)] = np.nan
    motion, path = gait_cycle_motion(amp1, amp2, phase, length)
    names = [r'$\xi_x$ (m/s per rad/s)', r'$\xi_y$ (m/s per rad/s)', r'$\xi_\theta$ (rad/s per rad/s)']
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2))
    deg = np.degrees
    for c, ax in enumerate(axes):
        u, v = np.nan_to_num(field[c, ..., 0]), np.nan_to_num(field[c, ..., 1])
        mag = np.hypot(u, v)
        # Arrow lengths compressed (the field blows up at the singular set): direction exact, size ~ log.
        ref = np.median(mag[mag > 1e-12]) if (mag > 1e-12).any() else 1.0
        comp = np.where(mag > 1e-12, np.log1p(mag / ref) / np.maximum(mag, 1e-300), 0.0)
        if mag.max() > 1e-12:
            q = ax.quiver(deg(a1), deg(a2), u * comp, v * comp, mag, cmap='viridis', pivot='mid', width=0.004)
            q.set_clim(0.0, float(np.percentile(mag, 90)))      # the singular band would wash out the colours
            fig.colorbar(q, ax=ax, fraction=0.046, pad=0.04, label='|row of -A|')
        else:
            # Seed 000: the middle wheel forbids sideways motion, so this field vanishes identically.
            ax.plot(deg(a1), deg(a2), '.', color='tab:gray', ms=2)
            ax.text(0.03, 0.95, 'zero field: the middle wheel forbids sideways motion',
                    transform=ax.transAxes, fontsize=8, va='top')
        ax.plot(deg(path[:, 0]), deg(path[:, 1]), color='tab:red', lw=2, label='gait path')
        k = len(path) // 8
        ax.annotate('', xy=deg(path[k + 5]), xytext=deg(path[k]),
                    arrowprops=dict(arrowstyle='-|>', color='tab:red', lw=2))
        ax.plot([-deg(span), deg(span)], [-deg(span), deg(span)], '--', color='k', lw=1,
                label=r'singular $\alpha_1=\alpha_2$')
        ax.set_xlim(-deg(span) * 1.05, deg(span) * 1.05)
        ax.set_ylim(-deg(span) * 1.05, deg(span) * 1.05)
        ax.set_aspect('equal')
        ax.set_xlabel(r'$\alpha_1$ (deg)')
        ax.set_ylabel(r'$\alpha_2$ (deg)')
        ax.set_title(f'connection field for {names[c]}')
        ax.legend(loc='lower right', fontsize=7)
    # Where the path crosses alpha1 = alpha2 the wheels' constraints lock the chain: the connection is
    # infinite there and the integral over the cycle is no motion the robot can make.
    crosses = crosses_singular_line(path)
    result = ('the gait crosses the singular line alpha1 = alpha2, where the wheels lock the shape: '
              'no net motion is defined' if crosses else
              f'per cycle x {motion[0]:+.4f} m, y {motion[1]:+.4f} m, theta {deg(motion[2]):+.3f} deg')
    fig.suptitle(f'three-link kinematic snake, L = {length:g} m; gait alpha1 = {deg(amp1):g} deg sin t, '
                 f'alpha2 = {deg(amp2):g} deg sin(t + {deg(phase):g} deg): {result}', fontsize=10)
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    plt.close(fig)
    if crosses:
        print(f'net motion per gait cycle: not defined: {result}')
    else:
        print(f'net motion per gait cycle (middle-link frame): x {motion[0]:+.5f} m, y {motion[1]:+.5f} m, '
              f'theta {deg(motion[2]):+.4f} deg')
    print(f'wrote {args.output}')
    return 0
