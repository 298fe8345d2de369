"""The gait scheduler: what the gait node calls every control tick (pure numpy, no ROS).

API (everything else is private):

    s = GaitScheduler(robot, gait=None, params=None, initial_positions_rad=None, transition_s=1.5,
                      calibration=None)   # a gaits.calibration.Calibration: measured strides
    s.gait_names()                    gaits that fit this robot (catalog.gaits_for)
    s.select(name, params=None)       switch smoothly to a gait (ValueError: unknown / unfit gait, bad param)
    s.set_params({'B1': 4.0})         change the target gait's parameters through the same smooth switch
    s.set_command(forward_m_s, lateral_m_s, turn_rad_s)
                                      cmd_vel semantics (linear.x, linear.y, angular.z); NaN/inf raise
                                      ValueError and leave the command unchanged; huge values are capped
                                      by the gait's phase-rate limit
    s.stop()                          speeds ramp to zero and the shape is held (turning offset frozen)
    tick = s.step(dt_s)               advance dt_s seconds; returns a GaitTick
    s.state()                         a GaitState snapshot (see GaitState)
    s.positions_rad, s.curve()        last output (n,); target MCC curve and s0, or None

GaitTick: t_s, positions_rad (n,), velocities_rad_s (n,), reference_rad (n,) (the blended gait before
limits), saturated {joint name: rad the reference exceeded its joint limit by (signed)}, rate_limited
(names of joints held back by the velocity/acceleration limits this tick), phase_rad (the target
gait's phase).

How it stays smooth:

- Phase. Each gait layer has a phase (rad) whose rate is 2 pi command / stride for the command
  component that drives the gait (catalog.GaitSpec.drive). The rate ramps toward its target with a
  bounded phase acceleration and is capped so the gait's own joint velocities stay under 80 % of the
  joint limits (from a sampled bound of |dq/dphase|), and at the gait's own cap where it has one
  (GaitSpec.max_phase_rate_rad_s: rolling). Stop ramps the rate to zero: the shape is held.
- Mapping cmd_vel to the phase rate and turning offset, per gait (GaitState.mapping): a
  calibration measured for the gait with these parameters (gaits/calibration.py, 'calibration'),
  else for forward gaits on passive wheels the no-slip connection (gaits/stride.py, 'no-slip
  model'), else the gait's stride parameter ('stride parameter'). GaitState.reachable says whether
  the gait can do the command in force.
- Turning. angular.z sets an offset on the gait's turning parameter (turn_gain * angular.z, capped at
  turn_max: A1 for serpentine, beta_yaw, taper, kappa_taper, turn_offset), ramped at turn_max per 0.5 s.
  A mirror image (GaitSpec.mirror_negative) is asked the opposite yaw rate: it turns the other way. A
  calibrated gait's phase rate follows the offset's change a quarter of a cycle behind (_TURN_FELT_CYCLES).
- Switching. select() pushes a new layer whose phase is matched (the phase, among 48 samples, whose
  shape is closest to the current output), then blends in shape (joint-angle) space. Between two
  backbone gaits this is also a blend of curves: the fit is linear in the Bishop curvatures
  (k_yaw, k_pitch) along the body, so every intermediate shape is the fit of the blended curvatures.
  The weight is the quintic smoothstep w(u) = 10u^3 - 15u^4 + 6u^5 (zero velocity and acceleration at
  both ends) over max(transition_s, time that keeps the blend's own velocity under half the joint
  limits). A switch
  requested mid-switch adds another layer on top: the unfinished blend keeps running underneath, so
  the reference stays continuous in position and velocity. Layers whose blend finished are dropped.
- Limits. The blended reference is clamped to the joint limits (reported in tick.saturated), then a
  per-joint tracker (deadbeat when feasible, time-optimal sqrt law otherwise) produces the output:
  |velocity| <= velocity limit, |velocity change| <= acceleration limit * dt, braking before joint
  limits. Output positions are therefore continuous with continuous (piecewise-linear) velocity
  through every switch, and equal the target gait exactly once it is reachable within the limits.
  Non-finite values never reach the output (the last finite reference is held).

Example:
    >>> from snake_control.robot import load_robot
    >>> s = GaitScheduler(load_robot('pitch_yaw_32'), 'serpentine')
    >>> s.set_command(0.05, 0.0, 0.0)
    >>> tick = s.step(0.01)          # tick.positions_rad has 32 joint goals
    >>> s.select('rolling')          # blends over >= 1.5 s
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from snake_control.gaits import catalog, stride

_MAX_LAYERS = 8
_PHASE_SAMPLES = 48
_VEL_SHARE = 0.8          # share of the joint velocity limit a gait may use on its own
_BLEND_VEL_SHARE = 0.5    # share of the joint velocity limit the blend term may use
_TURN_RAMP_S = 0.5
# A calibrated gait's motion per cycle follows a change of its turning offset a little behind the shape:
# the body has to move to take up the new bend (serpentine's yaw rate reaches 44 % of its new value in
# the first cycle after a turn command in MuJoCo). The phase rate is mapped through an offset that
# follows the commanded one by this many gait cycles (e-folding, in phase travelled) instead of through
# the new offset at once, which made serpentine surge 23 % over that first cycle (docs/gaits.md).
_TURN_FELT_CYCLES = 0.25


@dataclass
class GaitTick:
    """One control tick's output. Positions/velocities in the robot's joint order (tail to head)."""

    t_s: float
    positions_rad: np.ndarray
    velocities_rad_s: np.ndarray
    reference_rad: np.ndarray
    saturated: dict = field(default_factory=dict)
    rate_limited: tuple = ()
    phase_rad: float = 0.0          # the target gait's phase after this tick


@dataclass(frozen=True)
class GaitState:
    """A snapshot of the scheduler (GaitScheduler.state()).

    active_gait: the oldest layer still shown; target_gait: the newest. transition_progress: 0..1 of
    the newest switch, 1 when not switching; layers: gait layers blending now. phase_rad and
    phase_rate_rad_s: the target gait's phase and its rate; turn_offset: added to the target gait's
    turn_param (that parameter's units). params: the target gait's parameters. command_*: the command
    in force (cmd_vel semantics); stopped: stop() is holding the shape. modelled: for model-mapped
    gaits (passive wheels) the mean body speed and yaw rate the command gets and whether that is the
    command (snake_control.gaits.stride.Command), else None. saturated: {joint name: rad the
    reference exceeded its limit by} and rate_limited: names held back, both from the last tick; t_s:
    the scheduler's time.
    """

    active_gait: str
    target_gait: str
    transition_progress: float
    layers: int
    phase_rad: float
    phase_rate_rad_s: float
    turn_param: str | None
    turn_offset: float
    params: dict
    command_forward_m_s: float
    command_lateral_m_s: float
    command_turn_rad_s: float
    stopped: bool
    modelled: object | None       # stride.Command: speed_m_s, yaw_rate_rad_s, reachable; None: not modelled
    saturated: dict
    rate_limited: tuple
    t_s: float
    mapping: str = 'stride parameter'   # 'calibration', 'no-slip model', 'stride parameter' or 'none'
    reachable: bool = True        # False: the command is beyond the gait's phase rate or turning range
    mirrored: bool = False        # the target gait runs its mirror image (GaitSpec.mirror_negative)


def _drive_component(command, drive: str | None) -> float:
    """The cmd_vel component (forward m/s, lateral m/s, turn rad/s) that drives a gait's phase."""
    return {'forward': command[0], 'lateral': command[1], 'turn': command[2], None: 0.0}[drive]


class _Layer:
    """A gait shape with its own phase, phase rate and turning offset."""

    def __init__(self, shape: catalog.GaitShape, robot, phase: float, calibration=None, mirrored=False):
        self.shape = shape
        self.spec = shape.spec
        self.mirrored = bool(mirrored)      # spec.mirror_negative: running the mirror image (yaw negated)
        self._yaw_sign = np.where([a == 'yaw' for a in robot.axes], -1.0, 1.0) if mirrored else None
        self.phase = float(phase)
        self.rate = 0.0
        self.turn = 0.0
        self.turn_felt = 0.0        # the offset the body's motion per cycle has taken up (_TURN_FELT_CYCLES)
        bound = shape.phase_derivative_bound()
        with np.errstate(divide='ignore'):
            caps = _VEL_SHARE * robot.velocity_limit_rad_s / bound
            acc_caps = 0.5 * robot.acceleration_limit_rad_s2 / bound
        self.max_rate = min(float(np.min(caps)), self.spec.max_phase_rate_rad_s) if np.any(bound > 0) else 0.0
        self.max_rate_acc = float(np.min(acc_caps)) if np.any(bound > 0) else 0.0
        # A measured calibration first (it may also override the wheels' model); passive wheels: the
        # no-slip connection gives the stride and the turn per cycle exactly.
        self.model = calibration.for_gait(self.spec.name, shape.params) if calibration is not None else None
        if self.model is not None:
            self.mapping = 'calibration'
        elif stride.uses_model(self.spec, robot):
            self.model, self.mapping = stride.stride_model(shape), 'no-slip model'
        else:
            self.mapping = 'stride parameter' if self.spec.drive else 'none'
        self.modelled = None        # the last stride.Command of the model
        self.reachable = True
        # transition bookkeeping (for the blend INTO this layer)
        self.progress = 1.0
        self.duration = 0.0

    def target_rate(self, command) -> float:
        drive = self.spec.drive
        if drive is None:
            return 0.0
        value = _drive_component(command, drive)
        if self.spec.mirror_negative:
            # The mirror image runs forward for a negative command; the other sense is another layer's
            # (GaitScheduler._follow_mirror), so this one slows to a stop.
            value = abs(value) if (value < 0) == self.mirrored else 0.0
        wz = self._yaw_rate_asked(command)
        if self.model is not None:
            self.modelled = self.model.command(value, wz, self.max_rate)
            self.reachable = self.modelled.reachable
            if self.mapping == 'calibration' and self.spec.turn_param and self.turn_felt != self.modelled.turn \
                    and self.modelled.phase_rate_rad_s != 0.0:
                return self.model.rate_for(value, self.turn_felt, self.max_rate)[0]
            return self.modelled.phase_rate_rad_s
        rate = 2.0 * math.pi * value / self.shape.params['stride']
        capped = min(max(rate, -self.max_rate), self.max_rate)
        turn_ok = True
        if drive != 'turn':
            turn_ok = abs(wz) < 1e-9 if not self.spec.turn_param else \
                abs(self.spec.turn_gain * wz) <= self.spec.turn_max
        self.reachable = capped == rate and turn_ok
        return capped

    def _yaw_rate_asked(self, command) -> float:
        """The yaw rate (rad/s) this layer's turning is asked: the mirror image turns the other way for the
        same offset, so it is asked the mirrored one (a turning gait's angular.z drives it instead)."""
        return -command[2] if self.mirrored and self.spec.drive != 'turn' else command[2]

    def advance(self, command, hold_turn: bool, dt: float):
        target = self.target_rate(command)
        step = self.max_rate_acc * dt
        dv = min(max(target - self.rate, -step), step)
        new_rate = self.rate + dv
        dphase = 0.5 * (self.rate + new_rate) * dt
        self.phase += dphase
        self.rate = new_rate
        if self.spec.turn_param and not hold_turn:
            tmax = self.spec.turn_max
            goal = self.modelled.turn if self.model is not None else \
                min(max(self.spec.turn_gain * self._yaw_rate_asked(command), -tmax), tmax)
            step = tmax / _TURN_RAMP_S * dt
            self.turn += min(max(goal - self.turn, -step), step)
        self.turn_felt += (self.turn - self.turn_felt) * min(1.0, abs(dphase) / (2 * math.pi * _TURN_FELT_CYCLES))
        if abs(self.turn - self.turn_felt) <= 1e-4 * max(self.spec.turn_max, 1e-9):
            self.turn_felt = self.turn

    def angles(self) -> np.ndarray:
        return self.angles_at(self.phase, self.turn)

    def angles_at(self, phase: float, turn: float) -> np.ndarray:
        q = self.shape.angles(phase, turn)
        return q * self._yaw_sign if self.mirrored else q


def _smoothstep(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return u * u * u * (10.0 + u * (-15.0 + 6.0 * u))


class GaitScheduler:
    """Phase, speed, turning, smooth gait switching and joint limits for one robot (module docstring)."""

    def __init__(self, robot, gait: str | None = None, params: dict | None = None,
                 initial_positions_rad=None, transition_s: float = 1.5, calibration=None,
                 still_s: float = 0.0):
        """still_s: with initial_positions_rad and a gait, hold the starting pose this long before the
        gait blends in (commands wait too): a rest in which the estimator learns the gyro's bias."""
        if not (math.isfinite(transition_s) and transition_s > 0):
            raise ValueError(f'transition_s must be positive and finite, got {transition_s}')
        if not (math.isfinite(still_s) and still_s >= 0):
            raise ValueError(f'still_s must be finite and >= 0, got {still_s}')
        self.robot = robot
        self.calibration = calibration
        self.n = robot.n_joints
        self._names = tuple(robot.joint_names)
        self.transition_s = float(transition_s)
        self._lower = robot.lower_rad.astype(float)
        self._upper = robot.upper_rad.astype(float)
        self._vmax = robot.velocity_limit_rad_s.astype(float)
        self._pitch = np.array([axis == 'pitch' for axis in robot.axes], dtype=bool)
        self._nvmax = -self._vmax
        self._dt_cache = None
        self._amax = robot.acceleration_limit_rad_s2.astype(float)
        self._command = (0.0, 0.0, 0.0)
        self._hold_turn = False
        self._t = 0.0
        self._saturated = {}
        self._rate_limited = ()
        self._layers: list[_Layer] = []
        if initial_positions_rad is not None:
            q0 = np.asarray(initial_positions_rad, dtype=float)
            if q0.shape != (self.n,) or not np.all(np.isfinite(q0)):
                raise ValueError(f'initial_positions_rad must be {self.n} finite angles, '
                                 f'got shape {q0.shape}')
            q0 = np.clip(q0, self._lower, self._upper)
            self._layers.append(_Layer(catalog.GaitShape(catalog.HOLD, robot, {}, q0), robot, 0.0))
            self._q = q0.copy()
            if gait is not None:
                self.select(gait, params)
                top = self._layers[-1]
                top.progress = -float(still_s) / top.duration     # < 0: not started (step)
        else:
            layer = self._make_layer(gait or 'straight', params, 0.0)
            self._layers.append(layer)
            self._q = np.clip(layer.angles(), self._lower, self._upper)
        self._v = np.zeros(self.n)
        self._ref_prev = self._q.copy()

    # --- configuration ------------------------------------------------------------------------

    def gait_names(self) -> list[str]:
        """Names of the gaits that fit this robot."""
        return catalog.gaits_for(self.robot)

    def _make_layer(self, name, params, phase, mirrored=None) -> _Layer:
        spec = catalog.gait_spec(name)
        catalog.check_gait_fits(spec, self.robot)
        values = catalog.resolve_params(spec, self.robot, params)
        if mirrored is None:
            mirrored = spec.mirror_negative and _drive_component(self._command, spec.drive) < 0
        return _Layer(catalog.GaitShape(spec, self.robot, values), self.robot, phase, self.calibration,
                      mirrored=mirrored)

    def _follow_mirror(self) -> None:
        """A gait that runs its mirror image for negative commands (spec.mirror_negative): when the
        command's sign asks for the other image, blend into it (same gait and parameters, phase-matched),
        as a gait switch does."""
        top = self._layers[-1]
        if not top.spec.mirror_negative:
            return
        value = _drive_component(self._command, top.spec.drive)
        if value == 0.0 or (value < 0) == top.mirrored:
            return
        layer = self._make_layer(top.spec.name, top.shape.params, 0.0, mirrored=value < 0)
        layer.turn, layer.turn_felt = top.turn, top.turn_felt
        self._push(layer)

    def select(self, name: str, params: dict | None = None) -> None:
        """Switch smoothly to gait `name` (with optional parameter overrides), phase-matched.

        Selecting the current target gait again without parameters changes nothing.
        """
        if params is None and name == self._layers[-1].spec.name:
            return
        layer = self._make_layer(name, params, 0.0)
        self._push(layer)

    def set_params(self, params: dict) -> None:
        """Change parameters of the target gait; applied through a smooth, phase-matched switch."""
        if not isinstance(params, dict):
            raise ValueError('params must be a dict of parameter name -> number')
        top = self._layers[-1]
        if top.spec.name == 'hold':
            raise ValueError('no gait selected: select a gait before setting its parameters')
        merged = dict(top.shape.params)
        merged.update(params)
        layer = self._make_layer(top.spec.name, merged, 0.0, mirrored=top.mirrored)
        layer.turn, layer.turn_felt = top.turn, top.turn_felt
        layer.rate = top.rate
        self._push(layer)

    def _push(self, layer: _Layer) -> None:
        current = self._q
        phases = np.linspace(0.0, 2 * math.pi, _PHASE_SAMPLES, endpoint=False)
        if layer.spec.drive is not None:
            base = self._layers[-1].phase if layer.spec.name == self._layers[-1].spec.name else 0.0
            same = layer.spec.name == self._layers[-1].spec.name
            layer.turn = self._layers[-1].turn if same else 0.0
            layer.turn_felt = self._layers[-1].turn_felt if same else 0.0
            cands = [base + p for p in phases]
            shapes = [layer.angles_at(c, layer.turn) for c in cands]
            errs = np.array([float(np.sum((q - current) ** 2)) for q in shapes])
            # Phases that are equally close (a straight body is as close to every phase of a uniform arc):
            # the one that bends the pitch joints least, which lifts the body least. From straight, rolling's
            # arc then forms lying on the floor; at the first phase it stood up and fell over, moving the
            # body 78 mm in MuJoCo against 3-18 mm at the flat phases.
            best = int(np.argmin(errs))
            ties = np.flatnonzero(errs <= errs[best] * (1.0 + 1e-6) + 1e-12)
            lift = np.array([float(np.sum(shapes[k][self._pitch] ** 2)) for k in ties])
            if lift.max() - lift.min() > 1e-9:
                best = int(ties[int(np.argmin(lift))])
            layer.phase = cands[best]
        target = layer.angles()
        gap = np.abs(target - current)
        need = np.max(1.875 * gap / (_BLEND_VEL_SHARE * self._vmax))
        layer.duration = max(self.transition_s, float(need))
        layer.progress = 0.0
        self._layers.append(layer)
        if len(self._layers) > _MAX_LAYERS:
            # Too many overlapping switches: drop the oldest; the output tracker keeps the motion smooth.
            self._layers.pop(0)
            self._layers[0].progress = 1.0

    def set_command(self, forward_m_s: float, lateral_m_s: float, turn_rad_s: float) -> None:
        """cmd_vel: linear.x (m/s), linear.y (m/s), angular.z (rad/s). Non-finite values raise ValueError."""
        values = []
        named = (('forward_m_s', forward_m_s), ('lateral_m_s', lateral_m_s), ('turn_rad_s', turn_rad_s))
        for name, v in named:
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise ValueError(f'{name} must be a number, got {v!r}') from None
            if not math.isfinite(f):
                raise ValueError(f'{name} must be finite, got {v!r}')
            values.append(min(max(f, -1e3), 1e3))
        self._command = tuple(values)
        self._hold_turn = False

    def stop(self) -> None:
        """Ramp every gait's speed to zero and hold the shape (the turning offset is kept)."""
        self._command = (0.0, 0.0, 0.0)
        self._hold_turn = True

    # --- the tick -----------------------------------------------------------------------------

    def _reference(self) -> np.ndarray:
        q = self._layers[0].angles()
        for layer in self._layers[1:]:
            w = _smoothstep(layer.progress)
            q = q + w * (layer.angles() - q) if w < 1.0 else layer.angles()
        return q

    def step(self, dt_s: float) -> GaitTick:
        """Advance dt_s seconds and return the joint goals (never NaN, within joint limits)."""
        dt = float(dt_s)
        if not (math.isfinite(dt) and dt > 0.0):
            raise ValueError(f'dt_s must be positive and finite, got {dt_s!r}')
        self._t += dt
        self._follow_mirror()
        for layer in self._layers:
            if layer.progress >= 0.0:       # a layer still waiting (still_s) keeps its matched phase
                layer.advance(self._command, self._hold_turn, dt)
        for layer in self._layers[1:]:
            layer.progress = min(1.0, layer.progress + dt / layer.duration)
        # The newest finished blend makes everything below it invisible.
        for i in range(len(self._layers) - 1, 0, -1):
            if self._layers[i].progress >= 1.0:
                del self._layers[:i]
                break

        raw = self._reference()
        if not math.isfinite(float(raw.sum())):
            raw = self._ref_prev.copy()
        ref = np.minimum(np.maximum(raw, self._lower), self._upper)
        clamped = raw != ref
        if clamped.any():
            names = self._names
            self._saturated = {names[i]: float(raw[i] - ref[i]) for i in np.flatnonzero(clamped)}
        elif self._saturated:
            self._saturated = {}
        q, v = self._track(ref, dt)
        off = np.abs(q - ref) > 1e-9
        self._rate_limited = tuple(self._names[i] for i in np.flatnonzero(off)) if off.any() else ()
        return GaitTick(self._t, q, v, ref, dict(self._saturated), self._rate_limited,
                        self._layers[-1].phase)

    def _track(self, ref, dt):
        """Per-joint tracker: reference velocity plus a correction that can always brake in time.

        Returns new (positions, velocities) with |v| <= v_max, |v - v_old| <= a_max dt, inside the joint
        limits, equal to ref whenever that is reachable within those bounds (deadbeat).
        """
        if dt != self._dt_cache:
            self._dt_cache = dt
            self._adt = self._amax * dt
            self._adt2 = self._adt * self._adt
            # Farther than this from a joint limit, braking can never bind (v_max^2 / 2a + v_max dt).
            margin = self._vmax * self._vmax / (2 * self._amax) + self._vmax * dt
            self._brake_hi, self._brake_lo = self._upper - margin, self._lower + margin
        inv_dt = 1.0 / dt
        q_old, v_old, ref_prev = self._q, self._v, self._ref_prev
        v_des = (ref - ref_prev) * inv_dt
        np.minimum(v_des, self._vmax, out=v_des)
        np.maximum(v_des, self._nvmax, out=v_des)
        err = ref_prev - q_old
        abs_err = np.abs(err)
        corr = np.minimum(abs_err * inv_dt, np.sqrt(self._amax * abs_err))    # sqrt law: brakes at a_max / 2
        v_des += np.copysign(corr, err)
        if (q_old > self._brake_hi).any() or (q_old < self._brake_lo).any():
            # Largest speed toward a limit that, after this tick's move, can still brake: v^2/2a <= d - v dt.
            two_a = 2.0 * self._amax
            v_up = np.sqrt(self._adt2 + two_a * np.maximum(self._upper - q_old, 0.0)) - self._adt
            v_dn = np.sqrt(self._adt2 + two_a * np.maximum(q_old - self._lower, 0.0)) - self._adt
            v_des = np.minimum(np.maximum(v_des, -v_dn), v_up)
        dv = v_des - v_old
        np.minimum(dv, self._adt, out=dv)
        np.maximum(dv, -self._adt, out=dv)
        v = v_old + dv
        np.minimum(v, self._vmax, out=v)
        np.maximum(v, self._nvmax, out=v)
        q = q_old + v * dt
        np.maximum(q, self._lower, out=q)
        np.minimum(q, self._upper, out=q)
        v = (q - q_old) * inv_dt
        self._q, self._v, self._ref_prev = q, v, ref
        return q, v

    # --- introspection ------------------------------------------------------------------------

    def loop_inputs(self) -> tuple:
        """What the closed loop (gaits/trim.py) needs each tick, cheaply: (drive of the target gait,
        its phase rate rad/s, reachable, steady: no switch blending, turns: angular.z steers it, its
        name)."""
        top = self._layers[-1]
        return (top.spec.drive, top.rate, top.reachable, len(self._layers) == 1, bool(top.spec.turn_param),
                top.spec.name)


    @property
    def positions_rad(self) -> np.ndarray:
        """(n,) the last commanded joint positions (the starting pose before the first step)."""
        return self._q.copy()

    def curve(self):
        """(MCCCurve, s0_m) of the target gait now, or None for joint-space gaits."""
        top = self._layers[-1]
        return top.shape.curve(top.phase, top.turn)

    def state(self) -> GaitState:
        """A snapshot of the scheduler now (GaitState)."""
        top = self._layers[-1]
        return GaitState(
            active_gait=self._layers[0].spec.name,
            target_gait=top.spec.name,
            transition_progress=max(float(top.progress), 0.0) if len(self._layers) > 1 else 1.0,
            layers=len(self._layers),
            phase_rad=float(top.phase),
            phase_rate_rad_s=float(top.rate),
            turn_param=top.spec.turn_param,
            turn_offset=float(top.turn),
            params=dict(top.shape.params),
            command_forward_m_s=self._command[0],
            command_lateral_m_s=self._command[1],
            command_turn_rad_s=self._command[2],
            stopped=self._hold_turn,
            modelled=top.modelled,
            saturated=dict(self._saturated),
            rate_limited=tuple(self._rate_limited),
            t_s=self._t,
            mapping=top.mapping,
            reachable=bool(top.reachable),
            mirrored=top.mirrored,
        )
