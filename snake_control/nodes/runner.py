"""How every node process spins: the executor that keeps time, the spin loop, and main() for the nodes.

rclpy's MultiThreadedExecutor (Jazzy 7.1.x) re-submits queued tasks and rebuilds its wait set thousands
of times a second; it held the interpreter lock most of the time and starved the driver's bus thread
(100 Hz control fell to 20-50 Hz). The events executor dispatches each ready entity once, from C++; the
single-threaded executor is the fallback where it does not exist (Humble). Its `spin()` does not dispatch
from a background thread in this rclpy, so every loop here is `spin_once` with a timeout, which the
events executor serves without creating a timer per call.
"""
from __future__ import annotations

import faulthandler
import functools
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import rclpy
from rclpy.exceptions import InvalidHandle

# A thread waiting on I/O (the bus thread's reply, a timer) gets the interpreter lock back within this,
# not the default 5 ms (half a 100 Hz control period).
SWITCH_INTERVAL_S = 0.001
SPIN_TIMEOUT_S = 0.1      # how often a spin loop looks at its stop condition
SPIN_RACES_MAX = 10       # InvalidHandle from spin_once this many times in a row, not stopping: raised


def make_executor(context=None):
    """The executor every snake_control process uses: rclpy's events executor where it exists."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor
        return SingleThreadedExecutor(context=context)
    return EventsExecutor(context=context)


def executor_name(executor) -> str:
    return type(executor).__name__


def spin_until(executor, context, stop: threading.Event | None = None) -> None:
    """Dispatch callbacks until the context shuts down, `stop` is set or the node's launcher has gone
    (launcher_gone)."""
    def stopping() -> bool:
        return not context.ok() or (stop is not None and stop.is_set()) or launcher_gone()

    raced = 0
    while not stopping():
        try:
            executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)
            raced = 0
        except InvalidHandle:
            if stopping():
                # A spin_once that outlasted its caller's wait for this loop (a starved executor) found the
                # nodes being destroyed: the stop was asked for, so the loop ends without a traceback.
                return
            # An entity destroyed while another thread built the wait set (rclpy's multi-threaded
            # executor, when a callback drops a subscription, as the gait node does after the first IMU
            # message): the next spin_once builds a new one without it. Ending here stopped every callback
            # of the process. Only an error that keeps coming is raised.
            raced += 1
            if raced > SPIN_RACES_MAX:
                raise


def stop_executor(executor, timeout_sec: float) -> list[BaseException]:
    """Shut an executor down once its spin loop has ended, after the callbacks it has already handed out;
    returns the errors those callbacks raised (nobody else will see them).

    rclpy's MultiThreadedExecutor (Jazzy 7.1.x) runs each callback as a Task on its thread pool, and its
    shutdown() neither waits for them (its wait is skipped) nor stops the pool. A Task still queued then
    ran after shutdown() had destroyed the executor's guard condition, failed with 'cannot use Destroyable
    because destruction was requested', and rclpy printed that as 'never retrieved' whenever the garbage
    collector freed the Task, often in a later run; a callback could also run while its node was being
    destroyed. The events and single-threaded executors run callbacks inside spin_once only: there is
    nothing to wait for. timeout_sec bounds the whole stop.
    """
    deadline = time.monotonic() + timeout_sec
    tasks = list(getattr(executor, '_futures', ()))    # MultiThreadedExecutor: every Task given to its pool
    while not all(task.done() for task in tasks) and time.monotonic() < deadline:
        time.sleep(0.002)
    executor.shutdown(timeout_sec=max(0.0, deadline - time.monotonic()))
    pool = getattr(executor, '_executor', None)
    if isinstance(pool, ThreadPoolExecutor):
        pool.shutdown(wait=False)       # its idle threads exit instead of lingering until the process ends
    errors = {id(e): e for e in (task.exception() for task in tasks if task.done()) if e is not None}
    return list(errors.values())


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def install_stop_signals(stop: threading.Event, on_repeat=None, hang_deadline_s: float | None = None) -> None:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) set `stop`. Later ones do nothing
    but call on_repeat(signal name), if given, for the first of them: a terminal's Ctrl-C under
    `ros2 launch` reaches each node twice (from the terminal and from launch), and the shutdown the first
    one started must not be interrupted. The handler raises nothing: Python runs it inside whatever
    callback is running, where an exception would be reported as that callback's failure. Nor does a
    later one touch `stop`: a signal that arrives while the first handler is inside stop.set() runs on
    top of it, and found the Event's lock held by the frame it interrupted; in a burst of SIGINT each
    waited on it and was interrupted by the next, until RecursionError. on_repeat must take no lock
    either (say_raw writes without one). hang_deadline_s: see arm_hang_deadline, armed by the first
    signal. Main thread only."""
    first, repeats = [True], [0]

    def handler(signum, frame):
        if not first[0]:
            # Said once: a handler that does more than count is still running when the next of a fast
            # burst arrives, and each runs on top of the last.
            repeats[0] += 1
            if repeats[0] == 1 and on_repeat is not None:
                on_repeat(signal.Signals(signum).name)
            return
        first[0] = False
        if hang_deadline_s is not None:
            arm_hang_deadline(hang_deadline_s)
        stop.set()
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def say_raw(text: str) -> None:
    """One line to stderr with a single write(2): no buffer and no lock, so a signal handler may call it
    while it interrupted another write (print would raise 'reentrant call')."""
    try:
        os.write(2, (text + '\n').encode(errors='replace'))
    except OSError:
        pass


