"""The snake state estimator: joint angles (and optionally an IMU) in, odometry out.

One stateful class serves the ROS node (snake_control/nodes/estimator_node.py) and offline runs
(`snake odometry`, validation against MuJoCo). It picks its model from the robot's kind:

- planar (passive wheels, docs/estimation.md): the weighted least-squares local connection
  xi = -A(r) r_dot of ``snake_control.estimation.connection``, evaluated at the mid-point shape of each
  step, integrated on SE(2) with the exponential map: g_{k+1} = g_k exp(-A(r_{k+1/2}) (r_{k+1} - r_k)).
  The pose lies in the plane z = 0. With an IMU (update_imu) the heading increment of each step is the
  gyro's instead (the IMU link's turn less the joints between it and the integrated link): skidding
  wheels turn the body where the no-slip connection sees no turn.
- pitch_yaw (docs/estimation.md): the virtual chassis and the no-slip ground contacts of
  ``snake_control.estimation.contact``, integrated on SE(3) the same way; gravity from the integrated
  orientation, or from an IMU orientation when one is given; a gyro rate fixes the rotation.

API
---
``Estimator(robot, body_frame=None, *, weights=None, initial_pose=None, slip_std_m_s=0.01,
slip_correlation_s=0.1, imu_link=0, contact_enter_m=None, contact_exit_m=None, axial_weight=None,
singular_threshold=0.02, hold_time_s=1.0, flat_ground=True, contact_ends=True, ground_plane=True,
coulomb_iterations=3, static_slip_m_s=0.01, imu_gap_s=0.05, imu_attitude_s=0.0, contact_loads=True,
weak_contact_band=0.5)``

- robot: a snake_control.robot.Robot or a robot name / YAML path.
- body_frame: 'middle' (default for planar robots: link n_links // 2), 'head', 'tail', 'chassis'
  (default for pitch-yaw robots: the virtual chassis) or an integer link index. The reported pose and
  twist are those of this frame; the estimate itself does not depend on the choice.
- weights: per-link confidence (n_links,) (planar wheels, or pitch-yaw contacts).
- initial_pose: pose of the body frame in the odom frame at the first update: (x, y, theta) or a 4x4
  matrix. Default: planar robots have the body frame at the origin with heading 0; pitch-yaw robots
  rest on the face of the convex hull of their module centres closest to "tail link's z axis up"
  (a flat body lies flat, a body with lifted parts stands on its lowest three contacts), with the
  chassis x axis heading along odom x above the origin and the lowest modules on the floor z = 0
  (module centres at z >= radius).
- imu_link: link index carrying the IMU (its frame = the link frame).
- slip_std_m_s, slip_correlation_s: the covariance model. Each wheel's / contact's slip velocity is
  taken as noise of variance slip_std^2 + (weighted residual sum of squares) / (constraints - rank),
  correlated over slip_correlation_s; the twist covariance is that variance times (C^T W C)^-1 and the
  pose covariance grows by dt * max(dt, slip_correlation_s) * twist covariance per step, transported
  along the path with the adjoint.
- contact_enter_m, contact_exit_m: pitch-yaw contact hysteresis (height above the lowest module;
  defaults radius / 2 and radius). weak_contact_band: while the last step's contacts were weak (the body
  standing in 3D on a few modules: a sidewinding tread, a gait blend) both heights are this fraction of
  themselves (1: the same band throughout; docs/estimation.md, "A narrower band while the contacts are
  weak"). axial_weight: weight of the no-slip condition along each module's
  axis (1: no slip at all; 0: modules may slide lengthwise, like wheels); None (default) takes the
  robot YAML's ``link.axial_weight``, the skin's (axial / lateral friction)^2.
- flat_ground (pitch-yaw): the contact modules rest on the plane z = 0 of odom: after each step the
  chassis height, roll and pitch are corrected so that they do (this removes the drift of the
  unobserved vertical motion; switch off on uneven ground).
- ground_plane (pitch-yaw, with flat_ground and no IMU): each step the floor is found as the face of the
  hull of module centres the body rests on (contact.support_plane: nearest the predicted gravity, the
  centroid over it); it sets the chassis roll and pitch exactly and leaves only yaw and translation to
  the contacts. Without it a tread of contacts in a line (sidewinding) cannot hold the roll about that
  line and the estimate rolls away (AEH-sidewinding in MuJoCo: 9 % instead of over 100 %). If no such
  face lies within 20 degrees of the prediction the step falls back to the least-squares settle.
- contact_ends (pitch-yaw): a module tilted along gravity touches the ground with its lower end (and is
  selected by that end's height); off, every contact is below its module's centre. Gaits that lift and
  lower modules need it: their modules pitch about the end on the ground.
- imu_gap_s (pitch-yaw, with update_imu): raw IMU readings further apart are a gap, bridged with the
  contacts; imu_attitude_s: 0 (default) gives each update the IMU's attitude as it is and leaves the
  contacts only the translation; above 0 the contacts turn the chassis and the IMU's attitude pulls it with
  that time constant (s), for joint vectors read inconsistently in time (see docs/estimation.md); while the
  contacts are weak (a gait blend) the IMU's turn turns the chassis, and once its down has been seen to agree
  with the floor the body lay flat on, its down is the floor there (docs/estimation.md, "The two blends").
- coulomb_iterations, static_slip_m_s (pitch-yaw): contacts weighted by their slip, so the estimate
  follows the ones that stick (contact.contact_step: reweighted least squares toward the least power
  dissipated by dry friction, the quasi-static motion of a body on a Coulomb floor; slips under
  static_slip_m_s count as sticking); 0 iterations is plain least squares (a viscous floor). In MuJoCo
  it takes serpentine from 3 % to 0.4 % of distance and serpenoid sidewinding from 140 % to 109 %.
- contact_loads (pitch-yaw): the contacts must be able to hold the body (the next lowest modules join while
  the centroid does not stand over their hull, contact.supporting_contacts), and each is weighted by its
  static normal load (contact.static_loads): a body whose contacts all scrub (a gait blend reshaping it
  at rest) moves as its loaded contacts let it, not as a lone or unloaded module would.
- singular_threshold: normalised singular value of the no-slip constraints below which a direction of
  the twist counts as unobservable (near the singular set); along it the previous twist is held, decaying
  with time constant hold_time_s (s), and the covariance is raised (``singular`` is set).

``estimator.update_imu(t_s, gyro_rad_s, accel_m_s2=None)`` (pitch-yaw robots) takes a raw IMU reading
of the imu_link's gyro (rad/s) and accelerometer (m/s^2) at its own time: the attitude filter of
``snake_control.estimation.imu`` (gravity for roll and pitch, the gyro for yaw, the gyro's bias learnt
while the joints are still) then gives every later update its orientation, and the contacts only the
translation. Without IMU readings nothing changes.

``estimator.update(t_s, positions_rad, velocities_rad_s=None, imu_orientation_xyzw=None,
imu_rate_rad_s=None) -> EstimatorState`` takes joint angles in the robot's joint order (use
``snake_control.robot.reorder_joints`` for a JointState's order) at time t_s (s, strictly increasing; repeated or older
stamps are ignored and counted in ``estimator.skipped``). The first call only initialises.

Read-outs (also in the returned EstimatorState): ``pose`` (4x4, body frame in odom), ``pose_xyz_quat``
(x, y, z, qx, qy, qz, qw), ``pose_se2`` (x, y, theta; the planar pose, or the projection of a 3D one),
``twist`` (6,) body twist (vx, vy, vz, wx, wy, wz) in the body frame, ``pose_covariance`` (6, 6) in
ROS order (x, y, z, rot x, rot y, rot z) about odom-aligned axes, ``twist_covariance`` (6, 6) in the
body frame, ``slip_residual`` (n_links,) each wheel's lateral / each contact's slip speed (m/s; 0
where not a contact), ``slip_rms_m_s``, ``rank`` and ``rank_needed`` of the constraints, ``singular``
(near a singular shape: a weak direction held, the covariance raised), ``contacts`` (n_links,) bool.

``body_pose_from_links(robot, link_poses, body_frame=None, previous=None)`` gives the same body frame
from true link poses (n_links, 4, 4) in the world, e.g. MuJoCo ground truth, for comparisons; pass its
first result as ``initial_pose`` to start the estimate at the truth.

Example (lateral undulation on wheeled_8, the wave travelling toward the tail: the snake moves forward):
    >>> est = Estimator('wheeled_8', body_frame='chassis')
    >>> for k in range(201):
    ...     t = 0.01 * k
    ...     state = est.update(t, 0.6 * np.sin(2 * np.pi * t + 0.8 * np.arange(7)))
    >>> state.pose_se2.round(3)          # two gait cycles: x, y (m), heading (rad)
    array([ 1.727, -0.32 , -0.   ])
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.estimation.connection import (DEFAULT_SINGULAR_THRESHOLD, _connection, body_frame_index,
                                                 planar_frame_offset)
from snake_control.estimation.imu import AttitudeFilter, _log_rotation, _rodrigues
from snake_control.estimation.contact import (LOAD_FLOOR, ContactSelector, _cross3, chain_poses, compiled,
                                              contact_step, resting_down, shape_turn, support_plane,
                                              supporting_contacts, virtual_chassis)
from snake_control.kinematics.lie import (hat3, matrix_from_quaternion, orthonormalize, quaternion_from_matrix,
                                          se2_adjoint, se2_compose, se2_exp, se2_inverse, se3_adjoint, se3_inverse,
                                          se3_exp_fast, se3_log, se3_matrix, so3_exp, so3_log,
                                          wrap_angle, xyyaw_from_se3)

_UP = np.array([0.0, 0.0, 1.0])

_Z_TAIL = _UP     # the tail link's own z axis (its yaw axis), in its own frame


def _rotation_between(a, b) -> np.ndarray:
    """Smallest rotation taking unit vector a onto unit vector b."""
    axis = np.cross(a, b)
    s, c = np.linalg.norm(axis), float(a @ b)
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        perp = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        return so3_exp(np.pi * perp / np.linalg.norm(perp))
    return so3_exp(axis / s * np.arctan2(s, c))


@dataclass(frozen=True)
class EstimatorState:
    """A snapshot of the estimate after one update (see the module docstring for the fields)."""

    t_s: float
    pose: np.ndarray
    twist: np.ndarray
    pose_covariance: np.ndarray
    twist_covariance: np.ndarray
    slip_residual: np.ndarray
    slip_rms_m_s: float
    rank: int
    rank_needed: int
    singular: bool
    contacts: np.ndarray

    @property
    def pose_xyz_quat(self) -> np.ndarray:
        return np.concatenate([self.pose[:3, 3], quaternion_from_matrix(self.pose[:3, :3])])

    @property
    def pose_se2(self) -> np.ndarray:
        return xyyaw_from_se3(self.pose)


def _rot_z(angle_rad: float) -> np.ndarray:
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _pose_matrix(pose) -> np.ndarray:
    p = np.asarray(pose, dtype=float)
    if p.shape == (3,):
        c, s = np.cos(p[2]), np.sin(p[2])
        return se3_matrix(np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.array([p[0], p[1], 0.0]))
    if p.shape == (4, 4):
        return p.copy()
    raise ValueError(f'initial_pose must be (x, y, theta) or a 4x4 matrix, got shape {p.shape}')


def _se2_to_matrix(x, y, theta) -> np.ndarray:
    c, s = math.cos(theta), math.sin(theta)
    g = np.eye(4)
    g[0, 0] = g[1, 1] = c
    g[0, 1], g[1, 0] = -s, s
    g[0, 3], g[1, 3] = x, y
    return g


class Estimator:
    """Odometry of a snake robot from its joint angles (see the module docstring for the API)."""

    def __init__(self, robot, body_frame=None, *, weights=None, initial_pose=None,
                 slip_std_m_s: float = 0.01, slip_correlation_s: float = 0.1, imu_link: int = 0,
                 contact_enter_m: float | None = None, contact_exit_m: float | None = None,
                 axial_weight: float | None = None, singular_threshold: float = DEFAULT_SINGULAR_THRESHOLD,
                 hold_time_s: float = 1.0, flat_ground: bool = True, contact_ends: bool = True,
                 ground_plane: bool = True, coulomb_iterations: int = 3, static_slip_m_s: float = 0.01,
                 imu_gap_s: float = 0.05, imu_attitude_s: float = 0.0, contact_loads: bool = True,
                 weak_contact_band: float = 0.5):
        if isinstance(robot, str) or hasattr(robot, '__fspath__'):
            from snake_control.robot import load_robot
            robot = load_robot(robot)
        self.robot = robot
        self.planar = robot.kind == 'planar'
        n_links = robot.n_links
        if body_frame is None:
            body_frame = 'middle' if self.planar else 'chassis'
        self.body_link = body_frame_index(body_frame, n_links)     # None: virtual chassis
        # Planar robots integrate a link frame; the planar virtual chassis is composed onto it.
        self._int_link = self.body_link if self.body_link is not None else n_links // 2
        self.body_frame = body_frame
        if weights is not None:
            weights = np.asarray(weights, dtype=float)
            if weights.shape != (n_links,) or np.any(weights < 0) or not np.all(np.isfinite(weights)):
                raise ValueError(f'weights must be ({n_links},) non-negative and finite, got {weights}')
        self.weights = weights
        if axial_weight is None:
            axial_weight = robot.axial_weight
        if not 0.0 <= axial_weight <= 1.0:
            raise ValueError(f'axial_weight must be in [0, 1], got {axial_weight}')
        if not 0 <= int(imu_link) < n_links:
            raise ValueError(f'imu_link must be in 0..{n_links - 1}, got {imu_link}')
        if slip_std_m_s <= 0 or slip_correlation_s <= 0:
            raise ValueError('slip_std_m_s and slip_correlation_s must be positive')
        self.lengths = np.asarray(robot.link_lengths_m, dtype=float)
        self.axes = np.asarray(robot.axis_vectors, dtype=float)
        self.radius = float(robot.module_radius_m)
        self.slip_std = float(slip_std_m_s)
        self.tau = float(slip_correlation_s)
        self.imu_link = int(imu_link)
        self.axial_weight = float(axial_weight)
        if not 0.0 < singular_threshold < 1.0 or hold_time_s <= 0:
            raise ValueError('singular_threshold must be in (0, 1) and hold_time_s positive')
        self.singular_threshold = float(singular_threshold)
        self.hold_time = float(hold_time_s)
        self.flat_ground = bool(flat_ground)
        self.ground_plane = bool(ground_plane)
        if int(coulomb_iterations) < 0 or not static_slip_m_s > 0:
            raise ValueError(f'coulomb_iterations must be >= 0 and static_slip_m_s positive, got '
                             f'{coulomb_iterations} and {static_slip_m_s}')
        self.coulomb_iterations = int(coulomb_iterations)
        if not imu_gap_s > 0:
            raise ValueError(f'imu_gap_s must be positive, got {imu_gap_s}')
        self.imu_gap_s = float(imu_gap_s)
        if not imu_attitude_s >= 0:
            raise ValueError(f'imu_attitude_s must be >= 0, got {imu_attitude_s}')
        self.imu_attitude_s = float(imu_attitude_s)
        self.static_slip_m_s = float(static_slip_m_s)
        self.contact_loads = bool(contact_loads)
        enter = 0.5 * self.radius if contact_enter_m is None else float(contact_enter_m)
        exit_ = max(enter, self.radius if contact_exit_m is None else float(contact_exit_m))
        self.selector = ContactSelector(enter, exit_)
        if not 0.0 < weak_contact_band <= 1.0:
            raise ValueError(f'weak_contact_band must be in (0, 1], got {weak_contact_band}')
        self.weak_contact_band = float(weak_contact_band)
        # The contacts while the last step's were weak; the full band (selector) still judges whether they are.
        self.weak_selector = ContactSelector(enter * weak_contact_band, exit_ * weak_contact_band)
        self.length_scale = float(np.mean(self.lengths))
        self.half_length = 0.5 * self.length_scale if contact_ends else 0.0
        self.initial_pose = None if initial_pose is None else _pose_matrix(initial_pose)
        self.reset()

    # --- state ---------------------------------------------------------------------------------------

    def reset(self, pose=None):
        """Forget the history; the next update re-initialises (at ``pose`` if given)."""
        if pose is not None:
            self.initial_pose = _pose_matrix(pose)
        self._t = None
        self._q = None
        self._v = None
        self._anchor_rot = None     # reanchor(): the chassis rotation (tail frame) the next shape continues
        self.skipped = 0
        self.stale_held = 0
        self.updates = 0
        self.selector.reset()
        self.weak_selector.reset()
        n = self.robot.n_links
        self._state = EstimatorState(0.0, np.eye(4), np.zeros(6), np.zeros((6, 6)), np.zeros((6, 6)),
                                     np.zeros(n), 0.0, 0, 3 if self.planar else 6, False, np.ones(n, bool))
        # Planar: pose (x, y, theta) of the body frame and its 3x3 right-perturbation covariance.
        self._g2 = np.zeros(3)
        self._p2 = np.zeros((3, 3))
        self._flip = False
        self._chassis_heading = None
        self._xi_last = np.zeros(3 if self.planar else 6)     # last twist, held near singular shapes
        self._rate_last = 0.0                                  # running mean |shape velocity| (rad/s)
        # 3D: chassis pose in odom (4x4), 6x6 right-perturbation covariance, chassis geometry.
        self._gc = np.eye(4)
        self._p3 = np.zeros((6, 6))
        self._geom = None
        self._pull_attitude = None  # chassis attitude (3, 3) the IMU gave at the last pulled step (imu_attitude_s)
        self._contacts_weak = False  # the last step's contacts could not be trusted to turn the chassis
        self._plane_down = None     # ground-plane down in the last chassis frame (support_plane)
        self._body_turn = None      # how the body turned in chassis axes since the IMU's chassis was last level
        # imu_attitude_s > 0: how far (rad, averaged over IMU_FLOOR_AVERAGE_S) the IMU's down lay from the floor
        # the body lay flat on, at its last steps with strong contacts; None before any (see _update_3d).
        self._imu_floor_rad = None
        # IMU (update_imu): the attitude filter of the IMU link; it outlives reset() of the pose
        # only through reanchor(), which keeps it (its bias was learnt while still).
        self.imu = AttitudeFilter()
        self._imu_t = None
        self._imu_used = False
        self._imu_rate = np.zeros(3)   # the last gyro reading less the bias (rad/s)
        # Gyro bias at rest (update_imu, update): the joints' rest pose and since when they have held it,
        # the quiet gyro readings (sum of rate * dt, rad, and their s) since the rest began and not yet in
        # the bias, and those since the last joint update, which that update judges.
        self._q_rest = None         # joint angles where the joints stopped (None: no joint update yet)
        self._still_since = None    # stamp of the first joint update at _q_rest
        self._rest_sum, self._rest_s, self._rest_total_s = np.zeros(3), 0.0, 0.0
        self._rest_tail = []        # the rest's latest windows, not yet learnt: (stamp s, sum rad, s, turn rad)
        self._pend_sum, self._pend_s, self._pend_loud = np.zeros(3), 0.0, False
        self._filtered = False      # this update's attitude came from the filter
        self._last_fused = False    # the last joint update took its attitude from the filter
        self._imu_anchor = True     # the filter's attitude is to be set from the joints' (at power-up, after a gap)
        self._gyro_offset = None    # planar: estimate heading less the gyro's (rad; None: not anchored yet)
        self._conn_heading = 0.0    # planar: the integrated link's turn by the connection alone (rad)
        self._rest_turn0 = 0.0      # planar: _planar_imu_heading where the rest's bias window began
        self.imu_gaps = 0
        self.imu_late = 0           # IMU readings older than the last one, dropped
        self.imu_bridged = 0        # joint updates that took the contacts' rotation for want of a fresh IMU reading

    def rebase_time(self, t_s: float) -> None:
        """Move the last accepted stamp to t_s (s): the sender's time base jumped (a clock stepped back),
        so the next update measures its dt from there instead of being skipped as old."""
        if self._t is not None:
            self._t = float(t_s)
        # The IMU's stamps jumped with it: its next reading starts the filter's time again, and the joints
        # anchor the filter's attitude then, as after a gap.
        self._imu_t = None
        self._imu_anchor = True
        self._imu_floor_rad = None
        self._q_rest = None         # the rest starts again in the new time base

    def reanchor(self, pose=None) -> None:
        """Keep the pose and its covariance but forget the last shape: the next update re-initialises the
        shape there without integrating the jump to it as motion (the last accepted shape was wrong).
        The current pose becomes ``initial_pose``, or ``pose`` (as initial_pose) if given. The IMU's
        filter, its attitude and its gyro bias are kept."""
        if self._t is None:
            return
        p2, p3 = self._p2.copy(), self._p3.copy()
        # Its own pose is in its own chassis frame: the next shape's axes continue that frame's signs.
        anchor_rot = self._geom['r_tc'].copy() if pose is None and self._geom is not None else None
        pose = self.pose.copy() if pose is None else pose
        skipped, updates, held = self.skipped, self.updates, self.stale_held
        imu, imu_t, imu_used, imu_rate = self.imu, self._imu_t, self._imu_used, self._imu_rate
        counts = self.imu_gaps, self.imu_late, self.imu_bridged
        self.reset(pose=pose)
        self._p2, self._p3, self.skipped, self.updates, self.stale_held = p2, p3, skipped, updates, held
        self.imu, self._imu_t, self._imu_used, self._imu_rate = imu, imu_t, imu_used, imu_rate
        self.imu_gaps, self.imu_late, self.imu_bridged = counts
        self._anchor_rot = anchor_rot

    @property
    def state(self) -> EstimatorState:
        """The latest EstimatorState."""
        return self._state

    def root_pose(self) -> np.ndarray | None:
        """Pose (4x4) of link 0, the URDF's root, in odom at the last update, from that update's own
        chain geometry (no second pass over the chain): what root_link_pose gives for the last shape, with
        the virtual chassis exactly as the estimate used it. None for planar robots and before the
        first update (use root_link_pose there)."""
        if self.planar or self._geom is None:
            return None
        r_tc, o_tc = self._geom['r_tc'], self._geom['o_tc']
        tail_in_chassis = np.eye(4)
        tail_in_chassis[:3, :3] = r_tc.T
        tail_in_chassis[:3, 3] = -(r_tc.T @ o_tc)
        return self._gc @ tail_in_chassis

    pose = property(lambda self: self._state.pose, doc='4x4 pose of the body frame in odom.')
    pose_xyz_quat = property(lambda self: self._state.pose_xyz_quat, doc='(x, y, z, qx, qy, qz, qw).')
    pose_se2 = property(lambda self: self._state.pose_se2, doc='(x, y, theta) in the odom plane.')
    twist = property(lambda self: self._state.twist, doc='(6,) body twist (v, w) in the body frame.')
    pose_covariance = property(lambda self: self._state.pose_covariance, doc='(6, 6) ROS order, odom axes.')
    twist_covariance = property(lambda self: self._state.twist_covariance, doc='(6, 6) body frame.')
    slip_residual = property(lambda self: self._state.slip_residual, doc='(n_links,) slip speed, m/s.')
    slip_rms_m_s = property(lambda self: self._state.slip_rms_m_s, doc='RMS slip speed over contacts.')
    rank = property(lambda self: self._state.rank, doc='rank of the no-slip constraints.')
    rank_needed = property(lambda self: self._state.rank_needed, doc='3 (planar) or 6 (3D; 3 with a gyro).')
    singular = property(lambda self: self._state.singular, doc='near a singular shape (weak direction held).')
    contacts = property(lambda self: self._state.contacts, doc='(n_links,) bool ground contacts.')

    @property
    def initialised(self) -> bool:
        return self._t is not None

    # --- update -------------------------------------------------------------------------------------

    # The body is at rest (the gyro reads its bias) while every joint stays within STILL_JOINT_RAD of where
    # the joints stopped and the gyro reads within STILL_GYRO_RAD_S of its bias; the bias is learnt from a
    # rest once it has lasted STILL_MIN_S. Judged against the rest pose, not message to message: a servo
    # at rest flickers by one encoder tick (1.5 mrad at 4096 per turn), a step of 0.15 rad/s between two
    # messages 10 ms apart; two ticks (3.1 mrad) are a move.
    STILL_JOINT_RAD = 0.0025
    STILL_MIN_S = 0.5
    # A rest's last STILL_TAIL_S is not learnt until the rest outlasts it: joints that start to move stay
    # within STILL_JOINT_RAD for a while, and the body already turns with them (at power-up the gait's
    # blend-in: 1-2.7 deg/s read in the rest's last 0.2 s, which took the z bias from 0.27 to 0.52 deg/s
    # against the simulated gyro's 0.29).
    STILL_TAIL_S = 0.2
    STILL_GYRO_RAD_S = 0.05
    STALE_HOLD_S = 0.25         # with an IMU, an exactly repeated joint vector waits for a fresh one this long
    # With imu_attitude_s > 0 the contacts turn the chassis while at least this fraction of the modules is on
    # the floor and the step was not singular; otherwise the IMU's own turn over the step does (see _update_3d).
    WEAK_CONTACT_FRACTION = 0.75
    # ... and while the body has not rolled over by more than this from level (either side up, _rolling_over):
    # a body rolling over (the blend into rolling) is left to its contacts, which carry its turn and travel
    # together.
    GYRO_TURN_MAX_TILT_RAD = math.radians(45.0)
    # ... unless the IMU's down has been seen to lie within IMU_FLOOR_AGREE_RAD of the floor the body lay flat on
    # (the hull face under strong contacts, averaged over IMU_FLOOR_AVERAGE_S): then, while the contacts are
    # weak, the IMU's down is the floor (heights, contacts, the height the chassis rests at) and its turn the
    # chassis's, whether or not the body rolls over (see _update_3d).
    IMU_FLOOR_AGREE_RAD = math.radians(2.0)
    IMU_FLOOR_AVERAGE_S = 0.5
    IMU_CLOCK_STEP_S = 1.0      # an IMU stamp this far behind the last is a clock that stepped back: a gap

    def update_imu(self, t_s: float, gyro_rad_s, accel_m_s2=None) -> np.ndarray:
        """Advance the IMU link's attitude to time t_s (s) with a gyro reading (rad/s) and optionally an
        accelerometer one (specific force, m/s^2), both (3,) in the IMU link's frame (imu_link).

        From then on a pitch-yaw robot takes its orientation from this attitude (snake_control.estimation
        .imu: roll and pitch from gravity and the gyro, yaw from the gyro), and its contacts give only
        the translation. The gyro bias is learnt while the body rests: from the mean of the readings
        between joint updates that found every joint within STILL_JOINT_RAD of where it stopped, once
        that rest has lasted STILL_MIN_S (see update). Before any joint update nothing is learnt: a
        body still settling turns slower than the gyro alone can tell from its bias. Planar robots take
        only its heading (see _gyro_heading). Returns the attitude (3, 3), IMU link -> odom.

        Readings are integrated at their own stamps. One older than the last is dropped (counted in
        ``imu_late``), unless it is IMU_CLOCK_STEP_S older (a clock stepped back: taken as a gap). One more
        than imu_gap_s after the last is not integrated over the gap (one rate
        held over half a second of a swinging head turns the heading by tens of degrees): the gap is
        counted in ``imu_gaps`` and the next joint update sets the filter's attitude from the joints and
        contacts, which carried it through the gap.
        """
        gyro = np.asarray(gyro_rad_s, dtype=float)
        if gyro.shape != (3,) or not math.isfinite(float(gyro.sum())):
            raise ValueError(f'gyro_rad_s must be (3,) finite angular rates (rad/s), got {gyro}')
        if accel_m_s2 is not None:
            accel_m_s2 = np.asarray(accel_m_s2, dtype=float)
            if accel_m_s2.shape != (3,) or not math.isfinite(float(accel_m_s2.sum())):
                raise ValueError(f'accel_m_s2 must be (3,) finite specific forces (m/s^2), got {accel_m_s2}')
        t_s = float(t_s)
        if self._imu_t is not None and not t_s > self._imu_t and t_s > self._imu_t - self.IMU_CLOCK_STEP_S:
            self.imu_late += 1
            return self.imu.rotation
        if self._imu_t is None or abs(t_s - self._imu_t) > self.imu_gap_s:
            if self._imu_t is not None:
                self.imu_gaps += 1
                self._imu_anchor = True
                self._imu_floor_rad = None      # re-anchored from the joints: its down is to be seen again
            self._imu_t = t_s
            if accel_m_s2 is not None:
                # Only sets the level at the first reading; it never integrates across a gap.
                self.imu.update(1e-9, np.zeros(3), accel_m_s2)
            self._imu_rate = gyro - self.imu.bias
            self._imu_used = True
            return self.imu.rotation
        dt = t_s - self._imu_t
        if self._still_since is not None:
            # The joints rested at the last update: the next one says whether they still do (update).
            d = gyro - self.imu.bias
            if float(d @ d) < self.STILL_GYRO_RAD_S ** 2:
                self._pend_sum += gyro * dt
                self._pend_s += dt
            else:
                self._pend_loud = True        # turned though the joints did not (carried, pushed)
        self.imu.step(dt, gyro, accel_m_s2)
        self._imu_t = t_s
        self._imu_rate = gyro - self.imu.bias
        self._imu_used = True
        return self.imu.rotation

    def update(self, t_s: float, positions_rad, velocities_rad_s=None, imu_orientation_xyzw=None,
               imu_rate_rad_s=None) -> EstimatorState:
        """Advance the estimate to time t_s with joint angles positions_rad (n_joints,), robot order."""
        n = self.robot.n_joints
        q = np.asarray(positions_rad, dtype=float)
        if q.shape != (n,) or not np.all(np.isfinite(q)):
            raise ValueError(f'positions_rad must be ({n},) finite joint angles, got {q}')
        v = None
        if velocities_rad_s is not None:
            v = np.asarray(velocities_rad_s, dtype=float)
            if v.shape != (n,) or not np.all(np.isfinite(v)):
                v = None      # a driver that sends no (or bad) velocities: fall back to differences
        quat = None
        if imu_orientation_xyzw is not None:
            quat = np.asarray(imu_orientation_xyzw, dtype=float)
            if quat.shape != (4,) or not np.all(np.isfinite(quat)) or np.linalg.norm(quat) < 0.5:
                raise ValueError(f'imu_orientation_xyzw must be a unit quaternion (qx, qy, qz, qw), '
                                 f'got {quat}')
        rate = None
        if imu_rate_rad_s is not None:
            rate = np.asarray(imu_rate_rad_s, dtype=float)
            if rate.shape != (3,) or not np.all(np.isfinite(rate)):
                raise ValueError(f'imu_rate_rad_s must be (3,) finite, got {rate}')
        t_s = float(t_s)
        if self._t is not None and not t_s > self._t:
            self.skipped += 1
            return self._state
        if self._imu_used and not self.planar and self._t is not None and t_s - self._t < self.STALE_HOLD_S \
                and quat is None and bool((q == self._q).all()):
            # A driver holding its last reading repeats the joint vector exactly while the robot moves on; with
            # the IMU turning the chassis meanwhile, the frozen shape would pivot about its contacts and
            # move the estimate sideways. Wait for a fresh reading (the step then spans the whole interval,
            # with the attitude at both ends); a robot at rest still updates every STALE_HOLD_S.
            self.stale_held += 1
            return self._state
        if self._imu_used and not self.planar:
            self._rest_update(t_s, q)
        if self.planar:
            state = self._update_planar(t_s, q, v)
            if self._imu_used:
                # After the step: the rest's IMU-link turn is predicted from this step's connection.
                self._rest_update(t_s, q)
        else:
            # The filter gives the attitude only near its last reading (within imu_gap_s either way) and
            # once anchored to the joints' attitude (not after a gap); otherwise this update bridges with
            # the contacts' rotation, as without an IMU, rather than hold a stale rate.
            fresh = self._imu_used and self.imu.initialised and self._imu_t is not None \
                and abs(t_s - self._imu_t) <= self.imu_gap_s
            self._filtered = quat is None and fresh and not (self._imu_anchor and self._t is not None)
            r_imu = None
            if self._filtered:
                # The attitude at the joints' stamp: the IMU's last, carried on at its last rate (its
                # readings come apart from joint_states; 10-20 ms at a head's 1 rad/s is a degree, and a
                # degree of rotation handed to the contacts moves the estimate sideways).
                r_imu = self.imu.rotation @ _rodrigues(*(self._imu_rate * (t_s - self._imu_t)).tolist())
                if self._t is not None and not self._last_fused and abs(self._t - self._imu_t) <= self.imu_gap_s \
                        and self.imu_attitude_s == 0.0:
                    # Back from bridging while the filter ran on (its readings came late): the step starts
                    # from the filter's attitude at the last stamp, so the contacts' drift while bridging
                    # is dropped instead of handed to this step's contacts as a turn.
                    r_prev = self.imu.rotation @ _rodrigues(*(self._imu_rate * (self._t - self._imu_t)))
                    self._gc = self._gc.copy()
                    self._gc[:3, :3] = r_prev @ self._geom['rot'][self.imu_link].T
            elif quat is None and self._imu_used and self._t is not None:
                self.imu_bridged += 1
            if r_imu is not None and self.imu_attitude_s > 0.0 and self._t is not None:
                # The contacts turn the chassis, and the attitude the IMU gives pulls it with time constant
                # imu_attitude_s: joint vectors whose servos were read at different times (a driver holding
                # some stale readings) then do not hand the contacts a wrong turn each step.
                state = self._update_3d(t_s, q, v, quat, rate, None, pull=r_imu)
            else:
                state = self._update_3d(t_s, q, v, quat, rate, r_imu)
            if self._imu_anchor and fresh and quat is None and self._geom is not None:
                # Anchor the filter where the joints and contacts put the IMU link, carried to the filter's
                # stamp at its own (fresh) rate; it keeps its bias.
                self.imu.rotation = (self._gc[:3, :3] @ self._geom['rot'][self.imu_link]
                                     @ _rodrigues(*(self._imu_rate * (self._imu_t - t_s))))
                self._imu_anchor = False
            self._last_fused = self._filtered
        self._t, self._q, self._v = t_s, q, v
        self.updates += 1
        self._state = state
        return state

    def _rolling_over(self, pull_wc, before_c, after_c) -> bool:
        """imu_attitude_s: whether the body has rolled over, more than GYRO_TURN_MAX_TILT_RAD from level either
        side up. pull_wc (3, 3): the chassis attitude the IMU gives this step; before_c, after_c (n, 3): the
        module centres in the last and this step's chassis frames (m).

        Not the chassis's tilt itself: its y and z are the body's second and third principal directions,
        and when those moments are near-equal (the tread lifting in a blend into AEH-sidewinding) the axes
        turn over with the shape while the body stays upright. While the IMU's chassis is tilted, the
        frame that turned with the module centres since it was last level (contact.shape_turn, step by
        step) is judged instead.
        """
        cos_max = math.cos(self.GYRO_TURN_MAX_TILT_RAD)
        if abs(float(pull_wc[2, 2])) > cos_max:
            self._body_turn = None
            return False
        turn = shape_turn(before_c, after_c)
        self._body_turn = turn if self._body_turn is None else turn @ self._body_turn
        return abs(float(pull_wc[2] @ self._body_turn[:, 2])) <= cos_max

    def _rest_update(self, t_s: float, q) -> None:
        """Judge the IMU readings since the last joint update by this one's joint angles q (rad): taken
        into the rest's window if every joint is still within STILL_JOINT_RAD of the rest pose and the
        gyro stayed quiet, else the rest starts again here. A rest of STILL_MIN_S gives the bias the
        mean of its window, never of one reading (a driver repeating a stale reading for a few cycles
        looks still that long), and then a running mean (AttitudeFilter.learn_bias); the rest's last
        STILL_TAIL_S waits for the rest to outlast it."""
        # Planar robots: joints still within STILL_JOINT_RAD still turn the IMU link a little (servos
        # settling by a tick); that turn, predicted from the joints and the connection, is no bias.
        turn = self._planar_imu_heading(q) if self.planar else 0.0
        if self._q_rest is None or self._pend_loud or \
                float(np.max(np.abs(q - self._q_rest))) > self.STILL_JOINT_RAD:
            # The rest ends (or begins) here; its tail is dropped unlearnt.
            self._q_rest, self._still_since = q.copy(), t_s
            self._rest_sum, self._rest_s, self._rest_total_s = np.zeros(3), 0.0, 0.0
            self._rest_tail = []
            self._rest_turn0 = turn
        elif self._pend_s > 0.0:
            self._rest_tail.append((t_s, self._pend_sum, self._pend_s, turn))
            # Windows older than STILL_TAIL_S are the rest's for sure: into the bias's window.
            learnt_turn = None
            while self._rest_tail and self._rest_tail[0][0] <= t_s - self.STILL_TAIL_S:
                _, window_sum, window_s, learnt_turn = self._rest_tail.pop(0)
                self._rest_sum += window_sum
                self._rest_s += window_s
                self._rest_total_s += window_s
            if learnt_turn is not None and self._rest_s > 0.0 and \
                    t_s - self.STILL_TAIL_S - self._still_since >= self.STILL_MIN_S:
                mean = self._rest_sum / self._rest_s
                mean[2] -= (learnt_turn - self._rest_turn0) / self._rest_s
                self.imu.learn_bias(mean, self._rest_s, self._rest_total_s)
                self._rest_sum, self._rest_s = np.zeros(3), 0.0
                self._rest_turn0 = learnt_turn
        if self._pend_s > 0.0 or self._pend_loud:
            self._pend_sum, self._pend_s, self._pend_loud = np.zeros(3), 0.0, False

    def _imu_link_turn(self, q) -> float:
        """Planar: the IMU link's heading less the integrated link's (rad), the joint angles between them."""
        k, m = self._int_link, self.imu_link
        return float(np.sum(q[k:m])) if m >= k else -float(np.sum(q[m:k]))

    def _planar_imu_heading(self, q) -> float:
        """Heading (rad) of the IMU link as the connection alone integrates it (no gyro): the integrated
        link's turn so far plus the joint angles between the two links."""
        return self._conn_heading + self._imu_link_turn(q)

    def _gyro_heading(self, t_s: float, q) -> float | None:
        """Planar robots: heading (rad) of the integrated link at t_s from the IMU link's attitude, less the
        joint angles between the two links, up to the offset _gyro_offset; None without an IMU reading
        within imu_gap_s or before a rest has given the gyro's bias. The offset is taken again whenever
        the gyro comes back (after a gap, update_imu sets _imu_anchor)."""
        # A gyro alone will do: on flat ground the heading is the turn about the vertical the IMU sees. Its
        # bias must be known first: a MEMS gyro's few tenths of a degree per second turn the heading as
        # fast as skidding wheels do.
        # No reading yet since rebase_time (_imu_t None): bridged, as after a gap.
        if not (self._imu_used and self._imu_t is not None and abs(t_s - self._imu_t) <= self.imu_gap_s
                and self.imu.bias_learnt):
            if self._imu_used and self._t is not None:
                self.imu_bridged += 1
            self._gyro_offset = None
            return None
        if self._imu_anchor:
            self._gyro_offset = None
            self._imu_anchor = False
        r = self.imu.rotation @ _rodrigues(*(self._imu_rate * (t_s - self._imu_t)).tolist())
        return math.atan2(r[1, 0], r[0, 0]) - self._imu_link_turn(q)

    def _held_twist(self, dr, dt) -> np.ndarray:
        """The twist to hold along unobservable directions for this step.

        The last twist fades with hold_time_s, and is held in full only while the shape keeps moving at
        least a tenth as fast as its recent average (the twist is driven by the shape: a snake held
        straight and still does not drift). Shape speed dips at a gait's crossing of the singular set do
        not count as stopping.
        """
        speed = float(np.sqrt(dr @ dr)) / dt
        fade = math.exp(-dt / self.hold_time)
        self._rate_last += (speed - self._rate_last) * (1.0 - fade)       # running mean shape speed
        moving = min(1.0, speed / (0.1 * self._rate_last)) if self._rate_last > 0.0 else 0.0
        return self._xi_last * (moving * fade)

    def _slip_variance(self, resid_speed, weights, dof: int) -> float:
        w = np.ones(resid_speed.shape[0]) if weights is None else weights
        return self.slip_std ** 2 + float(np.sum(w * resid_speed ** 2)) / max(dof, 1)

    def _chassis_offset(self, q):
        """Planar virtual chassis in the integrated link frame, with its heading kept continuous."""
        h, ad, b = planar_frame_offset(q, self.lengths, self._int_link, 'chassis')
        if self._flip:
            h[2] += np.pi
            ad[:2] *= -1.0
            b[:2] *= -1.0
        if self._chassis_heading is not None and abs(wrap_angle(h[2] - self._chassis_heading)) > np.pi / 2:
            # The head crossed to the other side of the principal axis: keep the axis continuous.
            self._flip = not self._flip
            h[2] += np.pi
            ad[:2] *= -1.0
            b[:2] *= -1.0
        self._chassis_heading = h[2]
        return h, ad, b

    def _planar_state(self, t_s, q, twist3, cov_xi, slip, rank, singular) -> EstimatorState:
        n_links = self.robot.n_links
        pose = self._g2
        p_int = self._p2
        tcov3 = cov_xi
        if self.body_link is None:
            h, ad, b = self._chassis_offset(q)
            pose = se2_compose(self._g2, h)
            p_int = ad @ self._p2 @ ad.T
            if twist3 is not None:
                twist3 = ad @ twist3[0] + b @ twist3[1]
                tcov3 = ad @ cov_xi @ ad.T
        elif twist3 is not None:
            twist3 = twist3[0]
        c, s = np.cos(pose[2]), np.sin(pose[2])
        r = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        twist = np.zeros(6) if twist3 is None else np.array([twist3[0], twist3[1], 0.0, 0.0, 0.0, twist3[2]])
        tcov = np.zeros((6, 6)) if tcov3 is None else _embed_planar(tcov3)
        rms = float(np.sqrt(np.mean(slip ** 2)))
        return EstimatorState(t_s, _se2_to_matrix(*pose), twist, _embed_planar(r @ p_int @ r.T), tcov, slip,
                              rms, rank, 3, singular,
                              np.ones(n_links, bool) if self.weights is None else self.weights > 0)

    def _update_planar(self, t_s, q, v) -> EstimatorState:
        n_links = self.robot.n_links
        if self._t is None:
            self._g2 = np.zeros(3)
            if self.initial_pose is not None:
                self._g2 = xyyaw_from_se3(self.initial_pose)
            if self.body_link is None:
                # The pose given (or the origin) is the chassis pose: start the integrated link frame there.
                h, _, _ = self._chassis_offset(q)
                self._g2 = se2_compose(self._g2, se2_inverse(h))
            res = _connection(q, self.lengths, self._int_link, self.weights, self.singular_threshold)
            return self._planar_state(t_s, q, None, None, np.zeros(n_links), res.rank, res.singular)
        dt = t_s - self._t
        res = _connection(0.5 * (q + self._q), self.lengths, self._int_link, self.weights,
                          self.singular_threshold)
        dr = q - self._q
        hold = self._held_twist(dr, dt)
        delta = res.twist(dr, hold * dt)                      # body displacement (m, m, rad)
        if v is not None and self._v is not None:
            rate = 0.5 * (v + self._v)
            xi = res.twist(rate, hold)
        else:
            rate, xi = dr / dt, delta / dt
        self._xi_last = delta / dt
        slip = res.residual(rate, xi)                         # lateral slip speed per wheel (m/s)
        sigma2 = self._slip_variance(slip, self.weights, n_links - res.rank)
        cov_xi = sigma2 * res.normal_inverse
        self._conn_heading += float(delta[2])
        heading = self._gyro_heading(t_s, q)
        if heading is not None and self._gyro_offset is not None:
            # Wheels that skid turn the body without the connection seeing it; the gyro sees every turn.
            # The connection still gives the translation, along the arc of the gyro's turn.
            delta = delta.copy()
            delta[2] = wrap_angle(heading + self._gyro_offset - self._g2[2])
        step = se2_exp(delta)
        self._g2 = se2_compose(self._g2, step)
        if heading is not None and self._gyro_offset is None:
            # The gyro's heading is relative to where the filter started: anchor it to the estimate's
            # (at the first fused update and after a gap in the IMU readings).
            self._gyro_offset = self._g2[2] - heading
        ad = se2_adjoint(se2_inverse(step))
        self._p2 = ad @ self._p2 @ ad.T + dt * max(dt, self.tau) * cov_xi
        return self._planar_state(t_s, q, (xi, rate), cov_xi, slip, res.rank, res.singular or res.rank < 3)

    # --- 3D ------------------------------------------------------------------------------------------

    def _geometry(self, q, previous_rot, up_tail):
        rot_t, cen_t = chain_poses(q, self.axes, self.lengths)
        r_tc, o_tc, held, _ = virtual_chassis(cen_t, previous_rot, up_tail)
        kern = compiled()
        if kern is not None:
            qc, rc = np.empty_like(cen_t), np.empty_like(rot_t)
            kern.to_frame_kernel(rot_t, cen_t, r_tc, o_tc, rc, qc)
        else:
            qc = (cen_t - o_tc) @ r_tc                        # module centres in the chassis frame
            rc = r_tc.T @ rot_t                               # module rotations in the chassis frame
        return {'r_tc': r_tc, 'o_tc': o_tc, 'q': qc, 'rot': rc, 'held': held}

    def _body_offset(self, geom) -> np.ndarray:
        """Pose (4x4) of the reported body frame in the chassis frame."""
        if self.body_link is None:
            return np.eye(4)
        k = self.body_link
        return se3_matrix(geom['rot'][k], geom['q'][k])

    def _update_3d(self, t_s, q, v, quat, rate, r_imu=None, pull=None) -> EstimatorState:
        n_links = self.robot.n_links
        if quat is not None:
            r_imu = matrix_from_quaternion(quat)
        if self._t is None:
            up_tail = None
            if r_imu is not None and self.initial_pose is None:
                # The IMU link's frame in odom; the tail's up follows from the chain.
                rot_t, _ = chain_poses(q, self.axes, self.lengths)
                up_tail = rot_t[self.imu_link] @ (r_imu.T @ _UP)
            # A virtual chassis's y and z have no sign of their own, so a given pose is only meaningful
            # in the convention it was made in: body_pose_from_links's (the tail's z for up) for a pose
            # from outside, or this estimator's own continued frame after reanchor() (_anchor_rot). Signs
            # taken from gravity instead put a body started with its tail rolled over upside down in odom
            # (and the IMU's filter, started there, spent seconds pulling the wrong tilt: AEH-sidewinding
            # 127 deg off); the filter is not consulted for the pose either, as it may not have seen how
            # the body moved since its last reading.
            geom = self._geometry(q, self._anchor_rot, up_tail)
            if r_imu is not None:
                r_wc = r_imu @ geom['rot'][self.imu_link].T
            else:
                # The robot rests on the face of its hull nearest to "tail z up"; then turn about odom z
                # so that the chassis x heads along odom x.
                down_tail = resting_down(geom['q'] @ geom['r_tc'].T, -_Z_TAIL)
                r_tilt = _rotation_between(-down_tail, _UP)
                xc = r_tilt @ geom['r_tc'][:, 0]
                yaw = np.arctan2(xc[1], xc[0])
                cz, sz = np.cos(-yaw), np.sin(-yaw)
                r_wt = np.array([[cz, -sz, 0.0], [sz, cz, 0.0], [0.0, 0.0, 1.0]]) @ r_tilt
                r_wc = r_wt @ geom['r_tc']
            if r_imu is not None and self._filtered:
                # The filter's yaw is where its gyro started: odom starts with the chassis heading along x.
                xc = r_wc[:, 0]
                r_wc = _rot_z(-math.atan2(xc[1], xc[0])) @ r_wc
            if self.initial_pose is not None:
                self._gc = self.initial_pose @ se3_inverse(self._body_offset(geom))
            else:
                heights = geom['q'] @ r_wc[2]
                self._gc = se3_matrix(r_wc, np.array([0.0, 0.0, self.radius - heights.min()]))
            if self._filtered:
                # From here the filter carries the chassis attitude: start it at the pose taken.
                self.imu.rotation = self._gc[:3, :3] @ geom['rot'][self.imu_link]
            self._geom = geom
            contacts = self.selector.update((geom['q'] @ self._gc[:3, :3].T)[:, 2])
            return self._state_3d(t_s, np.zeros(6), np.zeros((6, 6)), np.zeros(n_links), 0, 6, False,
                                  contacts)
        dt = t_s - self._t
        g0 = self._geom
        geom = self._geometry(q, g0['r_tc'], None)
        r_wc = self._gc[:3, :3]
        r_wc1 = None
        if r_imu is not None:
            r_wc1 = r_imu @ geom['rot'][self.imu_link].T     # the chassis attitude the IMU gives
            down = -r_wc1[2]
        else:
            down = -r_wc[2]
        pull_wc = None if pull is None else pull @ geom['rot'][self.imu_link].T
        # imu_attitude_s > 0 and the contacts weak (a gait blend lifting the body into 3D, a tread on a few
        # modules): they cannot turn the chassis. It then turns as the IMU's attitude did over the step, the
        # contacts give only the translation, and the pull still draws it to the IMU's attitude. The turn, not
        # the attitude itself: the chassis keeps the attitude the contacts and the pull gave it, so passing
        # from one way to the other turns it by nothing. The ground plane is the hull's face nearest the
        # IMU's down: the face nearest the contacts' own down flips as the shape changes. Not while the body
        # rolls over (unless imu_floor, below): the IMU's turn imposed there left the travel to a few contacts, which sent it sideways
        # (the demo's blend into rolling, 0.55-0.75 m off its 0.40 m, against 0.04-0.06 m left to the contacts).
        #
        # An IMU whose down has been seen to agree with the floor (imu_floor) holds the blend alone: its down is
        # the floor and its turn the chassis's, rolling over or not. The hull's faces are no floor there: the
        # body is not lying on one (it tips about an edge or a corner, its capsules on their ends), the face
        # nearest the IMU's down changes as the shape morphs, 3-15 deg from it and from the face before, and
        # every change handed the contacts a tilt and the rest on the plane a jump (up to 4 cm in one step);
        # while it rolls over, the contacts' own turn fell 50 deg behind the IMU's and sent the travel
        # sideways. Five demo recordings: the blend into AEH-sidewinding 0.11-0.20 m -> 0.08-0.14 m off (its
        # heading error up to 6.8 deg -> within 1.8), the blend into rolling 0.16-0.25 m -> 0.09-0.20 m
        # (docs/estimation.md, "The two blends").
        imu_floor = (pull_wc is not None and self._imu_floor_rad is not None
                     and self._imu_floor_rad < self.IMU_FLOOR_AGREE_RAD)
        if imu_floor:
            rolling = False
            self._body_turn = None
        else:
            rolling = pull_wc is not None and self._rolling_over(pull_wc, g0['q'], geom['q'])
        if pull_wc is None:
            self._body_turn = None       # no IMU attitude this step: the body's turn starts again with it
        gyro_turn = (pull_wc is not None and self._pull_attitude is not None and self._contacts_weak
                     and not rolling)
        if gyro_turn:
            down = -pull_wc[2]
        plane = None
        if self.flat_ground and self.ground_plane and r_imu is None and not (gyro_turn and imu_floor):
            # The ground is the face of the hull of module centres nearest to the predicted down: it fixes
            # the attitude's tilt each step, so contact selection does not drift with it.
            plane = support_plane(geom['q'], down)
            if plane is not None:
                down = plane[0]
                if pull_wc is not None and not gyro_turn and not self._contacts_weak:
                    # Strong contacts on a face: the floor. How far the IMU's down lies from it says whether the
                    # IMU may stand for the floor when the contacts are weak (its tilt is a few degrees off for
                    # seconds after it starts or is re-anchored: a long flat body then takes only part of its
                    # modules for contacts, which keeps them weak).
                    off = math.acos(min(1.0, max(-1.0, -float(plane[0] @ pull_wc[2]))))
                    self._imu_floor_rad = off if self._imu_floor_rad is None else \
                        self._imu_floor_rad + (off - self._imu_floor_rad) * min(1.0, dt / self.IMU_FLOOR_AVERAGE_S)
        tilt = None
        if plane is not None and self._plane_down is not None:
            # The chassis turned so that gravity, seen as d0 before and d1 now, is one vector: the
            # increment exp(w) takes d1 onto d0; its part about d1 (yaw) stays for the contacts.
            axis = _cross3(down, self._plane_down)
            sin_a = math.sqrt(float(axis @ axis))
            tilt = axis * (math.atan2(sin_a, float(down @ self._plane_down)) / sin_a) if sin_a > 1e-12 \
                else np.zeros(3)
        self._plane_down = None if plane is None else down
        kern = compiled()
        if kern is not None:
            heights = np.empty(n_links)
            kern.heights_kernel(geom['q'], geom['rot'], down, self.half_length, heights)
        else:
            heights = -(geom['q'] @ down)
            if self.half_length:
                # A tilted capsule's lowest point is its lower end.
                heights -= self.half_length * np.abs(geom['rot'][:, :, 0] @ down)
        # A body standing on a few modules (weak contacts) is lifted in 3D, its floor from the IMU or the hull
        # face under them: a module 8-30 mm above the lowest is one of the lifted, passing over the floor,
        # and taking it for a contact pins the step to a module that moves through the air. A body lying
        # flat keeps the whole band: over its length an attitude a degree off puts real contacts that high.
        # Whether the contacts are weak is judged on the whole band (the full selector), or a flat body
        # that once read weak would keep itself so on the narrow one. Eight demo recordings: AEH-sidewinding
        # 0.023-0.033 m -> 0.002-0.010 m, steady rolling unchanged (docs/estimation.md).
        full = self.selector.update(heights)
        narrow = self._contacts_weak and self.weak_contact_band < 1.0
        selector = self.weak_selector if narrow else self.selector
        if self.weak_contact_band < 1.0:
            low = self.weak_selector.update(heights)
        contacts = low if narrow else full
        weights = self.weights
        if self.contact_loads and not contacts.all():
            # The contacts must hold the body (its centre over their hull; a lone module chosen by a
            # degree of attitude error cannot), and each counts by the load it carries: the quasi-static
            # motion on a dry floor is the least power sum_i N_i |slip_i|, and where the floor
            # scrubs (a gait blend reshaping a standing body) unloaded modules would move the estimate.
            contacts, loads = supporting_contacts(contacts, heights, geom['q'], down)
            selector.widen(contacts)
            if narrow:
                self.selector.widen(full | contacts)
            load_w = np.where(contacts, loads * (1.0 / max(float(loads.max()), 1e-12)) + LOAD_FLOOR, 0.0)
            weights = load_w if weights is None else weights * load_w
        rot_inc = None
        if gyro_turn:
            rot_inc = _log_rotation(self._pull_attitude.T @ pull_wc)
        elif r_imu is not None:
            # A known attitude (IMU link in odom): the chassis turned by R_wc0^T R_wc1, exactly; the
            # contacts are left only the translation.
            rot_inc = _log_rotation(r_wc.T @ r_wc1)
        elif rate is not None:
            # Gyro: chassis rotation = IMU link rotation minus the link's rotation relative to the chassis.
            rel = geom['rot'][self.imu_link] @ g0['rot'][self.imu_link].T
            rot_inc = geom['rot'][self.imu_link] @ (rate * dt) - so3_log(rel)
        step = contact_step(g0['q'], g0['rot'], geom['q'], geom['rot'], down, self.radius, contacts,
                            weights, self.axial_weight, rot_inc, self.length_scale,
                            self.singular_threshold, self._held_twist(q - self._q, dt) * dt,
                            self.half_length, tilt, self.coulomb_iterations, self.static_slip_m_s * dt)
        self._xi_last = step.displacement / dt
        slip = np.sqrt(np.einsum('ka,ka->k', step.residual, step.residual)) / dt
        n_contacts = int(np.count_nonzero(contacts))
        # Residuals are already weighted (zero off contact): the weighted sum of squares is their sum.
        sigma2 = self.slip_std ** 2 + float(slip @ slip) / max(3 * n_contacts - step.rank, 1)
        cov_xi = sigma2 * step.normal_inverse
        if rot_inc is not None:
            cov_xi[3:, 3:] = np.eye(3) * 1e-6
        if kern is not None:
            gc, p3 = np.empty((4, 4)), np.empty((6, 6))
            kern.se3_step_kernel(self._gc, step.displacement, self._p3, dt * max(dt, self.tau) * cov_xi, gc, p3)
            self._p3 = p3
            exp_step = None if self.body_link is None else se3_exp_fast(step.displacement)
        else:
            exp_step = se3_exp_fast(step.displacement)
            gc = self._gc @ exp_step
            ad = _adjoint_of_inverse(exp_step)
            self._p3 = ad @ self._p3 @ ad.T + dt * max(dt, self.tau) * cov_xi
        if r_wc1 is not None:
            gc[:3, :3] = r_wc1
        elif self.updates % 50 == 0:
            gc[:3, :3] = orthonormalize(gc[:3, :3])
        if plane is not None and kern is not None:
            out = np.empty((4, 4))
            kern.rest_on_plane_kernel(gc, plane[0], geom['q'], contacts, self.radius, out)
            gc = out
        elif plane is not None:
            gc = _rest_on_plane(gc, plane[0], geom['q'][contacts], self.radius)
        elif self.flat_ground:
            gc = _settle_on_floor(gc, geom['q'][contacts], self.radius, keep_attitude=r_imu is not None or gyro_turn)
        self._pull_attitude = pull_wc
        n_full = int(np.count_nonzero(full | contacts))
        self._contacts_weak = (n_full < self.WEAK_CONTACT_FRACTION * n_links
                               or step.singular or step.rank < step.rank_needed)
        if pull is not None:
            # imu_attitude_s: the IMU link's attitude pull (3, 3) draws the contacts' chassis attitude toward
            # the one it gives, by dt / imu_attitude_s of the way.
            err = _log_rotation(gc[:3, :3].T @ pull @ geom['rot'][self.imu_link].T) * min(1.0, dt / self.imu_attitude_s)
            gc[:3, :3] = gc[:3, :3] @ _rodrigues(*err.tolist())
        self._gc = gc
        if self.body_link is None:
            twist = step.displacement / dt
            tcov = cov_xi
        else:
            prev_body = self._body_offset(g0)
            body = self._body_offset(geom)
            twist = se3_log(se3_inverse(prev_body) @ exp_step @ body) / dt
            adb = se3_adjoint(se3_inverse(body))
            tcov = adb @ cov_xi @ adb.T
        self._geom = geom
        return self._state_3d(t_s, twist, tcov, slip, step.rank, step.rank_needed,
                              step.singular or step.rank < step.rank_needed, contacts)

    def _state_3d(self, t_s, twist, tcov, slip, rank, needed, singular, contacts) -> EstimatorState:
        if self.body_link is None:
            pose, p_body = self._gc.copy(), self._p3
        else:
            body = self._body_offset(self._geom)
            pose = self._gc @ body
            adb = se3_adjoint(se3_inverse(body))
            p_body = adb @ self._p3 @ adb.T
        r = pose[:3, :3]
        rr = np.zeros((6, 6))
        rr[:3, :3] = r
        rr[3:, 3:] = r
        pcov = rr @ p_body @ rr.T
        n_contacts = int(np.count_nonzero(contacts))
        rms = math.sqrt(float(slip @ slip) / n_contacts) if n_contacts else 0.0
        return EstimatorState(t_s, pose, twist, pcov, tcov, slip, rms, int(rank), int(needed), bool(singular),
                              contacts)


