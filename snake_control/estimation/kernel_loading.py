"""Loading the estimator's compiled kernels (snake_control.estimation.kernels) without stalling a node.

numba compiles the kernels on their first import after an install (about 20 s of CPU on a small computer)
and loads them from its on-disk cache after that (about a second). ``compiled()`` is what the estimator
asks on every step; ``prepare_kernels()`` is what a node calls before it spins: it loads them when the
cache holds them, and otherwise leaves the process on the numpy path (the same results to rounding) while
a child process compiles them for the next start.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

_KERNELS = []        # [the kernels module or None] once decided for this process
_BUILDS = []         # [KernelBuild] while a child compiles them for the next start

# The kernels compiled at import (explicit signatures): numba keeps one index file for each.
SIGNED_KERNELS = ('_chain_poses', '_to_frame', '_contact_rows', '_support_plane', '_heights', '_se3_step',
                  '_rest_on_plane', '_coulomb_weights', '_static_loads', '_supporting_contacts',
                  '_solve_contact_rows', '_virtual_chassis')


def compiled():
    """The compiled kernels module (snake_control.estimation.kernels) or None: no numba, or this process
    runs the numpy path (the same results to rounding) while a child compiles them (prepare_kernels).

    Imported on first use: numba takes about a second to import, which planar robots and tools that never
    run a pitch-yaw estimate should not pay."""
    if not _KERNELS:
        from snake_control.estimation import kernels
        _KERNELS.append(kernels if kernels.AVAILABLE else None)
    return _KERNELS[0]


def kernels_source() -> Path:
    return Path(importlib.util.find_spec('snake_control.estimation.kernels').origin)


def cache_dirs(source: Path) -> list[Path]:
    """Where numba keeps the cache of source: NUMBA_CACHE_DIR/<folder>_<sha1 of the folder path> when that
    is set, else __pycache__ beside it (numba's own naming; where neither is writable it falls back to a
    per-user directory, which this does not look in)."""
    folder = str(source.resolve().parent)
    root = os.environ.get('NUMBA_CACHE_DIR')
    if root:
        return [Path(root) / f'{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}']
    return [source.parent / '__pycache__']


def cache_is_fresh(source: Path, dirs) -> bool:
    """Whether dirs hold numba's index of every signed kernel of source, written after source last changed
    (an index older than the source is stale: importing would compile)."""
    changed = source.stat().st_mtime
    for name in SIGNED_KERNELS:
        index = [p for d in dirs for p in Path(d).glob(f'{source.stem}.{name}-*.nbi')]
        if not index or max(p.stat().st_mtime for p in index) < changed:
            return False
    return True


# The child that fills numba's on-disk cache: at low priority, so a running graph keeps its cores; it
# fails (exit 3) when numba kept the cache somewhere the next start will not look.
KERNEL_BUILD_CODE = (
    'import os, sys; os.nice(10)\n'
    'import snake_control.estimation.kernels\n'
    'from snake_control.estimation import kernel_loading as k\n'
    'source = k.kernels_source()\n'
    'if not k.cache_is_fresh(source, k.cache_dirs(source)):\n'
    '    sys.exit("numba kept the compiled kernels outside " + str(k.cache_dirs(source)[0]) + "; set '
    'NUMBA_CACHE_DIR to a writable directory")\n')


class KernelBuild:
    """The kernels compiled into numba's cache by a child process, for the next start.

    The first import after an install compiles them, about 20 s of CPU on a small computer. A node that did
    that in a callback would publish nothing meanwhile and could not be stopped (the interpreter does not
    see Ctrl-C inside LLVM); loading them into a running process is a second of interpreter time that
    starves its executor. So the process that finds the cache empty runs the numpy path to its end, and a
    child compiles at low priority. SIGTERM stops the child at any time; numba has saved each kernel it
    finished. log(level, text) reports: level 'info' or 'warn'."""

    def __init__(self, log, build_code: str = KERNEL_BUILD_CODE):
        self._log = log
        self._build_code = build_code
        self._proc = None
        self._stopped = False
        self.ok = None                  # whether the cache was filled, once done
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name='estimator-kernels', daemon=True)

    def _run(self):
        try:
            started = time.monotonic()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            self._proc = subprocess.Popen([sys.executable, '-c', self._build_code], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          start_new_session=True)     # a terminal's Ctrl-C is the node's
            if self._stopped:
                self._proc.terminate()
            _, err = self._proc.communicate()
            if self._stopped:
                return
            self.ok = self._proc.returncode == 0
            if self.ok:
                self._log('info', f'estimator kernels compiled and cached in {time.monotonic() - started:.0f} s: '
                          'the next start loads them (this run stays on the numpy path)')
            else:
                last = (err.decode(errors='replace').strip().splitlines() or ['no output'])[-1]
                self._log('warn', f'compiling the estimator kernels failed ({last}): the numpy path runs')
        except OSError as exc:
            self.ok = False
            self._log('warn', f'compiling the estimator kernels failed ({exc}): the numpy path runs')
        finally:
            self.done.set()

    def stop(self):
        """Stop the child; safe to call at any time and more than once."""
        self._stopped = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()


def _cache_state() -> str:
    """'no numba' (absent or SNAKE_NO_NUMBA), 'fresh' (the next import loads them) or 'empty' (it compiles)."""
    if os.environ.get('SNAKE_NO_NUMBA') or importlib.util.find_spec('numba') is None:
        return 'no numba'
    source = kernels_source()
    return 'fresh' if cache_is_fresh(source, cache_dirs(source)) else 'empty'


def prepare_kernels(log, build_code: str = KERNEL_BUILD_CODE):
    """At a node's start, before it spins: load the kernels when numba's cache holds them (about a second),
    else run this process on the numpy path and compile them in a child for the next start. Decided once
    per process: returns the KernelBuild when this call started one, else None."""
    if _KERNELS:
        return None
    state = _cache_state()
    if state == 'fresh':
        compiled()
        return None
    _KERNELS[:] = [None]
    if state == 'no numba':
        return None
    log('info', 'the estimator kernels are not compiled yet (the first start after an install): this run '
        'estimates on the numpy path while a child process compiles them (about 20 s of CPU, at low priority)')
    build = KernelBuild(log, build_code)
    _BUILDS[:] = [build]
    atexit.register(build.stop)
    build.thread.start()
    return build


def first_compile_notice() -> str:
    """One line for a command about to import the kernels into an empty cache (it then waits), or ''."""
    if _KERNELS or _cache_state() != 'empty':
        return ''
    return ('compiling the estimator kernels: the first use after an install takes about 20 s of CPU, later '
            'runs load them from the cache')


def kernels_state() -> str:
    """'compiled'; 'compiling' (numpy in this process, a child compiles them for the next start); 'numpy'
    (no numba, or the compile failed); 'not loaded' (none asked for yet)."""
    if _KERNELS and _KERNELS[0] is not None:
        return 'compiled'
    if _BUILDS and not _BUILDS[0].done.is_set():
        return 'compiling'
    return 'numpy' if _KERNELS else 'not loaded'


@contextlib.contextmanager
def numpy_only():
    """The numpy path inside a with block, the kernels (if any) after it: for comparisons and benchmarks."""
    compiled()
    saved = _KERNELS[:]
    _KERNELS[:] = [None]
    try:
        yield
    finally:
        _KERNELS[:] = saved