# The launcher's process id, set by the launch file for each node: a node that starts after its launcher
# has died (stopped while the node was still importing) stops at once.
PARENT_PID_ENV = 'SNAKE_CONTROL_PARENT_PID'


def follow_parent() -> None:
    """SIGTERM to this process when the process that started it dies (Linux prctl PR_SET_PDEATHSIG), so
    that the stop handler turns torque off. `ros2 launch` ended by SIGTERM or SIGKILL (systemd, `kill`, a
    supervisor) exits without signalling its nodes: a driver left running would hold torque on a robot
    nobody controls. A parent that died before this call gets no signal sent: the launcher named by
    PARENT_PID_ENV must then still exist (not necessarily as the parent: `ros2 launch --launch-prefix
    'gdb --args'` puts gdb between them, and the spin loops watch it, launcher_gone), and without one the
    parent must not have changed during the call. Call after install_stop_signals. Elsewhere than Linux
    it does nothing."""
    from snake_control.dynamixel.realtime import die_with_parent

    parent = os.getppid()
    if not die_with_parent(signal.SIGTERM):
        return
    gone = launcher_gone() if _launcher_pid() is not None else os.getppid() != parent
    if gone:
        os.kill(os.getpid(), signal.SIGTERM)


@functools.cache
def _launcher_pid() -> int | None:
    """The PARENT_PID_ENV process id, read once (None: not named)."""
    try:
        return int(os.environ.get(PARENT_PID_ENV, ''))
    except ValueError:
        return None


def launcher_gone() -> bool:
    """Whether the launcher named by PARENT_PID_ENV no longer exists (False when none is named). The
    parent-death signal covers a launcher that is the parent; a launch prefix that starts the node as its
    child (gdb, a wrapper script) outlives a killed launcher, so the spin loops ask this every pass."""
    pid = _launcher_pid()
    if pid is None:
        return False
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)             # signal 0: only whether it could be sent
    except ProcessLookupError:
        return True
    except PermissionError:
        return False                # someone else's process: it exists
    return False


# A node process still running this long after it was told to stop is hung (a teardown that never
# returns inside the middleware; a later signal cannot reach Python code then): under ros2 launch it would
# be killed 15 s after Ctrl-C, silently. Shorter than that, so its threads' stacks reach the log.
HANG_DEADLINE_S = 12.0


def arm_hang_deadline(seconds: float = HANG_DEADLINE_S) -> None:
    """In `seconds`, unless the process has exited, print every thread's stack to stderr and exit with
    status 1 (faulthandler's own thread: it needs neither the interpreter lock nor the main thread)."""
    faulthandler.dump_traceback_later(seconds, exit=True)


def ignore_stop_signals() -> None:
    """From here to the process's exit, stop signals do nothing. When the interpreter finalizes, Python
    puts its own handlers back to the default, which kills, but leaves ignored signals alone: the second
    Ctrl-C that ros2 launch sends each node after the terminal's would otherwise, arriving during that
    teardown, turn a node that stopped cleanly into 'process has died' (exit -2). Main thread only."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def run_node(node_class, args=None) -> int:
    """A process's main: run one node until Ctrl-C or shutdown; stop signals are ignored from then on
    (ignore_stop_signals). A configuration error (ValueError, FileNotFoundError, raised by the
    constructor with the file and key in its message, or a parameter outside its declared range) is
    printed as one line, exit 2."""
    from rclpy.exceptions import ParameterException
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions

    from snake_control.nodes.qos import choose_dds_transport

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = threading.Event()
    install_stop_signals(stop, hang_deadline_s=HANG_DEADLINE_S)
    follow_parent()
    choose_dds_transport()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    context = rclpy.get_default_context()
    node = None
    executor = None
    try:
        node = node_class()
        executor = make_executor(context)
        executor.add_node(node)
        spin_until(executor, context, stop)
    except (ValueError, FileNotFoundError, ParameterException) as exc:   # one line, never a traceback
        print(f'{getattr(node_class, "NODE_NAME", node_class.__name__)}: error: {exc}', file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        arm_hang_deadline()
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        if node is not None:
            close = getattr(node, 'close', None)
            if close is not None:
                close()
            node.destroy_node()
        rclpy.try_shutdown()
        ignore_stop_signals()
    return 0
