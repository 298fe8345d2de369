"""Where a gait fits a robot: the joints its shape drives past their limits, and the range of each
parameter within which it does not.

The scheduler clamps every goal to the joint limits, so an infeasible gait is never unsafe for a servo,
but its shape is no longer the gait (a serpentine whose crests are cut flat does not move as designed).
These ranges are what `ros2 param describe` shows for the gait node's parameters, and a parameter
change that drives more joints past their limits than before is refused.
"""
from __future__ import annotations

import math

import numpy as np

from snake_control.gaits import catalog

SAMPLES = 24              # phases per cycle at which a shape is checked
TOLERANCE_RAD = 0.01      # a joint beyond its limit by less than this still counts as within
ITERATIONS = 10           # bisection steps per side of a range: 1/1024 of the catalogue's span


def saturated_joints(robot, gait: str, params: dict, samples: int = SAMPLES,
                     tolerance_rad: float = TOLERANCE_RAD) -> list[str]:
    """Names of the joints that the gait's shape (params complete, as catalog.resolve_params returns
    them) drives beyond their limits by more than tolerance_rad somewhere in one cycle, at no turn."""
    spec = catalog.gait_spec(gait)
    shape = catalog.GaitShape(spec, robot, params)
    phases = np.linspace(0.0, 2.0 * math.pi, samples, endpoint=False)
    q = np.array([shape.angles(float(ph)) for ph in phases])
    over = np.any(q > robot.upper_rad + tolerance_rad, axis=0) | np.any(q < robot.lower_rad - tolerance_rad,
                                                                      axis=0)
    over |= ~np.all(np.isfinite(q), axis=0)
    return [name for name, bad in zip(robot.joint_names, over) if bad]


def feasible_range(robot, gait: str, param: str, params: dict | None = None,
                   iterations: int = ITERATIONS) -> tuple[float, float]:
    """(low, high) of `param` around its value in params (default: the gait's defaults for the robot)
    within which no more joints saturate than at that value, inside the catalogue's range. Found by
    bisection on each side, so it assumes the feasible values form one interval around the start."""
    spec = catalog.gait_spec(gait)
    p = spec.param(param)
    base = catalog.resolve_params(spec, robot, params)
    start = base[param]
    allowed = len(saturated_joints(robot, gait, base))

    def ok(value):
        return len(saturated_joints(robot, gait, {**base, param: value})) <= allowed

    def edge(limit):
        if not math.isfinite(limit) or ok(limit):
            return limit
        good, bad = start, limit
        for _ in range(iterations):
            mid = 0.5 * (good + bad)
            good, bad = (mid, bad) if ok(mid) else (good, mid)
        return good
    return edge(p.lower), edge(p.upper)


_RANGES: dict = {}


def feasible_ranges(robot, gait: str) -> dict[str, tuple[float, float]]:
    """feasible_range of every parameter of a gait at the robot's defaults (cached per robot geometry)."""
    key = (robot.name, gait, tuple(robot.axes), float(robot.link_length_m), tuple(robot.lower_rad),
           tuple(robot.upper_rad))
    if key not in _RANGES:
        _RANGES[key] = {p.name: feasible_range(robot, gait, p.name) for p in catalog.gait_spec(gait).params}
    return _RANGES[key]
