"""Optional real-time scheduling for the servo bus thread (Linux): SCHED_FIFO priority and CPU affinity.

Off by default. A user who grants the rights (root, CAP_SYS_NICE, or an rtprio limit in
/etc/security/limits.conf) can keep a busy computer from delaying a servo cycle. Failures never stop the
driver: they come back as warnings.
"""
from __future__ import annotations

import os


def parse_cpus(text: str) -> set[int]:
    """'2', '2,3' or '0-1' -> a set of CPU numbers; '' -> empty (no pinning). ValueError names the text.

    >>> sorted(parse_cpus('0-1,3'))
    [0, 1, 3]
    """
    cpus: set[int] = set()
    for part in (p.strip() for p in str(text).split(',')):
        if not part:
            continue
        try:
            if '-' in part:
                lo, hi = (int(x) for x in part.split('-', 1))
                if hi < lo:
                    raise ValueError
                cpus.update(range(lo, hi + 1))
            else:
                cpus.add(int(part))
        except ValueError:
            raise ValueError(f'cpu_affinity: expected CPU numbers like "2" or "0-1,3", got {text!r}') from None
    if any(c < 0 for c in cpus):
        raise ValueError(f'cpu_affinity: CPU numbers are >= 0, got {text!r}')
    return cpus


def precise_sleeps() -> None:
    """Let the calling thread's sleeps end on time: Linux timer slack 1 us instead of the default 50 us
    (prctl PR_SET_TIMERSLACK, per thread). The emulator writes each reply when its modelled wire time is
    up, and the bus loop starts each cycle when it is due: the default slack alone would make each some
    50 us late. Elsewhere (no prctl) sleeps stay as they are."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)     # 29: PR_SET_TIMERSLACK, in ns
    except (OSError, AttributeError):
        pass


def die_with_parent(signum: int) -> bool:
    """Ask the kernel to send this process `signum` when its parent dies (prctl PR_SET_PDEATHSIG; strictly,
    when the thread that started it ends). False where that cannot be done (not Linux)."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0) == 0   # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def apply_to_current_thread(priority: int = 0, cpus: set[int] | frozenset = frozenset()) -> list[str]:
    """Give the calling thread SCHED_FIFO `priority` (1-99; 0 leaves the default scheduler) and pin it
    to `cpus` (empty: no pinning). Returns what could not be done, one line each."""
    problems = []
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)      # 0: the calling thread on Linux
        except (OSError, AttributeError) as exc:
            problems.append(f'cpu_affinity {sorted(cpus)} not applied: {exc}')
    if priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(priority)))
        except (OSError, AttributeError) as exc:
            problems.append(f'real-time priority {priority} (SCHED_FIFO) not applied: {exc}; it needs root, '
                            f'CAP_SYS_NICE or an rtprio limit')
    return problems
