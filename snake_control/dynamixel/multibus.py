"""A robot whose chain is split over several adapters: one Driver per bus, run in parallel, as one.

``make_driver(robot, port, baud, config, ports)`` returns a Driver for a one-bus robot and, for a robot
YAML with ``buses:``, procbus.ProcessMultiBusDriver (a process per bus) or, with ``processes=False``, this
module's MultiBusDriver (a thread per bus); all have the same API (start, stop, set_command,
set_estop, reset, state, diagnostics, on_state, thread_setup).

Each bus has its own Driver (its own ServoBus and bus thread, so the buses' wire times overlap): each
checks its servos at start, arms their Bus Watchdog, turns their torque off at every exit and reports
the outcome. What ties them together:

- the cycles of all buses fall on one time grid (same period, same epoch);
- one joint_states per cycle with every joint in the robot's order, handed to ``on_state`` by the bus
  thread that read last, once every bus has read; stamped with the mean of the buses' read times;
- commands, estop and reset go to every bus; one config object is shared, so live changes apply to all;
- a fault on one bus (estop, alert, stale servo, a disconnected adapter, a dead loop) puts every bus
  in its policy (safety.decide's peer_policy): the body stops as a whole, and resumes as a whole.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from snake_control.dynamixel.busgroup import BusGroup
from snake_control.dynamixel.driver import Driver
from snake_control.dynamixel.driver_config import DriverConfig, StartupError, command_velocities
from snake_control.dynamixel.readings import DriverDiagnostics, JointStateSnapshot



def make_driver(robot, port: str | None = None, baud: int | None = None, config: DriverConfig | None = None,
                ports: list[str] | None = None, processes: bool = True):
    """The driver for a robot: Driver for one bus line; for several, procbus.ProcessMultiBusDriver (a
    process per bus, the default) or MultiBusDriver (a thread per bus, ``processes=False``: one process,
    but the buses share one interpreter lock, which caps two buses near 1.2x one). ``port`` overrides
    a one-bus robot's port; ``ports`` (one per bus, the YAML's order) any robot's; ``baud`` every bus's.
    ValueError naming the parameter when they do not fit the robot."""
    lines = robot.bus_lines
    if ports and len(ports) != len(lines):
        raise ValueError(f'ports: {len(ports)} given, robot {robot.name} has {len(lines)} bus(es)')
    if len(lines) == 1:
        return Driver(robot, (ports[0] if ports else None) or port, baud, config)
    if port:
        raise ValueError(f'port: robot {robot.name} has {len(lines)} buses; give each its port with ports')
    if processes:
        from snake_control.dynamixel.procbus import ProcessMultiBusDriver
        return ProcessMultiBusDriver(robot, ports, baud, config)
    return MultiBusDriver(robot, ports, baud, config)


class MultiBusDriver(BusGroup):
    """One Driver per bus line of the robot, in parallel, behaving as one (see the module docstring)."""

    def __init__(self, robot, ports: list[str] | None = None, baud: int | None = None,
                 config: DriverConfig | None = None):
        self.robot = robot
        self.config = config or DriverConfig()
        lines = robot.bus_lines
        ports = list(ports) if ports else [None] * len(lines)
        self.drivers = [Driver(robot.on_line(line, port, baud), config=self.config)
                        for line, port in zip(lines, ports)]
        self.names = list(robot.joint_names)
        self.ids = [sid for d in self.drivers for sid in d.ids]
        self.port = ','.join(d.port for d in self.drivers)
        self.baud = self.drivers[0].baud
        self.rate_hz = self.drivers[0].rate_hz
        self.period_s = self.drivers[0].period_s
        index = {n: k for k, n in enumerate(self.names)}
        self._where = [np.array([index[n] for n in d.names]) for d in self.drivers]
        self._lock = threading.Lock()
        self._latest: list[JointStateSnapshot | None] = [None] * len(self.drivers)
        self._snapshot: JointStateSnapshot | None = None
        self.on_state = None
        self.thread_setup = None
        for k, d in enumerate(self.drivers):
            d.on_state = lambda snap, k=k: self._take(k, snap)
            d.thread_setup = lambda: self.thread_setup() if self.thread_setup is not None else []
            d.peer_fault = lambda k=k: self._peer_fault(k)

    # ---------------------------------------------------------------- what the buses share
    def _peer_fault(self, k: int) -> tuple[str | None, tuple]:
        """The worst fault of the buses other than k: ('torque_off' | 'hold' | None, reasons)."""
        policy, reasons = None, []
        for j, d in enumerate(self.drivers):
            if j == k:
                continue
            if d.mode == 'fatal':
                p, why = 'torque_off', [d.fatal_error or 'loop ended']
            elif d.mode == 'disconnected':
                p, why = 'hold', list(d.reasons)
            else:
                p, why = d.fault_policy, list(d.fault_reasons)
            if p is None:
                continue
            policy = 'torque_off' if 'torque_off' in (p, policy) else 'hold'
            reasons += [f'bus {d.port}: {r}' for r in why]
        return policy, tuple(reasons)

    def _take(self, k: int, snap: JointStateSnapshot):
        """A bus's reading: once every bus has read since the last one, publish them as one."""
        with self._lock:
            self._latest[k] = snap
            if any(s is None for s in self._latest):
                return
            parts, self._latest = self._latest, [None] * len(self.drivers)
            merged = self._snapshot = self.merged_state(parts)
        if self.on_state is not None:
            self.on_state(merged)       # the driver whose thread this is guards against its exceptions

    # ---------------------------------------------------------------- the Driver API
    def start(self) -> None:
        """Start every bus in parallel (each checks and configures its servos); if any fails, the others
        are stopped (torque off) and StartupError names each failing bus."""
        epoch = time.monotonic()
        for d in self.drivers:
            d.cycle_epoch = epoch
        errors: list[str | None] = [None] * len(self.drivers)

        def start(k, d):
            try:
                d.start()
            except StartupError as exc:
                errors[k] = str(exc)
        threads = [threading.Thread(target=start, args=(k, d), name=f'dxl-start-{k}')
                   for k, d in enumerate(self.drivers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if any(errors):
            self.stop()
            raise StartupError('; '.join(e for e in errors if e))

    def stop(self) -> bool:
        """Stop every bus in parallel, each turning its servos' torque off (confirmed, retried, reported
        by its Driver). True if every servo on every bus is confirmed off."""
        results = [True] * len(self.drivers)

        def stop(k, d):
            results[k] = d.stop()
        threads = [threading.Thread(target=stop, args=(k, d), name=f'dxl-stop-{k}')
                   for k, d in enumerate(self.drivers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return all(results)

    def set_command(self, names, positions_rad, velocities_rad_s=None) -> bool:
        """A command for any subset of joints by name: each bus takes its own joints. The whole command
        is checked first (names, lengths, finite values), so it is taken by all buses or by none."""
        names = list(names) if names is not None else []
        try:
            positions = np.asarray(positions_rad, dtype=float).ravel()
        except (TypeError, ValueError):
            positions = None
        known = set(self.names)
        if (positions is None or not names or len(positions) != len(names) or any(n not in known for n in names)
                or not np.all(np.isfinite(positions))
                or (vel := command_velocities(velocities_rad_s, len(names))) is False):
            # refused, counted and reported there
            return self.drivers[0].set_command(names, positions, velocities_rad_s)
        ok = True
        for d in self.drivers:
            mine = [k for k, n in enumerate(names) if n in d.index]
            if mine:
                ok = d.set_command([names[k] for k in mine], positions[mine],
                                   None if vel is None else vel[mine]) and ok
        return ok

    def set_estop(self, active: bool) -> None:
        for d in self.drivers:
            d.set_estop(active)

    def reset(self) -> None:
        for d in self.drivers:
            d.reset()

    def diagnostics(self) -> DriverDiagnostics:
        """Every bus's diagnostics as one: the worst mode, reasons and events by port, counters summed,
        the slowest cycle rate and the worst jitter, every servo; cycles are the robot's (every bus's)."""
        parts = [d.diagnostics() for d in self.drivers]
        return self.merged_diagnostics(parts, [p.fatal_error for p in parts if p.fatal_error],
                                       [n for p in parts for n in p.torque_off_unconfirmed])

