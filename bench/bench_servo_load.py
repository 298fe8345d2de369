"""Servo load: the torque check's model against the servos' drive in the MuJoCo world, per gait.

For each shipped robot and each gait the gamepad can reach, at two speeds: the speed the torque check
runs a gait at (half a gait cycle per second, capped by the scheduler) and the gait node's default clamp
on cmd_vel (0.15 m/s forward, 0.1 m/s sideways, 0.8 rad/s), the fastest a user can command; the scheduler
caps both at the gait's joint-speed reach. The MuJoCo figure is the actuator force, P gain x position error clipped at
stall: the drive a Dynamixel spends, which pays the motor's back-EMF at speed and the floor's friction
besides the torque the model computes. A row whose MuJoCo peak is above the check's fraction is a WARN.
"""
import math
import time

import numpy as np

FRACTION = 0.8
RATE_HZ = 100.0
# Gait cycles driven after the 1.5 s blend from straight, capped so the slowest gaits stay affordable.
CYCLES, MAX_S = 2.0, 16.0


def _row(robot, gait, speed):
    from snake_control.dynamics.torques import gait_torque_report, joint_rates
    from snake_control.gaits.report import run_gait
    from snake_control.validation.servo_load import simulated_torque_report

    probe = run_gait(robot, gait, None, 3.0, RATE_HZ, speed)
    rate = abs(probe.scheduler.state().phase_rate_rad_s)
    duration = min(3.0 + (CYCLES * 2 * math.pi / rate if rate > 1e-9 else 2.0), MAX_S)
    run = run_gait(robot, gait, None, duration, RATE_HZ, speed)
    t, q = run.t_s, run.positions_rad
    model = gait_torque_report(robot, t, q, FRACTION, phase_rad=run.phases_rad)
    measured = simulated_torque_report(robot, t, q, FRACTION, phase_rad=run.phases_rad)
    stall = model.stall_torque_nm
    # The model's torque plus the back-EMF of the joint's speed: the drive the model implies.
    emf = joint_rates(t, q)[0] / robot.bus.servo.no_load_speed_rad_s
    drive = np.abs(model.torque_nm / stall + emf).max()
    per_step = np.abs(measured.torque_nm).max(axis=1)
    return (float(model.peak_nm.max() / stall), float(drive), float(measured.peak_nm.max() / stall),
            float(np.percentile(per_step, 99) / stall), float(np.mean(per_step > FRACTION * stall)))


def main():
    from snake_control.app.graph import default_gait_cycle
    from snake_control.gaits import catalog
    from snake_control.gaits.report import default_speed
    from snake_control.robot import load_robot
    from snake_control.teleop.command_filter import (DEFAULT_MAX_FORWARD_M_S, DEFAULT_MAX_SIDEWAYS_M_S,
                                                     DEFAULT_MAX_TURN_RAD_S)

    clamp = {'forward': DEFAULT_MAX_FORWARD_M_S, 'lateral': DEFAULT_MAX_SIDEWAYS_M_S, 'turn': DEFAULT_MAX_TURN_RAD_S}
    print(f'peak servo load as a share of stall torque, model (the torque check) against MuJoCo (peak, p99 of '
          f'each sample\'s worst joint, time with a joint above {FRACTION:.0%}); {RATE_HZ:g} Hz goals, '
          f'{CYCLES:g} gait cycles or {MAX_S:g} s; "+EMF": the model\'s torque plus the back-EMF of its joint '
          f'speeds, the drive the model implies:')
    print(f'  {"robot":<13} {"gait":<20} {"speed":>20} {"model":>6} {"+EMF":>5} {"MuJoCo":>7} {"p99":>5} '
          f'{"over":>6}')
    warnings = []
    for name in ('pitch_yaw_32', 'wheeled_8'):
        robot = load_robot(name)
        for gait in default_gait_cycle(robot):
            spec = catalog.gait_spec(gait)
            if spec.drive is None:
                continue
            unit = 'rad/s' if spec.drive == 'turn' else 'm/s'
            for label, speed in (('check', default_speed(robot, gait)), ('node clamp', clamp[spec.drive])):
                start = time.perf_counter()
                model, drive, peak, p99, over = _row(robot, gait, speed)
                text = f'{label} {speed:.3g} {unit}'
                flag = '  WARN' if peak > FRACTION else ''
                print(f'  {name:<13} {gait:<20} {text:>20} {model:6.0%} {drive:5.0%} {peak:7.0%} {p99:5.0%} {over:6.1%}'
                      f'{flag}  [{time.perf_counter() - start:.0f} s]', flush=True)
                if peak > FRACTION:
                    warnings.append(f'{name} {gait} at {text}: MuJoCo drive peaks at {peak:.0%} of stall '
                                    f'({over:.1%} of the time above {FRACTION:.0%}); the torque check says '
                                    f'{model:.0%}')
    for w in warnings:
        print(f'  WARN {w}')


if __name__ == '__main__':
    main()
