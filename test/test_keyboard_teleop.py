"""The keyboard as a gamepad: keys -> the pad's Joy state -> the same TeleopMapper as a gamepad; and
`snake bringup` driven through a real pseudo-terminal (motion reaches cmd_vel, space engages the e-stop,
Ctrl-C leaves torque off and the terminal as it was)."""
import os
import sys
import threading
import time

import pytest

from snake_control.teleop.keyboard import KEY_TIMEOUT_S, KeyboardPad
from snake_control.teleop.mapping import TeleopMapper, load_teleop_config


def drive(pad, mapper, t):
    """What teleop publishes when the pad's Joy of time t arrives (None: the pad sent nothing)."""
    joy = pad.joy_at(t)
    return None if joy is None else mapper.update(joy[0], joy[1], now_s=t)


@pytest.mark.parametrize('gamepad', ['xbox', 'playstation'])
def test_keys_map_through_the_gamepad_mapping(gamepad):
    cfg = load_teleop_config(gamepad)
    pad, mapper = KeyboardPad(cfg), TeleopMapper(cfg)
    scale = cfg.speed_scales[cfg.initial_speed_scale]
    pad.press('i', 0.0)
    assert drive(pad, mapper, 0.05).twist == pytest.approx((cfg.limits['max_forward_m_s'] * scale, 0, 0))
    pad.press('j', 0.1)          # turn left: CCW positive
    assert drive(pad, mapper, 0.15).twist == pytest.approx((0, 0, cfg.limits['max_turn_rad_s'] * scale))
    pad.press('L', 0.2)          # Shift: sideways to the right
    assert drive(pad, mapper, 0.25).twist == pytest.approx((0, -cfg.limits['max_sideways_m_s'] * scale, 0))
    pad.press('.', 0.3)          # back, turning as teleop_twist_keyboard does
    vx, vy, wz = drive(pad, mapper, 0.35).twist
    assert vx < 0 and vy == 0 and wz > 0
    pad.press('q', 0.4)          # faster: the map's next speed scale, on the press edge only
    drive(pad, mapper, 0.45)
    pad.press(',', 0.5)
    fast = cfg.speed_scales[min(cfg.initial_speed_scale + 1, len(cfg.speed_scales) - 1)]
    assert drive(pad, mapper, 0.55).twist == pytest.approx((-cfg.limits['max_forward_m_s'] * fast, 0, 0))
    assert mapper.speed_scale == fast


def test_deadman_holds_only_while_keys_repeat():
    cfg = load_teleop_config('xbox')
    pad, mapper = KeyboardPad(cfg, key_timeout_s=0.5), TeleopMapper(cfg)
    for k in range(20):                               # a held key: repeats every 40 ms
        pad.press('i', 0.04 * k)
        assert drive(pad, mapper, 0.04 * k + 0.02).twist[0] > 0
    last = 0.04 * 19
    assert drive(pad, mapper, last + 0.4).twist[0] > 0        # still within the timeout
    assert drive(pad, mapper, last + 0.55).twist == (0.0, 0.0, 0.0)   # released: one zero
    assert pad.joy_at(last + 0.6) is None                      # then silent
    pad.press('i', 2.0)
    assert drive(pad, mapper, 2.02).twist[0] > 0
    pad.press('k', 2.05)                                       # k: stop at once
    assert drive(pad, mapper, 2.07).twist == (0.0, 0.0, 0.0)
    counts = pad.finish(3.0)
    assert counts.motion_s == pytest.approx(last + 0.5 + 0.05, abs=1e-9)


def test_space_latches_the_estop_and_only_R_releases_it():
    cfg = load_teleop_config('xbox')
    pad, mapper = KeyboardPad(cfg), TeleopMapper(cfg)
    pad.press('i', 0.0)
    drive(pad, mapper, 0.01)
    assert 'E-STOP' in pad.press(' ', 0.02)
    out = drive(pad, mapper, 0.03)
    assert out.estop is True and out.twist == (0.0, 0.0, 0.0)
    pad.press('i', 0.05)                                       # motion keys do nothing while latched
    assert drive(pad, mapper, 0.06).twist is None
    pad.press('r', 0.07)                                       # lower-case r is not the release
    drive(pad, mapper, 0.08)
    assert mapper.estopped
    assert 'released' in pad.press('R', 0.1)
    assert drive(pad, mapper, 0.11).estop is False
    pad.press('i', 0.12)
    assert drive(pad, mapper, 0.13).twist[0] > 0
    assert (pad.counts.estops, pad.counts.releases) == (1, 1)


