"""Gait engine: one scheduler tick for pitch_yaw_32 (every gait, and mid-switch), and the fit table.

Prints median and p99 microseconds per GaitScheduler.step (aim: median < 100 us, i.e. < 5 % of a
500 Hz period), and the RMS chain-to-curve fit error of every backbone gait at the paper's parameters.
"""
import time

import numpy as np

from snake_control.gaits import GaitScheduler, catalog
from snake_control.gaits.report import fit_report, format_fit_table
from snake_control.robot import load_robot

TICKS = 1500
DT = 0.002            # 500 Hz


def _time_ticks(sched, ticks=TICKS):
    out = np.empty(ticks)
    for k in range(ticks):
        t0 = time.perf_counter()
        sched.step(DT)
        out[k] = time.perf_counter() - t0
    return out * 1e6


def _command(sched):
    sched.set_command(0.05, 0.05, 0.2)


def main():
    robot = load_robot('pitch_yaw_32')
    print(f'scheduler tick, {robot.name} ({robot.n_joints} joints), {TICKS} ticks at 500 Hz each')
    print(f'{"gait":<34} {"median us":>10} {"p99 us":>10}')
    medians = []
    for name in catalog.gaits_for(robot):
        sched = GaitScheduler(robot, name)
        _command(sched)
        _time_ticks(sched, 100)                       # warm up, past the speed ramp start
        us = _time_ticks(sched)
        medians.append(np.median(us))
        print(f'{name:<34} {np.median(us):>10.1f} {np.percentile(us, 99):>10.1f}')
    # Mid-switch: serpentine -> s_crawler (quadrature, the most expensive) and then a switch requested
    # mid-switch to aeh_sidewinding, so three gaits are evaluated per tick. Transitions are held open
    # by timing inside their first second.
    for label, chain in (('mid-switch serpentine->s_crawler', ['s_crawler']),
                         ('mid-mid-switch ...->aeh_sidewinding', ['s_crawler', 'aeh_sidewinding'])):
        samples = []
        for _ in range(10):
            sched = GaitScheduler(robot, 'serpentine', transition_s=5.0)
            _command(sched)
            _time_ticks(sched, 50)
            for g in chain:
                sched.select(g)
                _time_ticks(sched, 20)
            assert sched.state().layers == len(chain) + 1
            samples.append(_time_ticks(sched, 150))
        us = np.concatenate(samples)
        print(f'{label:<34} {np.median(us):>10.1f} {np.percentile(us, 99):>10.1f}')
    t0 = time.perf_counter()
    sched = GaitScheduler(robot, 'serpentine')
    for k in range(20):
        sched.select(('aeh_sidewinding', 's_crawler')[k % 2])
    select_ms = (time.perf_counter() - t0) / 20 * 1e3
    print(f'select() (phase matching and phase-rate bound, not per tick): {select_ms:.1f} ms per call')
    print(f'median over single gaits: {np.median(medians):.1f} us')

    print(f'\nfit error, chain FK vs continuous curve after best rigid alignment, {robot.name} '
          f'(l = {robot.link_length_m} m), paper parameters, mean and worst over 8 phases:')
    print(format_fit_table(fit_report(robot)))
    # O(l^2): the same curves on chains with l halved twice (same body length)
    from snake_control.gaits import backbone
    print('\nconvergence: RMS fit (mm) for l, l/2, l/4 (same curves and body length) and ratios')
    for name in catalog.BACKBONE_GAITS:
        shape = catalog.GaitShape(catalog.gait_spec(name), robot, catalog.resolve_params(
            catalog.gait_spec(name), robot))
        curve, s0 = shape.curve(0.0)
        errs = []
        for div in (1, 2, 4):
            n = robot.n_joints * div
            axes = ['pitch', 'yaw'] * (n // 2)
            errs.append(backbone.chain_fit_error(curve, axes, robot.link_length_m / div, s0))
        print(f'{name:<18} ' + ' '.join(f'{1e3 * e:8.3f}' for e in errs)
              + f'   ratios {errs[0] / errs[1]:.3f} {errs[1] / errs[2]:.3f}')


if __name__ == '__main__':
    main()
