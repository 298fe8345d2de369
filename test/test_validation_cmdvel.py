"""cmd_vel against the motion it gets in MuJoCo (snake_control.validation.cmdvel, `snake validate` with a
command): the measurement on made-up motions, the acceptance verdicts, and a subset of the acceptance
table run for real (the whole table is `make bench`, bench/bench_cmdvel.py)."""
import math

import numpy as np
import pytest

from snake_control import cli
from snake_control.robot import load_robot
from snake_control.validation import cmdvel as C


def straight_body(n_links, heading, centre, length=0.1):
    """(n_links, 4, 4) poses of a straight body with its middle at centre, head toward heading."""
    poses = np.tile(np.eye(4), (n_links, 1, 1))
    c, s = math.cos(heading), math.sin(heading)
    offsets = (np.arange(n_links) - (n_links - 1) / 2) * length
    poses[:, 0, 3] = centre[0] + offsets * c
    poses[:, 1, 3] = centre[1] + offsets * s
    poses[:, :2, :2] = [[c, -s], [s, c]]
    return poses


def test_a_body_sliding_sideways_moves_left_without_turning():
    times = np.linspace(0.0, 10.0, 101)
    poses = np.array([straight_body(8, 0.0, (0.0, 0.1 * t)) for t in times])
    a = C.achieved_motion(times, poses, 2 * math.pi * 0.2 * times)        # two whole cycles
    assert a.cycles == 2 and a.window_s == pytest.approx(10.0)
    assert a.forward_m_s == pytest.approx(0.0, abs=1e-12)
    assert a.lateral_m_s == pytest.approx(0.1)
    assert a.yaw_rate_rad_s == pytest.approx(0.0, abs=1e-12)
    assert a.drift_deg_per_m == pytest.approx(0.0, abs=1e-9)


def test_a_body_on_a_circle_gets_its_arc_speed_and_yaw_rate():
    radius, v = 0.5, 0.1                         # 0.2 rad/s, for 1.5 rad
    times = np.linspace(0.0, 7.5, 751)
    poses = np.array([straight_body(8, v / radius * t, (radius * math.sin(v / radius * t),
                                                        radius * (1 - math.cos(v / radius * t))))
                      for t in times])
    a = C.achieved_motion(times, poses, 0.9 * times)                        # one whole cycle in 7 s
    assert a.cycles == 1
    assert a.forward_m_s == pytest.approx(v, rel=1e-3)
    assert a.lateral_m_s == pytest.approx(0.0, abs=1e-3)
    assert a.yaw_rate_rad_s == pytest.approx(v / radius, rel=1e-3)


def test_whole_cycles_cancel_the_wave_and_short_runs_use_everything():
    times = np.linspace(0.0, 13.0, 131)
    poses = np.array([straight_body(6, 0.0, (0.02 * t, 0.0)) for t in times])
    short = C.achieved_motion(times[:51], poses[:51], times[:51])           # 5 rad: less than a cycle
    assert short.cycles == 0 and short.window_s == pytest.approx(5.0)
    backwards = C.achieved_motion(times, poses, -times)                     # two cycles (12.57 rad)
    assert backwards.cycles == 2 and backwards.window_s == pytest.approx(4 * math.pi)
    assert backwards.forward_m_s == pytest.approx(0.02)
    # A body whose axis swings with the wave: the window's mean heading is its travel direction.
    times = np.linspace(0.0, 4.0, 401)
    phase = 2 * math.pi * 0.5 * times
    poses = np.array([straight_body(6, 0.4 * math.sin(p), (0.05 * t, 0.0)) for t, p in zip(times, phase)])
    a = C.achieved_motion(times, poses, phase)
    assert a.forward_m_s == pytest.approx(0.05, rel=1e-3) and abs(a.lateral_m_s) < 1e-3
    with pytest.raises(ValueError, match='same number of samples'):
        C.achieved_motion(times[:-1], poses, phase)


def result(command, forward=0.0, lateral=0.0, yaw=0.0, seconds=10.0, follows=('linear.x', 'angular.z')):
    distance = math.hypot(forward, lateral) * seconds
    return C.CommandResult('r', 'g', command, follows,
                           C.Achieved(forward, lateral, yaw, seconds, 1, distance, yaw * seconds))


