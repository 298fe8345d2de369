"""Protocol 2.0 conformance of the servo emulator, through ROBOTIS's dynamixel_sdk over a real pty."""
import math
import os
import random
import select
import threading
import time

import dynamixel_sdk as sdk
import pytest
from hypothesis import given, strategies as st

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.bus import ServoBus
from snake_control.dynamixel.emulator import BusEmulator
from snake_control.dynamixel.faults import FaultSpec
from snake_control.dynamixel.models import SERVO_MODELS, register
from snake_control.dynamixel.plant import MotorModel, Plant
from snake_control.dynamixel.servo import Servo
from snake_control.dynamixel.simbus import plant_factory
from snake_control.dynamixel.simproc import SimBusProcess

BAUD = 4_000_000
# The stock SDK waits 2 x LATENCY_TIMER + 2 ms for a reply. A shared CI machine can stall the emulator
# process longer than the default 34 ms; these tests are about bytes, not timing.
sdk.port_handler.LATENCY_TIMER = 100


# ------------------------------------------------------------------------------ pure framing

def test_crc_check_value_and_manual_vectors():
    assert P.crc16(b'123456789') == 0xFEE8
    ping = P.build_instruction(1, P.PING)
    assert ping == bytes.fromhex('ff ff fd 00 01 03 00 01 19 4e')
    status = P.build_status(1, 0, bytes((0x06, 0x04, 0x26)))
    assert status == bytes.fromhex('ff ff fd 00 01 07 00 55 00 06 04 26 65 5d')


@given(st.binary(max_size=64))
def test_stuffing_roundtrip_and_no_header_left(payload):
    stuffed = P.stuff(payload)
    assert P.unstuff(stuffed) == payload
    # After stuffing, every FF FF FD is followed by FD: a receiver never sees a false header.
    for i in range(len(stuffed) - 3):
        if stuffed[i:i + 3] == b'\xff\xff\xfd':
            assert stuffed[i + 3] == 0xFD


def test_stuffed_packet_counts_the_extra_byte_in_length():
    pkt = P.build_instruction(1, P.WRITE, bytes((116, 0, 0xFF, 0xFF, 0xFD, 0x00)))
    assert pkt[5] == 3 + 6 + 1     # LEN includes the inserted FD
    (parsed,) = P.PacketParser().feed(pkt)
    assert parsed.crc_ok and parsed.params == bytes((116, 0, 0xFF, 0xFF, 0xFD, 0x00))


def test_fast_reply_blocks_survive_truncation():
    raw = P.build_fast_status([(0, 1, b'\x01\x02'), (0, 2, b'\x03\x04'), (0, 3, b'\x05\x06')])
    assert len(raw) == 8 + 3 * (2 + 4)
    assert [b[1] for b in P.parse_fast_blocks(raw, [2, 2, 2])] == [1, 2, 3]
    assert [b[1] for b in P.parse_fast_blocks(raw[:-3], [2, 2, 2])] == [1, 2]
    damaged = bytearray(raw)
    damaged[8 + 6 + 3] ^= 0x55         # data of block 2: that block is lost, not the one after it
    assert [b[1] for b in P.parse_fast_blocks(bytes(damaged), [2, 2, 2])] == [1, 3]
    damaged[8 + 6 + 3] ^= 0x55
    damaged[8 + 6 + 4] ^= 0x01         # block 2's CRC field: block 3 continues from it, so both go
    assert [b[1] for b in P.parse_fast_blocks(bytes(damaged), [2, 2, 2])] == [1]
    # Blocks of different lengths (a fast bulk read) are judged the same way.
    raw = bytearray(P.build_fast_status([(0, 1, b'\x01'), (0, 2, b'\x03\x04\x05'), (0, 3, b'\x06\x07')]))
    raw[8 + 5 + 2] ^= 0x10             # data of block 2
    assert [b[1] for b in P.parse_fast_blocks(bytes(raw), [1, 3, 2])] == [1, 3]


