"""Start the emulated servo bus as a child process and talk to its control channel.

The one launcher of the emulated bus (bringup, the launch file, tests, benchmarks): it runs
``python -m snake_control.dynamixel.simbus ARGS`` (its own interpreter, so it never shares the
controller's interpreter lock), waits for the device path it prints, and sends control-channel
commands (one line in, one JSON line out).

    with SimBusProcess(['--servos', '4', '--baud', '4000000']) as sim:
        bus = ServoBus(sim.path, 4_000_000).open()
        sim.command('silent 3 1.5')
        sim.state()['servos']['3']['torque']
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

MODULE = 'snake_control.dynamixel.simbus'


class SimBusProcess:
    """The emulator in its own process; ``path`` is the device to open (``paths``: one per bus when it
    serves several), ``output`` its last lines.

    Raises RuntimeError with the child's output when it exits or stays silent for start_timeout_s.
    Start it from a thread that outlives the bus (the main thread): the child gets SIGTERM when the
    thread that started it ends, so a killed controller never leaves an emulator behind."""

    def __init__(self, args: list[str], start_timeout_s: float = 30.0):
        self.args = [str(a) for a in args]
        self.output: collections.deque = collections.deque(maxlen=200)
        self._lines: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
        self.process = subprocess.Popen([sys.executable, '-m', MODULE, *self.args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        preexec_fn=detach_but_follow_parent)
        threading.Thread(target=_pump, args=(self.process.stdout, self.output, self._lines),
                         daemon=True).start()
        threading.Thread(target=_pump, args=(self.process.stderr, self.output, None), daemon=True).start()
        self.paths: list[str] = []
        self.path = self._wait_for_path(start_timeout_s)

    def _wait_for_path(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                break
            path = line.strip()
            if path.startswith('/') and Path(path).exists():
                state = self.command('state', timeout_s=max(1.0, deadline - time.monotonic()))   # serving
                self.paths = list(state.get('paths') or [path])
                return path
        self.close(timeout_s=1.0)
        time.sleep(0.1)             # let the pumps collect the last words
        raise RuntimeError(f'sim-bus {" ".join(self.args)} did not report its device path within '
                           f'{timeout_s:.0f} s (exit code {self.process.returncode}); its output: '
                           f'{" | ".join(self.output) or "nothing"}')

    def command(self, line: str, timeout_s: float = 10.0) -> dict:
        """Send one control-channel command; return its JSON answer (RuntimeError if none comes)."""
        with self._lock:
            while not self._lines.empty():      # drop anything unsolicited
                self._lines.get_nowait()
            try:
                self.process.stdin.write(line.strip() + '\n')
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                raise RuntimeError(f'sim-bus exited: {" | ".join(self.output)}') from None
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                try:
                    answer = self._lines.get(timeout=0.05)
                except queue.Empty:
                    continue
                if answer is None:
                    raise RuntimeError(f'sim-bus exited: {" | ".join(self.output)}')
                try:
                    return json.loads(answer)
                except json.JSONDecodeError:
                    continue
            raise RuntimeError(f'sim-bus did not answer {line.strip()!r} within {timeout_s:g} s')

    def state(self) -> dict:
        return self.command('state')

    def goals(self) -> list:
        """Every goal write the servos saw: [t_s, id, ticks, accepted]."""
        return self.command('goals')['goals']

    def close(self, timeout_s: float = 5.0) -> int | None:
        """Stop the emulator (SIGTERM, then SIGKILL after timeout_s); its exit code."""
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

    stop = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def detach_but_follow_parent():
    """In the child before exec: its own process group, so a Ctrl-C in the terminal reaches the
    controller, which turns torque off through the bus before stopping the bus; and SIGTERM when the
    parent dies (Linux prctl PR_SET_PDEATHSIG)."""
    import signal

    from snake_control.dynamixel.realtime import die_with_parent
    os.setpgrp()
    die_with_parent(signal.SIGTERM)


def _pump(stream, lines: collections.deque, first: queue.Queue | None):
    # Keep reading so the child never blocks on a full pipe.
    for line in stream:
        lines.append(line.rstrip())
        if first is not None:
            first.put(line)
    if first is not None:
        first.put(None)
    stream.close()
