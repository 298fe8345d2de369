"""How busy the computer was during a run (snake_control.app.host_cpu): /proc/stat read right, a waited-for
child's CPU counted as the run's and a process the run does not wait for as another program's, and the
WARN only when the computer was saturated and not by the run alone."""
import os
import subprocess
import sys
import time

import pytest

from snake_control.app.host_cpu import CpuShare, CpuWatch, machine_busy_s

linux = pytest.mark.skipif(not os.path.exists('/proc/stat'), reason='needs /proc/stat (Linux)')

BURN = 'import time\nwhile time.process_time() < {s}: pass\n'


def test_machine_busy_counts_user_nice_system_irq_softirq(tmp_path):
    stat = tmp_path / 'stat'
    hz = os.sysconf('SC_CLK_TCK')
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f'cpu  {hz} {hz} {hz} {50 * hz} {7 * hz} {hz} {hz} {9 * hz} 0 0\ncpu0 1 2 3\n')
    assert machine_busy_s(str(stat)) == pytest.approx(5.0)
    stat.write_text('intr 1 2 3\n')
    assert machine_busy_s(str(stat)) is None
    assert machine_busy_s(str(tmp_path / 'missing')) is None


def test_the_warning_names_a_computer_saturated_by_others():
    busy = CpuShare(10.0, own_cores=1.4, other_cores=0.7, cores=2)
    assert busy.saturated and 'WARN the computer was saturated (2.1 of 2 cores busy, 0.7 by other' in busy.warning()
    assert CpuShare(10.0, own_cores=1.9, other_cores=0.1, cores=2).warning() is None     # the run alone
    assert CpuShare(10.0, own_cores=1.0, other_cores=0.5, cores=2).warning() is None     # room to spare
    assert 'other programs 0.70, of 2' in busy.line()


@linux
def test_a_waited_for_child_is_the_runs_own_cpu():
    watch = CpuWatch()
    subprocess.run([sys.executable, '-c', BURN.format(s=0.3)], check=True)
    share = watch.stop()
    assert share is not None
    assert share.own_cores * share.wall_s >= 0.29


def _cpu_s(pid: int) -> float:
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


@linux
def test_a_process_the_run_does_not_wait_for_is_another_program():
    watch = CpuWatch()
    burner = subprocess.Popen([sys.executable, '-c', BURN.format(s=0.4) + 'time.sleep(60)\n'])
    try:
        deadline = time.monotonic() + 60
        while _cpu_s(burner.pid) < 0.35:       # /proc counts whole ticks: a little under what it burnt
            assert time.monotonic() < deadline, 'the burner never got 0.35 s of CPU'
            time.sleep(0.02)
        share = watch.stop()
    finally:
        burner.kill()
        burner.wait()
    assert share is not None
    assert share.other_cores * share.wall_s >= 0.25
