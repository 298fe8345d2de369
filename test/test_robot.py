"""Robot YAML loading: every shipped robot loads; every malformed file is refused with a message that
names the file, the key path and the problem, and nothing crashes with another exception."""
import copy
import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snake_control.paths import robot_names, robots_dir
from snake_control.paths import ConfigError
from snake_control.robot import load_robot, robot_from_dict, robot_from_yaml

SHIPPED = robot_names()


def test_shipped_robots_are_the_three_of_the_design():
    assert set(SHIPPED) >= {'pitch_yaw_32', 'wheeled_8', 'kinematic_snake_3'}


@pytest.mark.parametrize('name', SHIPPED)
def test_every_shipped_robot_loads_and_is_consistent(name):
    robot = load_robot(name)
    assert robot.name == name
    assert robot.n_links == robot.n_joints + 1
    assert len(set(robot.servo_ids)) == robot.n_joints
    assert len(set(robot.joint_names)) == robot.n_joints
    assert (robot.lower_rad < robot.upper_rad).all()
    if robot.kind == 'planar':
        assert robot.wheels is not None and set(robot.axes) == {'yaw'}


def test_pitch_yaw_32_alternates_axes_and_flips_yaw_servos():
    robot = load_robot('pitch_yaw_32')
    assert robot.n_joints == 32
    assert robot.axes == ['pitch', 'yaw'] * 16
    assert [j.direction for j in robot.joints] == [1, -1] * 16
    assert robot.bus.servo.name == 'XM430-W350'
    assert robot.bus.servo.model_number == 1020


def test_wheeled_and_three_link_shapes():
    assert load_robot('wheeled_8').n_links == 8
    assert load_robot('kinematic_snake_3').n_joints == 2


def test_servo_angle_mapping_round_trips():
    joint = load_robot('pitch_yaw_32').joints[1]
    assert joint.direction == -1
    assert joint.servo_angle_rad(0.3) == pytest.approx(-0.3 + joint.offset_rad)
    assert joint.joint_angle_rad(joint.servo_angle_rad(0.3)) == pytest.approx(0.3)


def _base():
    return yaml.safe_load((robots_dir() / 'wheeled_8.yaml').read_text())


def _set(path, value):
    def edit(data):
        node = data
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


def _delete(path):
    def edit(data):
        node = data
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return edit


def _copy_field(path_to, path_from):
    def edit(data):
        src = data
        for k in path_from:
            src = src[k]
        _set(path_to, src)(data)
    return edit


