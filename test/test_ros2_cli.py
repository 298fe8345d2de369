"""The user's own entry points, with the upstream ROS 2 command-line tools: the package built by colcon
into a workspace, `source install/setup.bash`, then `ros2 launch`, `ros2 node list`, `ros2 topic hz`,
`ros2 topic pub`, `ros2 param set` and `ros2 run` exactly as the README writes them, and Ctrl-C to the
launch's process group.

Needs the ROS 2 tools (`make ros2-tools`, from the team's shared folder) and colcon (.venv-colcon);
skipped with the reason elsewhere.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.ros2_workspace import ROOT, build_workspace, ros2_tools_missing, shell

MISSING = ros2_tools_missing()
pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.skipif(MISSING is not None, reason=MISSING or '')]


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    """The package as a ROS user has it: `colcon build` in a workspace, from the tracked files."""
    ws = build_workspace(tmp_path_factory.mktemp('ws'))
    assert (ws / 'install' / 'snake_control' / 'lib' / 'snake_control' / 'driver_node').exists()
    yield ws
    # `ros2 param set` starts the ros2 daemon, which would outlive the tests (and their virtualenv).
    subprocess.run(shell(ws, 'ros2 daemon stop'), capture_output=True, text=True, timeout=60)


def run(ws: Path, command: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(shell(ws, command), capture_output=True, text=True, timeout=timeout_s)


class Background:
    """A command line in its own process group, its output collected; stopped like a terminal's Ctrl-C."""

    def __init__(self, ws: Path, command: str, log_path: Path):
        self.log_path = log_path
        self.log = open(log_path, 'w')
        self.process = subprocess.Popen(shell(ws, command), stdout=self.log, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)

    def text(self) -> str:
        return self.log_path.read_text(errors='replace')

    def wait_for(self, pattern: str, timeout_s: float = 90.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.text()
            if re.search(pattern, text):
                return text
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f'no {pattern!r} in the output:\n{self.text()[-4000:]}')

    def ctrl_c(self, timeout_s: float = 60.0) -> int:
        """SIGINT to the whole process group, as a terminal sends it."""
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout_s)
        finally:
            self.kill()

    def kill(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


def poll(fn, timeout_s: float = 30.0, what: str = ''):
    """fn() until it returns something true; its last value otherwise (AssertionError)."""
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f'{what}: still {value!r} after {timeout_s:g} s')


def node_list_naming(ws: Path, nodes) -> str | None:
    """`ros2 node list`'s output when it names every one of nodes, else None. Without the daemon each call
    is a new DDS participant that discovers the graph afresh within its spin time: 5 s rather than the
    default 0.5, because a participant whose first announcements went unanswered hears the others only
    at their periodic ones, 3 s apart (a CI run listed the launched graph's nodes in none of its calls
    for 30 s, while its nodes ran and talked)."""
    out = run(ws, 'ros2 node list --no-daemon --spin-time 5').stdout
    return out if all(n in out for n in nodes) else None


def gait_state(ws: Path, ns: str = 'snake') -> dict:
    """One gait/state message through `ros2 topic echo --once`, as key -> value."""
    out = run(ws, f'ros2 topic echo --once /{ns}/gait/state diagnostic_msgs/msg/DiagnosticStatus',
              timeout_s=30).stdout
    return dict(re.findall(r"key: (\S+)\n\s+value: '?([^'\n]*)'?", out))


def driver_heard_estop(ws: Path, ns: str = 'snake') -> bool:
    """Whether the driver's bus status on /diagnostics names the e-stop as a reason (it holds or is off)."""
    # The estimator publishes /diagnostics too: take the first message that carries the driver's bus.
    out = run(ws, 'ros2 topic echo --once --filter "any(s.name.startswith(\'driver_node: bus\') for s in m.status)" '
                  '/diagnostics diagnostic_msgs/msg/DiagnosticArray', timeout_s=30).stdout
    at = out.find('driver_node: bus')
    return at >= 0 and 'estop' in out[at:at + 400]


def test_show_args_match_the_graph_and_the_readme(workspace):
    from snake_control.app.graph import launch_arguments

    out = run(workspace, 'ros2 launch snake_control gait.launch.py --show-args').stdout
    shown = re.findall(r"^\s+'(\w+)':", out, flags=re.M)
    assert shown == [a.name for a in launch_arguments()]
    readme = (ROOT / 'README.md').read_text()
    table = re.findall(r'^\| (\w+(?: / \w+)?) \| [^|]+ \| [^|]+ \|$', readme, flags=re.M)
    documented = {name for row in table for name in row.split(' / ')}
    assert set(shown) <= documented, f'launch arguments missing from the README table: {set(shown) - documented}'


