"""Loading the estimator's compiled kernels (snake_control.estimation.kernels) without stalling a node.

numba compiles the kernels on their first import after an install (about 20 s of CPU on a small computer)
and loads them from its on-disk cache after that (about a second). ``compiled()`` is what the estimator
asks on every step; ``prepare_kernels()`` is what a node calls at start so that the compile happens in a
child process while the estimator runs the numpy path (the same results to rounding).
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import subprocess
import sys
import threading
import time

_KERNELS = []        # [the kernels module or None] once decided
_PREPARING = []      # [KernelPreparation] while kernels load in the background


def compiled():
    """The compiled kernels module (snake_control.estimation.kernels) or None without numba.

    Imported on first use: numba takes about a second to import, which planar robots and tools that never
    run a pitch-yaw estimate should not pay. While prepare_kernels() loads them in the background this
    returns None, so callers take the numpy path (the same results to rounding) instead of waiting."""
    if not _KERNELS:
        if _PREPARING and not _PREPARING[0].done.is_set():
            return None
        from snake_control.estimation import kernels
        _KERNELS.append(kernels if kernels.AVAILABLE else None)
    return _KERNELS[0]


# The child that fills numba's on-disk cache: at low priority, so a running graph keeps its cores.
KERNEL_BUILD_CODE = 'import os; os.nice(10); import snake_control.estimation.kernels'


class KernelPreparation:
    """The kernels compiled in a child process, then loaded from numba's cache in a thread.

    The first import after an install compiles them, about 20 s of CPU on a small computer; a node that did
    that in a callback would publish nothing meanwhile and could not be stopped (the interpreter does not
    see Ctrl-C inside LLVM). A child is stopped with SIGTERM at any time, and what it compiled so far is
    cached (numba saves each kernel as it is compiled). With the cache full, the child and the load take
    about a second each. log(level, text) reports: level 'info' or 'warn'."""

    def __init__(self, log, build_code: str = KERNEL_BUILD_CODE):
        self._log = log
        self._build_code = build_code
        self._proc = None
        self._stopped = False
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
            took = time.monotonic() - started
            if self._stopped:
                return
            if self._proc.returncode != 0:
                last = (err.decode(errors='replace').strip().splitlines() or ['no output'])[-1]
                self._log('warn', f'compiling the estimator kernels failed ({last}): the numpy path runs')
                _KERNELS[:] = [None]
                return
            from snake_control.estimation import kernels
            if kernels.AVAILABLE and kernels.chain_poses_kernel.stats.cache_misses:
                self._log('warn', 'numba could not keep the compiled estimator kernels on disk, so every start '
                          'compiles them: set NUMBA_CACHE_DIR to a writable directory')
            _KERNELS[:] = [kernels if kernels.AVAILABLE else None]
            if took > 5.0:
                self._log('info', f'estimator kernels compiled in {took:.0f} s and cached; estimates ran on the '
                          'numpy path until now')
        except Exception as exc:          # noqa: BLE001 - any failure leaves the numpy path, reported
            self._log('warn', f'loading the estimator kernels failed ({exc}): the numpy path runs')
            _KERNELS[:] = [None]
        finally:
            self.done.set()

    def stop(self):
        """Stop the child (the numpy path stays in use); safe to call at any time and more than once."""
        self._stopped = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()


def prepare_kernels(log, build_code: str = KERNEL_BUILD_CODE):
    """Start loading the kernels in the background unless they are loaded or loading; returns the
    KernelPreparation (the running one when there is one) or None when there is nothing to do."""
    if _KERNELS:
        return None
    if _PREPARING and not _PREPARING[0].done.is_set():
        return _PREPARING[0]
    if os.environ.get('SNAKE_NO_NUMBA') or importlib.util.find_spec('numba') is None:
        _KERNELS[:] = [None]
        return None
    prep = KernelPreparation(log, build_code)
    _PREPARING[:] = [prep]
    atexit.register(prep.stop)
    prep.thread.start()
    return prep


def kernels_state() -> str:
    """'compiled', 'loading' (the numpy path meanwhile), 'numpy' (no numba) or 'not loaded' (none asked yet)."""
    if _KERNELS:
        return 'numpy' if _KERNELS[0] is None else 'compiled'
    return 'loading' if _PREPARING and not _PREPARING[0].done.is_set() else 'not loaded'


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
