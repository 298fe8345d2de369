"""The plant in a process of its own (snake_control.dynamixel.plant_process): the emulated bus's process
keeps one thread serving the wire, whatever the physics costs. Real child processes, real signals."""
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from snake_control.dynamixel.models import SERVO_MODELS
from snake_control.dynamixel.plant import MotorModel
from snake_control.dynamixel.plant_process import ProcessPlant
from test_dynamixel_conformance import _wait_for

MODEL = SERVO_MODELS['XM430-W350']
HERE = os.path.dirname(os.path.abspath(__file__))


class PidPlant(MotorModel):
    """The built-in motor model, reporting the process it steps in as every servo's current."""

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        return {sid: (q, v, float(os.getpid()))
                for sid, (q, v, _) in super().step(dt_s, goals_rad_by_id, torque_on_by_id).items()}


def pid_plant(ids, models_by_id, physics_arg=None):
    return PidPlant()


class HalfPlant(MotorModel):
    """Steps only the lowest servo ID, as a plant that moves some of the bus's servos may."""

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        out = super().step(dt_s, goals_rad_by_id, torque_on_by_id)
        first = min(out)
        return {first: out[first]}


def half_plant(ids, models_by_id, physics_arg=None):
    return HalfPlant()


def broken_plant(ids, models_by_id, physics_arg=None):
    raise ValueError(f'no world for {physics_arg}')


def wait_for(predicate, timeout_s=30.0):
    """The predicate's first true value within timeout_s (its last value otherwise)."""
    return _wait_for(predicate, timeout_s)


def started_plant(factory: str) -> ProcessPlant:
    """A ProcessPlant of this module's ``factory`` for servos 3 and 7 (configured at 0.1 and -0.2 rad),
    started."""
    plant = ProcessPlant(f'test_dynamixel_plant_process:{factory}', [3, 7], {3: MODEL, 7: MODEL})
    plant.configure(3, MODEL, 0.1)
    plant.configure(7, MODEL, -0.2)
    plant.start()
    return plant


def test_the_plant_steps_in_a_child_process_and_follows_goals_torque_and_profiles():
    plant = started_plant('pid_plant')
    try:
        first = wait_for(lambda: plant.step(0.002, {3: 0.1, 7: -0.2}, {3: False, 7: False}))
        assert first[3][0] == pytest.approx(0.1) and first[7][0] == pytest.approx(-0.2)    # as configured
        child = int(first[3][2])
        assert child != os.getpid() and plant._proc.pid == child
        plant.set_profile(7, 0.5, math.inf)             # 0.5 rad/s: 0.6 rad takes 1.2 s
        t0 = time.monotonic()
        got = wait_for(lambda: (lambda s: s if s and abs(s[7][0] - 0.4) < 1e-6 else None)(
            plant.step(0.002, {3: 0.1, 7: 0.4}, {3: True, 7: True})))
        assert got, 'servo 7 never reached its goal'
        assert time.monotonic() - t0 > 1.0              # the profile reached the child
        # Torque off: the servo stays (at rest, it has nothing to coast on) instead of following a new goal,
        # over 100 steps of the child's.
        states = [wait_for(lambda: plant.step(0.002, {3: 0.1, 7: -0.4}, {3: True, 7: False})) for _ in range(100)]
        assert all(s[7][0] == pytest.approx(0.4, abs=1e-3) for s in states)
    finally:
        plant.close()
    assert plant._proc is None
    assert wait_for(lambda: not os.path.exists(f'/proc/{child}'), 10.0), 'the physics process outlived close()'


def test_a_plant_that_cannot_be_built_is_an_error_naming_the_option():
    plant = ProcessPlant('test_dynamixel_plant_process:broken_plant', [1], {1: MODEL}, 'robot.yaml')
    with pytest.raises(RuntimeError, match=r'--physics test_dynamixel_plant_process:broken_plant: .*'
                                           r'ValueError: no world for robot\.yaml'):
        plant.start()


def _sim_bus(extra=()):
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [HERE, os.environ.get('PYTHONPATH')]))}
    return subprocess.Popen([sys.executable, '-m', 'snake_control.dynamixel.simbus', '--servos', '2',
                             '--physics', 'test_dynamixel_plant_process:pid_plant', *extra],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)


def _children(pid):
    out = subprocess.run(['ps', '-ww', '-o', 'pid=,args=', '--ppid', str(pid)], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if 'spawn_main' in line]


