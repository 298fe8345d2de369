"""Joint trajectories and pose tracks on disk: CSV and .mcap (no ROS installation needed).

Formats (ARCHITECTURE.md):
- joint-trajectory CSV: header ``t,<joint name>,...``, time in s, angles in rad; columns in any order,
  every joint of the robot present (extra columns are ignored).
- pose CSV: header ``t,x,y,z,qx,qy,qz,qw`` (m, unit quaternion of the body frame in odom).
- .mcap with the ros2 profile: sensor_msgs/msg/JointState on a topic named ``joint_states`` (any
  namespace), read with the ``mcap`` and ``mcap-ros2-support`` packages.
"""
from __future__ import annotations

import csv
import struct
from pathlib import Path

import numpy as np

POSE_COLUMNS = ('t', 'x', 'y', 'z', 'qx', 'qy', 'qz', 'qw')
JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
# Full ros2msg definition (with dependencies) of sensor_msgs/msg/JointState, for writing .mcap files.
JOINT_STATE_MSGDEF = """std_msgs/Header header
string[] name
float64[] position
float64[] velocity
float64[] effort
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""


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
            w.writerow([f'{t:.9g}', *(f'{v:.12g}' for v in q)])


def read_joint_mcap(path, joint_names, topic: str | None = None) -> JointTrajectory:
    """Read sensor_msgs/JointState messages from an .mcap file in the robot's joint order.

    topic: the exact topic; default: the one topic whose name ends in 'joint_states'. Stamps come
    from the message header (the log time when the header is zero).
    """
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from mcap.exceptions import McapError

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no such .mcap file')
    try:
        return _read_joint_mcap(path, joint_names, topic, make_reader, DecoderFactory)
    except (McapError, EOFError, OSError, struct.error, UnicodeDecodeError, IndexError, KeyError, TypeError,
            OverflowError, MemoryError) as exc:
        # A truncated, empty or foreign file: the reader fails anywhere in its records (a file shorter
        # than the footer fails its seek with OSError).
        raise ValueError(f'{path}: not a readable MCAP recording ({type(exc).__name__}: '
                         f'{str(exc)[:120] or "truncated"})') from None


def _read_joint_mcap(path, joint_names, topic, make_reader, DecoderFactory) -> JointTrajectory:
    with path.open('rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        channels = summary.channels.values() if summary is not None else []
        schemas = summary.schemas if summary is not None else {}
        candidates = [c.topic for c in channels if schemas.get(c.schema_id) is not None
                      and schemas[c.schema_id].name == JOINT_STATE_TYPE]
        if topic is None:
            named = sorted({t for t in candidates if t.rstrip('/').split('/')[-1] == 'joint_states'})
            if len(named) != 1:
                raise ValueError(f'{path}: expected one sensor_msgs/JointState topic named joint_states, '
                                 f'found {named or sorted(set(candidates))}; choose one with --topic')
            topic = named[0]
        elif topic not in candidates:
            raise ValueError(f'{path}: no sensor_msgs/JointState topic {topic!r} '
                             f'(have {sorted(set(candidates))})')
        index = None
        times, pos, vel = [], [], []
        has_vel = True
        for _, _, message, msg in reader.iter_decoded_messages(topics=[topic]):
            names = list(msg.name)
            if index is None or len(names) != len(index[1]) or names != index[1]:
                lookup = {n: i for i, n in enumerate(names)}
                missing = [n for n in joint_names if n not in lookup]
                if missing:
                    raise ValueError(f'{path}: {topic}: message lacks joints {missing}')
                index = ([lookup[n] for n in joint_names], names)
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            times.append(stamp if stamp > 0 else message.log_time * 1e-9)
            position = np.asarray(msg.position, dtype=float)
            pos.append(position[index[0]])
            velocity = np.asarray(msg.velocity, dtype=float)
            if velocity.shape == position.shape and has_vel:
                vel.append(velocity[index[0]])
            else:
                has_vel = False
    if len(times) < 2:
        raise ValueError(f'{path}: {topic}: needs at least two joint_states messages, found {len(times)}')
    return JointTrajectory(times, pos, vel if has_vel else None)


def write_joint_mcap(path, joint_names, t_s, positions_rad, velocities_rad_s=None, topic='/joint_states'):
    """Write sensor_msgs/JointState messages to an .mcap file (ros2 profile, cdr encoding)."""
    from mcap_ros2.writer import Writer

    with Path(path).open('wb') as f:
        writer = Writer(f)
        schema = writer.register_msgdef(JOINT_STATE_TYPE, JOINT_STATE_MSGDEF)
        for k, (t, q) in enumerate(zip(t_s, positions_rad)):
            sec = int(np.floor(t))
            msg = {'header': {'stamp': {'sec': sec, 'nanosec': int(round((t - sec) * 1e9)) % 1_000_000_000},
                              'frame_id': ''},
                   'name': list(joint_names), 'position': [float(v) for v in q],
                   'velocity': [] if velocities_rad_s is None else [float(v) for v in velocities_rad_s[k]],
                   'effort': []}
            writer.write_message(topic, schema, msg, log_time=int(t * 1e9), publish_time=int(t * 1e9))
        writer.finish()


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
            w.writerow([f'{t:.9g}', *(f'{v:.12g}' for v in p)])


def read_pose_csv(path):
    """Read a pose CSV: returns (t_s (T,), poses (T, 7) x, y, z, qx, qy, qz, qw)."""
    path = Path(path)
    with path.open(newline='') as f:
        rows = list(csv.reader(f))
    if not rows or tuple(h.strip() for h in rows[0]) != POSE_COLUMNS:
        raise ValueError(f'{path}: line 1: expected header {",".join(POSE_COLUMNS)}')
    data = np.array([[float(v) for v in r] for r in rows[1:] if r], dtype=float).reshape(-1, 8)
    return data[:, 0], data[:, 1:]
