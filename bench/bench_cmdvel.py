"""The cmd_vel acceptance table (issue 13): gait x command -> achieved speed and yaw rate, and ratios.

For each shipped robot (pitch_yaw_32_two_buses is pitch_yaw_32 on two adapters, the same mechanics:
not repeated) and a custom 10-joint wheeled robot, every gait that moves the robot runs through the gait
controller in MuJoCo (validation physics, the elliptic cone) at two speeds along the field that drives
it, then a left and a right turn at the higher speed (turn_in_place: two rates left, one right); see
validation.cmdvel.acceptance_commands. A turn for a gait that does not turn is listed, not run.

Bounded run time, and how: each run is one whole gait cycle, at least 4 s and at most 25 s of
measurement (a cycle longer than that is measured over the part that fits: 0 in the cyc column),
after a warm-up of the blend from rest and two gait cycles, between 2 and 12 s (validation.cmdvel.
settle_s: the heading settles over the first cycles), and the estimator is not scored here (snake
validate does). The runs go in two passes, the higher speed and the
left turn of every gait first, then the lower speed and the right turn, within a wall-clock budget of
BUDGET_S (300 s; SNAKE_CMDVEL_BUDGET_S overrides it): a run the budget leaves out is listed as such
with a WARN. At a load average of 6-13 on two shared cores the whole table (69 runs) took 1748 s, so
the budget keeps about a fifth of it there; SNAKE_CMDVEL_BUDGET_S=3000 runs it all.
WARN on each run outside the acceptance: speed +-10 %, yaw rate +-15 % or +-0.03 rad/s, heading drift
< 2 deg/m without a turn, turning on the spot < 0.05 m per radian.
Then the turn step (turn_steps): what serpentine and lateral undulation do over the first two cycles
after a turn command starts, on the graph's world (about 45 s of wall time).
"""
import os
import tempfile
import time
from pathlib import Path

from snake_control.robot import load_robot
from snake_control.validation import cmdvel as C

ROBOTS = ('pitch_yaw_32', 'wheeled_8', 'kinematic_snake_3')
LOWEST_S, HIGHEST_S = 4.0, 25.0           # measurement, s: kinematic_snake_3 at 0.09 m/s cycles in 19 s
# SNAKE_CMDVEL_BUDGET_S=1200 python -m bench cmdvel: the whole table on a busy machine.
BUDGET_S = float(os.environ.get('SNAKE_CMDVEL_BUDGET_S', '300'))
FIRST_PASS = (1, 2)      # indices in acceptance_commands: the higher speed, the left turn


def plan(robots):
    """[(pass, robot, gait, command)] in the order they run."""
    out = []
    for robot in robots:
        for gait in C.locomotion_gaits(robot):
            for k, command in enumerate(C.acceptance_commands(robot, gait)):
                out.append((0 if k in FIRST_PASS else 1, robot, gait, command))
    return sorted(out, key=lambda p: p[0])


def run_one(robot, gait, command):
    follows = C.cmd_vel_meaning(robot, gait).follows
    if any(v and a not in follows for a, v in zip(('linear.x', 'linear.y', 'angular.z'), command)):
        return C.CommandResult(robot.name, gait, command, follows, run=False)
    duration = C.cycle_duration_s(robot, gait, command, lowest_s=LOWEST_S, highest_s=HIGHEST_S)
    return C.run_command(robot, gait, command, duration_s=duration, warmup_s=C.settle_s(robot, gait, command),
                         estimate=False)


def main():
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        custom = C.write_wheeled_robot(Path(tmp) / 'wheeled_custom_10.yaml', joints=10, link_length_m=0.12)
        robots = [load_robot(name) for name in ROBOTS] + [load_robot(custom)]
    print('cmd_vel acceptance: gait x command -> achieved (x m/s forward, y m/s left, z rad/s), ratios to the '
          f'command; MuJoCo elliptic cone, through the gait controller, open loop; budget {BUDGET_S:.0f} s')
    rows, skipped, printed = [], [], False
    for pass_, robot, gait, command in plan(robots):
        if time.perf_counter() - start > BUDGET_S:
            skipped.append((robot.name, gait, command))
            continue
        rows.append(run_one(robot, gait, command))
        table = C.format_rows(rows[-1:])
        print(table if not printed else table.split('\n', 2)[2], flush=True)      # one header
        printed = True
    for name, gait, command in skipped:
        print(f'{name:<18} {gait:<22} {", ".join(f"{c:+.3g}" for c in command):<26} WARN not run: over the '
              f'{BUDGET_S:.0f} s budget')
    met = [r for r in rows if not C.misses(r)]
    print(f'{len(met)} of {len(rows) + len(skipped)} rows within the acceptance ({sum(r.run for r in rows)} runs, '
          f'{sum(not r.run for r in rows)} commands a gait does not follow, {len(skipped)} left out by the '
          f'budget); {time.perf_counter() - start:.0f} s wall')
    for robot in robots:
        mine = [r for r in rows if r.robot == robot.name]
        left = sum(1 for s in skipped if s[0] == robot.name)
        print(f'  {robot.name:<18} {sum(1 for r in mine if not C.misses(r))} of {len(mine) + left} met'
              + (f' ({left} left out)' if left else ''))
    turn_steps()


# The transient a driver sees when a turn starts (validation.cmdvel.turn_step_cycles): in the graph's own
# world (the pyramidal cone and the calibration measured on it), from straight at 0.1 m/s, 0.25 rad/s
# stepped on after STEP_S; the first two whole cycles after the step against the commanded speed.
TURN_STEP = (0.1, 0.0, 0.25)
STEP_S = 8.0
TURN_STEP_GAITS = ('serpentine', 'lateral_undulation')


def turn_steps():
    from snake_control.gaits.calibration import SIM_SUFFIX, calibration_path, load_calibration
    from snake_control.physics.mjcf import PhysicsOptions
    robot = load_robot('pitch_yaw_32')
    cal = load_calibration(calibration_path(robot, SIM_SUFFIX), robot)
    print(f'turn step (pitch_yaw_32, pyramidal cone, its calibration): from straight at {TURN_STEP[0]:g} m/s, '
          f'{TURN_STEP[2]:g} rad/s from {STEP_S:g} s; speed per whole cycle after the step (aim x0.9-1.1)')
    for gait in TURN_STEP_GAITS:
        cycles = C.turn_step_cycles(robot, gait, TURN_STEP, STEP_S, cycles=2, calibration=cal,
                                    options=PhysicsOptions(cone='pyramidal'))
        parts = []
        for k, got in enumerate(cycles, 1):
            ratio = got.forward_m_s / TURN_STEP[0]
            parts.append(f'cycle {k} x{ratio:.2f} (yaw {got.yaw_rate_rad_s:+.3f} rad/s)'
                         + ('' if 0.9 <= ratio <= 1.1 else ' WARN outside x0.9-1.1'))
        print(f'  {gait:<22} ' + '; '.join(parts), flush=True)


if __name__ == '__main__':
    main()
