"""`snake odometry --replay`: a recording's inputs through the estimator as estimator_node runs them, judged
against the recording's truth and set beside the odometry the graph itself recorded.

The inputs (joint_states, imu) go through snake_control.estimation.replay.replay_estimator with the
parameters the node had: its defaults, the robot YAML's, and in a recording of the MuJoCo world (one with
the truth tree, snake_control.app.truth) what the graph passes the node there
(snake_control.app.graph.estimator_parameters). Any of them can be changed to try another setting on the
same inputs. The figures are the demo's (snake_control.app.demo): the end error relative to the pose at
the start, in % of the distance the link centroid travelled, and each script segment's own error.

    report = replay_recording('out/demo_parts/pitch_yaw_32.mcap', 'pitch_yaw_32', contact_enter_m=0.0075)
    report.lines(), report.to_dict()
"""
from __future__ import annotations

import inspect
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

# estimator_node's parameters a replay may change (besides these, any Estimator keyword).
from snake_control.estimation.pipeline import ESTIMATE_PARAMETERS as NODE_PARAMETERS


def estimator_keywords() -> list[str]:
    """The Estimator's keyword parameters a replay can set (besides the node's parameters)."""
    from snake_control.estimation.estimator import Estimator

    return [name for name, p in inspect.signature(Estimator.__init__).parameters.items()
            if p.kind == p.KEYWORD_ONLY and name not in NODE_PARAMETERS and name != 'initial_pose']


@dataclass(frozen=True)
class EndError:
    """An estimate's error at the end of [t_start_s, t_end_s] relative to its pose at the start, as the
    demo reports it: the distance the truth's link centroid travelled (m), position error (m, and % of
    that distance), heading error (true less estimated turn, deg)."""

    t_start_s: float
    t_end_s: float
    distance_m: float
    error_m: float
    error_pct: float
    heading_error_deg: float


def end_error(est_t_s, est_xyyaw, true_t_s, true_xyyaw, centroid_t_s, centroid_xy_m, t_start_s: float,
              t_end_s: float) -> EndError:
    """EndError of an estimate (times (k,) s, poses (k, 3) x m, y m, yaw rad) against the truth (times
    (m,), body poses (m, 3); the link centroid (p,) s, (p, 2) m for the distance) over [t_start_s,
    t_end_s], all on one clock."""
    from snake_control.app.demo import path_length_m, segment_errors

    whole = segment_errors(est_t_s, est_xyyaw, true_t_s, true_xyyaw, [(t_start_s, t_end_s, 'whole')])
    if not whole:
        raise ValueError(f'the estimate and the truth do not overlap in [{t_start_s}, {t_end_s}] s')
    t, xy = np.asarray(centroid_t_s, dtype=float), np.asarray(centroid_xy_m, dtype=float)
    keep = (t >= t_start_s) & (t <= t_end_s)
    distance = path_length_m(t[keep], xy[keep])
    err = whole[0]
    return EndError(t_start_s, t_end_s, distance, err.error_m, 100.0 * err.error_m / max(distance, 1e-9),
                    err.heading_error_deg)


