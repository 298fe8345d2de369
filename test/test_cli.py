"""The `snake` command: help for every subcommand, clean one-line errors, the demo's model picture."""
import subprocess
import sys

import pytest

from snake_control import cli


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(['--help'])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


@pytest.mark.parametrize('name', list(cli.COMMANDS))
def test_each_command_has_help(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([name, '--help'])
    assert exit_.value.code == 0
    assert len(capsys.readouterr().out) > 100


def test_unknown_robot_is_one_line_exit_2():
    out = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'urdf', '--robot', 'nope'],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "no robot named 'nope'" in out.stderr and 'Traceback' not in out.stderr


def test_demo_model_picture(tmp_path):
    from snake_control.commands.demo import draw_models
    path = draw_models(tmp_path)
    from pictures import assert_picture
    assert_picture(path)


def test_closed_stdout_ends_quietly():
    # `snake urdf ... | head -0`: the reader is gone before the first write. No traceback, the
    # shell's exit code for a broken pipe.
    proc = subprocess.Popen([sys.executable, '-m', 'snake_control.cli', 'urdf', '--robot', 'pitch_yaw_32'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == cli.EXIT_BROKEN_PIPE
    assert 'Traceback' not in err and 'BrokenPipeError' not in err, err


def test_command_error_through_python_dash_m_is_one_line():
    # Run as `python -m snake_control.cli` (as tests and the sim-bus helper do), a CommandError raised
    # by a command is still the one main() catches.
    out = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'gait', '--robot', 'pitch_yaw_32'],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.startswith('snake gait: error:') and 'Traceback' not in out.stderr
