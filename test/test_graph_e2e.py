"""End to end with real DDS (isolated domain) and the emulated servo bus in its own process:
scripted Joy -> teleop -> gait -> driver -> emulated servos -> joint_states -> estimator -> odom.

Checks: the robot moves forward, turns the commanded way, stops on deadman release, holds within one
control period of an e-stop, ends with torque off; and with garbage on every input topic the servos'
goal registers only ever see in-limit goals while the graph keeps running.
"""
import math
import threading
import time

import numpy as np
import pytest
import yaml

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROBOT = 'wheeled_8'


def servo_limits_ticks(robot):
    """Per servo ID: the goal-tick range that keeps the joint within its limits (one tick of rounding)."""
    from snake_control.dynamixel.models import CENTER_TICK, RAD_PER_TICK
    out = {}
    for j in robot.joints:
        a, b = (j.servo_angle_rad(j.lower_rad) / RAD_PER_TICK + CENTER_TICK,
                j.servo_angle_rad(j.upper_rad) / RAD_PER_TICK + CENTER_TICK)
        out[j.servo_id] = (math.floor(min(a, b)) - 1, math.ceil(max(a, b)) + 1)
    return out


class Session:
    """Runs snake bringup in-process with a script; records odom, joint_commands, estop on a probe."""

    def __init__(self, tmp_path, events, duration_s, robot=ROBOT, garbage=False):
        self.script = tmp_path / 'session.yaml'
        self.script.write_text(yaml.safe_dump({'gamepad': 'xbox', 'rate_hz': 20, 'duration_s': duration_s,
                                               'events': events}))
        self.robot, self.garbage = robot, garbage
        self.odom, self.commands, self.goals, self.state = [], [], None, None
        self.nodes = {}
        self.player_start = None
        self._stop_garbage = threading.Event()

    def _on_ready(self, run):
        from nav_msgs.msg import Odometry
        from rclpy.node import Node
        from sensor_msgs.msg import JointState

        self.nodes = run.nodes
        probe = Node('e2e_probe', context=run.context)
        probe.create_subscription(Odometry, 'odom', lambda m: self.odom.append((
            time.monotonic(), m.pose.pose.position.x, m.pose.pose.position.y,
            2 * math.atan2(m.pose.pose.orientation.z, m.pose.pose.orientation.w))), 50)
        # gait_node stamps its commands; the garbage publisher below does not (stamp 0): keep gait_node's.
        probe.create_subscription(JointState, 'joint_commands', lambda m: self.commands.append((
            m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, np.array(m.position), np.array(m.velocity)))
            if m.header.stamp.sec else None, 50)
        run.executor.add_node(probe)
        self.probe = probe
        if self.garbage:
            threading.Thread(target=self._publish_garbage, args=(probe,), daemon=True).start()

    def _publish_garbage(self, probe):
        from geometry_msgs.msg import Twist
        from sensor_msgs.msg import JointState, Joy
        from std_msgs.msg import String

        from snake_control.robot import load_robot
        names = list(load_robot(self.robot).joint_names)
        n = len(names)
        cmd = probe.create_publisher(Twist, 'cmd_vel', 10)
        sel = probe.create_publisher(String, 'gait/select', 10)
        jc = probe.create_publisher(JointState, 'joint_commands', 10)
        js = probe.create_publisher(JointState, 'joint_states', 10)
        joy = probe.create_publisher(Joy, 'joy', 10)
        nan, inf = float('nan'), float('inf')
        twists = [(nan, 0, 0), (0, inf, 0), (1e300, -1e300, 1e300), (0, 0, -inf), (5e3, 0, 7e3)]
        joint_msgs = [
            JointState(name=names, position=[nan] * n),
            JointState(name=names[:-2], position=[0.1] * (n - 2)),                  # wrong length
            JointState(name=names, position=[0.1] * (n + 3)),                       # mismatched arrays
            JointState(name=['tail_fin', 'head_horn'] + names[2:], position=[0.0] * n),   # unknown names
            JointState(name=names, position=[100.0 * (-1) ** i for i in range(n)]),      # out of limits
            JointState(name=names, position=[inf] * n, velocity=[nan] * n),
        ]
        selects = ['', 'no_such_gait', 'x' * 10000, '\x00\xff', 'WHEELED_UNDULATION', 'straight; rm -rf']
        k = 0
        while not self._stop_garbage.is_set():
            t = Twist()
            t.linear.x, t.linear.y, t.angular.z = (float(v) for v in twists[k % len(twists)])
            cmd.publish(t)
            sel.publish(String(data=selects[k % len(selects)]))
            jc.publish(joint_msgs[k % len(joint_msgs)])
            js.publish(joint_msgs[(k + 3) % len(joint_msgs)])
            joy.publish(Joy(axes=[nan, inf, -1e9][: 1 + k % 3], buttons=[1] * (k % 40)))
            k += 1
            time.sleep(0.05)    # 20 Hz of garbage on each of five topics: bad content, not a flood
        self.garbage_sent = k

    def _before_stop(self, run):
        self._stop_garbage.set()
        self.goals = run.sim.command('goals', timeout_s=30)['goals']
        self.state = run.sim.command('state')
        self.player_start = run.nodes['script_player'].started_s
        self.gait_started = run.nodes['bringup'].gait_since_s
        self.sent_log = list(run.nodes['script_player'].sent_log)
        self.estop_stamps_ns = list(run.nodes['gait_node'].estop_stamps_ns)

    def run(self):
        from snake_control.app.bringup import run_bringup
        from snake_control.app.graph import GraphArgs
        self.result = run_bringup(GraphArgs(robot=self.robot, bus='sim', joy=False), script=str(self.script),
                                  log=lambda line: None, on_ready=self._on_ready,
                                  before_stop=self._before_stop)
        return self

    # -- views -------------------------------------------------------------------------------------
    def odom_at(self, t_script_s):
        """Odometry (x, y, yaw) last received before script time t."""
        t = self.player_start + t_script_s
        before = [o for o in self.odom if o[0] <= t]
        assert before, f'no odometry before t = {t_script_s} s'
        return np.array(before[-1][1:])

    def goal_writes(self):
        """Goal writes grouped per servo: {id: [(t_s, ticks, accepted)]} in emulator time."""
        out = {}
        for t, sid, ticks, ok in self.goals:
            out.setdefault(sid, []).append((t, ticks, ok))
        return out


