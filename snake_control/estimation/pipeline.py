"""estimator_node's per-message logic, with no ROS: what happens to each joint_states and imu reading
between the decoded message and the odometry it gives.

estimator_node (snake_control/nodes/estimator_node.py) decodes the messages and publishes; the offline
replay (snake_control.estimation.replay) feeds a recording's messages in the order they were received.
Both run this one class, so the estimate a replay gives is the node's.

Per joint_states message (``EstimatorPipeline.joint_states``): a zero stamp takes the receive time; the
joints are put in the robot's order (a message without them is rejected); the input gate
(snake_control.estimation.input_gate) rejects implausible stamps and angles or re-anchors the estimate
(stamps that went back: ``Estimator.rebase_time``; a consistent new shape: ``Estimator.reanchor``); the
rest are decimated to ``update_rate_hz``. With ``use_imu`` the reading then waits in the StampOrder
(snake_control.estimation.stamp_order) for the raw IMU reading at its stamp. Each estimator update is
handed to ``publish`` unless ``publish_rate_hz`` limits it.

Per imu reading (``EstimatorPipeline.imu``): a raw IMU (a rate, no orientation) goes through the
StampOrder to ``Estimator.update_imu`` at its own stamp; one with an orientation is held and given, with
its rate, to the following joint updates.

``flush(wall_s)``: the node's timer; joint readings left waiting go out once nothing has been given to the
StampOrder for its ``hold_s`` of wall time (both streams stopped).

``EstimatorParams`` holds the node's parameters with their defaults: the node declares them from it and
the replay takes the same.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_control.estimation.estimator import Estimator
from snake_control.estimation.input_gate import ACCEPT, REBASE, REJECT, InputGate
from snake_control.estimation.stamp_order import StampOrder
from snake_control.robot import reorder_joints


@dataclass
class EstimatorParams:
    """estimator_node's parameters and their defaults (the node's docstring describes each).

    body_frame: '' (or None) for the robot kind's default, a name or a link index (as text or int);
    axial_weight: below 0 (or None) for the robot YAML's link.axial_weight.
    """

    robot: str = 'pitch_yaw_32'
    body_frame: str | int | None = ''
    odom_frame: str = 'odom'
    base_frame: str = ''
    publish_rate_hz: float = 0.0
    # 50 Hz: the pose is as accurate as at 100 (demo replays) for about half the estimator's CPU.
    update_rate_hz: float = 50.0
    diagnostics_rate_hz: float = 1.0
    use_imu: bool = False
    imu_link: int = 0
    imu_attitude_s: float = 0.0
    imu_gap_s: float = 0.05
    axial_weight: float | None = -1.0
    slip_warn_m_s: float = 0.05
    publish_tf: bool = True
    max_stamp_ahead_s: float = 1.0
    limit_margin_rad: float = 0.2

    @property
    def body_frame_choice(self):
        """The Estimator's body_frame: None, a name or a link index."""
        frame = self.body_frame
        if frame is None or isinstance(frame, int):
            return frame
        frame = frame.strip()
        if not frame:
            return None
        return int(frame) if frame.lstrip('-').isdigit() else frame

    @property
    def axial_weight_choice(self) -> float | None:
        """The Estimator's axial_weight: None for the robot YAML's."""
        return None if self.axial_weight is None or self.axial_weight < 0 else float(self.axial_weight)

    def estimate_settings(self) -> dict:
        """The parameters that shape the estimate (ESTIMATE_PARAMETERS), body_frame and axial_weight as the
        Estimator takes them (None: the robot's own)."""
        out = {name: getattr(self, name) for name in ESTIMATE_PARAMETERS}
        out['body_frame'], out['axial_weight'] = self.body_frame_choice, self.axial_weight_choice
        return out


# The parameters that change the estimate (the others name frames, or rate the output and diagnostics).
ESTIMATE_PARAMETERS = ('update_rate_hz', 'use_imu', 'imu_link', 'imu_gap_s', 'imu_attitude_s', 'axial_weight',
                       'body_frame', 'limit_margin_rad', 'max_stamp_ahead_s')


def period_s(rate_hz: float) -> float:
    """1 / rate_hz (s); 0 for a rate of 0 (no limit)."""
    return 0.0 if rate_hz <= 0 else 1.0 / rate_hz


