"""Teleop: the pure gamepad mapping, the shipped maps, bad YAML, and teleop_node over real DDS."""
import math

import pytest
import yaml

from snake_control.paths import ConfigError, resolve_teleop, teleop_names
from snake_control.teleop.mapping import TeleopMapper, load_teleop_config

XBOX_AXES, XBOX_BUTTONS = 8, 11


def joy(**held):
    """Xbox-layout Joy arrays: joy(lb=1, ly=0.5) etc."""
    axes, buttons = [0.0] * XBOX_AXES, [0] * XBOX_BUTTONS
    names_b = {'a': 0, 'b': 1, 'x': 2, 'y': 3, 'lb': 4, 'rb': 5, 'view': 6, 'menu': 7}
    names_a = {'lx': 0, 'ly': 1, 'rx': 3, 'dpad_y': 7}
    for k, v in held.items():
        if k in names_b:
            buttons[names_b[k]] = int(v)
        else:
            axes[names_a[k]] = float(v)
    return axes, buttons


@pytest.fixture
def mapper():
    return TeleopMapper(load_teleop_config('xbox'))


def test_shipped_maps_load():
    assert {'xbox', 'playstation'} <= set(teleop_names())
    for name in teleop_names():
        cfg = load_teleop_config(name)
        assert cfg.deadman not in cfg.estop_release


def test_deadman_gates_motion_and_release_gives_zero(mapper):
    cfg = mapper.config
    out = mapper.update(*joy(ly=1.0, rx=-0.5), now_s=0.0)
    assert out.twist is None, 'no deadman: nothing published'
    out = mapper.update(*joy(lb=1, ly=1.0, lx=0.5, rx=-0.5), now_s=0.1)
    s = cfg.speed_scales[cfg.initial_speed_scale]
    assert out.twist == pytest.approx((cfg.limits['max_forward_m_s'] * s,
                                       0.5 * cfg.limits['max_sideways_m_s'] * s,
                                       -0.5 * cfg.limits['max_turn_rad_s'] * s))
    out = mapper.update(*joy(ly=1.0), now_s=0.2)
    assert out.twist == (0.0, 0.0, 0.0)
    assert mapper.update(*joy(ly=1.0), now_s=0.3).twist is None, 'zero once, then silence'


def test_deadzone_nan_and_short_arrays(mapper):
    out = mapper.update(*joy(lb=1, ly=0.05, rx=float('nan')), now_s=0.0)
    assert out.twist == (0.0, 0.0, 0.0)
    out = mapper.update([1.0, 1.0], [0, 0, 0, 0, 1], now_s=0.1)   # too few axes: turn reads 0
    assert out.twist[2] == 0.0 and out.twist[0] > 0
    out = mapper.update([5.0, 50.0, 0, 0], [0, 0, 0, 0, 1], now_s=0.2)  # out-of-range axis is clamped
    assert out.twist[0] == pytest.approx(mapper.config.limits['max_forward_m_s'] * mapper.speed_scale)


def test_speed_scale_steps_on_press_edges(mapper):
    scales = mapper.config.speed_scales
    start = mapper.speed_index
    mapper.update(*joy(dpad_y=-1), now_s=0.0)
    mapper.update(*joy(dpad_y=-1), now_s=0.1)          # held: one step only
    assert mapper.speed_index == max(start - 1, 0)
    for t in range(10):
        mapper.update(*joy(dpad_y=1 if t % 2 == 0 else 0), now_s=1 + t)
    assert mapper.speed_index == len(scales) - 1
    out = mapper.update(*joy(lb=1, ly=1.0), now_s=20)
    assert out.twist[0] == pytest.approx(mapper.config.limits['max_forward_m_s'] * scales[-1])


