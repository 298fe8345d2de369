"""A plant stepped in a process of its own, behind the emulated bus (``snake sim-bus --physics``).

The emulator answers each request within microseconds of its wire time. A physics world stepped in the
emulator's own process shares its interpreter lock: the Python around each step (goal mapping, ground
truth, the IMU's publisher and its DDS threads) holds the lock for stretches of a millisecond or more,
and a request that arrives then is answered late: with the driver alone at 100 Hz on pitch_yaw_32,
about twice as many reads failed that way as with the world in a process of its own (`python -m bench
dynamixel --physics`). Here the world runs in a child process and exchanges, every mechanics
step, the servos' goals, torque and profiles for their measured state through shared arrays: the
emulator's process keeps one thread that serves the wire.

``ProcessPlant`` is the emulator's side, a Plant whose step only copies arrays (not ``threaded``: the
serving loop calls it when a mechanics step is due, and takes the newest state the child published).
The child builds the plant from the same ``MODULE:FACTORY`` reference and argument, steps it every
MECHANICS_STEP_S of wall time (emulator.step_plant_forever), and stops with the emulator, or when the
emulator's process is gone. Ctrl-C reaches the child too (same process group): it leaves stopping to
the emulator, so ground-truth files are flushed and closed by the child itself.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import time

import numpy as np

from snake_control.dynamixel.models import ServoModel
from snake_control.dynamixel.plant import Plant
from snake_control.dynamixel.simbus import plant_factory, plant_reference

# A process killed while it holds the shared lock leaves it held: neither side waits longer than this for it
# (the emulator's step then checks whether the physics process is alive; the physics process whether the
# emulator's is).
LOCK_WAIT_S = 0.05
CHECK_ALIVE_S = 0.5             # how often a plant that published nothing new is checked for a dead process
START_TIMEOUT_S = 60.0          # importing a physics engine and compiling a world, on a loaded host
# Columns of the input rows: goal (servo rad), torque on (0/1), profile velocity, profile acceleration,
# profile changed (0/1).
_GOAL, _TORQUE, _VEL, _ACC, _PROFILE = range(5)
_IN_COLS = 5
_STATE_COLS = 3                 # position rad, velocity rad/s, current A


class ProcessPlant(Plant):
    """The plant ``factory_ref`` (``MODULE:FACTORY``) names, built and stepped in a child process.

    Construct it, let the emulator ``configure`` every servo, then ``start()`` (waits until the child's
    world is ready, raising RuntimeError with the child's error if it could not build it); ``close()``
    stops the child. Before start() and until the child publishes, step() returns no state (the servos
    read where they were configured)."""

    threaded = False

    def __init__(self, factory_ref: str, ids, models_by_id: dict[int, ServoModel], physics_arg=None):
        plant_reference(factory_ref)        # its form now; the child imports it
        self.ids = [int(i) for i in ids]
        self._row = {sid: k for k, sid in enumerate(self.ids)}
        self._models = {sid: models_by_id[sid] for sid in self.ids}
        self._factory_ref, self._physics_arg = factory_ref, physics_arg
        n = len(self.ids)
        ctx = multiprocessing.get_context('spawn')      # a fresh interpreter: nothing of this one's threads
        self._ctx = ctx
        self._lock = ctx.Lock()
        self._inputs_raw = ctx.RawArray('d', n * _IN_COLS)
        self._state_raw = ctx.RawArray('d', n * _STATE_COLS + 1)     # last slot: how many states published
        # The stop flag is a byte in shared memory, not an Event: an Event's set() and is_set() take a lock,
        # and a child killed while it held it (it looks every step) left the emulator's close() waiting on
        # it for ever.
        self._stop = ctx.RawValue('b', 0)
        self._inputs = np.frombuffer(self._inputs_raw).reshape(n, _IN_COLS)
        self._state = np.frombuffer(self._state_raw)
        self._inputs[:, _GOAL] = math.nan
        self._inputs[:, _VEL] = self._inputs[:, _ACC] = math.inf
        self._initial = np.zeros(n)
        self._seen = 0.0
        self._proc = None
        self._next_check_s = 0.0
        self._dead_reported = False
        self._profiles: dict[int, tuple[float, float]] = {}     # row -> profile changes not yet sent

    def configure(self, servo_id: int, model: ServoModel, position_rad: float) -> None:
        self._models[servo_id] = model
        self._initial[self._row[servo_id]] = float(position_rad)

    def set_profile(self, servo_id: int, velocity_rad_s: float, acceleration_rad_s2: float) -> None:
        self._profiles[self._row[servo_id]] = (velocity_rad_s, acceleration_rad_s2)      # sent with the next step

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the child and wait until its world steps (RuntimeError naming the factory otherwise)."""
        if self._proc is not None:
            return
        parent_end, child_end = self._ctx.Pipe(duplex=False)
        self._proc = self._ctx.Process(
            target=_child_main, name='sim-bus-physics', daemon=True,
            args=(self._factory_ref, self.ids, self._models, self._physics_arg, self._initial.tolist(),
                  self._lock, self._inputs_raw, self._state_raw, self._stop, child_end, os.getpid()))
        self._proc.start()
        child_end.close()
        error = 'it exited without a word'
        if parent_end.poll(timeout_s):
            try:
                kind, text = parent_end.recv()
            except EOFError:
                kind = 'error'
            else:
                if kind == 'ready':
                    return
                error = text
        else:
            error = f'not ready after {timeout_s:.0f} s'
        self.close()
        raise RuntimeError(f'--physics {self._factory_ref}: the physics process failed: {error}')

    def step(self, dt_s: float, goals_rad_by_id: dict[int, float],
             torque_on_by_id: dict[int, bool]) -> dict[int, tuple[float, float, float]]:
        if self._dead_reported:
            return {}
        goals = [goals_rad_by_id.get(sid, math.nan) for sid in self.ids]
        torque = [1.0 if torque_on_by_id.get(sid, False) else 0.0 for sid in self.ids]
        rows = None
        if self._lock.acquire(timeout=LOCK_WAIT_S):
            try:
                self._inputs[:, _GOAL] = goals
                self._inputs[:, _TORQUE] = torque
                for k, (vel, acc) in self._profiles.items():
                    self._inputs[k, _VEL], self._inputs[k, _ACC], self._inputs[k, _PROFILE] = vel, acc, 1.0
                self._profiles.clear()
                published = self._state[-1]
                if published != self._seen:
                    rows = self._state[:-1].reshape(-1, _STATE_COLS).tolist()
            finally:
                self._lock.release()
        if rows is None:
            self._check_alive()
            return {}
        self._seen = published
        # A servo the plant left out of its step (NaN) keeps its state, as when the plant runs in-process.
        return {sid: tuple(row) for sid, row in zip(self.ids, rows) if not math.isnan(row[0])}

    def _check_alive(self) -> None:
        """No new state: say so once if the physics process has ended (the servos then stop moving; a
        crash in the engine must not look like servos that froze). Looked at every CHECK_ALIVE_S."""
        now = time.monotonic()
        if self._proc is None or self._dead_reported or now < self._next_check_s:
            return
        self._next_check_s = now + CHECK_ALIVE_S
        if not self._proc.is_alive():
            self._dead_reported = True
            print(f'sim-bus: the physics process ({self._factory_ref}) ended with exit code '
                  f'{self._proc.exitcode}: the servos no longer move', file=sys.stderr, flush=True)

    def close(self) -> None:
        """Stop the child (it flushes and closes what it writes) and wait for it."""
        if self._proc is None:
            return
        self._stop.value = 1
        self._proc.join(timeout=5.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=2.0)
        self._proc = None


def _child_main(factory_ref, ids, models, physics_arg, initial, lock, inputs_raw, state_raw, stop, conn,
                parent_pid):
    """The physics process: build the plant, report ready (or the error), step until told to stop."""
    # Ctrl-C in a terminal reaches the whole process group: the emulator stops this process itself, after
    # its own shutdown, so the world keeps answering until then. SIGTERM (a launch's shutdown) stops it
    # cleanly too.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: setattr(stop, 'value', 1))
    from snake_control.dynamixel.emulator import step_plant_forever
    try:
        plant = plant_factory(factory_ref)(list(ids), models, physics_arg)
        for sid, q in zip(ids, initial):
            plant.configure(sid, models[sid], q)
    except Exception as exc:            # the emulator says it, naming the option
        conn.send(('error', f'{type(exc).__name__}: {exc}'))
        return
    n = len(ids)
    inputs = np.frombuffer(inputs_raw).reshape(n, _IN_COLS)
    state = np.frombuffer(state_raw)

    last = [inputs.copy()]

    def take_inputs():
        if lock.acquire(timeout=LOCK_WAIT_S):
            try:
                rows = last[0] = inputs.copy()
                inputs[:, _PROFILE] = 0.0
            finally:
                lock.release()
        else:                           # the emulator died holding it (stopped() ends the loop next)
            rows = last[0].copy()
            rows[:, _PROFILE] = 0.0
        goals = {sid: g for sid, g in zip(ids, rows[:, _GOAL].tolist()) if not math.isnan(g)}
        torque = {sid: bool(t) for sid, t in zip(ids, rows[:, _TORQUE].tolist())}
        profiles = [(ids[k], (rows[k, _VEL], rows[k, _ACC])) for k in np.flatnonzero(rows[:, _PROFILE]).tolist()]
        return goals, torque, profiles

    def publish(result):
        flat = [v for sid in ids for v in result.get(sid, (math.nan,) * _STATE_COLS)]
        if lock.acquire(timeout=LOCK_WAIT_S):
            try:
                state[:-1] = flat
                state[-1] += 1.0
            finally:
                lock.release()

    def stopped():
        return stop.value != 0 or os.getppid() != parent_pid

    conn.send(('ready', None))
    conn.close()
    try:
        step_plant_forever(plant, take_inputs, publish, stopped)
    finally:
        close = getattr(plant, 'close', None)
        if close is not None:
            close()
        sys.stdout.flush()