class RateLimit:
    """Which stamps of a stream to let through to keep to period_s (s; 0: every stamp not older than the last
    let through).

    A stamp goes through once it reaches the next due time, which then moves on by one period from the due
    time, not from the stamp: over a long run the stream gives the asked rate, never more and never fewer,
    whatever the input rate (20 Hz of 100 Hz stamps: every fifth; 30 Hz: three of every ten). A stamp early
    by up to JITTER of the input's own interval still counts as due, so rounding and jitter in the stamps do
    not skip a message. A stamp a whole period past its due time (the first one, or one after a gap)
    anchors the due times anew from itself.

    >>> limit = RateLimit(1 / 20)
    >>> [k for k in range(12) if limit(100.0 + 0.01 * k)]
    [0, 5, 10]
    """

    JITTER = 0.25      # of the input interval (and at most of the period)

    def __init__(self, period_s: float = 0.0):
        self.period_s = period_s
        self.reset()

    def reset(self) -> None:
        """Start over: the next stamp goes through and anchors the due times."""
        self._due_s = -math.inf
        self._seen_s = -math.inf

    def __call__(self, stamp_s: float) -> bool:
        """Whether stamp_s (s) goes through."""
        period = self.period_s
        early = self.JITTER * min(max(stamp_s - self._seen_s, 0.0), period)
        self._seen_s = stamp_s
        if stamp_s < self._due_s - early:
            return False
        self._due_s += period
        if self._due_s <= stamp_s:
            self._due_s = stamp_s + period
        return True


def _ignore(*_):
    pass


