"""Measured net motion per gait cycle, and the map from cmd_vel to phase rate and turning parameter it
gives (pure numpy, no ROS, no physics; snake_control.validation.calibration measures it in MuJoCo).

On the ground no model of a gait's motion is exact (skin friction, lifted arches, slip), so the
motion of one gait cycle is measured: for a few phase rates f (rad/s) and turning offsets u (units of
the gait's turn parameter) the body's net motion per cycle, in its own cycle-mean frame, is

    D(u, f) = c0 + c_u u + c_uu u^2 + c_f f    along the gait's drive axis (m; rad for a turning gait)
    T(u, f) = t0 + t_u u + t_uu u^2 + t_f f    its turn (rad)

fitted by least squares (a term drops out when the samples do not vary it; the u^2 term needs three
offsets). The quadratic term is there because turning either way shortens the stride (serpentine in
MuJoCo: 0.77 m per cycle straight, 0.39 m at A1 = +-1.5 1/m). The per-cycle motion
with the phase running backwards is the same motion reversed, so the model is evaluated at |f|.
At phase rate f the body moves at f D / (2 pi) and turns at f T / (2 pi); ``GaitCalibration.command``
inverts this: the path curvature omega / v fixes u (T(u) = (omega / v) D(u), a quadratic in u whose
root nearest the linear one is taken, so a gait that veers with no turn commanded gets the u that
cancels it) and then f = 2 pi v / D(u, f), a fixed
point solved in a few iterations. u and the f at which D is evaluated stay inside the measured
range: a linear fit is not extrapolated.

The calibration file (``<robot>.calibration.yaml`` beside the robot YAML, written by
``snake calibrate``) holds, per gait, the parameters it was measured with, the fitted model and the
samples. ``load_calibration`` validates it and raises ConfigError naming the file and the key. A gait
whose parameters differ from those measured is not calibrated (the scheduler falls back to its
stride model or parameter).

Example: a gait that moves 0.1 m per cycle and veers 0.05 rad per cycle, turning 0.2 rad per unit
of u:

    >>> g = GaitCalibration('serpentine', 'forward', 'A1', {}, (0.1, 0.0, 0.0, 0.0), (0.05, 0.2, 0.0, 0.0),
    ...                     (-1.0, 1.0), (1.0, 4.0))
    >>> c = g.command(0.05, 0.0)           # 0.05 m/s straight ahead
    >>> round(c.turn, 3), round(c.phase_rate_rad_s, 4), c.reachable   # u cancels the veer
    (-0.25, 3.1416, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from snake_control.gaits import catalog
from snake_control.gaits.stride import Command
from snake_control.paths import ConfigError

PI = math.pi
FORMAT = 1
SUFFIX = '.calibration.yaml'
# The calibration measured in the running graph's MuJoCo world (snake calibrate --cone pyramidal): the
# graph's floor, where the one beside the robot is measured on the elliptic cone cmd_vel is validated on.
SIM_SUFFIX = '.sim' + SUFFIX
_ITERATIONS = 6
# A turn must leave the gait at least this share of its straight drive per cycle: an offset that curls
# the body until it barely moves is not a turn a user asks for while moving (vertical undulation's
# calibration keeps 0.29 of its drive at 0.131 rad of yaw offset, where the curvature ratio reads
# 1.2 rad/m, and reverses at 0.175), and near the drive's zero the curvature ratio explodes.
MIN_DRIVE_SHARE = 0.5


@dataclass(frozen=True)
class CycleSample:
    """One measured run: the phase rate (rad/s) and turning offset it ran at, and its net motion per
    cycle in the cycle-mean body frame: forward_m (x, toward the head), left_m (y), turn_rad (CCW);
    cycles: how many whole cycles were averaged."""

    phase_rate_rad_s: float
    turn: float
    forward_m: float
    left_m: float
    turn_rad: float
    cycles: float

    def drive(self, axis: str) -> float:
        """The per-cycle motion along a gait's drive axis ('forward', 'lateral' or 'turn'). A cycle
        that turns moves along an arc whose chord is (forward_m, left_m): the displacement is scaled
        to the arc's length, (dtheta / 2) / sin(dtheta / 2), the distance a speed command means."""
        if axis == 'turn':
            return self.turn_rad
        return {'forward': self.forward_m, 'lateral': self.left_m}[axis] * arc_factor(self.turn_rad)