def test_gait_keys_cycle_the_gaits():
    cfg = load_teleop_config('xbox')
    pad, mapper = KeyboardPad(cfg), TeleopMapper(cfg, ['serpentine', 'rolling', 'helix_rolling'])
    pad.press('n', 0.0)
    assert drive(pad, mapper, 0.01).gait == 'rolling'
    assert drive(pad, mapper, 0.02).gait is None               # the tap was released in between
    pad.press('n', 0.03)
    assert drive(pad, mapper, 0.04).gait == 'helix_rolling'
    pad.press('p', 0.05)
    assert drive(pad, mapper, 0.06).gait == 'rolling'


@pytest.mark.parametrize('bad', [0.0, -1.0, float('nan'), 60.0])
def test_bad_key_timeout_is_refused(bad):
    with pytest.raises(ValueError, match='key timeout'):
        KeyboardPad(load_teleop_config('xbox'), key_timeout_s=bad)


def test_key_timeout_without_a_terminal_is_refused(capsys):
    from snake_control.cli import main
    assert main(['bringup', '--bus', 'sim', '--key-timeout', '0.5', '--no-keyboard']) == 2
    assert '--key-timeout' in capsys.readouterr().err


class PtySession:
    """`snake bringup` with a pseudo-terminal as its controlling terminal, as a user's shell runs it."""

    def __init__(self, argv):
        import fcntl
        import pty
        import subprocess
        import termios

        self.master, self.slave = pty.openpty()
        self.before = termios.tcgetattr(self.slave)

        def controlling_tty():      # after setsid (start_new_session): the pty becomes its terminal
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
        self.proc = subprocess.Popen(argv, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     start_new_session=True, preexec_fn=controlling_tty, env=env)
        self.text = ''
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.text += data.decode(errors='replace')

    def wait_for(self, needle, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if needle in self.text:
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f'{needle!r} not seen: {self.text[-3000:]}')

    def send(self, keys: bytes):
        os.write(self.master, keys)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


@pytest.mark.ros
def test_bringup_driven_from_a_terminal(tmp_path):
    import termios

    from snake_control.mcap_io import ros2_messages

    record = tmp_path / 'keys.mcap'
    s = PtySession([sys.executable, '-m', 'snake_control.cli', 'bringup', '--robot', 'kinematic_snake_3',
                    '--bus', 'sim', '--namespace', 'kb', '--record', str(record)])
    try:
        s.wait_for('space: E-STOP', 20)              # the key help comes first
        s.wait_for('running', 90)
        attrs = termios.tcgetattr(s.slave)
        assert not attrs[3] & (termios.ICANON | termios.ECHO), 'the terminal is not in cbreak mode'
        for _ in range(25):                          # a held key: repeats every 40 ms for 1 s
            s.send(b'i')
            time.sleep(0.04)
        time.sleep(KEY_TIMEOUT_S + 0.5)              # let go: the deadman times out
        s.send(b' ')
        s.wait_for('E-STOP engaged', 10)
        time.sleep(1.0)                              # the e-stop reaches the recorder (and is repeated)
        s.send(b'\x03')                              # Ctrl-C through the terminal's line discipline
        s.proc.wait(timeout=60)
        s.wait_for('keyboard: ', 5)
        text = s.text
        after = termios.tcgetattr(s.slave)
    finally:
        s.close()
    assert s.proc.returncode == 0, text[-3000:]
    assert 'stopped (SIGINT)' in text and 'torque off' in text and 'STILL ON' not in text, text[-3000:]
    assert 'e-stop engaged 1x' in text, text[-3000:]
    assert after == s.before, 'the terminal settings were not restored'
    cmd, estop = [], []
    for m in ros2_messages(record):
        if m.channel.topic == '/kb/cmd_vel':
            cmd.append(m.ros_msg.linear.x)
        elif m.channel.topic == '/kb/estop':
            estop.append(m.ros_msg.data)
    moving = [k for k, vx in enumerate(cmd) if vx > 0]
    assert len(moving) >= 10, cmd                    # about 20 Joy messages a second while the key repeats
    assert cmd[moving[-1] + 1:] and cmd[-1] == 0.0, cmd    # the deadman let go: a zero followed the motion
    assert estop and all(estop), estop


@pytest.mark.ros
def test_terminal_restored_when_bringup_fails(tmp_path):
    """An error after the terminal went to cbreak mode (here: no servo adapter at the port) still gives the
    user's terminal back as it was."""
    s = PtySession([sys.executable, '-m', 'snake_control.cli', 'bringup', '--robot', 'kinematic_snake_3',
                    '--bus', 'real', '--port', str(tmp_path / 'ttyUSB9'), '--namespace', 'kbfail'])
    try:
        s.wait_for('space: E-STOP', 20)
        s.proc.wait(timeout=90)
        time.sleep(0.2)
        import termios
        after = termios.tcgetattr(s.slave)
    finally:
        s.close()
    assert s.proc.returncode == 2, s.text[-2000:]
    assert 'ttyUSB9' in s.text, s.text[-2000:]
    assert after == s.before, 'the terminal settings were not restored'
