"""The MuJoCo world as the plant behind the emulated servo bus (`snake sim-bus --physics mujoco`).

The bus emulator (snake_control.dynamixel.emulator) owns the control tables and the wire; every tick it
hands this plant the servos' goals and torque states and takes back what the servos measure. Goals are
servo angles (rad from the centre tick): each is turned into a joint angle through the joint's offset
and direction (snake_control.dynamixel.conversion), limited by the servo's profile velocity and acceleration
like the servo's own trajectory generator, and given to that joint's position actuator. Present
position and velocity are the physics' joint angle and rate turned back into servo angles; present
current is the actuator torque over the torque constant (stall torque / stall current), with the
servo's sign. A servo with torque off exerts nothing (its actuator gain is zeroed), only the motor's
back-EMF damping remains.

Ground truth: with ``truth_csv`` (or the environment variable SNAKE_PHYSICS_TRUTH when the bus emulator
builds the plant) the true pose of the estimator's default body frame (middle link in the floor plane /
virtual chassis, snake_control.estimation.estimator.BodyFrameTracker) is written every TRUTH_PERIOD_S of
simulated time as a pose CSV (t,x,y,z,qx,qy,qz,qw; t in simulated seconds), to compare with
`snake odometry`.
With SNAKE_PHYSICS_TRUTH_LINKS the pose of every link (its centre, tail to head) is written too, every
TRUTH_PERIOD_S, as a CSV stamped with the wall clock the recorder stamps messages with (t_wall,t_sim,
then x,y,z,qx,qy,qz,qw per link): `snake bringup --physics mujoco --record` turns it into the recording's
second TF tree (truth/...).

Time: the emulator steps this plant in a thread of its own (``threaded``) every 2 ms of wall clock.
The plant steps the physics by whole timesteps, carrying the remainder to the next tick; a tick longer
than MAX_CATCH_UP_S (the host stalled) is cut there rather than stepped through in one burst.
"""
from __future__ import annotations

import csv
import math
import os
import time

import numpy as np

from snake_control.dynamixel.models import ServoModel
from snake_control.dynamixel.conversion import joint_to_servo_rad, servo_to_joint_rad
from snake_control.dynamixel.plant import Plant
from snake_control.physics.world import SnakeWorld
from snake_control.robot import Robot, load_robot

MAX_CATCH_UP_S = 0.1
TRUTH_PERIOD_S = 0.02
IMU_PERIOD_S = 0.01          # the world's IMU is read every 10 ms of simulated time (100 Hz)
TRUTH_ENV = 'SNAKE_PHYSICS_TRUTH'
TRUTH_LINKS_ENV = 'SNAKE_PHYSICS_TRUTH_LINKS'