def test_gait_cycle_and_pick():
    m = TeleopMapper(load_teleop_config('xbox'), gait_cycle=['a', 'b', 'c'])
    picked = []
    for t, held in enumerate([{'y': 1}, {}, {'y': 1}, {}, {'y': 1}, {}, {'x': 1}, {}]):
        out = m.update(*joy(**held), now_s=t)
        if out.gait:
            picked.append(out.gait)
    assert picked == ['b', 'c', 'a', 'c']
    out = m.update(*joy(a=1), now_s=10)
    assert out.gait == 'lateral_undulation'


def test_estop_latches_until_release_combination(mapper):
    assert mapper.update(*joy(b=1), now_s=0).estop is True
    assert mapper.update(*joy(), now_s=0.1).estop is None
    out = mapper.update(*joy(lb=1, ly=1.0), now_s=0.2)
    assert out.twist is None and mapper.estopped, 'latched: the deadman does not move it'
    assert mapper.update(*joy(view=1), now_s=0.3).estop is None, 'half the combination does not release'
    assert mapper.update(*joy(view=1, menu=1, b=1), now_s=0.4).estop is None, 'estop held wins'
    assert mapper.update(*joy(view=1, menu=1), now_s=0.5).estop is False
    assert not mapper.estopped
    assert mapper.update(*joy(lb=1, ly=1.0), now_s=0.6).twist[0] > 0


def test_estop_while_moving_publishes_zero(mapper):
    mapper.update(*joy(lb=1, ly=1.0), now_s=0)
    out = mapper.update(*joy(lb=1, ly=1.0, b=1), now_s=0.1)
    assert out.estop is True and out.twist == (0.0, 0.0, 0.0)


def test_joystick_timeout(mapper):
    mapper.update(*joy(lb=1, ly=1.0), now_s=0)
    assert mapper.tick(0.1).twist is None
    assert mapper.tick(mapper.config.timeout_s + 0.01).twist == (0.0, 0.0, 0.0)
    assert mapper.tick(5.0).twist is None


def _xbox_doc():
    return yaml.safe_load(resolve_teleop('xbox').read_text())


@pytest.mark.parametrize('edit, key', [
    (lambda d: d.pop('deadman'), 'deadman'),
    (lambda d: d['axes']['turn'].update(axis=-1), 'axes.turn.axis'),
    (lambda d: d['limits'].update(max_forward_m_s='fast'), 'limits.max_forward_m_s'),
    (lambda d: d['buttons'].update(estop_release=[{'button': 6}]), 'buttons.estop_release'),
    (lambda d: d['buttons'].update(estop={'button': 1, 'axis': 2}), 'buttons.estop'),
    (lambda d: d.update(speed_scales=[1.0, 0.5]), 'speed_scales'),
    (lambda d: d.update(schema=7), 'schema'),
    (lambda d: d.update(colour='red'), 'colour'),
    (lambda d: d['gaits'].update(cycle=[]), 'gaits.cycle'),
])
def test_bad_yaml_names_file_and_key(tmp_path, edit, key):
    doc = _xbox_doc()
    edit(doc)
    path = tmp_path / 'bad_pad.yaml'
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        load_teleop_config(path)
    assert str(path) in str(err.value) and key in str(err.value)


def test_unparsable_yaml(tmp_path):
    path = tmp_path / 'broken.yaml'
    path.write_text('deadman: {button: 4\n')
    with pytest.raises(ConfigError, match='broken.yaml'):
        load_teleop_config(path)