def _crc_bytewise(data: bytes, crc: int = 0) -> int:
    """The CRC as the e-Manual writes it, one byte at a time: what the vectorised one must equal."""
    for b in data:
        crc = ((crc << 8) ^ P._CRC_TABLE[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


@given(st.binary(max_size=700), st.integers(0, 0xFFFF))
def test_crc_of_long_inputs_equals_the_bytewise_crc(data, start):
    # Long inputs take the vectorised path (one table lookup per byte, one XOR reduce).
    assert P.crc16(data, start) == _crc_bytewise(data, start)


def _parse_fast_bytewise(raw: bytes, lengths: list[int]) -> list:
    """parse_fast_blocks as the running CRC carried byte by byte (the reference): a block is good when
    the CRC carried from the CRC field its servo sent before it, over its own bytes, equals its field."""
    out = []
    if len(raw) < 8 or raw[:4] != P.HEADER or raw[4] != P.BROADCAST_ID or raw[7] != P.STATUS:
        return out
    crc, idx = _crc_bytewise(raw[:8]), 8
    for n in lengths:
        end = idx + 2 + n
        if end + 2 > len(raw):
            break
        field = raw[end] | (raw[end + 1] << 8)
        if _crc_bytewise(raw[idx:end], crc) == field:
            out.append((raw[idx], raw[idx + 1], bytes(raw[idx + 2:end])))
        crc = _crc_bytewise(raw[end:end + 2], field)
        idx = end + 2
    return out


@given(st.integers(1, 40), st.integers(0, 14), st.data())
def test_vectorised_fast_reply_check_keeps_exactly_the_blocks_whose_running_crc_holds(n, size, data):
    blocks = [(data.draw(st.sampled_from([0, 0x80, 3])), data.draw(st.integers(1, 252)),
               data.draw(st.binary(min_size=size, max_size=size))) for _ in range(n)]
    raw = bytearray(P.build_fast_status(blocks))
    for _ in range(data.draw(st.integers(0, 3))):           # flipped bits anywhere, header included
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    raw = bytes(raw[:data.draw(st.integers(0, len(raw)))])  # and a reply cut anywhere
    lengths = [size] * data.draw(st.integers(1, n + 1))
    assert P.parse_fast_blocks(raw, lengths) == _parse_fast_bytewise(raw, lengths)
    # The same blocks by ID, as ServoBus takes a fast sync read's reply (a later block of an ID wins).
    by_id = {sid: (err, d) for err, sid, d in _parse_fast_bytewise(raw, lengths)}
    assert P.fast_reply_blocks(raw, size, len(lengths)) == by_id
    wanted = {sid for _, sid, _ in blocks[::2]}
    assert P.fast_reply_blocks(raw, size, len(lengths), wanted) == {
        sid: b for sid, b in by_id.items() if sid in wanted}


def _build_fast_bytewise(blocks) -> bytes:
    """build_fast_status as the running CRC carried byte by byte (the reference)."""
    length = 1 + sum(len(d) + 4 for _, _, d in blocks)
    out = bytearray(P.HEADER + bytes((P.BROADCAST_ID, length & 0xFF, length >> 8, P.STATUS)))
    for error, servo_id, data in blocks:
        out += bytes((error, servo_id)) + data
        crc = _crc_bytewise(out)
        out += bytes((crc & 0xFF, crc >> 8))
    return bytes(out)


@given(st.integers(1, 40), st.integers(0, 30), st.booleans(), st.data())
def test_fast_reply_built_in_one_vectorised_pass_equals_the_bytewise_one(n, size, uneven, data):
    # Equal blocks (a fast sync read) take the vectorised path from _FAST_STATUS_NUMPY_FROM blocks on.
    blocks = [(data.draw(st.sampled_from([0, 0x80, 3, 0xFF])), data.draw(st.integers(0, 252)),
               data.draw(st.binary(min_size=size, max_size=size + (3 if uneven else 0)))) for _ in range(n)]
    assert P.build_fast_status(blocks) == _build_fast_bytewise(blocks)


@given(st.lists(st.integers(0, P.MAX_ID), max_size=40, unique=True), st.sampled_from([1, 2, 4]), st.data())
def test_sync_write_frame_reused_equals_a_packet_built_afresh(ids, size, data):
    # ServoBus keeps one SyncWriteFrame per set of servos and fills in each cycle's data: every packet
    # must equal the instruction framed afresh (CRC, and stuffing when the data makes FF FF FD).
    frame = P.SyncWriteFrame(116, size, ids)
    for _ in range(3):
        blob = data.draw(st.binary(min_size=size * len(ids), max_size=size * len(ids))
                         | st.just((b'\xff\xff\xfd\x00' * len(ids))[:size * len(ids)]))
        params = b''.join(bytes((sid,)) + blob[k * size:(k + 1) * size] for k, sid in enumerate(ids))
        assert frame.packet(blob) == P.build_instruction(P.BROADCAST_ID, P.SYNC_WRITE, bytes((116, 0, size, 0)) + params)


def _read_bytewise(servo: Servo, address: int, length: int) -> bytes:
    """Servo.read's data resolved one byte at a time through the Indirect Address entries (reference)."""
    return bytes(servo.table[a] for a in servo.resolve(address, length))


@given(st.data())
def test_cached_indirect_read_plans_follow_every_change_of_the_indirect_addresses(data):
    servo = Servo(1, SERVO_MODELS['XM430-W350'], 3, 46)
    for _ in range(data.draw(st.integers(1, 12))):
        how = data.draw(st.sampled_from(['write', 'table', 'set', 'reboot', 'state']))
        k = data.draw(st.integers(0, 55))
        slot = 168 + 2 * k if k < 28 else 578 + 2 * (k - 28)
        target = data.draw(st.integers(64, 661))
        if how == 'write':              # through the instruction (torque is off: accepted)
            assert servo.write(slot, P.le(target, 2), 0.0) == 0
        elif how == 'table':            # straight into the table (as tests and restore do)
            servo.table[slot:slot + 2] = P.le(data.draw(st.integers(0, 0xFFFF)), 2)
        elif how == 'set':              # the control channel's set
            servo.set(f'indirect_address_{k + 1}', target)
        elif how == 'reboot':
            servo.reboot(0.0)
        else:                           # the mechanics, with values that need two's complement
            servo.position_rad = data.draw(st.floats(-400.0, 400.0))
            servo.velocity_rad_s = data.draw(st.floats(-50.0, 50.0))
            servo.current_a = data.draw(st.floats(-5.0, 5.0))
        for address, length in ((224, 12), (224, 15), (634, 8), (220, 10), (630, 10), (126, 10),
                                (data.draw(st.integers(0, 660)), data.draw(st.integers(1, 20)))):
            err, got = servo.read(address, length, 1.0)
            if address + length <= len(servo.table):
                assert (err, got) == (0, _read_bytewise(servo, address, length)), (address, length)


def test_present_registers_keep_their_encoding():
    # Present Current/Velocity/Position and the rest as P.le wrote them (two's complement, little-endian).
    servo = Servo(1, SERVO_MODELS['XM430-W350'], 3, 46)
    servo.position_rad, servo.velocity_rad_s, servo.current_a = -7.5, -3.25, -1.5
    servo.voltage_v, servo.temperature_c = 11.6, 41.4
    servo.set('homing_offset', -1000)
    servo.refresh_present(12.3456)
    assert servo.get('present_position') == round(-7.5 / (2 * math.pi / 4096)) + 2048 - 1000
    assert servo.get('present_velocity') == round(-3.25 / (0.229 * 2 * math.pi / 60))
    assert servo.get('present_current') == round(-1.5 / (servo.model.current_unit_ma / 1000))
    assert servo.get('present_input_voltage') == 116 and servo.get('present_temperature') == 41
    assert servo.get('realtime_tick') == 12345 and servo.get('moving') == 1


def test_sdk_handler_sends_the_same_bytes_as_the_stock_one():
    from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

    from snake_control.dynamixel.bus import SnakePacketHandler
    stock, ours = Protocol2PacketHandler(), SnakePacketHandler()
    for params in (bytes(range(170)), bytes((116, 0, 4, 0, 1, 0xFF, 0xFF, 0xFD, 0x00)), b''):
        n = len(params) + 3
        pkt = [0xFF, 0xFF, 0xFD, 0, P.BROADCAST_ID, n & 0xFF, n >> 8, P.SYNC_WRITE, *params, 0, 0]
        assert ours.addStuffing(list(pkt)) == stock.addStuffing(list(pkt))
        assert ours.updateCRC(0, pkt, len(pkt) - 2) == stock.updateCRC(0, pkt, len(pkt) - 2)


def test_fault_spec_parse_and_errors():
    f = FaultSpec.parse('corrupt=0.01,drop=0.5,silent=3@2+1.5,silent=4,trip=5:overload@1,unplug=2+1,seed=7,'
                        'late=0.2+12')
    assert f.corrupt_rate == 0.01 and f.drop_rate == 0.5 and f.seed == 7
    assert f.late_rate == 0.2 and f.late_ms == 12.0
    assert f.silent == {3: (2.0, 3.5), 4: (0.0, math.inf)}
    assert f.trips == [(1.0, 5, 'overload')] and f.unplugs == [(2.0, 1.0)]
    for bad in ('corrupt=2', 'bogus=1', 'trip=3:melt@1', 'silent', 'late=0.1+-3', 'late=0.1+nan'):
        with pytest.raises(ValueError, match='--faults item'):
            FaultSpec.parse(bad)


# ------------------------------------------------------------------------------ motor model

def test_motor_model_follows_goal_within_profile_limits():
    m = MotorModel()
    model = SERVO_MODELS['XM430-W350']
    m.configure(1, model, 0.0)
    m.set_profile(1, 2.0, 20.0)
    dt, q_prev, v_prev = 0.002, 0.0, 0.0
    for _ in range(1000):
        q, v, _ = m.step(dt, {1: 1.0}, {1: True})[1]
        assert abs(v) <= 2.0 + 1e-9
        arrival = q == 1.0 and q_prev != 1.0
        # Acceleration within the profile; the step that lands on the goal stops from at most 2 a dt.
        assert abs(v - v_prev) <= (2 if arrival else 1) * 20.0 * dt + 1e-9
        q_prev, v_prev = q, v
    assert q_prev == pytest.approx(1.0, abs=1e-6) and v_prev == 0.0
    # Torque off: the goal no longer pulls.
    q_off, _, cur = m.step(0.5, {1: -1.0}, {1: False})[1]
    assert q_off == pytest.approx(1.0, abs=1e-6) and cur == 0.0


def _motor_step_reference(m, state, dt_s, goals, torque):
    """MotorModel.step as first written, every lookup inside the loop (the reference): state {id: [q,
    v, vmax, amax, torque constant]}, updated in place; returns {id: (q, v, current)}."""
    n = max(1, math.ceil(dt_s / m.MAX_SUBSTEP_S)) if dt_s > 0 else 0
    h = dt_s / n if n else 0.0
    out = {}
    for sid, (q, v, vmax, amax, kt) in state.items():
        acc, on, goal = 0.0, torque.get(sid, False), goals.get(sid, q)
        for _ in range(n):
            if on:
                e = goal - q
                ah = amax * h
                v_stop = ah * (math.sqrt(0.25 + 2.0 * abs(e) / (ah * h)) - 0.5)
                dv = max(-ah, min(ah, math.copysign(min(vmax, v_stop), e) - v))
                acc = dv / h
                v += dv
                q_next = q + v * h
                if (goal - q_next) * e <= 0.0:
                    q_next, v = goal, 0.0
                q = q_next
            else:
                decay = math.exp(-h / 0.05)
                acc = v * (decay - 1.0) / h
                v *= decay
                q += v * h
        torque_nm = m.LOAD_INERTIA_KG_M2 * acc + m.VISCOUS_NM_S_PER_RAD * v
        cur = (torque_nm / kt + math.copysign(m.HOLD_CURRENT_A, torque_nm if torque_nm else 1.0)) if on else 0.0
        state[sid][:2] = q, v
        out[sid] = (q, v, cur)
    return out


def test_motor_model_step_equals_the_reference_loop():
    """The step gives bit for bit what the reference loop gave, on random servos, goals, torque,
    profiles (unlimited ones too) and step lengths (none, one and several substeps)."""
    rng = random.Random(7)
    model = SERVO_MODELS['XM430-W350']
    for _ in range(40):
        m = MotorModel()
        ids = rng.sample(range(253), rng.randint(1, 40))
        state = {}
        for sid in ids:
            q = rng.uniform(-3, 3)
            m.configure(sid, model, q)
            state[sid] = [q, 0.0, model.no_load_speed_rad_s, m.UNLIMITED_ACCEL_RAD_S2, model.torque_constant_nm_per_a]
        for _ in range(30):
            for sid in rng.sample(ids, rng.randint(0, len(ids))):
                vel, acc = rng.choice((math.inf, rng.uniform(0.1, 10))), rng.choice((math.inf, rng.uniform(1, 500)))
                m.set_profile(sid, vel, acc)
                state[sid][2:4] = min(vel, model.no_load_speed_rad_s), min(acc, m.UNLIMITED_ACCEL_RAD_S2)
            goals = {sid: rng.choice((rng.uniform(-3, 3), state[sid][0])) for sid in ids if rng.random() < 0.9}
            torque = {sid: rng.random() < 0.8 for sid in ids if rng.random() < 0.95}
            dt = rng.choice((0.0, 0.002, rng.uniform(0, 0.02)))
            assert m.step(dt, goals, torque) == _motor_step_reference(m, state, dt, goals, torque)


def test_temperature_rises_with_current_and_trips_overheating():
    s = Servo(1, SERVO_MODELS['XM430-W350'], 3, 46)
    s.set('torque_enable', 1)
    s.current_a = 0.0
    s.tick(0.0, 10.0)
    assert s.temperature_c == pytest.approx(30.0)
    s.current_a = 2.0
    t = 0.0
    for _ in range(100):
        t += 1.0
        s.tick(t, 1.0)
    assert s.temperature_c > 60.0
    s.set('temperature_limit', 50)
    s.tick(t + 1, 1.0)
    assert s.get('hardware_error_status') & P.HW_OVERHEATING
    assert not s.torque_on        # Shutdown 0x34 includes overheating


def test_plant_is_named_by_the_caller():
    assert plant_factory('motor') is None
    assert plant_factory('snake_control.dynamixel.plant:MotorModel') is MotorModel
    for bad in ('mujoco', 'no_such_module:f', 'math:no_such_name'):
        with pytest.raises(ValueError, match='--physics'):
            plant_factory(bad)


# ------------------------------------------------------------------------------ over the pty

@pytest.fixture(scope='module')
def sim():
    with SimBusProcess(['--servos', '4', '--baud', str(BAUD), '--model', 'XM430-W350']) as s:
        yield s


@pytest.fixture
def sdk_port(sim):
    port = sdk.PortHandler(sim.path)
    assert port.openPort() and port.setBaudRate(BAUD)
    yield port, sdk.PacketHandler(2.0)
    port.closePort()


def _raw_exchange(path, packet: bytes, wait_s=0.1) -> bytes:
    """Write raw bytes to the device (at BAUD), collect what comes back."""
    bus = ServoBus(path, BAUD, margin_ms=30).open()
    try:
        fd = bus.port.ser.fd
        bus.port.clearPort()
        os.write(fd, packet)
        out = b''
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], deadline - time.monotonic())
            if r:
                out += os.read(fd, 4096)
        return out
    finally:
        bus.close()


