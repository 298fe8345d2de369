"""The gait node's decisions, without ROS: the scheduler, the velocity command, the e-stop and the
torque check on parameter changes (pure Python on numpy; snake_control/nodes/gait_node.py is its shell).

    c = GaitController(robot, 'serpentine', period_s=0.01, limits=CommandLimits(...), cmd_timeout_s=0.5,
                       torque_estimator=gait_check.torque_estimator(robot),
                       calibration='auto',          # or a gaits.calibration.Calibration, or None
                       trim=TrimSettings(), closed_loop=True,
                       closed_loop_skip=('sidewinding',))   # gaits the loop leaves alone
    c.start(q_measured_rad)          # or c.start(None): from the gait's own shape
    c.offer_command(0.05, 0.0, 0.0, now_s)
    c.offer_odometry(now_s, x_m, y_m, heading_rad)   # the estimator's pose: the closed loop's input
    out = c.tick(now_s)              # Output: positions_rad, velocities_rad_s (publish them) or None
    c.engage_estop(); c.hold()       # hold the last commanded pose with zero velocity
    c.release_estop()                # the scheduler restarts, at rest, from the held pose
    c.param_refusal('serpentine', 'B1', 4.0)   # slow (the torque check): call it without a lock
    c.set_param('serpentine', 'B1', 4.0)

Threads: the caller serialises every call except param_refusal, which reads only the accepted
parameters and its own cache, so a control tick may run meanwhile (the check takes about 0.1 s; the
tick must not wait for it).

Times are monotonic seconds chosen by the caller, so tests drive the controller on a fake clock.

cmd_vel reaches the scheduler through the closed loop (gaits/trim.py: a drive gain and a yaw-rate trim
from the odometry's cycle averages), which is reset on a gait switch, a parameter change of the running
gait, and the e-stop. The scheduler maps it with the robot's calibration when the gait has one
(gaits/calibration.py; 'auto' loads <robot>.calibration.yaml beside the robot YAML if it exists).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from snake_control.gaits import catalog
from snake_control.gaits.calibration import Calibration, find_calibration
from snake_control.gaits.feasibility import saturated_joints
from snake_control.gaits.scheduler import GaitScheduler, GaitState
from snake_control.gaits.trim import CANNOT_REACH, TrimLoop, TrimSettings, TrimState
from snake_control.teleop.command_filter import CommandFilter, CommandLimits

MAX_DT_PERIODS = 3.0   # a late tick advances the gait by at most this many periods
# Gait at start when none is given, by robot kind.
DEFAULT_GAITS = {'pitch_yaw': 'serpentine', 'planar': 'wheeled_undulation'}
# diagnostic_msgs/DiagnosticStatus levels, by value (this module does not import ROS).
OK, WARN, ERROR = 0, 1, 2


def default_gait(robot) -> str:
    names = catalog.gaits_for(robot)
    preferred = DEFAULT_GAITS.get(robot.kind)
    return preferred if preferred in names else names[0]


@dataclass(frozen=True)
class TorqueEstimate:
    """Peak joint torque (N m) a gait with some parameters needs, and whether it stays within the
    fraction of stall torque it was checked against (message: why not, one line)."""

    peak_nm: float
    within_limit: bool
    message: str = ''


# (gait, params, fraction of stall) -> TorqueEstimate; snake_control.dynamics.gait_check.torque_estimator
TorqueEstimator = Callable[[str, dict, float], TorqueEstimate]


@dataclass(frozen=True)
class Output:
    """What to publish this tick: joint goals (rad) and velocities (rad/s) in the robot's joint order.
    warning: a one-line reason when the tick was replaced by a hold."""

    positions_rad: np.ndarray
    velocities_rad_s: np.ndarray
    warning: str | None = None


@dataclass(frozen=True)
class Status:
    """The controller as gait/state shows it (GaitController.status())."""

    gait: GaitState
    command: tuple[float, float, float]     # forward m/s, sideways m/s, turn rad/s after the filter
    estopped: bool
    rejected: int                           # rejected cmd_vel and gait selections so far
    trim: TrimState | None = None           # the closed loop (gaits/trim.py)

    def summary(self) -> tuple[int, str, list[tuple[str, object]]]:
        """(level OK/WARN/ERROR, one-line message, [(key, value)]) for diagnostic_msgs."""
        g = self.gait
        worst = max((abs(v) for v in g.saturated.values()), default=0.0)
        if self.estopped:
            level, message = ERROR, f'e-stop: holding ({g.active_gait})'
        elif g.saturated:
            level = WARN
            message = f'{g.active_gait}: {len(g.saturated)} joints at their limits (worst {worst:.3f} rad)'
        elif not g.reachable or (self.trim is not None and self.trim.status == CANNOT_REACH):
            level = WARN
            message = f'{g.target_gait}: cannot reach the command'
            if g.modelled is not None:
                message += (f' (it reaches {g.modelled.speed_m_s:.3g} m/s, '
                            f'{g.modelled.yaw_rate_rad_s:.3g} rad/s)')
        else:
            level = OK
            message = g.active_gait + (f' -> {g.target_gait}' if g.target_gait != g.active_gait else '')
        values = [('active_gait', g.active_gait), ('target_gait', g.target_gait),
                  ('transition_progress', g.transition_progress), ('phase_rad', g.phase_rad),
                  ('phase_rate_rad_s', g.phase_rate_rad_s), ('turn_offset', g.turn_offset),
                  ('command_forward_m_s', self.command[0]), ('command_sideways_m_s', self.command[1]),
                  ('command_turn_rad_s', self.command[2]), ('estop', str(self.estopped).lower()),
                  ('saturated_joints', ','.join(g.saturated)), ('max_saturation_rad', worst),
                  ('rejected_commands', self.rejected)]
        values += [(f'{g.target_gait}.{k}', float(v)) for k, v in g.params.items()]
        values.append(('rate_limited_joints', ','.join(g.rate_limited)))
        values += [('mapping', g.mapping), ('reachable', str(g.reachable).lower())]
        if g.modelled is not None:
            values += [('modelled_speed_m_s', g.modelled.speed_m_s),
                       ('modelled_turn_rad_s', g.modelled.yaw_rate_rad_s)]
        t = self.trim
        if t is not None:
            values += [('closed_loop', t.status), ('trim_speed_gain', t.speed_gain),
                       ('trim_turn_rad_s', t.turn_trim_rad_s), ('measured_drive', t.measured_drive),
                       ('measured_turn_rad_s', t.measured_turn_rad_s)]
        return level, message, values


class GaitController:
    """The gait loop's state machine: waiting for a start pose, running, e-stopped.

    overrides: {gait: {param: value}} away from the catalogue's defaults, used whenever that gait is
    selected. torque_fraction: refuse a parameter change whose estimated peak joint torque exceeds this
    fraction of stall and is higher than before (0 disables the check; torque_estimator None too).
    """

    def __init__(self, robot, gait: str | None = None, *, period_s: float, limits: CommandLimits,
                 cmd_timeout_s: float, overrides: dict | None = None, torque_fraction: float = 0.0,
                 torque_estimator: TorqueEstimator | None = None, calibration: Calibration | str | None = 'auto',
                 trim: TrimSettings | None = None, closed_loop: bool = True,
                 closed_loop_skip: tuple = ()):
        self.robot = robot
        self.gait_names = list(catalog.gaits_for(robot))
        gait = default_gait(robot) if gait is None else gait
        if gait not in self.gait_names:
            raise ValueError(f'unknown gait {gait!r} for robot {robot.name}; known: {", ".join(self.gait_names)}')
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f'period_s must be finite and > 0, got {period_s!r}')
        self.initial_gait = gait
        self.period_s = float(period_s)
        self.overrides = {g: dict((overrides or {}).get(g, {})) for g in self.gait_names}
        self.commands = CommandFilter(limits, cmd_timeout_s)
        self.torque_fraction = float(torque_fraction)
        self.torque_estimator = torque_estimator
        self._torque_peaks: dict = {}   # gait -> (params, peak N m) of the accepted parameters
        self.scheduler: GaitScheduler | None = None
        self.estopped = False
        self.hold_positions: np.ndarray | None = None
        self.last_output: np.ndarray | None = None      # the last commanded positions (rad)
        self.last_tick_s: float | None = None
        self.rejected_selects = 0
        self.lower = np.asarray(robot.lower_rad, dtype=float)
        self.upper = np.asarray(robot.upper_rad, dtype=float)
        if isinstance(calibration, str):
            if calibration != 'auto':
                raise ValueError(f"calibration must be 'auto', a Calibration or None, got {calibration!r}")
            calibration = find_calibration(robot)       # ConfigError when the file is bad
        self.calibration: Calibration | None = calibration
        self.trim = TrimLoop(trim, closed_loop)
        self.closed_loop_skip = frozenset(closed_loop_skip)

    # -- start -------------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self.scheduler is not None

    def start(self, positions_rad=None, still_s: float = 0.0) -> None:
        """(Re)start the scheduler at rest in the initial gait, from positions_rad (None: the gait's
        own shape), holding positions_rad for still_s first (GaitScheduler's still_s)."""
        self.scheduler = GaitScheduler(self.robot, gait=self.initial_gait,
                                       params=self.overrides[self.initial_gait] or None,
                                       initial_positions_rad=positions_rad, calibration=self.calibration,
                                       still_s=still_s if positions_rad is not None else 0.0)
        self.last_tick_s = None
        self.trim.reset()

    # -- inputs ------------------------------------------------------------------------------------
    def offer_command(self, forward_m_s: float, sideways_m_s: float, turn_rad_s: float,
                      now_s: float) -> str | None:
        """A cmd_vel; returns a reason when rejected."""
        return self.commands.offer(forward_m_s, sideways_m_s, turn_rad_s, now_s)

    def offer_odometry(self, now_s: float, x_m: float, y_m: float, heading_rad: float) -> None:
        """The estimator's body pose on the floor (m, rad) at monotonic now_s: the closed loop's input."""
        self.trim.observe(now_s, x_m, y_m, heading_rad)

    def set_command_limits(self, limits: CommandLimits, cmd_timeout_s: float) -> None:
        self.commands.limits = limits
        self.commands.timeout_s = float(cmd_timeout_s)

    @property
    def rejected(self) -> int:
        return self.commands.rejected + self.rejected_selects

    def select(self, name) -> str | None:
        """Switch gait (smoothly once started); returns a reason when refused."""
        if not isinstance(name, str) or name not in self.gait_names:
            self.rejected_selects += 1
            return f'unknown gait {repr(name)[:60]} for {self.robot.name}; known: {", ".join(self.gait_names)}'
        if self.scheduler is None:
            self.initial_gait = name
            return None
        before = self.scheduler.state().target_gait
        try:
            self.scheduler.select(name, self.overrides[name] or None)
        except ValueError as exc:
            self.rejected_selects += 1
            return str(exc)
        if name != before:
            self.trim.reset()       # another gait: what was learnt for the old one does not apply
        return None

    # -- the e-stop --------------------------------------------------------------------------------
    def engage_estop(self) -> bool:
        """Hold the last commanded pose with zero velocity from now on (publish hold() at once);
        True when the e-stop was not engaged before."""
        if self.estopped:
            return False
        self.estopped = True
        self.commands.hold_zero()
        self.trim.reset()
        self.hold_positions = None if self.last_output is None else self.last_output.copy()
        return True

    def release_estop(self) -> bool:
        """Resume from zero speed; True when the e-stop was engaged. The scheduler restarts at rest
        from the held pose, blending back into the gait it was heading for: its own velocity from
        before the stop must not reappear as a jump."""
        if not self.estopped:
            return False
        self.estopped = False
        self.commands.hold_zero()
        if self.scheduler is not None and self.hold_positions is not None:
            self.initial_gait = self.scheduler.state().target_gait
            self.start(self.hold_positions)
        self.last_tick_s = None
        return True

    def hold(self) -> Output | None:
        """The e-stop's hold: the held pose at zero velocity (None when nothing was commanded yet)."""
        if self.hold_positions is None:
            return None
        return Output(self.hold_positions.copy(), np.zeros_like(self.hold_positions))

    # -- the tick ----------------------------------------------------------------------------------
    def tick(self, now_s: float) -> Output | None:
        """One control tick at monotonic time now_s: what to publish, or None (not started yet, or
        e-stopped before any pose was commanded)."""
        if self.scheduler is None:
            return None
        if self.estopped:
            return self.hold()
        dt = self.period_s if self.last_tick_s is None else now_s - self.last_tick_s
        dt = min(max(dt, 0.0), MAX_DT_PERIODS * self.period_s)   # a stalled caller never makes it leap
        self.last_tick_s = now_s
        command = tuple(self.commands.update(now_s))
        drive, rate, reachable, steady, turns, name = self.scheduler.loop_inputs()
        skip = name in self.closed_loop_skip
        self.trim.update(now_s, drive, command, rate, reachable, steady, turns, skip)
        self.scheduler.set_command(*self.trim.command(None if skip else drive, command))
        tick = self.scheduler.step(dt)
        positions = np.asarray(tick.positions_rad, dtype=float)
        velocities = np.asarray(tick.velocities_rad_s, dtype=float)
        if positions.shape != self.lower.shape or velocities.shape != self.lower.shape or not (
                np.all(np.isfinite(positions)) and np.all(np.isfinite(velocities))):
            # Never forward a non-finite goal: keep the last good one.
            if self.last_output is None:
                return None
            return Output(self.last_output.copy(), np.zeros_like(self.last_output),
                          'gait scheduler produced a non-finite or misshapen tick; holding')
        positions = np.clip(positions, self.lower, self.upper)
        self.last_output = positions
        return Output(positions, velocities)

    def status(self) -> Status | None:
        if self.scheduler is None:
            return None
        return Status(self.scheduler.state(), tuple(self.commands.current), self.estopped, self.rejected,
                      self.trim.state())

    # -- gait parameters ---------------------------------------------------------------------------
    def param_refusal(self, gait: str, name: str, value) -> str | None:
        """Why setting gait's parameter name to value must be refused, or None. Checks the value
        against the catalogue, the joints its shape drives past their limits, then the torque the gait
        would need (slow: call it without the lock the tick takes)."""
        if gait not in self.gait_names:
            return f'unknown gait {gait!r} for {self.robot.name}'
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return 'expected a finite number'
        candidate = {**self.overrides[gait], name: float(value)}
        try:
            full_params = catalog.resolve_params(catalog.gait_spec(gait), self.robot, candidate)
            return self.saturation_refusal(gait, full_params) or self.torque_refusal(gait, candidate)
        except ValueError as exc:
            return str(exc)

    def saturation_refusal(self, gait: str, params: dict) -> str | None:
        """Why complete parameters `params` for `gait` must be refused for driving more joints past
        their limits than the parameters in force, or None."""
        spec = catalog.gait_spec(gait)
        now = saturated_joints(self.robot, gait, catalog.resolve_params(spec, self.robot, self.overrides[gait]))
        new = saturated_joints(self.robot, gait, params)
        if len(new) <= len(now):
            return None
        return (f'the shape would drive {len(new)} joints past their limits ({", ".join(new[:6])}'
                f'{", ..." if len(new) > 6 else ""}) against {len(now)} now')

    def set_param(self, gait: str, name: str, value: float) -> None:
        """Take an accepted parameter value: the target gait changes through the scheduler's smooth,
        phase-matched switch; any other gait uses it when next selected."""
        if self.scheduler is not None and self.scheduler.state().target_gait == gait:
            self.scheduler.set_params({name: float(value)})
            self.trim.reset()
        self.overrides[gait] = {**self.overrides[gait], name: float(value)}

    def torque_refusal(self, gait: str, candidate: dict) -> str | None:
        """Why parameters `candidate` for `gait` must be refused for the torque they need, or None.

        Refused when they need more than torque_fraction of stall torque and more than the parameters
        in force: a gait already over the line can still be tuned down, never up.
        """
        if self.torque_fraction <= 0.0 or self.torque_estimator is None:
            return None
        new = self.torque_estimator(gait, candidate, self.torque_fraction)
        if new.within_limit:
            return None
        current = self.overrides[gait]
        cached = self._torque_peaks.get(gait)
        old_peak = cached[1] if cached and cached[0] == current else \
            self.torque_estimator(gait, current, self.torque_fraction).peak_nm
        self._torque_peaks[gait] = (dict(current), old_peak)
        if new.peak_nm <= old_peak + 1e-9:
            return None
        return (f'{new.message} Peak {new.peak_nm:.2f} N m against {old_peak:.2f} N m now; changes that '
                f'raise the peak above the limit are refused (torque_check_fraction 0 disables the check)')