@dataclass
class ReplayReport:
    """What `snake odometry --replay` prints: see the module docstring. Times are the recording's stamps
    (s); segments are snake_control.app.demo.SegmentError lists."""

    path: str
    robot: str
    topics: dict
    parameters: dict
    world: str
    duration_s: float
    samples: int
    counts: dict
    final_xyyaw: tuple
    track: object = None                # estimation.replay.ReplayTrack (not in to_dict)
    recorded: tuple | None = None       # the recorded odom (t_s (m,), xyyaw (m, 3)) (not in to_dict)
    truth: tuple | None = None          # the true body frame (t_s (p,), xyyaw (p, 3)) (not in to_dict)
    updates: str = ''                   # which joint_states updated: 'recorded odom' (its stamps) or the rate
    difference: object = None           # estimation.replay.TrackDifference against the recorded odom
    end: EndError | None = None
    recorded_end: EndError | None = None
    segments: list = field(default_factory=list)
    recorded_segments: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain data for JSON (NaN as None)."""
        def clean(value):
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            if isinstance(value, np.generic):
                return clean(value.item())
            return value

        out = {k: getattr(self, k) for k in ('path', 'robot', 'topics', 'parameters', 'world', 'duration_s',
                                               'samples', 'counts', 'final_xyyaw')}
        out['difference'] = None if self.difference is None else asdict(self.difference)
        for key in ('end', 'recorded_end'):
            out[key] = None if getattr(self, key) is None else asdict(getattr(self, key))
        for key in ('segments', 'recorded_segments'):
            out[key] = [asdict(s) for s in getattr(self, key)]
        return clean(out)

    def lines(self) -> list[str]:
        c = self.counts
        at = ' (on the stamps of the recorded odom)' if self.updates == 'recorded odom' else ''
        shown = ', '.join(f'{k} {v:g}' if isinstance(v, float) else f'{k} {v}'
                          for k, v in self.parameters.items() if v is not None)
        out = [f'replay of {self.path}: {self.robot}, {self.topics["joint_states"]}'
               + (f' + {self.topics["imu"]}' if self.parameters.get('use_imu') else
                  f' ({self.topics["imu"]} not fused)' if self.topics.get('imu') else ''),
               '  estimator as estimator_node with '
               + ('the MuJoCo graph\'s parameters' if self.world == 'mujoco' else 'its defaults')
               + f': {shown}',
               f'  {self.samples} updates over {self.duration_s:.1f} s{at}: joint_states {c["received"]} received, '
               f'{c["decimated"]} decimated, {c["rejected"] + sum(v for k, v in c.items() if k in REJECTIONS)} '
               f'rejected; imu {c["imu_received"]} received, {c["imu_gaps"]} gaps, {c["imu_bridged"]} bridged',
               f'  final pose x {self.final_xyyaw[0]:.3f} m, y {self.final_xyyaw[1]:.3f} m, '
               f'heading {math.degrees(self.final_xyyaw[2]):.1f} deg']
        d = self.difference
        if d is not None:
            out.append(f'  against the recorded odom ({self.topics["odom"]}, {d.common} stamps in common; '
                       f'{d.recorded_only} only recorded, {d.replay_only} only replayed): position differs by '
                       f'{d.max_position_m:.4f} m at most, {d.end_position_m:.4f} m at the end; heading by '
                       f'{d.max_heading_deg:.2f} deg at most')
        if self.end is None:
            out.append('  no ground truth in the recording: no error figures')
            return out
        e = self.end
        out.append(f'  end error from {e.t_end_s - e.t_start_s:.1f} s ({e.distance_m:.2f} m travelled, the link '
                   f'centroid\'s path): replay {e.error_m:.3f} m ({e.error_pct:.1f} %), heading '
                   f'{e.heading_error_deg:+.1f} deg'
                   + ('' if self.recorded_end is None else
                      f'; recorded odom {self.recorded_end.error_m:.3f} m ({self.recorded_end.error_pct:.1f} %), '
                      f'heading {self.recorded_end.heading_error_deg:+.1f} deg'))
        if self.segments:
            recorded = {(s.label, round(s.t_start_s, 3)): s for s in self.recorded_segments}
            out.append('  error by script segment (its own motion from its start, split along and across its true '
                       'travel; true distance in brackets)'
                       + (': replay | recorded odom' if recorded else ''))
            t0 = self.segments[0].t_start_s
            for s in self.segments:
                other = recorded.get((s.label, round(s.t_start_s, 3)))
                split = '' if math.isnan(s.along_m) else f' (along {s.along_m:+.3f}, across {s.across_m:+.3f})'
                out.append(f'    {s.label} from {s.t_start_s - t0:.0f} s ({s.t_end_s - s.t_start_s:.1f} s): '
                           f'{s.error_m:.3f} m{split} ({s.true_m:.2f} m), heading {s.heading_error_deg:+.1f} deg'
                           + ('' if other is None else
                              f' | {other.error_m:.3f} m, {other.heading_error_deg:+.1f} deg'))
        return out


REJECTIONS = ('input_future_stamp', 'input_old_stamp', 'input_out_of_limits', 'input_too_fast')


def node_parameters(robot, robot_arg: str, world: str, has_imu: bool) -> dict:
    """estimator_node's parameters for a replay: its defaults (estimation.pipeline.EstimatorParams), in the
    MuJoCo world those the graph passes it (app.graph.estimator_parameters); use_imu whenever the recording
    has an imu (the graph fuses the MuJoCo world's). world: 'mujoco' or 'none'."""
    from snake_control.app.graph import GraphArgs, estimator_parameters
    from snake_control.estimation.replay import NODE_DEFAULTS

    params = dict(NODE_DEFAULTS)
    if world == 'mujoco':
        graph = estimator_parameters(robot, robot_arg, GraphArgs(robot=robot_arg, physics='mujoco'))
        params.update({k: v for k, v in graph.items() if k != 'robot'})
    params['use_imu'] = bool(has_imu)
    return params


def replay_recording(path, robot_arg: str, *, topic: str | None = None, world: str = 'auto',
                     **overrides) -> ReplayReport:
    """Replay a recording (see the module docstring). robot_arg: a shipped robot name or YAML path; topic:
    its joint_states topic (default: the one named joint_states); world: 'auto' (MuJoCo when the recording
    has the truth tree), 'mujoco' or 'none'; overrides: node parameters (NODE_PARAMETERS) and Estimator
    keywords (estimator_keywords()) to change. ValueError naming the file and topic for a recording the
    replay cannot read."""
    from mcap.reader import make_reader

    from snake_control.app.demo import recording_segments, segment_errors
    from snake_control.app.truth import read_truth_tree, truth_topic_of
    from snake_control.estimation.estimator import BodyFrameTracker
    from snake_control.estimation.replay import (compare_tracks, read_estimator_inputs, replay_estimator,
                                                 xyyaw_from_xyz_quat)
    from snake_control.kinematics.lie import xyyaw_from_se3
    from snake_control.robot import load_robot

    unknown = set(overrides) - set(NODE_PARAMETERS) - set(estimator_keywords())
    if unknown:
        raise ValueError(f'unknown estimator parameter(s) {sorted(unknown)}; known: '
                         f'{sorted(NODE_PARAMETERS + tuple(estimator_keywords()))}')
    robot = load_robot(robot_arg)
    path = Path(path)
    inputs = read_estimator_inputs(path, robot, topic)
    with path.open('rb') as f:
        summary = make_reader(f).get_summary()
        topics = {c.topic for c in summary.channels.values()}
    namespace = inputs.topics['joint_states'].rsplit('/', 1)[0]
    truth_topic = truth_topic_of(topics, namespace)
    if world == 'auto':
        world = 'mujoco' if truth_topic else 'none'
    if world not in ('mujoco', 'none'):
        raise ValueError(f"world: expected auto, mujoco or none, got {world!r}")
    params = node_parameters(robot, robot_arg, world, len(inputs.imu_t_s) > 0)
    params.update(overrides)
    if params['use_imu'] and not len(inputs.imu_t_s):
        raise ValueError(f'{path}: no sensor_msgs/Imu topic beside {inputs.topics["joint_states"]} to fuse')
    # The node's updates are its odom stamps: follow them, unless the replay tries another rate.
    follow = len(inputs.odom_t_s) > 1 and 'update_rate_hz' not in overrides
    track = replay_estimator(robot, inputs, updates_at=inputs.odom_t_s if follow else None, **params)
    if len(track.t_s) < 2:
        raise ValueError(f'{path}: {inputs.topics["joint_states"]}: the estimator took fewer than two of its '
                         f'{len(inputs.joints_t_s)} joint_states')
    est_xyyaw = track.xyyaw
    report = ReplayReport(str(path), robot.name, {**inputs.topics, 'truth': truth_topic}, params, world,
                          float(track.t_s[-1] - track.t_s[0]), len(track.t_s), track.counts,
                          tuple(float(v) for v in est_xyyaw[-1]), track, updates='recorded odom' if follow
                          else f'{params["update_rate_hz"]:g} Hz')
    recorded = None
    if len(inputs.odom_t_s) > 1:
        recorded = (inputs.odom_t_s, xyyaw_from_xyz_quat(inputs.odom_xyz_quat))
        report.recorded = recorded
        report.difference = compare_tracks(track.t_s, est_xyyaw, *recorded)
    if truth_topic is None:
        return report
    true_t, centres = read_truth_tree(path, robot, truth_topic)
    tracker = BodyFrameTracker(robot, params.get('body_frame'))
    body = np.array([tracker(c) for c in centres])
    true_xyyaw = xyyaw_from_se3(body)
    centroid = centres[:, :, :2, 3].mean(axis=1)
    report.truth = (true_t, true_xyyaw)
    # One window for the replay and the recorded odom: where every track has samples.
    tracks = [track.t_s, true_t] + ([recorded[0]] if recorded else [])
    t0, t1 = max(float(t[0]) for t in tracks), min(float(t[-1]) for t in tracks)
    report.end = end_error(track.t_s, est_xyyaw, true_t, true_xyyaw, true_t, centroid, t0, t1)
    segments = [(max(a, t0), min(b, t1), label) for a, b, label in recording_segments(path, namespace)]
    report.segments = segment_errors(track.t_s, est_xyyaw, true_t, true_xyyaw, segments)
    if recorded:
        report.recorded_end = end_error(*recorded, true_t, true_xyyaw, true_t, centroid, t0, t1)
        report.recorded_segments = segment_errors(*recorded, true_t, true_xyyaw, segments)
    return report


def plot_replay(report: ReplayReport, path) -> Path:
    """The replay's path beside the recorded odom's and the truth's, each from its own pose at the replay's
    first stamp (the start frame: x forward), and their headings over time; one PNG, PDF or SVG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from snake_control.kinematics.lie import se2_relative

    t_start, t_end = float(report.track.t_s[0]), float(report.track.t_s[-1])
    tracks = [('true (truth tree)', report.truth, 'k', 2.0), ('recorded odom (graph)', report.recorded,
                                                                'tab:orange', 1.5),
              ('replay', (report.track.t_s, report.track.xyyaw), 'tab:blue', 1.0)]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={'width_ratios': [1.2, 1]})
    for label, data, colour, width in tracks:
        if data is None:
            continue
        t, xyyaw = data
        inside = (t >= t_start) & (t <= t_end)
        t, xyyaw = t[inside], xyyaw[inside]
        origin = [np.interp(t_start, t, xyyaw[:, 0]), np.interp(t_start, t, xyyaw[:, 1]),
                  np.interp(t_start, t, np.unwrap(xyyaw[:, 2]))]
        rel = se2_relative(xyyaw, origin)
        ax.plot(rel[:, 0], rel[:, 1], '-', color=colour, lw=width, label=label)
        bx.plot(t - t_start, np.degrees(np.unwrap(rel[:, 2])), '-', color=colour, lw=width, label=label)
    ax.plot(0, 0, 'go', ms=7, label='start')
    ax.set(xlabel='x (m), start frame: x forward', ylabel='y (m), left', aspect='equal')
    ax.set_title(f'{report.robot}: replay of {Path(report.path).name}', fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc='best', fontsize=8)
    bx.set(xlabel='time (s)', ylabel='heading (deg)')
    bx.set_title('heading in the start frame', fontsize=10)
    bx.grid(alpha=0.3)
    bx.legend(loc='best', fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
