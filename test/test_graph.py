"""The node graph: specs from launch arguments, console scripts, launch files (where launch_ros exists)."""
import ast
import importlib
import importlib.util
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from snake_control.app.graph import (GraphArgs, LaunchArgument, build_graph, launch_arguments, ros_arguments,
                                 rviz_config_path)
from snake_control.paths import robot_names, share_dir

ROOT = Path(__file__).resolve().parents[1]


def console_scripts() -> dict[str, str]:
    """name -> 'module:function' from setup.py's entry_points, read without running setup()."""
    tree = ast.parse((ROOT / 'setup.py').read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == 'console_scripts':
                    scripts = [ast.literal_eval(e) for e in value.elts]
                    return dict((s.split('=')[0].strip(), s.split('=')[1].strip()) for s in scripts)
    raise AssertionError('setup.py declares no console_scripts')


@pytest.mark.parametrize('robot', robot_names())
def test_every_executable_is_a_console_script(robot):
    scripts = console_scripts()
    specs = build_graph(GraphArgs(robot=robot, bus='sim', joy=True, rviz=True))
    ours = [s for s in specs if s.package == 'snake_control']
    assert {s.executable for s in ours} == {'gait_node', 'driver_node', 'estimator_node', 'teleop_node'}
    for spec in ours:
        assert spec.executable in scripts, f'{spec.executable} is not a console script in setup.py'
        assert scripts[spec.executable] == f'{spec.module}:main', spec
        # The class bringup instantiates is in the module the console script runs.
        module = importlib.import_module(spec.module)
        assert hasattr(module, spec.class_name) and hasattr(module, 'main'), spec
        # `ros2 run snake_control X` names the node as the graph does.
        assert getattr(module, spec.class_name).NODE_NAME == spec.name, spec
        if spec.executable != 'driver_node':   # the driver's main handles its own signals
            assert 'run_node' in module.main.__code__.co_names, f'{spec.module}.main does not use run_node'
    assert {s.executable for s in specs} >= {'robot_state_publisher', 'joy_node', 'rviz2'}


def test_graph_follows_arguments():
    specs = {s.name: s for s in build_graph(GraphArgs(robot='wheeled_8', bus='real', port='/dev/ttyACM3',
                                                      baud=1000000, rate=50, namespace='lab/snake2',
                                                      joy=False))}
    assert 'joy_node' not in specs and 'rviz2' not in specs
    driver = specs['driver_node']
    assert driver.parameters['port'] == '/dev/ttyACM3' and driver.parameters['baud'] == 1000000
    assert specs['gait_node'].parameters['rate_hz'] == 50.0
    assert all(s.namespace == 'lab/snake2' for s in specs.values())
    assert specs['gait_node'].fqn == '/lab/snake2/gait_node'
    assert Path(specs['estimator_node'].parameters['robot']).name == 'wheeled_8.yaml'
    # Defaults come from the robot YAML.
    default = {s.name: s for s in build_graph(GraphArgs(robot='pitch_yaw_32', bus='real'))}
    assert default['driver_node'].parameters['baud'] == 4000000
    assert default['driver_node'].parameters['port'] == '/dev/ttyUSB0'
    assert default['gait_node'].parameters['rate_hz'] == 100.0
    # bringup passes the emulated bus's device path.
    sim = {s.name: s for s in build_graph(GraphArgs(bus='sim'), port='/dev/pts/9')}
    assert sim['driver_node'].parameters['port'] == '/dev/pts/9'


def test_gait_runs_at_its_own_rate_under_a_faster_bus():
    """Above 100 Hz the gait keeps 100 Hz and the driver carries its commands on for one gait period;
    at 100 Hz and below both run at the control rate, with nothing carried on."""
    def rates(**kw):
        specs = {s.name: s for s in build_graph(GraphArgs(robot='pitch_yaw_32', bus='sim', **kw), port='/dev/null')}
        driver = specs['driver_node'].parameters
        return driver['rate'], specs['gait_node'].parameters['rate_hz'], driver['command_extrapolation']
    assert rates(rate=400) == (400.0, 100.0, 0.01)
    assert rates() == (100.0, 100.0, 0.0)
    assert rates(rate=50) == (50.0, 50.0, 0.0)
    assert rates(rate=400, gait_rate=200) == (400.0, 200.0, 0.005)
    assert rates(rate=400, gait_rate=400) == (400.0, 400.0, 0.0)
    assert rates(rate=100, gait_rate=400) == (100.0, 100.0, 0.0)     # never above the bus
    assert GraphArgs.from_strings({'rate': '400', 'gait_rate': '50'}).gait_rate == 50.0
    with pytest.raises(ValueError, match='gait_rate'):
        GraphArgs.from_strings({'gait_rate': '5'})


def test_launch_arguments_described_and_typed():
    args = launch_arguments()
    assert [a.name for a in args] == [f.name for f in fields(GraphArgs)], 'one launch argument per field'
    for a in args:
        assert isinstance(a, LaunchArgument) and len(a.description) > 15, a.name
        if a.choices:
            assert a.default in a.choices, a.name
    by_name = {a.name: a for a in args}
    for closed in ('bus', 'joy', 'rviz', 'physics'):
        assert by_name[closed].choices, f'{closed} is a closed set and needs choices'
    # The launch defaults, parsed, are GraphArgs' defaults.
    assert GraphArgs.from_strings({a.name: a.default for a in args}) == GraphArgs()


@pytest.mark.parametrize('values, match', [
    ({'bus': 'usb'}, 'bus'),
    ({'joy': 'maybe'}, 'joy'),
    ({'baud': 'fast'}, 'baud'),
    ({'rate': '-5'}, 'rate'),
    ({'namespace': 'bad name'}, 'namespace'),
    ({'physics': 'mujoco', 'bus': 'real'}, 'physics'),
    ({'colour': 'red'}, 'colour'),
])
def test_bad_arguments_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        GraphArgs.from_strings(values)


def test_unknown_robot_lists_shipped():
    with pytest.raises(FileNotFoundError, match='pitch_yaw_32'):
        GraphArgs.from_strings({'robot': 'anaconda'})


def test_ros_arguments_form():
    spec = next(s for s in build_graph(GraphArgs(robot='wheeled_8')) if s.name == 'teleop_node')
    args = ros_arguments(spec)
    assert args[:5] == ['--ros-args', '-r', '__node:=teleop_node', '-r', '__ns:=/snake']
    assert any(a.startswith('gait_cycle:=[') for a in args)


def test_rviz_config_parses():
    config = yaml.safe_load(rviz_config_path().read_text())
    classes = {d['Class'] for d in config['Visualization Manager']['Displays']}
    assert {'rviz_default_plugins/RobotModel', 'rviz_default_plugins/Odometry'} <= classes
    assert config['Visualization Manager']['Global Options']['Fixed Frame'] == 'odom'


def _load_launch(name):
    spec = importlib.util.spec_from_file_location(name.replace('.', '_'), share_dir() / 'launch' / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('name', ['gait.launch.py', 'display.launch.py'])
def test_launch_file_builds(name):
    pytest.importorskip('launch.actions', reason='launch is not installed (ROS 2 only, not on PyPI)')
    pytest.importorskip('launch_ros', reason='launch_ros is not installed (ROS 2 only, not on PyPI)')
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    description = _load_launch(name).generate_launch_description()
    declared = [e for e in description.entities if isinstance(e, DeclareLaunchArgument)]
    assert declared and all(d.description for d in declared)
    context = LaunchContext()
    for d in declared:
        d.visit(context)
    if name == 'gait.launch.py':
        context.launch_configurations['bus'] = 'real'
        context.launch_configurations['rviz'] = 'true'
    actions = []
    for e in description.entities:
        if isinstance(e, OpaqueFunction):
            actions += e.execute(context) or []
    from launch.actions import LogInfo
    executables = {getattr(a, 'node_executable', None) for a in actions}
    said = ' '.join(str(a.msg[0].text if hasattr(a.msg[0], 'text') else a.msg) for a in actions
                    if isinstance(a, LogInfo))
    # Nodes of other packages start where they are installed; elsewhere the launch says so and goes on.
    for package in ('robot_state_publisher', 'rviz2'):
        assert package in executables or f'{package} is not installed' in said, (executables, said)
    if name == 'gait.launch.py':
        assert {'driver_node', 'gait_node', 'estimator_node', 'teleop_node'} <= executables


def test_launch_files_are_python_that_compiles():
    # Checked everywhere, launch_ros or not: a syntax error must not wait for a ROS machine.
    for path in (ROOT / 'launch').glob('*.launch.py'):
        compile(path.read_text(), str(path), 'exec')
