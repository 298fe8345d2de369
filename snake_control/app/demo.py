"""`snake demo`: both shipped robots driven by the whole node graph through their scripts, in MuJoCo.

For each robot (pitch_yaw_32, then wheeled_8) snake_control.app.bringup.run_bringup runs the graph (driver on
the emulated bus at the robot's 4 Mbit/s, coupled to the MuJoCo world; gait; estimator; teleop fed by
config/scripts/demo_<robot>.yaml) under the namespace /<robot>, recording every topic. The MuJoCo plant
in the bus process writes the true body pose (SNAKE_PHYSICS_TRUTH) next to it. Afterwards each session
is read back, compared with the truth, drawn, and the two recordings are merged into one demo.mcap:

    /<robot>/...             every topic of that robot's session (odom, joint_states, gait/state, ...)
    /<robot>/diagnostics     its /diagnostics (and any other absolute topic, e.g. /rosout, /tf), moved
                             under the robot's namespace so the two sessions never share a topic

Truth and estimate are compared in the estimator's odom frame: both are taken relative to their own pose
at the first odom message (the robot is still then: the script holds the deadman for a second), after
mapping the plant's simulated time onto the wall clock at the moment the graph was ready.
"""
from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from snake_control.kinematics.lie import se2_relative, yaw_from_quaternion

DEMO_ROBOTS = ('pitch_yaw_32', 'wheeled_8')
QUICK_ROBOT, QUICK_DURATION_S = 'wheeled_8', 10.0
DEMO_BAUD = 4_000_000
# Each session's video (out/demo_<robot>.mp4): the recorded joint_states replayed through MuJoCo at twice
# real time, so the two videos together take about half a minute to watch and about as long to render.
VIDEO = {'speed': 2.0, 'fps': 15.0, 'size': (288, 384)}
# Path length is summed over samples this far apart: the body frame's small per-cycle wiggle is not travel.
PATH_SAMPLE_S = 0.25
# A gait command below this (m/s) is no motion command; a motion span shorter than MIN_SPAN_S is not
# measured (too short to tell the body's progress from the wave's swing).
MOVING_M_S = 1e-3
MIN_SPAN_S = 1.0
# A span is judged when the gait reported its command reachable for this share of it (the ramps between
# commands may briefly ask for a tighter path than the gait turns).
REACHABLE_SHARE = 0.9
# No gait moves the body this fast: a larger step between ground-truth samples is a glitch, not travel.
MAX_TRUE_SPEED_M_S = 2.0


# ---------------------------------------------------------------------------------------------- pure math

def bus_cycle_wire_time_s(n_servos: int, baud: int, state_bytes: int, fast: bool,
                          return_delay_s: float = 0.0) -> float:
    """Wire time of one control cycle: a sync write of 4-byte goals plus a (fast) sync read of state_bytes.

    Bytes per cycle (10 bits each on the wire, docs/dynamixel.md): sync write 14 + 5N, read request
    14 + N, replies N (11 + L) for sync read (one return delay each) or 8 + N (L + 4) for fast sync read
    (one return delay). Returns seconds; its inverse is the highest control rate the bus allows.

    Example: 32 servos at 4 Mbit/s reading 10 bytes: 2.23 ms (sync read), 1.69 ms (fast sync read).
    """
    if n_servos < 1 or baud <= 0 or state_bytes < 1:
        raise ValueError(f'n_servos, baud, state_bytes: expected positive values, '
                         f'got {n_servos}, {baud}, {state_bytes}')
    n, length = int(n_servos), int(state_bytes)
    write, request = 14 + 5 * n, 14 + n
    if fast:
        reply, delays = 8 + n * (length + 4), 1
    else:
        reply, delays = n * (11 + length), n
    return (write + request + reply) * 10.0 / baud + delays * return_delay_s


def path_length_m(t_s: np.ndarray, xy_m: np.ndarray, sample_s: float = PATH_SAMPLE_S) -> float:
    """Length of a planar path (k, 2) resampled every sample_s (times t_s (k,) increasing)."""
    t_s, xy_m = np.asarray(t_s, float), np.asarray(xy_m, float)
    if len(t_s) < 2:
        return 0.0
    grid = np.arange(t_s[0], t_s[-1], sample_s)
    grid = np.append(grid, t_s[-1])
    pts = np.column_stack([np.interp(grid, t_s, xy_m[:, i]) for i in range(2)])
    return float(np.sum(np.linalg.norm(np.diff(pts, axis=0), axis=1)))


def motion_spans(gait_t_s, command_xy_m_s, steady) -> list[tuple[int, int]]:
    """[(first, last)] sample indices of the runs of gait/state samples (times gait_t_s (G,) s) with a
    motion command (command_xy_m_s (G, 2): forward, sideways m/s, of norm over MOVING_M_S) in one gait
    that is not blending into another (steady (G,) bool, False also where the gait changes)."""
    cmd = np.asarray(command_xy_m_s, dtype=float).reshape(-1, 2)
    on = (np.hypot(cmd[:, 0], cmd[:, 1]) > MOVING_M_S) & np.asarray(steady, dtype=bool)
    spans, start = [], None
    for k, flag in enumerate(on):
        if flag and start is None:
            start = k
        elif not flag and start is not None:
            spans.append((start, k - 1))
            start = None
    if start is not None:
        spans.append((start, len(on) - 1))
    return [(a, b) for a, b in spans if b > a]


