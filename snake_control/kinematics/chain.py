"""Forward kinematics and Jacobians of serial snake chains (pure numpy).

A chain has n joints and n + 1 links numbered 0..n from tail to head. Link k has length l_k; joint j
sits between link j and link j + 1, at the head end of link j. Each link frame sits at the link's
centre with x along the link toward the head. Joint j turns link j + 1 relative to link j about its
axis (a unit vector in link j's frame: z for yaw, y for pitch) by alpha_j, counter-clockwise positive
(docs/kinematics.md: alpha_i = theta_{i+1} - theta_i for a planar chain).

Everything is expressed in the frame of link 0 (the tail) unless re-expressed with ``relative_to`` /
``planar_relative_to``.

Example: a planar chain of three 1 m links bent 90 degrees at the first joint:
    >>> c, h = planar_chain(np.array([np.pi / 2, 0.0]), np.ones(3))
    >>> c[2]    # head link centre: joint 0 at (0.5, 0), joint 1 at (0.5, 1), then half a link on
    array([0.5, 1.5])
"""
from __future__ import annotations

import numpy as np


def _lengths(link_lengths_m, n_links: int) -> np.ndarray:
    lengths = np.asarray(link_lengths_m, dtype=float)
    if lengths.ndim == 0:
        lengths = np.full(n_links, float(lengths))
    if lengths.shape != (n_links,):
        raise ValueError(
            f'link_lengths_m must have {n_links} entries (joints + 1), got shape {lengths.shape}')
    if np.any(lengths <= 0) or not np.all(np.isfinite(lengths)):
        raise ValueError('link_lengths_m must be positive and finite')
    return lengths


# --- planar chains ------------------------------------------------------------------------------

def planar_chain(angles_rad, link_lengths_m, base_heading_rad: float = 0.0):
    """Link centres and headings of a planar chain, in the tail link's frame.

    Parameters: angles_rad (..., n) joint angles; link_lengths_m (n + 1,) or a scalar;
    base_heading_rad: heading of link 0 (0 puts the tail link along x).
    Returns: centres_m (..., n + 1, 2), headings_rad (..., n + 1). Leading batch axes broadcast.
    """
    angles = np.asarray(angles_rad, dtype=float)
    if angles.ndim < 1:
        raise ValueError('angles_rad must have at least one axis (the joints)')
    n = angles.shape[-1]
    lengths = _lengths(link_lengths_m, n + 1)
    headings = base_heading_rad + np.concatenate(
        [np.zeros(angles.shape[:-1] + (1,)), np.cumsum(angles, axis=-1)], axis=-1)
    half = 0.5 * lengths[:, None] * np.stack([np.cos(headings), np.sin(headings)], axis=-1)  # (..., n + 1, 2)
    steps = half[..., :-1, :] + half[..., 1:, :]      # centre k -> centre k + 1
    centres = np.concatenate([np.zeros(angles.shape[:-1] + (1, 2)), np.cumsum(steps, axis=-2)], axis=-2)
    return centres, headings


def planar_joint_positions(angles_rad, link_lengths_m, base_heading_rad: float = 0.0) -> np.ndarray:
    """(..., n, 2) joint positions in the tail link's frame."""
    angles = np.asarray(angles_rad, dtype=float)
    lengths = _lengths(link_lengths_m, angles.shape[-1] + 1)
    centres, headings = planar_chain(angles, lengths, base_heading_rad)
    tip = 0.5 * lengths[:-1, None] * np.stack([np.cos(headings[..., :-1]), np.sin(headings[..., :-1])], -1)
    return centres[..., :-1, :] + tip


def planar_jacobians(angles_rad, link_lengths_m, base_heading_rad: float = 0.0):
    """Derivatives of link centres and headings with respect to joint angles (tail frame fixed).

    Returns dcentres (n + 1, 2, n) with dcentres[k, :, j] = d centre_k / d alpha_j (m/rad), and
    dheadings (n + 1, n) (dimensionless). A joint moves only the links on its head side.
    """
    angles = np.asarray(angles_rad, dtype=float)
    if angles.ndim != 1:
        raise ValueError('planar_jacobians takes one shape: angles_rad must have shape (n,)')
    n = angles.shape[0]
    centres, _ = planar_chain(angles, link_lengths_m, base_heading_rad)
    joints = planar_joint_positions(angles, link_lengths_m, base_heading_rad)
    downstream = np.arange(n + 1)[:, None] > np.arange(n)[None, :]            # (n + 1, n)
    rel = centres[:, None, :] - joints[None, :, :]                              # (n + 1, n, 2)
    dc = np.stack([-rel[..., 1], rel[..., 0]], axis=1) * downstream[:, None, :]  # z x rel
    return dc, downstream.astype(float)


def planar_relative_to(centres_m, headings_rad, link: int):
    """Re-express planar link centres/headings (..., n + 1, ·) in the frame of link ``link``."""
    centres = np.asarray(centres_m, dtype=float)
    headings = np.asarray(headings_rad, dtype=float)
    origin = centres[..., link:link + 1, :]
    h0 = headings[..., link:link + 1]
    c, s = np.cos(h0), np.sin(h0)
    d = centres - origin
    x = c * d[..., 0] + s * d[..., 1]
    y = -s * d[..., 0] + c * d[..., 1]
    return np.stack([x, y], axis=-1), headings - h0


# --- 3D chains (pitch-yaw, or any fixed axes) ---------------------------------------------------