class MujocoPlant(Plant):
    """A SnakeWorld driven by servo goals; ``world`` is reachable for ground truth.

    Parameters: robot (Robot or name); ids: the servo IDs the bus emulates (each must be a joint of the
    robot; default all); world: an existing SnakeWorld of that robot (default a new one); truth_csv: a
    path to write the ground-truth body pose to (see the module docstring), or None; on_imu: called with
    (simulated time s, gyro rad/s, accelerometer m/s^2) every IMU_PERIOD_S of simulated time, or None
    (a tick spanning several periods calls it once per period, after the tick).
    """

    threaded = True          # mj_step releases the interpreter lock: the emulator steps it in its own thread

    def __init__(self, robot: Robot | str, ids=None, world: SnakeWorld | None = None, truth_csv=None,
                 truth_links_csv=None, on_imu=None):
        self.robot = load_robot(robot) if isinstance(robot, str) else robot
        self.world = world or SnakeWorld(self.robot)
        by_id = {j.servo_id: k for k, j in enumerate(self.robot.joints)}
        ids = list(by_id) if ids is None else [int(i) for i in ids]
        unknown = sorted(set(ids) - set(by_id))
        if unknown:
            raise ValueError(f'servo IDs {unknown} are not joints of robot {self.robot.name} '
                             f'(its IDs: {sorted(by_id)})')
        self.ids = ids
        self._index = by_id
        n = self.robot.n_joints
        self._direction = np.array([j.direction for j in self.robot.joints], dtype=float)
        self._offset = np.array([j.offset_rad for j in self.robot.joints])
        self._vmax = np.full(n, math.inf)
        self._amax = np.full(n, math.inf)
        self._setpoint = np.zeros(n)           # joint-space goal after the profile
        self._setpoint_vel = np.zeros(n)
        self._initial = np.zeros(n)
        self._configured: set[int] = set()
        self._started = False
        self._carry_s = 0.0
        self._on = np.ones(n, dtype=bool)
        servo = self.robot.bus.servo
        self._kt_nm_a = servo.torque_constant_nm_per_a
        m = self.world.model
        act = self.world.actuator_ids
        self._gain = m.actuator_gainprm[act, 0].copy()
        self._bias = m.actuator_biasprm[act, 1].copy()
        self._truth_path = truth_csv
        self._truth_file = None
        self._truth_next_s = 0.0
        self._tracker = None
        self._links_path = truth_links_csv
        self._links_file = None
        # on_imu(sim_time_s, gyro_rad_s, accel_m_s2): the world's IMU reading every IMU_PERIOD_S of
        # simulated time (SnakeWorld.imu_reading), for whatever carries it on (a ROS publisher).
        self.on_imu = on_imu
        self._imu_next_s = 0.0
        self.tick_started_s = time.monotonic()

    # --- Plant interface ---------------------------------------------------------------------------

    def configure(self, servo_id: int, model: ServoModel, position_rad: float) -> None:
        k = self._joint(servo_id)
        joint = self.robot.joints[k]
        angle = servo_to_joint_rad(float(position_rad), joint.direction, joint.offset_rad)
        self._initial[k] = np.clip(angle, joint.lower_rad, joint.upper_rad)
        self._configured.add(servo_id)
        self._started = False

    def set_profile(self, servo_id: int, velocity_rad_s: float, acceleration_rad_s2: float) -> None:
        k = self._joint(servo_id)
        self._vmax[k] = velocity_rad_s if velocity_rad_s > 0 else math.inf
        self._amax[k] = acceleration_rad_s2 if acceleration_rad_s2 > 0 else math.inf

    def step(self, dt_s: float, goals_rad_by_id: dict[int, float],
             torque_on_by_id: dict[int, bool]) -> dict[int, tuple[float, float, float]]:
        # The tick brings the world up to now (dt_s is the wall time since the last one): this instant,
        # monotonic s, is where its last simulated moment lies on the wall clock (sim_imu stamps by it).
        self.tick_started_s = time.monotonic()
        if not self._started:
            self.world.reset(self._initial)
            self._setpoint[:] = self._initial
            self._setpoint_vel[:] = 0.0
            self._imu_next_s = 0.0
            self._started = True
            self._open_truth()
        on = self._on.copy()
        for sid, flag in torque_on_by_id.items():
            on[self._joint(sid)] = bool(flag)
        if np.any(on != self._on):
            self._set_torque(on)
        target = self._setpoint.copy()
        for sid, goal in goals_rad_by_id.items():
            k = self._joint(sid)
            if math.isfinite(goal):
                target[k] = servo_to_joint_rad(goal, self._direction[k], self._offset[k])
        # A limp joint's setpoint follows the joint, so torque comes back on without a jump.
        target = np.where(on, target, self.world.joint_positions_rad())
        wall_s = max(float(dt_s), 0.0)
        self._carry_s += min(wall_s, MAX_CATCH_UP_S)
        steps = int(self._carry_s / self.world.timestep_s + 1e-9)
        if steps:
            self._carry_s -= steps * self.world.timestep_s
            self._profile(target, steps * self.world.timestep_s, on)
            self.world.set_goals(self._setpoint)
            if self.on_imu is None:
                self.world.step(steps)
            else:
                self._step_reading_imu(steps, stood_s=wall_s - MAX_CATCH_UP_S)
            if (self._truth_file is not None or self._links_file is not None) and \
                    self.world.time_s >= self._truth_next_s - 1e-9:
                self._write_truth()
        return self.read()

    def _step_reading_imu(self, steps: int, stood_s: float = 0.0) -> None:
        """world.step(steps), stopping at every IMU_PERIOD_S of simulated time to read the IMU: a long
        tick (the host stalled) gives every reading of its span, as an IMU keeps sampling whatever its
        host does, rather than one reading over the whole tick. Readings go to on_imu after the tick,
        each with its own simulated time.

        stood_s > 0: the tick was cut at MAX_CATCH_UP_S, so the world stood still for that much wall time
        before it (the joints the driver read stood still with it). Its first reading then follows a still
        one (SnakeWorld.still_imu_reading), given the previous reading's simulated time: stamped by its
        age, it falls IMU_PERIOD_S before the tick's first reading and the still span lies before it.
        Without it a consumer integrating each reading over the interval since the last stamp turned
        the first reading's rate through the stood time too (the world at 0.75-0.9 of real time on a
        loaded host: the demo's gyro heading drifted 4-7 deg through serpentine)."""
        readings = []
        if stood_s > 0.0 and self._imu_next_s > IMU_PERIOD_S:
            readings.append((self._imu_next_s - IMU_PERIOD_S, *self.world.still_imu_reading()))
        dt = self.world.timestep_s
        while steps > 0:
            to_next = int(math.ceil((self._imu_next_s - self.world.time_s) / dt - 1e-9))
            if to_next <= 0:
                readings.append((self.world.time_s, *self.world.imu_reading()))
                self._imu_next_s += IMU_PERIOD_S
                if self._imu_next_s <= self.world.time_s:
                    self._imu_next_s = self.world.time_s + IMU_PERIOD_S
                continue
            n = min(steps, to_next)
            self.world.step(n)
            steps -= n
        if self.world.time_s >= self._imu_next_s - 1e-9:
            readings.append((self.world.time_s, *self.world.imu_reading()))
            self._imu_next_s += IMU_PERIOD_S
            if self._imu_next_s <= self.world.time_s:
                self._imu_next_s = self.world.time_s + IMU_PERIOD_S
        for reading in readings:
            self.on_imu(*reading)

    def close(self) -> None:
        """Flush and close the ground-truth file, if any."""
        for name in ('_truth_file', '_links_file'):
            if getattr(self, name) is not None:
                getattr(self, name).close()
                setattr(self, name, None)

    # --- helpers -----------------------------------------------------------------------------------

    def read(self) -> dict[int, tuple[float, float, float]]:
        """{id: (servo angle rad, servo velocity rad/s, current A)} of every emulated servo."""
        q = self.world.joint_positions_rad()
        dq = self.world.joint_velocities_rad_s()
        tau = self.world.actuator_torques_nm()
        out = {}
        for sid in self.ids:
            k = self._index[sid]
            d = self._direction[k]
            out[sid] = (joint_to_servo_rad(q[k], d, self._offset[k]), d * dq[k], d * tau[k] / self._kt_nm_a)
        return out

    def _open_truth(self) -> None:
        if self._links_path is not None:
            if self._links_file is not None:
                self._links_file.close()
            self._links_file = open(self._links_path, 'w', newline='')
            self._links_csv = csv.writer(self._links_file)
            self._links_csv.writerow(['t_wall', 't_sim'] + [f'{c}{k}' for k in range(self.robot.n_links)
                                                          for c in ('x', 'y', 'z', 'qx', 'qy', 'qz', 'qw')])
            self._truth_next_s = 0.0
            if self._truth_path is None:
                self._write_truth()
        if self._truth_path is None:
            return
        from snake_control.estimation.estimator import BodyFrameTracker

        if self._truth_file is not None:
            self._truth_file.close()
        self._truth_file = open(self._truth_path, 'w', newline='')
        self._truth_csv = csv.writer(self._truth_file)
        self._truth_csv.writerow(('t', 'x', 'y', 'z', 'qx', 'qy', 'qz', 'qw'))
        self._tracker = BodyFrameTracker(self.robot)
        self._truth_next_s = 0.0
        self._write_truth()

    def _write_truth(self) -> None:
        from snake_control.kinematics.lie import quaternion_from_matrix

        links = self.world.link_poses()
        if self._truth_file is not None:
            pose = self._tracker(links)
            quat = quaternion_from_matrix(pose[:3, :3])
            self._truth_csv.writerow([f'{self.world.time_s:.6f}', *(f'{v:.9g}' for v in (*pose[:3, 3], *quat))])
            self._truth_file.flush()
        if self._links_file is not None:
            row = [f'{time.time():.6f}', f'{self.world.time_s:.6f}']
            for link in links:
                row += [f'{v:.9g}' for v in (*link[:3, 3], *quaternion_from_matrix(link[:3, :3]))]
            self._links_csv.writerow(row)
            self._links_file.flush()
        self._truth_next_s = self.world.time_s + TRUTH_PERIOD_S

    def _joint(self, servo_id: int) -> int:
        try:
            return self._index[int(servo_id)]
        except KeyError:
            raise ValueError(f'servo ID {servo_id} is not a joint of robot {self.robot.name}') from None

    def _set_torque(self, on: np.ndarray) -> None:
        m = self.world.model
        act = self.world.actuator_ids
        m.actuator_gainprm[act, 0] = np.where(on, self._gain, 0.0)
        m.actuator_biasprm[act, 1] = np.where(on, self._bias, 0.0)
        self._on = on

    def _profile(self, target: np.ndarray, dt: float, on: np.ndarray) -> None:
        """Move the setpoint toward the target within the profile velocity and acceleration."""
        sp, v = self._setpoint, self._setpoint_vel
        err = target - sp
        vmax, amax = self._vmax, self._amax
        finite_a = np.isfinite(amax)
        # Speed that still stops on the target under the acceleration limit, capped by vmax.
        v_stop = np.where(finite_a, np.sqrt(2.0 * np.where(finite_a, amax, 0.0) * np.abs(err)), np.inf)
        speed = np.minimum(vmax, v_stop)
        limited = np.isfinite(speed)
        v_des = np.where(limited, np.copysign(np.where(limited, speed, 0.0), err), 0.0)
        dv = np.where(finite_a, np.clip(v_des - v, -amax * dt, amax * dt), v_des - v)
        v_new = np.where(limited, v + dv, 0.0)
        step = np.where(limited, v_new * dt, err)
        overshoot = np.abs(step) >= np.abs(err)
        sp[:] = np.where(overshoot | ~on, target, sp + step)
        v[:] = np.where(overshoot | ~on | ~limited, 0.0, v_new)


def mujoco_plant(ids, models_by_id, robot=None) -> MujocoPlant:
    """The emulator's plant factory for `--physics mujoco`: robot is a Robot or its name/YAML path (the
    emulator's --physics-arg; see snake_control.dynamixel.simbus)."""
    if robot is None:
        raise ValueError('--physics mujoco needs the robot (give --robot): the world is built from its YAML')
    return MujocoPlant(robot, ids, truth_csv=os.environ.get(TRUTH_ENV) or None,
                       truth_links_csv=os.environ.get(TRUTH_LINKS_ENV) or None)