def arc_factor(turn_rad: float) -> float:
    """Arc length over chord length of a circular arc turning turn_rad: (x / 2) / sin(x / 2), with x
    capped at 0.9 pi (a cycle turning further has no single arc; stride.MAX_TURN_RAD likewise)."""
    half = min(0.5 * abs(turn_rad), 0.45 * PI)
    return 1.0 if half < 1e-9 else half / math.sin(half)


def cycle_motion(times_s, phase_rad, xy_m, heading_rad) -> tuple[float, float, float, float]:
    """(forward m, left m, turn rad, cycles) per gait cycle of a recorded trajectory.

    times_s (T,), phase_rad (T,) the gait phase (non-decreasing), xy_m (T, 2) a body point on the
    floor, heading_rad (T,) the body's heading (the direction of its x axis, toward the head). The
    run is cut at every whole cycle of phase (phase[0] + 2 pi k, interpolated in time); each cycle's
    displacement between its phase-aligned ends is taken in that cycle's mean-heading frame (the
    body's heading swings with the wave; its mean over a cycle does not) and its turn is the heading
    change between the ends. The means over the cycles are returned. ValueError: shapes, or less
    than one whole cycle.

    Example: a body sliding 0.1 m per cycle toward its head (+x), 3 cycles at 1 cycle per second.

    >>> t = np.linspace(0.0, 3.0, 301)
    >>> xy = np.stack([0.1 * t, 0 * t], axis=1)
    >>> [round(v, 6) for v in cycle_motion(t, 2 * PI * t, xy, 0 * t)]
    [0.1, 0.0, 0.0, 3.0]
    """
    t = np.asarray(times_s, dtype=float)
    ph = np.asarray(phase_rad, dtype=float)
    xy = np.asarray(xy_m, dtype=float)
    hd = np.unwrap(np.asarray(heading_rad, dtype=float))
    if t.ndim != 1 or t.size < 3 or ph.shape != t.shape or hd.shape != t.shape or xy.shape != (t.size, 2):
        raise ValueError(f'need times (T >= 3,), phase (T,), xy (T, 2), heading (T,); got {t.shape}, '
                         f'{ph.shape}, {xy.shape}, {hd.shape}')
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(ph)) and np.all(np.isfinite(xy))
            and np.all(np.isfinite(hd))):
        raise ValueError('the trajectory holds non-finite values')
    if np.any(np.diff(t) <= 0) or np.any(np.diff(ph) < 0):
        raise ValueError('times must increase and the phase must not decrease')
    cycles = int(math.floor((ph[-1] - ph[0]) / (2 * PI) + 1e-9))
    if cycles < 1:
        raise ValueError(f'the trajectory covers {(ph[-1] - ph[0]) / (2 * PI):.2f} gait cycles; need at '
                         f'least one whole cycle')
    marks = ph[0] + 2 * PI * np.arange(cycles + 1)
    tm = np.interp(marks, ph, t)
    pts = np.stack([np.interp(tm, t, xy[:, 0]), np.interp(tm, t, xy[:, 1])], axis=1)
    heads = np.interp(tm, t, hd)
    moves = []
    for k in range(cycles):
        inside = (t > tm[k]) & (t < tm[k + 1])
        # Mean heading over the cycle, time-weighted, ends included.
        ts = np.concatenate([[tm[k]], t[inside], [tm[k + 1]]])
        hs = np.concatenate([[heads[k]], hd[inside], [heads[k + 1]]])
        mean = float(np.trapezoid(hs, ts) / (ts[-1] - ts[0]))
        d = pts[k + 1] - pts[k]
        c, s = math.cos(mean), math.sin(mean)
        moves.append((c * d[0] + s * d[1], -s * d[0] + c * d[1], heads[k + 1] - heads[k]))
    fwd, left, turn = np.mean(moves, axis=0)
    return float(fwd), float(left), float(turn), float(cycles)


