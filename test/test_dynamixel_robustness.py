"""Robustness of the bus and the driver against a slow other end, garbled health data and closed pipes
(real SDK, real pty, the emulator in its own process)."""
import threading
import time

from snake_control.dynamixel.bus import CommError, ServoBus
from snake_control.dynamixel.emulator import BusEmulator
from snake_control.dynamixel.models import CONTROL_TABLE, SERVO_MODELS
from snake_control.dynamixel.plant import MotorModel
from snake_control.dynamixel.simproc import SimBusProcess

BAUD = 4_000_000
GOAL = CONTROL_TABLE['goal_position'].address


def test_full_pty_buffer_waits_instead_of_reporting_an_unplug():
    # The emulator stops reading (a stalled host) while the bus keeps writing: the pty buffer fills
    # and write() says EAGAIN. That is a slow peer, not a vanished adapter: no PortGone, and the bus
    # works again once the peer reads.
    with SimBusProcess(['--servos', '4', '--baud', str(BAUD)]) as sim:
        bus = ServoBus(sim.path, BAUD, margin_ms=20.0).open()
        try:
            bus.port.write_wait_s = 0.05
            assert bus.ping(1) is not None
            sim.command('stall 1.5')
            data = {sid: (2048).to_bytes(4, 'little') for sid in (1, 2, 3, 4)}
            sent = failed = 0
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end:
                try:
                    bus.sync_write(GOAL, 4, data)
                    sent += 1
                except CommError:
                    failed += 1          # the buffer stayed full for write_wait_s: a transmit failure
            assert failed > 0, f'the pty buffer never filled ({sent} writes went out)'
            time.sleep(0.8)              # the stall ends; the emulator reads the backlog
            bus.drain(quiet_ms=50, max_ms=2000)
            assert any(bus.ping(1) is not None for _ in range(5))
        finally:
            bus.close()


class SlowPhysics(MotorModel):
    """A plant whose every step takes 20 ms of wall time without holding the interpreter lock (like
    MuJoCo on a busy host)."""

    threaded = True

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        time.sleep(0.02)
        return super().step(dt_s, goals_rad_by_id, torque_on_by_id)


def test_slow_physics_steps_never_delay_replies_beyond_the_wire_time():
    # Replies must leave at wire time + return delay, whatever the physics costs: a physics step in
    # the serving loop would make every one of these reads miss a 4 ms margin.
    ids = [1, 2, 3, 4]
    emu = BusEmulator(ids, SERVO_MODELS['XM430-W350'], BAUD, plant=SlowPhysics(), return_delay=0)
    thread = threading.Thread(target=emu.serve_forever, daemon=True)
    thread.start()
    bus = ServoBus(emu.path, BAUD, margin_ms=4.0).open()
    try:
        for sid in ids:
            bus.write_register(sid, 'torque_enable', 1)
        bus.write_register(1, 'goal_position', 2048 + 300)
        ok, tries = 0, 60
        for _ in range(tries):
            try:
                bus.read_register(1, 'present_position')
                ok += 1
            except CommError:
                pass
            time.sleep(0.003)
        assert ok >= 0.8 * tries, f'only {ok} of {tries} reads answered in time'
        # ... and the physics still moves the servo.
        assert abs(bus.read_register(1, 'present_position') - 2048) > 10
    finally:
        bus.close()
        emu.stop_requested = True
        thread.join(timeout=5)
        emu.close()
