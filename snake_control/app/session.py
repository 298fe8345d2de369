"""Read a recorded session (`snake bringup --record F.mcap`) into arrays, and draw it.

No rclpy: the MCAP file is decoded by snake_control.mcap_io, so this works on any machine with the
package's pip requirements (a laptop reviewing a run from the robot).

    data = read_session('out/session.mcap')          # namespace 'snake' by default
    data.odom_t_s, data.odom_xyyaw                    # (k,), (k, 3): x m, y m, yaw rad in the odom frame
    data.commands_t_s, data.commands_rad              # (m,), (m, n): joint_commands positions
    data.states_t_s, data.states_rad                  # (p,), (p, n): joint_states positions
    data.gait_switches                                # [(t_s, gait name)] when the target gait changed
    plot_session(data, 'out/session.png')

Times are seconds from the first message of the file (log time).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Session:
    joint_names: list = field(default_factory=list)
    odom_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    odom_xyyaw: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    commands_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    commands_rad: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    states_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    states_rad: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    gait_switches: list = field(default_factory=list)
    estop_t_s: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    def rate_hz(self, which: str = 'states') -> float:
        """Mean message rate of joint_states ('states') or joint_commands ('commands')."""
        t = self.states_t_s if which == 'states' else self.commands_t_s
        return float((len(t) - 1) / (t[-1] - t[0])) if len(t) > 1 and t[-1] > t[0] else 0.0

    def distance_m(self) -> float:
        """Length of the odometry path (x, y)."""
        if len(self.odom_xyyaw) < 2:
            return 0.0
        return float(np.sum(np.linalg.norm(np.diff(self.odom_xyyaw[:, :2], axis=0), axis=1)))


def _yaw(q) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def read_session(path: str | Path, namespace: str = 'snake') -> Session:
    """Decode odom, joint_commands, joint_states, gait/state and estop of one namespace from an MCAP."""
    from snake_control.mcap_io import ros2_messages

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'session file {path} does not exist')
    ns = '/' + namespace.strip('/') if namespace.strip('/') else ''
    wanted = {f'{ns}/{t}': t for t in ('odom', 'joint_commands', 'joint_states', 'gait/state', 'estop')}
    s = Session()
    odom, cmds, states = [], [], []
    t_first = None
    target = None
    for m in ros2_messages(path):
        t = m.log_time_ns * 1e-9
        t_first = t if t_first is None else t_first
        topic = wanted.get(m.channel.topic)
        s.counts[m.channel.topic] = s.counts.get(m.channel.topic, 0) + 1
        if topic is None:
            continue
        msg, t = m.ros_msg, t - t_first
        if topic == 'odom':
            p = msg.pose.pose.position
            odom.append((t, p.x, p.y, _yaw(msg.pose.pose.orientation)))
        elif topic in ('joint_commands', 'joint_states'):
            if not s.joint_names:
                s.joint_names = list(msg.name)
            if list(msg.name) != s.joint_names or len(msg.position) != len(s.joint_names):
                continue   # a malformed message on the topic: not part of the robot's trajectory
            (cmds if topic == 'joint_commands' else states).append((t, *msg.position))
        elif topic == 'gait/state':
            values = {kv.key: kv.value for kv in msg.values}
            if values.get('target_gait') and values['target_gait'] != target:
                target = values['target_gait']
                s.gait_switches.append((t, target))
        elif topic == 'estop' and msg.data:
            s.estop_t_s.append(t)
    if odom:
        a = np.array(odom)
        s.odom_t_s, s.odom_xyyaw = a[:, 0], a[:, 1:]
    if cmds:
        a = np.array(cmds)
        s.commands_t_s, s.commands_rad = a[:, 0], a[:, 1:]
    if states:
        a = np.array(states)
        s.states_t_s, s.states_rad = a[:, 0], a[:, 1:]
    return s


def plot_session(s: Session, path: str | Path, title: str = '', true_xy=None):
    """A picture of a session: odometry path (and a true path (k, 2) if given), joint-angle heatmap with
    gait switches and e-stops marked, and the joint_states period over time."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(13, 8))
    grid = fig.add_gridspec(2, 2, width_ratios=(1, 1.6), height_ratios=(3, 1))
    ax_path = fig.add_subplot(grid[:, 0])
    if len(s.odom_xyyaw):
        ax_path.plot(s.odom_xyyaw[:, 0], s.odom_xyyaw[:, 1], label='estimated (odom)')
        ax_path.plot(*s.odom_xyyaw[0, :2], 'go', label='start')
    if true_xy is not None and len(true_xy):
        true_xy = np.asarray(true_xy)
        ax_path.plot(true_xy[:, 0], true_xy[:, 1], 'k--', label='true')
    ax_path.set(xlabel='x (m)', ylabel='y (m)', title='path')
    ax_path.axis('equal')
    ax_path.legend(loc='best')

    ax_heat = fig.add_subplot(grid[0, 1])
    if len(s.states_rad):
        extent = (s.states_t_s[0], s.states_t_s[-1], len(s.joint_names) - 0.5, -0.5)
        image = ax_heat.imshow(s.states_rad.T, aspect='auto', extent=extent, cmap='RdBu_r',
                               vmin=-np.pi / 2, vmax=np.pi / 2, interpolation='nearest')
        fig.colorbar(image, ax=ax_heat, label='joint angle (rad)')
    for t, name in s.gait_switches:
        ax_heat.axvline(t, color='k', lw=1)
        ax_heat.text(t, -0.5, f' {name}', rotation=90, va='top', fontsize=8)
    for t in s.estop_t_s:
        ax_heat.axvline(t, color='r', lw=1.5, ls='--')
    ax_heat.set(ylabel='joint (tail to head)', title='measured joint angles (joint_states)')

    ax_dt = fig.add_subplot(grid[1, 1], sharex=ax_heat)
    if len(s.states_t_s) > 1:
        ax_dt.plot(s.states_t_s[1:], 1000 * np.diff(s.states_t_s), lw=0.6)
    ax_dt.set(xlabel='time (s)', ylabel='period (ms)',
              title=f'joint_states period (mean {s.rate_hz():.1f} Hz)')
    fig.suptitle(title or 'session')
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
