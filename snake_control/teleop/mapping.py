"""Gamepad mapping for teleoperation: Joy axes and buttons -> velocity command, gait choice, e-stop.

Pure Python (no rclpy): `TeleopMapper.update` takes the axes and buttons of one sensor_msgs/Joy message
and returns what to publish; `TeleopMapper.tick` applies the joystick timeout. teleop_node is a thin shell
around it. The mapping comes from a YAML file in config/teleop/ (one per gamepad), validated by
`load_teleop_config`, which raises ConfigError naming the file and key.

A teleop YAML::

    schema: 1
    name: xbox
    timeout_s: 0.5                  # no Joy for this long: zero speed
    deadzone: 0.1                   # |axis| below this reads as 0 (stick drift)
    deadman: {button: 4}            # LB: hold to move; released means zero speed
    axes:                           # axis index, scale (sign flips the direction)
      forward: {axis: 1, scale: 1.0}      # cmd_vel.linear.x, full stick = max_forward_m_s
      sideways: {axis: 0, scale: 1.0}     # cmd_vel.linear.y
      turn: {axis: 3, scale: 1.0}         # cmd_vel.angular.z, left is positive (CCW)
    limits: {max_forward_m_s: 0.1, max_sideways_m_s: 0.05, max_turn_rad_s: 0.5}
    speed_scales: [0.25, 0.5, 1.0]  # steps of the speed-scale buttons
    initial_speed_scale: 1          # index into speed_scales
    buttons:                        # a button is {button: i} or {axis: i, direction: +1|-1} (D-pad)
      faster: {axis: 7, direction: 1}
      slower: {axis: 7, direction: -1}
      next_gait: {button: 3}
      previous_gait: {button: 2}
      estop: {button: 1}
      estop_release: [{button: 7}, {button: 6}]   # all held together
    gaits:
      cycle: [serpentine, sidewinding, rolling]   # order of next/previous
      pick: {serpentine: {button: 0}}             # a button that selects one gait directly

Everything is in SI units; cmd_vel is (linear.x m/s forward, linear.y m/s to the left, angular.z rad/s
counter-clockwise), the robot base frame of docs/architecture.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snake_control.yaml_file import load_yaml_file

from snake_control.paths import ConfigError, resolve_teleop

SCHEMA_VERSION = 1
AXIS_NAMES = ('forward', 'sideways', 'turn')
LIMIT_NAMES = ('max_forward_m_s', 'max_sideways_m_s', 'max_turn_rad_s')
BUTTON_NAMES = ('faster', 'slower', 'next_gait', 'previous_gait', 'estop')
AXIS_BUTTON_THRESHOLD = 0.5  # a D-pad axis counts as pressed beyond half travel


@dataclass(frozen=True)
class ButtonSpec:
    """A physical button (`button` index) or one direction of an axis used as a button (D-pad)."""

    button: int | None = None
    axis: int | None = None
    direction: int = 1

    def pressed(self, axes, buttons) -> bool:
        """True when held in this Joy message; an index past the end of the arrays reads as released."""
        if self.button is not None:
            return self.button < len(buttons) and buttons[self.button] == 1
        if self.axis is not None and self.axis < len(axes):
            value = axes[self.axis]
            return math.isfinite(value) and value * self.direction > AXIS_BUTTON_THRESHOLD
        return False


@dataclass(frozen=True)
class AxisSpec:
    axis: int
    scale: float


@dataclass(frozen=True)
class TeleopConfig:
    """A validated gamepad map (see the module docstring for the YAML)."""

    name: str
    source: str
    timeout_s: float
    deadzone: float
    deadman: ButtonSpec
    axes: dict[str, AxisSpec]
    limits: dict[str, float]
    speed_scales: tuple[float, ...]
    initial_speed_scale: int
    buttons: dict[str, ButtonSpec]
    estop_release: tuple[ButtonSpec, ...]
    gait_cycle: tuple[str, ...]
    gait_pick: dict[str, ButtonSpec] = field(default_factory=dict)
    axis_names: dict[str, int] = field(default_factory=dict)      # 'left_y' -> 1 (for scripts)
    button_names: dict[str, int] = field(default_factory=dict)    # 'LB' -> 4

    @property
    def n_axes(self) -> int:
        """Length of the Joy axes array this gamepad sends (from names, else the highest index used)."""
        used = [a.axis for a in self.axes.values()] + [b.axis for b in self._buttons() if b.axis is not None]
        return max(used + list(self.axis_names.values())) + 1

    @property
    def n_buttons(self) -> int:
        used = [b.button for b in self._buttons() if b.button is not None]
        return max(used + list(self.button_names.values()) + [-1]) + 1

    def _buttons(self):
        return [self.deadman, *self.buttons.values(), *self.estop_release, *self.gait_pick.values()]


def _require(mapping: Any, key: str, where: str, source: str):
    if not isinstance(mapping, dict):
        raise ConfigError(source, where or '(top level)',
                                f'expected a mapping, got {type(mapping).__name__}')
    if key not in mapping:
        raise ConfigError(source, f'{where}.{key}' if where else key, 'missing')
    return mapping[key]


def _number(value: Any, key: str, source: str, low: float | None = None, high: float | None = None,
            positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(source, key, f'expected a finite number, got {value!r}')
    if positive and value <= 0:
        raise ConfigError(source, key, f'must be > 0, got {value!r}')
    if low is not None and value < low:
        raise ConfigError(source, key, f'must be >= {low}, got {value!r}')
    if high is not None and value > high:
        raise ConfigError(source, key, f'must be <= {high}, got {value!r}')
    return float(value)


def _index(value: Any, key: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(source, key, f'expected an index >= 0, got {value!r}')
    return value


def _button(value: Any, key: str, source: str) -> ButtonSpec:
    if not isinstance(value, dict):
        raise ConfigError(source, key,
                                f'expected {{button: i}} or {{axis: i, direction: ±1}}, got {value!r}')
    unknown = set(value) - {'button', 'axis', 'direction'}
    if unknown:
        raise ConfigError(source, key, f'unknown keys {sorted(unknown)}')
    if ('button' in value) == ('axis' in value):
        raise ConfigError(source, key, 'give exactly one of button or axis')
    if 'button' in value:
        return ButtonSpec(button=_index(value['button'], f'{key}.button', source))
    direction = value.get('direction', 1)
    if direction not in (1, -1) or isinstance(direction, bool):
        raise ConfigError(source, f'{key}.direction', f'must be 1 or -1, got {direction!r}')
    return ButtonSpec(axis=_index(value['axis'], f'{key}.axis', source), direction=direction)


def parse_teleop_config(data: Any, source: str = '<teleop config>') -> TeleopConfig:
    """Validate a parsed teleop YAML document; raise ConfigError naming `source` and the key."""
    if not isinstance(data, dict):
        raise ConfigError(source, '', 'expected a mapping at the top level')
    known = {'schema', 'name', 'description', 'names', 'timeout_s', 'deadzone', 'deadman', 'axes', 'limits',
             'speed_scales', 'initial_speed_scale', 'buttons', 'gaits'}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(source, sorted(unknown)[0],
                                f'unknown key (known: {", ".join(sorted(known))})')
    schema = _require(data, 'schema', '', source)
    if schema != SCHEMA_VERSION:
        raise ConfigError(source, 'schema',
                                f'unsupported version {schema!r} (this build reads {SCHEMA_VERSION})')
    name = _require(data, 'name', '', source)
    if not isinstance(name, str) or not name:
        raise ConfigError(source, 'name', f'expected a non-empty string, got {name!r}')
    timeout_s = _number(_require(data, 'timeout_s', '', source), 'timeout_s', source, positive=True)
    deadzone = _number(data.get('deadzone', 0.0), 'deadzone', source, low=0.0, high=0.9)
    deadman = _button(_require(data, 'deadman', '', source), 'deadman', source)

    axes_raw = _require(data, 'axes', '', source)
    axes = {}
    for axis_name in AXIS_NAMES:
        spec = _require(axes_raw, axis_name, 'axes', source)
        key = f'axes.{axis_name}'
        if not isinstance(spec, dict):
            raise ConfigError(source, key, f'expected {{axis: i, scale: s}}, got {spec!r}')
        unknown = set(spec) - {'axis', 'scale'}
        if unknown:
            raise ConfigError(source, key, f'unknown keys {sorted(unknown)}')
        axes[axis_name] = AxisSpec(axis=_index(_require(spec, 'axis', key, source), f'{key}.axis', source),
                                   scale=_number(spec.get('scale', 1.0), f'{key}.scale', source,
                                                 low=-10.0, high=10.0))
    unknown = set(axes_raw) - set(AXIS_NAMES)
    if unknown:
        raise ConfigError(source, f'axes.{sorted(unknown)[0]}',
                                f'unknown axis (known: {", ".join(AXIS_NAMES)})')

    limits_raw = _require(data, 'limits', '', source)
    limits = {k: _number(_require(limits_raw, k, 'limits', source), f'limits.{k}', source, low=0.0, high=10.0)
              for k in LIMIT_NAMES}

    scales_raw = _require(data, 'speed_scales', '', source)
    if not isinstance(scales_raw, list) or not scales_raw:
        raise ConfigError(source, 'speed_scales', f'expected a non-empty list, got {scales_raw!r}')
    scales = tuple(_number(s, f'speed_scales[{i}]', source, positive=True, high=1.0)
                   for i, s in enumerate(scales_raw))
    if list(scales) != sorted(scales):
        raise ConfigError(source, 'speed_scales', 'must be in increasing order')
    initial = data.get('initial_speed_scale', len(scales) - 1)
    if isinstance(initial, bool) or not isinstance(initial, int) or not 0 <= initial < len(scales):
        raise ConfigError(source, 'initial_speed_scale',
                                f'expected an index into speed_scales, got {initial!r}')

    buttons_raw = _require(data, 'buttons', '', source)
    if not isinstance(buttons_raw, dict):
        raise ConfigError(source, 'buttons', 'expected a mapping')
    unknown = set(buttons_raw) - set(BUTTON_NAMES) - {'estop_release'}
    if unknown:
        raise ConfigError(source, f'buttons.{sorted(unknown)[0]}',
                                'unknown button action (known: '
                                f'{", ".join(BUTTON_NAMES + ("estop_release",))})')
    buttons = {k: _button(_require(buttons_raw, k, 'buttons', source), f'buttons.{k}', source)
               for k in BUTTON_NAMES}
    release_raw = _require(buttons_raw, 'estop_release', 'buttons', source)
    if not isinstance(release_raw, list) or len(release_raw) < 2:
        raise ConfigError(source, 'buttons.estop_release',
                                'expected a list of at least two buttons held together '
                                '(a deliberate combination)')
    release = tuple(_button(b, f'buttons.estop_release[{i}]', source) for i, b in enumerate(release_raw))
    if buttons['estop'] in release:
        raise ConfigError(source, 'buttons.estop_release', 'must not include the estop button itself')

    gaits_raw = _require(data, 'gaits', '', source)
    cycle = _require(gaits_raw, 'cycle', 'gaits', source)
    if not isinstance(cycle, list) or not cycle or not all(isinstance(g, str) and g for g in cycle):
        raise ConfigError(source, 'gaits.cycle',
                                f'expected a non-empty list of gait names, got {cycle!r}')
    pick_raw = gaits_raw.get('pick', {}) or {}
    if not isinstance(pick_raw, dict):
        raise ConfigError(source, 'gaits.pick', 'expected a mapping gait name -> button')
    pick = {str(g): _button(b, f'gaits.pick.{g}', source) for g, b in pick_raw.items()}
    names_raw = data.get('names', {}) or {}
    if not isinstance(names_raw, dict) or set(names_raw) - {'axes', 'buttons'}:
        raise ConfigError(source, 'names', 'expected a mapping with axes and buttons (name -> index)')
    names = {}
    for kind in ('axes', 'buttons'):
        table = names_raw.get(kind, {}) or {}
        if not isinstance(table, dict):
            raise ConfigError(source, f'names.{kind}', 'expected a mapping name -> index')
        names[kind] = {str(k): _index(v, f'names.{kind}.{k}', source) for k, v in table.items()}
    return TeleopConfig(name=name, source=source, timeout_s=timeout_s, deadzone=deadzone, deadman=deadman,
                        axes=axes, limits=limits, speed_scales=scales, initial_speed_scale=initial,
                        buttons=buttons, estop_release=release, gait_cycle=tuple(cycle), gait_pick=pick,
                        axis_names=names['axes'], button_names=names['buttons'])


def load_teleop_config(name_or_path: str | Path) -> TeleopConfig:
    """Read and validate a teleop YAML (shipped name or path)."""
    path = resolve_teleop(name_or_path)
    data = load_yaml_file(path, ConfigError)
    return parse_teleop_config(data, str(path))


@dataclass
class TeleopOutput:
    """What one update asks the node to publish; None means publish nothing on that topic."""

    twist: tuple[float, float, float] | None = None   # (vx m/s, vy m/s, wz rad/s)
    gait: str | None = None
    estop: bool | None = None


class TeleopMapper:
    """Stateful Joy -> command mapping: deadman, speed scale, gait cycling, latched e-stop, timeout.

    Example:
        >>> m = TeleopMapper(load_teleop_config('xbox'))
        >>> axes = [0.0] * 8; axes[1] = 1.0          # left stick fully up
        >>> buttons = [0] * 11; buttons[4] = 1        # LB (deadman) held
        >>> m.update(axes, buttons, now_s=0.0).twist  # full forward at speed scale 0.5
        (0.05, 0.0, 0.0)
    """

    def __init__(self, config: TeleopConfig, gait_cycle: tuple[str, ...] | list[str] | None = None):
        self.config = config
        self.gait_cycle = tuple(gait_cycle) if gait_cycle else config.gait_cycle
        self.speed_index = config.initial_speed_scale
        self.gait_index = 0
        self.estopped = False
        self.moving = False           # last twist published was non-zero (or deadman held)
        self.last_joy_s: float | None = None
        self._previous: dict[str, bool] = {}

    @property
    def speed_scale(self) -> float:
        return self.config.speed_scales[self.speed_index]

    def _edge(self, key: str, pressed: bool) -> bool:
        """True on the message where a button goes from released to pressed."""
        was = self._previous.get(key, False)
        self._previous[key] = pressed
        return pressed and not was

    def _axis(self, axes, spec: AxisSpec) -> float:
        if spec.axis >= len(axes):
            return 0.0
        value = axes[spec.axis]
        if not math.isfinite(value) or abs(value) < self.config.deadzone:
            return 0.0
        return max(-1.0, min(1.0, value)) * spec.scale

    def update(self, axes, buttons, now_s: float) -> TeleopOutput:
        """Map one Joy message (axes in [-1, 1], buttons 0/1) received at monotonic time now_s."""
        cfg, out = self.config, TeleopOutput()
        self.last_joy_s = now_s
        pressed = {k: b.pressed(axes, buttons) for k, b in cfg.buttons.items()}

        # E-stop first: it wins over everything else in the same message.
        if pressed['estop']:
            if not self.estopped:
                out.estop = True
            self.estopped = True
        elif self.estopped and all(b.pressed(axes, buttons) for b in cfg.estop_release):
            if self._edge('estop_release', True):
                self.estopped = False
                out.estop = False
        else:
            self._edge('estop_release', False)

        if self._edge('faster', pressed['faster']):
            self.speed_index = min(self.speed_index + 1, len(cfg.speed_scales) - 1)
        if self._edge('slower', pressed['slower']):
            self.speed_index = max(self.speed_index - 1, 0)
        if self._edge('next_gait', pressed['next_gait']):
            self.gait_index = (self.gait_index + 1) % len(self.gait_cycle)
            out.gait = self.gait_cycle[self.gait_index]
        if self._edge('previous_gait', pressed['previous_gait']):
            self.gait_index = (self.gait_index - 1) % len(self.gait_cycle)
            out.gait = self.gait_cycle[self.gait_index]
        for gait, spec in cfg.gait_pick.items():
            if self._edge(f'pick:{gait}', spec.pressed(axes, buttons)):
                out.gait = gait
                if gait in self.gait_cycle:
                    self.gait_index = self.gait_cycle.index(gait)

        if cfg.deadman.pressed(axes, buttons) and not self.estopped:
            s = self.speed_scale
            out.twist = (self._axis(axes, cfg.axes['forward']) * cfg.limits['max_forward_m_s'] * s,
                         self._axis(axes, cfg.axes['sideways']) * cfg.limits['max_sideways_m_s'] * s,
                         self._axis(axes, cfg.axes['turn']) * cfg.limits['max_turn_rad_s'] * s)
            self.moving = True
        elif self.moving:
            # Deadman released (or estop): one zero so the robot stops, then silence so other
            # cmd_vel sources (Nav2) are not overridden.
            out.twist = (0.0, 0.0, 0.0)
            self.moving = False
        return out

    def tick(self, now_s: float) -> TeleopOutput:
        """Joystick timeout: called periodically; a zero twist once when Joy messages stopped arriving."""
        out = TeleopOutput()
        if self.moving and (self.last_joy_s is None or now_s - self.last_joy_s > self.config.timeout_s):
            out.twist = (0.0, 0.0, 0.0)
            self.moving = False
        return out
