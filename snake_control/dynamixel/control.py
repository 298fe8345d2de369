"""The emulated bus's control channel: one command per line in, one JSON-able answer out.

``state`` (per-servo torque, goal, position, hardware error, temperature, Bus Watchdog and how often it
tripped, goal-write record summary),
``goals`` (every goal write: [t_s, id, ticks, accepted]), ``silent ID SECONDS``,
``trip ID overload|overheating``, ``unplug SECONDS``, ``corrupt RATE``, ``drop RATE``, ``late RATE MS``,
``set ID REGISTER VALUE`` (a Present register sets the quantity behind it: ``set 3 present_temperature
70`` makes servo 3 read 70 °C, and it cools or heats from there), ``stall SECONDS`` (the emulator stops
reading the wire for a while, as a stalled host would: what the driver writes piles up in the pty until
its buffer is full).

An emulator serving several buses (one pty each) takes the same commands through ``command_buses``:
``state`` and ``goals`` cover every bus (``state`` lists each bus's device under ``paths``); a command
naming a servo goes to that servo's bus; the others (unplug, corrupt, drop, late, stall) go to every bus, or
to one with the prefix ``bus K`` (K from 0, in the order of ``paths``).
"""
from __future__ import annotations

import json
import math
import time

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.faults import delay_ms, rate
from snake_control.dynamixel.models import register
from snake_control.dynamixel.servo import ADDR_HW_ERROR


def answer_lines(buf: bytes, chunk: bytes, answer, out) -> bytes:
    """Append chunk to buf, answer every complete line with answer(line) written to out as one JSON line
    (where out is given and the answer is not empty); returns what is left of an unfinished line."""
    buf += chunk
    while b'\n' in buf:
        line, buf = buf.split(b'\n', 1)
        reply = answer(line.decode(errors='replace'))
        if out is not None and reply:
            out.write(json.dumps(reply) + '\n')
            out.flush()
    return buf


def command(bus, line: str) -> dict:
    """Run one control-channel command on a BusEmulator; return its answer ({'error': ...} if bad)."""
    words = line.split()
    if not words:
        return {}
    cmd, args = words[0], words[1:]
    now = time.monotonic()
    try:
        if cmd == 'state':
            return _state(bus, now)
        if cmd == 'goals':
            return {'goals': sorted([round(t - bus.t0, 6), s.id, g, ok]
                                    for s in bus.servos.values() for t, g, ok in s.goal_log)}
        if cmd == 'silent':
            bus.silence(int(args[0]), float(args[1]) if len(args) > 1 else math.inf)
        elif cmd == 'trip':
            if args[1] not in ('overload', 'overheating'):
                raise ValueError(f'trip kind {args[1]!r}: expected overload or overheating')
            bus.servos[int(args[0])].trip(P.HW_OVERLOAD if args[1] == 'overload' else P.HW_OVERHEATING)
        elif cmd == 'unplug':
            bus.unplug(float(args[0]) if args else 1.0)
        elif cmd == 'corrupt':
            bus.set_corrupt_rate(rate(args[0]))
        elif cmd == 'drop':
            bus.faults.drop_rate = rate(args[0])
        elif cmd == 'late':
            bus.faults.late_rate, bus.faults.late_ms = rate(args[0]), delay_ms(args[1] if len(args) > 1 else '5')
        elif cmd == 'set':
            bus.servos[int(args[0])].set_present(register(args[1]).name, float(args[2]))
        elif cmd == 'stall':
            bus.stalled_until = time.monotonic() + float(args[0] if args else 1.0)
        else:
            return {'error': f'unknown command {cmd!r}'}
        return {'ok': cmd}
    except (IndexError, KeyError, ValueError) as exc:
        return {'error': f'{line.strip()!r}: {exc!r}'}


def _state(bus, now: float) -> dict:
    out = {}
    for i, s in bus.servos.items():
        s.refresh_present(now)
        out[str(i)] = {'torque': s.torque_on, 'goal': s.get('goal_position'),
                       'position': s.get('present_position'), 'hw_error': s.table[ADDR_HW_ERROR],
                       'return_delay': s.table[9], 'status_return_level': s.table[68],
                       'min_limit': s.get('min_position_limit'), 'max_limit': s.get('max_position_limit'),
                       'goal_writes': s.goal_stats[0], 'goal_min': s.goal_stats[1],
                       'goal_max': s.goal_stats[2], 'goal_refused': s.goal_stats[3],
                       'temperature': s.temperature_c, 'watchdog': s.get('bus_watchdog'),
                       'watchdog_trips': s.watchdog_trips}
    return {'servos': out, 'counters': bus.counters, 'plugged': bus.master >= 0, 'paths': [bus.path]}


def command_buses(buses: list, line: str) -> dict:
    """Run one control-channel command on the emulator's buses (see the module docstring)."""
    words = line.split()
    if not words:
        return {}
    if words[0] == 'bus':
        try:
            bus = buses[int(words[1])]
        except (IndexError, ValueError):
            return {'error': f'{line.strip()!r}: expected bus K COMMAND with K in 0..{len(buses) - 1}'}
        return command(bus, ' '.join(words[2:]))
    cmd = words[0]
    if cmd == 'state':
        answers = [command(b, 'state') for b in buses]
        counters = {k: sum(a['counters'][k] for a in answers) for k in answers[0]['counters']}
        return {'servos': {k: v for a in answers for k, v in a['servos'].items()}, 'counters': counters,
                'plugged': all(a['plugged'] for a in answers), 'paths': [b.path for b in buses]}
    if cmd == 'goals':
        return {'goals': sorted(g for b in buses for g in command(b, 'goals')['goals'])}
    if cmd in ('silent', 'trip', 'set'):
        try:
            sid = int(words[1])
        except (IndexError, ValueError):
            return {'error': f'{line.strip()!r}: expected {cmd} ID ...'}
        owner = next((b for b in buses if sid in b.servos), None)
        if owner is None:
            return {'error': f'{line.strip()!r}: no servo {sid} on any bus'}
        return command(owner, line)
    answers = [command(b, line) for b in buses]
    return next((a for a in answers if 'error' in a), answers[0])
