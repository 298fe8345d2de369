"""Dynamics: cost of a gait torque report (32 joints, 2 periods) and seed 001's validation error figure."""
import time

import numpy as np


def _timed(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    times = np.array(times) * 1e3
    return out, float(np.median(times)), float(np.percentile(times, 99))


def bench_torque_report():
    from snake_control.dynamics.torques import gait_torque_report
    from snake_control.gaits.report import run_gait
    from snake_control.robot import load_robot

    robot = load_robot('pitch_yaw_32')
    rate = 100.0
    print(f'torque report, {robot.name} ({robot.n_joints} joints), 2 gait periods at {rate:g} Hz:')
    for gait in ('lateral_undulation', 'sidewinding', 'vertical_undulation', 'rolling'):
        probe = run_gait(robot, gait, {}, 1.0, rate)
        phase_rate = abs(probe.scheduler.state().phase_rate_rad_s)
        period = 2 * np.pi / phase_rate
        run = run_gait(robot, gait, {}, 2 * period, rate)
        t, q, phases = run.t_s, run.positions_rad, run.phases_rad
        report, med, p99 = _timed(lambda: gait_torque_report(robot, t, q, phase_rad=phases), 7)
        _, med_free, _ = _timed(lambda: gait_torque_report(robot, t, q, support='free'), 7)
        worst = int(np.argmax(report.peak_nm))
        print(f'  {gait:<20} {len(t):4d} samples (period {period:5.2f} s): median {med:6.1f} ms, '
              f'p99 {p99:6.1f} ms (dynamics alone, support=free: {med_free:5.1f} ms); '
              f'peak {report.peak_nm[worst]:.2f} N m at {report.joint_names[worst]} = '
              f'{report.peak_nm[worst] / report.stall_torque_nm:.0%} of stall, '
              f'{"ok" if report.ok else f"{len(report.exceeding)} joints above 80%"}')


def bench_seed001():
    from snake_control.dynamics.seed001 import PAPER_SUMMED_ERROR_RAD, seed001_validation

    print(f'seed 001 validation (20 bodies on a wall, theta = a t^2 + b, eq. 94 torques -> RK4), summed '
          f'|angle error| over the 20 joints at the end; the paper reports {PAPER_SUMMED_ERROR_RAD:g} rad '
          f'(its span, step and bodies are not given):')
    for case in ('cobra', 'accordion', 'helix'):
        for duration, dt in ((1.0, 1e-3), (2.0, 1e-3)):
            start = time.perf_counter()
            r = seed001_validation(case, duration_s=duration, dt_s=dt)
            if r['diverged_at_s'] is None:
                text = (f'end {r["summed_error_rad"]:.3g} rad, worst along the way '
                        f'{r["max_summed_error_rad"]:.3g} rad, peak torque {r["peak_torque_nm"]:.3f} N m')
            else:
                text = f'open-loop replay diverges: summed error past 1 rad at t = {r["diverged_at_s"]:.2f} s'
            print(f'  {case:<10} {duration:.0f} s, RK4 step {dt * 1e3:g} ms: {text} '
                  f'[{time.perf_counter() - start:.1f} s]', flush=True)


def main():
    bench_torque_report()
    bench_seed001()


if __name__ == '__main__':
    main()
