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