def _rest_on_plane(gc, down_c, contact_centres, radius_m):
    """Correct the chassis pose gc (4x4) so that the ground plane found in the chassis frame is the floor.

    down_c (3,): unit down normal of the support plane in the chassis frame (contact.support_plane);
    contact_centres (m, 3) chassis frame, on or near that plane. The smallest rotation taking gc's image
    of down_c onto world down is applied about the contacts' centroid (so the contacts do not move
    sideways), then the height is set so that the plane of module centres is radius_m above z = 0.
    """
    r = gc[:3, :3]
    vx, vy, vz = (r @ down_c).tolist()
    # Rodrigues for the turn taking v onto (0, 0, -1): axis v x (0, 0, -1) = (-vy, vx, 0), cos = -vz;
    # R = I + K + K^2 / (1 + cos), written out (v is within a few degrees of down here).
    k = 1.0 / (1.0 - vz) if vz < 1.0 - 1e-12 else 0.0
    fix = np.array([[1.0 - k * vx * vx, -k * vx * vy, vx],
                    [-k * vx * vy, 1.0 - k * vy * vy, vy],
                    [-vx, -vy, 1.0 - k * (vx * vx + vy * vy)]])
    out = gc.copy()
    out[:3, :3] = fix @ r
    n = contact_centres.shape[0]
    if n:
        pivot = r @ (contact_centres.sum(axis=0) / n) + gc[:3, 3]
        out[:3, 3] = fix @ (gc[:3, 3] - pivot) + pivot
        # A point on the plane (depth d along down_c) sits at world z = t_z - d after the fix.
        out[2, 3] = radius_m + float((contact_centres @ down_c).max())
    return out


