"""Which ground contacts the estimator's no-slip step needs: its contact step run on the true shape.

The state estimator reads a pitch-yaw body's motion from the modules it takes for ground contacts
(estimation.contact.contact_step). Whether its error comes from the contacts it picks, from the floor
model or from the shape and attitude it estimates is found here by removing the last: every control
period of a MuJoCo run, the true link poses (so the true shape and attitude) are handed to contact_step
with a contact set chosen by a rule, and the chassis increments it returns are integrated and compared
with the true chassis motion. The rules (CONTACT_RULES) range from the modules MuJoCo really loads
(a bound no shape-only rule can beat) to the estimator's own band and load weights.

coulomb_planar_step checks the floor model itself: the planar chassis increment that minimises the power
an anisotropic Coulomb floor dissipates, sum_i N_i sqrt((mu_axial s_axial,i)^2 + (mu_lateral s_lateral,i)^2),
over the skin points MuJoCo reports as touching with its own normal forces N_i.

Frames: the chassis here is planar (planar_chassis): origin the centroid of the link centres, x the
body's principal axis in the floor plane (toward the head), z up; increments are (dx m, dy m, dtheta rad)
in the chassis frame at the step's start, composed as planar poses (kinematics.lie.se2_compose).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
from scipy.optimize import minimize

from snake_control.estimation.contact import (LOAD_FLOOR, ContactSelector, contact_step,
                                              supporting_contacts)
from snake_control.kinematics.lie import se2_compose, se3_inverse, wrap_angle, xyyaw_from_se3
from snake_control.physics.mjcf import matching_axial_weight
from snake_control.physics.world import SnakeWorld
from snake_control.robot import Robot
from snake_control.validation import cmdvel as C
from snake_control.validation.runs import VALIDATION_PHYSICS

DOWN = np.array([0.0, 0.0, -1.0])

# Rules choosing the contact set from the true shape, in the order the bench prints them: what each hands to
# contact_step ('loaded': MuJoCo's load-bearing modules; 'lowest k': the k modules lowest above the floor;
# 'height < h mm': every module whose lowest point is within h of the lowest's; 'estimator band': the
# estimator's ContactSelector band (radius / 2 in, radius out) widened until it holds the body, weighted by
# its static loads, as Estimator does).
CONTACT_RULES = ('loaded', 'lowest 3', 'lowest 6', 'height < 0.5 mm', 'height < 2 mm', 'estimator band')


def planar_chassis(link_poses) -> np.ndarray:
    """(4, 4) world pose of the planar chassis of link poses (n, 4, 4): origin the centroid of the link
    centres, x the principal axis of the centres in the floor plane pointing from tail to head, z up."""
    c = np.asarray(link_poses)[:, :3, 3]
    o = c.mean(axis=0)
    xy = c[:, :2] - o[:2]
    axis = np.linalg.svd(xy, full_matrices=False)[2][0]
    if np.dot(xy[-1] - xy[0], axis) < 0:
        axis = -axis
    t = np.eye(4)
    t[:2, 0] = axis
    t[:2, 1] = (-axis[1], axis[0])
    t[:3, 3] = o
    return t


def world_contacts(world: SnakeWorld):
    """MuJoCo's module-floor contacts now: links (m,) int, points_m (m, 3) world, normal_n (m,) > 0."""
    m, d = world.model, world.data
    link_of_body = {int(b): i for i, b in enumerate(world.link_body_ids)}
    links, points, normals = [], [], []
    force = np.zeros(6)
    for j in range(d.ncon):
        c = d.contact[j]
        link = link_of_body.get(int(m.geom_bodyid[c.geom1]), link_of_body.get(int(m.geom_bodyid[c.geom2])))
        if link is None:
            continue
        mujoco.mj_contactForce(m, d, j, force)
        if force[0] > 0.0:
            links.append(link)
            points.append(np.array(c.pos))
            normals.append(force[0])
    return np.array(links, dtype=int), np.array(points).reshape(-1, 3), np.array(normals, dtype=float)


