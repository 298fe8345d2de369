"""Serpenoid sidewinding on pitch_yaw_32: how fast its true ground contacts slide, per parameter set, beside
the torque check, the motion per gait cycle and the state estimator's error (docs/estimation.md, "Slip").

Each set runs as the validation set's sidewinding row does (snake validate: the gait scheduler at 0.2 m/s
sideways, 20 s after a 3 s warm-up, MuJoCo's elliptic cone) and is measured with
validation.runs.contact_slip: the mean floor speed of the touching skin and its part across the
modules, as shares of the centroid's net speed. AEH-sidewinding, whose contacts hold, is the reference
row. The torque column is dynamics.gait_check's peak over stall (the defaults must stay under 0.8).
About 6 s of wall time per set on an idle core.
"""
import math
import os
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


def run(robot, gait, params, lateral, duration_s=20.0, warmup_s=V.WARMUP_S):
    """One set: (torque share of stall, Achieved, ContactSlip, [ValidationResult off, sensor])."""
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
    rec = V.simulate(SnakeWorld(robot, options=V.ESTIMATION_PHYSICS), goal, duration_s, rate, warmup_s=warmup_s)
    offset = round(warmup_s * rate) / rate
    achieved = achieved_motion(rec.times_s, rec.link_poses, np.interp(rec.times_s + offset, times, phases))
    options = V.case_estimator_options(V.Case(robot.name, gait))
    estimates = [V.evaluate(rec, gait, imu=mode, **options) for mode in ('off', 'sensor')]
    torque = float(np.max(gait_params_torque_report(robot, gait, params).peak_nm)) / robot.bus.servo.stall_torque_nm
    return torque, achieved, V.contact_slip(rec), estimates


def main():
    robot = load_robot('pitch_yaw_32')
    print(f'load average {os.getloadavg()[0]:.2f}; pitch_yaw_32, validation row (20 s, elliptic cone); slip: mean '
          'floor speed of the touching skin (mm/s), its part across the modules, and both over the net speed')
    print(f'{"gait":<16} {"parameters":<34} {"stall":>5} {"m/cycle":>7} {"fwd":>6} {"deg/m":>6} {"slip":>5} '
          f'{"across":>6} {"/v":>5} {"/v":>5} {"floor":>5} {"est %":>6} {"+imu %":>6} {"wall s":>6}')
    for gait, params, lateral in SETS:
        start = time.perf_counter()
        torque, a, slip, (off, imu) = run(robot, gait, params, lateral)
        per_cycle = a.lateral_m_s * a.window_s / max(a.cycles, 1)
        fwd = a.forward_m_s * a.window_s / max(a.cycles, 1)
        text = ', '.join(f'{k} {v:.3g}' for k, v in params.items()) or 'defaults'
        print(f'{gait:<16} {text:<34} {torque:>5.2f} {per_cycle:>7.3f} {fwd:>6.3f} {a.drift_deg_per_m:>6.2f} '
              f'{1000 * slip.mean_m_s:>5.1f} {1000 * slip.lateral_mean_m_s:>6.1f} {slip.ratio:>5.2f} '
              f'{slip.lateral_ratio:>5.2f} {slip.contacts_per_sample:>5.1f} {off.position_error_pct:>6.1f} '
              f'{imu.position_error_pct:>6.1f} {time.perf_counter() - start:>6.1f}', flush=True)
    print(f'load average {os.getloadavg()[0]:.2f}')


if __name__ == '__main__':
    main()
