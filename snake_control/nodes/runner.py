"""How every node process spins: the executor that keeps time, the spin loop, and main() for the nodes.

rclpy's MultiThreadedExecutor (Jazzy 7.1.x) re-submits queued tasks and rebuilds its wait set thousands
of times a second; it held the interpreter lock most of the time and starved the driver's bus thread
(100 Hz control fell to 20-50 Hz). The events executor dispatches each ready entity once, from C++; the
single-threaded executor is the fallback where it does not exist (Humble). Its `spin()` does not dispatch
from a background thread in this rclpy, so every loop here is `spin_once` with a timeout, which the
events executor serves without creating a timer per call.
"""
from __future__ import annotations

import signal
import sys
import threading

import rclpy

# A thread waiting on I/O (the bus thread's reply, a timer) gets the interpreter lock back within this,
# not the default 5 ms (half a 100 Hz control period).
SWITCH_INTERVAL_S = 0.001
SPIN_TIMEOUT_S = 0.1      # how often a spin loop looks at its stop condition


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
    """Dispatch callbacks until the context shuts down or `stop` is set."""
    while context.ok() and not (stop is not None and stop.is_set()):
        executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def install_stop_signals(stop: threading.Event, on_repeat=None) -> None:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) set `stop`. Later ones do nothing
    but call on_repeat(signal name) if given: a terminal's Ctrl-C under `ros2 launch` reaches each node
    twice (from the terminal and from launch), and the shutdown the first one started must not be
    interrupted. The handler raises nothing: Python runs it inside whatever callback is running, where an
    exception would be reported as that callback's failure. Main thread only."""
    def handler(signum, frame):
        if stop.is_set() and on_repeat is not None:
            on_repeat(signal.Signals(signum).name)
        stop.set()
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


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

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = threading.Event()
    install_stop_signals(stop)
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
