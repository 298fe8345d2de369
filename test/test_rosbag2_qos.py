"""`ros2 bag` reads the QoS of every channel the package writes, as rosbag2 decodes it.

rosbag2 is not installable here (no ROS install; the team's ros2-tools folder has no rosbag2), so
rosbag2_read_qos restates its reader's rules, from the ros2/rosbag2 sources:
- rosbag2_storage_mcap, mcap_storage.cpp, MCAPStorage::read_metadata: the bag's metadata version is that
  of a 'rosbag2' metadata record's serialized_metadata; a 'rosbag2' record without serialized_metadata
  means version 8; a file without the record keeps the reader's own version (9 from Jazzy on).
- rosbag2_storage, qos.cpp, convert<Rosbag2QoS>::decode: history as an integer (or a name); reliability,
  durability and liveliness as rmw integers for version <= 8, as names from version 9 (a name the rmw
  does not know, such as "1", becomes UNKNOWN); depth an integer; deadline, lifespan and
  liveliness_lease_duration {sec, nsec}, where Fast DDS's Foxy "infinite" {0x7FFFFFFF, 0xFFFFFFFF}
  means infinite; avoid_ros_namespace_conventions a bool. offered_qos_profiles is a YAML sequence.
"""
import math

import numpy as np
import pytest
import yaml

from snake_control.mcap_io import RawWriter, add_messages, merge_recordings, offered_qos_profiles

JAZZY_METADATA_VERSION = 9
# rmw_qos_*_policy_t, as rmw's types.h numbers them.
HISTORY = {0: 'system_default', 1: 'keep_last', 2: 'keep_all'}
RELIABILITY = {0: 'system_default', 1: 'reliable', 2: 'best_effort', 4: 'best_available'}
DURABILITY = {0: 'system_default', 1: 'transient_local', 2: 'volatile', 4: 'best_available'}
LIVELINESS = {0: 'system_default', 1: 'automatic', 3: 'manual_by_topic', 4: 'best_available'}
FOXY_FASTRTPS_INFINITE = (0x7FFFFFFF, 0xFFFFFFFF)


def _policy(value, table, version):
    if version <= 8:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f'version {version}: expected an integer policy, got {value!r}')
        return table.get(value, 'unknown')
    return value if value in table.values() else 'unknown'     # rmw_qos_*_policy_from_str


def _duration(node):
    sec, nsec = int(node['sec']), int(node['nsec'])
    return math.inf if (sec, nsec) == FOXY_FASTRTPS_INFINITE else sec + nsec * 1e-9


def rosbag2_read_qos(path) -> dict:
    """{topic: [profile dicts with policy names]} as rosbag2's MCAP reader decodes the file (see above)."""
    from mcap.reader import make_reader

    with open(path, 'rb') as f:
        reader = make_reader(f)
        version = JAZZY_METADATA_VERSION
        for record in reader.iter_metadata():
            if record.name == 'rosbag2':
                serialized = record.metadata.get('serialized_metadata', '')
                version = (yaml.safe_load(serialized)['rosbag2_bagfile_information']['version']
                           if serialized else 8)
        channels = reader.get_summary().channels.values()
    out = {}
    for channel in channels:
        text = channel.metadata.get('offered_qos_profiles', '')
        profiles = yaml.safe_load(text) if text else []
        if not isinstance(profiles, list):
            raise ValueError(f'{channel.topic}: offered_qos_profiles is not a YAML sequence')
        decoded = []
        for p in profiles:
            history = p['history']
            history = HISTORY.get(history, 'unknown') if isinstance(history, int) else history
            decoded.append({
                'history': history, 'depth': int(p['depth']),
                'reliability': _policy(p['reliability'], RELIABILITY, version),
                'durability': _policy(p['durability'], DURABILITY, version),
                'liveliness': _policy(p['liveliness'], LIVELINESS, version),
                'deadline': _duration(p['deadline']), 'lifespan': _duration(p['lifespan']),
                'liveliness_lease_duration': _duration(p['liveliness_lease_duration']),
                'avoid_ros_namespace_conventions': bool(p['avoid_ros_namespace_conventions'])})
        out[channel.topic] = decoded
    return out


def write_sample(path):
    w = RawWriter(path)
    w.register('/snake/joint_states', 'sensor_msgs/msg/JointState', offered_qos_profiles('best_effort', depth=5))
    w.register('/snake/robot_description', 'std_msgs/msg/String',
               offered_qos_profiles('reliable', 'transient_local', depth=1))
    w.register('/snake/odom', 'nav_msgs/msg/Odometry')
    # Bytes only: no reader here decodes them, and the rewriting functions copy only channels with messages.
    for k, topic in enumerate(EXPECTED):
        w.write(topic, b'\x00\x01\x00\x00', 1_000 + k)
    w.close()
    return path


