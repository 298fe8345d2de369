"""`snake gait ... --torques`: the torque table and the warning naming joints and phases."""
import re

from snake_control.cli import main


def test_gait_torques_pass_for_lateral_undulation(capsys):
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'lateral_undulation', '--duration', '4',
                 '--torques']) == 0
    out = capsys.readouterr().out
    assert 'joint_32' in out and 'peak N m' in out
    assert 'torque check passed' in out and 'XM430-W350' in out
    # Lateral undulation lies flat: every pitch joint's peak torque is zero.
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r'^(joint_\d+)\s+([\d.]+)', out, re.M)}
    assert len(rows) == 32
    assert all(rows[f'joint_{i:02d}'] == 0.0 for i in range(1, 33, 2))      # odd joints are pitch
    assert max(rows.values()) > 0.0


def test_gait_torques_warn_with_joints_and_phases(capsys):
    # Above the fraction the command fails, like `snake torques`.
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'vertical_undulation', '--duration', '4',
                 '--torques', '--torque-fraction', '0.2']) == 1
    out = capsys.readouterr().out
    warning = [line for line in out.splitlines() if line.startswith('warning: torque check FAILED')]
    assert warning, out
    assert re.search(r'joint_\d+ peak [\d.]+ N m \(\d+%\) at phase \d\.\d\d-\d\.\d\d', warning[0])


def test_gait_torque_fraction_is_validated(capsys):
    assert main(['gait', '--robot', 'pitch_yaw_32', '--gait', 'serpentine', '--duration', '1',
                 '--torques', '--torque-fraction', '1.5']) == 2
    assert 'fraction' in capsys.readouterr().err


def _gait_csv(tmp_path, gait='sidewinding'):
    path = tmp_path / f'{gait}.csv'
    args = ['gait', '--robot', 'pitch_yaw_32', '--gait', gait, '--duration', '2', '--csv', str(path)]
    assert main(args) == 0
    return path


def test_torques_command_reads_a_gait_csv(tmp_path, capsys):
    path = _gait_csv(tmp_path, 'lateral_undulation')
    capsys.readouterr()
    assert main(['torques', '--robot', 'pitch_yaw_32', '--csv', str(path)]) == 0
    out = capsys.readouterr().out
    assert 'torque check passed' in out and 'joint_32' in out
    # Columns in another order give the same table.
    lines = path.read_text().splitlines()
    rows = [line.split(',') for line in lines]
    swapped = tmp_path / 'swapped.csv'
    swapped.write_text('\n'.join(','.join([r[0]] + r[1:][::-1]) for r in rows) + '\n')
    assert main(['torques', '--robot', 'pitch_yaw_32', '--csv', str(swapped)]) == 0
    assert capsys.readouterr().out.replace(str(swapped), str(path)) == out


def test_torques_command_fails_above_the_fraction(tmp_path, capsys):
    path = _gait_csv(tmp_path)
    capsys.readouterr()
    assert main(['torques', '--robot', 'pitch_yaw_32', '--csv', str(path), '--fraction', '0.05',
                 '--period', '1']) == 1
    out = capsys.readouterr().out
    assert 'warning: torque check FAILED' in out and 'at phase' in out


def test_torques_command_refuses_a_csv_of_another_robot(tmp_path, capsys):
    path = _gait_csv(tmp_path)
    assert main(['torques', '--robot', 'wheeled_8', '--csv', str(path)]) == 2
    err = capsys.readouterr().err
    assert 'missing joint_1' in err and 'unknown joint_01' in err
