"""Dynamixel Protocol 2.0 framing as pure functions: CRC-16, byte stuffing, packet build and parse.

Shared by the servo emulator (which must speak the wire format byte for byte) and by tests that
check the emulator against the e-Manual's vectors. The driver itself sends through ROBOTIS's
dynamixel_sdk; nothing here talks to a port.

Packet layout (see docs/dynamixel.md):

    instruction: FF FF FD 00 | ID | LEN_L LEN_H | INST | params... | CRC_L CRC_H   LEN = params + 3
    status:      FF FF FD 00 | ID | LEN_L LEN_H | 55 | ERR | params... | CRC_L CRC_H   LEN = params + 4

Example (the e-Manual's ping of ID 1):

    >>> build_instruction(1, PING).hex(' ')
    'ff ff fd 00 01 03 00 01 19 4e'
"""
from __future__ import annotations

import struct

import numpy as np

HEADER = b'\xff\xff\xfd\x00'
BROADCAST_ID = 0xFE
MAX_ID = 0xFC

PING = 0x01
READ = 0x02
WRITE = 0x03
REG_WRITE = 0x04
ACTION = 0x05
FACTORY_RESET = 0x06
REBOOT = 0x08
CLEAR = 0x10
BACKUP = 0x20                   # Control Table Backup (P1 0x01 store, 0x02 restore; P2..P5 'CTRL')
BACKUP_KEY = b'CTRL'
STATUS = 0x55
SYNC_READ = 0x82
SYNC_WRITE = 0x83
FAST_SYNC_READ = 0x8A
BULK_READ = 0x92
BULK_WRITE = 0x93
FAST_BULK_READ = 0x9A
INSTRUCTIONS = {PING: 'ping', READ: 'read', WRITE: 'write', REG_WRITE: 'reg_write', ACTION: 'action',
                FACTORY_RESET: 'factory_reset', REBOOT: 'reboot', CLEAR: 'clear', BACKUP: 'backup',
                SYNC_READ: 'sync_read', SYNC_WRITE: 'sync_write', FAST_SYNC_READ: 'fast_sync_read',
                BULK_READ: 'bulk_read', BULK_WRITE: 'bulk_write', FAST_BULK_READ: 'fast_bulk_read'}

# Status ERROR byte: bit 7 is the Alert flag, the low 7 bits one error number.
ERR_ALERT = 0x80
ERR_RESULT_FAIL = 1
ERR_INSTRUCTION = 2
ERR_CRC = 3
ERR_DATA_RANGE = 4
ERR_DATA_LENGTH = 5
ERR_DATA_LIMIT = 6
ERR_ACCESS = 7
ERROR_NAMES = {ERR_RESULT_FAIL: 'result fail', ERR_INSTRUCTION: 'instruction error', ERR_CRC: 'CRC error',
               ERR_DATA_RANGE: 'data range error', ERR_DATA_LENGTH: 'data length error',
               ERR_DATA_LIMIT: 'data limit error', ERR_ACCESS: 'access error'}

# Hardware Error Status (register 70) bits.
HW_INPUT_VOLTAGE = 0x01
HW_OVERHEATING = 0x04
HW_MOTOR_ENCODER = 0x08
HW_ELECTRICAL_SHOCK = 0x10
HW_OVERLOAD = 0x20
HARDWARE_ERROR_NAMES = {HW_INPUT_VOLTAGE: 'input voltage', HW_OVERHEATING: 'overheating',
                        HW_MOTOR_ENCODER: 'motor encoder', HW_ELECTRICAL_SHOCK: 'electrical shock',
                        HW_OVERLOAD: 'overload'}


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()
_CRC_TABLE_NP = np.array(_CRC_TABLE, dtype=np.uint16)


def _crc_word_table() -> list[int]:
    """_CRC_WORD[x]: the CRC after two bytes (big-endian word w) continuing from CRC c, where x = c ^ w.
    The register is 16 bits wide, so two bytes push all of c out and the result depends on c ^ w
    alone: the byte loop's two steps in one lookup."""
    x = np.arange(1 << 16)
    first = _CRC_TABLE_NP[x >> 8].astype(np.int64)
    return (((first & 0xFF) << 8) ^ _CRC_TABLE_NP[(x & 0xFF) ^ (first >> 8)]).tolist()


