"""Start `snake sim-bus` as a child process and talk to its control channel (tests, benchmarks, bringup).

    with SimBusProcess(['--servos', '4', '--baud', '4000000']) as sim:
        bus = ServoBus(sim.path, 4_000_000).open()
        sim.command('silent 3 1.5')
        sim.state()['servos']['3']['torque']
"""
from __future__ import annotations

import json
import subprocess
import sys


class SimBusProcess:
    """The emulator in its own process (its own interpreter lock); ``path`` is the device to open."""

    def __init__(self, args: list[str], start_timeout_s: float = 20.0):
        self.proc = subprocess.Popen([sys.executable, '-m', 'snake_control.cli', 'sim-bus', *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.path = self.proc.stdout.readline().strip()
        if not self.path:
            err = self.proc.stderr.read()
            self.proc.wait(timeout=start_timeout_s)
            raise RuntimeError(f'snake sim-bus {" ".join(args)} did not start: {err.strip()}')

    def command(self, line: str) -> dict:
        """Send one control-channel command; return its JSON answer."""
        self.proc.stdin.write(line.strip() + '\n')
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f'sim-bus exited: {self.proc.stderr.read().strip()}')
        return json.loads(answer)

    def state(self) -> dict:
        return self.command('state')

    def goals(self) -> list:
        """Every goal write the servos saw: [t_s, id, ticks, accepted]."""
        return self.command('goals')['goals']

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
