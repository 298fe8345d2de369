"""snake bringup: parameters reach each node by its full name, command-line errors, the emulated bus."""
import pytest
import yaml

from snake_control.app.bringup import context_arguments, parameters_file
from snake_control.cli import main
from snake_control.app.graph import GraphArgs, NodeSpec, build_graph


def test_parameters_file_sections_by_full_name(tmp_path):
    specs = [s for s in build_graph(GraphArgs(robot='wheeled_8', bus='sim', namespace='lab/s1'),
                                    port='/dev/pts/4')
             if s.in_process]
    doc = yaml.safe_load(parameters_file(specs, tmp_path).read_text())
    assert set(doc) == {'/lab/s1/driver_node', '/lab/s1/gait_node', '/lab/s1/estimator_node',
                        '/lab/s1/teleop_node'}
    assert doc['/lab/s1/driver_node']['ros__parameters']['port'] == '/dev/pts/4'
    args = context_arguments(specs, 'lab/s1', tmp_path / 'p.yaml')
    assert args[:3] == ['--ros-args', '--params-file', str(tmp_path / 'p.yaml')]
    assert '__ns:=/lab/s1' in args


def test_remappings_are_per_node(tmp_path):
    spec = NodeSpec('snake_control', 'gait_node', 'gait_node', 'snake', {}, remappings=(('cmd_vel',
                                                                                         '/nav/cmd_vel'),))
    assert context_arguments([spec], 'snake', tmp_path / 'p.yaml')[-2:] == ['-r',
                                                                            'gait_node:cmd_vel:=/nav/cmd_vel']


@pytest.mark.ros
def test_parameters_reach_an_in_process_node(tmp_path):
    """The mechanism bringup relies on: a params file and __ns in the context's global arguments."""
    import rclpy
    from rclpy.context import Context

    from snake_control.nodes.teleop_node import TeleopNode
    spec = NodeSpec('snake_control', 'teleop_node', 'pad_teleop', 'snake2',
                    {'teleop': 'playstation', 'gait_cycle': ['rolling', 'serpentine']})
    ctx = Context()
    rclpy.init(args=context_arguments([spec], 'snake2', parameters_file([spec], tmp_path)), context=ctx)
    try:
        node = TeleopNode(context=ctx, cli_args=['--ros-args', '-r', '__node:=pad_teleop'])
        assert node.get_namespace() == '/snake2' and node.get_name() == 'pad_teleop'
        assert node.mapper.config.name == 'playstation'
        assert node.mapper.gait_cycle == ('rolling', 'serpentine')
        node.destroy_node()
    finally:
        ctx.try_shutdown()


@pytest.mark.parametrize('argv, message', [
    (['bringup', '--bus', 'sim', '--robot', 'anaconda'], 'anaconda'),
    (['bringup', '--bus', 'real', '--physics', 'mujoco'], '--physics needs --bus sim'),
    (['bringup', '--bus', 'sim', '--duration', '-1'], '--duration'),
    (['bringup', '--bus', 'sim', '--script', '/nonexistent/s.yaml'], 's.yaml'),
    (['bringup', '--bus', 'sim', '--teleop', 'n64'], 'n64'),
])
def test_bringup_user_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_sim_bus_process_reports_its_port_and_answers():
    from snake_control.app.sim_bus import sim_bus_args
    from snake_control.dynamixel.simproc import SimBusProcess
    from snake_control.robot import load_robot

    robot = load_robot('kinematic_snake_3')
    with SimBusProcess(sim_bus_args('kinematic_snake_3', 1000000)) as sim:
        state = sim.command('state')
        assert sorted(int(i) for i in state['servos']) == sorted(robot.servo_ids)
        assert not any(s['torque'] for s in state['servos'].values())
    assert sim.process.returncode is not None


def test_sim_bus_failure_is_reported():
    from snake_control.dynamixel.simproc import SimBusProcess
    with pytest.raises(RuntimeError, match='did not report its device path'):
        SimBusProcess(['--servos', '3', '--faults', 'bogus=1'], start_timeout_s=20)


def test_sim_bus_physics_names_are_checked():
    from snake_control.app.sim_bus import sim_bus_args
    args = sim_bus_args('kinematic_snake_3', None, 'mujoco')
    assert args[args.index('--physics') + 1] == 'snake_control.nodes.sim_imu:mujoco_plant'
    assert args[args.index('--ids') + 1] == '1,2'
    with pytest.raises(ValueError, match="--physics 'warp' unknown"):
        sim_bus_args('kinematic_snake_3', None, 'warp')


