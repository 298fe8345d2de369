"""A node stopped by Ctrl-C exits 0 however many more stop signals follow (ros2 launch signals each node
again after the terminal did): none may land in the interpreter's teardown and kill it (exit -2)."""
import signal
import subprocess
import sys
import threading
import time

import pytest


@pytest.mark.parametrize('module', ['snake_control.nodes.teleop_node'])
def test_a_burst_of_sigint_after_the_first_still_exits_cleanly(module):
    proc = subprocess.Popen([sys.executable, '-m', module], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, up = [], threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if 'gamepad map' in line:
                up.set()
    threading.Thread(target=read, daemon=True).start()
    try:
        assert up.wait(60), ''.join(lines)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)     # the first stops it; the rest fall into its shutdown
            time.sleep(0.002)
        assert proc.wait(timeout=10) == 0, ''.join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_process_hung_after_its_stop_prints_its_stacks_and_exits():
    """A node whose teardown never returns (a middleware deadlock holds the main thread, where no later
    signal reaches Python) exits by itself once the hang deadline passes, with every thread's stack on
    stderr, instead of being killed silently by ros2 launch."""
    code = ('import time\n'
            'from snake_control.nodes.runner import arm_hang_deadline\n'
            'arm_hang_deadline(0.5)\n'
            'def stuck_in_teardown():\n'
            '    time.sleep(60)\n'
            'stuck_in_teardown()\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1, out.stderr
    assert 'stuck_in_teardown' in out.stderr, out.stderr


STOP_HANDLER_UNDER_FIRE = '''
import sys, threading, time
from snake_control.nodes.runner import ignore_stop_signals, install_stop_signals, say_raw
stop = threading.Event()
install_stop_signals(stop, on_repeat=lambda name: say_raw(name + ' ignored'))
print('up', flush=True)
stop.wait()
t = time.monotonic()
while time.monotonic() - t < 1.0:       # the shutdown's work, while signals keep coming
    sum(range(100))
ignore_stop_signals()
print('clean', flush=True)
'''


def test_stop_signals_as_fast_as_they_can_come_never_deadlock_the_handler():
    """A signal that arrives while the first one's handler is inside stop.set() runs on top of it: when
    it called stop.set() too, it waited on the Event's lock held by the frame it interrupted, and each
    later signal interrupted that wait, until RecursionError (seen once in CI with SIGINT every 2 ms;
    every time with them back to back)."""
    for _ in range(2):
        proc = subprocess.Popen([sys.executable, '-c', STOP_HANDLER_UNDER_FIRE], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == 'up'
            while proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0 and out.strip() == 'clean', err[-2000:]
            assert 'SIGINT ignored' in err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


FOLLOWER = '''
import threading
from snake_control.nodes.runner import follow_parent, install_stop_signals
stop = threading.Event()
install_stop_signals(stop)
follow_parent()
print('stopping' if stop.is_set() else 'running', flush=True)
'''


def test_a_node_follows_its_launcher_not_whatever_stands_between():
    """follow_parent: a node whose launcher (SNAKE_CONTROL_PARENT_PID) has already gone stops at once; one
    whose launcher lives stays, even when another process stands between them (`ros2 launch
    --launch-prefix 'gdb --args'`: gdb is the node's parent)."""
    import os
    from snake_control.nodes.runner import PARENT_PID_ENV

    gone = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone.wait()
    cases = {str(gone.pid): 'stopping',             # the launcher died before the node asked
             str(os.getppid()): 'running',           # alive, not the node's parent (a prefix between)
             str(os.getpid()): 'running'}            # alive and the parent
    for launcher, expected in cases.items():
        out = subprocess.run([sys.executable, '-c', FOLLOWER], capture_output=True, text=True, timeout=60,
                             env={**os.environ, PARENT_PID_ENV: launcher})
        assert out.stdout.strip() == expected, (launcher, out.stdout, out.stderr[-1000:])


def test_a_node_stops_when_the_process_that_started_it_dies():
    """No launcher named: the kernel's parent-death signal. The node's parent exits without signalling
    it (as ros2 launch does on SIGTERM); the node is told to stop."""
    code = FOLLOWER.replace("print('stopping' if stop.is_set() else 'running', flush=True)",
                            "print('up', flush=True)\nprint('stopped' if stop.wait(60) else 'not stopped', flush=True)")
    middle = ('import subprocess, sys\n'
              f'subprocess.Popen([sys.executable, "-c", {code!r}], stdout=sys.stdout)\n'
              'sys.stdout.flush()\n'
              'print(sys.stdin.readline(), end="")\n')   # exit once told to, without signalling the node
    proc = subprocess.Popen([sys.executable, '-c', middle], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == 'up'
        proc.stdin.write('bye\n')
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == 'bye'
        assert proc.stdout.readline().strip() == 'stopped'
    finally:
        proc.kill()
        proc.wait()


def test_a_spin_loop_survives_an_entity_destroyed_under_it_and_ends_quietly_when_stopped():
    # rclpy's multi-threaded executor raises InvalidHandle when a callback destroys a subscription while
    # another thread builds the wait set (the gait node drops its IMU subscription after the first
    # message): the loop spins on. bringup waits 5 s for its spin thread, then destroys the nodes; a
    # starved executor still inside spin_once fails the same way, and the loop, asked to stop, ends. An
    # error that keeps coming is raised.
    import rclpy
    from rclpy.exceptions import InvalidHandle
    from rclpy.executors import SingleThreadedExecutor
    from snake_control.nodes.runner import SPIN_RACES_MAX, spin_until

    class Raising(SingleThreadedExecutor):
        def __init__(self, context, stop, plan):
            super().__init__(context=context)
            self.stop, self.plan, self.calls = stop, list(plan), 0

        def spin_once(self, timeout_sec=None):
            self.calls += 1
            step = self.plan.pop(0) if self.plan else 'raise'
            if step == 'stop':
                self.stop.set()
            if step in ('raise', 'stop'):
                raise InvalidHandle('cannot use Destroyable because destruction was requested')

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        stop = threading.Event()
        executor = Raising(context, stop, ['raise', 'ok', 'raise', 'ok', 'stop'])
        spin_until(executor, context, stop)         # neither the races nor the stop escape
        assert executor.calls == 5
        executor.shutdown()
        stop = threading.Event()
        executor = Raising(context, stop, [])
        with pytest.raises(InvalidHandle):
            spin_until(executor, context, stop)
        assert executor.calls == SPIN_RACES_MAX + 1
        executor.shutdown()
    finally:
        context.try_shutdown()