_CRC_WORD = _crc_word_table()
_WORDS: dict[int, struct.Struct] = {}       # n -> unpacker of n big-endian words (n < _CRC_NUMPY_FROM / 2)
# Below this many bytes the word loop beats numpy's per-call cost (measured: warm at about 150 bytes,
# and up to 600 in a process just woken, as the emulator is for each request, whose caches are cold).
_CRC_NUMPY_FROM = 256
# _CRC_SHIFTED[k, b]: the CRC (from 0) of byte b followed by k zero bytes. The CRC has no initial value
# and no final XOR, so it is linear over GF(2): the CRC of a message is the XOR of its bytes' shifted
# contributions, one table lookup per byte and one reduce, without a Python loop. Grown on demand.
_CRC_SHIFTED = _CRC_TABLE_NP[None, :].copy()


def _crc_shifted(rows: int) -> np.ndarray:
    """_CRC_SHIFTED with at least ``rows`` rows (row k+1 is row k pushed through one zero byte)."""
    global _CRC_SHIFTED
    table = _CRC_SHIFTED
    if len(table) < rows:
        grown = np.empty((max(rows, 2 * len(table)), 256), dtype=np.uint16)
        grown[:len(table)] = table
        for k in range(len(table), len(grown)):
            prev = grown[k - 1]
            grown[k] = (prev << 8) ^ _CRC_TABLE_NP[prev >> 8]
        _CRC_SHIFTED = table = grown        # one rebinding: other threads see the old or the new table
    return table


_REVERSED = np.arange(4095, -1, -1)        # position of a byte, counted from the message's end


def _crc16_loop(data: bytes, crc: int = 0) -> int:
    """crc16 two bytes per step (_CRC_WORD), the odd last byte on its own."""
    n = len(data) >> 1
    words = _WORDS.get(n)
    if words is None:
        words = _WORDS[n] = struct.Struct(f'>{n}H')
    table = _CRC_WORD
    for w in words.unpack_from(data):
        crc = table[crc ^ w]
    if len(data) & 1:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ data[-1]) & 0xFF]) & 0xFFFF
    return crc


def crc16_lanes(messages: np.ndarray) -> np.ndarray:
    """CRC-16 (from 0) of every row of a 2-D uint8 array, all rows at once.

    >>> hex(int(crc16_lanes(np.frombuffer(b'123456789', np.uint8)[None, :])[0]))
    '0xfee8'
    """
    n = messages.shape[-1]
    return np.bitwise_xor.reduce(_crc_shifted(n)[_REVERSED[-n:], messages], axis=-1)


def crc16(data: bytes, crc: int = 0) -> int:
    """CRC-16/BUYPASS (polynomial 0x8005, initial 0, unreflected) of ``data``, continuing from ``crc``.

    Continuing from ``crc`` over two bytes or more equals starting from 0 with the high and low byte of
    ``crc`` XORed into the first two bytes: long inputs are computed that way in one vectorised pass.

    >>> hex(crc16(b'123456789'))
    '0xfee8'
    >>> crc16(b'6789', crc16(b'12345')) == crc16(b'123456789')
    True
    """
    if len(data) < _CRC_NUMPY_FROM:
        return _crc16_loop(data, crc)
    lane = np.frombuffer(data, dtype=np.uint8).copy()
    lane[0] ^= crc >> 8
    lane[1] ^= crc & 0xFF
    return int(crc16_lanes(lane[None, :])[0])


_STUFF_MARK = b'\xff\xff\xfd'