def _fit(us, fs, ys) -> tuple[float, float, float, float]:
    """Least-squares (c0, c_u, c_uu, c_f) of y = c0 + c_u u + c_uu u^2 + c_f f; a term the samples do
    not vary (u^2: fewer than three distinct offsets) is 0."""
    us, fs, ys = (np.asarray(a, dtype=float) for a in (us, fs, ys))
    cols, names = [np.ones_like(us)], [0]
    distinct = np.unique(np.round(us, 12)).size
    if distinct >= 2:
        cols.append(us)
        names.append(1)
    if distinct >= 3:
        cols.append(us * us)
        names.append(2)
    if np.ptp(fs) > 1e-12:
        cols.append(fs)
        names.append(3)
    a = np.stack(cols, axis=1)
    sol = np.linalg.lstsq(a, ys, rcond=None)[0]
    coef = [0.0, 0.0, 0.0, 0.0]
    for i, v in zip(names, sol):
        coef[i] = float(v)
    return tuple(coef)


@dataclass(frozen=True)
class GaitCalibration:
    """The measured motion per cycle of one gait (module docstring), and cmd_vel -> phase rate, turn.

    drive_coef (c0, c_u, c_uu, c_f): motion per cycle along the drive axis (m, or rad when drive is
    'turn'); turn_coef (t0, t_u, t_uu, t_f): turn per cycle (rad); both over u (turn parameter units) and
    |f| (rad/s). turn_range, phase_rate_range_rad_s: the measured ranges, which bound u and the f
    the model is evaluated at.
    """

    gait: str
    drive: str
    turn_param: str | None
    params: dict
    drive_coef: tuple
    turn_coef: tuple
    turn_range: tuple
    phase_rate_range_rad_s: tuple
    samples: tuple = field(default=(), compare=False)

    @classmethod
    def fit(cls, gait: str, params: dict, samples) -> 'GaitCalibration':
        """Fit the model to CycleSamples of `gait` measured with `params` (its full parameters)."""
        spec = catalog.gait_spec(gait)
        if spec.drive is None:
            raise ValueError(f'{gait} does not move: nothing to calibrate')
        samples = tuple(samples)
        if not samples:
            raise ValueError(f'{gait}: no samples to fit')
        us = [s.turn for s in samples]
        fs = [abs(s.phase_rate_rad_s) for s in samples]
        drive = _fit(us, fs, [s.drive(spec.drive) for s in samples])
        turn = _fit(us, fs, [s.turn_rad for s in samples])
        kept = {k: float(v) for k, v in params.items() if k not in ('stride', spec.turn_param)}
        return cls(gait, spec.drive, spec.turn_param, kept, drive, turn, (min(us), max(us)),
                   (min(fs), max(fs)), samples)

    # -- the model ---------------------------------------------------------------------------------
    def _f(self, rate: float) -> float:
        lo, hi = self.phase_rate_range_rad_s
        return min(max(abs(rate), lo), hi)

    def _drive(self, turn: float, rates):
        """D(u, f): drive motion per cycle (m, or rad) at offset `turn` for phase rates (rad/s, array or
        float), read inside the measured rates; above them too for a gait whose stride shrinks as it
        speeds up (D's rate term against its stride), down to no motion but not through it, so that the
        fit does not promise such a gait the stride of its highest measured rate at any speed (serpenoid
        rolling rolls 0.16 m per cycle at 1.7 rad/s, 0.10 at 3.3 and backwards at 6.4). A stride that
        grows with the rate is held at its measured edge."""
        lo, hi = self.phase_rate_range_rad_s
        c = self.drive_coef
        base = c[0] + (c[1] + c[2] * turn) * turn
        f = np.abs(np.asarray(rates, dtype=float))
        at_lo = base + c[3] * lo
        if c[3] * at_lo < 0:
            d = base + c[3] * np.maximum(f, lo)
            d = np.where(d * at_lo > 0, d, 0.0)
        else:
            d = base + c[3] * np.clip(f, lo, hi)
        return d if d.ndim else float(d)

    def straight_offset(self, phase_rate_rad_s: float) -> float:
        """The turning offset whose fitted turn per cycle is 0 at this phase rate (rad/s), not clamped to
        the measured offsets (0 for a gait without a turning parameter; +-inf when the fit has none)."""
        if self.turn_param is None or self.drive == 'turn':
            return 0.0
        return self._solve_u(0.0, self._f(phase_rate_rad_s))

    def per_cycle(self, turn: float, phase_rate_rad_s: float) -> tuple[float, float]:
        """(drive motion m or rad, turn rad) per cycle at offset `turn` and phase rate (rad/s)."""
        f = self._f(phase_rate_rad_s)
        t = self.turn_coef
        return (self._drive(turn, phase_rate_rad_s), t[0] + (t[1] + t[2] * turn) * turn + t[3] * f)

    @property
    def stride(self) -> float:
        """Drive motion per cycle without turning offset at the lowest measured phase rate."""
        return self.per_cycle(0.0, self.phase_rate_range_rad_s[0])[0]

    def matches(self, params: dict, rel: float = 1e-6) -> bool:
        """Whether a gait's full parameters are the ones this calibration was measured with."""
        for k, v in self.params.items():
            if k not in params or abs(float(params[k]) - v) > rel * max(1.0, abs(v)):
                return False
        return True

    def command(self, drive_value: float, omega_rad_s: float, max_rate_rad_s: float = math.inf) -> Command:
        """Phase rate (rad/s) and turning offset for a command along the drive axis (m/s; rad/s for a
        turning gait, where omega_rad_s is ignored) with yaw rate omega_rad_s, both cycle averages.

        Outside the reach (offset beyond the measured range, phase rate above max_rate_rad_s, or a
        yaw rate with no drive speed for a gait that turns only while it moves) the result falls
        short and says so (reachable False); speed_m_s / yaw_rate_rad_s are what the model predicts.
        """
        key = (drive_value, omega_rad_s, max_rate_rad_s)
        last = self.__dict__.get('_last')
        if last is not None and last[0] == key:         # the scheduler asks every tick, mostly the same
            return last[1]
        result = self._command(drive_value, omega_rad_s, max_rate_rad_s)
        object.__setattr__(self, '_last', (key, result))
        return result

    def usable_turn_range(self) -> tuple[float, float]:
        """The offsets, within the measured turn_range, around the straight one where the drive per cycle
        keeps MIN_DRIVE_SHARE of its straight value: in the model (at the lower measured phase rate)
        and in the measurements themselves, so that a three-point fit cannot promise turns no run
        showed (vertical undulation: the model keeps half its drive up to 0.11 rad of offset, the runs
        reversed at 0.175 and MuJoCo halves it by 0.04)."""
        cached = self.__dict__.get('_usable')
        if cached is not None:
            return cached
        lo, hi = self._measured_turn_range()
        out = (lo, hi)
        if self.turn_param is not None and hi > lo and self.drive != 'turn':
            f = self.phase_rate_range_rad_s[0]
            us = np.linspace(lo, hi, 201)
            c = self.drive_coef
            d = c[0] + (c[1] + c[2] * us) * us + c[3] * f
            i0 = int(np.argmax(d * math.copysign(1.0, self.stride)))
            keep = d * math.copysign(1.0, self.stride) >= MIN_DRIVE_SHARE * abs(d[i0])
            a = b = i0
            while a > 0 and keep[a - 1]:
                a -= 1
            while b < us.size - 1 and keep[b + 1]:
                b += 1
            out = (float(us[a]), float(us[b]))
        object.__setattr__(self, '_usable', out)
        return out

    def _measured_turn_range(self) -> tuple[float, float]:
        """The widest offsets (either side of 0) whose every sample kept MIN_DRIVE_SHARE of the drive of
        the sample at offset 0 and the same phase rate; turn_range when there is nothing to compare."""
        lo, hi = self.turn_range
        if self.turn_param is None or not hi > lo or self.drive == 'turn':
            return lo, hi
        straight = {round(abs(s.phase_rate_rad_s), 9): s.drive(self.drive) for s in self.samples
                    if abs(s.turn) < 1e-12}
        if not straight:
            return lo, hi
        sign = math.copysign(1.0, self.stride)
        good = {}
        for s in self.samples:
            d0 = straight.get(round(abs(s.phase_rate_rad_s), 9))
            if d0 is None:
                continue
            kept = s.drive(self.drive) * sign >= MIN_DRIVE_SHARE * abs(d0)
            good[s.turn] = good.get(s.turn, True) and kept
        bad_below = [u for u, ok in good.items() if u < 0 and not ok]
        bad_above = [u for u, ok in good.items() if u > 0 and not ok]
        ok_below = [u for u, ok in good.items() if u <= 0 and ok and not any(b >= u for b in bad_below)]
        ok_above = [u for u, ok in good.items() if u >= 0 and ok and not any(b <= u for b in bad_above)]
        return (min(ok_below) if ok_below else 0.0), (max(ok_above) if ok_above else 0.0)

    def _command(self, drive_value: float, omega_rad_s: float, max_rate_rad_s: float) -> Command:
        lo, hi = self.usable_turn_range()
        can_turn = self.turn_param is not None and hi > lo and abs(self.turn_coef[1]) > 1e-12
        # The offset that goes straight (cancels the veer) when no turn is asked.
        straight = min(max(self._solve_u(0.0, self._f(0.0)), lo), hi) if can_turn else 0.0
        if self.drive == 'turn':
            omega_rad_s = drive_value
        if abs(drive_value) < 1e-9:
            return Command(0.0, straight, 0.0, 0.0, abs(omega_rad_s) < 1e-9)
        u, ok = straight, True
        rate, rate_ok = self.rate_for(drive_value, u, max_rate_rad_s)
        for _ in range(_ITERATIONS):
            if can_turn and self.drive != 'turn':
                u = self._solve_u(omega_rad_s / drive_value, self._f(rate))
                ok = lo - 1e-9 <= u <= hi + 1e-9
                u = min(max(u, lo), hi)
            d, _ = self.per_cycle(u, rate)
            if d * self.stride <= 0 or abs(d) < 1e-9:      # the offset reverses or stops the gait
                return Command(0.0, u, 0.0, 0.0, False)
            rate, rate_ok = self.rate_for(drive_value, u, max_rate_rad_s)
        ok = ok and rate_ok
        d, dth = self.per_cycle(u, rate)
        cycles = rate / (2 * PI)
        if self.drive == 'turn':
            return Command(rate, u, 0.0, cycles * d, ok)
        if not can_turn and abs(omega_rad_s - cycles * dth) > 0.05 * abs(omega_rad_s) + 0.02:
            ok = False
        return Command(rate, u, cycles * d, cycles * dth, ok)

    def reach(self, max_rate_rad_s: float) -> dict:
        """The command range, like stride.StrideModel.reach: 'max_speed_m_s' along the drive axis (rad/s
        for a turning gait) at the phase-rate cap with the offset that goes straight, and
        'curvature_rad_m' (lowest, highest) path curvature over the measured offsets ((0, 0) when the
        gait does not turn)."""
        straight = self.command(1e-6, 0.0).turn
        # The fastest rate up to the cap, not the cap itself: a stride that shrinks with the rate peaks
        # below it.
        fs = np.linspace(0.0, max_rate_rad_s, 401)
        along = fs * self._drive(straight, fs) * math.copysign(1.0, self.stride) / (2 * PI)
        out = {'max_speed_m_s': max(0.0, float(np.max(along))), 'curvature_rad_m': (0.0, 0.0)}
        lo, hi = self.usable_turn_range()
        if self.turn_param and hi > lo and self.drive != 'turn':
            curv = []
            for u in np.linspace(lo, hi, 9):
                du, tu = self.per_cycle(float(u), self.phase_rate_range_rad_s[0])
                if abs(du) > 1e-9 and du * self.stride > 0:
                    curv.append(tu / du)
            if curv:
                out['curvature_rad_m'] = (float(min(curv)), float(max(curv)))
        return out

    def rate_for(self, drive_value: float, u: float, max_rate_rad_s: float = math.inf) -> tuple[float, bool]:
        """(phase rate rad/s, reached) whose speed |f| D(u, |f|) / 2 pi is drive_value at offset u: the
        lowest such rate up to max_rate_rad_s (or 4x the measured range), else the rate that comes
        closest. A grid search, not a fixed point: D may change a lot with the rate (rolling gaits)."""
        fmax = min(max_rate_rad_s, 4.0 * self.phase_rate_range_rad_s[1])
        fs = np.linspace(0.0, fmax, 401)
        speed = fs * self._drive(u, fs) / (2 * PI)
        want = abs(drive_value)
        # Forward phase if it goes the commanded way better than the backward phase does.
        sign = math.copysign(1.0, drive_value)
        direction = 1.0 if np.max(speed * sign) >= np.max(-speed * sign) else -1.0
        along = speed * sign * direction
        hit = np.flatnonzero(along >= want)
        if hit.size:
            i = int(hit[0])
            if i == 0:
                return 0.0, True
            f = fs[i - 1] + (want - along[i - 1]) / (along[i] - along[i - 1]) * (fs[i] - fs[i - 1])
            return direction * float(f), True
        return direction * float(fs[int(np.argmax(along))]), False

    def _solve_u(self, k: float, f: float) -> float:
        """The offset u with T(u, f) = k D(u, f) (k: path curvature rad/m, or rad/rad for a turning
        gait): the root of a u^2 + b u + c nearest the linear solution -c / b; +-inf when none."""
        cd, td = self.drive_coef, self.turn_coef
        a = td[2] - k * cd[2]
        b = td[1] - k * cd[1]
        c = td[0] + td[3] * f - k * (cd[0] + cd[3] * f)
        if abs(b) < 1e-12 and abs(a) < 1e-12:
            return math.copysign(math.inf, k)
        linear = -c / b if abs(b) > 1e-12 else math.copysign(math.inf, k)
        if abs(a) < 1e-12:
            return linear
        disc = b * b - 4 * a * c
        if disc < 0:
            return -b / (2 * a)          # the closest approach: unreachable, and clamped by the caller
        roots = ((-b + math.sqrt(disc)) / (2 * a), (-b - math.sqrt(disc)) / (2 * a))
        return min(roots, key=lambda r: abs(r - linear)) if math.isfinite(linear) else min(roots, key=abs)

    # -- the file ----------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            'drive': self.drive,
            'turn_param': self.turn_param,
            'params': {k: float(v) for k, v in sorted(self.params.items())},
            'model': {'drive_per_cycle': [float(v) for v in self.drive_coef],
                      'turn_per_cycle_rad': [float(v) for v in self.turn_coef],
                      'turn_range': [float(v) for v in self.turn_range],
                      'phase_rate_range_rad_s': [float(v) for v in self.phase_rate_range_rad_s]},
            'samples': [{'phase_rate_rad_s': float(s.phase_rate_rad_s), 'turn': float(s.turn),
                         'forward_m': float(s.forward_m), 'left_m': float(s.left_m),
                         'turn_rad': float(s.turn_rad), 'cycles': float(s.cycles)} for s in self.samples],
        }