def test_the_emulator_stops_its_physics_process_on_ctrl_c_and_it_stops_itself_when_the_emulator_dies():
    for how in (signal.SIGINT, signal.SIGKILL):
        proc = _sim_bus()
        try:
            assert proc.stdout.readline().strip(), proc.stderr.read()     # the device path: physics ready
            children = wait_for(lambda: _children(proc.pid), 10.0)
            assert len(children) == 1
            if how == signal.SIGINT:                   # Ctrl-C reaches the whole process group
                proc.send_signal(signal.SIGINT)
                os.kill(children[0], signal.SIGINT)
                assert proc.wait(timeout=20) == 0
            else:
                proc.kill()
                proc.wait(timeout=10)
            assert wait_for(lambda: not os.path.exists(f'/proc/{children[0]}'), 10.0), \
                f'the physics process outlived the emulator ({signal.Signals(how).name})'
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_in_process_physics_stays_available():
    proc = _sim_bus(['--physics-in-process'])
    try:
        assert proc.stdout.readline().strip(), proc.stderr.read()     # the plant is built before this
        assert _children(proc.pid) == []
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0


def test_a_physics_process_that_dies_is_reported_not_frozen_silently():
    """A crash in the engine (here: the physics process killed) is one clear line on the emulator's
    stderr, not servos that silently stop moving; the emulator goes on serving the wire."""
    import select
    proc = _sim_bus()
    try:
        assert proc.stdout.readline().strip()
        children = wait_for(lambda: _children(proc.pid), 10.0)
        os.kill(children[0], signal.SIGKILL)
        text, deadline = '', time.monotonic() + 20.0
        while 'no longer move' not in text and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 0.5)[0]:
                text += proc.stderr.readline()
        assert 'sim-bus: the physics process (test_dynamixel_plant_process:pid_plant) ended with exit code -9: ' \
               'the servos no longer move' in text, text
        assert proc.poll() is None                      # still serving
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def test_a_lock_left_held_stalls_neither_side():
    """A process killed while it holds the shared lock leaves it held: the emulator's step gives up on it
    at once (no new state, nothing stalls the wire), and the physics process still stops when told."""
    plant = ProcessPlant('test_dynamixel_plant_process:pid_plant', [3], {3: MODEL})
    plant.configure(3, MODEL, 0.0)
    plant.start()
    held = False
    try:
        assert wait_for(lambda: plant.step(0.002, {3: 0.0}, {3: True}))
        held = plant._lock.acquire(timeout=5.0)         # as if a process had died holding it
        assert held
        t0 = time.monotonic()
        assert plant.step(0.002, {3: 0.1}, {3: True}) == {}
        assert time.monotonic() - t0 < 1.0
        plant._stop.value = 1
        plant._proc.join(timeout=10.0)
        assert not plant._proc.is_alive(), 'the physics process hung on the lock'
    finally:
        if held:
            plant._lock.release()
        plant.close()


def test_servos_the_plant_leaves_out_keep_their_state():
    """As with the plant in the emulator's process, a servo missing from a step's result is not written
    (no NaN reaches the servo's present values)."""
    plant = started_plant('half_plant')
    try:
        state = wait_for(lambda: plant.step(0.002, {3: 0.1, 7: -0.2}, {3: True, 7: True}))
        assert set(state) == {3} and state[3][0] == pytest.approx(0.1)
    finally:
        plant.close()


def test_closing_after_the_physics_process_died_never_waits_on_a_lock_it_held():
    """The physics process can be killed at any instant, holding any lock it takes: the shared data lock,
    or (with a multiprocessing Event for the stop flag) the Event's own, which it took every step to look
    at the flag. close() must then still return: it once waited on the Event's lock for ever (CI, a sim-bus
    that did not end within 20 s of Ctrl-C after its physics process was killed)."""
    import threading
    plant = ProcessPlant('test_dynamixel_plant_process:pid_plant', [3], {3: MODEL})
    plant.configure(3, MODEL, 0.0)
    plant.start()
    held = [plant._lock]
    cond = getattr(plant._stop, '_cond', None)          # an Event's lock, if the flag has one
    if cond is not None:
        held.append(cond)
    acquired = [lock for lock in held if lock.acquire(timeout=5.0)]
    try:
        assert len(acquired) == len(held)
        os.kill(plant._proc.pid, signal.SIGKILL)
        closer = threading.Thread(target=plant.close, daemon=True)
        closer.start()
        closer.join(timeout=15.0)
        assert not closer.is_alive(), 'close() waits on a lock the dead physics process held'
    finally:
        for lock in acquired:
            lock.release()