def stuff(payload: bytes) -> bytes:
    """Insert FD after every FF FF FD in ``payload`` (instruction/status and parameters).

    The header that precedes the payload ends in FD 00, so only sequences inside the payload count.

    >>> stuff(bytes.fromhex('ff ff fd 01')).hex(' ')
    'ff ff fd fd 01'
    """
    if _STUFF_MARK not in payload:      # almost always: nothing to insert
        return bytes(payload)
    out = bytearray()
    for b in payload:
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-2] == 0xFF and out[-3] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(payload: bytes) -> bytes:
    """Remove the FD inserted after each FF FF FD (inverse of stuff)."""
    if _STUFF_MARK not in payload:      # almost always: nothing was inserted
        return bytes(payload)
    out = bytearray()
    i, n = 0, len(payload)
    while i < n:
        b = payload[i]
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-2] == 0xFF and out[-3] == 0xFF and i + 1 < n \
                and payload[i + 1] == 0xFD:
            i += 1          # skip the stuffed FD
        i += 1
    return bytes(out)


def _frame(servo_id: int, body: bytes, do_stuff: bool = True) -> bytes:
    body = stuff(body) if do_stuff else body
    length = len(body) + 2
    head = HEADER + bytes((servo_id, length & 0xFF, length >> 8))
    crc = crc16(body, crc16(head))
    return head + body + bytes((crc & 0xFF, crc >> 8))


def build_instruction(servo_id: int, instruction: int, params: bytes = b'') -> bytes:
    """A complete, stuffed instruction packet with its CRC.

    >>> build_instruction(1, PING).hex(' ')
    'ff ff fd 00 01 03 00 01 19 4e'
    """
    if not 0 <= servo_id <= 0xFE:
        raise ValueError(f'servo_id must be 0..254, got {servo_id}')
    return _frame(servo_id, bytes((instruction,)) + bytes(params))


class SyncWriteFrame:
    """The sync write packet of ``size`` bytes at ``address`` to the servos ``ids``, less their data:
    ``packet(data)`` fills in the data blocks and the CRC. A control cycle writes the same servos'
    goals every time, so everything but the data is laid out once; the CRC is linear, so it is the
    data-free packet's CRC XOR the data bytes' own contributions (one table lookup each, one reduce).

    >>> SyncWriteFrame(116, 4, [1, 2]).packet(bytes((0, 8, 0, 0, 255, 7, 0, 0))).hex(' ')
    'ff ff fd 00 fe 11 00 83 74 00 04 00 01 00 08 00 00 02 ff 07 00 00 8c 40'
    """

    def __init__(self, address: int, size: int, ids):
        ids = bytes(ids)
        self.n, self.size = len(ids), size
        params = len(ids) * (1 + size)
        length = 7 + params                 # instruction, address, size, params, CRC
        frame = np.zeros(7 + length, np.uint8)
        frame[:12] = np.frombuffer(HEADER + bytes((BROADCAST_ID, length & 0xFF, length >> 8, SYNC_WRITE))
                                   + le(address, 2) + le(size, 2), np.uint8)
        blocks = frame[12:12 + params].reshape(len(ids), 1 + size)
        blocks[:, 0] = np.frombuffer(ids, np.uint8)
        self._body, self._blocks = frame[:-2], blocks[:, 1:]
        self._crc_free = crc16(self._body.tobytes())
        # Each data byte's CRC table row (by its distance from the CRC), laid out like the data, into
        # the table flattened (a table is never changed, only replaced by a larger one).
        at = np.arange(12, 12 + params).reshape(len(ids), 1 + size)[:, 1:]
        self._rows = (len(frame) - 3 - at) * 256
        self._table = _crc_shifted(len(frame) - 2).reshape(-1)

    def packet(self, data: bytes) -> bytes:
        if len(data) != self.n * self.size:
            raise ValueError(f'{len(data)} bytes of data for {self.n} servos of {self.size}')
        values = np.ndarray((self.n, self.size), np.uint8, data)
        self._blocks[...] = values
        crc = self._crc_free ^ int(np.bitwise_xor.reduce(self._table[self._rows + values], axis=None))
        body = self._body.tobytes()
        if _STUFF_MARK in body[7:]:         # never for goal positions: stuffed as any instruction
            return build_instruction(BROADCAST_ID, SYNC_WRITE, body[8:])
        return body + bytes((crc & 0xFF, crc >> 8))