@dataclass(frozen=True)
class Calibration:
    """Every calibrated gait of one robot (gaits: name -> GaitCalibration); source: where it came from
    (a file path, or '<memory>')."""

    robot: str
    gaits: dict
    method: str = 'mujoco'
    source: str = '<memory>'

    def for_gait(self, name: str, params: dict) -> GaitCalibration | None:
        """The calibration of gait `name` if it was measured with these (full) parameters, else None."""
        g = self.gaits.get(name)
        return g if g is not None and g.matches(params) else None

    def to_dict(self) -> dict:
        return {'format': FORMAT, 'robot': self.robot, 'method': self.method,
                'gaits': {name: g.to_dict() for name, g in sorted(self.gaits.items())}}

    def save(self, path: str | Path, header: str = '') -> Path:
        """Write the calibration as YAML (header: comment lines to put on top)."""
        import yaml
        path = Path(path)
        text = ''.join(f'# {line}\n' if line else '#\n' for line in header.splitlines())
        text += yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)
        path.write_text(text, encoding='utf-8')
        return path


def calibration_path(robot, suffix: str = SUFFIX) -> Path:
    """Where a robot's calibration lives: <robot YAML without .yaml>.calibration.yaml beside it
    (suffix SIM_SUFFIX: <robot>.sim.calibration.yaml, the one the MuJoCo graph loads), or the files of the
    robot its YAML names in `calibration:` (the same body on another wiring), beside it too."""
    src = Path(robot.source)
    stem = src.name[:-len(src.suffix)] if src.suffix in ('.yaml', '.yml') else src.name
    return src.with_name((robot.calibration_stem or stem) + suffix)


