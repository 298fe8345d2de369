"""snake demo: the wire-time formula against docs/dynamixel.md, the graph's estimator weight in MuJoCo, the
recording merge, and a short end-to-end run (wheeled_8 through its script in MuJoCo)."""
import math

import numpy as np
import pytest

from snake_control.app.demo import bus_cycle_wire_time_s, path_length_m
from snake_control.kinematics.lie import se2_relative
from snake_control.app.graph import GraphArgs, build_graph


@pytest.mark.parametrize('baud, fast, expected_ms', [
    (4_000_000, False, 2.2), (4_000_000, True, 1.7), (1_000_000, False, 8.9), (1_000_000, True, 6.8),
    (2_000_000, True, 3.4), (57_600, True, 117.0), (57_600, False, 155.0)])
def test_wire_time_matches_the_dynamixel_table(baud, fast, expected_ms):
    # docs/dynamixel.md: 32 servos, 10 state bytes, return delay 0.
    got_ms = 1000 * bus_cycle_wire_time_s(32, baud, 10, fast)
    assert got_ms == pytest.approx(expected_ms, rel=0.02)


def test_wire_time_counts_one_return_delay_per_sync_read_reply():
    base = bus_cycle_wire_time_s(32, 4_000_000, 10, fast=False)
    assert bus_cycle_wire_time_s(32, 4_000_000, 10, False, return_delay_s=500e-6) == pytest.approx(
        base + 32 * 500e-6)
    assert bus_cycle_wire_time_s(32, 4_000_000, 10, True, return_delay_s=500e-6) == pytest.approx(
        bus_cycle_wire_time_s(32, 4_000_000, 10, True) + 500e-6)
    with pytest.raises(ValueError, match='n_servos'):
        bus_cycle_wire_time_s(0, 4_000_000, 10, True)


def test_se2_relative_and_path_length():
    origin = (1.0, 2.0, math.pi / 2)
    poses = np.array([[1.0, 2.0, math.pi / 2], [1.0, 3.0, math.pi], [0.0, 2.0, 0.0]])
    rel = se2_relative(poses, origin)
    np.testing.assert_allclose(rel, [[0, 0, 0], [1, 0, math.pi / 2], [0, 1, -math.pi / 2]], atol=1e-12)
    t = np.linspace(0, 2, 201)
    assert path_length_m(t, np.column_stack((0.5 * t, 0 * t))) == pytest.approx(1.0)
    with pytest.raises(ValueError, match='poses_xyyaw'):
        se2_relative(np.zeros((3, 2)), origin)


def test_estimator_gets_the_matching_axial_weight_only_for_pitch_yaw_in_mujoco():
    from snake_control.physics.mjcf import matching_axial_weight

    def est(robot, physics):
        specs = build_graph(GraphArgs(robot=robot, bus='sim', physics=physics), port='/dev/null')
        return next(s for s in specs if s.name == 'estimator_node').parameters

    assert est('pitch_yaw_32', 'mujoco')['axial_weight'] == pytest.approx(matching_axial_weight())
    assert 0 < est('pitch_yaw_32', 'mujoco')['axial_weight'] < 0.1
    assert 'axial_weight' not in est('pitch_yaw_32', 'none')
    assert 'axial_weight' not in est('wheeled_8', 'mujoco')
    # The world publishes its head IMU on `imu`: the estimator fuses it and knows the link.
    assert est('pitch_yaw_32', 'mujoco')['use_imu'] is True
    assert est('pitch_yaw_32', 'mujoco')['imu_attitude_s'] > 0      # the IMU pulls the contacts' attitude
    assert est('pitch_yaw_32', 'mujoco')['imu_link'] == 32
    assert 'imu_link' not in est('pitch_yaw_32', 'none')
    # A wheeled robot's estimator takes its heading from the world's gyro (its wheels skid).
    assert est('wheeled_8', 'mujoco')['use_imu'] is True and 'imu_attitude_s' not in est('wheeled_8', 'mujoco')
    assert 'use_imu' not in est('wheeled_8', 'none')
    # The gait node's power-up rest waits for that IMU (the estimator learns its gyro bias there).
    gait = next(s for s in build_graph(GraphArgs(robot='wheeled_8', bus='sim', physics='mujoco'),
                                       port='/dev/null') if s.name == 'gait_node').parameters
    assert gait['startup_imu_wait_s'] > 0
    assert 'startup_imu_wait_s' not in next(s for s in build_graph(
        GraphArgs(robot='wheeled_8', bus='sim', physics='none'), port='/dev/null') if s.name == 'gait_node').parameters
    # The MuJoCo graph maps cmd_vel with the calibration measured on its own (pyramidal) floor.
    from snake_control.gaits.calibration import SIM_SUFFIX, calibration_path, load_calibration
    from snake_control.robot import load_robot

    def gait_params(robot, physics):
        return next(s for s in build_graph(GraphArgs(robot=robot, bus='sim', physics=physics), port='/dev/null')
                    if s.name == 'gait_node').parameters
    robot = load_robot('pitch_yaw_32')
    sim_calibration = calibration_path(robot, SIM_SUFFIX)
    assert gait_params('pitch_yaw_32', 'mujoco')['calibration'] == str(sim_calibration)
    assert 'pyramidal' in load_calibration(sim_calibration, robot).method
    assert 'calibration' not in gait_params('pitch_yaw_32', 'none')      # the node's default: the shipped one
    assert 'calibration' not in gait_params('wheeled_8', 'mujoco')       # none measured: the no-slip model


