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
    assert path.stat().st_size > 10_000
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