# --- loading, with errors naming the file and key ------------------------------------------------

def _floats(src, key, value, count=None) -> tuple:
    if not isinstance(value, list) or (count is not None and len(value) != count):
        raise ConfigError(src, key, f'expected a list of {count} numbers, got {value!r}'[:200])
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(src, f'{key}[{i}]', f'expected a finite number, got {v!r}'[:200])
        out.append(float(v))
    return tuple(out)


def _keys(src, key, value, required, optional=()):
    if not isinstance(value, dict):
        raise ConfigError(src, key, f'expected a mapping, got {type(value).__name__}')
    unknown = sorted(set(value) - set(required) - set(optional), key=str)
    if unknown:
        raise ConfigError(src, f'{key}.{unknown[0]}' if key else str(unknown[0]),
                          f'unknown key; expected {", ".join(list(required) + list(optional))}')
    for k in required:
        if k not in value:
            raise ConfigError(src, f'{key}.{k}' if key else k, 'missing')


def calibration_from_dict(data, robot, source: str = '<calibration>') -> Calibration:
    """A validated Calibration for `robot` from a parsed calibration file (ConfigError otherwise)."""
    src = source
    _keys(src, '', data, ('format', 'robot', 'gaits'), ('method',))
    if data['format'] != FORMAT:
        raise ConfigError(src, 'format', f'expected {FORMAT}, got {data["format"]!r}')
    if data['robot'] not in (robot.name, robot.calibration_robot):
        raise ConfigError(src, 'robot', f'calibration of {data["robot"]!r}, not of robot {robot.name!r}')
    if not isinstance(data['gaits'], dict):
        raise ConfigError(src, 'gaits', 'expected a mapping of gait name -> calibration')
    known = catalog.gaits_for(robot)
    gaits = {}
    for name, g in data['gaits'].items():
        key = f'gaits.{name}'
        if name not in known:
            raise ConfigError(src, key, f'not a gait of {robot.name}; known: {", ".join(known)}')
        spec = catalog.gait_spec(name)
        _keys(src, key, g, ('drive', 'turn_param', 'params', 'model'), ('samples',))
        if spec.drive is None or g['drive'] != spec.drive:
            raise ConfigError(src, f'{key}.drive', f'{name} is driven by {spec.drive!r}, not {g["drive"]!r}')
        if g['turn_param'] != spec.turn_param:
            raise ConfigError(src, f'{key}.turn_param', f'{name} turns through {spec.turn_param!r}, '
                                                       f'not {g["turn_param"]!r}')
        params = g['params']
        if not isinstance(params, dict):
            raise ConfigError(src, f'{key}.params', 'expected a mapping of parameter -> number')
        for p, v in params.items():
            if p not in spec.param_names:
                raise ConfigError(src, f'{key}.params.{p}', f'not a parameter of {name}; known: '
                                                           f'{", ".join(spec.param_names)}')
            _floats(src, f'{key}.params.{p}', [v])
        m = g['model']
        mk = f'{key}.model'
        _keys(src, mk, m, ('drive_per_cycle', 'turn_per_cycle_rad', 'turn_range', 'phase_rate_range_rad_s'))
        drive = _floats(src, f'{mk}.drive_per_cycle', m['drive_per_cycle'], 4)
        turn = _floats(src, f'{mk}.turn_per_cycle_rad', m['turn_per_cycle_rad'], 4)
        trange = _floats(src, f'{mk}.turn_range', m['turn_range'], 2)
        frange = _floats(src, f'{mk}.phase_rate_range_rad_s', m['phase_rate_range_rad_s'], 2)
        if trange[0] > trange[1]:
            raise ConfigError(src, f'{mk}.turn_range', f'low {trange[0]} above high {trange[1]}')
        if not 0 < frange[0] <= frange[1]:
            raise ConfigError(src, f'{mk}.phase_rate_range_rad_s', f'need 0 < low <= high, got {list(frange)}')
        if abs(drive[0] + drive[3] * frange[0]) < 1e-9:
            raise ConfigError(src, f'{mk}.drive_per_cycle', 'the gait does not move along its drive axis')
        samples = []
        for i, s in enumerate(g.get('samples') or []):
            sk = f'{key}.samples[{i}]'
            fields = ('phase_rate_rad_s', 'turn', 'forward_m', 'left_m', 'turn_rad', 'cycles')
            _keys(src, sk, s, fields)
            samples.append(CycleSample(*(_floats(src, f'{sk}.{f}', [s[f]])[0] for f in fields)))
        gaits[name] = GaitCalibration(name, spec.drive, spec.turn_param, {k: float(v) for k, v in params.items()},
                                      drive, turn, trange, frange, tuple(samples))
    return Calibration(robot.name, gaits, str(data.get('method', 'mujoco')), source)


def load_calibration(path: str | Path, robot) -> Calibration:
    """Read and validate a calibration file for `robot` (ConfigError naming the file and key)."""
    from snake_control.yaml_file import load_yaml_file
    return calibration_from_dict(load_yaml_file(path, ConfigError), robot, str(path))


def find_calibration(robot) -> Calibration | None:
    """The calibration beside the robot's YAML (calibration_path), or None when there is none."""
    path = calibration_path(robot)
    return load_calibration(path, robot) if path.is_file() else None