def _write_mcap(path, topics):
    from mcap.writer import Writer
    with open(path, 'wb') as f:
        w = Writer(f)
        w.start(profile='ros2')
        sid = w.register_schema('std_msgs/String', 'ros2msg', b'string data')
        for k, topic in enumerate(topics):
            cid = w.register_channel(topic, 'cdr', sid)
            w.add_message(cid, log_time=1000 + k, data=bytes([k]), publish_time=1000 + k)
        w.finish()


def test_merge_keeps_robot_topics_and_moves_absolute_ones_under_the_robot(tmp_path):
    from mcap.reader import make_reader

    from snake_control.mcap_io import merge_recordings
    _write_mcap(tmp_path / 'a.mcap', ['/a/odom', '/diagnostics'])
    _write_mcap(tmp_path / 'b.mcap', ['/b/odom', '/diagnostics'])
    counts = merge_recordings([('a', tmp_path / 'a.mcap'), ('b', tmp_path / 'b.mcap')], tmp_path / 'm.mcap')
    assert counts == {'/a/odom': 1, '/a/diagnostics': 1, '/b/odom': 1, '/b/diagnostics': 1}
    with open(tmp_path / 'm.mcap', 'rb') as f:
        got = sorted((c.topic, m.data) for _, c, m in make_reader(f).iter_messages())
    assert got == [('/a/diagnostics', b'\x01'), ('/a/odom', b'\x00'), ('/b/diagnostics', b'\x01'),
                   ('/b/odom', b'\x00')]


@pytest.mark.slow
@pytest.mark.ros
def test_quick_demo_end_to_end(tmp_path):
    """wheeled_8 through the first 10 s of its script: it moves, the estimate follows the truth, and every
    output is written."""
    from mcap_ros2.reader import read_ros2_messages

    from snake_control.app.demo import run_demo

    [summ] = run_demo(tmp_path, quick=True, log=lambda line: None)
    from pictures import assert_picture
    assert_picture(tmp_path / 'demo_wheeled_8.png')
    assert summ.true_distance_m > 0.5 and summ.true_frame_distance_m >= summ.true_distance_m
    assert math.isfinite(summ.final_position_error_pct) and summ.final_position_error_pct < 50
    assert abs(summ.final_heading_error_deg) < 45
    assert summ.torque_off is True
    # 10 s holds about one 8 s gait cycle: the span is measured, and judged only when a whole cycle fits.
    assert summ.speed_spans and all(sp.commanded_m_s > 0 and sp.achieved_m_s > 0 for sp in summ.speed_spans)
    assert summ.wire_limit_hz > summ.control_rate_hz_target > 0
    assert [g for _, g in summ.gait_switches][:1] == ['wheeled_undulation']
    topics = {}
    for m in read_ros2_messages(str(tmp_path / 'demo.mcap')):
        topics[m.channel.topic] = topics.get(m.channel.topic, 0) + 1
    assert topics.get('/wheeled_8/joint_states', 0) > 100
    assert topics.get('/wheeled_8/odom', 0) > 20
    assert '/wheeled_8/diagnostics' in topics and '/diagnostics' not in topics
    assert not (tmp_path / 'demo_parts').exists()
    # The session's video: the recorded joint_states replayed in MuJoCo, moving, at twice real time.
    import imageio.v3 as iio
    assert summ.video == str(tmp_path / 'demo_wheeled_8.mp4')
    frames = iio.imread(summ.video, index=None).astype(float)
    assert len(frames) > 0.8 * 8.0 / 2.0 * 15.0                   # > 8 s of joint_states at x2, 15 fps
    assert frames[-1].std() > 10.0 and np.abs(frames[-1] - frames[0]).mean() > 2.0