def test_the_acceptance_verdicts():
    assert C.misses(result((0.1, 0, 0), forward=0.109)) == []
    assert C.misses(result((0.1, 0, 0), forward=0.112)) == ['speed x1.12']
    assert C.misses(result((0.1, 0, 0.5), forward=0.1, yaw=0.43)) == []            # 15 %
    assert C.misses(result((0.1, 0, 0.5), forward=0.1, yaw=0.42)) == ['yaw rate x0.84']
    assert C.misses(result((0.1, 0, 0.1), forward=0.1, yaw=0.129)) == []           # 0.03 rad/s near zero
    # 0.02 rad/s for 10 s over 1 m: 11.5 deg/m of drift
    assert C.misses(result((0.1, 0, 0), forward=0.1, yaw=0.02)) == ['drift 11.5 deg/m']
    spin = result((0, 0, 0.3), forward=0.001, yaw=0.3, follows=('angular.z',))     # 0.01 m over 3 rad
    assert C.misses(spin) == []
    spin = result((0, 0, 0.3), forward=0.02, yaw=0.3, follows=('angular.z',))
    assert C.misses(spin) == ['translates 0.067 m/rad']
    unfollowed = C.CommandResult('r', 'rolling', (0, 0.1, 0.2), ('linear.y',), run=False)
    assert C.misses(unfollowed) == ['rolling does not follow angular.z']
    assert 'WARN rolling does not follow angular.z' in C.format_rows([unfollowed])


def test_acceptance_commands_stay_within_the_reach_and_the_node_clamp():
    robot = load_robot('wheeled_8')
    m = C.cmd_vel_meaning(robot, 'wheeled_undulation')
    commands = C.acceptance_commands(robot, 'wheeled_undulation')
    assert [c[0] for c in commands] == [0.09, 0.15, 0.15, 0.15]
    assert commands[2][2] == -commands[3][2] > 0
    assert commands[2][2] / 0.15 <= m.curvature_max_rad_m
    robot = load_robot('pitch_yaw_32')
    spin = C.acceptance_commands(robot, 'turn_in_place')
    top = C.cmd_vel_meaning(robot, 'turn_in_place').max_speed            # rad/s, from the calibration
    hi = spin[1][2]
    assert hi == pytest.approx(0.6 * top, rel=0.05) and spin[0][2] == pytest.approx(0.6 * hi, rel=0.05)
    assert spin[2][2] == -hi and all(c[:2] == (0, 0) for c in spin)


@pytest.fixture(scope='module')
def custom_10(tmp_path_factory):
    return C.write_wheeled_robot(tmp_path_factory.mktemp('robots') / 'wheeled_10.yaml')


# The subset of the acceptance table asserted here: passive wheels, where the stride model holds.
@pytest.mark.slow
@pytest.mark.parametrize('robot,gait,command', [
    ('wheeled_8', 'wheeled_undulation', (0.15, 0.0, 0.0)),
    ('wheeled_8', 'wheeled_undulation', (0.15, 0.0, 0.36)),
    ('wheeled_8', 'lateral_undulation', (0.15, 0.0, -0.098)),
    ('custom_10', 'lateral_undulation', (0.15, 0.0, 0.0)),
    ('custom_10', 'wheeled_undulation', (0.15, 0.0, 0.67)),
    # It turns 0.25 rad in its first cycle from rest, then under 0.5 deg/m: measured once it has settled.
    ('custom_10', 'wheeled_undulation', (0.15, 0.0, 0.0))])
def test_passive_wheels_meet_the_acceptance(robot, gait, command, custom_10):
    robot = load_robot(custom_10 if robot == 'custom_10' else robot)
    r = C.run_command(robot, gait, command, duration_s=C.cycle_duration_s(robot, gait, command),
                      warmup_s=C.settle_s(robot, gait, command))
    print(C.format_rows([r]))
    assert r.achieved.cycles >= 1
    assert C.misses(r) == []
    assert r.estimate.position_error_pct < 5.0


# turn_in_place's three acceptance rows (two rates left, the higher one right), the shipped calibration.
@pytest.mark.slow
@pytest.mark.parametrize('row', [0, 1, 2])
def test_turn_in_place_turns_on_the_spot(row):
    robot = load_robot('pitch_yaw_32')
    command = C.acceptance_commands(robot, 'turn_in_place')[row]
    r = C.run_command(robot, 'turn_in_place', command, warmup_s=C.settle_s(robot, 'turn_in_place', command),
                      duration_s=C.cycle_duration_s(robot, 'turn_in_place', command, lowest_s=4.0), estimate=False)
    print(C.format_rows([r]))
    assert r.achieved.cycles >= 1
    assert C.misses(r) == []


