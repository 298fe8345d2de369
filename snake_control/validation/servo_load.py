"""How hard the servos work for a gait in the MuJoCo world, against the torque check's model.

The torque check (snake_control.dynamics.torques) models the torque a joint must deliver: the links'
inertia and the weight of lifted links on a rigid floor. A Dynamixel in position mode is limited by its
drive, not by the torque it delivers: the PWM share times the stall torque, P gain x position error,
saturates at full voltage, and a joint turning at speed w spends stall * w / w_no_load of it on the
motor's back-EMF before any torque reaches the link. The MuJoCo world models the servo so
(snake_control.physics.mjcf: stiffness from the P gain, the back-EMF as joint damping, the actuator force
clipped to the stall torque), so its actuator force is that drive, and it also carries what the model
leaves out: floor friction, a 3D shape pressing its contacts into the floor, impacts.

    report = simulated_torque_report(robot, t_s, q_rad, fraction=0.8, phase_rad=phases)
    report.ok, report.message, report.table()      # a dynamics.torques.TorqueReport, support 'mujoco'
"""
from __future__ import annotations

import numpy as np

from snake_control.dynamics.torques import TorqueReport, torque_report

# Held at the trajectory's first shape before it starts: the body settles onto the floor.
SETTLE_S = 1.0


def simulated_torques(robot, t_s, q_rad, options=None) -> np.ndarray:
    """(T, n) actuator torques (N m) of the servos in the MuJoCo world driven with the joint goals
    q_rad (T, n) rad at the uniformly spaced times t_s (T,) s, sampled at the end of each goal's period.

    The robot starts at rest in the shape q_rad[0] and settles for SETTLE_S holding it. options: a
    physics.PhysicsOptions (None: the graph's world). The goal period must be a whole number of physics
    steps (ValueError otherwise, naming it).
    """
    from snake_control.physics import SnakeWorld
    from snake_control.validation.runs import simulate

    t = np.asarray(t_s, dtype=float)
    q = np.asarray(q_rad, dtype=float)
    if t.ndim != 1 or t.size < 2 or q.shape != (t.size, robot.n_joints):
        raise ValueError(f't_s must be (T,) with T >= 2 and q_rad (T, {robot.n_joints}); got {t.shape}, {q.shape}')
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(q))):
        raise ValueError('t_s and q_rad must be finite')
    steps = np.diff(t)
    period = float(steps.mean())
    if period <= 0 or np.ptp(steps) > 1e-6 * period:
        raise ValueError('t_s must be uniformly spaced and increasing (one joint goal per control period)')
    world = SnakeWorld(robot, options=options)

    def goal(t_since):
        return q[min(int(round(t_since / period)), t.size - 1)]

    rec = simulate(world, goal, period * (t.size - 1), 1.0 / period, settle_s=SETTLE_S)
    return rec.torques_nm[:t.size]


def simulated_torque_report(robot, t_s, q_rad, fraction: float = 0.8, *, phase_rad=None,
                            options=None) -> TorqueReport:
    """TorqueReport (support 'mujoco') of the servos' actuator torques in the MuJoCo world driven with
    the joint goals q_rad (T, n) at the uniform times t_s (T,): see simulated_torques. phase_rad (T,):
    the gait phase of each sample (intervals over the limit are then reported in gait phase)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f'fraction must be in (0, 1], got {fraction}')
    tau = simulated_torques(robot, t_s, q_rad, options)
    return torque_report(robot, t_s, tau, fraction, phase_rad=phase_rad, support='mujoco')
