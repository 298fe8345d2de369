"""Scripted teleop sessions: parsing, errors naming file and key, what is sent when; the recorder's
schemas and an MCAP round trip over real DDS."""
import pytest
import yaml

from snake_control.paths import share_dir
from snake_control.paths import ConfigError
from snake_control.teleop.script import ScriptClock, load_script

SCRIPTS = sorted((share_dir() / 'config' / 'scripts').glob('*.yaml'))


@pytest.mark.parametrize('path', SCRIPTS, ids=lambda p: p.name)
def test_shipped_scripts_load(path):
    script = load_script(path)
    assert script.duration_s >= script.events[-1].t_s


def test_events_hold_tap_and_silence(tmp_path):
    path = tmp_path / 's.yaml'
    path.write_text(yaml.safe_dump({'gamepad': 'xbox', 'events': [
        {'t': 0.0},
        {'t': 1.0, 'hold': ['LB'], 'axes': {'left_y': 0.5}, 'tap': ['Y']},
        {'t': 2.0, 'silent': True}]}))
    clock = ScriptClock(load_script(path))
    axes, buttons = clock.joy_at(0.5)
    assert not any(axes) and not any(buttons)
    axes, buttons = clock.joy_at(1.0)
    assert axes[1] == 0.5 and buttons[4] == 1 and buttons[3] == 1
    axes, buttons = clock.joy_at(1.05)
    assert buttons[4] == 1 and buttons[3] == 0, 'a tap is one message long'
    assert clock.joy_at(2.5) is None
    assert clock.finished(3.0) and not clock.finished(2.9)


@pytest.mark.parametrize('doc, key', [
    ({'events': [{'t': 0, 'hold': ['Start']}]}, 'events[0].hold'),
    ({'events': [{'t': 0, 'axes': {'left_y': 3}}]}, 'events[0].axes.left_y'),
    ({'events': [{'t': 2}, {'t': 1}]}, 'events[1].t'),
    ({'events': []}, 'events'),
    ({'gamepad': 'n64', 'events': [{'t': 0}]}, 'gamepad'),
    ({'events': [{'t': 0, 'jump': True}]}, 'events[0].jump'),
])
def test_bad_scripts_name_file_and_key(tmp_path, doc, key):
    path = tmp_path / 'bad_script.yaml'
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        load_script(path)
    assert 'bad_script.yaml' in str(err.value) and key in str(err.value)


def test_playstation_names():
    from snake_control.teleop.mapping import load_teleop_config
    pad = load_teleop_config('playstation')
    assert pad.button_names['L1'] == pad.deadman.button
    assert pad.n_buttons == 13


def test_msgdef_nests_dependencies_once():
    from snake_control.mcap_io import msgdef
    text = msgdef('diagnostic_msgs/msg/DiagnosticArray')
    assert text.count('MSG: std_msgs/Header') == 1
    assert text.count('MSG: builtin_interfaces/Time') == 1
    assert 'MSG: diagnostic_msgs/KeyValue' in text and 'MSG: diagnostic_msgs/DiagnosticStatus' in text


@pytest.mark.ros
def test_script_player_and_recorder_round_trip(tmp_path):
    from mcap_ros2.reader import read_ros2_messages
    from sensor_msgs.msg import Joy
    from std_msgs.msg import Bool

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.qos import ESTOP_QOS
    from snake_control.nodes.recorder import Recorder
    from snake_control.nodes.script_player import ScriptPlayer

    script = tmp_path / 's.yaml'
    script.write_text(yaml.safe_dump({'gamepad': 'xbox', 'rate_hz': 50, 'duration_s': 0.6, 'events': [
        {'t': 0.0, 'hold': ['LB'], 'axes': {'left_y': 1.0}}, {'t': 0.3, 'hold': ['B']}]}))
    h = RosHarness()
    out = tmp_path / 'session.mcap'
    try:
        recorder = h.add(Recorder(out, context=h.context))
        estop = h.publisher(Bool, 'estop', ESTOP_QOS)
        estop.publish(Bool(data=True))   # latched before the recorder subscribes: still recorded
        joys = h.record(Joy, 'joy')
        player = h.add(ScriptPlayer(script=load_script(script), context=h.context))
        assert wait_until(lambda: '/joy' in recorder.counts and '/estop' in recorder.counts)
        player.start()
        assert player.done.wait(5.0)
        assert wait_until(lambda: recorder.counts['/joy'] >= len(joys) > 10)
    finally:
        h.close()
    recorder.close()
    messages = list(read_ros2_messages(str(out)))
    recorded_joy = [m.ros_msg for m in messages if m.channel.topic == '/joy']
    assert len(recorded_joy) == len(joys)
    assert recorded_joy[0].buttons[4] == 1 and recorded_joy[0].axes[1] == 1.0
    assert recorded_joy[-1].buttons[1] == 1 and recorded_joy[-1].buttons[4] == 0
    assert [m.ros_msg.data for m in messages if m.channel.topic == '/estop'] == [True]
