"""MuJoCo's pyramidal against its elliptic friction cone: every gait's net motion and the wall time of each.

The world uses the pyramidal cone (the real-time graph needs its speed); validation (snake validate, the
cmd_vel acceptance table) uses the elliptic one, the Coulomb cone (docs/physics.md). Each gait runs one
cycle (6 to 8 s: shortened to keep the bench short) at the acceptance table's higher speed after a 3 s
warm-up, through the gait
controller, on each cone; printed: forward, left (m/s) and yaw rate (rad/s) on each, the largest
difference against the acceptance tolerance (10 % of the command for speed, 0.05 m/rad for turning
on the spot, 15 % or 0.03 rad/s for yaw), and the wall time of each run. WARN where the cones
disagree beyond the tolerance.
"""
import time

from snake_control.physics.mjcf import PhysicsOptions
from snake_control.robot import load_robot
from snake_control.validation import cmdvel as C

ROBOTS = ('pitch_yaw_32', 'wheeled_8')


def compare(robot, gait, command):
    out = {}
    duration = C.cycle_duration_s(robot, gait, command, highest_s=8.0)
    for cone in ('pyramidal', 'elliptic'):
        start = time.perf_counter()
        r = C.run_command(robot, gait, command, duration_s=duration, options=PhysicsOptions(cone=cone),
                          estimate=False)
        out[cone] = (r.achieved, time.perf_counter() - start)
    return out


def disagreement(command, pyr, ell, accept=C.ACCEPTANCE):
    """The largest difference between the cones in units of the acceptance tolerance (1 = at the edge)."""
    speed = max(abs(command[0]), abs(command[1]))
    # Turning on the spot: the translation it may have, 0.05 m per radian turned.
    speed_tol = accept.speed_rel * speed if speed else accept.spin_m_per_rad * abs(command[2])
    yaw_tol = max(accept.yaw_rel * abs(command[2]), accept.yaw_abs_rad_s)
    return max(abs(pyr.forward_m_s - ell.forward_m_s) / speed_tol,
               abs(pyr.lateral_m_s - ell.lateral_m_s) / speed_tol,
               abs(pyr.yaw_rate_rad_s - ell.yaw_rate_rad_s) / yaw_tol)


def main():
    print('net motion per cone, one gait cycle at the acceptance speed (x m/s forward, y m/s left, '
          'z rad/s); diff: largest difference / acceptance tolerance')
    header = (f'{"robot":<14} {"gait":<22} {"command":<18} {"pyramidal x, y, z":<24} {"elliptic x, y, z":<24} '
              f'{"diff":>5} {"wall s pyr/ell":>15}')
    print(header)
    print('-' * len(header))
    walls = {'pyramidal': 0.0, 'elliptic': 0.0}
    for name in ROBOTS:
        robot = load_robot(name)
        for gait in C.locomotion_gaits(robot):
            command = C.acceptance_commands(robot, gait)[1]
            res = compare(robot, gait, command)
            (pyr, tp), (ell, te) = res['pyramidal'], res['elliptic']
            walls['pyramidal'] += tp
            walls['elliptic'] += te
            diff = disagreement(command, pyr, ell)
            fmt = lambda a: f'{a.forward_m_s:+.3f}, {a.lateral_m_s:+.3f}, {a.yaw_rate_rad_s:+.3f}'  # noqa: E731
            cmd = ', '.join(f'{c:g}' for c in command)
            print(f'{name:<14} {gait:<22} {cmd:<18} {fmt(pyr):<24} {fmt(ell):<24} {diff:>5.2f} '
                  f'{tp:>7.1f}/{te:<7.1f}' + ('  WARN the cones disagree' if diff > 1 else ''), flush=True)
    print(f'total wall time: pyramidal {walls["pyramidal"]:.1f} s, elliptic {walls["elliptic"]:.1f} s '
          f'(x{walls["elliptic"] / walls["pyramidal"]:.2f})')


if __name__ == '__main__':
    main()
