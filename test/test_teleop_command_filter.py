"""The gait node's command filter: garbage rejected, speeds clamped, timeout ramps to zero."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snake_control.teleop.command_filter import CommandFilter, CommandLimits

LIMITS = CommandLimits(0.1, 0.05, 0.5, 0.5, 0.5, 2.0)


def test_nan_and_inf_rejected_and_last_command_kept():
    f = CommandFilter(LIMITS, timeout_s=0.5)
    assert f.offer(0.05, 0.0, 0.1, 0.0) is None
    for bad in (float('nan'), float('inf'), -float('inf')):
        assert 'non-finite' in f.offer(bad, 0.0, 0.0, 0.1)
        assert 'non-finite' in f.offer(0.0, 0.0, bad, 0.1)
    assert f.target == (0.05, 0.0, 0.1) and f.rejected == 6


def test_enormous_speeds_clamped():
    f = CommandFilter(LIMITS, timeout_s=0.5)
    f.offer(1e30, -1e30, -7.0, 0.0)
    assert f.target == (0.1, -0.05, -0.5) and f.clamped == 1


def test_rate_limited_approach_and_timeout_ramp():
    f = CommandFilter(LIMITS, timeout_s=0.5)
    f.offer(0.1, 0.0, 0.0, 0.0)
    f.update(0.0)
    vx = [f.update(0.01 * k)[0] for k in range(1, 41)]
    assert vx[0] == pytest.approx(0.005)                 # 0.5 m/s^2 for 10 ms
    assert max(abs(b - a) for a, b in zip(vx, vx[1:])) <= 0.005 + 1e-12
    assert vx[-1] == pytest.approx(0.1)
    # Fresh commands keep it; then silence beyond the timeout: it ramps down, no jump.
    f.offer(0.1, 0.0, 0.0, 0.4)
    t, out = 0.41, []
    while t < 2.0:
        out.append(f.update(t)[0])
        t += 0.01
    assert out[0] == pytest.approx(0.1)
    steps = [a - b for a, b in zip(out, out[1:])]
    assert max(steps) <= 0.005 + 1e-12 and out[-1] == 0.0
    first_drop = next(i for i, s in enumerate(steps) if s > 0)
    assert 0.41 + 0.01 * first_drop == pytest.approx(0.9, abs=0.02)   # starts after cmd time + timeout


def test_hold_zero_resets():
    f = CommandFilter(LIMITS, timeout_s=0.5)
    f.offer(0.1, 0.0, 0.5, 0.0)
    f.update(0.0)
    f.update(1.0)
    f.hold_zero()
    assert f.update(1.01) == (0.0, 0.0, 0.0)


def test_bad_limits_rejected():
    with pytest.raises(ValueError, match='max_turn_rad_s'):
        CommandLimits(0.1, 0.1, float('nan'), 1, 1, 1)
    with pytest.raises(ValueError, match='timeout_s'):
        CommandFilter(LIMITS, timeout_s=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True),
                          st.floats(allow_nan=True), st.floats(0, 0.2)), max_size=30))
def test_any_input_gives_finite_bounded_output(stream):
    f = CommandFilter(LIMITS, timeout_s=0.5)
    t = 0.0
    for vx, vy, wz, dt in stream:
        t += dt
        f.offer(vx, vy, wz, t)
        out = f.update(t)
        assert all(math.isfinite(v) for v in out)
        assert abs(out[0]) <= 0.1 and abs(out[1]) <= 0.05 and abs(out[2]) <= 0.5
