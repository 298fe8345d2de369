"""The estimator's contact step on the true shape (validation.contact_oracle): which contacts it needs.

For each run (pitch_yaw_32 in MuJoCo, elliptic cone, through the gait controller from rest, 4 s of
warm-up then 10 s measured) the estimator's no-slip step gets the true link poses every control period,
so neither the estimated shape nor the attitude can be wrong, with the contact set of each rule in
validation.contact_oracle.CONTACT_RULES; the table is each rule's final position error, % of the
distance (and heading error, deg). "coulomb" is the floor model alone: the anisotropic Coulomb power
minimised over MuJoCo's own contact points and normal forces (slow: serpenoid sidewinding only). A WARN
line follows each run where the estimator's band misses the 10 % aim (docs/estimation.md, "Which
contacts: the estimator's step on the true shape").
"""
import math
import time

from snake_control.robot import load_robot
from snake_control.validation.contact_oracle import CONTACT_RULES, oracle_run

AIM_PCT = 10.0
# (gait, command, with the Coulomb check)
RUNS = (
    ('sidewinding', (0.0, 0.1, 0.0), True),
    ('sidewinding', (0.0, 0.2, 0.0), True),
    ('aeh_sidewinding', (0.0, 0.1, 0.0), False),
    ('rolling', (0.0, 0.1, 0.0), False),
    ('serpentine', (0.15, 0.0, 0.0), False),
)


def main(runs=RUNS, duration_s=10.0):
    robot = load_robot('pitch_yaw_32')
    cols = list(CONTACT_RULES) + ['coulomb']
    print('position error, % of the distance (heading error, deg), contact_step on the true link poses with '
          'each rule\'s contacts; "coulomb": the floor model on MuJoCo\'s contacts and loads')
    print(f'  {"gait":<16} {"command":<14} {"m":>5} {"loaded":>6}  ' + '  '.join(f'{c:>15}' for c in cols))
    warns = []
    for gait, command, coulomb in runs:
        start = time.monotonic()
        r = oracle_run(robot, gait, command, duration_s=duration_s, coulomb=coulomb)
        cells = []
        for rule in CONTACT_RULES + (('coulomb, MuJoCo loads',) if coulomb else ()):
            cells.append(f'{r.error_pct(rule):6.1f} ({math.degrees(r.heading_errors_rad[rule]):+5.1f})')
        if not coulomb:
            cells.append('-')
        cmd = ','.join(f'{c:g}' for c in command)
        print(f'  {gait:<16} {cmd:<14} {r.distance_m:5.2f} {r.loaded_modules:6.1f}  '
              + '  '.join(f'{c:>15}' for c in cells) + f'  [{time.monotonic() - start:.0f} s]', flush=True)
        if r.error_pct('estimator band') > AIM_PCT:
            warns.append(f'  WARN {gait} at {cmd}: the estimator\'s contact band is {r.error_pct("estimator band"):.0f} % '
                         f'off on the true shape (aim {AIM_PCT:g} %); MuJoCo\'s loaded modules give '
                         f'{r.error_pct("loaded"):.1f} %, the lowest 6 {r.error_pct("lowest 6"):.1f} %')
    for w in warns:
        print(w)


if __name__ == '__main__':
    main()
