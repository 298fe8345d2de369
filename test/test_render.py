"""snake render: MuJoCo's offscreen renderer draws the robot moving (skipped where no GL exists)."""
import numpy as np
import pytest

from snake_control.app.render import NoGL, set_gl_backend

set_gl_backend()


@pytest.mark.slow
def test_frames_exist_differ_in_time_and_show_the_robot(tmp_path):
    from PIL import Image

    from snake_control.app.render import render_trajectory
    from snake_control.gaits.report import run_gait
    from snake_control.robot import load_robot

    robot = load_robot('wheeled_8')
    res = run_gait(robot, 'lateral_undulation', None, 1.0, 100.0)
    try:
        out = render_trajectory(robot, res.t_s, res.positions_rad, tmp_path / 'r.gif', fps=10, size=(96, 128))
    except NoGL as exc:
        pytest.skip(str(exc))
    frames = np.array(out['images'], dtype=float)
    assert out['frames'] == len(frames) >= 10
    gif = Image.open(tmp_path / 'r.gif')
    assert gif.n_frames == len(frames) and gif.size == (128, 96)
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
