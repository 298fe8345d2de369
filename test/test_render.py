"""snake render: MuJoCo's offscreen renderer draws the robot moving (skipped where no GL exists).

The command runs in a process of its own, as a user runs it: MuJoCo picks its GL backend (MUJOCO_GL) when
it is first imported, which in this test process other tests have already done.
"""
import subprocess
import sys

import numpy as np
import pytest


@pytest.mark.slow
def test_frames_exist_differ_in_time_and_show_the_robot(tmp_path):
    from PIL import Image, ImageSequence

    gif_path = tmp_path / 'r.gif'
    run = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'render', '--robot', 'wheeled_8', '--gait',
                          'lateral_undulation', '--duration', '1.0', '--fps', '10', '--size', '96x128',
                          '--output', str(gif_path)], capture_output=True, text=True, timeout=300)
    if run.returncode != 0 and 'OpenGL' in run.stdout + run.stderr:
        pytest.skip((run.stdout + run.stderr).strip().splitlines()[-1])
    assert run.returncode == 0, run.stdout + run.stderr
    gif = Image.open(gif_path)
    assert gif.size == (128, 96)
    frames = np.array([np.asarray(f.convert('RGB'), dtype=float) for f in ImageSequence.Iterator(gif)])
    assert len(frames) >= 10
    # Not blank: the floor's checker and the robot give contrast in every frame.
    assert all(f.std() > 10.0 for f in frames)
    # The robot's blue body is in view (the floor is grey): blue-dominant pixels in every frame.
    blue = (frames[..., 2] > frames[..., 0] + 40) & (frames[..., 2] > frames[..., 1] + 20)
    assert all(b.sum() > 30 for b in blue)
    # Frames differ in time: the body undulates.
    assert np.abs(frames[-1] - frames[0]).mean() > 2.0
    assert len({f.tobytes() for f in frames.astype(np.uint8)}) > 0.8 * len(frames)


def test_bad_output_is_refused(tmp_path, capsys):
    from snake_control.cli import main
    assert main(['render', '--robot', 'wheeled_8', '--gait', 'lateral_undulation', '--output',
                 str(tmp_path / 'r.avi')]) == 2
    assert 'r.avi' in capsys.readouterr().err