@pytest.mark.slow
def test_conical_sidewinding_goes_straight_through_its_calibration():
    # It veers 0.05 rad per cycle at its default taper; the calibration's offset that cancels it must be
    # one it measured (it was past the measured +-0.4: 3.0 deg/m at the higher acceptance speed).
    robot = load_robot('pitch_yaw_32')
    command = C.acceptance_commands(robot, 'conical_sidewinding')[1]
    r = C.run_command(robot, 'conical_sidewinding', command, estimate=False,
                      warmup_s=C.settle_s(robot, 'conical_sidewinding', command),
                      duration_s=C.cycle_duration_s(robot, 'conical_sidewinding', command, lowest_s=4.0))
    print(C.format_rows([r]))
    assert r.achieved.cycles >= 1 and r.reachable
    assert C.misses(r) == []


@pytest.mark.slow
def test_aeh_sidewinding_steers_both_ways_through_its_taper():
    # A full turn command is past its reach (about 0.1 rad/m): the taper saturates at turn_max and the body
    # turns gently the way it was told (+0.007 and -0.010 rad/s over three cycles at 0.1 m/s); untapered it
    # went the same way whatever angular.z asked.
    robot = load_robot('pitch_yaw_32')
    rates = []
    for wz in (0.5, -0.5):
        r = C.run_command(robot, 'aeh_sidewinding', (0.0, 0.1, wz), warmup_s=12.0, duration_s=29.0, estimate=False)
        print(C.format_rows([r]))
        assert r.achieved.cycles >= 3
        assert r.achieved.lateral_m_s == pytest.approx(0.1, rel=0.1)
        rates.append(r.achieved.yaw_rate_rad_s)
    assert rates[0] > 0.003 and rates[1] < -0.003
    assert rates[0] - rates[1] > 0.01


@pytest.mark.slow
def test_the_ground_robot_meets_its_speed_through_its_calibration():
    # Serpenoid sidewinding goes at 0.46 of the command through its stride parameter; the shipped
    # calibration (gaits/calibration.py) maps it to the command. Its heading drift varies from run to
    # run (0.1 to 2.4 deg/m in one to four cycles) and is not asserted.
    r = C.run_command(load_robot('pitch_yaw_32'), 'sidewinding', (0.0, 0.1, 0.0), duration_s=8.0)
    print(C.format_rows([r]))
    assert r.achieved.cycles >= 1
    assert r.achieved.lateral_m_s == pytest.approx(0.1, rel=0.1)
    assert abs(r.achieved.yaw_rate_rad_s) <= 0.03


@pytest.mark.slow
def test_validate_takes_any_robot_file_and_prints_commanded_against_achieved(custom_10, capsys):
    args = ['validate', '--robot', str(custom_10), '--gait', 'wheeled_undulation', '--speed', '0.1',
            '--turn', '0.2', '--check']
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith('wheeled_custom_10'))
    assert '+0.1, +0, +0.2' in row and row.rstrip().endswith('ok')
    ratio, yaw_ratio = (float(x) for x in row.split()[8:10])
    assert abs(ratio - 1) <= 0.1 and abs(yaw_ratio - 1) <= 0.15
    assert '1 of 1 runs within the acceptance' in out


@pytest.mark.slow
def test_validate_warns_and_check_fails_on_a_miss(capsys):
    # Helix rolling on this floor spins (docs/gaits.md, "Rolling: which side leads, and the conical arc").
    args = ['validate', '--robot', 'pitch_yaw_32', '--gait', 'helix_rolling', '--lateral', '0.1',
            '--duration', '6', '--warmup', '2', '--check']
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    assert 'WARN' in out and 'drift' in out and '0 of 1 runs within the acceptance' in out