@dataclass(frozen=True)
class SpeedSpan:
    """One motion span of a session: start (s), the window measured (s: its whole gait cycles, or all
    of it when shorter than a cycle), whole cycles in it, mean commanded speed (m/s) over the window and
    the achieved speed along the commanded direction (m/s); the gait and whether it reported the command
    reachable (gait/state's reachable) for REACHABLE_SHARE of the window."""

    t_start_s: float
    window_s: float
    cycles: int
    commanded_m_s: float
    achieved_m_s: float
    gait: str = ''
    reachable: bool = True

    @property
    def judged(self) -> bool:
        """Whether the demo judges it: a command the gait can do, over at least one whole gait cycle."""
        return self.reachable and self.cycles >= 1

    @property
    def ratio(self) -> float:
        return self.achieved_m_s / self.commanded_m_s


def span_speeds(t_s, link_poses, gait_t_s, phase_rad, command_xy_m_s, steady, gaits=None, reachable=None,
                min_span_s: float = MIN_SPAN_S) -> list[SpeedSpan]:
    """Commanded against achieved speed over every motion span (motion_spans) of a session.

    t_s (T,) s and link_poses (T, n_links, 4, 4): the true link-centre poses in the world; gait_t_s (G,)
    s, phase_rad (G,) the gait's phase, command_xy_m_s (G, 2), steady (G,), and optionally gaits (G,)
    names and reachable (G,) bool: gait/state, on the same clock. The achieved speed is the acceptance harness's (snake_control.validation.cmdvel.achieved_motion):
    the link centroid's displacement between phase-aligned ends of whole gait cycles, stretched to its
    mean path, so the body wave's swing (a link wiggles sideways on every stride) is not counted as
    travel. It is taken along the span's mean command direction; the command (piecewise constant
    between gait/state samples) is averaged over the same window.
    """
    from snake_control.validation.cmdvel import achieved_motion

    t, poses = np.asarray(t_s, dtype=float), np.asarray(link_poses, dtype=float)
    gt, cmd = np.asarray(gait_t_s, dtype=float), np.asarray(command_xy_m_s, dtype=float).reshape(-1, 2)
    phase = np.asarray(phase_rad, dtype=float)
    out = []
    for a, b in motion_spans(gt, cmd, steady):
        inside = (t >= gt[a]) & (t <= gt[b])
        if gt[b] - gt[a] < min_span_s or inside.sum() < 3:
            continue
        ts = t[inside]
        phases = np.interp(ts, gt[a:b + 1], np.unwrap(phase[a:b + 1]))
        got = achieved_motion(ts, poses[inside], phases)
        # The command holds from one gait/state sample to the next: its mean over the measured window.
        end = ts[0] + got.window_s
        edges = np.clip(np.append(gt[a:b + 1], np.inf), ts[0], end)
        weights = np.diff(edges)
        mean_cmd = weights @ cmd[a:b + 1] / max(weights.sum(), 1e-12)
        norm = float(np.hypot(*mean_cmd))
        if norm <= MOVING_M_S:
            continue
        along = (got.forward_m_s * mean_cmd[0] + got.lateral_m_s * mean_cmd[1]) / norm
        ok = True if reachable is None else bool(
            weights @ np.asarray(reachable, dtype=float)[a:b + 1] >= REACHABLE_SHARE * weights.sum())
        out.append(SpeedSpan(float(ts[0]), float(got.window_s), int(got.cycles), norm, float(along),
                             '' if gaits is None else str(gaits[a]), ok))
    return out


def truth_jumps(t_s: np.ndarray, xy_m: np.ndarray, max_speed_m_s: float = MAX_TRUE_SPEED_M_S,
                slack_m: float = 0.05) -> np.ndarray:
    """Mask (k,) of ground-truth samples that jump from the last good one faster than any gait moves
    (max_speed_m_s, plus slack_m): a body frame that flipped or a physics glitch, not travel."""
    t_s, xy_m = np.asarray(t_s, float), np.asarray(xy_m, float)
    bad = np.zeros(len(t_s), dtype=bool)
    if len(t_s) == 0:
        return bad
    good = 0
    for k in range(1, len(t_s)):
        step = float(np.hypot(*(xy_m[k] - xy_m[good])))
        if step > max_speed_m_s * (t_s[k] - t_s[good]) + slack_m:
            bad[k] = True
        else:
            good = k
    return bad


# Script segments shorter than this (s) are folded into the one before (a gait passed through on the way to
# another, a command ramp).
MIN_SEGMENT_S = 0.3


def script_segments(gait_t_s, active, target, blending, moving) -> list[tuple[float, float, str]]:
    """[(start s, end s, label)] of a session cut where the gait/state samples (times gait_t_s (G,) s)
    change what the robot is doing: a blend into another gait ('blend into <target>'), a gait under a motion
    command ('<gait>') or a gait holding still ('<gait>, stopped'). active, target (G,) gait names,
    blending (G,) bool, moving (G,) bool. Each segment ends where the next begins (the last at the last
    sample); one shorter than MIN_SEGMENT_S joins the one before."""
    t = np.asarray(gait_t_s, dtype=float)
    out: list[list] = []
    for k in range(len(t)):
        if blending[k] or active[k] != target[k]:
            label = f'blend into {target[k]}'
        else:
            label = active[k] if moving[k] else f'{active[k]}, stopped'
        if out and out[-1][2] == label:
            continue
        if out:
            out[-1][1] = t[k]
            if out[-1][1] - out[-1][0] < MIN_SEGMENT_S and len(out) > 1:
                end = out.pop()[1]               # too short: part of the segment before
                out[-1][1] = end
                if out[-1][2] == label:
                    continue
        out.append([t[k], t[k], label])
    if out:
        out[-1][1] = float(t[-1])
    return [(float(a), float(b), label) for a, b, label in out if b > a]


