"""Attitude of an IMU from its gyro and accelerometer: a complementary filter on SO(3).

The filter (Mahony, Hamel and Pflimlin, "Nonlinear complementary filters on the special orthogonal
group", IEEE TAC 2008, their "explicit complementary filter with bias correction") keeps the rotation
R (IMU frame -> odom, z up) and the gyro bias b (rad/s, IMU frame):

    v      = f / |f|                  measured up in the IMU frame (f: specific force, m/s^2; at rest
                                      the accelerometer reads +g along up)
    v_hat  = R^T e_z                  predicted up in the IMU frame
    e      = v x v_hat                (rad) the turn that takes v_hat toward v, see below
    R     <- R exp((w - b + k_p e) dt)
    b     <- b - k_i e dt

Why e = v x v_hat: with R <- R exp(d dt) the predicted up moves as d v_hat / dt = v_hat x d, and with
d = k (v x v_hat) that is k (v (v_hat . v_hat) - v_hat (v_hat . v)) = k (v - cos(angle) v_hat), toward v.
(The same sign as Mahony's omega_mes = sum_i k_i v_i x v_hat_i.)

Gravity fixes roll and pitch only. Yaw comes from the gyro alone, so its bias about the vertical is
learnt where the answer is known: while the robot stands still every axis of the gyro reads its bias.
``learn_bias`` folds the mean reading over a window of rest into b (the caller judged the window still,
e.g. its joints did not move through it): b is the mean of the rest's readings, and a running mean over
``still_time_s`` once it has rested that long. ``update(..., still=True)`` does the same one reading at a
time. A gait that drives the body is never still, so the bias learnt at rest holds while it moves (a MEMS
gyro's bias wanders over minutes, not seconds).

Accelerations of the IMU's own module (a head swinging through a gait, about 1 m/s^2) tilt the
measured up: the correction is weighted down as |f| leaves g (weight 0 beyond ``accel_band`` * g),
and k_p is small (time constant 1 / k_p of seconds), so the gait's swing averages out.

Example (a level IMU turning at 0.1 rad/s about up, its gyro biased by 0.01 rad/s on z; three seconds
still first, then two seconds turning):
    >>> f = AttitudeFilter()
    >>> for k in range(300):
    ...     _ = f.update(0.01, [0.0, 0.0, 0.01], [0.0, 0.0, 9.81], still=True)
    >>> round(float(f.bias[2]), 4)                                  # learnt while still
    0.01
    >>> for k in range(200):
    ...     _ = f.update(0.01, [0.0, 0.0, 0.11], [0.0, 0.0, 9.81])
    >>> round(float(np.degrees(np.arctan2(f.rotation[1, 0], f.rotation[0, 0]))), 1)   # 0.2 rad turned
    11.5
"""
from __future__ import annotations

import math

import numpy as np

from snake_control.kinematics.lie import so3_exp, so3_log

STANDARD_GRAVITY_M_S2 = 9.80665
# The first accelerometer reading levels the filter only when it is within this share of g.
LEVEL_BAND = 0.1


def up_error_rad(rotation, accel_m_s2) -> np.ndarray:
    """(3,) e = v x v_hat in the IMU frame: the rotation vector (rad, its norm the sine of the angle)
    by which the attitude estimate must turn so that its predicted up R^T e_z meets the measured up
    v = accel / |accel|.

    rotation (3, 3): IMU frame -> odom (z up). accel_m_s2 (3,): specific force in the IMU frame, nonzero.

    Example: an estimate level (R = I) while the IMU is really rolled by +0.1 rad about x measures up
    v = R_x(0.1)^T e_z = (0, sin 0.1, cos 0.1), and e = v x e_z = (sin 0.1, 0, 0): turn +x, as it should.
    """
    r = np.asarray(rotation, dtype=float)
    f = np.asarray(accel_m_s2, dtype=float)
    if r.shape != (3, 3) or f.shape != (3,):
        raise ValueError(f'rotation must be (3, 3) and accel_m_s2 (3,), got {r.shape} and {f.shape}')
    norm = float(np.linalg.norm(f))
    if not norm > 0.0:
        raise ValueError(f'accel_m_s2 must be nonzero to give a direction, got {f}')
    return np.cross(f / norm, r[2])       # r[2] = R^T e_z, the predicted up in the IMU frame


def accel_weight(accel_m_s2, band: float, gravity_m_s2: float = STANDARD_GRAVITY_M_S2) -> float:
    """Trust (0..1) in the accelerometer as a gravity sensor: 1 when |f| = g, falling linearly to 0 when
    |f| is ``band`` * g away from it (the module then accelerates, and f is not only gravity)."""
    norm = float(np.linalg.norm(accel_m_s2))
    return max(0.0, 1.0 - abs(norm - gravity_m_s2) / (band * gravity_m_s2))