def build_status(servo_id: int, error: int, params: bytes = b'') -> bytes:
    """A complete, stuffed status packet.

    >>> build_status(1, 0, bytes((0x06, 0x04, 0x26))).hex(' ')
    'ff ff fd 00 01 07 00 55 00 06 04 26 65 5d'
    """
    return _frame(servo_id, bytes((STATUS, error)) + bytes(params))


# A fast reply of at least this many equal blocks computes its block CRCs in one vectorised pass.
_FAST_STATUS_NUMPY_FROM = 4
_FAST_STATUS_STEP: dict[int, list[int]] = {}     # block width -> the table step of _fast_status_uniform


def build_fast_status(blocks: list[tuple[int, int, bytes]]) -> bytes:
    """The single reply packet of a fast sync/bulk read: blocks of (error, id, data), not stuffed.

    Each block ends with the running CRC of every byte before it (header, earlier blocks and their
    CRCs), so the last block's CRC is the packet CRC the SDK checks. LEN = 1 + sum(len(data) + 4).

    >>> build_fast_status([(0, 1, b'ab'), (0, 2, b'cd')]).hex(' ')
    'ff ff fd 00 fe 0d 00 55 00 01 61 62 17 fa 00 02 63 64 cc 3c'
    """
    head = fast_reply_head(8 + sum(len(d) + 4 for _, _, d in blocks))
    if len(blocks) >= _FAST_STATUS_NUMPY_FROM:
        size = len(blocks[0][2])
        if all(len(d) == size for _, _, d in blocks):
            return _fast_status_uniform(head, blocks, size)
    out = bytearray(head)
    crc = crc16(out)
    for error, servo_id, data in blocks:
        chunk = bytes((error, servo_id)) + bytes(data)
        crc = crc16(chunk, crc)
        tail = bytes((crc & 0xFF, crc >> 8))
        out += chunk + tail
        crc = crc16(tail, crc)      # the next block's CRC runs over this one's CRC bytes too
    return bytes(out)


def _fast_status_uniform(head: bytes, blocks: list, size: int) -> bytes:
    """build_fast_status for blocks of equal data size: every block's CRC from 0 in one vectorised
    pass (crc16_lanes), then one table lookup per block to carry the running CRC (see fast_block_rows:
    continuing from CRC c over c's own two bytes and then a block equals the CRC from 0 of the block
    after two bytes m = low(c) ^ high(c); by linearity, that is step[m] ^ CRC from 0 of the block)."""
    width = size + 2                                    # error, id, data
    m = len(blocks)
    rows = np.empty((m, width + 2), np.uint8)
    rows[:, :width] = np.frombuffer(b''.join(bytes((e, i)) + bytes(d) for e, i, d in blocks),
                                    np.uint8).reshape(m, width)
    own = crc16_lanes(rows[:, :width]).tolist()
    step = _FAST_STATUS_STEP.get(width)
    if step is None:
        shifted = _crc_shifted(width + 2)
        step = _FAST_STATUS_STEP[width] = (shifted[width + 1] ^ shifted[width]).tolist()
    crcs = [crc16(rows[0, :width].tobytes(), crc16(head))]
    crc = crcs[0]
    for k in range(1, m):
        crc = step[(crc ^ (crc >> 8)) & 0xFF] ^ own[k]
        crcs.append(crc)
    c = np.array(crcs, np.uint16)
    rows[:, width] = c & 0xFF
    rows[:, width + 1] = c >> 8
    return head + rows.tobytes()


class Packet:
    """One received packet: id, instruction (0x55 for status), params (unstuffed), raw length."""

    __slots__ = ('servo_id', 'instruction', 'params', 'crc_ok', 'size')

    def __init__(self, servo_id: int, instruction: int, params: bytes, crc_ok: bool, size: int):
        self.servo_id, self.instruction, self.params = servo_id, instruction, params
        self.crc_ok, self.size = crc_ok, size

    def __repr__(self):
        return (f'Packet(id={self.servo_id}, inst=0x{self.instruction:02x}, params={self.params.hex()}, '
                f'crc_ok={self.crc_ok})')