@dataclass(frozen=True)
class SegmentError:
    """The estimate over one script segment: its own planar motion against the truth's, each in its own pose
    at the segment's start (the error the segment adds, whatever came before): true distance (m, start to
    end), position error (m) and heading error (true less estimated turn, deg). The position error split
    along the true travel (along_m: + the estimate went further, - it fell short; a speed's scale) and
    across it (across_m: + to the left of the true travel; a direction); NaN where the truth moved under
    SEGMENT_DIRECTION_MIN_M, which gives no direction to split by."""

    label: str
    t_start_s: float
    t_end_s: float
    true_m: float
    error_m: float
    heading_error_deg: float
    along_m: float = math.nan
    across_m: float = math.nan


# A segment's true travel gives the along/across split its direction only from this far (m).
SEGMENT_DIRECTION_MIN_M = 0.01


def segment_errors(est_t_s, est_xyyaw, true_t_s, true_xyyaw, segments) -> list[SegmentError]:
    """SegmentError of each (start s, end s, label) of segments (script_segments) for an estimate (times
    est_t_s (k,), poses est_xyyaw (k, 3): x m, y m, yaw rad) and the truth (true_t_s (m,), true_xyyaw
    (m, 3)) on one clock, both sampled across the segments (poses interpolated, yaw unwrapped)."""
    def track(t_s, poses):
        t_s, poses = np.asarray(t_s, dtype=float), np.asarray(poses, dtype=float)
        yaw = np.unwrap(poses[:, 2])
        return lambda t: np.array([np.interp(t, t_s, poses[:, 0]), np.interp(t, t_s, poses[:, 1]),
                                   np.interp(t, t_s, yaw)])

    est, true = track(est_t_s, est_xyyaw), track(true_t_s, true_xyyaw)
    t_lo = max(float(est_t_s[0]), float(true_t_s[0]))
    t_hi = min(float(est_t_s[-1]), float(true_t_s[-1]))
    out = []
    for a, b, label in segments:
        a, b = max(a, t_lo), min(b, t_hi)
        if b <= a:
            continue
        e = se2_relative(est(b)[None, :], est(a))[0]
        tr = se2_relative(true(b)[None, :], true(a))[0]
        dyaw = tr[2] - e[2]
        true_m, miss = float(np.hypot(*tr[:2])), e[:2] - tr[:2]
        along = across = math.nan
        if true_m >= SEGMENT_DIRECTION_MIN_M:
            ux, uy = tr[0] / true_m, tr[1] / true_m
            along, across = float(miss[0] * ux + miss[1] * uy), float(miss[1] * ux - miss[0] * uy)
        out.append(SegmentError(label, a, b, true_m, float(np.hypot(*miss)),
                                math.degrees(math.atan2(math.sin(dyaw), math.cos(dyaw))), along, across))
    return out


# ---------------------------------------------------------------------------------------------- results

# Aims the demo's summary judges a session by (WARN lines when missed).
ESTIMATOR_AIM_PCT = 5.0         # end position error, % of the distance travelled
SPEED_RATIO_AIM = (0.9, 1.1)    # achieved / commanded speed while moving