def test_truth_jumps_drop_isolated_and_lasting_jumps_only():
    from snake_control.app.demo import truth_jumps
    t = np.arange(6) * 0.02
    xy = np.column_stack((0.01 * np.arange(6), np.zeros(6)))
    assert not truth_jumps(t, xy).any()
    xy[2] = (1.0, 0.0)          # an isolated glitch
    xy[5] = (0.05, 0.9)         # a lasting jump at the end
    assert truth_jumps(t, xy).tolist() == [False, False, True, False, False, True]


def test_the_demo_takes_a_dds_domain_the_tests_do_not_use_unless_one_is_chosen():
    from snake_control.commands.demo import DEMO_DOMAINS, private_domain
    env = {}
    chosen = private_domain(env)
    assert chosen == env['ROS_DOMAIN_ID'] and DEMO_DOMAINS[0] <= int(chosen) <= DEMO_DOMAINS[1]
    assert DEMO_DOMAINS[0] > 101     # test/conftest.py draws from 1-101
    env = {'ROS_DOMAIN_ID': '7'}
    assert private_domain(env) is None and env == {'ROS_DOMAIN_ID': '7'}


def _wiggling_body(t_s, v_m_s, start_s, period_s, n_links=8, link_m=0.1, amplitude_m=0.1, delta_rad=0.5):
    """(link-centre poses (T, n_links, 4, 4), gait phase (T,) rad) of a chain sliding along +x at v_m_s
    from start_s while a wave of amplitude_m swings every link sideways (phase lag delta_rad per link)."""
    moving_s = np.clip(np.asarray(t_s) - start_s, 0.0, None)
    phase = 2 * math.pi * moving_s / period_s
    poses = np.tile(np.eye(4), (len(t_s), n_links, 1, 1))
    for i in range(n_links):
        poses[:, i, 0, 3] = v_m_s * moving_s + i * link_m
        poses[:, i, 1, 3] = amplitude_m * np.sin(phase - i * delta_rad)
    return poses, phase


def test_demo_speed_is_the_centroid_progress_not_a_wiggling_link_path():
    """A body moving at v along x while its links swing sideways reads v, as the acceptance harness
    measures it; a link's path length (the wave's swing counted as travel) reads far more."""
    from snake_control.app.demo import PATH_SAMPLE_S, span_speeds

    v, start, period = 0.1, 1.0, 4.0
    t = np.arange(0.0, 11.0, 0.02)
    poses, phase = _wiggling_body(t, v, start, period)
    gait_t = np.arange(0.0, 11.0, 0.1)
    command = np.column_stack((np.where(gait_t >= start, v, 0.0), np.zeros_like(gait_t)))
    gait_phase = np.interp(gait_t, t, phase)
    [span] = span_speeds(t, poses, gait_t, gait_phase, command, np.ones(len(gait_t), bool))
    assert span.cycles == 2 and span.t_start_s == pytest.approx(start)
    assert span.commanded_m_s == pytest.approx(v)
    assert span.achieved_m_s == pytest.approx(v, rel=0.01)
    # The data wiggles enough to tell the two measures apart: the middle link's path reads x1.3 or more.
    moving = t >= start
    middle = poses[moving, 4, :2, 3]
    assert path_length_m(t[moving], middle, PATH_SAMPLE_S) / (t[-1] - start) > 1.3 * v