class PacketParser:
    """Incremental parser: feed bytes, get complete packets (bad-CRC ones flagged, not dropped).

    Hunts for FF FF FD 00, skipping the stuffed FF FF FD FD, and discards bytes before a header.
    """

    MAX_LENGTH = 4096

    def __init__(self, expected_length: int | None = None):
        # The LEN every wanted packet has (a sync read's replies all have one): a header with another
        # is not taken, so a garbled LEN cannot hold back the good replies behind it.
        self.expected_length = expected_length
        self.buffer = bytearray()
        self.discarded = 0          # bytes dropped as not part of any packet (junk, cut packets)
        self._counted = 0           # bytes ahead already counted in a bad-CRC packet's size

    def _drop(self, n: int) -> None:
        counted = min(n, self._counted)
        self._counted -= counted
        self.discarded += n - counted

    def discard_partial(self) -> int:
        """Drop a partly received packet (its bytes stopped coming); returns how many bytes went."""
        n = len(self.buffer)
        self.buffer.clear()
        self._drop(n)
        return n

    def feed(self, data: bytes) -> list[Packet]:
        self.buffer += data
        out = []
        buf = self.buffer
        while True:
            start = buf.find(HEADER)
            if start < 0:
                # Keep a possible partial header at the end.
                keep = 3 if len(buf) >= 3 else len(buf)
                self._drop(len(buf) - keep)
                del buf[:len(buf) - keep]
                return out
            if start:
                self._drop(start)
                del buf[:start]
            if len(buf) < 7:
                return out
            length = buf[5] | (buf[6] << 8)
            if length < 3 or length > self.MAX_LENGTH or (self.expected_length or length) != length:
                self._drop(1)
                del buf[:1]      # not a real header
                continue
            total = 7 + length
            if len(buf) < total:
                return out
            raw = bytes(buf[:total])
            crc_ok = crc16(raw[:-2]) == (raw[-2] | (raw[-1] << 8))
            body = unstuff(raw[7:-2])
            out.append(Packet(raw[4], body[0] if body else -1, body[1:], crc_ok, total))
            if crc_ok:
                self._counted = max(0, self._counted - total)
                del buf[:total]
            else:
                # A corrupted length could swallow the next packet: resume hunting after this header.
                # The bytes after it were counted in this packet's size (its wire time): not junk again.
                self._counted = max(self._counted - 4, total - 4)
                del buf[:4]


def parse_status(raw: bytes) -> tuple[int, int, bytes]:
    """(id, error, params) of one complete status packet; ValueError on bad framing or CRC."""
    if len(raw) < 11 or raw[:4] != HEADER:
        raise ValueError(f'not a status packet: {raw.hex(" ")}')
    length = raw[5] | (raw[6] << 8)
    if len(raw) != 7 + length:
        raise ValueError(f'status length {length} does not match {len(raw)} bytes')
    if crc16(raw[:-2]) != (raw[-2] | (raw[-1] << 8)):
        raise ValueError(f'status CRC mismatch: {raw.hex(" ")}')
    body = unstuff(raw[7:-2])
    if body[0] != STATUS:
        raise ValueError(f'instruction 0x{body[0]:02x} is not a status')
    return raw[4], body[1], body[2:]


def parse_fast_blocks(raw: bytes, lengths: list[int]) -> list[tuple[int, int, bytes]]:
    """Blocks (error, id, data) of a fast sync/bulk read reply, as far as their running CRCs hold.

    ``raw`` may be truncated (a servo missing from the chain) or corrupted partway: every block whose
    running CRC checks is returned, in order, each checked on its own from the CRC field before it (a
    garbled block costs itself, see fast_block_rows); parsing stops where ``raw`` ends.
    ``lengths`` gives each expected block's data length in reply order.
    """
    if not _is_fast_reply(raw):
        return []
    if lengths and len(set(lengths)) == 1:
        return _uniform_blocks(raw, lengths[0], len(lengths))
    out = []
    crc = crc16(raw[:8])
    idx = 8
    for n in lengths:
        end = idx + 2 + n
        if end + 2 > len(raw):
            break
        field = raw[end] | (raw[end + 1] << 8)
        if crc16(raw[idx:end], crc) == field:
            out.append((raw[idx], raw[idx + 1], bytes(raw[idx + 2:end])))
        # The next block continues from this field as its servo sent it, good block or not.
        crc = crc16(raw[end:end + 2], field)
        idx = end + 2
    return out