@dataclass
class RobotSummary:
    """What one robot's session achieved; figures for the printed summary and for tests."""

    robot: str
    n_joints: int = 0
    duration_s: float = 0.0
    true_distance_m: float = 0.0
    estimated_distance_m: float = 0.0
    true_frame_distance_m: float = 0.0      # the odom frame's own true path: what estimated_distance_m estimates
    final_position_error_m: float = float('nan')
    final_position_error_pct: float = float('nan')
    final_heading_error_deg: float = float('nan')
    control_rate_hz_target: float = 0.0
    cycle_rate_hz: float = 0.0
    joint_states_rate_hz: float = 0.0
    read_mode: str = ''
    wire_time_ms: float = 0.0
    wire_limit_hz: float = 0.0
    commanded_speed_m_s: float = 0.0
    achieved_speed_m_s: float = 0.0
    moving_time_s: float = 0.0
    speed_cycles: int = 0
    speed_spans: list = field(default_factory=list)
    segments: list = field(default_factory=list)        # SegmentError of each script segment
    counters: dict = field(default_factory=dict)
    stale_reads: int = 0
    gait_saturation_messages: int = 0
    truth_jumps: int = 0
    gait_switches: list = field(default_factory=list)
    torque_off: bool | None = None
    picture: str = ''
    video: str = ''
    message_counts: dict = field(default_factory=dict)
    host_cpu: object = None         # app.host_cpu.CpuShare of the session's run; None: unknown

    def lines(self) -> list[str]:
        """The summary of this session, one figure group per line."""
        c = self.counters
        torque = 'off at the end' if self.torque_off else 'unknown' if self.torque_off is None else 'STILL ON'
        rejected = sum(v for k, v in c.items() if k.startswith('rejected'))
        out = [f'{self.robot} ({self.n_joints} joints), {self.duration_s:.0f} s, gaits: '
               + ' -> '.join(g for _, g in self.gait_switches),
               f'  distance travelled (true, the link centroid\'s path): {self.true_distance_m:.2f} m; '
               f'the odom frame\'s path (it wiggles with the body): true {self.true_frame_distance_m:.2f} m, '
               f'estimated {self.estimated_distance_m:.2f} m',
               f'  estimator error at the end: {self.final_position_error_m:.3f} m '
               f'({self.final_position_error_pct:.1f} % of the distance), '
               f'heading {self.final_heading_error_deg:+.1f} deg'
               + (f' ({self.truth_jumps} ground-truth samples dropped as jumps)' if self.truth_jumps else ''),
               (f'  speed while commanded ({self.moving_time_s:.0f} s, {self.speed_cycles} whole gait cycles; '
                f'link centroid\'s mean path): commanded {self.commanded_speed_m_s:.3f} m/s, '
                f'achieved {self.achieved_speed_m_s:.3f} m/s (x{self._ratio():.2f})' if self.commanded_speed_m_s > 0
                else '  speed while commanded: no whole gait cycle of a command the gait can do was measured'),
               *(f'    {sp.gait} from {sp.t_start_s:.0f} s ({sp.window_s:.1f} s, {sp.cycles} cycles): '
                 f'commanded {sp.commanded_m_s:.3f} m/s, achieved {sp.achieved_m_s:.3f} m/s (x{sp.ratio:.2f})'
                 + ('' if sp.reachable else '; the gait reports it cannot reach the command: not judged')
                 + ('' if not sp.reachable or sp.cycles >= 1 else '; less than one whole gait cycle: not judged')
                 for sp in self.speed_spans),
               *(['  estimator error by segment (each segment\'s own motion from its start; true distance in '
                  'brackets):'] if self.segments else []),
               *(f'    {sg.label} from {sg.t_start_s:.0f} s ({sg.t_end_s - sg.t_start_s:.1f} s): '
                 f'{sg.error_m:.3f} m ({sg.true_m:.2f} m), heading {sg.heading_error_deg:+.1f} deg'
                 for sg in self.segments),
               f'  loop: driver {self.cycle_rate_hz:.1f} Hz (target {self.control_rate_hz_target:g} Hz), '
               f'joint_states {self.joint_states_rate_hz:.1f} Hz; bus limit {self.wire_limit_hz:.0f} Hz '
               f'({self.wire_time_ms:.2f} ms wire time per cycle, {self.read_mode} sync read, '
               f'{DEMO_BAUD / 1e6:g} Mbit/s)',
               f'  faults: stale reads {self.stale_reads}, read failures {c.get("read_failures", 0)} '
               f'(whole-bus {c.get("full_read_failures", 0)}), late replies {c.get("late_replies", 0)}, '
               f'stale replies {c.get("stale_replies", 0)}, '
               f'write failures {c.get("write_failures", 0)}, '
               f'overruns {c.get("overruns", 0)}/{c.get("cycles", 0)} cycles, '
               f'goals clamped {c.get("clamped", 0)}, rejected {rejected}, '
               f'gait saturation reports {self.gait_saturation_messages}; torque {torque}']
        if self.host_cpu is not None:
            out.append(f'  {self.host_cpu.line()}')
        return out + [f'  {w}' for w in self.warnings()]

    def warnings(self) -> list[str]:
        """WARN lines for every figure that misses its aim: the loop (snake_control.app.bringup.loop_warnings),
        the estimator's error, the achieved speed against the command, torque at the end, and a computer
        saturated by other programs (snake_control.app.host_cpu)."""
        from snake_control.app.bringup import FAULT_AIM, loop_warnings
        out = loop_warnings(self.control_rate_hz_target, self.cycle_rate_hz, self.joint_states_rate_hz,
                            self.counters, self.n_joints)
        # Stale readings are failed reads unless something else made them stale (that line is above).
        if self.stale_reads != int(self.counters.get('read_failures', 0) or 0) \
                and self.stale_reads > FAULT_AIM * max(int(self.counters.get('cycles', 0) or 0), 1):
            out.append(f'WARN {self.stale_reads} stale servo readings')
        if not self.final_position_error_pct <= ESTIMATOR_AIM_PCT:
            out.append(f'WARN estimator error {self.final_position_error_pct:.1f} % of the distance '
                       f'(aim under {ESTIMATOR_AIM_PCT:g} %)')
        ratio = self._ratio()
        if self.commanded_speed_m_s > 0 and not SPEED_RATIO_AIM[0] <= ratio <= SPEED_RATIO_AIM[1]:
            out.append(f'WARN achieved speed x{ratio:.2f} of the commanded (aim x{SPEED_RATIO_AIM[0]:g} to '
                       f'x{SPEED_RATIO_AIM[1]:g})')
        if self.torque_off is not True:
            out.append('WARN torque not confirmed off at the end')
        cpu = self.host_cpu.warning() if self.host_cpu is not None else None
        if cpu:
            out.append(cpu)
        return out

    def missed_rate(self) -> bool:
        from snake_control.app.bringup import loop_warnings, rate_missed
        return rate_missed(loop_warnings(self.control_rate_hz_target, self.cycle_rate_hz,
                                         self.joint_states_rate_hz, self.counters, self.n_joints))

    def _ratio(self) -> float:
        if self.commanded_speed_m_s <= 0:
            return float('nan')
        return self.achieved_speed_m_s / self.commanded_speed_m_s


# ---------------------------------------------------------------------------------------------- reading

def demo_script_path(robot: str) -> Path:
    from snake_control.paths import share_dir
    return share_dir() / 'config' / 'scripts' / f'demo_{robot}.yaml'


def read_truth_csv(path: str | Path) -> np.ndarray:
    """The plant's ground-truth CSV (t,x,y,z,qx,qy,qz,qw) as (k, 4): t simulated s, x m, y m, yaw rad."""
    rows = []
    with open(path, newline='') as f:
        for row in csv.DictReader(f):
            try:
                rows.append([float(row[k]) for k in ('t', 'x', 'y', 'qx', 'qy', 'qz', 'qw')])
            except (TypeError, ValueError, KeyError):
                continue        # a line cut short while the plant was writing it
    if not rows:
        raise ValueError(f'ground-truth file {path}: no complete rows')
    a = np.array(rows)
    return np.column_stack((a[:, 0], a[:, 1], a[:, 2], yaw_from_quaternion(*a[:, 3:7].T)))


def _last_truth_time_s(path: Path) -> float | None:
    try:
        return float(read_truth_csv(path)[-1, 0])
    except (OSError, ValueError):
        return None