def test_launch_drive_and_ctrl_c_wheeled_8(workspace, tmp_path):
    """The README's commands against the launched graph (emulated bus, MuJoCo); Ctrl-C leaves every servo
    with torque off (the launch reads them back before it stops the bus)."""
    ws = workspace
    launch = Background(ws, 'ros2 launch snake_control gait.launch.py robot:=wheeled_8 bus:=sim '
                            'physics:=mujoco joy:=false rviz:=false', tmp_path / 'launch.log')
    try:
        launch.wait_for(r'measured pose received')
        text = launch.text()
        # Missing optional packages are one line each, and the launch goes on.
        assert 'robot_state_publisher is not installed' in text or 'robot_state_publisher-' in text
        assert 'Traceback' not in text

        names = ('driver_node', 'gait_node', 'estimator_node', 'teleop_node')
        poll(lambda: node_list_naming(ws, [f'/snake/{n}' for n in names]), what=f'ros2 node list naming {names}')

        hz = run(ws, 'timeout -s INT 12 ros2 topic hz /snake/joint_states', timeout_s=40).stdout
        rates = [float(x) for x in re.findall(r'average rate: ([0-9.]+)', hz)]
        assert rates and rates[-1] > 0, hz
        print(f'ros2 topic hz /snake/joint_states: {rates[-1]:.1f} Hz')

        # Switch gait, drive, change a parameter: as the README writes them.
        out = run(ws, 'ros2 topic pub --once --keep-alive 2 /snake/gait/select std_msgs/String '
                      '"data: lateral_undulation"')
        assert out.returncode == 0, out.stderr
        poll(lambda: gait_state(ws).get('target_gait') == 'lateral_undulation', what='gait/select')
        out = run(ws, 'ros2 topic pub -t 3 -r 10 /snake/cmd_vel geometry_msgs/Twist "{linear: {x: 0.05}}"')
        assert out.returncode == 0, out.stderr
        accepted = run(ws, 'ros2 param set /snake/gait_node lateral_undulation.A_yaw 0.5')
        assert 'Set parameter successful' in accepted.stdout, accepted.stdout + accepted.stderr
        refused = run(ws, 'ros2 param set /snake/gait_node lateral_undulation.A_yaw 100.0')
        assert 'Setting parameter failed' in refused.stdout + refused.stderr, refused.stdout + refused.stderr
        # Within the catalogue's range but past wheeled_8's joint limits: refused too.
        infeasible = run(ws, 'ros2 param set /snake/gait_node lateral_undulation.A_yaw 1.45')
        assert 'Setting parameter failed' in infeasible.stdout + infeasible.stderr, infeasible.stdout

        # The README's e-stop: `ros2 topic pub` offers a volatile publisher; the gait node must hear it.
        out = run(ws, 'ros2 topic pub -t 20 -r 10 -w 2 /snake/estop std_msgs/Bool "data: true"', timeout_s=30)
        assert out.returncode == 0, out.stdout + out.stderr
        poll(lambda: gait_state(ws).get('estop') == 'true', what='estop from ros2 topic pub')
        poll(lambda: driver_heard_estop(ws), what='the driver holding for the estop from ros2 topic pub')
    finally:
        code = launch.ctrl_c()
    text = launch.text()
    assert 'emulated bus: torque off on all 7 servos' in text, text[-3000:]
    for name in ('gait_node', 'estimator_node', 'teleop_node'):
        assert re.search(rf'\[{name}-\d+\]: process has finished cleanly', text), text[-3000:]
    assert code == 0, text[-3000:]


