"""The emulated servos against the ROBOTIS e-Manual, through dynamixel_sdk over a real pty.

Each test names the e-Manual section it checks: the Protocol 2.0 page (emanual.robotis.com/docs/en/
dxl/protocol2/) or the XM430-W350 control table (emanual.robotis.com/docs/en/dxl/x/xm430-w350/).
"""
import os
import select
import time

import dynamixel_sdk as sdk
import pytest

from snake_control.dynamixel import protocol as P
from snake_control.dynamixel.simproc import SimBusProcess

BAUD = 4_000_000
sdk.port_handler.LATENCY_TIMER = 100        # a loaded host may stall the emulator; these are about bytes


@pytest.fixture(scope='module')
def sim():
    with SimBusProcess(['--servos', '6', '--baud', str(BAUD)]) as s:
        yield s


@pytest.fixture
def dxl(sim):
    port = sdk.PortHandler(sim.path)
    assert port.openPort() and port.setBaudRate(BAUD)
    yield port, sdk.PacketHandler(2.0)
    port.closePort()


def _instruction(ph, port, servo_id, instruction, params=()):
    """Send any instruction through the SDK; (comm result, status error byte)."""
    tx = [0] * (10 + len(params))
    tx[sdk.protocol2_packet_handler.PKT_ID] = servo_id
    tx[sdk.protocol2_packet_handler.PKT_LENGTH_L] = len(params) + 3
    tx[sdk.protocol2_packet_handler.PKT_INSTRUCTION] = instruction
    tx[sdk.protocol2_packet_handler.PKT_PARAMETER0:sdk.protocol2_packet_handler.PKT_PARAMETER0 + len(params)] = \
        list(params)
    if instruction != P.ACTION:
        _, result, error = ph.txRxPacket(port, tx)
        return result, error
    # The SDK sends Action without waiting for a status (it assumes broadcast use): take it ourselves.
    result = ph.txPacket(port, tx)
    if result != sdk.COMM_SUCCESS:
        return result, 0
    port.setPacketTimeout(11)
    rx, result = ph.rxPacket(port, False)
    port.is_using = False
    return result, rx[sdk.protocol2_packet_handler.PKT_ERROR] if result == sdk.COMM_SUCCESS else 0


def _wait_for(predicate, timeout_s=2.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    return predicate()


def test_broadcast_factory_reset_all_is_ignored(dxl):
    """Protocol 2.0 › Factory Reset (0x06), warning: a broadcast Reset All (0xFF) is not executed
    (X-series firmware 42 and later); the other options are."""
    port, ph = dxl
    assert ph.write1ByteTxRx(port, 1, 9, 0) == (sdk.COMM_SUCCESS, 0)
    ph.factoryReset(port, sdk.BROADCAST_ID, 0xFF)
    time.sleep(0.05)            # a broadcast gets no reply: nothing to wait for but time
    assert ph.read1ByteTxRx(port, 1, 9) == (0, sdk.COMM_SUCCESS, 0)      # Return Delay Time kept
    ph.factoryReset(port, sdk.BROADCAST_ID, 0x02)                       # reset all but ID and baud
    assert _wait_for(lambda: ph.read1ByteTxRx(port, 1, 9)[0] == 250)


def test_action_without_reg_write_is_an_instruction_error(dxl):
    """Protocol 2.0 › Status Packet › Error: 0x02 Instruction Error, 'Action has been used without
    Reg Write'."""
    port, ph = dxl
    assert _instruction(ph, port, 2, P.ACTION) == (sdk.COMM_SUCCESS, P.ERR_INSTRUCTION)
    assert ph.regWriteTxRx(port, 2, 65, 1, [1]) == (sdk.COMM_SUCCESS, 0)
    assert _instruction(ph, port, 2, P.ACTION) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 2, 65)[0] == 1
    ph.write1ByteTxRx(port, 2, 65, 0)


def test_control_table_backup_store_and_restore(dxl):
    """Protocol 2.0 › Control Table Backup (0x20): P1 0x01 stores, 0x02 restores EEPROM and reboots,
    P2..P5 = 'CTRL'; Result Fail while torque is on; XM430 control table › Backup Ready (147)."""
    port, ph = dxl
    store, restore = [0x01, *b'CTRL'], [0x02, *b'CTRL']
    assert ph.write1ByteTxRx(port, 3, 64, 1) == (sdk.COMM_SUCCESS, 0)
    assert _instruction(ph, port, 3, P.BACKUP, store) == (sdk.COMM_SUCCESS, P.ERR_RESULT_FAIL)
    assert ph.write1ByteTxRx(port, 3, 64, 0) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 3, 147)[0] == 0
    assert ph.write1ByteTxRx(port, 3, 9, 7) == (sdk.COMM_SUCCESS, 0)
    assert _instruction(ph, port, 3, P.BACKUP, store) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 3, 147)[0] == 1
    assert ph.write1ByteTxRx(port, 3, 9, 100) == (sdk.COMM_SUCCESS, 0)
    assert _instruction(ph, port, 3, P.BACKUP, restore) == (sdk.COMM_SUCCESS, 0)
    # The servo reboots after restoring: it answers again with the stored EEPROM.
    assert _wait_for(lambda: ph.read1ByteTxRx(port, 3, 9) == (7, sdk.COMM_SUCCESS, 0))
    assert ph.read1ByteTxRx(port, 3, 147)[0] == 1
    assert _instruction(ph, port, 3, P.BACKUP, [0x01, *b'CTRX'])[1] == P.ERR_DATA_RANGE
    ph.write1ByteTxRx(port, 3, 9, 0)


