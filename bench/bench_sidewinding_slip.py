"""Serpenoid sidewinding on pitch_yaw_32: how fast its true ground contacts slide, per parameter set, beside
the torque check, the motion per gait cycle and the state estimator's error (docs/estimation.md, "Slip").

Each set runs as the validation set's sidewinding row does (snake validate: the gait scheduler at 0.2 m/s
sideways, 20 s after a 3 s warm-up, MuJoCo's elliptic cone) and is measured with
validation.runs.contact_slip: the mean floor speed of the touching skin and its part across the
modules, as shares of the centroid's net speed. AEH-sidewinding, whose contacts hold, is the reference
row. The torque column is dynamics.gait_check's peak over stall (the defaults must stay under 0.8); "up"
is the mean world z of the modules' z axes over the run (1 upright, about 0.8 for a sidewinding tread, near
0 or below for a body that has turned over and rolls). About 6 s of wall time per set on an idle core.

`python -m bench.bench_sidewinding_slip --sweep` runs the wider scan (sweep_sets(): 190 sets of spatial
frequency, amplitudes and phase delta, then the defaults at three other speeds) the same way but 8 s each,
about 10 minutes (docs/estimation.md, "How much serpenoid sidewinding's contacts slide").
"""
import math
import os
import sys
import time

import numpy as np

from snake_control.dynamics.gait_check import gait_params_torque_report
from snake_control.gaits.scheduler import GaitScheduler
from snake_control.physics.world import SnakeWorld
from snake_control.robot import load_robot
from snake_control.validation import runs as V
from snake_control.validation.cmdvel import achieved_motion

# (gait, parameter overrides, lateral command m/s). The upright tread's amplitudes within the torque
# check, the earlier w_s = 0.4 (113 % of stall), and equal amplitudes (the helix rolls instead).
SETS = (
    ('sidewinding', {}, 0.2),
    ('sidewinding', {'A_pitch': 0.2}, 0.2),
    ('sidewinding', {'A_pitch': 0.35}, 0.2),
    ('sidewinding', {'A_pitch': 0.4, 'A_yaw': 0.5}, 0.2),
    ('sidewinding', {'w_s': 0.5, 'A_pitch': 0.4, 'A_yaw': 0.5}, 0.2),
    ('sidewinding', {'w_s': 0.8, 'A_pitch': 0.4, 'A_yaw': 0.6}, 0.2),
    ('sidewinding', {'w_s': 0.4}, 0.2),
    ('sidewinding', {'A_yaw': 0.3, 'delta': -math.pi / 2}, 0.2),
    ('aeh_sidewinding', {}, 0.15),
)


def sweep_sets():
    """(gait, parameter overrides, lateral command m/s) of the wider scan: spatial frequency 0.2-1.2 rad per
    joint against the yaw amplitude with the pitch amplitude at a half and three quarters of it (delta pi/2);
    delta pi/8-7pi/8 around the defaults' spatial frequency; a fine grid around the defaults (pitch 0.6-0.9
    of yaw); the defaults at 0.05, 0.1 and 0.3 m/s."""
    sets = []
    for w_s in (0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.2):
        for a_yaw in (0.4, 0.6, 0.8, 1.0):
            sets += [('sidewinding', {'w_s': w_s, 'A_yaw': a_yaw, 'A_pitch': round(a_yaw * r, 3)}, 0.2)
                     for r in (0.5, 0.75)]
    for w_s in (0.5, 0.6, 0.7):
        for a_yaw in (0.4, 0.5, 0.6):
            for r in (0.5, 0.75):
                sets += [('sidewinding', {'w_s': w_s, 'A_yaw': a_yaw, 'A_pitch': round(a_yaw * r, 3),
                                          'delta': round(k * math.pi / 8, 4)}, 0.2) for k in (1, 3, 5, 6, 7)]
    for w_s in (0.55, 0.6, 0.65):
        for a_yaw in (0.4, 0.45, 0.5):
            sets += [('sidewinding', {'w_s': w_s, 'A_yaw': a_yaw, 'A_pitch': round(a_yaw * r, 3)}, 0.2)
                     for r in (0.6, 0.7, 0.8, 0.9)]
    return sets + [('sidewinding', {}, lateral) for lateral in (0.05, 0.1, 0.3)]


