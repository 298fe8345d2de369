"""Dynamics of snake chains: seed 001's moving-frame method and gait torque checks.

- moving_frame: B, Bdot, M*, N* (seed 001 eq. 85-92) for fixed and free-floating chains; inverse and
  forward dynamics.
- torques: joint torques of a joint trajectory under a support model; gait_torque_report against the
  servo's stall torque.
- gait_check: gait_params_torque_report, the gait node's check of a parameter change.
- seed001: the paper's own validation (table 1 motions, RK4).
"""
from snake_control.dynamics.moving_frame import ChainModel, chain_model_from_robot  # noqa: F401
from snake_control.dynamics.torques import TorqueReport, gait_torque_report, joint_torques  # noqa: F401