@dataclass
class _Extra:
    """What read_session does not decode: absolute start time, gait commands and driver diagnostics."""

    t_first_ns: int = 0
    gait_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gait_command_xy_m_s: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    gait_phase_rad: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gait_steady: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    gait_names: list = field(default_factory=list)
    gait_targets: list = field(default_factory=list)
    gait_blending: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    gait_turn_rad_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gait_reachable: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    saturation_messages: int = 0
    diag_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    diag_rate_hz: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _read_extra(path: Path, namespace: str) -> _Extra:
    from mcap.reader import make_reader

    from snake_control.mcap_io import ros2_messages

    ex, gait, steady, names, reachable, diag = _Extra(), [], [], [], [], []
    targets, blending, turns = [], [], []
    gait_topic = f'/{namespace}/gait/state'
    previous_gait = None
    # Only the topics read here are decoded; the file's first message time is in its summary (a file
    # without one, cut short, is read whole).
    with open(path, 'rb') as f:
        summary = make_reader(f).get_summary()
    topics = None
    if summary is not None and summary.statistics is not None:
        ex.t_first_ns = summary.statistics.message_start_time
        topics = [c.topic for c in summary.channels.values()
                  if c.topic == gait_topic or c.topic.endswith('/diagnostics')]
    for m in ros2_messages(path, topics):
        if not ex.t_first_ns:
            ex.t_first_ns = m.log_time_ns
        t = (m.log_time_ns - ex.t_first_ns) * 1e-9
        if m.channel.topic == gait_topic:
            v = {kv.key: kv.value for kv in m.ros_msg.values}
            try:
                gait.append((t, float(v.get('command_forward_m_s', 0)), float(v.get('command_sideways_m_s', 0)),
                             float(v.get('phase_rad', 'nan'))))
            except ValueError:
                continue
            # One gait, not blending, not e-stopped, and the same gait as the sample before: its phase
            # runs continuously.
            active = v.get('active_gait')
            steady.append(active == v.get('target_gait') == previous_gait and v.get('estop') != 'true'
                          and float(v.get('transition_progress', 1) or 1) >= 1.0)
            previous_gait = active
            names.append(active or '')
            targets.append(v.get('target_gait') or active or '')
            blending.append(float(v.get('transition_progress', 1) or 1) < 1.0)
            turns.append(float(v.get('command_turn_rad_s', 0) or 0))
            reachable.append(v.get('reachable', 'true') != 'false')
            ex.saturation_messages += bool(v.get('saturated_joints'))
        elif m.channel.topic.endswith('/diagnostics') or m.channel.topic == '/diagnostics':
            for st in m.ros_msg.status:
                v = {kv.key: kv.value for kv in st.values}
                if 'cycle_rate_hz' in v:
                    diag.append((t, float(v['cycle_rate_hz'])))
    if gait:
        a = np.array(gait)
        ex.gait_t_s, ex.gait_command_xy_m_s, ex.gait_phase_rad = a[:, 0], a[:, 1:3], a[:, 3]
        ex.gait_steady = np.array(steady, dtype=bool) & np.isfinite(a[:, 3])
        ex.gait_names, ex.gait_reachable = names, np.array(reachable, dtype=bool)
        ex.gait_targets, ex.gait_blending, ex.gait_turn_rad_s = targets, np.array(blending), np.array(turns)
    if diag:
        a = np.array(diag)
        ex.diag_t_s, ex.diag_rate_hz = a[:, 0], a[:, 1]
    return ex


def _segments(ex: _Extra) -> list[tuple[float, float, str]]:
    """script_segments of a recording's gait/state samples (times as in ex: s from its first message)."""
    moving = (np.hypot(ex.gait_command_xy_m_s[:, 0], ex.gait_command_xy_m_s[:, 1]) > MOVING_M_S) \
        | (np.abs(ex.gait_turn_rad_s) > MOVING_M_S)
    return script_segments(ex.gait_t_s, ex.gait_names, ex.gait_targets, ex.gait_blending, moving)


def recording_segments(path, namespace: str) -> list[tuple[float, float, str]]:
    """script_segments of a recording's <namespace>/gait/state, times in s of the recorder's clock (log time,
    the epoch for a recording of the graph); [] when it has fewer than two gait/state samples."""
    ex = _read_extra(Path(path), namespace.strip('/'))
    if len(ex.gait_t_s) < 2:
        return []
    t0 = ex.t_first_ns * 1e-9
    return [(a + t0, b + t0, label) for a, b, label in _segments(ex)]


# ---------------------------------------------------------------------------------------------- one robot

def run_robot(robot: str, out_dir: str | Path, script: str | Path | None = None,
              duration_s: float | None = None, log=print) -> tuple[RobotSummary, Path]:
    """Run one robot's scripted session in MuJoCo and analyse it; returns (summary, its mcap path)."""
    from snake_control.app.bringup import run_bringup
    from snake_control.app.graph import GraphArgs
    from snake_control.physics.servo_plant import TRUTH_ENV
    from snake_control.robot import load_robot

    out = Path(out_dir)
    parts = out / 'demo_parts'
    parts.mkdir(parents=True, exist_ok=True)
    truth_path, mcap_path = parts / f'truth_{robot}.csv', parts / f'{robot}.mcap'
    links_path = parts / f'truth_links_{robot}.csv'
    for p in (truth_path, mcap_path, links_path):
        p.unlink(missing_ok=True)
    script = Path(script) if script else demo_script_path(robot)
    anchors, diagnostics = [], {}

    def anchor():
        sim_t = _last_truth_time_s(truth_path)
        if sim_t is not None:
            anchors.append((time.time(), sim_t))

    def before_stop(run):
        anchor()

    previous = os.environ.get(TRUTH_ENV)
    os.environ[TRUTH_ENV] = str(truth_path)     # the bus process (the plant) inherits it
    try:
        result = run_bringup(
            GraphArgs(robot=robot, bus='sim', physics='mujoco', baud=DEMO_BAUD, namespace=robot, joy=False),
            script=str(script), record=str(mcap_path), duration_s=duration_s, log=log,
            status_period_s=3.0, on_ready=lambda run: anchor(), before_stop=before_stop,
            truth_links=links_path)
    finally:
        if previous is None:
            os.environ.pop(TRUTH_ENV, None)
        else:
            os.environ[TRUTH_ENV] = previous
    diagnostics.update(result.driver_diagnostics)
    summary = analyse(robot, mcap_path, truth_path, anchors, diagnostics, out / f'demo_{robot}.png',
                      links_path=links_path)
    summary.torque_off = result.torque_off
    summary.host_cpu = result.host_cpu
    summary.message_counts = result.message_counts
    summary.n_joints = load_robot(robot).n_joints
    return summary, mcap_path