def test_manual_ping_vector_on_the_wire():
    args = ['--servos', '1', '--baud', str(BAUD), '--model', 'XM430-W210', '--firmware', '38']
    with SimBusProcess(args) as s:
        reply = _raw_exchange(s.path, bytes.fromhex('ff ff fd 00 01 03 00 01 19 4e'))
    assert reply == bytes.fromhex('ff ff fd 00 01 07 00 55 00 06 04 26 65 5d')


def test_broadcast_ping_replies_in_id_order(sim):
    reply = _raw_exchange(sim.path, P.build_instruction(P.BROADCAST_ID, P.PING))
    packets = P.PacketParser().feed(reply)
    assert [p.servo_id for p in packets] == [1, 2, 3, 4]
    assert all(p.crc_ok and p.params[1:3] == P.le(1020, 2) for p in packets)


def test_sdk_ping_read_write(sdk_port):
    port, ph = sdk_port
    model, res, err = ph.ping(port, 2)
    assert (model, res, err) == (1020, sdk.COMM_SUCCESS, 0)
    assert ph.ping(port, 9)[1] == sdk.COMM_RX_TIMEOUT
    assert ph.write1ByteTxRx(port, 2, 65, 1) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 2, 65) == (1, sdk.COMM_SUCCESS, 0)
    assert ph.write1ByteTxRx(port, 2, 65, 0) == (sdk.COMM_SUCCESS, 0)