@pytest.mark.ros
def test_teleop_node_over_dds():
    from geometry_msgs.msg import Twist
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Joy
    from std_msgs.msg import Bool, String

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.qos import ESTOP_QOS
    from snake_control.nodes.teleop_node import TeleopNode

    h = RosHarness()
    try:
        h.add(TeleopNode(context=h.context, parameter_overrides=[
            Parameter('gait_cycle', Parameter.Type.STRING_ARRAY, ['serpentine', 'rolling'])]))
        cmd = h.record(Twist, 'cmd_vel')
        gait = h.record(String, 'gait/select')
        estop = h.record(Bool, 'estop', ESTOP_QOS)
        pub = h.publisher(Joy, 'joy')
        h.wait_for_subscribers(pub)

        def send(**held):
            axes, buttons = joy(**held)
            pub.publish(Joy(axes=axes, buttons=buttons))

        send(lb=1, ly=1.0, rx=1.0)
        assert wait_until(lambda: cmd and cmd[-1][1].linear.x > 0)
        assert cmd[-1][1].angular.z > 0
        send(ly=1.0, rx=1.0)                      # deadman released
        assert wait_until(lambda: cmd[-1][1].linear.x == 0.0 and cmd[-1][1].angular.z == 0.0)
        send(y=1)
        assert wait_until(lambda: gait and gait[-1][1].data == 'rolling')
        send(b=1)
        assert wait_until(lambda: estop and estop[-1][1].data is True)
        n = len(cmd)
        send(lb=1, ly=1.0)
        send(view=1, menu=1)
        assert wait_until(lambda: len(estop) == 2 and estop[-1][1].data is False)
        assert all(m.linear.x == 0.0 for _, m in cmd[n:]), 'no motion while the e-stop was latched'
        send(lb=1, ly=1.0)
        assert wait_until(lambda: cmd[-1][1].linear.x > 0)
        # Joystick timeout: no more Joy, the node publishes zero by itself.
        assert wait_until(lambda: cmd[-1][1].linear.x == 0.0, timeout_s=5.0)
        assert not math.isnan(cmd[-1][1].linear.x)
    finally:
        h.close()


def test_a_press_during_a_stalled_executor_is_not_lost():
    """joy_node sends 20-50 messages a second; an executor busy for a quarter of a second must still see a
    button pressed in that time once it catches up (an e-stop or a gait switch), not only the last few
    messages of the burst."""
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Joy
    from std_msgs.msg import String

    from rosutil import RosHarness
    from snake_control.nodes.qos import COMMAND_QOS
    from snake_control.nodes.teleop_node import TeleopNode

    h = RosHarness()
    context = rclpy.Context()
    rclpy.init(context=context)
    teleop = TeleopNode(context=context, parameter_overrides=[
        Parameter('gait_cycle', Parameter.Type.STRING_ARRAY, ['serpentine', 'rolling'])])
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(teleop)

    def spin_until(predicate, timeout_s=10.0):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and not predicate():
            executor.spin_once(timeout_sec=0.02)
        return predicate()

    try:
        gait = h.record(String, 'gait/select')
        pub = h.publisher(Joy, 'joy', COMMAND_QOS)          # as the script player and joy_node send
        assert spin_until(lambda: pub.get_subscription_count() > 0 and teleop.gait_pub.get_subscription_count() > 0)
        # The teleop's executor does not run while a quarter second of Joy arrives (at 100 Hz, the y
        # button pressed in the middle of it).
        for k in range(25):
            axes, buttons = joy(y=1 if k in (8, 9) else 0)
            pub.publish(Joy(axes=axes, buttons=buttons))
            time.sleep(0.01)
        assert spin_until(lambda: bool(gait), timeout_s=5.0), 'the press was lost'
        assert gait[-1][1].data == 'rolling'
    finally:
        executor.shutdown()
        teleop.destroy_node()
        rclpy.try_shutdown(context=context)
        h.close()


@pytest.mark.ros
def test_teleop_node_bad_map_fails_with_file_and_key(tmp_path):
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from snake_control.nodes.teleop_node import TeleopNode

    doc = _xbox_doc()
    doc['axes']['forward'] = {'axis': 'one'}
    path = tmp_path / 'pad.yaml'
    path.write_text(yaml.safe_dump(doc))
    ctx = Context()
    rclpy.init(context=ctx)
    try:
        with pytest.raises(ConfigError, match=r'pad\.yaml: axes\.forward\.axis'):
            TeleopNode(context=ctx, parameter_overrides=[Parameter('teleop', value=str(path))])
    finally:
        ctx.try_shutdown()