def joint_rotations(angles_rad, axes) -> np.ndarray:
    """(n, 3, 3) rotation of every joint, exp(angle_j * axis_j) for unit axes (Rodrigues), all at once."""
    angles = np.asarray(angles_rad, dtype=float)
    axes = np.asarray(axes, dtype=float)
    k = np.zeros((angles.shape[0], 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -axes[:, 2], axes[:, 1], -axes[:, 0]
    k -= k.transpose(0, 2, 1)
    s, c = np.sin(angles)[:, None, None], np.cos(angles)[:, None, None]
    return np.eye(3) + s * k + (1.0 - c) * (k @ k)


def chain_frames(angles_rad, axes, link_lengths_m) -> np.ndarray:
    """4x4 frames of every link centre in the tail link's frame.

    Parameters: angles_rad (n,); axes (n, 3) unit joint axes in the link frame before each joint;
    link_lengths_m (n + 1,) or a scalar. Returns (n + 1, 4, 4).
    """
    angles = np.asarray(angles_rad, dtype=float)
    axes = np.asarray(axes, dtype=float)
    if angles.ndim != 1 or axes.shape != (angles.shape[0], 3):
        raise ValueError(f'angles_rad must be (n,) and axes (n, 3), got {angles.shape} and {axes.shape}')
    n = angles.shape[0]
    lengths = _lengths(link_lengths_m, n + 1)
    # Link j's centre -> link j+1's centre: half a link to the joint, the joint's rotation, half the next
    # link. Built for every joint at once; only the chaining is sequential.
    rel = np.zeros((n, 4, 4))
    rel[:, :3, :3] = rot = joint_rotations(angles, axes)
    rel[:, 0, 3] = 0.5 * lengths[:-1]
    rel[:, :3, 3] += rot[:, :, 0] * (0.5 * lengths[1:, None])
    rel[:, 3, 3] = 1.0
    frames = np.empty((n + 1, 4, 4))
    frames[0] = np.eye(4)
    for j in range(n):
        np.matmul(frames[j], rel[j], out=frames[j + 1])
    return frames


def chain_joint_frames(frames, link_lengths_m) -> np.ndarray:
    """(n, 4, 4) frames at each joint, oriented like the link on the joint's head side.

    This is where a URDF puts the child link's frame.
    """
    frames = np.asarray(frames, dtype=float)
    lengths = _lengths(link_lengths_m, frames.shape[0])
    out = frames[1:].copy()
    out[:, :3, 3] -= out[:, :3, 0] * (0.5 * lengths[1:, None])
    return out


def chain_jacobian(angles_rad, axes, link_lengths_m):
    """Linear and angular Jacobians of every link centre, tail frame fixed.

    Returns (jv, jw), each (n + 1, 3, n): jv[k, :, j] = d centre_k / d alpha_j (m/rad),
    jw[k, :, j] = angular velocity of link k per unit alpha_dot_j.
    """
    angles = np.asarray(angles_rad, dtype=float)
    axes = np.asarray(axes, dtype=float)
    frames = chain_frames(angles, axes, link_lengths_m)
    lengths = _lengths(link_lengths_m, frames.shape[0])
    n = angles.shape[0]
    joints = frames[:-1, :3, 3] + frames[:-1, :3, 0] * (0.5 * lengths[:-1, None])      # (n, 3)
    world_axes = np.einsum('jab,jb->ja', frames[:-1, :3, :3], axes)                     # (n, 3)
    downstream = (np.arange(n + 1)[:, None] > np.arange(n)[None, :]).astype(float)      # (n + 1, n)
    rel = frames[:, None, :3, 3] - joints[None, :, :]                                   # (n + 1, n, 3)
    jv = np.cross(world_axes[None, :, :], rel) * downstream[..., None]
    jw = world_axes[None, :, :] * downstream[..., None]
    return jv.transpose(0, 2, 1), jw.transpose(0, 2, 1)


def relative_to(frames, link: int) -> np.ndarray:
    """Re-express (n + 1, 4, 4) link frames in the frame of link ``link``."""
    frames = np.asarray(frames, dtype=float)
    base = frames[link]
    inv = np.eye(4)
    inv[:3, :3] = base[:3, :3].T
    inv[:3, 3] = -base[:3, :3].T @ base[:3, 3]
    return np.einsum('ab,kbc->kac', inv, frames)


def robot_frames(robot, angles_rad) -> np.ndarray:
    """Link-centre frames of a Robot (snake_control.robot) at the given joint angles."""
    return chain_frames(angles_rad, robot.axis_vectors, robot.link_lengths_m)


def urdf_link_frames(frames, link_lengths_m) -> np.ndarray:
    """(n + 1, 4, 4) frames of the URDF's links (snake_control.description) in link 0's frame: link_0 at
    its centre, every other link at its joint (chain_joint_frames), x toward the head."""
    frames = np.asarray(frames, dtype=float)
    return np.concatenate([frames[:1], chain_joint_frames(frames, link_lengths_m)], axis=0)


def urdf_joint_transforms(angles_rad, axes, link_lengths_m) -> np.ndarray:
    """(n, 4, 4) transforms parent link -> child link of every URDF joint (link_j -> link_{j+1}), what
    robot_state_publisher puts on /tf for these joint angles (rad): from link_0's centre, or link_j's
    joint, along the link to joint j, then the joint's rotation."""
    angles = np.asarray(angles_rad, dtype=float)
    n = angles.shape[0]
    lengths = _lengths(link_lengths_m, n + 1)
    out = np.zeros((n, 4, 4))
    out[:, :3, :3] = joint_rotations(angles, axes)
    out[:, 0, 3] = lengths[:-1]
    out[0, 0, 3] = 0.5 * lengths[0]
    out[:, 3, 3] = 1.0
    return out