def test_control_table_backup_needs_firmware_45():
    """Protocol 2.0 › Control Table Backup (0x20): supported by X430/540 from firmware v45; older
    firmware does not know the instruction (Instruction Error)."""
    with SimBusProcess(['--servos', '1', '--baud', str(BAUD), '--firmware', '44']) as s:
        port = sdk.PortHandler(s.path)
        assert port.openPort() and port.setBaudRate(BAUD)
        ph = sdk.PacketHandler(2.0)
        assert _instruction(ph, port, 1, P.BACKUP, [0x01, *b'CTRL']) == (sdk.COMM_SUCCESS, P.ERR_INSTRUCTION)
        port.closePort()


def test_a_write_must_cover_a_multibyte_item_whole(dxl):
    """Protocol 2.0 › Status Packet › Error: 0x05 Data Length Error, 'when you attempt to only use
    2 bytes of an item that has been defined as 4 bytes'."""
    port, ph = dxl
    before = ph.read4ByteTxRx(port, 4, 116)[0]
    assert ph.write2ByteTxRx(port, 4, 116, 100) == (sdk.COMM_SUCCESS, P.ERR_DATA_LENGTH)
    assert ph.write2ByteTxRx(port, 4, 118, 0) == (sdk.COMM_SUCCESS, P.ERR_DATA_LENGTH)
    assert ph.read4ByteTxRx(port, 4, 116)[0] == before          # nothing applied
    assert ph.write1ByteTxRx(port, 4, 112, 5) == (sdk.COMM_SUCCESS, P.ERR_DATA_LENGTH)


@pytest.mark.parametrize('address, size, value, error', [
    (65, 1, 5, P.ERR_DATA_RANGE),        # LED: 0 ~ 1
    (68, 1, 3, P.ERR_DATA_RANGE),        # Status Return Level: 0 ~ 2
    (8, 1, 9, P.ERR_DATA_RANGE),         # Baud Rate: 0 ~ 7
    (9, 1, 255, P.ERR_DATA_RANGE),       # Return Delay Time: 0 ~ 254
    (9, 1, 254, 0),
    (11, 1, 2, P.ERR_DATA_RANGE),        # Operating Mode: 0, 1, 3, 4, 5, 16
    (168, 2, 63, P.ERR_DATA_RANGE),      # Indirect Address: 64 ~ 661
    (104, 4, 201, P.ERR_DATA_LIMIT),     # Goal Velocity: -Velocity Limit(44) ~ Velocity Limit (200)
    (104, 4, -201, P.ERR_DATA_LIMIT),
    (104, 4, 200, 0),
    (102, 2, 1194, P.ERR_DATA_LIMIT),    # Goal Current: -Current Limit(38) ~ Current Limit (1193)
    (102, 2, -1193, 0),
])
def test_range_errors_and_limit_errors(dxl, address, size, value, error):
    """Protocol 2.0 › Status Packet › Error: 0x04 Data Range Error (outside the item's minimum/maximum,
    the Range column of the XM430-W350 control table), 0x06 Data Limit Error (outside the value of its
    limit item: Goal Velocity by Velocity Limit, Goal Current by Current Limit)."""
    port, ph = dxl
    write = {1: ph.write1ByteTxRx, 2: ph.write2ByteTxRx, 4: ph.write4ByteTxRx}[size]
    assert write(port, 5, address, value & ((1 << 8 * size) - 1)) == (sdk.COMM_SUCCESS, error)


def test_goal_current_is_bounded_by_the_current_limit_set(dxl):
    """XM430-W350 control table › Goal Current (102): range -Current Limit(38) ~ Current Limit(38)."""
    port, ph = dxl
    assert ph.write2ByteTxRx(port, 5, 38, 500) == (sdk.COMM_SUCCESS, 0)
    assert ph.write2ByteTxRx(port, 5, 102, 600) == (sdk.COMM_SUCCESS, P.ERR_DATA_LIMIT)
    assert ph.write2ByteTxRx(port, 5, 102, 400) == (sdk.COMM_SUCCESS, 0)
    assert ph.write2ByteTxRx(port, 5, 38, 1193) == (sdk.COMM_SUCCESS, 0)