def test_demo_speed_spans_skip_blends_and_average_the_command_over_the_window():
    from snake_control.app.demo import motion_spans, span_speeds

    cmd = np.array([[0, 0], [0.1, 0], [0.1, 0], [0.1, 0], [0, 0.05], [0, 0.05], [0, 0]], float)
    steady = np.array([True, True, True, False, True, True, True])
    assert motion_spans(np.arange(7), cmd, steady) == [(1, 2), (4, 5)]
    # The measured window is the one whole cycle (0 to 4 s) of the 7.9 s span: half of it at 0.05 m/s,
    # half at 0.15 m/s, so the command's mean over it is 0.1 m/s (the 0.3 m/s after it does not count).
    t = np.arange(0.0, 8.0, 0.02)
    poses, phase = _wiggling_body(t, 0.1, 0.0, 4.0)
    gait_t = np.arange(0.0, 8.0, 0.1)
    command = np.column_stack((np.select([gait_t < 2.0, gait_t < 4.0], [0.05, 0.15], 0.3), 0 * gait_t))
    [span] = span_speeds(t, poses, gait_t, np.interp(gait_t, t, phase), command, np.ones(len(gait_t), bool))
    assert span.cycles == 1 and span.window_s == pytest.approx(4.0, abs=0.02)
    assert span.commanded_m_s == pytest.approx(0.1, rel=0.01)
    assert span.achieved_m_s == pytest.approx(0.1, rel=0.01)


@pytest.mark.parametrize('robot', ['pitch_yaw_32', 'wheeled_8'])
def test_demo_scripts_turn_along_paths_their_gait_can_follow(robot):
    """The demo is the product's showcase: a turn it asks for (forward and turn sticks together) stays
    within the first gait's path curvature (its calibration or no-slip model, gaits.reach), so the gait
    never reports that it cannot reach the command. Both sticks scale with the same speed scale, so
    the path curvature asked for is the sticks' ratio times the map's turn and forward limits."""
    from snake_control.app.demo import demo_script_path
    from snake_control.gaits.controller import default_gait
    from snake_control.gaits.reach import cmd_vel_meaning
    from snake_control.robot import load_robot
    from snake_control.teleop.script import load_script

    rb = load_robot(robot)
    script = load_script(demo_script_path(robot))
    pad = script.gamepad
    lo, hi = cmd_vel_meaning(rb, default_gait(rb)).curvature_range_rad_m
    gait_taps = {pad.buttons[k].button for k in ('next_gait', 'previous_gait')} | {
        b.button for b in pad.gait_pick.values()}
    fwd, turn = pad.axes['forward'], pad.axes['turn']
    turns = 0
    for event in script.events:
        if gait_taps & set(event.tap):
            break                               # another gait from here on
        v, w = (event.axes[a.axis] * a.scale for a in (fwd, turn))
        if abs(v) < pad.deadzone or abs(w) < pad.deadzone:
            continue
        curvature = (w * pad.limits['max_turn_rad_s']) / (v * pad.limits['max_forward_m_s'])
        assert lo < curvature < hi, f'{robot} at {event.t_s} s asks for {curvature:.2f} rad/m, the gait ' \
                                    f'turns within {lo:.2f}..{hi:.2f} rad/m'
        turns += 1
    assert turns >= 1


def test_a_speed_span_is_judged_only_over_whole_cycles_of_a_reachable_command():
    from snake_control.app.demo import SpeedSpan
    assert SpeedSpan(4.0, 11.0, 2, 0.1, 0.1).judged
    assert not SpeedSpan(20.0, 7.0, 0, 0.05, 0.046).judged          # part of one AEH cycle
    assert not SpeedSpan(31.0, 6.2, 2, 0.05, 0.1, 'rolling', reachable=False).judged


def test_script_segments_cut_at_blends_commands_and_stops_and_fold_short_ones():
    from snake_control.app.demo import script_segments
    t = np.arange(0.0, 5.0, 0.05)
    active, target = [], []
    blending, moving = np.zeros(len(t), bool), np.zeros(len(t), bool)
    for k, tk in enumerate(t):
        if tk < 1.0:                       # serpentine under a command
            a, g, moving[k] = 'serpentine', 'serpentine', True
        elif tk < 1.5:                     # stopped
            a = g = 'serpentine'
        elif tk < 1.7:                     # passing through lateral_undulation: 0.2 s, folded
            a, g, blending[k] = 'serpentine', 'lateral_undulation', True
        elif tk < 2.7:
            a, g, blending[k] = 'lateral_undulation', 'aeh_sidewinding', True
        else:
            a, g, moving[k] = 'aeh_sidewinding', 'aeh_sidewinding', True
        active.append(a)
        target.append(g)
    segs = script_segments(t, active, target, blending, moving)
    assert [label for _, _, label in segs] == ['serpentine', 'serpentine, stopped', 'blend into aeh_sidewinding',
                                               'aeh_sidewinding']
    np.testing.assert_allclose([a for a, _, _ in segs], [0.0, 1.0, 1.7, 2.7], atol=1e-9)
    assert segs[1][1] == segs[2][0] and segs[-1][1] == pytest.approx(t[-1])