def test_stuffing_both_ways(sim, sdk_port):
    port, ph = sdk_port
    value = 0x00FDFFFF                         # little-endian bytes FF FF FD 00
    # Indirect Data 1..4 (bytes 0..255 each, mapped onto themselves by default) hold any byte pattern.
    # A stuffed instruction on the wire is unstuffed by the servo ...
    write = P.build_instruction(3, P.WRITE, bytes((224, 0)) + P.le(value, 4))
    assert b'\xff\xff\xfd\xfd' in write[7:]
    (status,) = P.PacketParser().feed(_raw_exchange(sim.path, write))
    assert status.params == b'\x00'
    # ... its reply is stuffed on the wire, and the SDK unstuffs it.
    raw = _raw_exchange(sim.path, P.build_instruction(3, P.READ, bytes((224, 0, 4, 0))))
    assert b'\xff\xff\xfd\xfd' in raw[7:]
    assert ph.read4ByteTxRx(port, 3, 224) == (value, sdk.COMM_SUCCESS, 0)
    # ServoBus stuffs what it sends itself (the SDK's tx path loses stuffing that lengthens a packet).
    bus = ServoBus(sim.path, BAUD, margin_ms=30).open()
    bus.write(3, 224, P.le(0, 4))
    bus.write(3, 224, P.le(value, 4))
    assert bus.read(3, 224, 4)[0] == P.le(value, 4)
    bus.write(3, 224, P.le(0, 4))
    bus.close()


def test_servo_bus_sends_stuffed_packets():
    import tty
    from snake_control.dynamixel.bus import CommError
    master, slave = os.openpty()
    tty.setraw(slave)
    bus = ServoBus(os.ttyname(slave), BAUD, margin_ms=1).open()
    try:
        with pytest.raises(CommError):
            bus.write(3, 20, P.le(0x00FDFFFF, 4))      # nobody answers on this pty
        sent = os.read(master, 100)
    finally:
        bus.close()
        os.close(master)
        os.close(slave)
    assert sent == P.build_instruction(3, P.WRITE, bytes((20, 0)) + P.le(0x00FDFFFF, 4))
    assert b'\xff\xff\xfd\xfd' in sent[7:]


@pytest.fixture(scope='module')
def raw_pty():
    """A pty with nobody on the other end: what a port writes is read back from the master side."""
    import tty
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    yield master, os.ttyname(slave)
    os.close(master)
    os.close(slave)


def _sent(master) -> bytes:
    out = b''
    while select.select([master], [], [], 0.05)[0]:
        out += os.read(master, 4096)
    return out


@given(ids=st.lists(st.integers(0, P.MAX_ID), min_size=1, max_size=40, unique=True),
       ticks=st.lists(st.integers(0, 4095), min_size=40, max_size=40), size=st.sampled_from([1, 2, 4]),
       fast=st.booleans())
