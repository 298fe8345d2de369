"""The fault matrix as a table: pitch_yaw_32 (32 servos, 4 Mbit/s, 100 Hz) through each bus fault.

Columns: whether the driver loop survived and was running again at the end, the fraction of cycles that
read every servo and the worst servo's fraction of fresh cycles, the largest goal step of a joint between
two running cycles against what its velocity limit allows in one period, and whether every servo's
Torque Enable register read 0 after stop(). Figures are printed, never asserted.
"""
from snake_control.dynamixel.fault_matrix import FAULTS, run_fault
from snake_control.robot import load_robot


def main():
    robot = load_robot('pitch_yaw_32')
    print(f'{"fault":<18} {"survived":>8} {"mode":>10} {"all fresh":>9} {"worst servo":>11} '
          f'{"max step rad":>12} {"limit rad":>9} {"torque at end":>13}')
    for fault in FAULTS:
        r = run_fault(fault, robot, seconds_after=3.0)
        torque = 'off' if r.torque_off_at_end else f'ON ({", ".join(r.unconfirmed) or "?"})'
        print(f'{fault:<18} {"yes" if r.survived else "NO":>8} {r.mode_at_end:>10} {r.fresh_fraction:>9.1%} '
              f'{r.min_servo_fresh:>11.1%} {r.max_goal_step_rad:>12.3f} {r.step_limit_rad:>9.3f} '
              f'{torque:>13}', flush=True)


if __name__ == '__main__':
    main()