def attitude_step(rotation, bias_rad_s, gyro_rad_s, accel_m_s2, dt_s: float, k_p: float, k_i: float,
                  still_gain: float = 0.0, accel_band: float = 0.2):
    """One step of the complementary filter (see the module docstring); returns (rotation, bias).

    rotation (3, 3) IMU -> odom; bias_rad_s, gyro_rad_s (3,) IMU frame; accel_m_s2 (3,) or None (no
    accelerometer: gyro only); dt_s > 0; k_p (1/s) and k_i (1/s^2) the gains; still_gain in (0, 1]: the
    body is known not to turn, so the gyro reads its bias: b moves that fraction of the way to the
    reading (0: moving). The rate less the bias is integrated either way, so a stillness misjudged
    loses no rotation.
    """
    if not dt_s > 0.0:
        raise ValueError(f'dt_s must be positive, got {dt_s}')
    r = np.asarray(rotation, dtype=float)
    bx, by, bz = np.asarray(bias_rad_s, dtype=float).tolist()
    wx, wy, wz = np.asarray(gyro_rad_s, dtype=float).tolist()
    ex = ey = ez = 0.0
    if accel_m_s2 is not None:
        fx, fy, fz = np.asarray(accel_m_s2, dtype=float).tolist()
        norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        if norm > 0.0:
            # e = v x v_hat, v = f / |f|, v_hat = r[2] (up_error_rad), times the trust in f (accel_weight).
            trust = max(0.0, 1.0 - abs(norm - STANDARD_GRAVITY_M_S2) / (accel_band * STANDARD_GRAVITY_M_S2))
            k = trust / norm
            ux, uy, uz = r[2].tolist()
            ex, ey, ez = k * (fy * uz - fz * uy), k * (fz * ux - fx * uz), k * (fx * uy - fy * ux)
    if still_gain > 0.0:
        # Still: the reading is the bias (and what is left of it integrates to nothing).
        bx, by, bz = bx + (wx - bx) * still_gain, by + (wy - by) * still_gain, bz + (wz - bz) * still_gain
        tx, ty, tz = wx - bx + k_p * ex, wy - by + k_p * ey, wz - bz + k_p * ez
    else:
        bx, by, bz = bx - k_i * ex * dt_s, by - k_i * ey * dt_s, bz - k_i * ez * dt_s
        tx, ty, tz = wx - bx + k_p * ex, wy - by + k_p * ey, wz - bz + k_p * ez
    return r @ _rodrigues(tx * dt_s, ty * dt_s, tz * dt_s), np.array([bx, by, bz])


def _rodrigues(x: float, y: float, z: float) -> np.ndarray:
    """so3_exp of (x, y, z) written out for the filter's per-reading step (a tenth of the general one's cost)."""
    t2 = x * x + y * y + z * z
    if t2 < 1e-12:
        a, b = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0          # sin t / t and (1 - cos t) / t^2, series
    else:
        t = math.sqrt(t2)
        a, b = math.sin(t) / t, (1.0 - math.cos(t)) / t2
    return np.array([[1.0 - b * (y * y + z * z), -a * z + b * x * y, a * y + b * x * z],
                     [a * z + b * x * y, 1.0 - b * (x * x + z * z), -a * x + b * y * z],
                     [-a * y + b * x * z, a * x + b * y * z, 1.0 - b * (x * x + y * y)]])


def _log_rotation(r) -> np.ndarray:
    """so3_log of a rotation matrix r (3, 3) written out for the per-message attitude increments (the
    general one's numpy calls cost several times more); near pi it hands over to the general one."""
    m = r.tolist()
    c = 0.5 * (m[0][0] + m[1][1] + m[2][2] - 1.0)
    x, y, z = 0.5 * (m[2][1] - m[1][2]), 0.5 * (m[0][2] - m[2][0]), 0.5 * (m[1][0] - m[0][1])
    if c > 1.0 - 1e-12:
        k = 1.0 + (x * x + y * y + z * z) / 6.0          # theta / sin theta, series
    elif c > -0.999:
        t = math.acos(c)
        k = t / math.sin(t)
    else:
        return so3_log(np.asarray(r, dtype=float))
    return np.array([k * x, k * y, k * z])


