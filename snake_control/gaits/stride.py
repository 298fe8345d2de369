"""Net motion per gait cycle of a passive-wheel snake, from the no-slip connection, and the inverse map
from a cmd_vel command (v m/s, omega rad/s) to the gait's phase rate and turning offset.

A planar snake whose wheels do not slip sideways moves with body twist xi = -A(r) r_dot
(snake_control.estimation.connection), so one gait cycle, phase 0 to 2 pi, moves the body by

    g_cycle = prod_k exp(-A(r(phi_k)) dr/dphi(phi_k) dphi)          (SE(2), mid-point shapes)

whatever the phase rate: the motion is geometric. In the virtual-chassis frame (x along the body
toward the head) g_cycle = (dx, dy, dtheta): a cycle travels along an arc of length
s = |(dx, dy)| (dtheta / 2) / sin(dtheta / 2) and turns by dtheta. At phase rate f cycles per second
the mean body speed is f s and the mean yaw rate f dtheta.

A gait with a turning parameter u (turn offset) has s(u) and dtheta(u); ``StrideModel`` tabulates them
over u in [-turn_max, turn_max] when a gait or a parameter is chosen, and ``command`` solves
dtheta(u) / s(u) = omega / v for u (the path curvature, independent of speed) and f = v / s(u).

Check: a slip-free serpenoid wave whose tangent angle is alpha sin(2 pi s / lambda - phi) advances
lambda J0(alpha) per cycle (J0: Bessel function of order 0); a long wheeled chain with
q_i = A sin(phase + i delta) has lambda = 2 pi l / delta and alpha = A / (2 sin(delta / 2)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.estimation.connection import planar_connection, planar_constraints
from snake_control.kinematics.lie import se2_compose, se2_exp

PI = math.pi
SAMPLES = 48          # phase steps per cycle: mid-point rule, the stride is within 0.1 % of 192 steps
TURN_SAMPLES = 9      # turning offsets tabulated over [-turn_max, turn_max]
MAX_TURN_RAD = 0.9 * PI   # a cycle turning further no longer has one mean path: the table ends there


def cycle_motion(angles_fn, link_length_m: float, samples: int = SAMPLES) -> tuple[float, float]:
    """(arc length m, turn rad) of one gait cycle of a planar wheeled snake, phase 0 -> 2 pi.

    angles_fn(phase_rad) -> (n,) joint angles. Each step integrates the no-slip connection at the
    mid-point shape in the middle link's frame (link-fixed: a principal axis can flip in a curled body)
    and composes on SE(2). The turn is the sum of the steps' rotations. Repeated cycles carry every
    point of the body around the fixed point of the cycle's motion; the arc length is the turn times
    the mean distance of the link centroid from that point over the cycle (the straight-line
    displacement when the cycle does not turn), positive toward the head.
    """
    body_frame = 'middle'
    dphi = 2 * PI / samples
    g = np.zeros(3)
    turned = 0.0
    prev = np.asarray(angles_fn(0.0), dtype=float)
    centroids, axes = [], []

    def record(pose, angles):
        centres = planar_constraints(angles, link_length_m, body_frame)[2]
        c, s = math.cos(pose[2]), math.sin(pose[2])
        rot = np.array([[c, -s], [s, c]])
        half = centres.shape[0] // 2
        centroids.append(rot @ centres.mean(axis=0) + pose[:2])
        axes.append(rot @ (centres[-half:].mean(axis=0) - centres[:half].mean(axis=0)))

    record(g, prev)
    for k in range(samples):
        mid = np.asarray(angles_fn((k + 0.5) * dphi), dtype=float)
        nxt = np.asarray(angles_fn((k + 1) * dphi), dtype=float)
        xi = planar_connection(mid, link_length_m, body_frame).twist(nxt - prev)
        g = se2_compose(g, se2_exp(xi))
        turned += float(xi[2])
        prev = nxt
        if k < samples - 1:
            record(g, nxt)
    centroids, axis = np.array(centroids), np.mean(axes, axis=0)
    if abs(turned) < 1e-6:
        return math.copysign(float(np.linalg.norm(g[:2])), float(g[:2] @ axis)), turned
    # Fixed point z of the cycle's motion: R z + t = z.
    c, s = math.cos(g[2]), math.sin(g[2])
    z = np.linalg.solve(np.eye(2) - np.array([[c, -s], [s, c]]), g[:2])
    radius = float(np.mean(np.linalg.norm(centroids - z, axis=1)))
    # Turning left (turned > 0) about a centre on the body's left is forward motion.
    to_centre = z - centroids.mean(axis=0)
    left = axis[0] * to_centre[1] - axis[1] * to_centre[0]
    return math.copysign(radius * abs(turned), turned * left), turned


@dataclass(frozen=True)
class Command:
    """What a gait does for a cmd_vel command: phase rate (rad/s) and turning offset (units of the
    gait's turn parameter), the body speed and yaw rate that gives (m/s, rad/s), and whether that is
    the command (False: outside the gait's reach, see StrideModel.command)."""

    phase_rate_rad_s: float
    turn: float
    speed_m_s: float
    yaw_rate_rad_s: float
    reachable: bool


class StrideModel:
    """Arc length s(u) (m) and turn dtheta(u) (rad) per cycle over the turning offsets u of one gait
    shape (catalog.GaitShape of a planar robot), and the inverse map from cmd_vel to phase rate and u.

    turns (k,) offsets; arc_m (k,), turn_rad (k,). A gait without a turning parameter has k = 1.
    """

    def __init__(self, shape, turn_max: float | None = None, samples: int = SAMPLES,
                 turn_samples: int = TURN_SAMPLES):
        self.shape = shape
        spec = shape.spec
        tmax = spec.turn_max if turn_max is None else float(turn_max)
        self.turns = np.linspace(-tmax, tmax, turn_samples) if spec.turn_param and tmax > 0 else np.zeros(1)
        l = shape.robot.link_length_m
        motions = [cycle_motion(lambda ph, u=u: shape.angles(ph, u), l, samples) for u in self.turns]
        # Keep the offsets around zero whose cycle turns less than MAX_TURN_RAD, travelling the way the
        # straight cycle does, along paths that curve more the larger the offset.
        mid = int(np.argmin(np.abs(self.turns)))
        sign = math.copysign(1.0, motions[mid][0])

        def fits(i, j):
            arc, turn = motions[i]
            curv = turn / arc if arc else math.inf
            prev = motions[j][1] / motions[j][0] if motions[j][0] else 0.0
            return abs(turn) < MAX_TURN_RAD and arc * sign > 0 and abs(curv) >= abs(prev)
        lo, hi = mid, mid
        while lo > 0 and fits(lo - 1, lo):
            lo -= 1
        while hi < len(motions) - 1 and fits(hi + 1, hi):
            hi += 1
        reach = min(mid - lo, hi - mid)           # the same reach both ways
        lo, hi = mid - reach, mid + reach
        self.turns, motions = self.turns[lo:hi + 1], motions[lo:hi + 1]
        self.arc_m = np.array([m[0] for m in motions])
        self.turn_rad = np.array([m[1] for m in motions])
        # Curvature of the path per offset (rad/m); monotonic in u for the gaits of the catalogue.
        with np.errstate(divide='ignore', invalid='ignore'):
            self.curvature = np.where(np.abs(self.arc_m) > 1e-12, self.turn_rad / self.arc_m, 0.0)
        self._straight = int(np.argmin(np.abs(self.turns)))

    @property
    def stride_m(self) -> float:
        """Arc length per cycle without turning (m)."""
        return float(self.arc_m[self._straight])

    def curvature_range(self) -> tuple[float, float]:
        """(lowest, highest) path curvature (rad/m) the turning parameter reaches."""
        return float(self.curvature.min()), float(self.curvature.max())

    def turn_for_curvature(self, curvature: float) -> tuple[float, bool]:
        """(offset u, reachable) with dtheta(u) / s(u) = curvature, clamped to the table's ends."""
        if self.turns.size == 1:
            return 0.0, abs(curvature) < 1e-9
        k = self.curvature
        order = np.argsort(k)
        ks, us = k[order], self.turns[order]
        if curvature < ks[0] or curvature > ks[-1]:
            return float(us[0] if curvature < ks[0] else us[-1]), False
        return float(np.interp(curvature, ks, us)), True

    def command(self, v_m_s: float, omega_rad_s: float, max_rate_rad_s: float = math.inf) -> Command:
        """Phase rate and turning offset that move the body at v (m/s) along a path turning at omega
        (rad/s), both cycle averages.

        Outside the reach: a path tighter than the gait can turn keeps the speed at the tightest
        curvature (so the yaw rate falls short); v = 0 with omega != 0 holds the shape (a wheeled
        gait cannot turn on the spot); a phase rate above max_rate_rad_s is capped (both fall short).
        """
        if abs(v_m_s) < 1e-9:
            return Command(0.0, 0.0, 0.0, 0.0, abs(omega_rad_s) < 1e-9)
        u, ok = self.turn_for_curvature(omega_rad_s / v_m_s)
        arc = float(np.interp(u, self.turns, self.arc_m)) if self.turns.size > 1 else self.stride_m
        # The path curvature at u (interpolated in curvature, the quantity solved for).
        curv = float(np.interp(u, self.turns, self.curvature)) if self.turns.size > 1 else 0.0
        dth = arc * curv
        if abs(arc) < 1e-9:
            return Command(0.0, u, 0.0, 0.0, False)
        rate = 2 * PI * v_m_s / arc
        if abs(rate) > max_rate_rad_s:
            rate, ok = math.copysign(max_rate_rad_s, rate), False
        cycles = rate / (2 * PI)
        return Command(rate, u, cycles * arc, cycles * dth, ok)

    def reach(self, max_rate_rad_s: float) -> dict:
        """The command range: max speed (m/s) at the phase-rate cap, curvature range (rad/m)."""
        lo, hi = self.curvature_range()
        return {'max_speed_m_s': abs(self.stride_m) * max_rate_rad_s / (2 * PI),
                'curvature_rad_m': (lo, hi)}


_CACHE: dict = {}


def stride_model(shape) -> StrideModel:
    """StrideModel of a gait shape, cached per robot geometry, gait and parameters."""
    robot = shape.robot
    key = (robot.n_joints, float(robot.link_length_m), shape.spec.name, tuple(sorted(shape.params.items())))
    if key not in _CACHE:
        _CACHE[key] = StrideModel(shape)
    return _CACHE[key]


def uses_model(spec, robot) -> bool:
    """Whether the scheduler maps cmd_vel through a StrideModel: forward gaits on passive wheels."""
    return robot.kind == 'planar' and spec.drive == 'forward'
