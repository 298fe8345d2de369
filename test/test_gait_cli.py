"""`snake gait`: CSV, --list, plots and clear errors."""
import subprocess
import sys

import numpy as np
import pytest

from snake_control.cli import main
from snake_control.gaits import catalog
from snake_control.gaits.report import fit_report, gait_shape
from snake_control.robot import load_robot


def test_csv_header_and_trajectory(tmp_path, capsys):
    out = tmp_path / 'serp.csv'
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'serpentine', '--duration', '1', '--rate', '50',
                 '--csv', str(out), '--set', 'B1=4.0']) == 0
    text = capsys.readouterr().out
    assert 'fit error against the backbone curve: RMS' in text
    robot = load_robot('pitch_yaw_32')
    lines = out.read_text().splitlines()
    assert lines[0] == 't,' + ','.join(robot.joint_names)
    data = np.loadtxt(out, delimiter=',', skiprows=1)
    assert data.shape == (51, 33)
    np.testing.assert_allclose(data[:, 0], np.arange(51) / 50, atol=1e-9)
    # row 0 is the gait's shape at phase 0 with the --set parameter applied
    start = gait_shape(robot, 'serpentine', {'B1': 4.0}).angles(0.0)
    np.testing.assert_allclose(data[0, 1:], start, atol=1e-8)
    assert np.all(np.abs(np.diff(data[:, 1:], axis=0)) <= robot.velocity_limit_rad_s / 50 + 1e-8)
    assert np.ptp(data[:, 2]) > 0.05                      # it moves


def test_list_shows_every_gait_with_parameters(capsys):
    assert main(['gait', '--list']) == 0
    text = capsys.readouterr().out
    for name, spec in catalog.GAITS.items():
        assert name in text
        for p in spec.params:
            assert p.name in text and p.meaning in text
    assert '26 l' in text and '14 l' in text


def test_list_for_a_robot_resolves_defaults(capsys):
    assert main(['gait', '--list', '--robot', 'pitch_yaw_32']) == 0
    text = capsys.readouterr().out
    assert '26 l = 1.82' in text
    assert '[not for pitch_yaw_32]' in text                # wheeled gaits


@pytest.mark.parametrize('argv,message', [
    (['--set', 'B1'], "argument --set: expected NAME=VALUE, got 'B1'"),
    (['--set', '=4'], "argument --set: expected NAME=VALUE, got '=4'"),
    (['--set', 'B1=big'], "--set B1: value must be a number, got 'big'"),
    (['--set', 'B1='], "--set B1: value must be a number, got ''"),
    (['--set', 'zeta=1'], "no parameter 'zeta'"),
    (['--set', 'w1=-3'], "'w1' of gait 'serpentine' must be in"),
    (['--duration', '0'], 'argument --duration: must be between'),
])
def test_bad_arguments_give_clear_errors(argv, message, capsys):
    code = main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'serpentine'] + argv)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and 'Traceback' not in err


def test_pitch_gait_on_planar_robot_is_refused(capsys):
    assert main(['gait', '--robot', 'wheeled_8', '--gait', 'vertical_undulation', '--duration', '1']) == 2
    assert "needs a pitch_yaw robot; wheeled_8 is planar" in capsys.readouterr().err


def test_plot_and_subprocess(tmp_path):
    png = tmp_path / 'ks.png'
    csv = tmp_path / 'ks.csv'
    res = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'gait', '--robot', 'kinematic_snake_3',
                          '--gait', 'kinematic_snake_preset', '--duration', '2', '--rate', '20',
                          '--plot', str(png),
                          '--csv', str(csv)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert 'no backbone curve' in res.stdout
    from pictures import assert_picture
    assert_picture(png)
    lines = csv.read_text().splitlines()
    assert lines[0] == 't,joint_1,joint_2'
    table = np.array([[float(v) for v in line.split(',')] for line in lines[1:]])
    assert table.shape == (41, 3)                                   # 2 s at 20 Hz, both ends
    np.testing.assert_allclose(table[:, 0], np.arange(41) / 20, atol=1e-9)
    robot = load_robot('kinematic_snake_3')
    q = table[:, 1:]
    assert np.all(q >= robot.lower_rad) and np.all(q <= robot.upper_rad) and np.ptp(q, axis=0).min() > 0.1


def test_backbone_plot(tmp_path, capsys):
    png = tmp_path / 'aeh.png'
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'aeh_sidewinding', '--duration', '0.5',
                 '--rate', '20', '--plot', str(png)]) == 0
    from pictures import assert_picture
    assert_picture(png)


def test_fit_report_covers_every_backbone_gait():
    robot = load_robot('pitch_yaw_32')
    rows = fit_report(robot, phases=[0.0, 1.0])
    assert [r['gait'] for r in rows] == list(catalog.BACKBONE_GAITS)
    for r in rows:
        assert 0 < r['rms_m'] < 0.05 and r['max_rms_m'] >= r['rms_m']


def test_fit_report_command(capsys):
    assert main(['gait', '--robot', 'pitch_yaw_32', '--fit-report']) == 0
    out = capsys.readouterr().out
    for name in catalog.BACKBONE_GAITS:
        assert name in out
    assert main(['gait', '--robot', 'wheeled_8', '--fit-report']) == 0
    assert 'no backbone (MCC) gaits' in capsys.readouterr().out
