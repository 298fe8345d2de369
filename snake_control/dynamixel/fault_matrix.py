"""The driver through one bus fault at a time, against the emulated bus: what the fault-matrix tests
assert and `make bench` prints.

``run_fault(name, robot)`` starts the emulated bus for the robot, the real Driver on its pty, streams a
smooth command at the control rate, injects the fault, streams on, stops the driver, and reads the
emulated servos' registers and goal log. FAULTS names the faults: none, stall (the line takes no bytes
for 1.5 s), corruption (1 % of bytes), drops (1 % of replies), corruption+drops (1 % each; also at
0.5 % and 0.2 %, to show the noise at which every servo stays fresh), silent (one servo for 0.6 s),
unplug (the adapter for 0.6 s), trip (one servo overheats).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from snake_control.dynamixel.driver import Driver, DriverConfig
from snake_control.dynamixel.simbus import robot_args
from snake_control.dynamixel.simproc import SimBusProcess

# name: (sim-bus --faults, control-channel command sent mid-run)
FAULTS = {
    'none': ('', None),
    'stall': ('', 'stall 1.5'),
    'corruption': ('corrupt=0.01,seed=5', None),
    'drops': ('drop=0.01,seed=5', None),
    'corruption+drops': ('corrupt=0.01,drop=0.01,seed=5', None),
    'c+d 0.5 %': ('corrupt=0.005,drop=0.005,seed=5', None),
    'c+d 0.2 %': ('corrupt=0.002,drop=0.002,seed=5', None),
    'silent': ('', 'silent 2 0.6'),
    'unplug': ('', 'unplug 0.6'),
    'trip': ('', 'trip 1 overheating'),
}


@dataclass
class FaultResult:
    fault: str
    survived: bool                 # the loop still ran at the end, no fatal error
    mode_at_end: str
    fresh_fraction: float          # cycles that read every servo / cycles
    min_servo_fresh: float         # the worst servo's fraction of fresh cycles
    max_goal_step_rad: float       # largest goal change of a joint between two cycles while running
    step_limit_rad: float          # velocity limit x control period (what a resume may step)
    goals_in_limits: bool          # every goal the servos saw lies within the joint limits
    torque_off_at_end: bool        # every servo's Torque Enable register reads 0 after stop()
    unconfirmed: list              # servos the driver reported not confirmed off
    counters: dict
    read_mode: str = ''            # the driver's read mode at the end (read_strategy)
    reads_per_cycle: float = 0.0   # state reads per cycle, follow-ups included


def run_fault(fault: str, robot, sim_extra=(), seconds_before=0.6, seconds_after=2.5,
              config: DriverConfig | None = None, settle_s: float = 0.0) -> FaultResult:
    """Drive the robot through one fault of FAULTS. ``settle_s``: after the run, go on commanding for up
    to this long until the driver is running (a test asking whether the robot resumes, not whether it
    had resumed at one instant of a loaded host); the fractions count the run alone."""
    spec, command = FAULTS[fault]
    args = [*robot_args(robot, spread_rad=0.3), *(['--faults', spec] if spec else []), *sim_extra]
    rate = robot.bus.control_rate_hz
    with SimBusProcess(args) as sim:
        d = Driver(robot, sim.path, config=config or DriverConfig(margin_ms=8.0, reconnect_interval_s=0.2))
        d.start()
        stale0 = [s.stale_count for s in d.servos]
        c0, f0, r0 = d.counters.cycles, d.counters.all_fresh_cycles, d.counters.state_reads
        try:
            t0 = time.monotonic()
            injected = False
            while time.monotonic() - t0 < seconds_before + seconds_after:
                t = time.monotonic() - t0
                if command and not injected and t >= seconds_before:
                    sim.command(command)
                    injected = True
                q = 0.3 * np.sin(2 * math.pi * 0.3 * t + np.arange(robot.n_joints))
                d.set_command(robot.joint_names, q)
                time.sleep(1.0 / rate)
            cycles = max(1, d.counters.cycles - c0)
            reads_per_cycle = (d.counters.state_reads - r0) / cycles
            fresh = min(1.0, (d.counters.all_fresh_cycles - f0) / cycles)
            servo_fresh = min(1 - (s.stale_count - a) / cycles for s, a in zip(d.servos, stale0))
            t_settle = time.monotonic() + settle_s
            while d.mode != 'running' and d.running and time.monotonic() < t_settle:
                d.set_command(robot.joint_names, q)
                time.sleep(1.0 / rate)
            survived = d.running and d.fatal_error is None
            mode, read_mode = d.mode, d.read_strategy.mode
        finally:
            d.stop()
        state = sim.state()['servos']
        goals = sim.goals()
    lo, hi = d.tick_limits()
    limits = {sid: (int(lo[k]), int(hi[k])) for k, sid in enumerate(d.ids)}
    in_limits = all(limits[sid][0] <= ticks <= limits[sid][1] for _, sid, ticks, _ in goals)
    return FaultResult(fault, survived, mode, fresh, servo_fresh, d.max_goal_step_rad,
                       float(np.max(d.velocity_limit)) / d.rate_hz, in_limits,
                       not any(v['torque'] for v in state.values()), list(d.torque_off_unconfirmed),
                       dict(d.counters.__dict__), read_mode, reads_per_cycle)