def _settle_on_floor(gc, contact_centres, radius_m, keep_attitude=False):
    """Correct the chassis pose gc (4x4) so that the contact modules' centres sit radius_m above z = 0.

    contact_centres (m, 3) in the chassis frame. Least squares for a height shift h and a small tilt
    (dx, dy) about the contacts' centroid: z_i + dx r_iy - dy r_ix + h = radius (r_i = p_i - centroid).
    Every selected contact counts, so a body resting on a few modules with others just inside the contact
    band settles on a compromise plane (about a degree off for the band of half a radius). A tilt the
    contacts cannot fix (fewer than three, or all in a line) is left alone; with keep_attitude (an IMU
    gives it) only the height is corrected.
    """
    n = contact_centres.shape[0]
    if n == 0:
        return gc
    if keep_attitude:
        out = gc.copy()
        out[2, 3] += radius_m - float((contact_centres @ gc[2, :3]).sum()) / n - gc[2, 3]
        return out
    p = contact_centres @ gc[:3, :3].T + gc[:3, 3]
    centroid = p.sum(axis=0) / n
    r = p - centroid
    err = radius_m - p[:, 2]
    h = float(err.sum()) / n
    out = gc.copy()
    out[2, 3] += h
    if n < 3:
        return out
    # Tilt normal equations, a_i = (r_iy, -r_ix): [[syy, -sxy], [-sxy, sxx]] d = (sum r_y e, -sum r_x e).
    s = r[:, :2].T @ r[:, :2]
    e = r[:, :2].T @ err
    sxx, sxy, syy = float(s[0, 0]), float(s[0, 1]), float(s[1, 1])
    half_tr = 0.5 * (sxx + syy)
    root = math.sqrt(max(half_tr * half_tr - (sxx * syy - sxy * sxy), 0.0))
    lam_max, lam_min = half_tr + root, half_tr - root
    floor = 1e-4 * n          # a direction needs about a centimetre of RMS lever arm to be fixed
    bx, by = float(e[1]), -float(e[0])
    if lam_min > floor:
        det = syy * sxx - sxy * sxy
        dx, dy = (sxx * bx + sxy * by) / det, (sxy * bx + syy * by) / det
    elif lam_max > floor:
        # Only along the well-spread direction (eigenvector of lam_max of [[syy, -sxy], [-sxy, sxx]]).
        vx, vy = (-sxy, lam_max - syy) if abs(sxy) > 1e-15 else ((1.0, 0.0) if syy >= sxx else (0.0, 1.0))
        norm = math.hypot(vx, vy)
        vx, vy = vx / norm, vy / norm
        k = (vx * bx + vy * by) / lam_max
        dx, dy = k * vx, k * vy
    else:
        return out
    # Rotation by angle |(dx, dy)| about the horizontal axis (dx, dy, 0) (Rodrigues, written out).
    th = math.hypot(dx, dy)
    if th < 1e-12:
        return out
    ux, uy = dx / th, dy / th
    c, s = math.cos(th), math.sin(th)
    rot = np.array([[c + ux * ux * (1 - c), ux * uy * (1 - c), uy * s],
                    [ux * uy * (1 - c), c + uy * uy * (1 - c), -ux * s],
                    [-uy * s, ux * s, c]])
    out[:3, :3] = rot @ gc[:3, :3]
    out[:3, 3] = rot @ (gc[:3, 3] - centroid) + centroid
    out[2, 3] += h
    return out


