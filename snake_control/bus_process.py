"""Start the emulated servo bus (`snake sim-bus`) as a child process and learn its device path.

The emulator runs in its own process so it never shares the controller's interpreter lock. It prints
the pseudo-terminal it serves (a path such as /tmp/snake-sim-bus-XXXX/ttyDXL) on a line of its own;
the driver opens that path like a USB adapter. Used by `snake bringup --bus sim`, by gait.launch.py
with bus:=sim, and by tests.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path


class SimBus:
    """A running `snake sim-bus`; `port` is its device path. Stop it with stop() or a with-block.
    `output` keeps the last lines it printed (stdout and stderr) for error messages; query() talks to
    its control channel (one command line in, one JSON line out: state, goals, silent, trip, ...)."""

    def __init__(self, process: subprocess.Popen, port: str, output: collections.deque, lines: queue.Queue):
        self.process, self.port, self.output = process, port, output
        self._lines = lines
        self._query_lock = threading.Lock()

    def query(self, command: str, timeout_s: float = 10.0) -> dict:
        """Send one control-channel command and return its JSON answer (RuntimeError if none)."""
        with self._query_lock:
            while not self._lines.empty():      # drop anything unsolicited
                self._lines.get_nowait()
            self.process.stdin.write(command.strip() + '\n')
            self.process.stdin.flush()
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                try:
                    line = self._lines.get(timeout=0.05)
                except queue.Empty:
                    continue
                if line is None:
                    break
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue
            raise RuntimeError(f'sim-bus did not answer {command!r}')

    def stop(self, timeout_s: float = 5.0) -> int | None:
        if self.process.stdin and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _device_path(line: str) -> str | None:
    """The device path printed on a line of sim-bus output, if the line holds one."""
    for word in line.replace('=', ' ').split():
        word = word.strip('\'",;')
        if word.startswith('/') and Path(word).exists():
            return word
    return None


def _detach_but_follow_parent():
    """In the child before exec: its own process group, so a Ctrl-C in the terminal reaches the
    controller, which turns torque off through the bus before stopping the bus; and SIGTERM when the
    parent dies, so a killed controller never leaves an emulator behind (Linux prctl PR_SET_PDEATHSIG)."""
    os.setpgrp()
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _pump(stream, lines: collections.deque, first: queue.Queue | None):
    # Keep reading so the child never blocks on a full pipe.
    for line in stream:
        lines.append(line.rstrip())
        if first is not None:
            first.put(line)
    if first is not None:
        first.put(None)
    stream.close()


def start_sim_bus(robot: str, baud: int, physics: str | None = None, extra: tuple[str, ...] = (),
                  timeout_s: float = 30.0) -> SimBus:
    """Start `snake sim-bus --robot ROBOT --baud BAUD [--physics P] EXTRA...`; wait until it prints its
    device path. Raises RuntimeError with its output when it exits or stays silent.

    Call it from a thread that outlives the bus (the main thread): the child is sent SIGTERM when the
    thread that started it ends."""
    cmd = [sys.executable, '-m', 'snake_control.cli', 'sim-bus', '--robot', str(robot), '--baud', str(baud)]
    if physics and physics != 'none':
        cmd += ['--physics', physics]
    cmd += list(extra)
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=_detach_but_follow_parent)
    output: collections.deque = collections.deque(maxlen=200)
    stdout_lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, output, stdout_lines), daemon=True).start()
    threading.Thread(target=_pump, args=(proc.stderr, output, None), daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = stdout_lines.get(timeout=0.1)
        except queue.Empty:
            continue
        if line is None:
            break
        path = _device_path(line)
        if path and Path(path).exists():
            sim = SimBus(proc, path, output, stdout_lines)
            sim.query('state', timeout_s=max(1.0, deadline - time.monotonic()))   # serving: answers
            return sim
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    time.sleep(0.1)
    raise RuntimeError(f'`snake {" ".join(cmd[3:])}` did not report its device path within {timeout_s:.0f} s '
                       f'(exit code {proc.returncode}); its output: {" | ".join(output) or "nothing"}')
