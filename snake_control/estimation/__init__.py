"""State estimation for snake robots (pure numpy; no ROS).

- connection: the planar passive-wheel local connection (closed form for three links, weighted least
  squares for N links), body frames, slip residual, regularisation near the singular set.
- contact: pitch-yaw robots in 3D: fast chain poses, virtual chassis, contact selection, contact
  no-slip least squares with the module radius.
- estimator: the stateful ``Estimator`` (odometry with covariance) used by estimator_node and
  ``snake odometry``; ``body_pose_from_links`` for ground-truth comparisons.
- pipeline: ``EstimatorPipeline``, estimator_node's per-message logic (input gate, decimation, IMU stamp
  order, re-anchoring, counters) that the node and the offline replay (replay: ``replay_estimator``)
  both run; ``EstimatorParams``, the node's parameters and defaults.
- trajectory_io: joint-trajectory CSV / .mcap input, pose CSV output.
- metrics: ``track_error`` (position error in % of distance, heading error in deg/m) against truth.
"""
from snake_control.estimation.connection import (planar_connection, planar_constraints, planar_frame_change,
                                                 three_link_connection)
from snake_control.estimation.contact import ContactSelector, chain_poses, contact_step, virtual_chassis
from snake_control.estimation.estimator import (Estimator, EstimatorState, body_pose_from_links,
                                                run_offline)

__all__ = ['Estimator', 'EstimatorState', 'ContactSelector', 'body_pose_from_links', 'chain_poses',
           'contact_step', 'planar_connection', 'planar_constraints', 'planar_frame_change',
           'run_offline', 'three_link_connection', 'virtual_chassis']
