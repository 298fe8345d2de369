"""Scripted teleop sessions: a YAML of timed gamepad states, replayed as sensor_msgs/Joy.

A script lets a whole session (drive, turn, switch gait, e-stop, release the deadman) run without a
gamepad: `snake bringup --script config/scripts/forward_turn_stop.yaml`. Controls are named as in the
gamepad map's `names` section (config/teleop/<gamepad>.yaml), so a script reads like what a person does.

    gamepad: xbox                # map whose names the script uses (and which teleop_node should load)
    rate_hz: 20                  # Joy messages per second while a state holds (joy_node's autorepeat)
    duration_s: 12               # optional; default: the last event's time + 1 s
    events:                      # each event sets the whole gamepad state from time t (s) on
      - {t: 0.0}                                        # nothing held
      - {t: 0.5, hold: [LB], axes: {left_y: 1.0}}       # deadman + full forward
      - {t: 4.0, hold: [LB], axes: {left_y: 1.0, right_x: 0.6}}   # forward, turning left
      - {t: 6.0, hold: [LB], tap: [Y]}                  # Y pressed in the first message only
      - {t: 8.0, silent: true}                          # stop sending (joystick timeout)

Pure Python: `load_script` validates (errors name the file and key) and `joy_at` says what the pad
sends at a time; the Joy publisher is snake_control.nodes.script_player.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from snake_control.paths import ConfigError
from snake_control.teleop.mapping import TeleopConfig, load_teleop_config
from snake_control.yaml_file import load_yaml_file


@dataclass(frozen=True)
class ScriptEvent:
    t_s: float
    axes: tuple[float, ...]
    buttons: tuple[int, ...]
    tap: tuple[int, ...]          # button indices pressed only in the event's first message
    silent: bool


@dataclass(frozen=True)
class TeleopScript:
    source: str
    gamepad: TeleopConfig
    rate_hz: float
    duration_s: float
    events: tuple[ScriptEvent, ...]

    def event_index_at(self, t_s: float) -> int | None:
        """Index of the event in force at time t_s since the start (None before the first)."""
        index = None
        for i, e in enumerate(self.events):
            if e.t_s <= t_s:
                index = i
        return index


def parse_script(data, source: str = '<script>') -> TeleopScript:
    if not isinstance(data, dict):
        raise ConfigError(source, '', 'expected a mapping at the top level')
    unknown = set(data) - {'gamepad', 'rate_hz', 'duration_s', 'events', 'description'}
    if unknown:
        raise ConfigError(source, sorted(unknown)[0],
                          'unknown key (known: gamepad, rate_hz, duration_s, events)')
    try:
        pad = load_teleop_config(data.get('gamepad', 'xbox'))
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(source, 'gamepad', str(exc)) from None
    rate = data.get('rate_hz', 20)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.5 <= rate <= 1000:
        raise ConfigError(source, 'rate_hz', f'expected a number in [0.5, 1000], got {rate!r}')
    raw_events = data.get('events')
    if not isinstance(raw_events, list) or not raw_events:
        raise ConfigError(source, 'events', 'expected a non-empty list of {t: seconds, ...}')
    events, last_t = [], -math.inf
    for i, e in enumerate(raw_events):
        key = f'events[{i}]'
        if not isinstance(e, dict):
            raise ConfigError(source, key, f'expected a mapping, got {e!r}')
        unknown = set(e) - {'t', 'hold', 'axes', 'tap', 'silent', 'note'}
        if unknown:
            raise ConfigError(source, f'{key}.{sorted(unknown)[0]}',
                              'unknown key (known: t, hold, axes, tap, silent, note)')
        t = e.get('t')
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise ConfigError(source, f'{key}.t', f'expected a time >= 0 in s, got {t!r}')
        if t < last_t:
            raise ConfigError(source, f'{key}.t', f'times must not decrease ({t} after {last_t})')
        last_t = t
        axes = [0.0] * pad.n_axes
        for name, value in (e.get('axes') or {}).items():
            if name not in pad.axis_names:
                raise ConfigError(source, f'{key}.axes.{name}',
                                  f'no axis named {name!r} on {pad.name}; known: {", ".join(pad.axis_names)}')
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
                raise ConfigError(source, f'{key}.axes.{name}', f'expected a value in [-1, 1], got {value!r}')
            axes[pad.axis_names[name]] = float(value)
        buttons = [0] * pad.n_buttons
        taps = []
        for field_name in ('hold', 'tap'):
            names = e.get(field_name) or []
            if not isinstance(names, list):
                raise ConfigError(source, f'{key}.{field_name}',
                                  f'expected a list of button names, got {names!r}')
            for name in names:
                if name not in pad.button_names:
                    raise ConfigError(source, f'{key}.{field_name}',
                                      f'no button named {name!r} on {pad.name}; '
                                      f'known: {", ".join(pad.button_names)}')
                if field_name == 'hold':
                    buttons[pad.button_names[name]] = 1
                else:
                    taps.append(pad.button_names[name])
        events.append(ScriptEvent(float(t), tuple(axes), tuple(buttons), tuple(taps), bool(e.get('silent',
                                                                                                 False))))
    duration = data.get('duration_s', events[-1].t_s + 1.0)
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration <= 0:
        raise ConfigError(source, 'duration_s', f'expected a time > 0 in s, got {duration!r}')
    return TeleopScript(source, pad, float(rate), float(duration), tuple(events))


def load_script(path: str | Path) -> TeleopScript:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'teleop script {path} does not exist')
    data = load_yaml_file(path, ConfigError)
    return parse_script(data, str(path))


class ScriptClock:
    """What the scripted gamepad sends at each publishing instant: (axes, buttons) or None (silent)."""

    def __init__(self, script: TeleopScript):
        self.script = script
        self._last_index = None

    def joy_at(self, t_s: float):
        index = self.script.event_index_at(t_s)
        if index is None:
            return None
        event = self.script.events[index]
        if event.silent:
            self._last_index = index
            return None
        buttons = list(event.buttons)
        if index != self._last_index:
            for b in event.tap:
                buttons[b] = 1
        self._last_index = index
        return list(event.axes), buttons

    def finished(self, t_s: float) -> bool:
        return t_s >= self.script.duration_s