EXPECTED = {
    '/snake/joint_states': ('best_effort', 'volatile', 5),
    '/snake/robot_description': ('reliable', 'transient_local', 1),
    '/snake/odom': ('reliable', 'volatile', 10),
}


def assert_replays_as_recorded(qos, expected=EXPECTED):
    for topic, (reliability, durability, depth) in expected.items():
        [p] = qos[topic]
        assert (p['reliability'], p['durability'], p['depth'], p['history']) == (reliability, durability, depth,
                                                                                  'keep_last'), (topic, p)
        assert p['liveliness'] == 'automatic' and p['deadline'] == math.inf and p['lifespan'] == math.inf


def test_rosbag2_reads_the_recorders_qos(tmp_path):
    assert_replays_as_recorded(rosbag2_read_qos(write_sample(tmp_path / 'r.mcap')))


def test_without_the_rosbag2_record_jazzy_would_read_unknown_policies(tmp_path):
    """Why the record is written: the same channels in a file without it are read at Jazzy's version 9,
    where the rmw integers are no policy names."""
    from mcap.reader import make_reader
    from mcap.writer import Writer

    src = write_sample(tmp_path / 'r.mcap')
    bare = tmp_path / 'bare.mcap'
    with open(src, 'rb') as f_in, open(bare, 'wb') as f_out:
        reader = make_reader(f_in)
        summary = reader.get_summary()
        writer = Writer(f_out)
        writer.start(profile='ros2', library='test')
        for sid, schema in summary.schemas.items():
            writer.register_schema(schema.name, schema.encoding, schema.data)
        for channel in summary.channels.values():
            writer.register_channel(channel.topic, channel.message_encoding, channel.schema_id,
                                    dict(channel.metadata))
        writer.finish()
    qos = rosbag2_read_qos(bare)
    assert {p['reliability'] for profiles in qos.values() for p in profiles} == {'unknown'}


def test_merged_and_rewritten_files_keep_the_record(tmp_path):
    from snake_control.mcap_io import TF_MESSAGE_MSGDEF, TF_MESSAGE_TYPE, tf_message
    a = write_sample(tmp_path / 'a.mcap')
    added = add_messages(a, '/truth/tf', TF_MESSAGE_TYPE, TF_MESSAGE_MSGDEF,
                         [(2_000, tf_message(0.0, [('odom', 'truth/link_0', np.eye(4))]))])
    assert added == 1
    qos = rosbag2_read_qos(a)
    assert_replays_as_recorded(qos)
    assert qos['/truth/tf'][0]['reliability'] == 'reliable'
    merged = tmp_path / 'm.mcap'
    merge_recordings([('snake', a)], merged)
    assert_replays_as_recorded(rosbag2_read_qos(merged))


@pytest.mark.parametrize('bad', [{'reliability': 'often'}, {'durability': 'forever'}, {'history': 'some'}])
def test_bad_policy_names_are_refused(bad):
    with pytest.raises(ValueError, match=list(bad)[0]):
        offered_qos_profiles(**bad)


def test_topics_without_messages_survive_rewrite_and_merge(tmp_path):
    """A subscriber that heard nothing still leaves its channel; rewriting or merging the file keeps it."""
    from mcap.reader import make_reader

    from snake_control.mcap_io import TF_MESSAGE_MSGDEF, TF_MESSAGE_TYPE, tf_message
    a = write_sample(tmp_path / 'a.mcap')
    w = RawWriter(tmp_path / 'quiet.mcap')
    w.register('/snake/imu', 'sensor_msgs/msg/Imu', definition='float64 x\n')
    w.close()
    add_messages(tmp_path / 'quiet.mcap', '/truth/tf', TF_MESSAGE_TYPE, TF_MESSAGE_MSGDEF,
                 [(2_000, tf_message(0.0, [('odom', 'truth/link_0', np.eye(4))]))])

    def topics(path):
        with open(path, 'rb') as f:
            return {c.topic for c in make_reader(f).get_summary().channels.values()}
    assert topics(tmp_path / 'quiet.mcap') == {'/snake/imu', '/truth/tf'}
    counts = merge_recordings([('snake', a), ('other', tmp_path / 'quiet.mcap')], tmp_path / 'm.mcap')
    assert counts['/other/snake/imu'] == 0 and counts['/other/truth/tf'] == 1
    assert topics(tmp_path / 'm.mcap') == set(counts)