class AttitudeFilter:
    """The complementary filter's state: ``rotation`` (IMU -> odom) and ``bias`` (rad/s).

    time_constant_s: 1 / k_p, how slowly gravity pulls the tilt (s); bias_time_constant_s: the same for
    the tilt axes' bias (k_i = k_p / bias_time_constant_s); still_time_s: how fast the bias follows the
    gyro while still; accel_band: see accel_weight. ``initialised``: the first accelerometer reading
    that is gravity alone (|f| within LEVEL_BAND of g) sets roll and pitch at once (yaw 0); before that
    the rotation is the identity turned by the gyro.
    """

    def __init__(self, time_constant_s: float = 2.0, bias_time_constant_s: float = 20.0,
                 still_time_s: float = 0.5, accel_band: float = 0.2):
        for name, value in (('time_constant_s', time_constant_s), ('bias_time_constant_s', bias_time_constant_s),
                            ('still_time_s', still_time_s), ('accel_band', accel_band)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f'{name} must be positive, got {value}')
        self.k_p = 1.0 / time_constant_s
        self.k_i = self.k_p / bias_time_constant_s
        self.still_time_s = float(still_time_s)
        self.accel_band = float(accel_band)
        self.rotation = np.eye(3)
        self.bias = np.zeros(3)
        self.initialised = False
        self.bias_learnt = False    # a rest has given the bias (learn_bias, or update with still)
        self.still_s = 0.0        # how long the body has been still (s), 0 while it moves

    def set_yaw_from(self, rotation) -> None:
        """Keep roll and pitch, take the heading of ``rotation`` (3, 3): turn about odom z so that the
        IMU's x axis, projected on the floor, points where rotation's does."""
        target = np.asarray(rotation, dtype=float)
        now = math.atan2(self.rotation[1, 0], self.rotation[0, 0])
        want = math.atan2(target[1, 0], target[0, 0])
        c, s = math.cos(want - now), math.sin(want - now)
        self.rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ self.rotation

    def learn_bias(self, mean_rad_s, duration_s: float, rest_s: float) -> None:
        """Fold mean_rad_s (3,), the mean gyro reading over duration_s (s) of a rest, into the bias.

        rest_s: how long the rest has lasted, this window included (s). The bias becomes the mean over the
        whole rest while it is shorter than still_time_s, and a running mean over still_time_s after that;
        a first window of the rest replaces it (what was learnt before the body last moved is older).

        Example: half a second still at 0.01 rad/s, then a tenth of a second at 0.02 rad/s:
            >>> f = AttitudeFilter(still_time_s=0.5)
            >>> f.learn_bias([0.0, 0.0, 0.01], 0.5, 0.5)
            >>> f.learn_bias([0.0, 0.0, 0.02], 0.1, 0.6)
            >>> round(float(f.bias[2]), 4)
            0.012
        """
        if not (duration_s > 0.0 and rest_s >= duration_s):
            raise ValueError(f'need 0 < duration_s <= rest_s, got {duration_s} and {rest_s}')
        gain = min(1.0, duration_s / min(rest_s, self.still_time_s))
        self.bias = self.bias + gain * (np.asarray(mean_rad_s, dtype=float) - self.bias)
        self.bias_learnt = True

    def update(self, dt_s: float, gyro_rad_s, accel_m_s2=None, still: bool = False) -> np.ndarray:
        """Advance by dt_s (s) with a gyro reading (rad/s) and optionally an accelerometer one (m/s^2),
        both (3,) in the IMU frame; returns the rotation (IMU -> odom)."""
        gyro = np.asarray(gyro_rad_s, dtype=float)
        accel = None if accel_m_s2 is None else np.asarray(accel_m_s2, dtype=float)
        if gyro.shape != (3,) or not math.isfinite(float(gyro.sum())):
            raise ValueError(f'gyro_rad_s must be (3,) finite, got {gyro}')
        if accel is not None and (accel.shape != (3,) or not math.isfinite(float(accel.sum()))):
            raise ValueError(f'accel_m_s2 must be (3,) finite, got {accel}')
        return self.step(dt_s, gyro, accel, still)

    def step(self, dt_s: float, gyro, accel=None, still: bool = False) -> np.ndarray:
        """update() for readings already checked: gyro (3,) and accel (3,) or None, finite float arrays."""
        # A body dropped onto the floor, or lifted, reads anything but g; levelled on that, the filter
        # would start tens of degrees off and its heading would swing as gravity pulls it back.
        if not self.initialised and accel is not None and accel_weight(accel, LEVEL_BAND) > 0.0:
            self.rotation = level_from_accel(accel)
            self.initialised = True
        gain = 0.0
        if still:
            # The mean of the readings since the body stopped, then a running mean over still_time_s:
            # a short rest (a robot's power-up) already gives the bias to the noise over its length.
            self.still_s += dt_s
            gain = dt_s / min(self.still_s, self.still_time_s)
            self.bias_learnt = True
        else:
            self.still_s = 0.0
        self.rotation, self.bias = attitude_step(self.rotation, self.bias, gyro, accel, dt_s, self.k_p, self.k_i,
                                                 gain, self.accel_band)
        return self.rotation


def level_from_accel(accel_m_s2) -> np.ndarray:
    """Rotation (IMU -> odom) with yaw 0 whose up R^T e_z is the measured up accel / |accel|: the
    smallest turn taking the IMU's measured up onto odom z.

    Example: an IMU standing on its side, up along its +y: level_from_accel((0, 9.81, 0)) maps
    (0, 1, 0) to (0, 0, 1).
    """
    v = np.asarray(accel_m_s2, dtype=float)
    v = v / np.linalg.norm(v)
    axis = np.cross(v, [0.0, 0.0, 1.0])
    s, c = float(np.linalg.norm(axis)), float(v[2])
    if s < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    return so3_exp(axis / s * math.atan2(s, c))