def fast_block_rows(raw: bytes, size: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The blocks of a fast sync read reply whose blocks all carry ``size`` data bytes, checked in one
    vectorised pass: (which blocks are good, as a bool array; their rows).

    Each row is one block's bytes, a view into ``raw``: error, id, data, CRC low, CRC high (uint8).
    ``raw`` starts with the reply's header (checked by the caller). The running CRC after a good block
    equals that block's CRC field, so each block is checked on its own, continuing from the field
    before it (see crc16): the CRC from 0 of the previous block's two CRC bytes, each XORed with the
    high and low byte of their value (both give lo XOR hi), then this block's error, id and data, must
    equal this block's CRC field. The CRC is linear, so the two leading bytes' share is S[lo] XOR S[hi]
    (S: the CRC of a byte followed by the block, twice over): every block's check is then one table
    lookup per byte of the window from the two bytes before it, all blocks in a few whole-array
    operations. The first block continues from the header's first six bytes (its two leading
    bytes' share is put right afterwards).

    A block is good when its own check holds, whatever happened before it: a byte garbled in one
    block fails that block (and the next, when it hit the CRC field the next continues from), not the
    rest of the chain. Each good block has passed a 16-bit CRC over its own bytes, as strong a check
    as a servo's own status packet gets.

    >>> raw = build_fast_status([(0, 1, b'ab'), (0, 2, b'cd'), (0, 3, b'ef')])
    >>> bad = bytearray(raw); bad[8 + 2] ^= 1                     # a data byte of the first block
    >>> good, rows = fast_block_rows(bytes(bad), 2, 3)
    >>> good.tolist(), rows[good, 1].tolist()
    ([False, True, True], [2, 3])
    """
    width = size + 4
    m = max(0, min(count, (len(raw) - 8) // width))
    rows = np.ndarray((m, width), np.uint8, raw, 8)
    if not m:
        return np.zeros(0, bool), rows
    flat, offsets, s_row, first, second = _block_tables(width)
    # Window j: the two CRC bytes before block j and the block up to its own CRC field (overlapping
    # views of raw, no copy). flat: each position's table row laid end to end.
    windows = np.ndarray((m, width), np.uint8, raw, 6, (width, 1))
    crcs = np.bitwise_xor.reduce(flat[windows + offsets], axis=1)
    head = _HEAD_CRC.get(raw[:6])
    if head is None:
        head = _HEAD_CRC[bytes(raw[:6])] = crc16(raw[:6])
    crcs[0] ^= (s_row[raw[6]] ^ s_row[raw[7]] ^ first[raw[6] ^ (head >> 8)]
                ^ second[raw[7] ^ (head & 0xFF)])
    return crcs == np.ndarray((m,), _U16LE, raw, 6 + width, (width,)), rows


_U16LE = np.dtype('<u2')
_HEAD_CRC: dict[bytes, int] = {}           # CRC of a fast reply's first six bytes (few: one per length)
_BLOCK_TABLES: dict[int, tuple] = {}


def _block_tables(width: int) -> tuple:
    """fast_block_rows' tables for a window of ``width`` bytes (the two CRC bytes before a block, its
    error, id and data): the table row of each window position laid end to end (S at the first two,
    see fast_block_rows) with each position's offset into them; and as lists S and the plain table rows
    of the first two positions."""
    got = _BLOCK_TABLES.get(width)
    if got is None:
        shifted = _crc_shifted(width)
        rows = shifted[_REVERSED[-width:]].copy()       # position p: the row of width - 1 - p zeros
        s_row = rows[0] ^ rows[1]
        first, second = rows[0].tolist(), rows[1].tolist()
        rows[0] = rows[1] = s_row
        got = _BLOCK_TABLES[width] = (rows.ravel(), np.arange(width, dtype=np.intp) * 256, s_row.tolist(),
                                      first, second)
    return got


def fast_reply_blocks(raw: bytes, size: int, count: int, wanted=None) -> dict[int, tuple[int, bytes]]:
    """{id: (error, data)} of the blocks of a fast sync read reply of ``count`` servos with ``size`` data
    bytes each, as far as their running CRCs hold (parse_fast_blocks; a later block of an ID wins), of
    the IDs in ``wanted`` only when given.

    >>> fast_reply_blocks(build_fast_status([(0, 1, b'ab'), (0x80, 2, b'cd')]), 2, 2)
    {1: (0, b'ab'), 2: (128, b'cd')}
    """
    if not _is_fast_reply(raw):
        return {}
    errs, sids, data = _uniform_columns(raw, size, count)
    out = dict(zip(sids, zip(errs, data)))
    if wanted is not None and not wanted.issuperset(out):
        return {sid: reply for sid, reply in out.items() if sid in wanted}
    return out


def _is_fast_reply(raw: bytes) -> bool:
    """Whether raw starts like a fast sync/bulk read reply: header, broadcast ID, a LEN, Status."""
    return len(raw) >= 8 and raw[:4] == HEADER and raw[4] == BROADCAST_ID and raw[7] == STATUS


def _uniform_columns(raw: bytes, size: int, count: int) -> tuple[list, list, list]:
    """The error bytes, IDs and data (bytes) of the blocks of a fast reply (``_is_fast_reply``) of
    ``count`` blocks of ``size`` data bytes each whose running CRC holds (fast_block_rows), as three
    lists in reply order: taken from the reply by whole-array views (the data as one ``size``-byte
    void per block), not block by block, as a control cycle reads every servo's block each time."""
    good, rows = fast_block_rows(raw, size, count)
    m = len(good)
    if not m:
        return [], [], []
    data = np.ndarray((m,), f'V{size}', raw, 10, (size + 4,))
    errs, sids = rows[:, 0], rows[:, 1]
    if np.count_nonzero(good) != m:
        errs, sids, data = errs[good], sids[good], data[good]
    return errs.tolist(), sids.tolist(), data.tolist()