def analyse(robot: str, mcap_path: Path, truth_path: Path, anchors: list, diagnostics: dict,
            picture: Path, links_path: Path | None = None) -> RobotSummary:
    """Compare the recorded odometry with the plant's truth, gather loop figures and faults, draw.

    links_path: the plant's link poses (snake_control.app.truth.read_truth_links, wall-clock stamped), the
    achieved speed's input (span_speeds); without it the speed is not judged."""
    from snake_control.dynamixel.readings import STATE_BLOCK
    from snake_control.robot import load_robot
    from snake_control.app.session import read_session

    rb = load_robot(robot)
    s = read_session(mcap_path, namespace=robot)
    ex = _read_extra(mcap_path, robot)
    summ = RobotSummary(robot=robot, n_joints=rb.n_joints, gait_switches=list(s.gait_switches))
    if len(s.odom_t_s) < 2:
        raise RuntimeError(f'{robot}: the session recorded no odometry ({mcap_path})')
    t0, t1 = float(s.odom_t_s[0]), float(s.odom_t_s[-1])
    summ.duration_s = t1 - t0

    # Plant time -> file time (s from the first message) through the wall-clock anchors.
    truth = read_truth_csv(truth_path)
    if len(anchors) >= 2 and anchors[-1][1] > anchors[0][1]:
        (w0, s0), (w1, s1) = anchors[0], anchors[-1]
        scale = (w1 - w0) / (s1 - s0)
    elif anchors:
        (w0, s0), scale = anchors[0], 1.0
    else:
        raise RuntimeError(f'{robot}: no ground truth was written ({truth_path})')
    truth_t = w0 + (truth[:, 0] - s0) * scale - ex.t_first_ns * 1e-9
    keep = (truth_t >= t0 - 0.5) & (truth_t <= t1 + 0.5)
    truth_t, truth = truth_t[keep], truth[keep]
    jumps = truth_jumps(truth[:, 0], truth[:, 1:3])
    summ.truth_jumps = int(jumps.sum())
    truth_t, truth = truth_t[~jumps], truth[~jumps]
    if len(truth_t) < 2:
        raise RuntimeError(f'{robot}: the ground truth does not cover the session')
    yaw_unwrapped = np.unwrap(truth[:, 3])

    def truth_at(t):
        return np.array([np.interp(t, truth_t, truth[:, 1]), np.interp(t, truth_t, truth[:, 2]),
                         np.interp(t, truth_t, yaw_unwrapped)])

    in_run = (truth_t >= t0) & (truth_t <= t1)
    true_rel = se2_relative(np.vstack([truth_at(t0), truth[in_run, 1:4], truth_at(t1)]), truth_at(t0))
    true_t = np.concatenate([[t0], truth_t[in_run], [t1]])
    est_rel = se2_relative(s.odom_xyyaw, s.odom_xyyaw[0])
    # Distance as the validation harness counts it (snake_control.validation.runs): the link centroid's
    # path, which does not count the body wave's sideways swing of one link as travel; the body frame's
    # path only without the links.
    links, keep = None, None
    if links_path is not None and Path(links_path).is_file():
        from snake_control.app.truth import read_truth_links
        wall_s, centres = read_truth_links(links_path, rb.n_links)
        links = (wall_s - ex.t_first_ns * 1e-9, centres)
        keep = (links[0] >= t0) & (links[0] <= t1)
    summ.true_frame_distance_m = path_length_m(true_t, true_rel[:, :2])
    if keep is not None and np.count_nonzero(keep) > 1:
        summ.true_distance_m = path_length_m(links[0][keep], links[1][keep][:, :, :2, 3].mean(axis=1))
    else:
        summ.true_distance_m = summ.true_frame_distance_m
    summ.estimated_distance_m = path_length_m(s.odom_t_s, est_rel[:, :2])
    err = true_rel[-1, :2] - est_rel[-1, :2]
    summ.final_position_error_m = float(np.hypot(*err))
    summ.final_position_error_pct = 100.0 * summ.final_position_error_m / max(summ.true_distance_m, 1e-9)
    dyaw = true_rel[-1, 2] - est_rel[-1, 2]
    summ.final_heading_error_deg = math.degrees(math.atan2(math.sin(dyaw), math.cos(dyaw)))
    if len(ex.gait_t_s) > 1:
        # What each part of the script adds to the error: the blends, each gait moving and standing.
        summ.segments = segment_errors(s.odom_t_s, est_rel, true_t, true_rel, _segments(ex))

    # Commanded against achieved speed over the spans a motion command was in force, measured as the
    # acceptance harness does (span_speeds): the body frame's own path would count the wave's swing.
    if len(ex.gait_t_s) > 1 and links is not None:
        summ.speed_spans = span_speeds(links[0], links[1], ex.gait_t_s, ex.gait_phase_rad,
                                       ex.gait_command_xy_m_s, ex.gait_steady, ex.gait_names, ex.gait_reachable)
        # Judged where the gait said it can do the command, over whole gait cycles (a part of a cycle is
        # not the gait's speed: the harness marks it too); the others are shown, not judged.
        judged = [sp for sp in summ.speed_spans if sp.judged]
        if judged:
            w = np.array([sp.window_s for sp in judged])
            summ.moving_time_s = float(w.sum())
            summ.speed_cycles = int(sum(sp.cycles for sp in judged))
            summ.commanded_speed_m_s = float(w @ [sp.commanded_m_s for sp in judged] / w.sum())
            summ.achieved_speed_m_s = float(w @ [sp.achieved_m_s for sp in judged] / w.sum())
    summ.gait_saturation_messages = ex.saturation_messages

    # Loop rate against what the wire allows, and faults.
    d = diagnostics
    summ.control_rate_hz_target = float(d.get('rate_hz_target', rb.bus.control_rate_hz))
    in_run_diag = ex.diag_rate_hz[(ex.diag_t_s > t0 + 2.0) & (ex.diag_t_s <= t1)] if len(ex.diag_t_s) else []
    summ.cycle_rate_hz = (float(np.median(in_run_diag)) if len(in_run_diag)
                          else float(d.get('cycle_rate_hz', 0)))
    summ.joint_states_rate_hz = s.rate_hz('states')
    summ.read_mode = d.get('read_mode', 'fast')
    wire = bus_cycle_wire_time_s(rb.n_joints, int(d.get('baud', DEMO_BAUD)), STATE_BLOCK.size,
                                 summ.read_mode == 'fast')
    summ.wire_time_ms, summ.wire_limit_hz = wire * 1000.0, 1.0 / wire
    summ.counters = dict(d.get('counters', {}))
    summ.stale_reads = int(sum(sv.get('stale_count', 0) for sv in d.get('servos', [])))
    summ.picture = str(plot_robot(robot, s, ex, true_t, true_rel, est_rel, summ, picture))
    return summ


