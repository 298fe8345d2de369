"""The keyboard as a gamepad: keys -> the Joy state of a gamepad map, for teleop without a gamepad.

`snake bringup` without --script, in a terminal, reads keys and publishes what a gamepad with the chosen
map (config/teleop/*.yaml) would send: teleop_node then maps it with the same TeleopMapper, deadman,
speed scales, gait buttons, latched e-stop and its release, as for a real pad. The keys are the usual
teleop_twist_keyboard layout::

    u i o     forward-left   forward   forward-right        (Shift: U I O J L M < >, sideways
    j k l     turn left      stop      turn right            instead of turning: sidewinding, rolling)
    m , .     back-right     back      back-left
    q / z     speed scale up / down             n / p   next / previous gait
    space     E-STOP (latched)                  R       release the e-stop (Shift+r, deliberate)

A terminal sends a held key as repeats (after an initial delay: 250 ms on the Linux console, 500-660 ms
under most desktops), not as press and release. So the deadman is "a motion key seen within
key_timeout_s": while repeats keep coming the pad holds the deadman and the stick; key_timeout_s after
the last one it lets go, and teleop publishes one zero twist. Any other key (k included) lets go at once.

Pure Python and thread-safe (a reader thread calls press(), a timer calls joy_at()); times are monotonic
seconds passed in, so tests need no clock.

    >>> from snake_control.teleop.mapping import load_teleop_config
    >>> pad = KeyboardPad(load_teleop_config('xbox'))
    >>> pad.press('i', now_s=0.0)
    >>> axes, buttons = pad.joy_at(0.05)
    >>> axes[1], buttons[4]                   # left stick up, LB (the deadman) held
    (1.0, 1)
    >>> pad.joy_at(0.05 + pad.key_timeout_s + 0.1)[1][4]   # no repeat for key_timeout_s: let go once
    0
    >>> pad.joy_at(2.0) is None               # then silent, like an idle gamepad
    True
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from snake_control.teleop.mapping import ButtonSpec, TeleopConfig

# key -> (forward, sideways, turn) as fractions of the map's limits; teleop_twist_keyboard's moveBindings
# (its holonomic Shift layer moves sideways where the plain layer turns). Turn: +1 is left (CCW).
MOVE_KEYS = {
    'u': (1, 0, 1), 'i': (1, 0, 0), 'o': (1, 0, -1),
    'j': (0, 0, 1), 'l': (0, 0, -1),
    'm': (-1, 0, -1), ',': (-1, 0, 0), '.': (-1, 0, 1),
    'U': (1, 1, 0), 'I': (1, 0, 0), 'O': (1, -1, 0),
    'J': (0, 1, 0), 'L': (0, -1, 0),
    'M': (-1, 1, 0), '<': (-1, 0, 0), '>': (-1, -1, 0),
}
# key -> the map's button action pressed for one message (teleop acts on the press edge).
TAP_KEYS = {'q': 'faster', 'z': 'slower', 'n': 'next_gait', 'p': 'previous_gait', ' ': 'estop'}
RELEASE_KEY = 'R'           # all of the map's estop_release buttons together
# Covers a desktop's initial repeat delay (GNOME 500 ms; X11's default 660 ms would blip at 0.6 s).
KEY_TIMEOUT_S = 0.7

HELP = '''keyboard teleop (this terminal is the gamepad; hold a key to move, let go to stop):
   u    i    o       forward-left  forward  forward-right
   j    k    l       turn left     stop     turn right
   m    ,    .       back-right    back     back-left
   Shift (U I O J L M < >): sideways instead of turning (sidewinding, rolling)
   q/z: speed scale up/down    n/p: next/previous gait
   space: E-STOP (latched)     R (Shift+r): release the e-stop     Ctrl-C: quit (torque off)'''


@dataclass
class KeyboardCounts:
    """What the keyboard did in a session, for the summary."""

    keys: int = 0
    motion_s: float = 0.0          # time the deadman was held
    estops: int = 0
    releases: int = 0
    gait_keys: int = 0
    speed_keys: int = 0
    other_keys: int = 0
    directions: set = field(default_factory=set)

    def line(self) -> str:
        return (f'keyboard: {self.keys} keys, moving for {self.motion_s:.1f} s '
                f'({", ".join(sorted(self.directions)) or "no motion keys"}), {self.gait_keys} gait keys, '
                f'{self.speed_keys} speed keys, e-stop engaged {self.estops}x, released {self.releases}x')


class KeyboardPad:
    """Keys in, the Joy state of `config`'s gamepad out (see the module docstring)."""

    def __init__(self, config: TeleopConfig, key_timeout_s: float = KEY_TIMEOUT_S):
        if not (math.isfinite(key_timeout_s) and 0.05 <= key_timeout_s <= 5.0):
            raise ValueError(f'key timeout: expected 0.05 to 5 s, got {key_timeout_s!r}')
        self.config = config
        self.key_timeout_s = float(key_timeout_s)
        self.counts = KeyboardCounts()
        self.speed_index = config.initial_speed_scale
        self.estopped = False
        self._lock = threading.Lock()
        self._motion: tuple[int, int, int] | None = None
        self._motion_since_s = 0.0
        self._last_motion_s = -math.inf
        self._taps: list[ButtonSpec] = []
        self._idle_sent = True         # nothing to say until a key comes

    def press(self, key: str, now_s: float) -> str | None:
        """One key from the terminal at monotonic time now_s; returns a line to show the user, or None."""
        with self._lock:
            self.counts.keys += 1
            if self._motion is not None and now_s - self._last_motion_s > self.key_timeout_s:
                self._end_motion(now_s)     # it had timed out before this key: a new press
            if key in MOVE_KEYS:
                if self._motion != MOVE_KEYS[key]:
                    self._end_motion(now_s)
                    self._motion, self._motion_since_s = MOVE_KEYS[key], now_s
                self._last_motion_s = now_s
                self.counts.directions.add(key)
                return None
            self._end_motion(now_s)
            if key in TAP_KEYS:
                action = TAP_KEYS[key]
                self._taps.append(self.config.buttons[action])
                return self._tapped(action)
            if key == RELEASE_KEY:
                self._taps.extend(self.config.estop_release)
                if self.estopped:
                    self.estopped = False
                    self.counts.releases += 1
                    return 'e-stop released (hold a motion key to move)'
                return None
            self.counts.other_keys += 1
            return None

    def _tapped(self, action: str) -> str | None:
        cfg = self.config
        if action == 'estop':
            if not self.estopped:
                self.counts.estops += 1
            self.estopped = True
            return f'E-STOP engaged (latched; {RELEASE_KEY} releases)'
        if action in ('faster', 'slower'):
            self.counts.speed_keys += 1
            step = 1 if action == 'faster' else -1
            self.speed_index = min(max(self.speed_index + step, 0), len(cfg.speed_scales) - 1)
            return (f'speed scale x{cfg.speed_scales[self.speed_index]:g} (forward up to '
                    f'{cfg.limits["max_forward_m_s"] * cfg.speed_scales[self.speed_index]:.3f} m/s)')
        self.counts.gait_keys += 1
        return f'{action.replace("_", " ")} requested'

    def _end_motion(self, now_s: float):
        if self._motion is not None:
            end = min(now_s, self._last_motion_s + self.key_timeout_s)
            self.counts.motion_s += max(0.0, end - self._motion_since_s)
        self._motion, self._last_motion_s = None, -math.inf

    def joy_at(self, now_s: float):
        """(axes, buttons) the pad sends now, or None when it has nothing to say (idle, like a pad at rest).

        A tap is pressed in one message only and released in the next; after the last activity one
        all-released message goes out, so teleop sees every release."""
        cfg = self.config
        with self._lock:
            if self._motion is not None and now_s - self._last_motion_s > self.key_timeout_s:
                self._end_motion(now_s)
            taps, self._taps = self._taps, []
            if self._motion is None and not taps:
                if self._idle_sent:
                    return None
                self._idle_sent = True
            else:
                self._idle_sent = False
            axes, buttons = [0.0] * cfg.n_axes, [0] * cfg.n_buttons
            if self._motion is not None:
                _press(cfg.deadman, axes, buttons)
                for name, value in zip(('forward', 'sideways', 'turn'), self._motion):
                    spec = cfg.axes[name]
                    # A full stick in the direction that gives the command's sign (the map's scale may flip it).
                    axes[spec.axis] = float(value) * (1.0 if spec.scale >= 0 else -1.0)
            for spec in taps:
                _press(spec, axes, buttons)
            return axes, buttons

    def finish(self, now_s: float) -> KeyboardCounts:
        """Close the session's counts (motion in progress ends now)."""
        with self._lock:
            self._end_motion(now_s)
            return self.counts


def _press(spec: ButtonSpec, axes: list, buttons: list):
    if spec.button is not None:
        buttons[spec.button] = 1
    elif spec.axis is not None:
        axes[spec.axis] = float(spec.direction)
