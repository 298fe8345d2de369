"""A running MuJoCo world of one snake robot, reached through named accessors.

Joint goals go in (rad, the robot's convention, joints in YAML order); the physics steps; joint
positions, velocities and actuator torques, and the ground-truth pose of every link come out. Poses are
4x4 homogeneous matrices of link frames (centre, x toward the head) in the world frame (z up, the
floor at z = 0).

Example:
    >>> world = SnakeWorld('kinematic_snake_3')
    >>> world.set_goals([0.5, -0.5])          # returns the goals applied
    array([ 0.5, -0.5])
    >>> world.run(1.0)
    >>> world.joint_positions_rad().round(2)
    array([ 0.5, -0.5])
"""
from __future__ import annotations

import dataclasses
import math

import mujoco
import numpy as np

from snake_control.kinematics.chain import chain_frames
from snake_control.kinematics.lie import so3_log, xyyaw_from_se3
from snake_control.physics.mjcf import (IMU_ACCEL, IMU_GYRO, PhysicsOptions, actuator_name, build_mjcf,
                                        imu_link_index, link_name, resting_height_m)
from snake_control.robot import Robot, load_robot


class SnakeWorld:
    """The MuJoCo world of one robot (see the module docstring).

    Parameters: robot (a Robot, a shipped name or a YAML path); timestep (s, overrides
    options.timestep_s); options (PhysicsOptions). The world starts straight at the origin, at rest.
    ``model`` and ``data`` are the raw mujoco.MjModel / MjData for anything not covered here.
    """

    def __init__(self, robot: Robot | str, timestep: float | None = None,
                 options: PhysicsOptions | None = None):
        self.robot = load_robot(robot) if isinstance(robot, str) else robot
        options = options or PhysicsOptions()
        if timestep is not None:
            options = dataclasses.replace(options, timestep_s=timestep)
        self.options = options.validate()
        self.xml = build_mjcf(self.robot, self.options)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.model)
        m = self.model
        names = self.robot.joint_names
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name) for name in names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._dadr = np.array([m.jnt_dofadr[j] for j in jids])
        self._act = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, actuator_name(name))
                              for name in names])
        self._bodies = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, link_name(k))
                                 for k in range(self.robot.n_links)])
        base = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, 'base')
        self._base_q = m.jnt_qposadr[base]
        self._lower, self._upper = self.robot.lower_rad, self.robot.upper_rad
        self.imu_link = imu_link_index(self.robot, self.options)
        gyro = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, IMU_GYRO)
        accel = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, IMU_ACCEL)
        self._gyro_adr = int(m.sensor_adr[gyro])
        self._accel_adr = int(m.sensor_adr[accel])
        self._imu_rng = np.random.default_rng(self.options.imu_seed)
        self.reset()

    # --- state ---------------------------------------------------------------------------------

    @property
    def n_joints(self) -> int:
        return self.robot.n_joints

    @property
    def actuator_ids(self) -> np.ndarray:
        """(n_joints,) MuJoCo actuator ids of the servos, YAML joint order."""
        return self._act.copy()

    @property
    def link_body_ids(self) -> np.ndarray:
        """(n_links,) MuJoCo body ids of link_0 (tail) .. link_n (head)."""
        return self._bodies.copy()

    @property
    def timestep_s(self) -> float:
        return float(self.model.opt.timestep)

    @property
    def time_s(self) -> float:
        """Simulated time since the last reset (s)."""
        return float(self.data.time)

    def _angles(self, angles_rad, name: str) -> np.ndarray:
        angles = np.asarray(angles_rad, dtype=float)
        if angles.shape != (self.n_joints,):
            raise ValueError(f'{name} must have shape ({self.n_joints},) (one angle per joint of '
                             f'{self.robot.name}), got {angles.shape}')
        if not np.all(np.isfinite(angles)):
            raise ValueError(f'{name} must be finite, got {angles}')
        return angles

    def reset(self, angles_rad=None, position_m=(0.0, 0.0), heading_rad: float = 0.0) -> None:
        """Put the robot at rest in a shape, resting on the floor, goals equal to the shape.

        Parameters: angles_rad (n_joints,) joint angles (default straight), within the joint limits;
        position_m (x, y) where the middle link's centre goes; heading_rad its heading (about z).
        A 3D shape is laid with its best-fit plane on the floor (the plane normal up, on the side of the
        tail link's z) and lowered until its lowest module touches the floor.
        """
        angles = np.zeros(self.n_joints) if angles_rad is None else self._angles(angles_rad, 'angles_rad')
        if np.any(angles < self._lower - 1e-12) or np.any(angles > self._upper + 1e-12):
            raise ValueError(f'angles_rad outside the joint limits of {self.robot.name}: {angles}')
        position = np.asarray(position_m, dtype=float)
        if position.shape != (2,) or not np.all(np.isfinite(position)) or not math.isfinite(heading_rad):
            raise ValueError('position_m must be a finite (x, y) and heading_rad finite')
        frames = chain_frames(angles, self.robot.axis_vectors, self.robot.link_lengths_m)  # tail frame
        centres = frames[:, :3, 3]
        rot = _lay_flat(centres)                                    # tail frame -> world orientation
        mid = self.robot.n_links // 2
        x_mid = rot @ frames[mid, :3, 0]
        yaw = heading_rad - math.atan2(x_mid[1], x_mid[0])
        rot = _rot_z(yaw) @ rot
        world_centres = centres @ rot.T
        if self.robot.kind == 'planar':
            lift = resting_height_m(self.robot)
        else:
            half = 0.5 * self.robot.link_length_m * (frames[:, :3, 0] @ rot.T)
            ends_z = np.concatenate([world_centres[:, 2] + half[:, 2], world_centres[:, 2] - half[:, 2]])
            lift = self.robot.module_radius_m - ends_z.min()
        base = np.array([position[0], position[1], lift]) - np.array([*world_centres[mid, :2], 0.0])
        mujoco.mj_resetData(self.model, self.data)
        q = self.data.qpos
        q[self._base_q:self._base_q + 3] = base
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, rot.reshape(-1))
        q[self._base_q + 3:self._base_q + 7] = quat
        q[self._qadr] = angles
        self.data.ctrl[self._act] = angles
        mujoco.mj_forward(self.model, self.data)
        self._imu_rot = self._imu_link_rotation()
        self._imu_accel = np.zeros(3)
        self._imu_count = 0

    def random_angles(self, seed: int, spread_rad: float = 0.3) -> np.ndarray:
        """(n_joints,) joint angles drawn uniformly within +-spread_rad of zero (and the limits) from seed.

        The same seed gives the same shape, so ``world.reset(world.random_angles(seed))`` starts a
        reproducible run from a varied initial state.
        """
        if not (math.isfinite(spread_rad) and spread_rad >= 0):
            raise ValueError(f'spread_rad must be finite and >= 0, got {spread_rad}')
        rng = np.random.default_rng(seed)
        angles = rng.uniform(-spread_rad, spread_rad, self.n_joints)
        return np.clip(angles, self._lower, self._upper)

    # --- commands and stepping -----------------------------------------------------------------

    def set_goals(self, angles_rad) -> np.ndarray:
        """Set every servo's goal (rad, YAML joint order); goals are clipped to the joint limits.

        Returns the goals actually applied. Raises ValueError for a wrong shape or a non-finite value.
        """
        goals = np.clip(self._angles(angles_rad, 'angles_rad'), self._lower, self._upper)
        self.data.ctrl[self._act] = goals
        return goals

    def goals_rad(self) -> np.ndarray:
        return self.data.ctrl[self._act].copy()

    def step(self, n: int = 1) -> None:
        """Advance the physics by n timesteps."""
        if n < 1:
            raise ValueError(f'n must be a positive number of steps, got {n}')
        # One step at a time, so the accelerometer reading is the mean over every physics step, as an
        # IMU filters between the samples it outputs (a sampled accelerometer would alias the gait).
        model, data, sensors, accel = self.model, self.data, self.data.sensordata, self._accel_adr
        for _ in range(int(n)):
            mujoco.mj_step(model, data)
            self._imu_accel += sensors[accel:accel + 3]
        self._imu_count += int(n)

    def run(self, duration_s: float) -> None:
        """Advance by duration_s of simulated time (rounded to whole timesteps), goals held."""
        steps = int(round(duration_s / self.timestep_s))
        if steps > 0:
            self.step(steps)

    # --- measurements --------------------------------------------------------------------------

    def imu_reading(self) -> tuple[np.ndarray, np.ndarray]:
        """(gyro rad/s, accelerometer m/s^2), each (3,) in the IMU link's frame, over the physics steps
        since the last reading, with the configured bias and noise (PhysicsOptions.imu_*).

        The gyro is a delta-angle IMU's: the rotation the link turned since the last reading over the
        time, log(R_last^T R_now) / dt. Integrated, it gives back the world's own link pose. (MuJoCo's
        gyro sensor does not: the world integrates each joint on its own, and that product departs from
        the body's angular velocity by the joints' commutator, about 1 degree of yaw in 10 s of rolling.)

        The accelerometer gives specific force: at rest on flat ground it reads +g along the link's up
        axis. mj_step computes sensors at the start of each step, so the average lags by one timestep.
        """
        rot = self._imu_link_rotation()
        if self._imu_count:
            mean = np.concatenate([so3_log(self._imu_rot.T @ rot) / (self._imu_count * self.timestep_s),
                                   self._imu_accel / self._imu_count])
        else:
            # No step since the last reading (just reset): the sensors at the present state.
            mujoco.mj_forward(self.model, self.data)
            mujoco.mj_rnePostConstraint(self.model, self.data)
            s = self.data.sensordata
            mean = np.concatenate([s[self._gyro_adr:self._gyro_adr + 3], s[self._accel_adr:self._accel_adr + 3]])
        self._imu_rot = rot
        self._imu_accel = np.zeros(3)
        self._imu_count = 0
        return self._imu_sensed(mean[:3], mean[3:])

    def still_imu_reading(self) -> tuple[np.ndarray, np.ndarray]:
        """(gyro rad/s, accelerometer m/s^2) of the IMU while the world stands still between two steps, as
        imu_reading gives them: no turn and the specific force of the world's gravity in the IMU link's
        frame (+g along world up), with the configured bias and noise. The next imu_reading still covers
        every step since the last one."""
        up = self._imu_link_rotation().T @ -np.asarray(self.model.opt.gravity, dtype=float)
        return self._imu_sensed(np.zeros(3), up)

    def _imu_sensed(self, gyro_rad_s, accel_m_s2) -> tuple[np.ndarray, np.ndarray]:
        """What the IMU reads of a true rate and specific force: the configured bias and noise added (gyro's
        noise drawn first)."""
        o = self.options
        gyro = gyro_rad_s + np.asarray(o.imu_gyro_bias_rad_s) + o.imu_gyro_noise_rad_s * self._imu_rng.standard_normal(3)
        accel = accel_m_s2 + np.asarray(o.imu_accel_bias_m_s2) + o.imu_accel_noise_m_s2 * self._imu_rng.standard_normal(3)
        return gyro, accel

    def _imu_link_rotation(self) -> np.ndarray:
        # xmat as the last step left it (its start): the gyro lags by one timestep, like the accelerometer.
        return self.data.xmat[self._bodies[self.imu_link]].reshape(3, 3).copy()

    def joint_positions_rad(self) -> np.ndarray:
        """(n_joints,) joint angles, YAML order."""
        return self.data.qpos[self._qadr].copy()

    def joint_velocities_rad_s(self) -> np.ndarray:
        """(n_joints,) joint angular velocities."""
        return self.data.qvel[self._dadr].copy()

    def actuator_torques_nm(self) -> np.ndarray:
        """(n_joints,) torque each servo applies to its joint (N m), within its stall torque."""
        return self.data.actuator_force[self._act].copy()

    def link_poses(self) -> np.ndarray:
        """(n_links, 4, 4) ground-truth world poses of the link frames, tail (0) to head."""
        # mj_step leaves xpos/xmat at the state before its integration; bring them up to qpos.
        mujoco.mj_kinematics(self.model, self.data)
        poses = np.zeros((self.robot.n_links, 4, 4))
        poses[:, :3, :3] = self.data.xmat[self._bodies].reshape(-1, 3, 3)
        poses[:, :3, 3] = self.data.xpos[self._bodies]
        poses[:, 3, 3] = 1.0
        return poses

    def lowest_points_m(self) -> np.ndarray:
        """(n_links,) height (m) of each link's lowest point above the floor: a pitch-yaw module's is on
        its capsule (a tilted one's lower end), a planar link's its wheels' rim below the axle."""
        poses = self.link_poses()
        if self.robot.kind == 'planar':
            return poses[:, 2, 3] - self.robot.wheels.radius_m
        half = 0.5 * self.robot.link_length_m * np.abs(poses[:, 2, 0])
        return poses[:, 2, 3] - half - self.robot.module_radius_m

    def floor_contacts(self, margin_m: float = 0.002) -> np.ndarray:
        """(n_links,) bool: links touching the floor, i.e. with their lowest point (lowest_points_m) within
        margin_m of it. A margin, because a chain lying flat rests on whichever few modules the soft
        contacts happen to load, the others hovering micrometres above the floor.
        """
        return self.lowest_points_m() < margin_m

    def link_pose(self, link: int | str) -> np.ndarray:
        """(4, 4) world pose of one link: an index 0..n_links-1, or 'tail', 'middle', 'head'."""
        return self.link_poses()[self.link_index(link)]

    def link_index(self, link: int | str) -> int:
        named = {'tail': 0, 'middle': self.robot.n_links // 2, 'head': self.robot.n_links - 1}
        if isinstance(link, str):
            if link not in named:
                raise ValueError(f'link must be an index or one of {", ".join(named)}, got {link!r}')
            return named[link]
        if not 0 <= int(link) < self.robot.n_links:
            raise ValueError(f'link index {link} outside 0..{self.robot.n_links - 1}')
        return int(link)

    def planar_pose(self, link: int | str = 'middle') -> np.ndarray:
        """(x m, y m, heading rad) of one link's frame projected on the floor."""
        return xyyaw_from_se3(self.link_pose(link))


def _rot_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _lay_flat(centres: np.ndarray) -> np.ndarray:
    """Rotation taking tail-frame vectors to a world orientation with the shape's best-fit plane level.

    The plane normal is the smallest principal direction of the link centres; for a line (no plane)
    or a shape in the tail link's x-y plane this is the tail link's z, so flat shapes stay upright.
    """
    d = centres - centres.mean(axis=0)
    _, s, vt = np.linalg.svd(d, full_matrices=True)
    normal = vt[2]
    if s[1] < 1e-9 or s[2] > 0.5 * s[1]:
        normal = np.array([0.0, 0.0, 1.0])
    if normal[2] < 0:
        normal = -normal
    normal /= np.linalg.norm(normal)
    # Rotation taking `normal` to world z with the least turn (keeps the tail's x as level as possible).
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(normal, z)
    sin_a, cos_a = np.linalg.norm(axis), float(normal @ z)
    if sin_a < 1e-12:
        return np.eye(3)
    k = axis / sin_a
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + sin_a * kx + (1 - cos_a) * kx @ kx