@pytest.mark.parametrize('edit, key, problem', [
    (_set(('link', 'lenght_m'), 0.1), 'link.lenght_m', 'unknown key'),
    (_delete(('link', 'mass_kg')), 'link.mass_kg', 'missing'),
    (_set(('link', 'length_m'), 'long'), 'link.length_m', 'expected a number'),
    (_copy_field(('joints', 3, 'id'), ('joints', 1, 'id')), 'joints[3].id', 'also joints[1]'),
    (_copy_field(('joints', 2, 'name'), ('joints', 0, 'name')), 'joints[2].name', 'duplicate joint name'),
    (_set(('joints', 0, 'upper_rad'), 3.5), 'joints[0].upper_rad', 'outside the XM430-W350 position range'),
    (_set(('joints', 0, 'offset_rad'), 2.5), 'joints[0]', 'position range'),
    (_set(('link', 'length_m'), 0), 'link.length_m', 'must be between 0.005 and 2 m'),
    (_set(('wheels', 'radius_m'), math.nan), 'wheels.radius_m', 'finite'),
    (_set(('joints', 0, 'axis'), 'pitch'), 'joints[0].axis', 'yaw joints only'),
    (_set(('bus', 'baud'), 1234), 'bus.baud', 'not a Dynamixel baud rate'),
    (_set(('joints', 4, 'direction'), 0), 'joints[4].direction', 'must be 1 or -1'),
    (_set(('joint_defaults', 'velocity_limit_rad_s'), -1), 'joint_defaults.velocity_limit_rad_s', 'must be between'),
    (_set(('joints',), []), 'joints', 'at least 2 joints'),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_field_is_refused_with_its_key_path(edit, key, problem):
    data = _base()
    edit(data)
    with pytest.raises(ConfigError) as err:
        robot_from_dict(data, 'robots/bad.yaml')
    assert str(err.value).startswith('robots/bad.yaml: '), err.value
    assert key in err.value.key, err.value
    assert problem in err.value.problem, err.value


def test_bad_yaml_syntax_names_line():
    with pytest.raises(ConfigError) as err:
        robot_from_yaml('name: [unclosed\n', 'robots/broken.yaml')
    assert 'robots/broken.yaml' in str(err.value) and 'line' in str(err.value)


def test_missing_file_names_it():
    with pytest.raises(FileNotFoundError, match='no_such_robot'):
        load_robot('no_such_robot')


# --- property-based: random corruption of a valid file ----------------------------------------

def _paths(node, prefix=()):
    """Every key path in a nested YAML structure."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


junk = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@st.composite
def corrupted(draw):
    data = _base() if draw(st.booleans()) else yaml.safe_load((robots_dir() / 'pitch_yaw_32.yaml').read_text())
    paths = [p for p in _paths(data) if p]
    path = draw(st.sampled_from(paths))
    parent = data
    for k in path[:-1]:
        parent = parent[k]
    action = draw(st.sampled_from(['replace', 'delete', 'add']))
    if action == 'replace':
        parent[path[-1]] = draw(junk)
    elif action == 'delete':
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=6))] = draw(junk)
    else:
        parent.append(draw(junk))
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_corrupted_files_are_refused_with_a_named_key_or_accepted_whole(data):
    original = copy.deepcopy(data)
    try:
        robot = robot_from_dict(data, 'robots/fuzz.yaml')
    except ConfigError as err:
        assert str(err).startswith('robots/fuzz.yaml: ')
        assert err.problem
        return
    # Some corruptions are still valid files (a new description, a changed ID that stays unique):
    # then the model must reflect the file and stay safe to drive.
    assert data == original
    assert all(math.isfinite(v) for v in (*robot.lower_rad, *robot.upper_rad, robot.link_length_m))
    assert (robot.lower_rad < robot.upper_rad).all()
    assert len(set(robot.servo_ids)) == robot.n_joints


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes(text):
    try:
        robot_from_yaml(text, 'robots/text.yaml')
    except ConfigError as err:
        assert str(err).startswith('robots/text.yaml')


# --- property-based: every number at every numeric key path ------------------------------------

def _numeric_paths(data):
    return [p for p in _paths(data) if p and isinstance(_get(data, p), (int, float))
            and not isinstance(_get(data, p), bool)]


def _get(data, path):
    for k in path:
        data = data[k]
    return data


extreme = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([1e308, -1e308, 1e-300, -1e-300, 0.0, -0.0, 10**400, -10**400, 2**63]),
                    st.integers(-10**6, 10**6))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_number_anywhere_is_in_its_range_or_refused_by_key(draw_data):
    """1e308 Hz, a 1e308 m link or a 1e-300 rad/s limit used to load and crash later."""
    from snake_control.robot import LIMITS
    data = _base() if draw_data.draw(st.booleans()) else \
        yaml.safe_load((robots_dir() / 'pitch_yaw_32.yaml').read_text())
    path = draw_data.draw(st.sampled_from(_numeric_paths(data)))
    value = draw_data.draw(extreme)
    _set(path, value)(data)
    key = '.'.join(str(k) for k in path)
    try:
        robot = robot_from_dict(data, 'robots/fuzz.yaml')
    except ConfigError as err:
        assert str(err).startswith('robots/fuzz.yaml: ') and err.problem and '\n' not in str(err)
        leaf = str(path[-1])
        assert leaf in err.key or 'joints' in err.key or key.startswith('joint_defaults'), (key, err)
        return
    assert LIMITS['control_rate_hz'].low <= robot.bus.control_rate_hz <= LIMITS['control_rate_hz'].high
    assert LIMITS['link.length_m'].low <= robot.link_length_m <= LIMITS['link.length_m'].high
    for name in ('velocity_limit_rad_s', 'acceleration_limit_rad_s2'):
        values = getattr(robot, name)
        assert np.all(values >= LIMITS[name].low) and np.all(values <= LIMITS[name].high)


def test_more_joints_than_one_sync_write_can_command_are_refused():
    data = _base()
    template = data['joints'][0]
    data['joints'] = [{**template, 'name': f'j{k}', 'id': k} for k in range(253)]
    with pytest.raises(ConfigError, match=r'joints: at most 200 joints'):
        robot_from_dict(data, 'robots/long.yaml')


def test_deeply_nested_yaml_and_non_utf8_files_are_refused_naming_the_file(tmp_path):
    with pytest.raises(ConfigError, match='robots/deep.yaml: .*nested'):
        robot_from_yaml('[' * 100_000, 'robots/deep.yaml')
    binary = tmp_path / 'binary.yaml'
    binary.write_bytes(b'name: \xff\xfe\x00snake\n')
    with pytest.raises(ConfigError, match='binary.yaml: .*UTF-8'):
        load_robot(str(binary))


def _two_buses(data):
    del data['bus']['port']
    names = [j['name'] for j in data['joints']]
    data['buses'] = [{'port': '/dev/ttyA', 'joints': f'{names[0]}..{names[3]}'},
                     {'port': '/dev/ttyB', 'joints': names[4:], 'baud': 2000000}]


def test_a_robot_may_split_its_joints_over_several_buses():
    data = _base()
    _two_buses(data)
    robot = robot_from_dict(data, 'robots/two.yaml')
    a, b = robot.bus_lines
    assert (a.port, a.baud, a.joint_names) == ('/dev/ttyA', data['bus']['baud'], tuple(robot.joint_names[:4]))
    assert (b.port, b.baud, b.joint_names) == ('/dev/ttyB', 2000000, tuple(robot.joint_names[4:]))
    half = robot.on_line(b, port='/dev/ttyC')
    assert half.joint_names == robot.joint_names[4:] and half.bus.port == '/dev/ttyC'
    assert half.bus.baud == 2000000 and len(half.bus_lines) == 1
    shipped = load_robot('pitch_yaw_32_two_buses')
    assert [len(line.joint_names) for line in shipped.bus_lines] == [16, 16]
    assert shipped.joints == load_robot('pitch_yaw_32').joints


def test_the_two_bus_robot_has_pitch_yaw_32s_skin_and_calibration():
    """Only its wiring differs: the estimator's axial weight and the gaits' cmd_vel mapping are the same."""
    from snake_control.gaits.calibration import SIM_SUFFIX, calibration_path, find_calibration
    from snake_control.gaits.reach import cmd_vel_meaning

    two, one = load_robot('pitch_yaw_32_two_buses'), load_robot('pitch_yaw_32')
    assert two.axial_weight == one.axial_weight
    for suffix in ('.calibration.yaml', SIM_SUFFIX):
        assert calibration_path(two, suffix) == calibration_path(one, suffix)
    assert find_calibration(two) is not None
    for gait in ('serpentine', 'rolling', 'aeh_sidewinding'):
        a, b = cmd_vel_meaning(two, gait), cmd_vel_meaning(one, gait)
        assert (a.mapping, a.max_speed, a.stride) == ('calibration', b.max_speed, b.stride)


@pytest.mark.parametrize('value', ['../pitch_yaw_32', 'a/b', 5, ['x']])
def test_a_calibration_name_that_is_no_robot_beside_it_is_refused(value):
    data = _base()
    data['calibration'] = value
    with pytest.raises(ConfigError, match='robots/bad.yaml: calibration: expected the name of a robot YAML'):
        robot_from_dict(data, 'robots/bad.yaml')


def test_a_one_bus_robot_has_one_line_with_every_joint():
    robot = load_robot('wheeled_8')
    (line,) = robot.bus_lines
    assert (line.port, line.baud, line.joint_names) == (robot.bus.port, robot.bus.baud, tuple(robot.joint_names))


def _bus_edit(fn):
    def edit(data):
        _two_buses(data)
        fn(data)
    return edit


@pytest.mark.parametrize('edit, key, problem', [
    (lambda d: (_two_buses(d), d['bus'].__setitem__('port', '/dev/x')), 'bus.port', 'gives each bus its port'),
    (_bus_edit(lambda d: d['buses'][1].__setitem__('port', '/dev/ttyA')), 'buses[1].port', 'also buses[0]'),
    (_bus_edit(lambda d: d['buses'][1].__setitem__('baud', 1234)), 'buses[1].baud', 'not a Dynamixel baud'),
    (_bus_edit(lambda d: d['buses'][0].__setitem__('joints', ['nope'])), 'buses[0].joints', "unknown joint 'nope'"),
    (_bus_edit(lambda d: d['buses'][1]['joints'].pop()), 'buses', 'on no bus'),
    (_bus_edit(lambda d: d['buses'][1]['joints'].append(d['joints'][0]['name'])), 'buses[1].joints',
     'also on buses[0]'),
    (_bus_edit(lambda d: d['buses'][0].pop('port')), 'buses[0].port', 'missing'),
    (_bus_edit(lambda d: d['buses'][0].__setitem__('wire', 1)), 'buses[0].wire', 'unknown key'),
    (_bus_edit(lambda d: d.__setitem__('buses', [])), 'buses', 'expected a list'),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_bus_lines_are_refused_with_their_key(edit, key, problem):
    data = _base()
    edit(data)
    with pytest.raises(ConfigError) as err:
        robot_from_dict(data, 'robots/bad.yaml')
    assert key == err.value.key, err.value
    assert problem in err.value.problem, err.value