def _adjoint_of_inverse(g) -> np.ndarray:
    """Ad_{g^-1} = [[R^T, -R^T hat(p)], [0, R^T]] for twists (v, w)."""
    rt = g[:3, :3].T
    ad = np.zeros((6, 6))
    ad[:3, :3] = rt
    ad[3:, 3:] = rt
    ad[:3, 3:] = -rt @ hat3(g[:3, 3])
    return ad


_PLANAR_ROWS = np.array([0, 1, 5])[:, None]
_PLANAR_COLS = np.array([0, 1, 5])[None, :]
# Variance given to the off-plane components of a planar estimate (z, roll, pitch): known, not zero,
# so that consumers inverting the matrix do not fail.
_OFF_PLANE_VARIANCE = 1e-9


def _embed_planar(cov3) -> np.ndarray:
    """6x6 ROS-ordered covariance from a 3x3 (x, y, theta) one."""
    out = np.zeros((6, 6))
    out[_PLANAR_ROWS, _PLANAR_COLS] = cov3
    out[2, 2] = out[3, 3] = out[4, 4] = _OFF_PLANE_VARIANCE
    return out


def body_pose_from_links(robot, link_poses, body_frame=None, previous=None) -> np.ndarray:
    """Pose (4x4) of an Estimator body frame computed from the links' true poses (for validation).

    Parameters: robot; link_poses (n_links, 4, 4) every link centre's frame in the world (e.g. from a
    physics engine); body_frame as for Estimator (default: its default for the robot's kind);
    previous: the previous result (4x4) to keep the virtual chassis axes continuous, or None.
    Planar robots give a pose in the plane (x, y, yaw; z = 0), like the Estimator's.
    """
    if isinstance(robot, str) or hasattr(robot, '__fspath__'):
        from snake_control.robot import load_robot
        robot = load_robot(robot)
    poses = np.asarray(link_poses, dtype=float)
    n_links = robot.n_links
    if poses.shape != (n_links, 4, 4):
        raise ValueError(f'link_poses must have shape ({n_links}, 4, 4), got {poses.shape}')
    planar = robot.kind == 'planar'
    if body_frame is None:
        body_frame = 'middle' if planar else 'chassis'
    link = body_frame_index(body_frame, n_links)
    if planar:
        planar_poses = xyyaw_from_se3(poses)
        centres, headings = planar_poses[:, :2], planar_poses[:, 2]
        if link is not None:
            return _pose_matrix(np.array([centres[link, 0], centres[link, 1], headings[link]]))
        c = centres.mean(axis=0)
        d = centres - c
        sxx, syy, sxy = d[:, 0] @ d[:, 0], d[:, 1] @ d[:, 1], d[:, 0] @ d[:, 1]
        psi = 0.5 * np.arctan2(2.0 * sxy, sxx - syy)
        if previous is not None:
            ref = np.arctan2(previous[1, 0], previous[0, 0])
            if abs(wrap_angle(psi - ref)) > np.pi / 2:
                psi += np.pi
        elif np.array([np.cos(psi), np.sin(psi)]) @ (centres[-1] - centres[0]) < 0:
            psi += np.pi     # x toward the head
        return _pose_matrix(np.array([c[0], c[1], wrap_angle(psi)]))
    if link is not None:
        return poses[link].copy()
    rot, origin, _, _ = virtual_chassis(poses[:, :3, 3], None if previous is None else previous[:3, :3],
                                        up=poses[0, :3, 2])
    return se3_matrix(rot, origin)


