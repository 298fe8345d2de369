"""A servo bus on ROBOTIS's dynamixel_sdk with its traps coded around.

- ``SnakePortHandler`` (a PortHandler): monotonic clock instead of the wall clock; reads block in
  select() until the bytes the SDK asked for arrive or its packet deadline passes (the SDK polls a
  non-blocking port in a loop, which eats a core); every packet timeout is wire time plus a margin the
  caller chooses from its control period, never the SDK's 2 x 16 ms + 2 ms floor; a vanished device
  (USB adapter unplugged, EIO) raises PortGone.
- ``ServoBus``: transactions that always release the SDK's port-busy flag (an exception between send
  and receive otherwise leaves every later call failing with PORT_BUSY); reads that return per-servo
  results, so one silent servo never turns everyone's data into zeros; fast sync read whose partial
  replies still deliver the blocks before the gap; errors as exceptions naming the servo and the port.
"""
from __future__ import annotations

import collections
import errno
import math
import os
import re
import select
import time

import dynamixel_sdk as sdk
from dynamixel_sdk.protocol2_packet_handler import TXPACKET_MAX_LEN, Protocol2PacketHandler

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.late_replies import LateReplies
from snake_control.dynamixel.models import SUPPORTED_BAUDS, register



class DxlError(Exception):
    """A failed exchange with one servo (communication or servo-reported)."""


class CommError(DxlError, ConnectionError):
    """No valid reply: timeout, corrupted packet, transmit failure."""


class ServoError(DxlError):
    """The servo answered with an error byte (Access, Data Limit, ...)."""

    def __init__(self, message: str, error: int):
        super().__init__(message)
        self.error = error


class PortGone(ConnectionError):
    """The serial device disappeared or failed (adapter unplugged, EIO)."""


