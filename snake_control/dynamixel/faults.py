"""Injected faults of the emulated bus: what `--faults` and the control channel can switch on."""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class FaultSpec:
    """Injected faults. Times are seconds since the emulator started (or since the command, on stdin)."""

    corrupt_rate: float = 0.0       # probability that any byte on the wire (either way) is garbled
    drop_rate: float = 0.0          # probability that a servo's reply is lost
    late_rate: float = 0.0          # probability that a request's replies leave late_ms late, whole
    late_ms: float = 0.0            # (the servos' host busy elsewhere: a slow line, not a noisy one)
    silent: dict = field(default_factory=dict)      # id -> (start_s, end_s): servo does not answer
    trips: list = field(default_factory=list)       # (time_s, id, 'overload'|'overheating')
    unplugs: list = field(default_factory=list)     # (time_s, duration_s)
    seed: int = 0

    @classmethod
    def parse(cls, spec: str | None) -> 'FaultSpec':
        """Parse ``corrupt=0.01,drop=0.001,late=0.2+8,silent=3@2+1.5,trip=5:overload@1,unplug=2+1,seed=7``.

        ``late=RATE+MS`` (that share of requests answered MS ms late), ``silent=ID@START+DURATION``
        (duration may be omitted: forever), ``trip=ID:KIND@TIME``, ``unplug=TIME+DURATION``. Items
        repeat freely.
        """
        out = cls()
        if not spec:
            return out
        for item in spec.split(','):
            item = item.strip()
            if not item:
                continue
            key, sep, value = item.partition('=')
            try:
                if not sep:
                    raise ValueError('expected key=value')
                if key == 'corrupt':
                    out.corrupt_rate = rate(value)
                elif key == 'drop':
                    out.drop_rate = rate(value)
                elif key == 'late':
                    share, _, ms = value.partition('+')
                    out.late_rate, out.late_ms = rate(share), delay_ms(ms or '5')
                elif key == 'seed':
                    out.seed = int(value)
                elif key == 'silent':
                    sid, _, when = value.partition('@')
                    start, _, dur = (when or '0').partition('+')
                    out.silent[int(sid)] = (float(start), float(start) + (float(dur) if dur else math.inf))
                elif key == 'trip':
                    who, _, when = value.partition('@')
                    sid, _, kind = who.partition(':')
                    if kind not in ('overload', 'overheating'):
                        raise ValueError('kind must be overload or overheating')
                    out.trips.append((float(when or 0), int(sid), kind))
                elif key == 'unplug':
                    start, _, dur = value.partition('+')
                    out.unplugs.append((float(start), float(dur or 1.0)))
                else:
                    raise ValueError('unknown fault (corrupt, drop, late, silent, trip, unplug, seed)')
            except ValueError as exc:
                raise ValueError(f'--faults item {item!r}: {exc}') from None
        times = [start for start, _ in out.silent.values()]
        times += [when for when, _, _ in out.trips] + [start for start, _ in out.unplugs]
        spans = [end - start for start, end in out.silent.values()] + [dur for _, dur in out.unplugs]
        # A NaN or negative time would never come: the fault would silently not happen.
        if not all(math.isfinite(t) and t >= 0 for t in times) or not all(s > 0 for s in spans):
            raise ValueError(f'--faults {spec!r}: times must be finite and >= 0 s, durations > 0 s '
                             f'(a silent servo may omit its duration: for ever)')
        return out


def rate(text: str) -> float:
    """A probability from text; ValueError unless within 0..1."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f'rate {value} is not within 0..1')
    return value


def delay_ms(text: str) -> float:
    """A delay in ms from text; ValueError unless finite and within 0..10 000 ms."""
    value = float(text)
    if not 0.0 <= value <= 10_000.0:
        raise ValueError(f'delay {value} ms is not within 0..10000 ms')
    return value
