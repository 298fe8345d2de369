"""Rendered video of a snake: a joint trajectory played through the MuJoCo world, drawn by its offscreen
renderer with a camera that follows the body, written as GIF (pillow) or MP4 (imageio with imageio-ffmpeg).

The joint angles (a gait, a joint-trajectory CSV or a recording's joint_states) become the position
actuators' goals, so the body moves as the physics makes it move. The estimator runs on the joint angles
the world measures, and its path and the true path are drawn on the floor. Offscreen GL: MUJOCO_GL as set, else EGL
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


# Paths drawn on the floor: colours apart from the robots' (blue wheeled links, orange and dark modules) and
# the grey floor. The estimate is drawn a centimetre above the truth: where the two agree it covers it,
# where they part both show.
ESTIMATE_RGBA = (0.95, 0.1, 0.85, 1.0)     # magenta: the package's estimator on the measured joint angles
TRUTH_RGBA = (0.1, 0.85, 0.2, 1.0)         # green: MuJoCo's pose of the same body frame
CONTROL_RATE_HZ = 100.0                    # goals and estimator updates, as the gait and estimator nodes run
GIF_COLOURS = 32
PATH_STEP_M = 0.005                        # a path point every this much travel (fewer geoms, same line)


def render_trajectory(robot, t_s, positions_rad, path, fps: float = 20.0, size=(360, 480),
                      speed: float = 1.0, log=print, draw_paths: bool = True, settle_s: float = 0.5) -> dict:
    """Play positions_rad (T, n joints) at times t_s (T,) through a SnakeWorld and write the frames to path
    (.gif or .mp4).

    The goals go to the position servos at CONTROL_RATE_HZ; at the same rate the estimator
    (snake_control.estimation, started at the true pose) reads the joint angles the world measures, and
    its path (magenta) and the true path of the same body frame (green) are drawn on the floor. The
    camera eases after the links' mean. speed > 1 plays faster than real time (fewer frames). The body is
    first left settle_s holding the first shape (it is put in the world just above the floor), unrecorded.

    Returns {'frames': k, 'path': Path, 'images': [k (h, w, 3) uint8], 'body_path_m': (k, 2) camera
    centres, 'estimated_xy_m' / 'true_xy_m': (m, 2) the drawn paths}.
    """
    import mujoco

    from snake_control.estimation.estimator import BodyFrameTracker, Estimator
    from snake_control.kinematics.lie import xyyaw_from_se3
    from snake_control.physics.mjcf import matching_axial_weight
    from snake_control.physics.world import SnakeWorld

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in ('.gif', '.mp4'):
        raise ValueError(f'{path}: expected a .gif or .mp4 file name')
    if not (np.isfinite(fps) and fps > 0 and np.isfinite(speed) and speed > 0):
        raise ValueError(f'fps and speed: expected values > 0, got {fps!r} and {speed!r}')
    t_s = np.asarray(t_s, dtype=float) - float(t_s[0])
    q = np.asarray(positions_rad, dtype=float)
    if q.ndim != 2 or q.shape != (len(t_s), robot.n_joints) or len(t_s) < 2:
        raise ValueError(f'positions_rad: expected shape ({len(t_s)} >= 2, {robot.n_joints}), got {q.shape}')
    world = SnakeWorld(robot)
    world.reset(q[0])
    world.set_goals(q[0])
    world.run(settle_s)
    t_start = world.time_s      # trajectory time 0
    height, width = size
    renderer = make_renderer(world.model, height, width)
    span_m = robot.n_links * robot.link_length_m
    line_px = max(2.0, height / 80.0)

    tracker = BodyFrameTracker(robot)
    truth0 = tracker(world.link_poses())
    options = {'axial_weight': matching_axial_weight()} if robot.kind == 'pitch_yaw' else {}
    initial = xyyaw_from_se3(truth0) if robot.kind == 'planar' else truth0
    estimator = Estimator(robot, initial_pose=initial, **options)
    estimator.update(0.0, world.joint_positions_rad())
    est_xy, true_xy = [truth0[:2, 3].copy()], [truth0[:2, 3].copy()]

    steps = max(1, int(round(1.0 / CONTROL_RATE_HZ / world.timestep_s)))
    tick_s = steps * world.timestep_s
    frames, centres = [], []
    centre = world.link_poses()[:, :3, 3].mean(axis=0)
    distance = 1.1 * span_m
    frame_dt = speed / fps
    t_frame = 0.0
    while t_frame <= t_s[-1] + 1e-9:
        while world.time_s - t_start + tick_s <= t_frame + 1e-9:
            world.set_goals(_row_at(t_s, q, world.time_s - t_start))
            world.step(steps)
            truth = tracker(world.link_poses())
            state = estimator.update(world.time_s - t_start, world.joint_positions_rad())
            _extend(true_xy, truth[:2, 3])
            _extend(est_xy, state.pose[:2, 3])
        # Follow the body smoothly: the camera eases toward the links' mean, so undulation does not shake it.
        link_centres = world.link_poses()[:, :3, 3]
        centre = 0.8 * centre + 0.2 * link_centres.mean(axis=0)
        # Far enough to frame the body as it lies (a coiled helix needs far less than its length).
        reach = float(np.max(np.linalg.norm(link_centres - centre, axis=1)))
        distance = 0.8 * distance + 0.2 * min(max(3.0 * reach, 0.5), 1.1 * span_m)
        centres.append(centre[:2].copy())
        renderer.update_scene(world.data, camera=follow_camera(centre, distance))
        # No shadow pass: in software GL (llvmpipe, what EGL gives a headless machine) it was 4/5 of each
        # frame's time; the floor's reflection stays, so the body still reads as lying on it.
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        if draw_paths:
            add_path(renderer.scene, true_xy, 2.0 * line_px, TRUTH_RGBA, 0.002)
            add_path(renderer.scene, est_xy, line_px, ESTIMATE_RGBA, 0.012)
        frames.append(renderer.render().copy())
        t_frame += frame_dt
    renderer.close()
    write_frames(frames, path, fps)
    return {'frames': len(frames), 'path': path, 'body_path_m': np.array(centres), 'images': frames,
            'estimated_xy_m': np.array(est_xy), 'true_xy_m': np.array(true_xy)}


def _row_at(t_s, q, t):
    """q (T, n) linearly interpolated at time t (held at the ends)."""
    k = int(np.clip(np.searchsorted(t_s, t, side='right'), 1, len(t_s) - 1))
    w = float(np.clip((t - t_s[k - 1]) / max(t_s[k] - t_s[k - 1], 1e-12), 0.0, 1.0))
    return (1.0 - w) * q[k - 1] + w * q[k]


def _extend(points: list, xy) -> None:
    """Append xy to a path once it is PATH_STEP_M from the last point (the line looks the same)."""
    if np.hypot(*(np.asarray(xy) - points[-1])) >= PATH_STEP_M:
        points.append(np.array(xy, dtype=float))


def add_path(scene, xy_m, width_px: float, rgba, z_m: float) -> int:
    """Draw a floor path (k, 2) into a mujoco.MjvScene as line segments just above the floor (after
    update_scene, before render). Lines, not capsules: a 500-segment capsule path cost 4x the whole
    scene's render time in software GL, lines almost nothing. Long paths are thinned to the scene's free
    geoms. Returns the number of segments."""
    import mujoco

    pts = np.asarray(xy_m, dtype=float)
    free = scene.maxgeom - scene.ngeom
    if len(pts) < 2 or free < 1:
        return 0
    if len(pts) - 1 > free:
        pts = pts[np.linspace(0, len(pts) - 1, free + 1).round().astype(int)]
    rgba = np.asarray(rgba, dtype=np.float32)
    for a, b in zip(pts[:-1], pts[1:]):
        geom = scene.geoms[scene.ngeom]
        mujoco.mjv_initGeom(geom, mujoco.mjtGeom.mjGEOM_LINE, np.zeros(3), np.zeros(3), np.eye(3).ravel(),
                            rgba)
        mujoco.mjv_connector(geom, mujoco.mjtGeom.mjGEOM_LINE, width_px, np.array([a[0], a[1], z_m]),
                             np.array([b[0], b[1], z_m]))
        geom.emission = 1.0        # its own colour, not shaded darker by the light's angle
        scene.ngeom += 1
    return len(pts) - 1


def write_frames(frames, path, fps: float) -> None:
    """RGB frames (h, w, 3) uint8 to a GIF (pillow) or MP4 (imageio with its ffmpeg plugin)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == '.gif':
        from PIL import Image

        # One palette for the whole clip, without dithering: the floor's smooth shading dithered frame by
        # frame made every pixel change and a 4 s loop over 1 MB; this keeps the docs' loops small.
        # The palette comes from the first, middle and last frames together: the paths on the floor grow
        # from nothing, so the first frame alone has no colour for them.
        # Bands of the path colours make sure the palette keeps them however few their pixels.
        bands = [np.full((16,) + frames[0].shape[1:], np.round(255 * np.array(c[:3])), dtype=np.uint8)
                 for c in (ESTIMATE_RGBA, TRUTH_RGBA)]
        sample = Image.fromarray(np.vstack([frames[0], frames[len(frames) // 2], frames[-1], *bands]))
        palette = sample.quantize(colors=GIF_COLOURS, dither=Image.Dither.NONE)
        images = [Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(round(1000 / fps)), loop=0,
                       optimize=True)
        return
    try:
        import imageio.v2 as imageio
    except ImportError:
        raise ValueError(f'{path}: MP4 needs imageio and imageio-ffmpeg (pip install imageio imageio-ffmpeg); '
                         f'a .gif needs only pillow') from None
    # H.264 in yuv420p needs even sides only; imageio's default 16-pixel blocks would resize 360x480 frames.
    imageio.mimwrite(path, frames, fps=fps, macro_block_size=2)


# The README's gait loops (`snake render --update-docs`): robot, gait, parameters, speed (None: the gait's
# default). Wheeled lateral undulation takes `snake validate`'s narrower wave: the default one skids.
DOC_LOOPS = (
    ('pitch_yaw_32', 'serpentine', {}, None),
    ('pitch_yaw_32', 'rolling', {}, None),
    ('pitch_yaw_32', 'helix_rolling', {}, None),
    ('pitch_yaw_32', 's_crawler', {}, None),
    ('pitch_yaw_32', 'aeh_sidewinding', {}, None),
    ('wheeled_8', 'lateral_undulation', {'A_yaw': 0.4}, 0.2),
)
DOC_LOOP = {'warmup_s': 2.0, 'seconds': 4.0, 'fps': 10.0, 'size': (156, 208)}
DOC_LOOP_MAX_BYTES = 400_000


def render_gait(robot, gait: str, path, seconds: float, params=None, speed=None, warmup_s: float = 0.0,
                fps: float = 20.0, size=(360, 480), log=print) -> dict:
    """A gait of the catalogue from phase 0, its first warmup_s (the blend in from a straight body) left
    out, rendered for seconds to path (see render_trajectory)."""
    from snake_control.gaits import catalog
    from snake_control.gaits.report import run_gait

    catalog.check_gait_fits(catalog.gait_spec(gait), robot)
    res = run_gait(robot, gait, params or None, warmup_s + seconds, CONTROL_RATE_HZ, speed=speed)
    keep = res.t_s >= warmup_s - 1e-9
    return render_trajectory(robot, res.t_s[keep], res.positions_rad[keep], path, fps=fps, size=size, log=log)


def update_doc_loops(docs_dir, log=print) -> list:
    """Render DOC_LOOPS into docs_dir/gait_<gait>.gif; ValueError if one comes out over DOC_LOOP_MAX_BYTES.
    Returns the paths."""
    from snake_control.robot import load_robot

    out = []
    for robot_name, gait, params, speed in DOC_LOOPS:
        path = Path(docs_dir) / f'gait_{gait}.gif'
        res = render_gait(load_robot(robot_name), gait, path, DOC_LOOP['seconds'], params, speed,
                          DOC_LOOP['warmup_s'], DOC_LOOP['fps'], DOC_LOOP['size'], log)
        size = path.stat().st_size
        log(f'wrote {path}: {robot_name} {gait}, {res["frames"]} frames, {size / 1000:.0f} kB')
        if size > DOC_LOOP_MAX_BYTES:
            raise ValueError(f'{path}: {size / 1000:.0f} kB, over the {DOC_LOOP_MAX_BYTES / 1000:.0f} kB a '
                             f'README picture may take; make DOC_LOOP smaller')
        out.append(path)
    return out