@pytest.mark.ros
def test_ctrl_c_turns_torque_off_before_the_bus_stops():
    """Ctrl-C in a terminal signals the whole process group: the emulated bus must outlive the driver's
    torque-off, and bringup must report torque off and exit 0."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, '-m', 'snake_control.cli', 'bringup', '--robot', 'kinematic_snake_3',
                             '--bus', 'sim'], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            lines.append(line)
            if line.startswith('running') or time.monotonic() > deadline:
                break
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = ''.join(lines) + out
    assert proc.returncode == 0, text[-2000:]
    assert 'stopped (SIGINT)' in text and 'torque off' in text, text[-2000:]
    # A clean stop, in every process: no callback failure reported by an executor, no future left
    # holding an exception (rclpy prints 'The following exception was never retrieved' for one).
    for bad in ('Traceback', 'Exception in', 'never retrieved', 'KeyboardInterrupt'):
        assert bad not in text, text[-3000:]


@pytest.mark.ros
def test_bringup_starts_one_emulated_bus_per_bus_of_the_robot(tmp_path):
    """A robot on two buses: bringup --bus sim starts both, the driver node runs them, torque goes off on
    every servo of both at the end."""
    import os
    import subprocess
    import sys

    import yaml

    from snake_control.paths import robots_dir
    data = yaml.safe_load((robots_dir() / 'wheeled_8.yaml').read_text())
    del data['bus']['port']
    names = [j['name'] for j in data['joints']]
    data['buses'] = [{'port': '/dev/null-a', 'joints': names[:3]}, {'port': '/dev/null-b', 'joints': names[3:]}]
    path = tmp_path / 'wheeled_8_two_buses.yaml'
    path.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'bringup', '--robot', str(path), '--bus', 'sim',
                           '--duration', '4'], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)
    text = proc.stdout
    assert proc.returncode == 0, text[-3000:]
    bus_line = next(line for line in text.splitlines() if 'emulated bus on' in line)
    assert bus_line.count('ttyDXL') == 2, bus_line
    assert 'running' in text and 'torque off' in text and 'NOT' not in text, text[-3000:]
    if os.path.exists('/proc/stat'):
        # The summary says how busy the computer was: the run's processes (the driver's, both buses') its own.
        cpu = next(line for line in text.splitlines() if line.startswith('computer: this run used'))
        assert float(cpu.split('used ')[1].split(' cores')[0]) > 0.05, cpu


@pytest.mark.ros
def test_a_multi_threaded_run_leaves_no_failed_callback_behind(capfd):
    """executor_kind='multi' (the benches' comparison): callbacks still in rclpy's thread pool when the run
    stops run to their end before the executor and the nodes go. They used to find the executor's guard
    condition destroyed: their Tasks kept 'cannot use Destroyable because destruction was requested' and
    printed it as 'never retrieved' whenever the garbage collector reached them, often during a later run.
    Timers whose callbacks sleep keep the pool's threads busy, so the stop always finds callbacks queued."""
    import gc
    import time

    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.node import Node

    from snake_control.app.bringup import run_bringup

    held = {}

    def on_ready(run):
        node = Node('busy', context=run.context)
        group = ReentrantCallbackGroup()
        for _ in range(8):
            node.create_timer(0.005, lambda: time.sleep(0.05), callback_group=group)
        run.executor.add_node(node)
        held.update(node=node, executor=run.executor)

    result = run_bringup(GraphArgs(robot='kinematic_snake_3', bus='sim', joy=False), duration_s=1.0,
                         log=lambda line: None, on_ready=on_ready, executor_kind='multi', driver_in_process=True)
    assert result.torque_off
    held['node'].destroy_node()
    # Whatever is left in the pool runs now, before the collector looks (the executor keeps its pool in
    # _executor); a failed Task is only freed by the collector, as its exception's traceback refers to it.
    held.pop('executor')._executor.shutdown(wait=True)
    held.clear()
    gc.collect()
    err = capfd.readouterr().err
    assert 'never retrieved' not in err, err[-3000:]


@pytest.mark.ros
def test_at_400_hz_the_gait_ticks_at_100_hz_and_the_driver_carries_its_commands_on():
    """The graph at rate 400: the gait node at its own 100 Hz, the driver's bus at 400 Hz carrying each
    command on for one gait period (parameters as the nodes took them, not how fast anything ran)."""
    from snake_control.app.bringup import run_bringup
    seen = {}

    def before_stop(run):
        gait, driver = run.nodes['gait_node'], run.nodes['driver_node'].driver
        seen.update(gait_hz=gait.rate_hz, ticks=gait.ticks, bus_hz=driver.rate_hz,
                    reach_s=driver.config.command_extrapolation_s)

    result = run_bringup(GraphArgs(robot='kinematic_snake_3', bus='sim', rate=400, joy=False), duration_s=1.0,
                         log=lambda line: None, before_stop=before_stop, driver_in_process=True)
    assert result.torque_off
    assert seen['gait_hz'] == 100.0 and seen['ticks'] > 0, seen
    assert seen['bus_hz'] == 400.0 and seen['reach_s'] == pytest.approx(0.01), seen
    assert result.driver_diagnostics['rate_hz_target'] == 400.0