def test_ros2_run_each_node_by_its_graph_name(workspace, tmp_path):
    """`ros2 run snake_control <node>` names each node as the graph does, and Ctrl-C ends it cleanly."""
    from snake_control.app.sim_bus import sim_bus_args
    from snake_control.dynamixel.simproc import SimBusProcess

    ws = workspace
    with SimBusProcess(sim_bus_args('kinematic_snake_3', 1_000_000)) as sim:
        runs = {}
        for node in ('driver_node', 'gait_node', 'estimator_node', 'teleop_node'):
            extra = f' -p port:={sim.path} -p baud:=1000000' if node == 'driver_node' else ''
            runs[node] = Background(ws, f'ros2 run snake_control {node} --ros-args -r __ns:=/r1 '
                                        f'-p robot:=kinematic_snake_3{extra}', tmp_path / f'{node}.log')
        try:
            listed = poll(lambda: node_list_naming(ws, [f'/r1/{n}' for n in runs]), timeout_s=60,
                          what='ros2 node list')
            assert '/r1/driver\n' not in listed and '/r1/estimator\n' not in listed
        finally:
            codes = {node: bg.ctrl_c() for node, bg in runs.items()}
        for node, bg in runs.items():
            assert codes[node] == 0, bg.text()[-2000:]
            assert 'Traceback' not in bg.text(), bg.text()[-2000:]
        state = sim.command('state')['servos']
        assert not any(s['torque'] for s in state.values()), state


def test_display_launch_leaves_out_missing_packages(workspace, tmp_path):
    out = run(workspace, 'timeout -s INT 20 ros2 launch snake_control display.launch.py robot:=wheeled_8',
              timeout_s=40)
    text = out.stdout + out.stderr
    for package in ('robot_state_publisher', 'joint_state_publisher_gui', 'rviz2'):
        assert f'{package} is not installed' in text or f'[{package}' in text, text[-2000:]
    assert 'Traceback' not in text and 'Caught exception' not in text, text[-2000:]


def processes_with(text: str) -> list[str]:
    """Command lines of running processes that contain text."""
    out = subprocess.run(['pgrep', '-af', text], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if 'pgrep' not in line]


@pytest.mark.parametrize('signum, prefixed', [(signal.SIGTERM, False), (signal.SIGKILL, False),
                                             (signal.SIGTERM, True)], ids=['SIGTERM', 'SIGKILL', 'SIGTERM-prefix'])
def test_ros2_launch_ended_by_a_signal_still_turns_torque_off(workspace, tmp_path, signum, prefixed):
    """`ros2 launch` ended by SIGTERM (systemd stopping a service, `kill`, a supervisor) or SIGKILL exits
    without signalling its nodes. The driver must notice its launcher is gone, turn every servo's torque
    off and exit; so must the other nodes (nothing of the graph left running). Sent as soon as the driver
    has turned torque on, while the other nodes may still be starting. `prefixed`: with a launch prefix
    that starts each node as its own child (as `--launch-prefix 'gdb --args'` does), which a killed launch
    leaves running: the nodes must start, and stop all the same."""
    from snake_control.app.sim_bus import sim_bus_args
    from snake_control.dynamixel.simproc import SimBusProcess

    ns = 'sigterm_launch'
    prefix = ''
    if prefixed:
        wrapper = tmp_path / 'wrapper.sh'
        wrapper.write_text('#!/bin/bash\n"$@"\nexit $?\n')
        wrapper.chmod(0o755)
        prefix = f'--launch-prefix {wrapper} '
    with SimBusProcess(sim_bus_args('kinematic_snake_3', 1_000_000)) as sim:
        launch = Background(workspace, f'exec ros2 launch {prefix}snake_control gait.launch.py robot:=kinematic_snake_3 '
                                       f'bus:=real port:={sim.path} baud:=1000000 namespace:={ns} joy:=false '
                                       f'rviz:=false', tmp_path / 'launch.log')
        try:
            servos = sim.command('state')['servos']
            assert servos and not any(s['torque'] for s in servos.values())
            poll(lambda: all(s['torque'] for s in sim.command('state')['servos'].values()), timeout_s=90,
                 what='the driver turning torque on')
            nodes = lambda: [line for line in processes_with(f'__ns:=/{ns}') if 'wrapper.sh' not in line]  # noqa: E731
            assert len(nodes()) == 4, nodes()      # none stopped itself at start (a prefix is not the launcher)
            os.kill(launch.process.pid, signum)      # the launch process alone, not its group
            launch.process.wait(timeout=60)
            state = poll(lambda: (lambda s: s if not any(v['torque'] for v in s.values()) else None)(
                sim.command('state')['servos']), timeout_s=30, what=f'torque off after {signum.name} to ros2 launch')
            assert state.keys() == servos.keys()
            poll(lambda: not processes_with(f'__ns:=/{ns}'), timeout_s=30, what='the graph\'s nodes exiting')
        finally:
            for line in processes_with(f'__ns:=/{ns}'):
                os.kill(int(line.split()[0]), signal.SIGKILL)
            launch.kill()
    assert 'Traceback' not in launch.text(), launch.text()[-3000:]
