"""snake render: MuJoCo's offscreen renderer draws the robot moving, with the estimated and true paths on
the floor, to GIF or MP4 (skipped where no GL exists).

The command runs in a process of its own, as a user runs it: MuJoCo picks its GL backend (MUJOCO_GL) when
it is first imported, which in this test process other tests have already done.
"""
import subprocess
import sys

import numpy as np
import pytest

from snake_control.app.render import ESTIMATE_RGBA, TRUTH_RGBA


def render(tmp_path, name, *extra):
    out = tmp_path / name
    run = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'render', '--robot', 'wheeled_8', '--gait',
                          'lateral_undulation', '--duration', '1.5', '--fps', '10', '--size', '96x128',
                          '--output', str(out), *extra], capture_output=True, text=True, timeout=300)
    if run.returncode != 0 and 'OpenGL' in run.stdout + run.stderr:
        pytest.skip((run.stdout + run.stderr).strip().splitlines()[-1])
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def near(frames, rgba, tol=60):
    """Pixels within tol (per channel) of a path colour."""
    target = np.round(255 * np.array(rgba[:3]))
    return np.all(np.abs(frames - target) < tol, axis=-1)


@pytest.mark.slow
def test_frames_exist_differ_in_time_show_the_robot_and_its_paths(tmp_path):
    from PIL import Image, ImageSequence

    gif = Image.open(render(tmp_path, 'r.gif'))
    assert gif.size == (128, 96)
    frames = np.array([np.asarray(f.convert('RGB'), dtype=float) for f in ImageSequence.Iterator(gif)])
    assert len(frames) >= 15
    # Not blank: the floor's checker and the robot give contrast in every frame.
    assert all(f.std() > 10.0 for f in frames)
    # The robot's blue body is in view (the floor is grey): blue-dominant pixels in every frame.
    blue = (frames[..., 2] > frames[..., 0] + 40) & (frames[..., 2] > frames[..., 1] + 20)
    assert all(b.sum() > 30 for b in blue)
    # Frames differ in time: the body undulates.
    assert np.abs(frames[-1] - frames[0]).mean() > 2.0
    assert len({f.tobytes() for f in frames.astype(np.uint8)}) > 0.8 * len(frames)
    # The paths are drawn on the floor as the body moves: none at the start, both at the end (this gait's
    # wide default wave skids the wheels, so the estimate parts from the truth and both show).
    estimate, truth = near(frames, ESTIMATE_RGBA), near(frames, TRUTH_RGBA)
    assert estimate[0].sum() + truth[0].sum() < 5
    assert estimate[-1].sum() > 20 and truth[-1].sum() > 20
    assert estimate[-1].sum() > estimate[len(frames) // 3].sum()      # the path grows
    # On the floor, below the body: path pixels in the lower part of the frame where the body came from.
    rows = np.nonzero(estimate[-1] | truth[-1])[0]
    assert rows.max() > frames.shape[1] // 2


@pytest.mark.slow
def test_mp4_has_the_frames(tmp_path):
    import imageio.v3 as iio

    # Sides that are not multiples of 16 stay as asked (H.264 needs them even only).
    frames = iio.imread(render(tmp_path, 'r.mp4', '--size', '90x130'), index=None)
    assert frames.shape[0] >= 15 and frames.shape[1:3] == (90, 130)
    assert frames[-1].std() > 10.0
    assert np.abs(frames[-1].astype(float) - frames[0]).mean() > 2.0


def test_paths_are_thinned_to_the_scene():
    """A path longer than the scene's free geoms is drawn whole, thinned, never past the scene's end."""
    import mujoco

    from snake_control.app.render import add_path
    model = mujoco.MjModel.from_xml_string('<mujoco><worldbody/></mujoco>')
    scene = mujoco.MjvScene(model, maxgeom=50)
    xy = np.column_stack([np.linspace(0, 1, 500), np.zeros(500)])
    assert add_path(scene, xy, 2.0, ESTIMATE_RGBA, 0.01) == 50
    assert scene.ngeom == 50
    ends = np.array([scene.geoms[k].pos[0] for k in (0, 49)])
    assert ends[0] < 0.05 and ends[1] > 0.95
    assert add_path(scene, xy, 2.0, TRUTH_RGBA, 0.01) == 0


@pytest.mark.parametrize('argv, message', [
    (['--robot', 'wheeled_8', '--gait', 'lateral_undulation', '--output', 'r.avi'], 'r.avi'),
    (['--robot', 'wheeled_8', '--output', 'r.gif'], '--gait or --input'),
    (['--update-docs', '--robot', 'wheeled_8'], '--update-docs'),
    (['--robot', 'wheeled_8', '--gait', 'lateral_undulation', '--output', 'r.gif', '--speed', '0'], '--speed'),
])
def test_bad_arguments_are_refused(tmp_path, capsys, monkeypatch, argv, message):
    from snake_control.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(['render', *argv]) == 2
    assert message in capsys.readouterr().err
