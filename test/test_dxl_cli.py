"""`snake dxl` and `snake sim-bus` end to end: the CLI against the emulator in its own process."""
import signal
import subprocess
import sys

import pytest

from snake_control.cli import main
from snake_control.dynamixel.simproc import SimBusProcess


@pytest.fixture
def sim():
    with SimBusProcess(['--servos', '3', '--baud', '1000000']) as s:
        yield s


def snake(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_scan_finds_servos_at_their_baud(sim, capsys):
    code, out, _ = snake(capsys, 'dxl', 'scan', '--port', sim.path, '--bauds', '57600,1000000')
    assert code == 0
    assert '57600  none' in out
    assert out.count('1000000  ID') == 3 and 'XM430-W350 (model 1020)' in out and '3 servo(s) found' in out


def test_ping_read_write_torque_reboot(sim, capsys):
    b = ['--port', sim.path, '--baud', '1000000']
    code, out, _ = snake(capsys, 'dxl', 'ping', '1-3,7', *b)
    assert code == 1 and 'ID   7: no answer' in out and out.count('XM430-W350') == 3
    code, out, _ = snake(capsys, 'dxl', 'read', '2', 'Model Number', 'return-delay-time', *b)
    assert code == 0 and 'model_number = 1020  (XM430-W350)' in out and 'return_delay_time = 250' in out
    assert snake(capsys, 'dxl', 'write', '2', 'return_delay_time', '0', *b)[0] == 0
    assert 'return_delay_time = 0' in snake(capsys, 'dxl', 'read', '2', 'return_delay_time', *b)[1]
    assert snake(capsys, 'dxl', 'torque', 'all', 'on', *b)[0] == 0
    assert all(v['torque'] for v in sim.state()['servos'].values())
    code, _, err = snake(capsys, 'dxl', 'write', '2', 'return_delay_time', '5', *b)
    assert code == 2 and 'access error' in err and 'torque off first' in err
    code, _, err = snake(capsys, 'dxl', 'read', '2', 'warp_core', *b)
    assert code == 2 and 'unknown register' in err
    sim.command('trip 3 overheating')
    code, out, _ = snake(capsys, 'dxl', 'monitor', *b, '--count', '3', '--interval', '0.05')
    assert code == 0 and 'overheating' in out and out.count(' on ') >= 2
    sim.command('set 3 present_temperature 40')      # cooled down: the reboot clears the error for good
    assert snake(capsys, 'dxl', 'reboot', '3', *b)[0] == 0
    assert sim.state()['servos']['3']['hw_error'] == 0
    assert snake(capsys, 'dxl', 'torque', 'all', 'off', *b)[0] == 0
    assert not any(v['torque'] for v in sim.state()['servos'].values())


def test_set_id_and_set_baud(sim, capsys):
    b = ['--port', sim.path, '--baud', '1000000']
    code, _, err = snake(capsys, 'dxl', 'set-id', '1', '2', *b)
    assert code == 2 and 'already taken' in err
    assert snake(capsys, 'dxl', 'set-id', '3', '9', *b)[0] == 0
    assert 'ID   9: XM430-W350' in snake(capsys, 'dxl', 'ping', '9', *b)[1]
    code, out, _ = snake(capsys, 'dxl', 'set-baud', '9', '4000000', *b)
    assert code == 0 and 'now at 4000000 baud' in out
    assert snake(capsys, 'dxl', 'ping', '9', *b)[0] == 1
    assert snake(capsys, 'dxl', 'ping', '9', '--port', sim.path, '--baud', '4000000')[0] == 0


def test_monitor_reports_an_unplugged_adapter_in_one_line(capsys):
    with SimBusProcess(['--servos', '2', '--baud', '1000000', '--faults', 'unplug=0.8+5']) as s:
        code, out, err = snake(capsys, 'dxl', 'monitor', '1,2', '--port', s.path, '--baud', '1000000',
                               '--interval', '0.1', '--count', '100')
    assert out.count('ID torque') >= 2                       # it ran before the unplug
    assert code == 2 and s.path in err and ('adapter gone' in err or 'no such device' in err), err


def test_user_errors_are_one_line(capsys, tmp_path):
    code, _, err = snake(capsys, 'dxl', 'ping', '1', '--port', str(tmp_path / 'ttyUSB5'))
    assert code == 2 and 'no such device' in err
    code, _, err = snake(capsys, 'dxl', 'ping', '1,x', '--port', str(tmp_path / 'ttyUSB5'))
    assert code == 2
    code, _, err = snake(capsys, 'sim-bus')          # --robot or --servos required: one line, exit 2
    assert code == 2 and '--robot' in err and len(err.strip().splitlines()) == 1
    code, _, err = snake(capsys, 'sim-bus', '--servos', '2', '--faults', 'corrupt=7')
    assert code == 2 and 'corrupt=7' in err


def test_sim_bus_prints_path_and_stops_on_sigint():
    proc = subprocess.Popen([sys.executable, '-m', 'snake_control.cli', 'sim-bus', '--servos', '2'],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        path = proc.stdout.readline().strip()
        assert path.endswith('ttyDXL')
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    import os
    assert not os.path.exists(path)     # the symlink and its directory are cleaned up
