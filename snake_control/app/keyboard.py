"""The terminal as a gamepad: keys read from a TTY without echo or line buffering, fed to a KeyboardPad.

`with KeyboardTerminal(fd, pad, log):` puts the terminal in cbreak mode (each key arrives at once, not
echoed; Ctrl-C still raises SIGINT, so bringup stops as usual and turns torque off) and starts a reader
thread; leaving the block, normally or by an exception or signal, stops the thread and restores the
terminal's settings exactly as they were, so the user's shell is never left without echo.
"""
from __future__ import annotations

import os
import select
import termios
import threading
import time
import tty


def foreground_terminal(fd: int) -> bool:
    """Whether fd is a terminal whose foreground job is this process's: only then are its keys meant for
    us (a background job, `snake bringup &`, or a child in a session of its own must leave them alone)."""
    try:
        return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:       # not our controlling terminal
        return False


class KeyboardTerminal:
    def __init__(self, fd: int, pad, log=print):
        if not os.isatty(fd):
            raise ValueError(f'file descriptor {fd} is not a terminal')
        self.fd, self.pad, self.log = fd, pad, log
        self._saved = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name='keyboard', daemon=True)

    def __enter__(self):
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSANOW)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=1.0)
        self.restore()
        return False

    def restore(self):
        """The terminal's settings from before; TCSADRAIN lets pending output (the summary) finish first."""
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _read(self):
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if not ready:
                    continue
                data = os.read(self.fd, 64)
            except (OSError, ValueError):      # the terminal went away (hang-up): no more keys
                return
            if not data:
                return                         # end of input: the pad's motion times out by itself
            now = time.monotonic()
            for key in data.decode('latin-1'):
                line = self.pad.press(key, now)
                if line:
                    self.log(f'keyboard: {line}')