def test_servo_bus_sync_packets_are_the_stock_sdks_bytes(raw_pty, ids, ticks, size, fast):
    # ServoBus frames its sync write and sync read packets itself (one per control cycle each): the
    # bytes on the wire are the ones the stock SDK's syncWriteTxOnly and syncReadTx send.
    master, path = raw_pty
    data = {sid: P.le(t, 4)[:size] for sid, t in zip(ids, ticks)}
    param = [b for sid, d in data.items() for b in (sid, *d)]
    stock_port = sdk.PortHandler(path)
    assert stock_port.openPort()
    stock = sdk.PacketHandler(2.0)
    try:
        assert stock.syncWriteTxOnly(stock_port, 116, size, param, len(param)) == sdk.COMM_SUCCESS
        stock_write = _sent(master)
        stock_port.is_using = False
        assert stock.syncReadTx(stock_port, 132, 14, list(ids), len(ids), fast) == sdk.COMM_SUCCESS
        stock_read = _sent(master)
    finally:
        stock_port.closePort()
    bus = ServoBus(path, BAUD, margin_ms=0.1).open()
    try:
        bus.sync_write(116, size, data)
        ours_write = _sent(master)
        assert bus.sync_read(132, 14, list(ids), fast, drain=False) == {}     # nobody answers
        ours_read = _sent(master)
    finally:
        bus.close()
    assert ours_write == stock_write
    assert ours_read == stock_read


def test_a_fast_reply_whose_chain_stopped_is_taken_without_waiting_out_the_deadline(raw_pty):
    # Servo 4 does not answer, so the chain of blocks stops after servo 3 and the reply's LEN says so. The
    # reply is whole: the read returns the three servos at once instead of waiting its 20 s margin for
    # blocks that cannot come (a cycle then has time to read servos 4 and 5 again).
    master, path = raw_pty
    _sent(master)
    blocks = [(0, sid, bytes([sid] * 14)) for sid in (1, 2, 3)]

    def answer():
        select.select([master], [], [], 5.0)
        _sent(master)                               # the request
        os.write(master, P.build_fast_status(blocks))

    servos = threading.Thread(target=answer)
    servos.start()
    bus = ServoBus(path, BAUD, margin_ms=20000.0).open()
    try:
        start = time.monotonic()
        got = bus.sync_read(132, 14, [1, 2, 3, 4, 5], True, drain=False)
        waited_s = time.monotonic() - start
    finally:
        bus.close()
        servos.join()
    assert got == {sid: (0, bytes([sid] * 14)) for sid in (1, 2, 3)}
    assert waited_s < 10.0, f'waited {waited_s:.1f} s of the 20 s deadline for servos that cannot answer'


@pytest.mark.parametrize('garbled, lost', [(8 + 18 + 5, {2}),       # a data byte of servo 2's block
                                            (8 + 2 * 18 - 1, {2, 3}),  # its CRC field: servo 3 continues from it
                                            (1, set()),                # the header: the blocks are in place
                                            (5, {1})])                 # LEN: the first block's CRC covers it
def test_a_garbled_byte_in_a_fast_reply_costs_only_the_blocks_it_touches(raw_pty, garbled, lost):
    # Each block is checked from the CRC field its servo sent before it, so the servos after a garbled
    # block are still read this cycle (before, one bad byte cost every block after it).
    master, path = raw_pty
    _sent(master)
    ids = [1, 2, 3, 4, 5]
    blocks = [(0, sid, bytes([sid] * 14)) for sid in ids]
    reply = bytearray(P.build_fast_status(blocks))
    reply[garbled] ^= 0x24

    def answer():
        select.select([master], [], [], 5.0)
        _sent(master)                               # the request
        os.write(master, bytes(reply))

    servos = threading.Thread(target=answer)
    servos.start()
    bus = ServoBus(path, BAUD, margin_ms=200.0).open()
    try:
        got = bus.sync_read(132, 14, ids, True, drain=False)
    finally:
        bus.close()
        servos.join()
    assert got == {sid: (0, bytes([sid] * 14)) for sid in ids if sid not in lost}
    assert bus.garbled_in_time == bool(lost)        # judged as line noise at once, not as late replies


def test_servo_bus_sync_write_is_stuffed(raw_pty):
    # Where the stock SDK loses the stuffing that lengthens a packet, ServoBus sends it stuffed.
    master, path = raw_pty
    bus = ServoBus(path, BAUD, margin_ms=0.1).open()
    try:
        bus.sync_write(224, 4, {1: P.le(0x00FDFFFF, 4), 2: P.le(7, 4)})
        sent = _sent(master)
    finally:
        bus.close()
    assert sent == P.build_instruction(P.BROADCAST_ID, P.SYNC_WRITE, bytes((224, 0, 4, 0, 1)) + P.le(0x00FDFFFF, 4)
                                       + bytes((2,)) + P.le(7, 4))
    assert b'\xff\xff\xfd\xfd' in sent[7:]
    (pkt,) = P.PacketParser().feed(sent)
    assert pkt.crc_ok and pkt.params[5:9] == P.le(0x00FDFFFF, 4)


def _sent_bytes(master, n: int) -> bytes:
    """The next n bytes a port wrote (waiting up to 2 s for them)."""
    out = b''
    while len(out) < n and select.select([master], [], [], 2.0)[0]:
        out += os.read(master, n - len(out))
    return out