class EstimatorPipeline:
    """joint_states and imu readings in, estimator updates out (see the module docstring).

    robot: a snake_control.robot.Robot; params: EstimatorParams. publish(stamp_s, state, q_rad) is called
    for each estimator update the publish rate lets out, at the time of the update (the Estimator's own
    geometry is that update's: Estimator.root_pose). warn(kind, text) gets each input event (kind
    'input'), each IMU reading the estimator refused ('imu') and each joint_states message refused
    ('joint_states'). estimator_options: further Estimator keywords (contact_enter_m, ...).

    Counters (for /diagnostics): received, imu_received, decimated, rejected, imu_rejected; last_error
    (the last rejection), last_input_event and last_input_event_s (its wall time), last_receive_s (wall time
    of the last joint_states); counts() gathers them with the estimator's, the StampOrder's and the gate's.
    """

    def __init__(self, robot, params: EstimatorParams | None = None, *, publish=None, warn=None,
                 **estimator_options):
        params = EstimatorParams() if params is None else params
        self.robot = robot
        self.params = params
        self.publish = publish or _ignore
        self.warn = warn or _ignore
        self.use_imu = bool(params.use_imu)
        self.estimator = Estimator(robot, params.body_frame_choice, imu_link=params.imu_link,
                                   imu_gap_s=params.imu_gap_s, imu_attitude_s=params.imu_attitude_s,
                                   axial_weight=params.axial_weight_choice, **estimator_options)
        self.gate = InputGate(robot.lower_rad, robot.upper_rad, robot.velocity_limit_rad_s,
                              limit_margin_rad=params.limit_margin_rad,
                              max_stamp_ahead_s=params.max_stamp_ahead_s)
        # Raw IMU readings and joint_states are handed to the estimator in stamp order: a joint reading
        # waits (at most StampOrder.hold_s of stamps) for the IMU reading at or after its stamp.
        self.order = StampOrder()
        self.joint_names = list(robot.joint_names)    # a property that builds a new list
        # The sample period assumed across a re-anchored stamp: the robot's control period.
        self._nominal_dt = 1.0 / robot.bus.control_rate_hz
        self.update_period_s = period_s(params.update_rate_hz)
        self._publish = RateLimit(period_s(params.publish_rate_hz))
        self._next_update = -math.inf
        self._updates_at = None            # follow_updates: the stamps (us) to update on, decimating the rest
        self.last_order_s = -math.inf      # wall time of the last reading given to the StampOrder
        self._imu = (None, None)           # an orientation-carrying IMU's (orientation, rate)
        self.received = 0
        self.imu_received = 0
        self.decimated = 0
        self.rejected = 0
        self.imu_rejected = 0
        self.last_error = ''
        self.last_input_event = ''
        self.last_input_event_s = -math.inf
        self.last_receive_s = None

    def set_update_rate_hz(self, rate_hz: float) -> None:
        self.update_period_s = period_s(rate_hz)

    def follow_updates(self, stamps_s) -> None:
        """Update on the joint_states with these stamps (s, to the microsecond) and decimate the others,
        instead of keeping to update_rate_hz: for a replay that follows the updates a node made (its odom
        stamps). Which messages the rate keeps depends on the first one the node received, which a
        recorder that started later never saw."""
        self._updates_at = {round(float(s) * 1e6) for s in stamps_s}

    @property
    def publish_period_s(self) -> float:
        """The publish rate limit's period (s; 0: none)."""
        return self._publish.period_s

    def set_publish_rate_hz(self, rate_hz: float) -> None:
        self._publish.period_s = period_s(rate_hz)
        self._publish.reset()

    def joint_states(self, stamp_s: float, now_s: float, names, positions_rad, velocities_rad_s=None,
                     wall_s: float | None = None) -> None:
        """One joint_states message: header stamp (s; 0 = none), receive time now_s on the clock the
        gate compares stamps with, joint names with their positions (rad) and velocities (rad/s; None or
        another length: none); wall_s the monotonic receive time (default now_s)."""
        wall_s = now_s if wall_s is None else wall_s
        self.received += 1
        self.last_receive_s = wall_s
        if stamp_s <= 0.0:
            stamp_s = now_s
        try:
            q = reorder_joints(names, positions_rad, self.joint_names)
            # The gate sees every message (a future stamp must not steer the decimation either).
            verdict = self.gate.check(stamp_s, now_s, q)
            if verdict.action != ACCEPT:
                self.last_input_event = f'joint_states {verdict.kind.replace("_", " ")}: {verdict.reason}'
                self.last_input_event_s = wall_s
                self.warn('input', self.last_input_event)
            if verdict.action == REJECT:
                return
            if verdict.action == REBASE:
                self._next_update = -math.inf
                self._process(self.order.flush())      # what came before the jump goes in first
                self.order.reset()
                if verdict.kind == 'time_rebase':
                    self.estimator.rebase_time(stamp_s - self._nominal_dt)
                    self._publish.reset()     # the rate limit restarts in the new time base too
                else:
                    self.estimator.reanchor()
            elif self._decimated(stamp_s):
                return
            v = None
            if velocities_rad_s is not None and len(velocities_rad_s) == len(names):
                v = reorder_joints(names, velocities_rad_s, self.joint_names)
        except ValueError as exc:
            self._reject(exc)
            return
        if self.use_imu:
            self.last_order_s = wall_s
            self._process(self.order.joints(stamp_s, (q, v)))
        else:
            self._update(stamp_s, q, v)

    def imu(self, stamp_s: float, now_s: float | None, orientation_xyzw=None, rate_rad_s=None, accel_m_s2=None,
            wall_s: float | None = None) -> None:
        """One imu message: header stamp (s; 0 = none: the receive time now_s, which is read only then and
        may be None otherwise), and each of orientation (x, y, z, w), rate (3,) and acceleration (3,) or None
        where the message marks it absent; wall_s the monotonic receive time (default now_s)."""
        self.imu_received += 1
        if orientation_xyzw is not None and np.linalg.norm(orientation_xyzw) < 0.5:
            orientation_xyzw = None
        if orientation_xyzw is None and rate_rad_s is not None:
            # A raw IMU (gyro and accelerometer, like the MuJoCo world's): the estimator's attitude filter
            # integrates every reading at its own stamp; joint_states then take the attitude from it.
            self._imu = (None, None)
            self.last_order_s = now_s if wall_s is None else wall_s
            self._process(self.order.imu(stamp_s if stamp_s > 0.0 else now_s, (rate_rad_s, accel_m_s2)))
            return
        self._imu = (orientation_xyzw, rate_rad_s)

    def flush(self, wall_s: float = math.inf) -> None:
        """Let joint readings waiting for the IMU go once nothing has been given to the StampOrder for its
        hold_s until wall_s (the node's timer); by default at once."""
        if self.order.waiting and wall_s - self.last_order_s > self.order.hold_s:
            self._process(self.order.flush())

    def counts(self) -> dict:
        """The counters, by their /diagnostics names (ints)."""
        est, order = self.estimator, self.order
        return {'received': self.received, 'imu_received': self.imu_received, 'decimated': self.decimated,
                'rejected': self.rejected, 'imu_rejected': self.imu_rejected, 'stale_stamps': est.skipped,
                'imu_gaps': est.imu_gaps, 'imu_late': est.imu_late, 'imu_bridged': est.imu_bridged,
                'stale_held': est.stale_held, 'held_for_imu': order.held, 'imu_timed_out': order.timed_out,
                **{f'input_{kind}': n for kind, n in self.gate.counts.items()}}

    def _decimated(self, stamp: float) -> bool:
        """Whether to skip this message to keep to update_rate_hz (or to the stamps of follow_updates)."""
        if self._updates_at is not None:
            skip = round(stamp * 1e6) not in self._updates_at
            self.decimated += skip
            return skip
        period = self.update_period_s
        if period <= 0.0:
            return False
        if stamp < self._next_update - 1.5 * period:
            self._next_update = -math.inf    # the clock stepped back: never decimate forever
        if stamp < self._next_update - 0.3 * period:
            self.decimated += 1      # shapes between updates add nothing the mid-point step misses
            return True
        self._next_update = max(self._next_update + period, stamp + 0.5 * period)
        return False

    def _process(self, readings) -> None:
        """Hand readings released by the StampOrder to the estimator, in their order."""
        for kind, stamp, item in readings:
            if kind == 'imu':
                try:
                    self.estimator.update_imu(stamp, *item)
                except ValueError as exc:
                    self.imu_rejected += 1
                    self.warn('imu', f'imu rejected: {exc}')
            else:
                self._update(stamp, *item)

    def _reject(self, exc) -> None:
        self.rejected += 1
        self.last_error = str(exc)
        self.warn('joint_states', f'joint_states rejected: {exc}')

    def _update(self, stamp, q, v) -> None:
        orientation, rate = self._imu if self.use_imu else (None, None)
        try:
            state = self.estimator.update(stamp, q, v, orientation, rate)
        except ValueError as exc:
            self._reject(exc)
            return
        if self._publish(stamp):
            self.publish(stamp, state, q)