def run_offline(robot, times_s, positions_rad, velocities_rad_s=None, **options):
    """Run an Estimator over a recorded joint trajectory.

    Parameters: robot; times_s (T,); positions_rad (T, n_joints); velocities_rad_s (T, n_joints) or None;
    options: Estimator keyword arguments (body_frame, initial_pose, ...).
    Returns a list of EstimatorState (one per accepted sample).
    """
    est = Estimator(robot, **options)
    times = np.asarray(times_s, dtype=float)
    pos = np.asarray(positions_rad, dtype=float)
    if pos.ndim != 2 or pos.shape[0] != times.shape[0]:
        raise ValueError(f'positions_rad must be (T, n) with T = len(times_s), got {pos.shape} and '
                         f'{times.shape}')
    out = []
    for k in range(times.shape[0]):
        vel = None if velocities_rad_s is None else velocities_rad_s[k]
        before = est.skipped
        state = est.update(times[k], pos[k], vel)
        if est.skipped == before:
            out.append(state)
    return out


def root_link_pose(robot, body_pose, positions_rad, body_frame=None, previous=None):
    """Pose (4x4) of link 0, the URDF's root, in odom: what the odom -> link_0 transform must carry so
    robot_state_publisher's tree (link_0 -> link_k from the joint angles) hangs under the estimate.

    Parameters: robot; body_pose (4x4) the reported body frame in odom (Estimator.pose);
    positions_rad (n_joints,) the shape it was estimated at; body_frame as for Estimator; previous:
    the body_in_root this function returned last time (keeps virtual chassis axes continuous) or None.
    Returns (root_pose (4x4), body_in_root (4x4)). The body frame is found in the chain's own frames by
    the same rule (body_pose_from_links) the validation uses, so the two stay consistent.
    """
    from snake_control.kinematics.chain import chain_frames

    frames = chain_frames(np.asarray(positions_rad, dtype=float), robot.axis_vectors, robot.link_lengths_m)
    body_in_root = body_pose_from_links(robot, frames, body_frame, previous)
    inverse = np.eye(4)
    inverse[:3, :3] = body_in_root[:3, :3].T
    inverse[:3, 3] = -body_in_root[:3, :3].T @ body_in_root[:3, 3]
    return np.asarray(body_pose, dtype=float) @ inverse, body_in_root


class BodyFrameTracker:
    """Ground-truth pose of the estimator's body frame, one sample of link poses at a time.

    body_frame: None (the estimator's default: 'middle' for planar robots, 'chassis' for pitch-yaw),
    'middle', 'head', 'tail', 'chassis' or a link index. The pose comes from the estimator's own
    ``body_pose_from_links`` (so both sides define the frame the same way), fed the previous result to
    keep the virtual chassis axes continuous. Call reset() to start a new run.
    """

    def __init__(self, robot, body_frame=None):
        self.robot, self.body_frame = robot, body_frame
        self.reset()

    def reset(self) -> None:
        self._previous = None

    def __call__(self, link_poses: np.ndarray) -> np.ndarray:
        """(4, 4) world pose of the body frame from (n_links, 4, 4) world link poses."""
        self._previous = body_pose_from_links(self.robot, link_poses, self.body_frame, self._previous)
        return self._previous.copy()
