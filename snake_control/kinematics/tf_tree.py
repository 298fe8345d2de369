"""The robot's TF tree as plain data: (parent frame, child frame, 4x4 transform) triples (pure numpy).

What robot_state_publisher would put on /tf, computed from the joint angles and the robot's forward
kinematics (snake_control.kinematics.chain, the URDF's joint frames), so the package can publish and
record the whole tree odom -> link_0 -> ... -> link_n without a ROS installation.

Example: a two-joint planar chain of 1 m links, straight: link_1 sits half a link ahead of link_0's centre.
    >>> from types import SimpleNamespace
    >>> robot = SimpleNamespace(n_joints=2, axis_vectors=np.array([[0, 0, 1.0]] * 2), link_lengths_m=np.ones(3))
    >>> [(p, c, float(t[0, 3])) for p, c, t in link_transforms(robot, np.zeros(2))]
    [('link_0', 'link_1', 0.5), ('link_1', 'link_2', 1.0)]
"""
from __future__ import annotations

import numpy as np

from snake_control.kinematics.chain import chain_frames, urdf_joint_transforms, urdf_link_frames
from snake_control.kinematics.lie import quaternion_from_matrix, quaternions_from_matrices


def link_name(k: int, prefix: str = '') -> str:
    """The URDF's name of link k (0 = tail), with an optional frame prefix ('truth/')."""
    return f'{prefix}link_{k}'


def link_transforms(robot, angles_rad, prefix: str = '') -> list[tuple[str, str, np.ndarray]]:
    """Parent -> child transforms of every joint of the robot at angles_rad (n_joints,), as
    robot_state_publisher computes them from the URDF."""
    transforms = urdf_joint_transforms(np.asarray(angles_rad, dtype=float), robot.axis_vectors,
                                       robot.link_lengths_m)
    return [(link_name(j, prefix), link_name(j + 1, prefix), transforms[j]) for j in range(len(transforms))]


def urdf_frames_from_centres(centre_poses, link_lengths_m) -> np.ndarray:
    """(n_links, 4, 4) URDF link frames from link-centre poses (n_links, 4, 4) in any fixed frame: link 0
    stays at its centre, every other link moves back half its length to its joint (x toward the head)."""
    return urdf_link_frames(np.asarray(centre_poses, dtype=float), link_lengths_m)


def centres_from_urdf_frames(urdf_frames_, link_lengths_m) -> np.ndarray:
    """The inverse of urdf_frames_from_centres: link-centre poses (..., n_links, 4, 4) from URDF link frames
    (..., n_links, 4, 4), every link but link 0 moved forward half its length along its x axis (m)."""
    frames = np.array(urdf_frames_, dtype=float)
    half = 0.5 * np.broadcast_to(np.asarray(link_lengths_m, dtype=float), frames.shape[-3:-2])[1:, None]
    frames[..., 1:, :3, 3] += frames[..., 1:, :3, 0] * half
    return frames


def urdf_frames(robot, angles_rad) -> np.ndarray:
    """(n_links, 4, 4) URDF link frames in link_0's frame at angles_rad: what a complete tree's chain
    link_0 -> link_k composes to."""
    return urdf_link_frames(chain_frames(np.asarray(angles_rad, dtype=float), robot.axis_vectors,
                                         robot.link_lengths_m), robot.link_lengths_m)


def xyz_quat(transform) -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
    """Translation (m) and unit quaternion (x, y, z, w) of a 4x4 transform, as TF carries them."""
    t = np.asarray(transform, dtype=float)
    q = quaternion_from_matrix(t[:3, :3])
    return tuple(float(v) for v in t[:3, 3]), tuple(float(v) for v in q)


def xyz_quats(transforms) -> np.ndarray:
    """(n, 7) rows (x, y, z, qx, qy, qz, qw) of n 4x4 transforms (n, 4, 4): xyz_quat of each, at once."""
    t = np.asarray(transforms, dtype=float)
    return np.concatenate([t[:, :3, 3], quaternions_from_matrices(t[:, :3, :3])], axis=1)
