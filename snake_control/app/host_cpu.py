"""How busy the computer was during a run, and how much of that was the run itself.

A controller that misses its rate on a computer that other programs keep busy says little about the
controller; the run's summary says which it was. Over the run, the CPU time the whole machine spent
busy (/proc/stat: user, nice, system, irq, softirq; not idle, I/O wait or a hypervisor's steal) is
split into this process with its waited-for children (the driver's process, the emulated bus and its
physics: resource.getrusage) and the rest, other programs. Linux only: elsewhere there is no figure.

    watch = CpuWatch()                 # before the run's processes start
    ...                                # run, then stop and wait for its processes
    share = watch.stop()               # CpuShare, or None without /proc/stat
    share.line(), share.warning()
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

PROC_STAT = '/proc/stat'
# The machine counts as saturated when this share of its cores was busy; other programs then matter
# once they took at least OTHER_CORES_AIM of a core on average.
SATURATED_SHARE = 0.9
OTHER_CORES_AIM = 0.25


def machine_busy_s(path: str = PROC_STAT) -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (user, nice, system, irq,
    softirq; guest time is inside user), or None when the file cannot be read."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 8 or fields[0] != 'cpu':
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf('SC_CLK_TCK')


def own_cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its children that have been waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class CpuShare:
    """A run's wall time (s), the cores it used on average (this process and its waited-for children),
    the cores other programs used on average, and the machine's core count."""

    wall_s: float
    own_cores: float
    other_cores: float
    cores: int

    @property
    def saturated(self) -> bool:
        return self.own_cores + self.other_cores >= SATURATED_SHARE * self.cores

    def line(self) -> str:
        return (f'computer: this run used {self.own_cores:.2f} cores on average, other programs '
                f'{self.other_cores:.2f}, of {self.cores}')

    def warning(self) -> str | None:
        """A WARN line when the computer was saturated and not by this run alone, else None."""
        if not (self.saturated and self.other_cores >= OTHER_CORES_AIM):
            return None
        return (f'WARN the computer was saturated ({self.own_cores + self.other_cores:.1f} of {self.cores} '
                f'cores busy, {self.other_cores:.1f} by other programs): the rates and faults above are '
                f'partly theirs; run again on a quieter computer to judge the controller')


class CpuWatch:
    """Starts measuring when made; stop() gives the CpuShare since (None without /proc/stat)."""

    def __init__(self, path: str = PROC_STAT):
        self.path = path
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_s(path)
        self.own0 = own_cpu_s()

    def stop(self) -> CpuShare | None:
        busy = machine_busy_s(self.path)
        wall = time.monotonic() - self.t0
        if busy is None or self.busy0 is None or wall <= 0:
            return None
        own = own_cpu_s() - self.own0
        # /proc/stat ticks and rusage differ in resolution: other programs never count below 0.
        other = max(busy - self.busy0 - own, 0.0)
        return CpuShare(wall, own / wall, other / wall, os.cpu_count() or 1)
