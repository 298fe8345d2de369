"""What this computer's scheduler alone allows a bus cycle: the on-time share of a minimal loop that wakes
as the driver and the emulated bus wake, with none of their work.

A cycle of the driver on the emulated bus wakes four times: the bus loop at its tick, the emulator when
the request arrives on the pseudo-terminal, the emulator again when the reply's wire time is up (it
sleeps, never spins), and the bus loop when the reply is in. Each wake-up is late by the host's
scheduling latency. At 400 Hz and 4 Mbit/s the wire takes about 70 % of the 2.5 ms period, so a few
wake-ups each a few hundred microseconds late make a cycle late whatever the driver does.

`ceiling(rate_hz, wire_s, seconds)` runs that loop: a parent that sleeps to each tick, writes a request
on a pty and waits for the reply, and a forked child that reads the request, sleeps until the wire time
is up and answers. Its readings' on-time share (bench_graph.on_time_share, the same rule as the
driver's figure) is the ceiling this host puts on the driver's. `print_ceiling` runs it for pitch_yaw_32's
4 Mbit/s fast-sync-read cycle and prints the line the benchmarks show; `beside` words it for their WARNs.
"""
from __future__ import annotations

import os
import select
import time
import tty

import numpy as np


def _child(fd: int, wire_s: float, reply: bytes) -> None:
    from snake_control.dynamixel.realtime import precise_sleeps
    precise_sleeps()
    while True:
        select.select([fd], [], [])
        got = os.read(fd, 65536)
        if not got or got.endswith(b'q'):
            os._exit(0)
        t_end = time.monotonic() + wire_s
        wait = t_end - time.monotonic()
        while wait > 0:
            time.sleep(wait)
            wait = t_end - time.monotonic()
        os.write(fd, reply)


def ceiling(rate_hz: float, wire_s: float, seconds: float, request_bytes: int = 64,
            reply_bytes: int = 200) -> dict:
    """Run the minimal loop (module docstring) for `seconds` at `rate_hz`, the child answering `wire_s`
    after each request. Returns on_time (share of the cycles `seconds` holds), round trip p50 / p99 ms
    (request written to reply in, less wire_s), readings per second."""
    from bench.bench_graph import on_time_share
    from snake_control.dynamixel.realtime import precise_sleeps
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    reply = b'r' * reply_bytes
    pid = os.fork()
    if pid == 0:
        try:
            os.close(slave)
            _child(master, wire_s, reply)
        finally:
            os._exit(0)
    os.close(master)
    precise_sleeps()
    request = b'x' * request_bytes
    period = 1.0 / rate_hz
    stamps, trips = [], []
    try:
        t0 = time.monotonic()
        tick = t0
        while True:
            tick += period
            wait = tick - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                tick = time.monotonic()        # fell behind: start again from now, as the bus loop does
            if tick - t0 >= seconds:
                break
            sent = time.monotonic()
            os.write(slave, request)
            got = 0
            while got < reply_bytes:
                ready, _, _ = select.select([slave], [], [], 0.1)
                if not ready:
                    break
                got += len(os.read(slave, 65536))
            now = time.monotonic()
            if got >= reply_bytes:
                stamps.append(now)
                trips.append(now - sent - wire_s)
        wall = time.monotonic() - t0
    finally:
        try:
            os.write(slave, b'q')
        except OSError:
            pass
        os.waitpid(pid, 0)
        os.close(slave)
    trips_ms = np.array(trips) * 1e3 if trips else np.array([float('nan')])
    return dict(on_time=on_time_share(stamps, rate_hz, wall), readings_hz=len(stamps) / wall,
                trip_p50_ms=float(np.median(trips_ms)), trip_p99_ms=float(np.percentile(trips_ms, 99)))


def print_ceiling(rate_hz: float, aim: float, seconds: float, indent: str = '') -> float:
    """Run the bare loop for pitch_yaw_32's cycle at 4 Mbit/s with fast sync read (bench_dynamixel.cycle_bytes,
    14-byte state blocks) and print its line, judged against the on-time aim; returns its on-time share."""
    from bench.bench_dynamixel import cycle_bytes
    wire_s = cycle_bytes(True, 14) * 10.0 / 4_000_000
    c = ceiling(rate_hz, wire_s, seconds)
    print(f'{indent}host ceiling: a bare loop with the cycle\'s wake-ups and {1000 * wire_s:.2f} ms of wire, no '
          f'work, keeps {c["on_time"]:.1%} of cycles on time at {rate_hz:g} Hz (wake-ups beyond the wire p50 '
          f'{c["trip_p50_ms"]:.2f} ms, p99 {c["trip_p99_ms"]:.2f} ms)'
          + (f'  WARN this host alone misses the {aim:.0%} aim' if c['on_time'] < aim else ''), flush=True)
    return c['on_time']


def beside(on_time: float | None) -> str:
    """' (a bare loop on this host: x %)' for an on-time WARN; '' when the ceiling was not measured."""
    return '' if on_time is None else f' (a bare loop on this host: {on_time:.1%})'
