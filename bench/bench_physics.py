"""MuJoCo real-time factor per robot, the servo-bus plant's, and the estimator validation table.

Real-time factor = simulated seconds per wall-clock second (above 1: faster than real time), each robot
driven by its validation gait at the control rate (goals set every 10 ms, as the driver would). The
median of three runs is printed with the slowest.
"""
import statistics
import time

SIM_S = 4.0


def _rtf_world(case, repeats=3):
    from snake_control.physics import SnakeWorld
    from snake_control.validation.runs import gait_goal_fn
    from snake_control.robot import load_robot

    robot = load_robot(case.robot)
    out = []
    for _ in range(repeats):
        world = SnakeWorld(robot)
        goal = gait_goal_fn(robot, case.gait, case.command, case.params)
        goals = [goal(0.01 * k).copy() for k in range(int(SIM_S * 100) + 300)]
        for g in goals[:300]:            # blend the gait in before timing
            world.set_goals(g)
            world.step(5)
        start = time.perf_counter()
        for g in goals[300:]:
            world.set_goals(g)
            world.step(5)
        out.append(SIM_S / (time.perf_counter() - start))
    return out, world.data.ncon


def _rtf_plant(case, repeats=3):
    from snake_control.physics.servo_plant import MujocoPlant
    from snake_control.validation.runs import gait_goal_fn
    from snake_control.robot import load_robot

    robot = load_robot(case.robot)
    out = []
    for _ in range(repeats):
        plant = MujocoPlant(robot)
        for j in robot.joints:
            plant.configure(j.servo_id, robot.bus.servo, j.servo_angle_rad(0.0))
        goal = gait_goal_fn(robot, case.gait, case.command, case.params)
        torque = {i: True for i in robot.servo_ids}
        ticks = []
        for k in range(int(SIM_S * 100) + 300):
            q = goal(0.01 * k)
            ticks.append({j.servo_id: j.servo_angle_rad(a) for j, a in zip(robot.joints, q)})
        for g in ticks[:300]:
            plant.step(0.01, g, torque)
        start = time.perf_counter()
        for g in ticks[300:]:
            plant.step(0.01, g, torque)
        out.append(SIM_S / (time.perf_counter() - start))
    return out


def main():
    from snake_control.validation.runs import CASES

    print(f'MuJoCo real-time factor (simulated s / wall s), {SIM_S:g} s of gait at 100 Hz goals, '
          f'2 ms timestep, median (min) of 3')
    for case in CASES:
        rtf, ncon = _rtf_world(case)
        print(f'  {case.robot:<18} {case.gait:<20} {statistics.median(rtf):7.1f} ({min(rtf):.1f})  '
              f'contacts {ncon}', flush=True)
    for case in CASES:
        if case.robot == 'pitch_yaw_32':
            rtf = _rtf_plant(case)
            print(f'  servo-bus plant (MujocoPlant.step, 10 ms ticks, servo-angle mapping) {case.robot} '
                  f'{case.gait}: {statistics.median(rtf):.1f} ({min(rtf):.1f})', flush=True)
    try:
        import snake_control.estimation.estimator  # noqa: F401
    except ImportError as exc:
        print(f'validation table skipped: the estimator is not available ({exc})')
        return
    from snake_control.validation import runs as V

    print('\nEstimator against MuJoCo ground truth, 20 s per run after a 3 s warm-up, pitch-yaw runs '
          "without and with the world's IMU (same motion):")
    results = []
    start = time.perf_counter()
    for case in V.CASES:
        results.extend(V.run_case_imu(case))
    print(V.format_table(results))
    for line in V.warnings(results):
        print(line)
    print(f'({time.perf_counter() - start:.1f} s wall for {len(results)} runs)')


if __name__ == '__main__':
    main()