# ---------------------------------------------------------------------------------------------- picture

def plot_robot(robot, s, ex, true_t, true_rel, est_rel, summ: RobotSummary, path: Path) -> Path:
    """True and estimated paths, joint-angle heatmap with gait switches, heading, loop timing; one PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import matplotlib.transforms as mtransforms

    fig = plt.figure(figsize=(15, 9))
    grid = fig.add_gridspec(3, 2, width_ratios=(1, 1.45), height_ratios=(2.2, 1, 1))
    ax = fig.add_subplot(grid[:, 0])
    ax.plot(true_rel[:, 0], true_rel[:, 1], 'k-', lw=2, label='true (MuJoCo)')
    ax.plot(est_rel[:, 0], est_rel[:, 1], '-', color='tab:orange', lw=1.5, label='estimated (odom)')
    ax.plot(0, 0, 'go', ms=8, label='start')
    ax.plot(*true_rel[-1, :2], 'ks', ms=7, label='end (true)')
    ax.plot(*est_rel[-1, :2], 's', color='tab:orange', ms=7, label='end (estimated)')
    last = None
    for t, name in s.gait_switches[1:]:
        p = np.array([np.interp(t, true_t, true_rel[:, i]) for i in range(2)])
        ax.plot(*p, 'v', color='tab:purple', ms=6)
        # Switches at one place (a gait passed through on the way to another) share one label.
        if last is not None and np.linalg.norm(p - last[0]) < 0.15:
            last[1].set_text(last[1].get_text() + ' > ' + name)
            continue
        label = ax.annotate(name, p, fontsize=8, color='tab:purple', xytext=(5, -10),
                            textcoords='offset points')
        last = (p, label)
    ax.set(xlabel='x (m), start frame: x forward', ylabel='y (m), left')
    ax.set_title(f'path: {summ.true_distance_m:.2f} m travelled (true); estimate off by '
                 f'{summ.final_position_error_m:.2f} m ({summ.final_position_error_pct:.0f} %), '
                 f'{summ.final_heading_error_deg:+.0f} deg at the end', fontsize=10)
    ax.axis('equal')
    ax.grid(alpha=0.3)
    ax.legend(loc='best', fontsize=8)

    ax_heat = fig.add_subplot(grid[0, 1])
    if len(s.states_rad):
        extent = (s.states_t_s[0], s.states_t_s[-1], len(s.joint_names) - 0.5, -0.5)
        lim = max(0.2, float(np.percentile(np.abs(s.states_rad), 99)))
        image = ax_heat.imshow(s.states_rad.T, aspect='auto', extent=extent, cmap='RdBu_r', vmin=-lim,
                               vmax=lim, interpolation='nearest')
        fig.colorbar(image, ax=ax_heat, label='joint angle (rad)', pad=0.01)
    top = mtransforms.blended_transform_factory(ax_heat.transData, ax_heat.transAxes)
    for k, (t, name) in enumerate(s.gait_switches):
        ax_heat.axvline(t, color='k', lw=1.2)
        ax_heat.text(t, 1.01 + 0.06 * (k % 2), f' {name}', transform=top, va='bottom', ha='left',
                     fontsize=7.5)
    ax_heat.set(ylabel='joint (tail to head)')
    ax_heat.set_title('measured joint angles (joint_states), gait switches marked', pad=30, fontsize=10)

    ax_yaw = fig.add_subplot(grid[1, 1], sharex=ax_heat)
    ax_yaw.plot(true_t, np.degrees(np.unwrap(true_rel[:, 2])), 'k-', lw=1.5, label='true')
    ax_yaw.plot(s.odom_t_s, np.degrees(np.unwrap(est_rel[:, 2])), '-', color='tab:orange', lw=1.2,
                label='estimated')
    for t, _ in s.gait_switches:
        ax_yaw.axvline(t, color='k', lw=0.8, alpha=0.5)
    ax_yaw.set(ylabel='heading (deg)')
    ax_yaw.set_title('body heading in the start frame', fontsize=10)
    ax_yaw.legend(loc='best', fontsize=7)
    ax_yaw.grid(alpha=0.3)

    ax_dt = fig.add_subplot(grid[2, 1], sharex=ax_heat)
    if len(s.states_t_s) > 1:
        ax_dt.plot(s.states_t_s[1:], 1000 * np.diff(s.states_t_s), lw=0.4, color='tab:blue',
                   label='joint_states period')
    target_ms = 1000.0 / summ.control_rate_hz_target if summ.control_rate_hz_target else None
    if target_ms:
        ax_dt.axhline(target_ms, color='tab:green', ls='--', lw=1.2, label=f'control period {target_ms:g} ms')
    ax_dt.axhline(summ.wire_time_ms, color='tab:red', ls=':', lw=1.5,
                  label=f'bus wire time {summ.wire_time_ms:.2f} ms')
    if len(s.states_t_s) > 1:
        p99_ms = float(np.percentile(1000 * np.diff(s.states_t_s), 99))
        ax_dt.set_ylim(0, max(3 * (target_ms or 10), p99_ms))
    if len(ex.diag_t_s):
        ax_r = ax_dt.twinx()
        ax_r.plot(ex.diag_t_s, ex.diag_rate_hz, 'o-', color='tab:gray', ms=3, lw=1)
        ax_r.set_ylabel('driver cycles/s', color='tab:gray')
        ax_r.set_ylim(0, max(1.3 * summ.control_rate_hz_target, float(np.max(ex.diag_rate_hz)) * 1.1))
    ax_dt.set(xlabel='time (s)', ylabel='period (ms)')
    ax_dt.set_title(f'loop timing: driver {summ.cycle_rate_hz:.0f} Hz (grey, median), '
                    f'joint_states {summ.joint_states_rate_hz:.0f} Hz; bus limit {summ.wire_limit_hz:.0f} Hz',
                    fontsize=10)
    ax_dt.legend(loc='upper left', fontsize=7, ncol=3)
    fig.suptitle(f'{robot}: scripted session in MuJoCo through the full node graph')
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------- video

def render_session(robot: str, mcap_path: Path, video_path: Path, log=print) -> str:
    """The session's joint_states replayed through MuJoCo to video_path (snake_control.app.render), with
    the estimated and true paths on the floor; '' with one line when this machine has no offscreen GL.

    MUJOCO_GL must be chosen before mujoco is first imported (snake_control.app.render.set_gl_backend)."""
    from snake_control.app.render import NoGL, render_trajectory
    from snake_control.estimation.trajectory_io import read_joint_trajectory
    from snake_control.robot import load_robot

    rb = load_robot(robot)
    traj = read_joint_trajectory(mcap_path, rb.joint_names, f'/{robot}/joint_states')
    started = time.monotonic()
    try:
        out = render_trajectory(rb, traj.t_s, traj.positions_rad, video_path, fps=VIDEO['fps'],
                                size=VIDEO['size'], speed=VIDEO['speed'])
    except NoGL as exc:
        log(f'no video: {exc}')
        return ''
    log(f'wrote {video_path}: {out["frames"]} frames, the session at x{VIDEO["speed"]:g} '
        f'(rendered in {time.monotonic() - started:.0f} s)')
    return str(video_path)


# ---------------------------------------------------------------------------------------------- the demo

def run_demo(out_dir: str | Path = 'out', quick: bool = False, docs_dir: str | Path | None = None,
             log=print) -> list[RobotSummary]:
    """The whole demo: each robot's session, pictures, out/demo.mcap, printed summary.

    quick: wheeled_8 only, the first QUICK_DURATION_S of its script. docs_dir: copy the pictures there.
    """
    import shutil

    from snake_control.mcap_io import merge_recordings

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    robots = (QUICK_ROBOT,) if quick else DEMO_ROBOTS
    summaries, parts = [], []
    started = time.monotonic()
    for k, robot in enumerate(robots, 1):
        tag = f'[{robot} {k}/{len(robots)}]'
        log(f'{tag} script {demo_script_path(robot)}')
        summ, mcap_path = run_robot(robot, out, duration_s=QUICK_DURATION_S if quick else None,
                                    log=lambda line, tag=tag: log(f'{tag} {line}'))
        summaries.append(summ)
        parts.append((robot, mcap_path))
        log(f'{tag} wrote {summ.picture}')
        summ.video = render_session(robot, mcap_path, out / f'demo_{robot}.mp4',
                                    log=lambda line, tag=tag: log(f'{tag} {line}'))
    counts = merge_recordings(parts, out / 'demo.mcap')
    shutil.rmtree(out / 'demo_parts', ignore_errors=True)
    log(f'wrote {out / "demo.mcap"}: {sum(counts.values())} messages on {len(counts)} topics '
        f'(one namespace per robot: {", ".join("/" + r for r in robots)})')
    if docs_dir is not None:
        docs = Path(docs_dir)
        docs.mkdir(parents=True, exist_ok=True)
        for summ in summaries:
            shutil.copy(summ.picture, docs / Path(summ.picture).name)
        log(f'copied the pictures to {docs}/')
    log('')
    log(f'=== demo summary ({time.monotonic() - started:.0f} s) ===')
    for summ in summaries:
        for line in summ.lines():
            log(line)
    return summaries
