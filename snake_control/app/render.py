"""Rendered video of a snake: a joint trajectory played through the MuJoCo world, drawn by its offscreen
renderer with a camera that follows the body, written as GIF (pillow) or MP4 (imageio, where installed).

The joint angles (a gait, a joint-trajectory CSV or a recording's joint_states) become the position
actuators' goals, so the body moves as the physics makes it move. Offscreen GL: MUJOCO_GL as set, else EGL
(headless GPUs and Mesa); OSMesa (software) with MUJOCO_GL=osmesa. Where GL cannot start, NoGL says so in
one line.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

class NoGL(RuntimeError):
    """No offscreen OpenGL on this machine."""


def make_renderer(model, height: int, width: int):
    """A mujoco.Renderer on the GL backend MUJOCO_GL names (set_gl_backend sets EGL before mujoco's first
    import); NoGL with one line where it cannot start."""
    import mujoco

    try:
        return mujoco.Renderer(model, height=height, width=width)
    except Exception as exc:   # each backend fails in its own way (ImportError, RuntimeError, mujoco.FatalError)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NoGL(f'no offscreen OpenGL with MUJOCO_GL={os.environ.get("MUJOCO_GL", "")} ({first}); try '
                   f'MUJOCO_GL=osmesa (libosmesa6) or MUJOCO_GL=egl (libegl1)') from None


def set_gl_backend() -> str:
    """MUJOCO_GL for offscreen rendering: the user's choice, else EGL (headless). Call before mujoco is
    first imported."""
    return os.environ.setdefault('MUJOCO_GL', 'egl')


def follow_camera(centre_m, distance_m: float, azimuth_deg: float = 90.0, elevation_deg: float = -35.0):
    """A free mujoco.MjvCamera looking at centre_m (3,) from distance_m."""
    import mujoco

    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = centre_m
    cam.distance, cam.azimuth, cam.elevation = float(distance_m), float(azimuth_deg), float(elevation_deg)
    return cam


def render_trajectory(robot, t_s, positions_rad, path, fps: float = 20.0, size=(360, 480),
                      speed: float = 1.0, log=print) -> dict:
    """Play positions_rad (T, n joints) at times t_s (T,) through a SnakeWorld and write the frames to path
    (.gif or .mp4). Returns {'frames': k, 'path': Path, 'body_path_m': (k, 2) array of the followed centre}."""
    from snake_control.physics.world import SnakeWorld

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in ('.gif', '.mp4'):
        raise ValueError(f'{path}: expected a .gif or .mp4 file name')
    t_s = np.asarray(t_s, dtype=float) - float(t_s[0])
    q = np.asarray(positions_rad, dtype=float)
    world = SnakeWorld(robot)
    world.reset(q[0])
    height, width = size
    renderer = make_renderer(world.model, height, width)
    span_m = robot.n_links * robot.link_length_m
    frames, centres = [], []
    frame_dt = speed / fps
    t_frame = 0.0
    centre = world.link_poses()[:, :3, 3].mean(axis=0)
    while t_frame <= t_s[-1] + 1e-9:
        goal = np.array([np.interp(t_frame, t_s, q[:, j]) for j in range(q.shape[1])])
        world.set_goals(goal)
        target = t_frame
        steps = max(0, int(round((target - world.time_s) / world.timestep_s)))
        if steps:
            world.step(steps)
        # Follow the body smoothly: the camera eases toward the links' mean, so undulation does not shake it.
        centre = 0.8 * centre + 0.2 * world.link_poses()[:, :3, 3].mean(axis=0)
        centres.append(centre[:2].copy())
        renderer.update_scene(world.data, camera=follow_camera(centre, 1.1 * span_m))
        frames.append(renderer.render().copy())
        t_frame += frame_dt
    renderer.close()
    write_frames(frames, path, fps)
    return {'frames': len(frames), 'path': path, 'body_path_m': np.array(centres), 'images': frames}


def write_frames(frames, path, fps: float) -> None:
    """RGB frames (h, w, 3) uint8 to a GIF (pillow) or MP4 (imageio with its ffmpeg plugin)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == '.gif':
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(round(1000 / fps)), loop=0)
        return
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise ValueError(f'{path}: MP4 needs imageio and imageio-ffmpeg (pip install imageio imageio-ffmpeg); '
                         f'a .gif needs only pillow') from None
    imageio.mimwrite(path, frames, fps=fps)