def test_segment_errors_are_each_segments_own_motion_from_its_start():
    """A sideways error in the first segment and a short turn in the second: each segment shows its own, not
    what the one before left (the second starts 10 cm and 0 deg off, and is scored from there)."""
    from snake_control.app.demo import segment_errors
    t = np.linspace(0.0, 2.0, 201)
    first = t <= 1.0
    true = np.zeros((len(t), 3))
    true[first, 0] = t[first]                                  # 1 m along x in the first second
    true[~first, 0] = 1.0
    true[~first, 2] = (t[~first] - 1.0) * math.pi / 2          # then a quarter turn on the spot
    est = true.copy()
    est[first, 1] = 0.1 * t[first]                             # drifts 10 cm sideways
    est[~first, 1] = 0.1
    est[~first, 2] *= 0.9                                      # turns 9 deg short
    segs = segment_errors(t, est, t, true, [(0.0, 1.0, 'straight'), (1.0, 2.0, 'turn')])
    assert [s.label for s in segs] == ['straight', 'turn']
    assert segs[0].true_m == pytest.approx(1.0) and segs[0].error_m == pytest.approx(0.1, abs=1e-9)
    assert segs[0].heading_error_deg == pytest.approx(0.0, abs=1e-9)
    assert segs[1].true_m == pytest.approx(0.0, abs=1e-9) and segs[1].error_m == pytest.approx(0.0, abs=1e-9)
    assert segs[1].heading_error_deg == pytest.approx(9.0, abs=1e-6)


def test_segment_errors_split_along_and_across_the_true_travel():
    """An estimate that goes 0.8 of the way tells a scale (along, short) from one that veers (across, to the
    left), whichever way the segment travels in its start frame; a segment the truth does not move in has
    no direction to split by."""
    from snake_control.app.demo import segment_errors
    t = np.linspace(0.0, 3.0, 301)
    true = np.zeros((len(t), 3))
    true[:, 2] = 0.3                                           # heading in odom: the start frame turns with it
    lateral = np.array([-math.sin(0.3), math.cos(0.3)])
    first, second = t <= 1.0, (t > 1.0) & (t <= 2.0)
    true[first, :2] = np.outer(0.5 * t[first], lateral)        # 0.5 m sideways (left) in the first second
    true[~first, :2] = 0.5 * lateral
    est = true.copy()
    est[first, :2] *= 0.8                                      # 0.8 of it: 0.1 m short
    est[~first, :2] = 0.4 * lateral
    forward = np.array([math.cos(0.3), math.sin(0.3)])
    est[second, :2] += np.outer(0.5 * (t[second] - 1.0), forward)       # 0.5 m forward where the truth stood
    est[t > 2.0, :2] += 0.5 * forward
    segs = segment_errors(t, est, t, true, [(0.0, 1.0, 'short'), (1.0, 2.0, 'still'), (2.0, 3.0, 'rest')])
    assert segs[0].error_m == pytest.approx(0.1, abs=1e-9)
    assert segs[0].along_m == pytest.approx(-0.1, abs=1e-9) and segs[0].across_m == pytest.approx(0.0, abs=1e-9)
    assert math.isnan(segs[1].along_m) and math.isnan(segs[1].across_m)    # the truth stood still
    assert segs[1].error_m == pytest.approx(0.5, abs=1e-9)
    # A veer: the truth goes 0.3 m to the left of the start heading, the estimate as far but turned 90 deg right.
    true2, est2 = np.zeros((len(t), 3)), np.zeros((len(t), 3))
    true2[:, 1] = 0.3 * t / 3.0
    est2[:, 0] = 0.3 * t / 3.0
    veer = segment_errors(t, est2, t, true2, [(0.0, 3.0, 'veer')])[0]
    assert veer.along_m == pytest.approx(-0.3, abs=1e-9)        # none of it along the true travel
    assert veer.across_m == pytest.approx(-0.3, abs=1e-9)       # 0.3 m to the right of it