class SnakePortHandler(sdk.PortHandler):
    """PortHandler with a monotonic clock, blocking reads and caller-chosen timeout margins."""

    def __init__(self, port_name: str, margin_ms: float = 5.0):
        super().__init__(port_name)
        self.margin_ms = margin_ms
        # Bytes written but not answered (a sync write): a reply can only start after they have left
        # the adapter, so the next timeout includes their wire time.
        self.backlog_bytes = 0
        # Watches the bytes a request clears for late replies of reads that missed servos (ServoBus).
        self.late: LateReplies | None = None
        # The reply latency (read_strategy.ReplyLatency) of the last read when it ended waiting for a
        # reply: bytes that still come before the next request were replies later than its margin;
        # when it had no reply at all and none comes, its request (or every reply) was garbled.
        self.unanswered = None
        self.unanswered_any = False

    def take_backlog_ms(self, request_bytes: int) -> float:
        """Wire time of the unanswered backlog plus this request (ms); clears the backlog."""
        ms = (self.backlog_bytes + request_bytes) * self.tx_time_per_byte
        self.backlog_bytes = 0
        return ms

    def getCurrentTime(self):
        return time.monotonic() * 1000.0

    def setPacketTimeout(self, packet_length):
        # Wire time of the expected bytes plus our margin (the SDK adds 2 x 16 ms latency + 2 ms).
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = (self.tx_time_per_byte * packet_length + self.take_backlog_ms(14)
                               + self.margin_ms)

    def setBaudRate(self, baudrate):
        # The SDK accepts only its own list of rates (no 4.5 Mbit/s); pyserial sets any rate the
        # adapter supports (a custom divisor on Linux), so ask it directly.
        self.baudrate = baudrate
        try:
            return self.setupPort(baudrate)
        except (OSError, ValueError) as exc:
            raise PortGone(f'{self.port_name}: cannot open at {baudrate} baud: {exc}') from exc

    def readPort(self, length):
        if length <= 0:
            return b''
        fd = self.ser.fd
        out = b''
        deadline = self.packet_start_time + self.packet_timeout
        selected = False
        while True:
            try:
                chunk = os.read(fd, length - len(out))
            except BlockingIOError:
                chunk = None
            except OSError as exc:
                raise PortGone(f'{self.port_name}: adapter gone (read: {exc})') from exc
            if chunk == b'' and selected:
                # With VMIN = 0 an empty read only means "no data", unless select said it was ready.
                raise PortGone(f'{self.port_name}: adapter gone (hung up)')
            if chunk:
                out += chunk
                if len(out) >= length:
                    return out
            selected = False
            remaining_s = (deadline - self.getCurrentTime()) / 1000.0
            if remaining_s <= 0:
                return out
            try:
                ready, _, _ = select.select([fd], [], [], remaining_s)
            except (OSError, ValueError) as exc:
                raise PortGone(f'{self.port_name}: adapter gone (select: {exc})') from exc
            if not ready:
                return out
            selected = True

    corked = False          # hold written packets back and send them with the next one (one syscall)
    _held = b''

    # How long a write may wait for room in the adapter's (or pty's) transmit buffer. A full buffer
    # means the other end is slow, not gone: wait for it rather than report an unplug.
    write_wait_s = 0.25

    def writePort(self, packet):
        data = bytes(packet)
        if self.corked:
            self._held += data
            return len(data)
        if self._held:
            data, self._held = self._held + data, b''
        return self._write_all(data, len(bytes(packet)))

    def _write_all(self, data: bytes, reported: int) -> int:
        """Write every byte, waiting (select, never spinning) while the buffer is full (EAGAIN) or a
        write was partial. Returns ``reported`` when all went out, less when the buffer stayed full for
        write_wait_s (the SDK then reports a transmit failure); PortGone only on a real device error."""
        fd = self.ser.fd
        view = memoryview(data)
        deadline = time.monotonic() + self.write_wait_s
        while view:
            try:
                n = os.write(fd, view)
                view = view[n:]
                continue
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                raise PortGone(f'{self.port_name}: adapter gone (write: {exc})') from exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return max(0, reported - len(view))
            try:
                select.select([], [fd], [], remaining)
            except (OSError, ValueError) as exc:
                raise PortGone(f'{self.port_name}: adapter gone (select: {exc})') from exc
        return reported

    def flush_held(self):
        if self._held:
            self.corked = False
            self.writePort(b'')

    def take_pending(self) -> bytes:
        """What waits in the input buffer now, without waiting for more."""
        out = b''
        while True:
            try:
                chunk = os.read(self.ser.fd, 4096)
            except BlockingIOError:
                break
            except OSError as exc:
                raise PortGone(f'{self.port_name}: adapter gone (read: {exc})') from exc
            if not chunk:
                break
            out += chunk
        self.heard_after(out)
        return out

    def heard_after(self, data: bytes) -> None:
        """Bytes that came after a read stopped waiting for its replies: they were replies (whole or
        garbled; a garbled request gets none), later than the read's margin."""
        if data and self.unanswered is not None:
            self.unanswered.missed()
            self.unanswered = None

    def clearPort(self):
        if self.late is not None and self.late.outstanding:
            # A read missed servos: whether what waits here is their whole replies, late, tells a
            # slow answer from a noisy line (late_replies).
            self.late.feed(self.take_pending())
        elif self.unanswered is not None:
            self.take_pending()
        if self.unanswered is not None and not self.unanswered_any:
            self.unanswered.silent()
        self.unanswered = None          # from here on, bytes are this request's
        try:
            self.ser.reset_input_buffer()
        except Exception as exc:      # termios.error on a hung-up tty
            raise PortGone(f'{self.port_name}: adapter gone ({exc})') from exc

    def closePort(self):
        self._held = b''
        try:
            if self.ser is not None:
                self.ser.close()
        except Exception:
            pass
        self.is_open = False


class SnakePacketHandler(Protocol2PacketHandler):
    """The SDK's Protocol 2.0 handler with its two per-byte Python loops of every sent packet replaced
    by equal results at a fraction of the cost: the CRC (protocol.crc16, one vectorised pass) and byte
    stuffing when the packet holds no FF FF FD (nearly always), where the SDK's loop changes nothing."""

    def updateCRC(self, crc_accum, data_blk_ptr, data_blk_size):
        return P.crc16(bytes(data_blk_ptr[:data_blk_size]), crc_accum)

    def addStuffing(self, packet):
        length = packet[5] | (packet[6] << 8)
        # The SDK looks for FF FF FD ending anywhere from the instruction on (its first look-back
        # reaches the LEN bytes), up to the CRC.
        if P.HEADER[:3] not in bytes(packet[5:5 + length]):
            return packet
        return super().addStuffing(packet)


