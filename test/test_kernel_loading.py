"""The estimator's compiled kernels never stall a node: a node loads them before it spins when numba's cache
holds them; on the first start after an install it runs the numpy path while a child compiles them for the
next start, and it stops at once when asked."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from snake_control.estimation import kernel_loading as kl
from snake_control.estimation.estimator import Estimator
from snake_control.robot import load_robot

numba = pytest.importorskip('numba')


@pytest.fixture
def fresh(monkeypatch):
    """Kernels neither loaded nor building, as in a new process; the test's own state is dropped after it."""
    monkeypatch.setattr(kl, '_KERNELS', [])
    monkeypatch.setattr(kl, '_BUILDS', [])
    yield
    for build in kl._BUILDS:
        build.stop()
        build.done.wait(10.0)


@pytest.fixture
def empty_cache(monkeypatch, tmp_path):
    monkeypatch.setenv('NUMBA_CACHE_DIR', str(tmp_path / 'numba-cache'))


def _wait(predicate, timeout_s=30.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not predicate():
        time.sleep(0.02)
    return predicate()


def _shape(robot, t):
    return 0.3 * np.sin(2 * np.pi * 0.5 * t - 0.6 * np.arange(robot.n_joints))


def test_the_signed_kernels_are_the_modules():
    from snake_control.estimation import kernels
    assert sorted(n + '_kernel' for n in kl.SIGNED_KERNELS) == sorted(
        '_' + n for n in dir(kernels) if n.endswith('_kernel'))


def test_a_cache_is_fresh_with_every_index_newer_than_the_source(tmp_path):
    source = tmp_path / 'kernels.py'
    source.write_text('# kernels')
    cache = tmp_path / '__pycache__'
    cache.mkdir()
    assert not kl.cache_is_fresh(source, [cache])
    old = source.stat().st_mtime - 100.0
    for k, name in enumerate(kl.SIGNED_KERNELS):
        index = cache / f'kernels.{name}-{10 * k}.py311.nbi'
        index.write_bytes(b'')
        os.utime(index, (old, old))
    assert not kl.cache_is_fresh(source, [cache])      # written before the source changed: stale
    for index in cache.iterdir():
        os.utime(index)
    os.utime(source, (old, old))
    assert kl.cache_is_fresh(source, [cache])
    next(cache.glob('kernels._heights-*')).unlink()
    assert not kl.cache_is_fresh(source, [cache])


def test_a_full_cache_loads_before_the_node_spins(fresh):
    source = kl.kernels_source()
    if not kl.cache_is_fresh(source, kl.cache_dirs(source)):
        pytest.skip('numba has not cached the kernels here (make venv does)')
    assert kl.prepare_kernels(print) is None
    assert kl.kernels_state() == 'compiled' and kl.compiled() is not None


def test_an_empty_cache_leaves_the_run_on_numpy_while_a_child_compiles(fresh, empty_cache, tmp_path):
    gate = tmp_path / 'compiled'
    logs = []
    # A build that lasts until the test says so.
    code = f'import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.01)\n'
    build = kl.prepare_kernels(lambda level, text: logs.append((level, text)), build_code=code)
    assert build is not None and kl.kernels_state() == 'compiling'
    assert kl.prepare_kernels(print) is None            # decided once per process
    robot = load_robot('pitch_yaw_32')
    est = Estimator(robot)
    for k in range(20):
        est.update(0.02 * k, _shape(robot, 0.02 * k))
    assert kl.compiled() is None and np.linalg.norm(est.state.pose[:2, 3]) > 0.0
    gate.touch()
    assert build.done.wait(30.0) and build.ok
    assert kl.kernels_state() == 'numpy' and kl.compiled() is None     # this process stays on numpy
    assert [level for level, _ in logs] == ['info', 'info'] and 'next start' in logs[1][1]


def test_a_failed_build_is_reported(fresh, empty_cache):
    logs = []
    build = kl.prepare_kernels(lambda level, text: logs.append((level, text)),
                               build_code='raise SystemExit("no compiler here")')
    assert build.done.wait(30.0) and build.ok is False
    assert kl.compiled() is None and kl.kernels_state() == 'numpy'
    assert logs[-1][0] == 'warn' and 'no compiler here' in logs[-1][1]


def test_stop_ends_the_build_at_once(fresh, empty_cache):
    build = kl.prepare_kernels(lambda *a: None, build_code='import time; time.sleep(600)')
    assert _wait(lambda: build._proc is not None)
    build.stop()
    assert build.done.wait(10.0)
    assert build._proc.returncode is not None and build.ok is None


def _processes_with(marker: str):
    found = []
    for proc in Path('/proc').iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / 'environ').read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_node_on_an_empty_numba_cache_publishes_odometry_and_stops_on_ctrl_c(tmp_path):
    """The first start after an install: numba's cache is empty. Odometry flows (the compile takes about
    20 s of CPU), /diagnostics say the kernels are compiling, and SIGINT ends the node cleanly with the
    compile child gone."""
    rclpy = pytest.importorskip('rclpy')
    from diagnostic_msgs.msg import DiagnosticArray
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState

    from snake_control.nodes.messages import set_stamp

    cache = tmp_path / 'numba-cache'
    cache.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONUNBUFFERED='1')
    env.pop('SNAKE_NO_NUMBA', None)
    node = subprocess.Popen([sys.executable, '-m', 'snake_control.nodes.estimator_node', '--ros-args',
                             '-p', 'robot:=pitch_yaw_32', '-p', 'diagnostics_rate_hz:=5.0'],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    context = rclpy.Context()
    rclpy.init(context=context)
    peer = rclpy.create_node('kernel_loading_peer', context=context)
    odoms, loading = [], [0]      # loading: odometry messages received by the last "kernels: compiling"

    def on_diagnostics(msg):
        if any(kv.key == 'kernels' and kv.value == 'compiling' for s in msg.status for kv in s.values):
            loading[0] = len(odoms)

    peer.create_subscription(Odometry, 'odom', odoms.append, QoSProfile(depth=100))
    peer.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, QoSProfile(depth=20))
    pub = peer.create_publisher(JointState, 'joint_states', QoSProfile(depth=10))
    robot = load_robot('pitch_yaw_32')
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(peer)
    try:
        msg = JointState(name=list(robot.joint_names))
        t0 = time.time()
        end = t0 + 60.0
        while time.time() < end and loading[0] < 50 and node.poll() is None:
            now = time.time()
            set_stamp(msg.header.stamp, int(now * 1e9))
            msg.position = [float(v) for v in _shape(robot, now - t0)]
            pub.publish(msg)
            executor.spin_once(timeout_sec=0.02)
        assert node.poll() is None, node.stdout.read().decode()
        # Odometry flowed while the kernels were still being compiled.
        assert loading[0] >= 50, (loading[0], len(odoms))
        marker = f'NUMBA_CACHE_DIR={cache}'
        assert len(_processes_with(marker)) == 2          # the node and its compile child
        node.send_signal(signal.SIGINT)
        out, _ = node.communicate(timeout=20.0)
        assert node.returncode == 0, out.decode()
        assert _wait(lambda: not _processes_with(marker), 10.0)
    finally:
        if node.poll() is None:
            node.kill()
            node.communicate()
        executor.shutdown()
        peer.destroy_node()
        rclpy.try_shutdown(context=context)


def test_a_command_says_when_it_will_wait_for_a_compile(fresh, monkeypatch, empty_cache):
    assert 'first use after an install' in kl.first_compile_notice()
    monkeypatch.setattr(kl, '_KERNELS', [None])        # decided already (numpy): nothing to wait for
    assert kl.first_compile_notice() == ''