def run(robot, gait, params, lateral, duration_s=20.0, warmup_s=V.WARMUP_S):
    """One set: (torque share of stall, Achieved, ContactSlip, [ValidationResult off, sensor], up: the mean
    world z of the modules' z axes)."""
    scheduler = GaitScheduler(robot, gait, params, initial_positions_rad=np.zeros(robot.n_joints))
    scheduler.set_command(0.0, lateral, 0.0)
    state = {'t': 0.0, 'q': scheduler.step(1e-9).positions_rad}
    times, phases = [0.0], [scheduler.state().phase_rad]

    def goal(t_s):
        if t_s > state['t']:
            state['q'] = scheduler.step(t_s - state['t']).positions_rad
            state['t'] = t_s
            times.append(t_s)
            phases.append(scheduler.state().phase_rad)
        return state['q']

    rate = robot.bus.control_rate_hz
    rec = V.simulate(SnakeWorld(robot, options=V.VALIDATION_PHYSICS), goal, duration_s, rate, warmup_s=warmup_s)
    offset = round(warmup_s * rate) / rate
    achieved = achieved_motion(rec.times_s, rec.link_poses, np.interp(rec.times_s + offset, times, phases))
    options = V.case_estimator_options(V.Case(robot.name, gait))
    estimates = [V.evaluate(rec, gait, imu=mode, **options) for mode in ('off', 'sensor')]
    torque = float(np.max(gait_params_torque_report(robot, gait, params).peak_nm)) / robot.bus.servo.stall_torque_nm
    up = float(np.mean(rec.link_poses[:, :, 2, 2]))
    return torque, achieved, V.contact_slip(rec), estimates, up


def main(sets=SETS, duration_s=20.0):
    robot = load_robot('pitch_yaw_32')
    print(f'load average {os.getloadavg()[0]:.2f}; pitch_yaw_32, validation row ({duration_s:g} s, elliptic cone); '
          'slip: mean floor speed of the touching skin (mm/s), its part across the modules, and both over the net '
          'speed')
    print(f'{"gait":<16} {"parameters":<46} {"lat":>5} {"stall":>5} {"m/cycle":>7} {"fwd":>6} {"deg/m":>6} '
          f'{"slip":>5} {"across":>6} {"/v":>5} {"/v":>5} {"floor":>5} {"up":>5} {"est %":>6} {"+imu %":>6} '
          f'{"wall s":>6}')
    for gait, params, lateral in sets:
        start = time.perf_counter()
        torque, a, slip, (off, imu), up = run(robot, gait, params, lateral, duration_s)
        per_cycle = a.lateral_m_s * a.window_s / max(a.cycles, 1)
        fwd = a.forward_m_s * a.window_s / max(a.cycles, 1)
        text = ', '.join(f'{k} {v:.3g}' for k, v in params.items()) or 'defaults'
        print(f'{gait:<16} {text:<46} {lateral:>5.2f} {torque:>5.2f} {per_cycle:>7.3f} {fwd:>6.3f} '
              f'{a.drift_deg_per_m:>6.2f} {1000 * slip.mean_m_s:>5.1f} {1000 * slip.lateral_mean_m_s:>6.1f} '
              f'{slip.ratio:>5.2f} {slip.lateral_ratio:>5.2f} {slip.contacts_per_sample:>5.1f} {up:>5.2f} '
              f'{off.position_error_pct:>6.1f} {imu.position_error_pct:>6.1f} {time.perf_counter() - start:>6.1f}',
              flush=True)
    print(f'load average {os.getloadavg()[0]:.2f}')


if __name__ == '__main__':
    if '--sweep' in sys.argv[1:]:
        main(sweep_sets(), duration_s=8.0)
    else:
        main()