def coulomb_planar_step(p0_m, p1_m, axes, normal_n, mu_axial: float, mu_lateral: float) -> np.ndarray:
    """(dx m, dy m, dtheta rad): the planar chassis increment minimising the power an anisotropic Coulomb
    floor takes from contacts whose skin points are at p0_m (m, 2) in the chassis frame at the step's start
    and at p1_m (m, 2) in the chassis frame at its end; axes (m, 2) unit module axes in the first frame;
    normal_n (m,) their normal forces (N). The slip of contact i is R(dtheta) p1_i + (dx, dy) - p0_i."""
    p0, p1 = np.asarray(p0_m, float), np.asarray(p1_m, float)
    ax = np.asarray(axes, float)
    perp = np.column_stack([-ax[:, 1], ax[:, 0]])
    n = np.asarray(normal_n, float)

    def power(x):
        c, s = math.cos(x[2]), math.sin(x[2])
        slip = np.column_stack([c * p1[:, 0] - s * p1[:, 1] + x[0], s * p1[:, 0] + c * p1[:, 1] + x[1]]) - p0
        along, across = (slip * ax).sum(1), (slip * perp).sum(1)
        return float((n * np.sqrt((mu_axial * along) ** 2 + (mu_lateral * across) ** 2 + 1e-12)).sum())
    return minimize(power, np.zeros(3), method='Nelder-Mead',
                    options={'xatol': 1e-7, 'fatol': 1e-12, 'maxiter': 2000}).x


def rule_contacts(rule: str, heights_m, loaded, centres_m, selector: ContactSelector):
    """(contacts (n,) bool, weights (n,) or None) of a CONTACT_RULES rule; loaded (n,) bool: the modules
    MuJoCo loads; centres_m (n, 3) module centres in the chassis frame (z up); selector: the estimator
    band's ContactSelector, updated here every step (its hysteresis needs every step)."""
    h = np.asarray(heights_m, float)
    band = selector.update(h)
    if rule == 'loaded':
        return np.asarray(loaded, bool), None
    if rule.startswith('lowest '):
        mask = np.zeros(h.size, bool)
        mask[np.argsort(h, kind='stable')[:int(rule.split()[1])]] = True
        return mask, None
    if rule.startswith('height < '):
        return h < float(rule.split()[2]) * 1e-3, None
    if rule == 'estimator band':
        mask, loads = supporting_contacts(band, h, centres_m, DOWN)
        selector.widen(mask)
        return mask, np.where(mask, loads / max(float(loads.max()), 1e-12) + LOAD_FLOOR, 0.0)
    raise ValueError(f'unknown contact rule {rule!r}; rules: {", ".join(CONTACT_RULES)}')


@dataclass(frozen=True)
class OracleResult:
    """A run's true chassis travel (m) and turn (rad), and per rule (and 'coulomb, MuJoCo loads' when
    run) the integrated estimate's final position error (m) and heading error (rad); mean modules per
    step MuJoCo loads."""

    robot: str
    gait: str
    command: tuple
    distance_m: float
    turn_rad: float
    errors_m: dict
    heading_errors_rad: dict
    loaded_modules: float

    def error_pct(self, rule: str) -> float:
        return 100.0 * self.errors_m[rule] / max(self.distance_m, 1e-9)


