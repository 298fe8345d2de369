"""Odometry error against ground truth, in the issue's terms (pure numpy).

``track_error(estimated, truth)`` compares two pose tracks sampled at the same times: the final
position error as a percentage of the distance travelled (path length of the truth in the plane) and
the final heading error in degrees per metre travelled.

Example (a 10 m straight truth; the estimate ends 0.2 m to the side and 2 degrees off):
    >>> t = np.linspace(0.0, 10.0, 11)
    >>> truth = np.stack([t, 0 * t, 0 * t], axis=1)
    >>> est = np.stack([t, 0.02 * t, np.radians(0.2) * t], axis=1)
    >>> e = track_error(est, truth)
    >>> round(e['position_error_percent'], 3), round(e['heading_error_deg_per_m'], 3)
    (2.0, 0.2)
"""
from __future__ import annotations

import numpy as np

from snake_control.kinematics.lie import se2_relative, wrap_angle, xyyaw_from_se3


def _planar(track, name) -> np.ndarray:
    a = np.asarray(track, dtype=float)
    if a.ndim == 3 and a.shape[1:] == (4, 4):
        return xyyaw_from_se3(a)
    if a.ndim == 2 and a.shape[1] == 3:
        return a
    raise ValueError(f'{name} must be (T, 4, 4) poses or (T, 3) planar poses (x, y, theta), got {a.shape}')


def track_error(estimated, truth, align_start: bool = True) -> dict:
    """Errors of an estimated pose track against the truth (same sample times).

    Parameters: estimated, truth: (T, 4, 4) poses or (T, 3) (x, y, theta) in a common fixed frame;
    align_start: express both tracks relative to their own first pose first (so an estimate started at
    the origin compares with a truth started anywhere).
    Returns a dict: distance_m (truth path length in the plane), final_position_error_m,
    position_error_percent, heading_error_deg (final, wrapped), heading_error_deg_per_m.
    """
    est, tru = _planar(estimated, 'estimated'), _planar(truth, 'truth')
    if est.shape != tru.shape or est.shape[0] < 2:
        raise ValueError(f'estimated and truth must have the same number (>= 2) of samples, '
                         f'got {est.shape[0]} and {tru.shape[0]}')
    if align_start:
        est, tru = se2_relative(est, est[0]), se2_relative(tru, tru[0])
    distance = float(np.sum(np.hypot(*np.diff(tru[:, :2], axis=0).T)))
    pos_err = float(np.hypot(*(est[-1, :2] - tru[-1, :2])))
    head_err = float(np.degrees(abs(wrap_angle(est[-1, 2] - tru[-1, 2]))))
    per = distance if distance > 0 else float('nan')
    return {'distance_m': distance, 'final_position_error_m': pos_err,
            'position_error_percent': 100.0 * pos_err / per, 'heading_error_deg': head_err,
            'heading_error_deg_per_m': head_err / per}