def usb_latency_timer_ms(port: str, sysfs_root: str = '/sys/bus/usb-serial/devices') -> int | None:
    """The latency timer of a USB-serial port (ttyUSBn) from sysfs, or None when not applicable."""
    name = os.path.basename(os.path.realpath(port))
    if not re.fullmatch(r'ttyUSB\d+', name):
        return None
    try:
        with open(os.path.join(sysfs_root, name, 'latency_timer')) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def latency_timer_warning(port: str, sysfs_root: str = '/sys/bus/usb-serial/devices') -> str | None:
    """A message with the udev fix when the port's USB latency timer is above 1 ms, else None."""
    ms = usb_latency_timer_ms(port, sysfs_root)
    if ms is None or ms <= 1:
        return None
    name = os.path.basename(os.path.realpath(port))
    return (f'{port}: USB latency timer is {ms} ms, so every read waits up to {ms} ms. Fix now: '
            f'echo 1 | sudo tee {sysfs_root}/{name}/latency_timer ; fix for good: a udev rule '
            f'/etc/udev/rules.d/99-dynamixel-latency.rules with: ACTION=="add", SUBSYSTEM=="usb-serial", '
            f'DRIVER=="ftdi_sio", ATTR{{latency_timer}}="1" (then: sudo udevadm control --reload; replug)')


class _BoundedCache(dict):
    """A dict that builds a missing value as build(*key) and, holding limit entries, starts over: the
    packets a bus sends again and again are framed once, a hit costs one dict lookup, and a caller that
    keeps changing its keys cannot grow it without bound."""

    __slots__ = ('limit', 'build')

    def __init__(self, limit: int, build):
        super().__init__()
        self.limit, self.build = limit, build

    def __missing__(self, key):
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.build(*key)
        return value


def _sync_read_packet(address: int, size: int, fast: bool, ids: tuple) -> bytes:
    """The (fast) sync read instruction packet for ``size`` bytes at ``address`` of ``ids``."""
    params = P.le(address, 2) + P.le(size, 2) + bytes(ids)
    return P.build_instruction(P.BROADCAST_ID, P.FAST_SYNC_READ if fast else P.SYNC_READ, params)


class _Transaction:
    """ServoBus.transaction: the SDK's port-busy flag released whatever happens inside; a vanished
    adapter marks the bus closed; on any other error a held packet is dropped, so that it never leaves
    later, out of its cycle. A class, not a generator: two exchanges in every control cycle use it."""

    __slots__ = ('bus',)

    def __init__(self, bus: 'ServoBus'):
        self.bus = bus

    def __enter__(self):
        self.bus.port.is_using = False

    def __exit__(self, kind, exc, tb):
        bus = self.bus
        if kind is not None:
            if issubclass(kind, PortGone):
                bus.is_open = False
            else:
                bus.port._held = b''
        bus.port.is_using = False
        return False


