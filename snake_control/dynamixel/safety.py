"""The driver's safety rules as pure functions: what mode this cycle is in, why, and which goal is sent.

``decide(SafetyInputs) -> Decision``: estop, hardware alerts, stale servos and the age of the command
give a mode ('running', 'hold' or 'torque_off') with its reasons and the goal (joint rad) before limits.
``ramp(...)``: after any hold the goal moves from the held pose to the command within each joint's
velocity and acceleration limits instead of stepping there in one write. No I/O, no clock: the driver
calls these once per cycle with what it measured, and tests call them with made-up inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snake_control.dynamixel import protocol as P

MODES = ('running', 'hold', 'torque_off')


@dataclass(frozen=True)
class SafetyInputs:
    """One cycle's inputs. Arrays are per joint, in the robot YAML's order; times in s (monotonic)."""

    now_s: float
    command_rad: np.ndarray | None           # the latest accepted command (None: none yet)
    command_received_s: float
    estop: bool
    names: tuple
    hardware_error: np.ndarray               # Hardware Error Status bits (0: none)
    alert: np.ndarray                        # bool: error bits or the status packet's Alert bit
    stale_cycles: np.ndarray                 # consecutive cycles without a good reading
    present_rad: np.ndarray                  # last good position of each joint
    hold_goal_rad: np.ndarray | None         # the pose held since the hold began (None: not holding)
    previous_mode: str                       # mode of the last cycle ('running', 'hold', 'torque_off')
    resume_after_s: float                    # commands received before this do not end a hold
    stale_limit: int
    stale_policy: str
    alert_policy: str
    estop_policy: str
    command_timeout_s: float
    # A robot on several buses: the worst fault policy of the other buses ('hold', 'torque_off' or
    # None) with their reasons. The whole body stops together: half a snake running on is no hold.
    peer_policy: str | None = None
    peer_reasons: tuple = ()


@dataclass(frozen=True)
class Decision:
    mode: str                                # 'running' | 'hold' | 'torque_off'
    reasons: tuple                           # why not running (empty when running)
    goal_rad: np.ndarray                     # before the joint limits and the resume ramp
    entered: bool                            # the mode changed this cycle (a policy action)
    command_timed_out: bool = False
    fault_policy: str | None = None          # this bus's own fault (estop, alert, stale): what peers follow


def decide(x: SafetyInputs) -> Decision:
    """The mode and goal for this cycle (see the module docstring).

    Order of precedence: estop runs estop_policy; an alert runs alert_policy and a stale servo
    (stale_limit cycles) stale_policy, and another bus's fault its peer_policy, where 'torque_off'
    wins over 'hold'; with none of these, no
    command, a command older than command_timeout_s, or none newer than resume_after_s means hold.
    Torque off stays until the driver re-arms (previous_mode is then 'hold'). A hold keeps the pose it
    began with: the present positions clipped later to the limits, never a command.
    """
    reasons: list[str] = []
    policy = None
    timed_out = False
    if x.estop:
        reasons.append('estop')
        policy = x.estop_policy
    alert = np.asarray(x.alert)
    # (Every cycle, nearly always none: count_nonzero is the cheapest test of a few dozen flags.)
    alerts = np.flatnonzero(alert).tolist() if np.count_nonzero(alert) else []
    if alerts:
        reasons += [f'alert on {x.names[k]}: '
                    f'{", ".join(P.decode_hardware_error(int(x.hardware_error[k]))) or "?"}' for k in alerts]
        policy = 'torque_off' if x.alert_policy == 'torque_off' else (policy or x.alert_policy)
    stale_mask = np.asarray(x.stale_cycles) >= x.stale_limit
    stale = np.flatnonzero(stale_mask).tolist() if np.count_nonzero(stale_mask) else []
    if stale:
        reasons += [f'{x.names[k]} stale for {int(x.stale_cycles[k])} cycles' for k in stale]
        policy = 'torque_off' if x.stale_policy == 'torque_off' else (policy or x.stale_policy)
    fault = policy
    if x.peer_policy is not None:
        reasons += list(x.peer_reasons)
        policy = 'torque_off' if x.peer_policy == 'torque_off' else (policy or 'hold')
    if policy is None:
        if x.command_rad is None:
            reasons.append('waiting for the first command')
            policy = 'hold'
        elif x.now_s - x.command_received_s > x.command_timeout_s:
            reasons.append('command older than the timeout')
            timed_out = True
            policy = 'hold'
        elif x.command_received_s <= x.resume_after_s:
            reasons.append('waiting for a new command')
            policy = 'hold'
    if x.previous_mode == 'torque_off':
        policy = 'torque_off'            # stays off until the driver re-arms
    present = np.asarray(x.present_rad, dtype=float)
    if policy == 'torque_off':
        return Decision('torque_off', tuple(reasons), present.copy(), x.previous_mode != 'torque_off',
                        timed_out, fault)
    if policy == 'hold':
        entered = x.previous_mode != 'hold' or x.hold_goal_rad is None
        goal = present.copy() if entered else np.asarray(x.hold_goal_rad, dtype=float)
        return Decision('hold', tuple(reasons), goal, entered, timed_out, fault)
    return Decision('running', (), np.asarray(x.command_rad, dtype=float), x.previous_mode != 'running',
                    timed_out, fault)


@dataclass
class RampState:
    """The resume ramp of every joint: the goal sent last cycle and its velocity (rad, rad/s)."""

    goal_rad: np.ndarray
    velocity_rad_s: np.ndarray
    last_command_rad: np.ndarray


def ramp(state: RampState, command_rad: np.ndarray, dt_s: float, velocity_limit_rad_s: np.ndarray,
         acceleration_limit_rad_s2: np.ndarray, tolerance_rad: float = 1e-3) -> tuple[np.ndarray, bool]:
    """One cycle of the resume ramp: (goal_rad, done).

    Each joint's goal velocity tracks the command's own velocity plus the fastest approach that can
    still brake (v = sqrt(2 a |error|)), limited to the velocity limit, and changes by at most the
    acceleration limit times dt. A goal that would reach or pass the command lands on it and moves
    with it (that last step may brake up to ~20 % harder than the limit: the discrete braking curve
    meets the command between two steps). ``done`` when every
    goal is within tolerance_rad of the command and moves with it: from then on the command goes
    through unchanged. ``state`` is updated in place.
    """
    command = np.asarray(command_rad, dtype=float)
    v_max = np.asarray(velocity_limit_rad_s, dtype=float)
    a_max = np.asarray(acceleration_limit_rad_s2, dtype=float)
    v_cmd = np.clip((command - state.last_command_rad) / dt_s, -v_max, v_max)
    error = command - state.goal_rad
    # The fastest speed that still stops within |error| when it drops by a*dt per step (the discrete
    # form of v = sqrt(2 a |error|)).
    v_approach = np.sign(error) * a_max * (np.sqrt(dt_s ** 2 / 4.0 + 2.0 * np.abs(error) / a_max) - dt_s / 2.0)
    v_want = np.clip(v_cmd + v_approach, -v_max, v_max)
    dv = a_max * dt_s
    v = np.clip(v_want, state.velocity_rad_s - dv, state.velocity_rad_s + dv)
    goal = state.goal_rad + v * dt_s
    landed = (command - goal) * error <= 0          # reached or passed: on the command from now on
    goal = np.where(landed, command, goal)
    v = np.where(landed, v_cmd, v)
    state.goal_rad, state.velocity_rad_s, state.last_command_rad = goal, v, command.copy()
    done = bool(np.all(np.abs(command - goal) <= tolerance_rad)
                and np.all(np.abs(v - v_cmd) <= dv + 1e-9))
    return goal.copy(), done
