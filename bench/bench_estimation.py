"""Estimator cost per joint_states message: pitch_yaw_32 (3D contacts) and wheeled_8 (planar connection).

Prints median and p99 in microseconds of Estimator.update (the whole per-message work of estimator_node
apart from message conversion), measured in one run on whatever else the machine is doing.
"""
import time

import numpy as np

from snake_control.estimation.estimator import Estimator
from snake_control.robot import load_robot


def _shapes(robot, n_msgs, rate_hz):
    t = np.arange(n_msgs) / rate_hz
    i = np.arange(robot.n_joints)
    if robot.kind == 'planar':
        return t, 0.6 * np.sin(2 * np.pi * 0.5 * t[:, None] + 0.8 * i[None, :])
    # Pitch-yaw: a sidewinding-like pair of travelling waves (yaw and pitch out of phase).
    yaw = np.array([a == 'yaw' for a in robot.axes])
    wave = 2 * np.pi * 0.5 * t[:, None] + 0.5 * i[None, :]
    return t, np.where(yaw[None, :], 0.5 * np.sin(wave), 0.3 * np.sin(wave + np.pi / 2))


def measure(name, n_msgs=3000, warmup=200, rate_hz=100.0, **options):
    robot = load_robot(name)
    est = Estimator(robot, **options)
    t, q = _shapes(robot, n_msgs + warmup, rate_hz)
    for k in range(warmup):
        est.update(t[k], q[k])
    costs = np.empty(n_msgs)
    clock = time.perf_counter_ns
    for k in range(n_msgs):
        start = clock()
        est.update(t[warmup + k], q[warmup + k])
        costs[k] = clock() - start
    us = costs / 1e3
    return float(np.median(us)), float(np.percentile(us, 99))


def main():
    print(f'{"robot / options":44s} {"median us":>10s} {"p99 us":>10s}')
    for name, options in [('pitch_yaw_32', {}), ('pitch_yaw_32', {'axial_weight': 0.2}),
                          ('wheeled_8', {}), ('wheeled_8', {'body_frame': 'chassis'})]:
        med, p99 = measure(name, **options)
        label = name + ('' if not options else ' ' + ' '.join(f'{k}={v}' for k, v in options.items()))
        print(f'{label:44s} {med:10.1f} {p99:10.1f}')
    print('aim: under 300 us median for 32 joints')


if __name__ == '__main__':
    main()