def oracle_run(robot: Robot, gait: str, command, duration_s: float = 10.0, warmup_s: float = 4.0,
               rules=CONTACT_RULES, coulomb: bool = False, options=None) -> OracleResult:
    """Drive `gait` at `command` (linear.x, linear.y m/s, angular.z rad/s; through the gait controller
    from rest, as the acceptance runs) for warmup_s, then for duration_s run contact_step on the true
    link poses with each rule's contacts (and, with coulomb, coulomb_planar_step on MuJoCo's contacts and
    loads: slow, a few seconds per simulated second) and integrate each one's planar increments."""
    world = SnakeWorld(robot, options=options or VALIDATION_PHYSICS)
    goal_fn, _, _ = C.controller_goal_fn(robot, gait, command)
    period = 1.0 / robot.bus.control_rate_hz
    steps = int(round(period / world.timestep_s))
    world.reset(np.clip(goal_fn(0.0), robot.lower_rad, robot.upper_rad))
    world.run(1.0)
    t = 0.0
    for _ in range(int(round(warmup_s / period))):
        world.set_goals(goal_fn(t))
        world.step(steps)
        t += period
    half, rho = 0.5 * robot.link_length_m, robot.module_radius_m
    axial_weight = matching_axial_weight(world.options)
    selector = ContactSelector(0.5 * rho, rho)
    keys = list(rules) + (['coulomb, MuJoCo loads'] if coulomb else [])
    prev = world.link_poses()
    c0 = planar_chassis(prev)
    i0 = se3_inverse(c0)
    start = xyyaw_from_se3(c0)
    est = {k: start.copy() for k in keys}
    loaded_count = 0
    n_steps = int(round(duration_s / period))
    for _ in range(n_steps):
        links, points, normals = world_contacts(world)
        heights = world.lowest_points_m()
        heights -= heights.min()
        world.set_goals(goal_fn(t))
        world.step(steps)
        t += period
        poses = world.link_poses()
        c1 = planar_chassis(poses)
        i1 = se3_inverse(c1)
        q0 = prev[:, :3, 3] @ i0[:3, :3].T + i0[:3, 3]
        q1 = poses[:, :3, 3] @ i1[:3, :3].T + i1[:3, 3]
        r0 = np.einsum('ij,kjl->kil', i0[:3, :3], prev[:, :3, :3])
        r1 = np.einsum('ij,kjl->kil', i1[:3, :3], poses[:, :3, :3])
        loaded = np.zeros(robot.n_links, bool)
        loaded[links] = True
        loaded_count += int(loaded.sum())
        for rule in rules:
            mask, weights = rule_contacts(rule, heights, loaded, q0, selector)
            step = contact_step(q0, r0, q1, r1, DOWN, rho, mask, weights=weights, axial_weight=axial_weight,
                                half_length_m=half, coulomb_iterations=3, static_slip_m=0.01 * period)
            d = step.displacement
            est[rule] = se2_compose(est[rule], d[[0, 1, 5]])
        if coulomb and links.size:
            # Skin points fixed in their links: where the touching point of the step's start is at its end.
            local = np.einsum('kji,kj->ki', prev[links, :3, :3], points - prev[links, :3, 3])
            after = np.einsum('kij,kj->ki', poses[links, :3, :3], local) + poses[links, :3, 3]
            p0 = (points @ i0[:3, :3].T + i0[:3, 3])[:, :2]
            p1 = (after @ i1[:3, :3].T + i1[:3, 3])[:, :2]
            axes = (poses[links, :3, 0] @ i0[:3, :3].T)[:, :2]
            axes /= np.linalg.norm(axes, axis=1, keepdims=True) + 1e-12
            x = coulomb_planar_step(p0, p1, axes, normals, world.options.axial_friction,
                                    world.options.lateral_friction)
            est['coulomb, MuJoCo loads'] = se2_compose(est['coulomb, MuJoCo loads'], x)
        elif coulomb:
            est['coulomb, MuJoCo loads'] = se2_compose(est['coulomb, MuJoCo loads'], xyyaw_from_se3(i0 @ c1))
        prev, c0, i0 = poses, c1, i1
    end = xyyaw_from_se3(c0)
    errors = {k: float(np.hypot(*(p[:2] - end[:2]))) for k, p in est.items()}
    headings = {k: float(wrap_angle(p[2] - end[2])) for k, p in est.items()}
    return OracleResult(robot.name, gait, tuple(float(c) for c in command), float(np.hypot(*(end[:2] - start[:2]))),
                        float(wrap_angle(end[2] - start[2])), errors, headings, loaded_count / max(n_steps, 1))
