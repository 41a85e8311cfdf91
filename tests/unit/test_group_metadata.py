"""The pure parts of the group coordinator: the group state machine (Kafka's GroupMetadata
transitions, table-tested), the members' protocol vote, the `__consumer_offsets` record formats
(every version of Kafka's record specs) and the group -> partition mapping (Java's hashCode)."""

import pytest

from coordinator import record_codec
from coordinator.group import records
from coordinator.group.group_metadata import (
    VALID_PREVIOUS,
    GroupMetadata,
    GroupState,
    IllegalGroupTransition,
    MemberMetadata,
)
from protocol import consumer_protocol as cp
from protocol.schemas import coordinator_records as specs

S = GroupState
ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
} | {(s, S.DEAD) for s in GroupState}


@pytest.mark.parametrize("source", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_transitions_are_kafkas(source, target):
    group = GroupMetadata("g", state=source)
    if (source, target) in ALLOWED:
        group.transition_to(target, 5)
        assert group.state is target and group.current_state_timestamp_ms == 5
    else:
        with pytest.raises(IllegalGroupTransition):
            group.transition_to(target)
        assert group.state is source
    assert (source in VALID_PREVIOUS[target]) == ((source, target) in ALLOWED)


def member(mid, protocols, instance=None):
    return MemberMetadata(mid, instance, "client", "/127.0.0.1", 10000, 10000, "consumer", protocols)


def test_protocol_vote_and_support():
    group = GroupMetadata("g")
    assert not group.supports_protocols("", ["range"]) and not group.supports_protocols("consumer", [])
    assert group.supports_protocols("consumer", ["range"])
    group.add(member("a", [("roundrobin", b""), ("range", b"")]))
    group.add(member("b", [("range", b""), ("roundrobin", b"")]))
    group.add(member("c", [("range", b""), ("sticky", b"")]))
    assert group.candidate_protocols() == ["range"]
    assert group.select_protocol() == "range"
    assert not group.supports_protocols("connect", ["range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert group.supports_protocols("consumer", ["sticky", "range"])
    group.remove("c")
    # a and b both support both: one vote each, the tie goes to a's preference
    assert group.select_protocol() == "roundrobin"


def test_leader_moves_when_it_leaves_and_static_members_are_tracked():
    group = GroupMetadata("g")
    group.add(member("a", [("range", b"")]))
    group.add(member("b", [("range", b"")], instance="i-b"))
    assert group.leader_id == "a" and group.static_members == {"i-b": "b"}
    assert group.is_static_member_fenced("x", "i-b") and not group.is_static_member_fenced("b", "i-b")
    group.remove("a")
    assert group.leader_id == "b"
    replaced = group.replace_static_member("i-b", "b", "b2")
    assert replaced.member_id == "b2" and group.leader_id == "b2" and group.static_members == {"i-b": "b2"}
    group.remove("b2")
    assert group.leader_id is None and group.static_members == {}


def test_next_generation_and_round_trip_through_the_stored_record():
    group = GroupMetadata("g")
    sub = cp.encode_subscription(["t1", "t2"])
    group.add(member("a", [("range", sub)], instance="i-a"))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation(1000)
    assert (group.state, group.generation_id, group.protocol_name) == (S.COMPLETING_REBALANCE, 1, "range")
    assert group.subscribed_topics() == {"t1", "t2"}
    value = records.group_value(group.stored({"a": b"assignment"}))
    loaded = GroupMetadata.loaded("g", records.decode_group_value(value), now_ms=50)
    assert loaded.state is S.STABLE and loaded.generation_id == 1 and loaded.leader_id == "a"
    assert loaded.members["a"].assignment == b"assignment" and loaded.static_members == {"i-a": "a"}
    assert loaded.members["a"].heartbeat_deadline_ms == 50 + 10000
    assert loaded.subscribed_topics() == {"t1", "t2"}
    empty = GroupMetadata.loaded("g", records.decode_group_value(records.group_value(GroupMetadata("g").stored())), 0)
    assert empty.state is S.EMPTY


# ---- records -----------------------------------------------------------------------------------
def test_java_hash_and_partition_for():
    assert record_codec.java_string_hash("") == 0
    assert record_codec.java_string_hash("hello") == 99162322
    assert record_codec.java_string_hash("Aa") == record_codec.java_string_hash("BB") == 2112  # Java's famous collision
    # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0, not to a negative partition
    assert record_codec.java_string_hash("polygenelubricants") == -(1 << 31)
    assert records.partition_for("polygenelubricants", 50) == 0
    assert records.partition_for("hello", 50) == 99162322 % 50
    assert record_codec.java_string_hash("\U0001f600") == (0xD83D * 31 + 0xDE00)  # UTF-16 surrogates


def test_offset_records_round_trip_in_the_versions_we_write():
    key = records.offset_key("g", "t", 3)
    assert key[:2] == b"\x00\x01"
    assert records.decode_key(key) == records.OffsetKey("g", "t", 3)
    om = records.OffsetAndMetadata(42, 7, "meta", 1000)
    value = records.offset_value(om)
    assert value[:2] == b"\x00\x03" and records.decode_offset_value(value) == om
    with_expiry = records.OffsetAndMetadata(42, -1, "", 1000, 5000)
    value = records.offset_value(with_expiry)
    assert value[:2] == b"\x00\x01" and records.decode_offset_value(value) == with_expiry
    assert records.decode_key(records.group_key("g")) == records.GroupKey("g")


@pytest.mark.parametrize("version", sorted(specs.OFFSET_COMMIT_VALUE))
def test_every_offset_value_version_kafka_wrote_is_read(version):
    fields = {"offset": 9, "leader_epoch": 4, "metadata": "m", "commit_timestamp": 77, "expire_timestamp": 99}
    schema = specs.OFFSET_COMMIT_VALUE[version]
    data = version.to_bytes(2, "big") + schema.build({k: v for k, v in fields.items() if k in schema.default()})
    om = records.decode_offset_value(data)
    assert (om.offset, om.metadata, om.commit_timestamp_ms) == (9, "m", 77)
    assert om.leader_epoch == (4 if version >= 3 else -1)
    assert om.expire_timestamp_ms == (99 if version == 1 else None)


@pytest.mark.parametrize("version", sorted(specs.GROUP_METADATA_VALUE))
def test_every_group_value_version_kafka_wrote_is_read(version):
    m = {
        "member_id": "m1",
        "group_instance_id": "i1",
        "client_id": "c",
        "client_host": "/h",
        "rebalance_timeout": 300,
        "session_timeout": 100,
        "subscription": b"s",
        "assignment": b"a",
    }
    v = {"protocol_type": "consumer", "generation": 3, "protocol": "range", "leader": "m1"}
    v["current_state_timestamp"] = 5
    v["members"] = [m]
    data = version.to_bytes(2, "big") + specs.GROUP_METADATA_VALUE[version].build(v)
    g = records.decode_group_value(data)
    assert (g.protocol_type, g.generation, g.protocol, g.leader) == ("consumer", 3, "range", "m1")
    (member_read,) = g.members
    assert member_read.rebalance_timeout_ms == (300 if version >= 1 else 100)
    assert member_read.group_instance_id == ("i1" if version >= 3 else None)
    assert g.current_state_timestamp_ms == (5 if version >= 2 else -1)


@pytest.mark.parametrize(
    "data", [b"", b"\x00", b"\x00\x09abc", b"\x00\x01\x00\x05ab", records.offset_key("g", "t", 1)[:-2]]
)
def test_unreadable_records_raise_a_clear_error(data):
    with pytest.raises(records.CorruptCoordinatorRecord):
        records.decode_key(data)
    with pytest.raises(records.CorruptCoordinatorRecord):
        records.decode_offset_value(data)


def test_consumer_protocol_round_trip():
    sub = cp.encode_subscription(["a", "b"], b"ud", {"a": [0, 1]}, version=1)
    assert cp.decode_subscription(sub) == (["a", "b"], {"a": [0, 1]})
    assert cp.subscribed_topics(sub) == {"a", "b"}
    assert cp.subscribed_topics(b"\x00") is None
    assignment = cp.encode_assignment({"a": [0, 2], "b": [1]})
    assert cp.decode_assignment(assignment) == {"a": [0, 2], "b": [1]}
    assert cp.decode_assignment(b"") == {}