def test_indirect_address_and_data_29_to_56(dxl):
    """XM430-W350 control table › Indirect Address 29..56 (578..633) and Indirect Data 29..56
    (634..661)."""
    port, ph = dxl
    for k, src in enumerate((132, 133, 134, 135)):
        assert ph.write2ByteTxRx(port, 6, 578 + 2 * k, src) == (sdk.COMM_SUCCESS, 0)
    assert ph.read2ByteTxRx(port, 6, 632) == (661, sdk.COMM_SUCCESS, 0)      # Indirect Address 56 default
    direct = ph.read4ByteTxRx(port, 6, 132)[0]
    assert ph.read4ByteTxRx(port, 6, 634) == (direct, sdk.COMM_SUCCESS, 0)
    assert ph.write2ByteTxRx(port, 6, 632, 65) == (sdk.COMM_SUCCESS, 0)      # Indirect Data 56 -> LED
    assert ph.write1ByteTxRx(port, 6, 661, 1) == (sdk.COMM_SUCCESS, 0)
    assert ph.read1ByteTxRx(port, 6, 65)[0] == 1
    ph.write1ByteTxRx(port, 6, 65, 0)


def _raw(path):
    """A raw file descriptor on the device at BAUD (through the SDK's port setup)."""
    port = sdk.PortHandler(path)
    assert port.openPort() and port.setBaudRate(BAUD)
    return port, port.ser.fd


def _reply_within(fd, timeout_s) -> bytes:
    out = b''
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        if r:
            out += os.read(fd, 4096)
            if P.PacketParser().feed(out):
                break
    return out


def test_a_packet_whose_bytes_come_too_far_apart_is_dropped(sim):
    """Protocol 2.0 › Packet Process › Processing Order of Reception: the servo receives a packet
    of Length bytes after its header; one that stops arriving is dropped, not completed by whatever
    comes next (the e-Manual gives no figure; the emulator waits 10 ms between bytes)."""
    port, fd = _raw(sim.path)
    try:
        ping = P.build_instruction(1, P.PING)
        port.clearPort()
        for b in ping:
            os.write(fd, bytes((b,)))
            time.sleep(0.03)
        assert _reply_within(fd, 0.2) == b''
        os.write(fd, ping)                          # the same packet in one piece is answered
        (status,) = P.PacketParser().feed(_reply_within(fd, 1.0))
        assert status.servo_id == 1 and status.crc_ok
    finally:
        port.closePort()


def test_junk_bytes_occupy_the_wire(sim):
    """Protocol 2.0 › Introduction: half-duplex asynchronous serial, 8 data bits, 1 stop bit, no
    parity (10 bits a byte): bytes that form no packet take their wire time like any others."""
    port, fd = _raw(sim.path)
    junk = bytes(range(0x20, 0x80)) * 500                   # 48 000 bytes, no header among them
    before = sim.command('state')['counters']['junk_bytes']
    try:
        port.clearPort()
        t0 = time.monotonic()
        view = memoryview(junk)
        while view:
            select.select([], [fd], [], 1.0)
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                pass
        os.write(fd, P.build_instruction(1, P.PING))
        reply = _reply_within(fd, 5.0)
        elapsed = time.monotonic() - t0
    finally:
        port.closePort()
    assert P.PacketParser().feed(reply)[0].servo_id == 1
    assert elapsed >= len(junk) * 10 / BAUD                 # 0.12 s of wire before the ping
    assert sim.command('state')['counters']['junk_bytes'] - before >= len(junk) - 3


def test_overheating_trip_shows_in_present_temperature(dxl, sim):
    """XM430-W350 control table › Hardware Error Status (70) bit 2 Overheating: Present Temperature
    (146) has exceeded the Temperature Limit (31)."""
    port, ph = dxl
    assert sim.command('trip 4 overheating') == {'ok': 'trip'}
    limit = ph.read1ByteTxRx(port, 4, 31)[0]
    value, result, error = ph.read1ByteTxRx(port, 4, 146)
    assert result == sdk.COMM_SUCCESS and value > limit and error & P.ERR_ALERT
    assert ph.read1ByteTxRx(port, 4, 70)[0] & P.HW_OVERHEATING


def test_control_channel_sets_present_temperature(dxl, sim):
    """XM430-W350 control table › Present Temperature (146), 1 °C units: what the control channel
    sets is what the servo reports (cooling from there toward ambient)."""
    port, ph = dxl
    assert sim.command('set 2 present_temperature 70') == {'ok': 'set'}
    value, result, _ = ph.read1ByteTxRx(port, 2, 146)
    assert result == sdk.COMM_SUCCESS and 68 <= value <= 70
    assert 'error' in sim.command('set 2 present_position 100')
