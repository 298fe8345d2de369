"""Which servo replies a read gave up on arrived later, whole: a late line, not a noisy one.

A read that ends without some servos' replies cannot tell why at that moment: a garbled byte broke the
reply (or the request, and no servo answered), or the reply is still on its way (the servos' host, or
the emulator's process on a loaded machine, answered late). What arrives afterwards tells them apart: a
late reply comes in whole, with good CRCs, after the deadline; noise leaves nothing behind it, or bytes
that make no valid packet. ``LateReplies`` watches those bytes: the rest of an unfinished reply, what
the next request clears from the input buffer, what a drain discards, a fast reply that turns up inside
a later read, and another servo's status inside a single-servo exchange. The read strategy counts only
the losses it cannot explain this way toward a noisy line (``LateWindow`` matches them to cycles).
"""
from __future__ import annotations

import collections
import time

from snake_control.dynamixel import protocol as P


class LateReplies:
    """Servos whose lost reply was later seen whole. ``expect`` after a read that missed servos;
    ``feed`` with the bytes that came after it; ``take`` the late replies seen so far (servo ID ->
    how many); ``watch_only`` the servos still worth watching for."""

    # How long after a fast read missed servos their reply may still turn up inside a later read (s): the
    # driver's window for late replies.
    fast_watch_s = 0.25

    def __init__(self):
        self.missing: set[int] = set()     # servos whose reply the watched reads missed
        self.late: collections.Counter = collections.Counter()
        self.fast_size: int | None = None   # data bytes per block of the watched fast reads' replies
        self.fast_missing: set[int] = set()  # of missing, those a fast read missed
        self._fast_until = 0.0              # (monotonic s) until when they are watched for
        self._parser = P.PacketParser()

    @property
    def outstanding(self) -> bool:
        """Whether a read missed servos whose replies may still come."""
        return bool(self.missing)

    @property
    def fast_outstanding(self) -> bool:
        """Whether a fast read missed servos whose reply may still come (inside a later read's bytes).
        Each later read's bytes are then parsed here too: on a noisy line, whose reads are sync reads
        missing servos every cycle, only until fast_watch_s after the last fast read that missed some."""
        if self.fast_missing and time.monotonic() > self._fast_until:
            self.fast_missing.clear()
        return bool(self.fast_missing)

    def expect(self, missing, size: int, fast: bool, tail: bytes = b'', in_flight: bool = False) -> None:
        """A read ended without the replies of ``missing`` (servo IDs). ``tail``: the bytes of its last,
        unfinished packet (from its header on), which the late bytes complete. ``in_flight``: this read's
        bytes were fed here as they came (``feed(..., in_flight=True)``), so the stream is already whole."""
        if not missing:
            return
        if not in_flight:
            self._parser = P.PacketParser()
            if tail:
                self._parser.feed(tail)     # a whole packet here was the read's own
        self.missing.update(missing)
        if fast:
            self.fast_size = size
            self.fast_missing.update(missing)
            self._fast_until = time.monotonic() + self.fast_watch_s

    def feed(self, data: bytes, in_flight: bool = False) -> None:
        """Bytes that came after the watched reads' deadlines. ``in_flight``: they are a later read's own
        bytes, whose servo packets are that read's replies, so only an earlier fast reply counts here."""
        if data and self.missing:
            for pkt in self._parser.feed(data):
                self.note(pkt, in_flight)

    def note(self, pkt: P.Packet, in_flight: bool = False) -> None:
        """A packet that is not the reply the current exchange waits for."""
        if not self.missing or not pkt.crc_ok or pkt.instruction != P.STATUS:
            return                  # garbled: that loss stays a loss
        if pkt.servo_id == P.BROADCAST_ID:
            if self.fast_size is None:
                return
            # Blocks of error, id, data and CRC; the last block's CRC is the packet's (not in params).
            width = self.fast_size + 4
            # Queued requests answered late come in order, and a later read may take an earlier one's
            # reply for its own: any whole fast reply now stands for one of the missed ones.
            self.late.update(pkt.params[k + 1] for k in range(0, len(pkt.params) + 2, width)
                             if pkt.params[k + 1] in self.missing)
        elif not in_flight and pkt.servo_id in self.missing:
            self.late[pkt.servo_id] += 1

    def duplicate(self, servo_id: int) -> None:
        """A read got two whole replies from one servo: the first was an earlier read's, late."""
        if servo_id in self.missing:
            self.late[servo_id] += 1

    def take(self) -> collections.Counter:
        """The late replies seen since the last take (servo ID -> count)."""
        late, self.late = self.late, collections.Counter()
        return late

    def watch_only(self, ids: set[int]) -> None:
        """Stop watching for the replies of servos outside ``ids`` (their reads were judged)."""
        if self.missing:                # (once none is left, nothing feeds the parser until expect)
            self.missing &= ids
            self.fast_missing &= ids
            if not self.missing:
                self._parser = P.PacketParser()


class LateWindow:
    """The first reads of the last few cycles, each judged once its lost replies have had ``cycles``
    cycles to turn up late. ``add`` a cycle's first read; ``credit`` the late replies seen (each goes to
    the oldest cycle that lost that servo and has not yet been credited for it); ``judged`` returns the
    cycles old enough, as (servos asked, lost, late, caught late: taken only thanks to an extended
    deadline)."""

    def __init__(self, cycles: int):
        self.cycles = max(1, cycles)
        self._open: collections.deque = collections.deque()    # [asked, lost set, late set]
        # Servo ID -> open cycles that lost it and were not credited for it: kept as the window moves,
        # because the window spans LATE_WINDOW_S of cycles (100 at 400 Hz) and a clean line loses none,
        # so going through them all every cycle would cost more than the read it judges.
        self._uncredited: collections.Counter = collections.Counter()

    def add(self, asked: int, lost: set[int], caught_late: int = 0) -> None:
        self._open.append([asked, lost, set(), caught_late])
        if lost:
            self._uncredited.update(lost)

    def credit(self, late: collections.Counter) -> None:
        for sid, count in late.items():
            if not self._uncredited[sid]:
                continue
            for entry in self._open:
                if count <= 0:
                    break
                if sid in entry[1] and sid not in entry[2]:
                    entry[2].add(sid)
                    self._uncredited[sid] -= 1
                    count -= 1

    def judged(self) -> list[tuple[int, int, int, int]]:
        out = []
        while len(self._open) > self.cycles:
            asked, lost, late, caught = self._open.popleft()
            if lost:
                self._uncredited.subtract(lost - late)
            out.append((asked, len(lost), len(late), caught))
        return out

    def watched(self) -> set[int]:
        """The servos whose lost replies may still be credited."""
        return {sid for sid, n in self._uncredited.items() if n > 0}

    def clear(self) -> None:
        self._open.clear()
        self._uncredited.clear()
