"""Joint trajectories and pose tracks on disk: CSV and .mcap (no ROS installation needed).

Formats (docs/architecture.md):
- joint-trajectory CSV: header ``t,<joint name>,...``, time in s, angles in rad; columns in any order,
  every joint of the robot present (extra columns are ignored).
- pose CSV: header ``t,x,y,z,qx,qy,qz,qw`` (m, unit quaternion of the body frame in odom).
- .mcap with the ros2 profile: sensor_msgs/msg/JointState on a topic named ``joint_states`` (any
  namespace), read by snake_control.mcap_io.
"""
from __future__ import annotations

import csv
import struct
from pathlib import Path

import numpy as np

POSE_COLUMNS = ('t', 'x', 'y', 'z', 'qx', 'qy', 'qz', 'qw')


class JointTrajectory:
    """Timestamped joint angles in a robot's joint order: t_s (T,), positions_rad (T, n),
    velocities_rad_s (T, n) or None."""

    def __init__(self, t_s, positions_rad, velocities_rad_s=None):
        self.t_s = np.asarray(t_s, dtype=float)
        self.positions_rad = np.asarray(positions_rad, dtype=float)
        self.velocities_rad_s = (None if velocities_rad_s is None
                                 else np.asarray(velocities_rad_s, dtype=float))

    def __len__(self):
        return self.t_s.shape[0]


def read_joint_csv(path, joint_names) -> JointTrajectory:
    """Read a joint-trajectory CSV; errors name the file, line and column."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no such joint-trajectory file')
    try:
        with path.open(newline='', encoding='utf-8') as f:
            rows = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f'{path}: not a UTF-8 CSV file ({exc.__class__.__name__})') from None
    if not rows:
        raise ValueError(f'{path}: empty file, expected a header t,<joint name>,...')
    header = [h.strip() for h in rows[0]]
    if not header or header[0] != 't':
        raise ValueError(f'{path}: line 1: the first column must be t (time in s), got {header[:1]}')
    missing = [n for n in joint_names if n not in header]
    if missing:
        raise ValueError(f'{path}: line 1: missing joint columns {missing} (header has {header[1:]})')
    cols = [header.index(n) for n in joint_names]
    times, values = [], []
    for line_no, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise ValueError(f'{path}: line {line_no}: {len(row)} fields, the header has {len(header)}')
        try:
            t = float(row[0])
            q = [float(row[c]) for c in cols]
        except ValueError:
            bad = next(header[i] for i in [0] + cols if not _is_float(row[i]))
            raise ValueError(f'{path}: line {line_no}: column {bad}: not a number') from None
        if not np.isfinite(t) or not np.all(np.isfinite(q)):
            raise ValueError(f'{path}: line {line_no}: non-finite value')
        times.append(t)
        values.append(q)
    if len(times) < 2:
        raise ValueError(f'{path}: needs at least two samples, found {len(times)}')
    return JointTrajectory(times, values)


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def write_joint_csv(path, joint_names, t_s, positions_rad):
    """Write a joint-trajectory CSV (the format `snake gait --csv` writes)."""
    with Path(path).open('w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['t', *joint_names])
        for t, q in zip(t_s, positions_rad):
            w.writerow([f'{t:.9f}', *(f'{v:.12g}' for v in q)])


def read_joint_mcap(path, joint_names, topic: str | None = None) -> JointTrajectory:
    """Read sensor_msgs/JointState messages from an .mcap file in the robot's joint order
    (snake_control.mcap_io.read_joint_states)."""
    from snake_control.mcap_io import read_joint_states

    from mcap.exceptions import McapError

    try:
        return JointTrajectory(*read_joint_states(path, joint_names, topic))
    except (McapError, EOFError, struct.error, UnicodeDecodeError, IndexError, KeyError, TypeError,
            OverflowError, MemoryError) as exc:
        # A truncated, empty or foreign file: the reader fails anywhere in its records.
        raise ValueError(f'{path}: not a readable MCAP recording ({type(exc).__name__}: '
                         f'{str(exc)[:120] or "truncated"})') from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not Path(path).exists():
            raise
        # A file shorter than the footer fails its seek.
        raise ValueError(f'{path}: not a readable MCAP recording ({type(exc).__name__}: '
                         f'{str(exc)[:120] or "truncated"})') from None


def read_joint_trajectory(path, joint_names, topic: str | None = None) -> JointTrajectory:
    """Read a .csv or .mcap joint trajectory by its suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == '.csv':
        return read_joint_csv(path, joint_names)
    if suffix == '.mcap':
        return read_joint_mcap(path, joint_names, topic)
    raise ValueError(f'{path}: unknown input format {suffix!r}: use a .csv joint trajectory or an .mcap '
                     'recording')


def write_pose_csv(path, t_s, poses_xyz_quat):
    """Write a pose CSV: t,x,y,z,qx,qy,qz,qw."""
    with Path(path).open('w', newline='') as f:
        w = csv.writer(f)
        w.writerow(POSE_COLUMNS)
        for t, p in zip(t_s, poses_xyz_quat):
            w.writerow([f'{t:.9f}', *(f'{v:.12g}' for v in p)])


def read_pose_csv(path):
    """Read a pose CSV: returns (t_s (T,), poses (T, 7) x, y, z, qx, qy, qz, qw)."""
    path = Path(path)
    with path.open(newline='') as f:
        rows = list(csv.reader(f))
    if not rows or tuple(h.strip() for h in rows[0]) != POSE_COLUMNS:
        raise ValueError(f'{path}: line 1: expected header {",".join(POSE_COLUMNS)}')
    data = np.array([[float(v) for v in r] for r in rows[1:] if r], dtype=float).reshape(-1, 8)
    return data[:, 0], data[:, 1:]
