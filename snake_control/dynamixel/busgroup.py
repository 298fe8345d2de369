"""What a driver of several buses reports as one, shared by its two forms: a thread per bus
(multibus.MultiBusDriver) and a process per bus (procbus.ProcessMultiBusDriver)."""
from __future__ import annotations

import numpy as np

from snake_control.dynamixel.readings import DriverDiagnostics, JointStateSnapshot

# Worst first: the mode a multi-bus driver reports is its worst bus's.
MODE_RANK = ('fatal', 'disconnected', 'torque_off', 'hold', 'running', 'stopped')


class BusGroup:
    """The buses' shared view over ``self.drivers`` (per-bus objects with fast, warnings,
    torque_off_unconfirmed, mode, reasons, running and port); the subclass keeps the merged
    joint_states in ``self._snapshot`` under ``self._lock``."""

    @property
    def fast(self) -> bool:
        return all(d.fast for d in self.drivers)

    @property
    def warnings(self) -> list[str]:
        return [w for d in self.drivers for w in d.warnings]

    @property
    def torque_off_unconfirmed(self) -> list[str]:
        return [n for d in self.drivers for n in d.torque_off_unconfirmed]

    @property
    def mode(self) -> str:
        return min((d.mode for d in self.drivers), key=MODE_RANK.index)

    @property
    def reasons(self) -> list[str]:
        return [f'{d.port}: {r}' for d in self.drivers for r in d.reasons]

    @property
    def running(self) -> bool:
        return all(d.running for d in self.drivers)

    def state(self) -> JointStateSnapshot | None:
        with self._lock:
            return self._snapshot

    def merged_state(self, parts: list[JointStateSnapshot]) -> JointStateSnapshot:
        """One joint_states of every bus's reading (``self._where[k]``: bus k's joints in the robot's
        order), stamped with the mean of their read times."""
        arrays = {}
        for field in ('position_rad', 'velocity_rad_s', 'effort', 'fresh', 'current_a'):
            out = np.zeros(len(self.names), dtype=bool if field == 'fresh' else float)
            for where, part in zip(self._where, parts):
                out[where] = getattr(part, field)
            arrays[field] = out
        return JointStateSnapshot(float(np.mean([p.stamp_s for p in parts])), list(self.names), **arrays)

    def merged_diagnostics(self, parts: list[DriverDiagnostics], fatal: list[str],
                           torque_off_unconfirmed: list[str]) -> DriverDiagnostics:
        """The buses' diagnostics as one: the worst mode, reasons and events by port, counters summed,
        the slowest cycle rate and the worst jitter, every servo; cycles are the robot's (every bus's)."""
        counters = {k: sum(p.counters[k] for p in parts) for k in parts[0].counters}
        counters['cycles'] = min(p.counters['cycles'] for p in parts)     # cycles of the robot, not summed
        return DriverDiagnostics(
            mode=self.mode, reasons=self.reasons, fatal_error='; '.join(fatal) or None,
            port=self.port, baud=self.baud, rate_hz_target=self.rate_hz,
            cycle_rate_hz=min(p.cycle_rate_hz for p in parts),
            jitter_p99_ms=max(p.jitter_p99_ms for p in parts),
            read_mode=parts[0].read_mode if len({p.read_mode for p in parts}) == 1 else 'mixed',
            reply_failure_rate=max(p.reply_failure_rate for p in parts),
            counters=counters, disconnected_for_s=max(p.disconnected_for_s for p in parts),
            watchdog_ms=parts[0].watchdog_ms, torque_off_unconfirmed=torque_off_unconfirmed,
            warnings=[w for p in parts for w in p.warnings],
            events=[f'{p.port}: {e}' for p in parts for e in p.events][-10:],
            servos=[s for p in parts for s in p.servos])
