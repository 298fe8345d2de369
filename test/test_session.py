"""Recorded sessions: MCAP written by the recorder over DDS, read back into arrays, drawn."""
import math
import time

import numpy as np
import pytest

from snake_control.app.session import read_session


@pytest.mark.ros
def test_record_read_and_plot(tmp_path):
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState

    from rosutil import RosHarness, wait_until
    from snake_control.nodes.recorder import Recorder
    from snake_control.app.session import plot_session

    out = tmp_path / 's.mcap'
    h = RosHarness(args=['--ros-args', '-r', '__ns:=/snake'])
    names = ['j1', 'j2', 'j3']
    try:
        rec = h.add(Recorder(out, context=h.context))
        odom = h.publisher(Odometry, 'odom')
        states = h.publisher(JointState, 'joint_states')
        gait = h.publisher(DiagnosticStatus, 'gait/state')
        assert wait_until(lambda: {'/snake/odom', '/snake/joint_states',
                                   '/snake/gait/state'} <= set(rec.counts))
        start = time.monotonic()
        for k in range(40):
            o = Odometry()
            o.pose.pose.position.x = 0.01 * k
            o.pose.pose.orientation.z, o.pose.pose.orientation.w = math.sin(0.01 * k), math.cos(0.01 * k)
            odom.publish(o)
            states.publish(JointState(name=names, position=[0.1 * k, -0.1 * k, 0.0]))
            if k == 0:
                states.publish(JointState(name=['x'], position=[9.0]))     # malformed: skipped
            g = 'serpentine' if k < 20 else 'rolling'
            gait.publish(DiagnosticStatus(values=[KeyValue(key='target_gait', value=g)]))
            time.sleep(0.01)
        published_hz = 39 / (time.monotonic() - start)
        assert wait_until(lambda: rec.counts['/snake/odom'] == 40 and rec.counts['/snake/joint_states'] == 41)
    finally:
        h.close()
    s = read_session(out)
    assert s.joint_names == names and s.states_rad.shape == (40, 3)
    np.testing.assert_allclose(s.states_rad[:, 0], 0.1 * np.arange(40))
    np.testing.assert_allclose(s.odom_xyyaw[:, 2], 0.02 * np.arange(40), atol=1e-12)
    assert s.distance_m() == pytest.approx(0.39)
    assert [g for _, g in s.gait_switches] == ['serpentine', 'rolling']
    # Against the rate the test actually published at: a loaded machine stretches the sleeps.
    assert 0.5 * published_hz < s.rate_hz() < 2.0 * published_hz
    png = plot_session(s, tmp_path / 's.png', title='test')
    assert png.stat().st_size > 10000


def test_missing_file():
    with pytest.raises(FileNotFoundError, match='nope.mcap'):
        read_session('/tmp/nope.mcap')