class ServoBus:
    """One open port and the Protocol 2.0 packet handler; every call names the servo on failure."""

    # Quiet time that ends the drain after an incomplete sync read (None: the margin). The next request
    # clears what is left in the input buffer before it leaves, so a short drain only has to cover a
    # reply in flight at that moment.
    drain_quiet_ms: float | None = None
    # Whether a block of the last fast sync read's reply came in time, whole in length, and broke (its
    # CRC, or the header's): the line garbles (a late or truncated reply is only short, never this).
    garbled_in_time = False
    # Called once, right after the next sync read's request has left and before its wait for the replies
    # starts (the wait's deadline counts from its return): work that can overlap the replies' wire time.
    # Dropped unrun when the request does not leave.
    after_send = None
    # Host monotonic s just before the last packet was written: no reply to it can have been sampled
    # earlier (a reply dated before it answers an earlier request).
    sent_s = math.nan
    # When the last reply byte of the latest sync read was taken off the line (monotonic s).
    replied_s = math.nan

    def __init__(self, port: str, baud: int, margin_ms: float = 10.0):
        if baud not in SUPPORTED_BAUDS:
            raise ValueError(f'baud {baud} is not a Dynamixel baud rate '
                             f'({", ".join(map(str, SUPPORTED_BAUDS))})')
        self.port_name, self.baud = port, baud
        self.port = SnakePortHandler(port, margin_ms)
        self.ph = SnakePacketHandler()
        self.is_open = False
        self.late = self.port.late = LateReplies()
        # Sync read packets by (address, size, fast, ids): a cycle asks for the same block of the same
        # servos in a few orders (read_order). Sync write frames by (address, size, ids).
        self._requests = _BoundedCache(256, _sync_read_packet)
        self._frames = _BoundedCache(64, P.SyncWriteFrame)
        self._transaction = _Transaction(self)

    @property
    def byte_time_ms(self) -> float:
        return 10_000.0 / self.baud

    def open(self):
        if not os.path.exists(self.port_name):
            raise PortGone(f'{self.port_name}: no such device (adapter unplugged? wrong --port?)')
        try:
            self.port.baudrate = self.baud
            if not self.port.setBaudRate(self.baud):
                raise ValueError(f'{self.port_name}: the SDK refuses baud {self.baud}')
        except PortGone:
            raise
        except Exception as exc:
            raise PortGone(f'{self.port_name}: cannot open: {exc}') from exc
        self.port.is_using = False
        self.is_open = True
        return self

    def close(self):
        self.port.closePort()
        self.is_open = False

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def set_baud(self, baud: int):
        self.baud = baud
        self.port.baudrate = baud
        self.port.setBaudRate(baud)

    def transaction(self) -> '_Transaction':
        """Guard one SDK exchange: the port-busy flag is released whatever happens inside."""
        return self._transaction

    def _check(self, result: int, error: int, what: str, servo_id) -> None:
        if result != sdk.COMM_SUCCESS:
            raise CommError(f'{self.port_name}: servo {servo_id}: {what}: {self.ph.getTxRxResult(result)}')
        if error & 0x7F == P.ERR_CRC:       # our packet arrived garbled: a communication failure
            raise CommError(f'{self.port_name}: servo {servo_id}: {what}: the servo saw a CRC error')
        if error & 0x7F:
            raise ServoError(f'{self.port_name}: servo {servo_id}: {what}: '
                             f'{", ".join(P.decode_error(error))}', error)

    # -------------------------------------------------------------- single servo
    def _exchange(self, servo_id: int, instruction: int, params: bytes, n_data: int,
                  what: str, quiet_ms: float | None = None) -> tuple[int, bytes] | None:
        """Send one instruction (framed by the SDK) and take the status of ``servo_id`` that carries
        ``n_data`` bytes (or none, with an error code). None when no such status arrives in time; the
        line is then drained until quiet for ``quiet_ms`` (default: the margin).

        The SDK's own receiver takes the first status with the right ID, so a late reply to an
        earlier request (of another length) can pass for this one; matching the length too closes
        that hole, and our parser re-hunts for headers past a garbled packet.
        """
        # dynamixel_sdk 4.1.0 drops its own byte stuffing whenever stuffing makes a packet longer
        # (addStuffing's new list is discarded), so the body goes in already stuffed.
        body = P.stuff(bytes((instruction,)) + bytes(params))
        txp = [0] * (9 + len(body))
        length = 2 + len(body)
        txp[4], txp[5], txp[6] = servo_id, length & 0xFF, length >> 8
        txp[7:7 + len(body)] = list(body)
        with self.transaction():
            result = self.ph.txPacket(self.port, txp)
            if result != sdk.COMM_SUCCESS:
                raise CommError(f'{self.port_name}: servo {servo_id}: {what}: '
                                f'{self.ph.getTxRxResult(result)}')
            expected = 11 + n_data
            self.port.setPacketTimeout(expected)
            parser = P.PacketParser()
            while True:
                chunk = self.port.readPort(max(1, expected - len(parser.buffer)))
                if not chunk:
                    self.drain(quiet_ms)
                    return None
                for pkt in parser.feed(chunk):
                    if not (pkt.crc_ok and pkt.instruction == P.STATUS and pkt.servo_id == servo_id):
                        self.late.note(pkt)             # another read's reply, late
                        continue
                    if len(pkt.params) == n_data + 1 or (len(pkt.params) == 1 and pkt.params[0] & 0x7F):
                        return pkt.params[0], bytes(pkt.params[1:])

    def ping(self, servo_id: int) -> tuple[int, int] | None:
        """(model number, firmware) of a servo, or None when it does not answer."""
        reply = self._exchange(servo_id, P.PING, b'', 3, 'ping')
        if reply is None or reply[0] & 0x7F:
            return None         # includes a CRC-error status: the request itself arrived garbled
        data = reply[1]
        return data[0] | (data[1] << 8), data[2]

    def broadcast_ping(self) -> dict[int, tuple[int, int]]:
        """{id: (model number, firmware)} of every servo answering at this baud."""
        with self.transaction():
            found, result = self.ph.broadcastPing(self.port)
        return {i: (m, fw) for i, (m, fw) in found.items()}

    def _status(self, reply, servo_id, what):
        if reply is None:
            raise CommError(f'{self.port_name}: servo {servo_id}: {what}: no status packet')
        error = reply[0]
        if error & 0x7F == P.ERR_CRC:       # our packet arrived garbled: a communication failure
            raise CommError(f'{self.port_name}: servo {servo_id}: {what}: the servo saw a CRC error')
        if error & 0x7F:
            raise ServoError(f'{self.port_name}: servo {servo_id}: {what}: '
                             f'{", ".join(P.decode_error(error))}', error)
        return reply

    def read(self, servo_id: int, address: int, size: int) -> tuple[bytes, int]:
        """(data, error byte) of a read; raises CommError/ServoError naming the servo."""
        what = f'read {size} bytes at {address}'
        reply = self._exchange(servo_id, P.READ, P.le(address, 2) + P.le(size, 2), size, what)
        error, data = self._status(reply, servo_id, what)
        return data, error

    def write(self, servo_id: int, address: int, data: bytes, quiet_ms: float | None = None) -> int:
        """Write and wait for the status; returns the error byte (Alert bit kept). ``quiet_ms``: the
        drain after a lost status (see _exchange)."""
        what = f'write {len(data)} bytes at {address}'
        reply = self._exchange(servo_id, P.WRITE, P.le(address, 2) + bytes(data), 0, what, quiet_ms)
        error, _ = self._status(reply, servo_id, what)
        return error

    def write_no_reply(self, servo_id: int, address: int, data: bytes) -> None:
        """Write when the servo may be set not to answer: a status, if one comes, is taken and
        dropped (never left behind to pass for the next exchange's reply)."""
        self._exchange(servo_id, P.WRITE, P.le(address, 2) + bytes(data), 0, 'write')

    def read_register(self, servo_id: int, name: str) -> int:
        reg = register(name)
        data, _ = self.read(servo_id, reg.address, reg.size)
        return P.from_le(data, reg.signed)

    def write_register(self, servo_id: int, name: str, value: int) -> int:
        reg = register(name)
        if not reg.writable:
            raise ValueError(f'register {reg.name} is read-only')
        lo, hi = (-(1 << (8 * reg.size - 1)), (1 << (8 * reg.size - 1)) - 1) if reg.signed \
            else (0, (1 << (8 * reg.size)) - 1)
        if not lo <= int(value) <= hi:
            raise ValueError(f'{reg.name}: {value} does not fit {reg.size} byte(s) ({lo}..{hi})')
        return self.write(servo_id, reg.address, P.le(int(value), reg.size))

    def reboot(self, servo_id: int) -> None:
        with self.transaction():
            result, error = self.ph.reboot(self.port, servo_id)
        self._check(result, error, 'reboot', servo_id)

    def factory_reset(self, servo_id: int, option: int = 0x02) -> None:
        with self.transaction():
            result, error = self.ph.factoryReset(self.port, servo_id, option)
        self._check(result, error, 'factory reset', servo_id)

    def drain(self, quiet_ms: float | None = None, max_ms: float | None = None) -> int:
        """After an incomplete exchange: discard what still arrives until the line has been quiet for
        quiet_ms (default: the margin), so a late reply cannot pass for the next request's."""
        quiet_ms = self.port.margin_ms if quiet_ms is None else quiet_ms
        deadline = time.monotonic() + (max_ms if max_ms is not None else 3 * quiet_ms) / 1000.0
        dropped = 0
        fd = self.port.ser.fd
        while time.monotonic() < deadline:
            try:
                ready, _, _ = select.select([fd], [], [], quiet_ms / 1000.0)
                if not ready:
                    break
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                continue
            except OSError as exc:
                self.is_open = False
                raise PortGone(f'{self.port_name}: adapter gone ({exc})') from exc
            if not chunk:
                break
            dropped += len(chunk)
            self.port.heard_after(chunk)
            self.late.feed(chunk)
        return dropped

    def collect_late(self) -> collections.Counter:
        """The replies (servo ID -> count) that watched reads missed but that arrived later, whole,
        since the last call (what waits in the input buffer now included)."""
        if self.late.outstanding and self.is_open:
            try:
                self.late.feed(self.port.take_pending())
            except PortGone:
                self.is_open = False
                raise
        return self.late.take()

    def _read_raw(self, n_bytes: int) -> bytes:
        """Up to n_bytes, waiting no longer than the packet deadline already set on the port."""
        out = b''
        while len(out) < n_bytes:
            chunk = self.port.readPort(n_bytes - len(out))
            if not chunk:
                break
            out += chunk
        return out

    def _read_fast_reply(self, reply_bytes: int, size: int) -> bytes:
        """A fast sync read's reply: up to ``reply_bytes`` (every servo's block), waiting no longer than the
        deadline already set on the port. The chain of blocks stops at a servo that does not answer; a
        reply whose own LEN declares fewer blocks, each of which checks, is whole:
        nothing more of it can come, so waiting out the deadline for the missing servos would only cost
        the cycle the follow-up read that fetches them."""
        head = self._read_raw(7)
        width = size + 4
        if len(head) == 7 and head[:5] == P.HEADER + bytes((P.BROADCAST_ID,)):
            total = 7 + (head[5] | head[6] << 8)
            blocks, extra = divmod(total - 8, width)
            if not extra and 1 <= blocks and total < reply_bytes:
                raw = head + self._read_raw(total - 7)
                if len(raw) == total and P.fast_block_rows(raw, size, blocks)[0].all():
                    return raw
                return raw + self._read_raw(reply_bytes - len(raw))
        return head + self._read_raw(reply_bytes - len(head))

    # -------------------------------------------------------------- groups
    def _send(self, packet: bytes) -> int:
        """Send one framed instruction packet as the SDK's txPacket does (input buffer cleared first,
        late replies in it watched; the packet written whole); the SDK's result code."""
        if len(packet) > TXPACKET_MAX_LEN:
            return sdk.COMM_TX_ERROR
        self.port.clearPort()
        self.sent_s = time.monotonic()
        if self.port.writePort(packet) != len(packet):
            return sdk.COMM_TX_FAIL
        return sdk.COMM_SUCCESS

    def sync_write(self, address: int, size: int, data_by_id: dict[int, bytes], hold: bool = False) -> None:
        """One sync write (no reply). Raises CommError only when the packet could not be sent.

        ``hold``: keep the packet back and send it together with the next packet (the read that
        follows in a control cycle): one write to the adapter instead of two.
        """
        for sid, data in data_by_id.items():
            if len(data) != size:
                raise ValueError(f'sync write: servo {sid} data has {len(data)} bytes, expected {size}')
        self.sync_write_blocks(address, size, bytes(data_by_id), b''.join(data_by_id.values()), hold)

    def sync_write_blocks(self, address: int, size: int, ids: bytes, data: bytes, hold: bool = False) -> None:
        """sync_write of ``size`` bytes to each servo of ``ids`` (one byte each, in packet order), their
        data one block after another in ``data``. Framed here in a few whole-packet operations rather
        than through the SDK's per-byte lists (every control cycle sends one), each set of servos' frame
        once (protocol.SyncWriteFrame); the same bytes."""
        if len(data) != size * len(ids):
            raise ValueError(f'sync write: {len(data)} bytes of data for {len(ids)} servos of {size}')
        packet = self._frames[address, size, bytes(ids)].packet(data)
        with self.transaction():
            self.port.corked = hold
            try:
                result = self._send(packet)
            finally:
                self.port.corked = False
        self.port.backlog_bytes += 14 + len(ids) * (1 + size)
        if result != sdk.COMM_SUCCESS:
            raise CommError(f'{self.port_name}: sync write at {address}: {self.ph.getTxRxResult(result)}')

    def sync_read(self, address: int, size: int, ids: list[int], fast: bool,
                  timeout_ms: float | None = None, drain: bool = True,
                  extra_ms: float = 0.0, latency=None) -> dict[int, tuple[int, bytes]]:
        """{id: (error byte, data)} for every servo whose reply arrived intact; missing ones absent.

        Fast: one packet of blocks; a truncated or partly corrupted reply still yields the blocks
        before the damage. Slow: one status per servo, each taken on its own, so a silent servo
        costs only itself. ``timeout_ms`` bounds the whole exchange (default: wire time + margin).
        ``drain=False``: an incomplete read is not drained; the caller makes sure no late reply can pass
        for a later read's (each request clears the input buffer before it leaves). ``extra_ms``: wait
        this much longer for the (first) reply, as when the servos' side is known to answer late.
        ``latency`` (read_strategy.ReplyLatency, sync read only): observes how long the first reply took
        beyond the wire time of what was sent and of its own bytes.
        """
        if not ids:
            self.port.flush_held()
            return {}
        n = len(ids)
        reply_bytes = P.sync_read_reply_bytes(n, size, fast)
        if timeout_ms is None:
            timeout_ms = reply_bytes * self.byte_time_ms + self.port.margin_ms
        sent_ms = self.port.take_backlog_ms(14 + n)     # wire time of the request and what it follows
        timeout_ms += sent_ms + extra_ms
        out: dict[int, tuple[int, bytes]] = {}
        after_send, self.after_send = self.after_send, None
        with self.transaction():
            result = self._send(self._requests[address, size, fast, tuple(ids)])
            if result != sdk.COMM_SUCCESS:
                raise CommError(f'{self.port_name}: sync read: {self.ph.getTxRxResult(result)}')
            if after_send is not None:
                after_send()
            self.port.setPacketTimeoutMillis(timeout_ms)
            # Read the raw replies ourselves: the SDK's receiver trusts a garbled LEN field and then
            # swallows the replies behind it; ours re-hunts for headers past a bad CRC.
            wanted = set(ids)
            if fast:
                raw = self._read_fast_reply(reply_bytes, size)
                self.replied_s = time.monotonic()
                start = raw.find(P.HEADER + bytes((P.BROADCAST_ID,)))
                if start >= 0:
                    body = raw[start:] if start else raw
                else:
                    # A garbled header: the blocks behind it are still where the whole reply puts them,
                    # and each is checked on its own (the first against the header the servos sent).
                    body = P.fast_reply_head(reply_bytes) + raw[8:] if len(raw) > 8 else b''
                out = P.fast_reply_blocks(body, size, n, wanted)
                # Garbled: blocks that came whole broke, beside good ones when the header was not found
                # (else the bytes may be another reply's tail, not this one's blocks out of place).
                self.garbled_in_time = (start >= 0 or len(out) > 0) \
                    and len(out) < min(n, (len(body) - 8) // (size + 4))
                if len(out) < n:
                    self.late.expect([sid for sid in ids if sid not in out], size, True,
                                     raw[start:] if start >= 0 else raw)
            else:
                parser = P.PacketParser(expected_length=size + 4)
                received = 0
                last_id = ids[-1]
                # Replies follow each other on the wire: when none has come for one reply's wire time
                # plus the margin, the rest are lost (a garbled request gets no reply at all), so waiting
                # for the whole exchange's deadline gains nothing.
                port = self.port
                deadline_ms = port.packet_start_time + port.packet_timeout
                gap_ms = (11 + size) * self.byte_time_ms + port.margin_ms
                # The first reply: the request's wire time, one reply and the margin.
                port.packet_timeout -= (reply_bytes - (11 + size)) * self.byte_time_ms
                # An earlier fast read's reply still due may come first: it is watched for here (every
                # byte parsed twice, so only while one may: on a noisy line, reads are sync reads).
                in_flight = self.late.fast_outstanding
                # Every byte the replies can have has arrived (some garbled), or the last servo asked has
                # answered (replies come in the order asked, so the missing ones before it are lost):
                # waiting longer gains nothing.
                while len(out) < n and received < reply_bytes and last_id not in out:
                    chunk = port.readPort(min(11 + size, reply_bytes - received))
                    if not chunk:
                        port.unanswered = latency   # gave up waiting: anything still coming was late
                        port.unanswered_any = received > 0
                        break
                    now_ms = port.getCurrentTime()
                    if not received and latency is not None:
                        latency.observe(now_ms - port.packet_start_time
                                        - sent_ms - len(chunk) * self.byte_time_ms)
                    port.packet_start_time, port.packet_timeout = now_ms, min(gap_ms, deadline_ms - now_ms)
                    received += len(chunk)
                    if in_flight:
                        self.late.feed(chunk, in_flight=True)
                    for pkt in parser.feed(chunk):
                        if pkt.crc_ok and pkt.instruction == P.STATUS and pkt.servo_id in wanted \
                                and len(pkt.params) == size + 1:
                            if pkt.servo_id in out:
                                self.late.duplicate(pkt.servo_id)   # the first was an earlier read's
                            out[pkt.servo_id] = (pkt.params[0], bytes(pkt.params[1:]))
                        elif not in_flight:
                            self.late.note(pkt)         # another read's reply, late
                self.replied_s = time.monotonic()
                if len(out) < n:
                    self.late.expect([sid for sid in ids if sid not in out], size, False,
                                     bytes(parser.buffer), in_flight=in_flight)
                if last_id in out:
                    return out          # the line is quiet: nothing of this read is still in flight
        if len(out) < n and drain:
            self.drain(self.drain_quiet_ms)
        return out

    def listen(self, size: int, ids: list[int], timeout_ms: float) -> dict[int, tuple[int, bytes]]:
        """{id: (error byte, data)} of ``size``-byte state replies of ``ids`` that arrive within timeout_ms,
        no request sent: after a read took an earlier request's reply for its own, its own reply is still
        on its way, queued behind. Whole packets only (a fast reply's blocks, or per-servo statuses);
        any other whole status is noted as a late reply (late_replies)."""
        wanted = set(ids)
        width = size + 4
        out: dict[int, tuple[int, bytes]] = {}
        parser = P.PacketParser()
        with self.transaction():
            self.port.setPacketTimeoutMillis(timeout_ms)
            while not wanted <= out.keys():
                chunk = self.port.readPort(1)
                if not chunk:
                    break
                for pkt in parser.feed(chunk + self.port.take_pending()):
                    prm = pkt.params
                    if not (pkt.crc_ok and pkt.instruction == P.STATUS):
                        continue
                    if pkt.servo_id == P.BROADCAST_ID and (len(prm) + 2) % width == 0:
                        for k in range(0, len(prm) + 2, width):
                            if prm[k + 1] in wanted:
                                out[prm[k + 1]] = (prm[k], bytes(prm[k + 2:k + 2 + size]))
                    elif pkt.servo_id in wanted and len(prm) == size + 1:
                        out[pkt.servo_id] = (prm[0], bytes(prm[1:]))
                    else:
                        self.late.note(pkt)
        return out

    def bulk_read(self, items: list[tuple[int, int, int]], fast: bool = False,
                  timeout_ms: float | None = None) -> dict[int, tuple[int, bytes]]:
        """{id: (error, data)} of a (fast) bulk read of (id, address, size) items."""
        param = []
        for sid, addr, size in items:
            param += [sid, addr & 0xFF, addr >> 8, size & 0xFF, size >> 8]
        reply_bytes = (8 + sum(s + 4 for _, _, s in items)) if fast else sum(11 + s for _, _, s in items)
        if timeout_ms is None:
            timeout_ms = reply_bytes * self.byte_time_ms + self.port.margin_ms
        timeout_ms += self.port.take_backlog_ms(10 + len(param))
        out = {}
        with self.transaction():
            result = self.ph.bulkReadTx(self.port, param, len(param), fast)
            if result != sdk.COMM_SUCCESS:
                raise CommError(f'{self.port_name}: bulk read: {self.ph.getTxRxResult(result)}')
            self.port.setPacketTimeoutMillis(timeout_ms)
            if fast:
                raw, result = self.ph.rxPacket(self.port, True)
                for err, sid, data in P.parse_fast_blocks(bytes(raw), [s for _, _, s in items]):
                    out[sid] = (err, data)
            else:
                sizes = {sid: size for sid, _, size in items}
                for _ in range(2 * len(items) + 2):
                    rx, result = self.ph.rxPacket(self.port, False)
                    if result == sdk.COMM_SUCCESS:
                        sid = rx[4]
                        if sid in sizes:
                            out[sid] = (rx[8], bytes(rx[9:9 + sizes[sid]]))
                        if len(out) == len(items):
                            break
                    elif result == sdk.COMM_RX_TIMEOUT:
                        break
        return out


def is_port_gone(exc: BaseException) -> bool:
    return isinstance(exc, PortGone) or (isinstance(exc, OSError) and exc.errno in (errno.EIO, errno.ENODEV))
