"""Estimator cost per joint_states message: pitch_yaw_32 (3D contacts) and wheeled_8 (planar connection).

Rows: the defaults; with an IMU reading per message (imu=True: the attitude filter's update_imu plus the
update it orients; with imu_attitude_s=1 as the graph runs it: the contacts turn the chassis and the IMU
pulls it); without the Coulomb contact weights (coulomb_iterations=0); other options.

Prints median and p99 in microseconds of Estimator.update (the whole per-message work of estimator_node
apart from message conversion), measured in one run on whatever else the machine is doing, against the
aim of AIM_US per message for 32 joints (WARN when missed), and the same with the compiled kernels
switched off (the numpy path, for the ratio).

The rows run messages back to back. The graph calls the estimator once per control period and the
process sleeps in between, and on this machine the same update then costs three to four times the CPU
(measured: about 300 us back to back, 470 us with 1 ms sleeps, 1100 us with 10 ms sleeps; a 10 ms busy
wait costs as much as the sleep, so it is the time between calls, not the idle state). The last line
measures it at the control rate, as the graph's CPU per cycle sees it.
"""
import os
import time

import numpy as np

from snake_control.estimation import contact
from snake_control.estimation.kernel_loading import numpy_only
from snake_control.estimation.estimator import Estimator
from snake_control.robot import load_robot

# Per-message budget of the estimator for 32 joints: the whole controller aims at 1 ms of CPU per 10 ms cycle.
AIM_US = 300.0


def _shapes(robot, n_msgs, rate_hz):
    t = np.arange(n_msgs) / rate_hz
    i = np.arange(robot.n_joints)
    if robot.kind == 'planar':
        return t, 0.6 * np.sin(2 * np.pi * 0.5 * t[:, None] + 0.8 * i[None, :])
    # Pitch-yaw: a sidewinding-like pair of travelling waves (yaw and pitch out of phase).
    yaw = np.array([a == 'yaw' for a in robot.axes])
    wave = 2 * np.pi * 0.5 * t[:, None] + 0.5 * i[None, :]
    return t, np.where(yaw[None, :], 0.5 * np.sin(wave), 0.3 * np.sin(wave + np.pi / 2))


def measure(name, n_msgs=3000, warmup=200, rate_hz=100.0, imu=False, cadence_s=0.0, **options):
    """(median wall us, p99 wall us, median CPU us) per joint_states message; with imu, each message
    also brings one IMU reading (Estimator.update_imu: the attitude filter), timed with it. cadence_s:
    sleep this long before each timed message (the graph's control period), else back to back."""
    robot = load_robot(name)
    est = Estimator(robot, **options)
    t, q = _shapes(robot, n_msgs + warmup, rate_hz)
    rng = np.random.default_rng(0)
    gyro = 0.3 * rng.standard_normal((n_msgs + warmup, 3))
    accel = np.array([0.0, 0.0, 9.81]) + 0.3 * rng.standard_normal((n_msgs + warmup, 3))
    for k in range(warmup):
        if imu:
            est.update_imu(t[k], gyro[k], accel[k])
        est.update(t[k], q[k])
    wall = np.empty(n_msgs)
    cpu = np.empty(n_msgs)
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    for k in range(n_msgs):
        if cadence_s:
            time.sleep(cadence_s)
        start, start_cpu = clock(), cpu_clock()
        if imu:
            est.update_imu(t[warmup + k], gyro[warmup + k], accel[warmup + k])
        est.update(t[warmup + k], q[warmup + k])
        cpu[k] = cpu_clock() - start_cpu
        wall[k] = clock() - start
    wall, cpu = wall / 1e3, cpu / 1e3
    return float(np.median(wall)), float(np.percentile(wall, 99)), float(np.median(cpu))


def main():
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    print(f'machine load average (1 min) {load:.2f} on {os.cpu_count()} cores: wall times include waiting '
          f'for the CPU, the CPU-time column does not')
    # The estimator is a few hundred small numpy calls per message: their fixed cost sets its speed.
    a = np.ones(3)
    start = time.process_time_ns()
    for _ in range(20000):
        a + a
    per_call = (time.process_time_ns() - start) / 2e4
    print(f'reference: one small numpy call (3-vector add) costs {per_call:.0f} ns of CPU here')
    print(f'{"robot / options":40s} {"median us":>10s} {"p99 us":>10s} {"median CPU us":>14s}')
    compiled = contact.compiled() is not None
    headline = with_imu = None
    for name, options in [('pitch_yaw_32', {}), ('pitch_yaw_32', {'imu': True}),
                          ('pitch_yaw_32', {'imu': True, 'imu_attitude_s': 1.0}),
                          ('pitch_yaw_32', {'coulomb_iterations': 0}), ('pitch_yaw_32', {'axial_weight': 0.2}),
                          ('pitch_yaw_32', {'ground_plane': False}),
                          ('pitch_yaw_32', {'flat_ground': False}),
                          ('wheeled_8', {}), ('wheeled_8', {'body_frame': 'chassis'})]:
        med, p99, cpu = measure(name, **options)
        headline = headline or (med, cpu)
        if options.get('imu'):
            with_imu = with_imu or (med, cpu)
        label = name + ('' if not options else ' ' + ' '.join(f'{k}={v}' for k, v in options.items()))
        print(f'{label:40s} {med:10.1f} {p99:10.1f} {cpu:14.1f}')
    numpy_cpu = None
    if compiled:
        with numpy_only():
            _, _, numpy_cpu = measure('pitch_yaw_32', n_msgs=1000)
        print(f'{"pitch_yaw_32 numpy path (no kernels)":40s} {"":>10s} {"":>10s} {numpy_cpu:14.1f}')
    med, cpu = headline
    status = 'OK' if cpu < AIM_US else 'WARN'
    ratio = f', {cpu / numpy_cpu:.2f} of the numpy path' if numpy_cpu else ' (numba missing: numpy path)'
    print(f'{status}: pitch_yaw_32 {cpu:.0f} us CPU per message (median; wall {med:.0f} us){ratio}; '
          f'aim under {AIM_US:.0f} us')
    med, cpu = with_imu
    status = 'OK' if cpu < AIM_US else 'WARN'
    print(f'{status}: pitch_yaw_32 with an IMU reading per message {cpu:.0f} us CPU (median; wall {med:.0f} us); '
          f'aim under {AIM_US:.0f} us')
    _, _, hot = measure('pitch_yaw_32', n_msgs=400, warmup=100, imu=True, imu_attitude_s=1.0)
    _, _, paced = measure('pitch_yaw_32', n_msgs=400, warmup=100, imu=True, imu_attitude_s=1.0, cadence_s=0.01)
    status = 'OK' if paced < AIM_US else 'WARN'
    print(f'{status}: pitch_yaw_32 with an IMU as the graph runs it, one message every 10 ms: {paced:.0f} us CPU '
          f'per message, x{paced / hot:.1f} the same messages back to back ({hot:.0f} us); aim under '
          f'{AIM_US:.0f} us')


if __name__ == '__main__':
    main()