def _uniform_blocks(raw: bytes, size: int, count: int) -> list:
    """(error, id, data) of the blocks of a fast reply (``_is_fast_reply``) of ``count`` blocks of
    ``size`` data bytes each whose running CRC holds (fast_block_rows)."""
    return list(zip(*_uniform_columns(raw, size, count)))


def fast_reply_head(reply_bytes: int) -> bytes:
    """The first eight bytes of a whole fast sync/bulk read reply of ``reply_bytes`` bytes on the wire:
    header, broadcast ID, LEN, Status (build_fast_status).

    >>> fast_reply_head(20) == build_fast_status([(0, 1, b'ab'), (0, 2, b'cd')])[:8]
    True
    """
    length = reply_bytes - 7
    return HEADER + bytes((BROADCAST_ID, length & 0xFF, length >> 8, STATUS))


def sync_read_reply_bytes(n_servos: int, size: int, fast: bool) -> int:
    """Bytes on the wire of the replies to a (fast) sync read of ``size`` data bytes from n_servos servos:
    one fast status packet (10-byte frame less its own ID/error pair, then per servo error, ID, data and
    CRC), or one status packet each (11 bytes of frame around the data)."""
    return 8 + n_servos * (size + 4) if fast else n_servos * (11 + size)


def le(value: int, size: int) -> bytes:
    """Little-endian bytes of ``value`` (two's complement when negative) in ``size`` bytes."""
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, 'little')


def from_le(data: bytes, signed: bool = False) -> int:
    return int.from_bytes(data, 'little', signed=signed)


def decode_error(error: int) -> list[str]:
    """Names of what a status ERROR byte reports (empty when 0)."""
    names = []
    if error & ERR_ALERT:
        names.append('alert (hardware error latched)')
    code = error & 0x7F
    if code:
        names.append(ERROR_NAMES.get(code, f'unknown error {code}'))
    return names


def decode_hardware_error(status: int) -> list[str]:
    """Names of the bits set in Hardware Error Status (register 70)."""
    return [name for bit, name in HARDWARE_ERROR_NAMES.items() if status & bit]