def test_validate_refuses_bad_input_naming_it(tmp_path, capsys):
    assert cli.main(['validate', '--robot', str(tmp_path / 'missing.yaml'), '--speed', '0.1']) == 2
    assert 'missing.yaml' in capsys.readouterr().err
    bad = tmp_path / 'bad.yaml'
    bad.write_text((C.write_wheeled_robot(tmp_path / 'ok.yaml')).read_text().replace('length_m: 0.12',
                                                                                        'length_m: -1'))
    assert cli.main(['validate', '--robot', str(bad), '--speed', '0.1']) == 2
    err = capsys.readouterr().err
    assert 'bad.yaml' in err and 'link.length_m' in err
    assert cli.main(['validate', '--robot', 'wheeled_8', '--gait', 'serpentine', '--speed', '0.1']) == 2
    assert 'not a gait of wheeled_8' in capsys.readouterr().err
    assert cli.main(['validate', '--robot', 'wheeled_8', '--gait', 'no_such_gait']) == 2
    assert 'no_such_gait' in capsys.readouterr().err
    assert cli.main(['validate', '--robot', 'wheeled_8', '--speed', 'nan']) == 2
    assert '--speed must be a finite number' in capsys.readouterr().err
    assert cli.main(['validate', '--gait', 'lateral_undulation', '--speed', '0.1']) == 2
    assert '--robot is needed' in capsys.readouterr().err


def test_the_bench_table_covers_every_robot_and_gait_and_keeps_its_budget(monkeypatch, capsys):
    from bench import bench_cmdvel as B
    robots = [load_robot('wheeled_8'), load_robot('pitch_yaw_32')]
    planned = B.plan(robots)
    gaits = {(r.name, g) for _, r, g, _ in planned}
    assert gaits == {(r.name, g) for r in robots for g in C.locomotion_gaits(r)}
    assert [p for p, *_ in planned] == sorted(p for p, *_ in planned)        # first pass first
    first = [c for p, r, g, c in planned if p == 0 and g == 'serpentine']
    higher, left = C.acceptance_commands(robots[1], 'serpentine')[1:3]
    assert first == [higher, left] and higher[0] == 0.15 and left[2] > 0    # higher speed, left turn
    monkeypatch.setattr(B, 'BUDGET_S', 0.0)           # no time at all: every row listed, none run
    B.main()
    out = capsys.readouterr().out
    assert 'WARN not run: over the 0 s budget' in out
    assert '0 of 79 rows within the acceptance (0 runs' in out


def test_runs_settle_before_they_are_measured_and_slow_gaits_get_whole_cycles():
    from bench import bench_cmdvel as B
    k3 = load_robot('kinematic_snake_3')
    slow = C.acceptance_commands(k3, 'lateral_undulation')[0]           # 0.09 m/s: a 19 s cycle
    period = C.cmd_vel_meaning(k3, 'lateral_undulation').stride / slow[0]
    assert period > 15.0
    # The bench measures the whole cycle (5 % over it, so the last sample reaches its phase) ...
    assert C.cycle_duration_s(k3, 'lateral_undulation', slow, lowest_s=B.LOWEST_S,
                              highest_s=B.HIGHEST_S) == pytest.approx(1.05 * period)
    # ... after the blend and two cycles, bounded: a slow gait settles for 12 s at most.
    assert C.settle_s(k3, 'lateral_undulation', slow) == 12.0
    py32 = load_robot('pitch_yaw_32')
    fast = C.acceptance_commands(py32, 'turn_in_place')[1]
    tip_period = C.cmd_vel_meaning(py32, 'turn_in_place').stride / fast[2]
    assert C.settle_s(py32, 'turn_in_place', fast) == pytest.approx(max(C.BLEND_S + 2 * tip_period, 2.0))


@pytest.mark.parametrize('start', [0.0, 1.0, 2.5])
def test_a_turning_cycle_is_measured_along_the_mean_path_whatever_its_start_phase(start):
    # The centroid circles the origin at 1 m +- 0.1 m with the body wave, turning 0.6 rad per cycle: its
    # chord between phase-aligned ends depends on the start phase, its mean path (0.6 m) does not.
    t = np.linspace(0.0, 1.0, 401)
    angle = 0.6 * t
    radius = 1.0 + 0.1 * np.sin(2 * np.pi * t + start)
    centroid = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    heading = angle + np.pi / 2
    chord = np.linalg.norm(centroid[-1] - centroid[0])
    stretch = C.mean_path_stretch(t, 2 * np.pi * t, centroid, heading, 1)
    assert chord * stretch == pytest.approx(0.6, rel=2e-3)