def _assert_goals_within_limits(session):
    from snake_control.robot import load_robot
    limits = servo_limits_ticks(load_robot(session.robot))
    writes = session.goal_writes()
    assert set(writes) == set(limits), 'every servo got goals'
    for sid, log in writes.items():
        lo, hi = limits[sid]
        ticks = np.array([g for _, g, _ in log])
        assert np.all((ticks >= lo) & (ticks <= hi)), f'servo {sid}: goal outside [{lo}, {hi}]: ' \
            f'{ticks[(ticks < lo) | (ticks > hi)][:5]}'
        # A servo refuses goals only while its Bus Watchdog is tripped (a host starved for 100 ms: the
        # safety net doing its job, which the driver clears); any other refusal is a bad goal.
        trips = session.state['servos'][str(sid)].get('watchdog_trips', 0)
        assert all(ok for _, _, ok in log) or trips > 0, f'servo {sid} refused a goal write, no watchdog trip'


def test_scripted_session_forward_turn_stop_estop(tmp_path):
    events = [
        {'t': 0.0},
        {'t': 1.0, 'hold': ['LB'], 'axes': {'left_y': 1.0}},                      # forward
        {'t': 7.0, 'hold': ['LB'], 'axes': {'left_y': 1.0, 'right_x': 1.0}},      # forward + turn left
        {'t': 13.0},                                                               # deadman released
        {'t': 16.0, 'hold': ['LB'], 'axes': {'left_y': 1.0}},                     # moving again
        {'t': 19.0, 'hold': ['LB', 'B'], 'axes': {'left_y': 1.0}},                # e-stop while moving
        {'t': 21.0, 'hold': ['LB'], 'axes': {'left_y': 1.0}},                     # latched: still stopped
    ]
    s = Session(tmp_path, events, duration_s=23.0).run()
    assert s.result.stop_reason == 'duration'
    assert s.result.torque_off is True, 'torque off after bringup ends'
    assert len(s.odom) > 100
    # The script's clock starts once the gait runs and its commands are heard, so no event is lost.
    assert s.gait_started is not None and s.player_start >= s.gait_started

    start, fwd_end, turn_end, stop_end = (s.odom_at(t) for t in (1.0, 7.0, 13.0, 15.9))
    heading0 = start[2]
    forward = np.array([math.cos(heading0), math.sin(heading0)])
    advance = float(np.dot(fwd_end[:2] - start[:2], forward))
    assert advance > 0.02, f'moved {advance:.3f} m forward'
    # The turn phase turns left (counter-clockwise) by more than the straight phase drifted.
    drift = (fwd_end[2] - start[2]) / 6.0
    turned = math.remainder(turn_end[2] - fwd_end[2], 2 * math.pi)
    assert turned - drift * 6.0 > math.radians(5), f'turned {math.degrees(turned):.1f} deg'
    # Deadman released at 13 s: by 15 s it stands still.
    still = s.odom_at(15.0)
    assert np.linalg.norm(stop_end[:2] - still[:2]) < 0.005 * max(1.0, advance / 0.05)
    assert abs(math.remainder(stop_end[2] - still[2], 2 * math.pi)) < math.radians(1)

    # E-stop: the gait node holds from its next tick (at most one moving command stamped after it).
    assert len(s.estop_stamps_ns) == 1
    t_estop = s.estop_stamps_ns[0]
    after = [(stamp, q, v) for stamp, q, v in s.commands if stamp > t_estop]
    moving = [a for a in after if np.any(a[2] != 0)]
    assert len(after) > 50 and len(moving) <= 1, f'{len(moving)} moving commands after the e-stop'
    held = np.array([q for _, q, _ in after[1:]])
    assert np.ptp(held, axis=0).max() == 0.0
    # ... and the servos are held too: the last goal writes (still latched) do not change.
    for sid, log in s.goal_writes().items():
        last = [g for _, g, _ in log[-30:]]
        assert len(set(last)) == 1, f'servo {sid} still moving under e-stop: {last[-5:]}'
    _assert_goals_within_limits(s)


def test_garbage_on_every_input_never_reaches_the_servos(tmp_path):
    events = [{'t': 0.0}, {'t': 1.0, 'hold': ['LB'], 'axes': {'left_y': 1.0, 'right_x': -0.5}}]
    s = Session(tmp_path, events, duration_s=8.0, garbage=True).run()
    assert s.garbage_sent > 100
    assert s.result.torque_off is True
    _assert_goals_within_limits(s)
    # Still alive: odometry kept coming, finite, to the end.
    late = [o for o in s.odom if o[0] > s.player_start + 6.0]
    assert len(late) > 20 and np.all(np.isfinite(np.array([o[1:] for o in late])))
    assert len(s.commands) > 200
    for stamp, q, v in s.commands:
        assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