def test_servo_bus_packet_caches_stay_bounded_and_frame_every_set_of_servos_right(raw_pty):
    # Each set of servos' sync write frame and sync read packet is built once and kept, but a caller that
    # keeps changing the set (here one more each time than the caches hold) neither grows them without
    # bound nor gets another set's packet after they start over.
    master, path = raw_pty
    _sent(master)
    bus = ServoBus(path, BAUD, margin_ms=0.1).open()
    try:
        id_sets = [bytes((1 + k % 200, 201 + k // 200)) for k in range(260)]
        for ids in id_sets[:70] + id_sets[:2]:
            bus.sync_write(116, 2, {sid: bytes((sid, 7)) for sid in ids})
            want = P.build_instruction(P.BROADCAST_ID, P.SYNC_WRITE,
                                       bytes((116, 0, 2, 0)) + b''.join(bytes((sid, sid, 7)) for sid in ids))
            assert _sent_bytes(master, len(want)) == want
            assert len(bus._frames) <= 64
        for ids in id_sets + id_sets[:2]:
            assert bus.sync_read(132, 4, list(ids), True, drain=False) == {}
            want = P.build_instruction(P.BROADCAST_ID, P.FAST_SYNC_READ, bytes((132, 0, 4, 0)) + ids)
            assert _sent_bytes(master, len(want)) == want
            assert len(bus._requests) <= 256
        # The set just sent is kept: sending it again finds the same frame.
        frame = bus._frames[116, 2, id_sets[1]]
        bus.sync_write(116, 2, {sid: bytes((sid, 7)) for sid in id_sets[1]})
        assert bus._frames[116, 2, id_sets[1]] is frame
    finally:
        bus.close()
    assert _sent(master) == frame.packet(bytes((2, 7, 201, 7)))


def test_error_replies(sim, sdk_port):
    port, ph = sdk_port
    assert ph.write1ByteTxRx(port, 1, 64, 1) == (sdk.COMM_SUCCESS, 0)
    # EEPROM while torque is on, read-only register, goal beyond the position limit.
    assert ph.write1ByteTxRx(port, 1, 9, 0)[1] == P.ERR_ACCESS
    assert ph.write2ByteTxRx(port, 1, 0, 5)[1] == P.ERR_ACCESS
    assert ph.write4ByteTxRx(port, 1, 52, 1000)[1] == P.ERR_ACCESS           # min limit is EEPROM
    assert ph.write1ByteTxRx(port, 1, 64, 0) == (sdk.COMM_SUCCESS, 0)
    assert ph.write4ByteTxRx(port, 1, 52, 1000) == (sdk.COMM_SUCCESS, 0)
    assert ph.write4ByteTxRx(port, 1, 116, 500)[1] == P.ERR_DATA_LIMIT
    assert ph.write4ByteTxRx(port, 1, 52, 0) == (sdk.COMM_SUCCESS, 0)
    # Reading past the table, an unknown instruction, a bad CRC.
    assert ph.readTxRx(port, 1, 660, 10)[2] == P.ERR_ACCESS
    (status,) = P.PacketParser().feed(_raw_exchange(sim.path, P.build_instruction(1, 0x33)))
    assert status.params[0] == P.ERR_INSTRUCTION
    bad = bytearray(P.build_instruction(1, P.PING))
    bad[-1] ^= 0xFF
    (status,) = P.PacketParser().feed(_raw_exchange(sim.path, bytes(bad)))
    assert status.params[0] == P.ERR_CRC
    ids = [int(k) for k in sim.state()['servos']]
    assert 1 in ids


def eventually(predicate, timeout_s=2.0):
    """Poll predicate until it holds or timeout_s passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_status_return_level_and_reg_write_action(sdk_port):
    port, ph = sdk_port
    assert ph.write1ByteTxRx(port, 4, 68, 0) == (sdk.COMM_SUCCESS, 0)        # ping only
    assert ph.read1ByteTxRx(port, 4, 68)[1] == sdk.COMM_RX_TIMEOUT
    assert ph.ping(port, 4)[1] == sdk.COMM_SUCCESS
    ph.write1ByteTxOnly(port, 4, 68, 2)
    assert eventually(lambda: ph.read1ByteTxRx(port, 4, 68) == (2, sdk.COMM_SUCCESS, 0))
    # reg write takes effect only on action.
    assert ph.regWriteTxRx(port, 4, 65, 1, [1]) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 4, 69)[0] == 1
    assert ph.read1ByteTxRx(port, 4, 65)[0] == 0
    assert ph.action(port, sdk.BROADCAST_ID) == sdk.COMM_SUCCESS
    assert eventually(lambda: ph.read1ByteTxRx(port, 4, 65)[0] == 1 and ph.read1ByteTxRx(port, 4, 69)[0] == 0)


def test_group_instructions(sdk_port):
    port, ph = sdk_port
    ids = [1, 2, 3, 4]
    sw = sdk.GroupSyncWrite(port, ph, 65, 1)
    for i in ids:
        sw.addParam(i, [i % 2])
    assert sw.txPacket() == sdk.COMM_SUCCESS
    for fast in (False, True):
        sr = sdk.GroupSyncRead(port, ph, 65, 1)
        for i in ids:
            sr.addParam(i)
        assert (sr.fastSyncRead() if fast else sr.txRxPacket()) == sdk.COMM_SUCCESS
        assert [sr.getData(i, 65, 1) for i in ids] == [1, 0, 1, 0]
    bw = sdk.GroupBulkWrite(port, ph)
    bw.addParam(1, 65, 1, [0])
    bw.addParam(2, 20, 4, list(P.le(77, 4)))
    assert bw.txPacket() == sdk.COMM_SUCCESS
    for fast in (False, True):
        br = sdk.GroupBulkRead(port, ph)
        br.addParam(1, 65, 1)
        br.addParam(2, 20, 4)
        br.addParam(3, 0, 2)
        assert (br.fastBulkRead() if fast else br.txRxPacket()) == sdk.COMM_SUCCESS
        assert br.getData(1, 65, 1) == 0 and br.getData(2, 20, 4) == 77 and br.getData(3, 0, 2) == 1020
    bw = sdk.GroupBulkWrite(port, ph)
    bw.addParam(2, 20, 4, [0, 0, 0, 0])
    assert bw.txPacket() == sdk.COMM_SUCCESS


def test_indirect_addresses(sdk_port):
    port, ph = sdk_port
    ph.write1ByteTxRx(port, 2, 64, 0)
    for k, src in enumerate((132, 133, 134, 135)):
        assert ph.write2ByteTxRx(port, 2, 168 + 2 * k, src) == (sdk.COMM_SUCCESS, 0)
    direct = ph.read4ByteTxRx(port, 2, 132)[0]
    assert ph.read4ByteTxRx(port, 2, 224)[0] == direct
    # Writing through indirect data reaches the target (LED via indirect address 5).
    assert ph.write2ByteTxRx(port, 2, 176, 65) == (sdk.COMM_SUCCESS, 0)
    assert ph.write1ByteTxRx(port, 2, 228, 1) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 2, 65)[0] == 1
    ph.write1ByteTxRx(port, 2, 65, 0)


def test_reboot_clears_alert_and_factory_reset_and_clear():
    with SimBusProcess(['--servos', '2', '--baud', str(BAUD)]) as s:
        port = sdk.PortHandler(s.path)
        port.openPort(), port.setBaudRate(BAUD)
        ph = sdk.PacketHandler(2.0)
        assert ph.write1ByteTxRx(port, 1, 64, 1) == (sdk.COMM_SUCCESS, 0)
        s.command('trip 1 overload')
        value, res, err = ph.read1ByteTxRx(port, 1, 70)
        assert (value, res) == (P.HW_OVERLOAD, sdk.COMM_SUCCESS) and err & P.ERR_ALERT
        assert ph.read1ByteTxRx(port, 1, 64)[0] == 0            # shutdown cut torque
        assert ph.write1ByteTxRx(port, 1, 64, 1)[1] == P.ERR_RESULT_FAIL | P.ERR_ALERT
        assert ph.reboot(port, 1) == (sdk.COMM_SUCCESS, P.ERR_ALERT)
        assert eventually(lambda: ph.read1ByteTxRx(port, 1, 70) == (0, sdk.COMM_SUCCESS, 0))
        # Factory reset keeping ID and baud: return delay back to 250.
        ph.write1ByteTxRx(port, 2, 9, 0)
        assert ph.factoryReset(port, 2, 0x02) == (sdk.COMM_SUCCESS, 0)
        assert ph.read1ByteTxRx(port, 2, 9)[0] == 250 and ph.ping(port, 2)[1] == sdk.COMM_SUCCESS
        assert ph.clearMultiTurn(port, 2) == (sdk.COMM_SUCCESS, 0)
        port.closePort()


def test_bus_watchdog_and_baud_register():
    with SimBusProcess(['--servos', '2', '--baud', '1000000']) as s:
        bus = ServoBus(s.path, 1_000_000, margin_ms=30).open()
        bus.write_register(1, 'torque_enable', 1)
        bus.write_register(1, 'bus_watchdog', 1)             # 20 ms
        time.sleep(0.15)        # silence on the bus is what trips it: polling would feed the watchdog
        assert bus.read_register(1, 'bus_watchdog') == -1
        goal = bus.read_register(1, 'present_position')
        with pytest.raises(Exception, match='data range'):
            bus.write_register(1, 'goal_position', goal)
        bus.write_register(1, 'bus_watchdog', 0)
        bus.write_register(1, 'goal_position', goal)
        bus.write_register(2, 'baud_rate', 6)                # reply still at the old baud
        assert bus.ping(2) is None
        bus.close()
        fast = ServoBus(s.path, 4_000_000, margin_ms=30).open()
        assert fast.ping(2) == (1020, 46) and fast.ping(1) is None
        fast.close()


def test_wrong_firmware_ignores_fast_sync_read():
    with SimBusProcess(['--servos', '3', '--baud', str(BAUD), '--firmware', '44']) as s:
        bus = ServoBus(s.path, BAUD, margin_ms=30).open()
        assert bus.sync_read(132, 4, [1, 2, 3], fast=True) == {}
        assert sorted(bus.sync_read(132, 4, [1, 2, 3], fast=False)) == [1, 2, 3]
        bus.close()


def test_silent_servo_costs_only_itself():
    with SimBusProcess(['--servos', '4', '--baud', str(BAUD), '--faults', 'silent=2@0']) as s:
        bus = ServoBus(s.path, BAUD, margin_ms=30).open()
        assert sorted(bus.sync_read(132, 4, [1, 2, 3, 4], fast=False)) == [1, 3, 4]
        assert sorted(bus.sync_read(132, 4, [1, 3, 4, 2], fast=True)) == [1, 3, 4]
        assert sorted(bus.sync_read(132, 4, [1, 2, 3, 4], fast=True)) == [1]  # the chain stops at 2
        bus.close()


class _FixedPlant(Plant):
    """A plant that pins every servo at 0.5 rad (the shape a physics world takes)."""

    def __init__(self):
        self.goals = {}

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        self.goals = dict(goals_rad_by_id)
        return {i: (0.5, 0.0, 0.1) for i in goals_rad_by_id}


def test_pluggable_plant_drives_present_position_in_process():
    plant = _FixedPlant()
    bus_emu = BusEmulator([1, 2], SERVO_MODELS['XM430-W350'], BAUD, plant=plant)
    def serve():
        while not bus_emu.stop_requested:
            bus_emu.poll(0.005)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        bus = ServoBus(bus_emu.path, BAUD, margin_ms=30).open()
        expected = 2048 + round(0.5 / (2 * math.pi / 4096))
        assert eventually(lambda: bus.read_register(1, 'present_position') == expected)
        bus.write_register(2, 'goal_position', 3072)
        assert eventually(lambda: plant.goals.get(2) == pytest.approx(math.pi / 2))
        bus.close()
    finally:
        bus_emu.stop_requested = True
        thread.join(1)
        bus_emu.close()


def test_register_lookup_names():
    assert register('Present Position').address == 132
    assert register('goal-position').size == 4
    with pytest.raises(ValueError, match='unknown register'):
        register('warp_drive')


def test_four_and_a_half_megabaud_which_the_sdk_refuses():
    assert not sdk.PortHandler('/dev/null').getCFlagBaud(4_500_000) > 0     # the SDK's own list lacks it
    with SimBusProcess(['--servos', '2', '--baud', '4500000']) as s:
        bus = ServoBus(s.path, 4_500_000, margin_ms=30).open()
        assert bus.ping(2) == (1020, 46)
        bus.close()
        slow = ServoBus(s.path, 4_000_000, margin_ms=5).open()
        assert slow.ping(2) is None                 # servos at 4.5 M do not hear 4 M
        slow.close()


def test_parser_counts_junk_once():
    """Bytes that form no packet are counted (they cost wire time); a bad-CRC packet's bytes are counted
    in its own size, not again as junk when the parser hunts through them."""
    parser = P.PacketParser()
    good = P.build_instruction(1, P.PING)
    bad = bytearray(P.build_instruction(2, P.READ, bytes((132, 0, 4, 0))))
    bad[-1] ^= 0xFF
    packets = parser.feed(b'\x00\x11\x22' * 10 + bytes(bad) + good)
    assert [(p.servo_id, p.crc_ok) for p in packets] == [(2, False), (1, True)]
    assert parser.discarded == 30


def test_a_garbled_length_does_not_hold_back_the_replies_behind_it():
    """Sync read replies all have one length: with it given, a reply whose LEN was garbled upwards is
    skipped, and the good replies after it are taken at once instead of waiting inside its 'body'."""
    replies = [P.build_status(sid, 0, bytes(range(sid, sid + 12))) for sid in (1, 2, 3)]
    garbled = bytearray(replies[0])
    garbled[6] ^= 0x01                  # LEN high byte: 256 more bytes than the reply has
    stream = bytes(garbled) + replies[1] + replies[2]
    blind = P.PacketParser().feed(stream)
    assert blind == []                  # waits for the 'rest' of the first packet: replies 2, 3 held back
    packets = P.PacketParser(expected_length=12 + 4).feed(stream)
    assert [(p.servo_id, p.crc_ok, p.params[1:]) for p in packets] == \
        [(2, True, bytes(range(2, 14))), (3, True, bytes(range(3, 15)))]


class _StepCountingPlant(Plant):
    """Each step puts every servo at 0.1 rad x the steps so far and notes how many replies the bus had
    written by then."""

    def __init__(self):
        self.steps, self.replies_at_step, self.bus = 0, [], None

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        self.steps += 1
        self.replies_at_step.append(self.bus.counters['replies'])
        return {i: (0.1 * self.steps, 0.0, 0.0) for i in goals_rad_by_id}


class _FakeClock:
    """The emulator's clock, moved by the test (a sleep moves it too)."""

    def __init__(self, t: float):
        self.t = t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(0.0, s)


def test_a_request_finding_a_mechanics_step_due_is_answered_before_the_step(monkeypatch):
    """A reply never waits behind the mechanics: a request that arrives when a step is due (less than one
    step overdue) is answered from the last step's state, and the step follows, judging the watchdog
    only after the request was served. A step more than one step overdue goes first, so no reply
    reports state older than two steps."""
    from snake_control.dynamixel import emulator
    from snake_control.dynamixel.emulator import MECHANICS_STEP_S
    clock = _FakeClock(1000.0)
    monkeypatch.setattr(emulator, 'time', clock)
    plant = _StepCountingPlant()
    emu = BusEmulator([1, 2], SERVO_MODELS['XM430-W350'], BAUD, plant=plant, return_delay=0)
    plant.bus = emu
    for s in emu.servos.values():       # watchdog 20 ms, torque on, silent for a second
        s.table[98], s.table[64], s.last_instruction_t = 1, 1, clock.t - 1.0
    bus = ServoBus(emu.path, BAUD, margin_ms=30).open()
    fd = bus.port.ser.fd

    def exchange(packet: bytes) -> bytes:
        os.write(fd, packet)
        emu.poll(1.0)
        return os.read(fd, 4096) if select.select([fd], [], [], 0.5)[0] else b''

    def position_rad(raw: bytes) -> float:
        _, err, prm = P.parse_status(raw)
        assert err == 0
        return (P.from_le(prm, True) - 2048) * 2 * math.pi / 4096

    try:
        clock.t += 1.5 * MECHANICS_STEP_S
        raw = exchange(P.build_instruction(1, P.READ, bytes((132, 0, 4, 0))))
        assert position_rad(raw) == pytest.approx(0.0, abs=1e-3)    # the state before the step
        assert plant.steps == 1 and plant.replies_at_step == [1]     # the step came after the reply
        # The step judged the watchdog after the request was served: servo 1 had just been addressed,
        # servo 2 had been silent for a second.
        assert emu.servos[1].watchdog_trips == 0 and emu.servos[2].watchdog_trips == 1

        clock.t += 3 * MECHANICS_STEP_S                              # the emulator was held off
        raw = exchange(P.build_instruction(1, P.READ, bytes((132, 0, 4, 0))))
        assert plant.steps == 2 and plant.replies_at_step == [1, 1]  # the step went first
        assert position_rad(raw) == pytest.approx(0.2, abs=1e-3)

        # A step that the request's own wire time covers (14 bytes, 35 us; the step costs 10 us here)
        # goes first too: it delays no reply.
        emu._step_cost_s = 1e-5
        clock.t += 1.5 * MECHANICS_STEP_S
        raw = exchange(P.build_instruction(1, P.READ, bytes((132, 0, 4, 0))))
        assert plant.steps == 3 and plant.replies_at_step == [1, 1, 2]
        assert position_rad(raw) == pytest.approx(0.3, abs=1e-3)
    finally:
        bus.close()
        emu.close()


def test_sync_read_replies_are_made_as_they_go_out_and_never_before_their_wire_time(monkeypatch):
    """The second servo's reply is made after the first one was written (the first does not wait for
    the rest), and each leaves exactly when the wire model says: end of the request + return delay +
    its own bytes after the previous one, never earlier."""
    from snake_control.dynamixel import emulator
    clock = _FakeClock(1000.0)
    monkeypatch.setattr(emulator, 'time', clock)
    emu = BusEmulator([1, 2], SERVO_MODELS['XM430-W350'], BAUD, return_delay=3)     # 6 us
    bus = ServoBus(emu.path, BAUD, margin_ms=30).open()
    fd = bus.port.ser.fd
    written, made = [], []
    write = emu._write
    monkeypatch.setattr(emu, '_write', lambda raw: (written.append((clock.t, len(raw))), write(raw)))
    read = emu.servos[2].read
    monkeypatch.setattr(emu.servos[2], 'read', lambda *a: (made.append(len(written)), read(*a))[1])
    try:
        request = P.build_instruction(P.BROADCAST_ID, P.SYNC_READ, bytes((132, 0, 4, 0, 1, 2)))
        os.write(fd, request)
        t0 = clock.t
        emu.poll(1.0)
        byte_s = 10 / BAUD
        first = t0 + (len(request) + 15) * byte_s + 6e-6
        assert [n for _, n in written] == [15, 15]
        assert written[0][0] == pytest.approx(first, abs=1e-9)
        assert written[1][0] == pytest.approx(first + 15 * byte_s + 6e-6, abs=1e-9)
        assert made == [1]
        got = P.PacketParser().feed(os.read(fd, 4096))
        assert [p.servo_id for p in got] == [1, 2] and all(p.crc_ok for p in got)
    finally:
        bus.close()
        emu.close()
