"""The records a share group (KIP-932) writes to `__consumer_offsets`, typed, and their bytes.

Format (Kafka 4's record specs `ShareGroup*Key/Value.json`, `protocol/schemas/
coordinator_records.py`): the key is an int16 holding the record type, then the key struct (its
version 0); the value an int16 version (0) then the value struct; a null value is a tombstone.

| type | key (group id, member id) | value |
|---|---|---|
| 10 | ShareGroupMemberMetadata (group, member) | rack id, client id and host, subscribed topic names |
| 11 | ShareGroupMetadata (group) | the group epoch and the hash of the subscribed topics' metadata |
| 12 | ShareGroupTargetAssignmentMetadata (group) | the assignment epoch |
| 13 | ShareGroupTargetAssignmentMember (group, member) | the member's target assignment |
| 14 | ShareGroupCurrentMemberAssignment (group, member) | member epoch, previous epoch, state, partitions |
| 15 | ShareGroupStatePartitionMetadata (group) | the topic-partitions whose share state is initializing, initialized, being deleted |

`ShareRecord` is one record in memory; `encode` gives its (key, value) bytes and `decode(key,
value)` reads one back (raises `CorruptCoordinatorRecord` for bytes it cannot read).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from coordinator.group.consumer_records import Assignment, partitions_in, partitions_out
from coordinator.record_codec import VERSION_PREFIX, CorruptCoordinatorRecord, build_versioned, parse_versioned
from protocol.schemas import coordinator_records as specs

MEMBER_METADATA = 10
GROUP_EPOCH = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
KINDS = range(10, 16)

_KEY_SPECS = {
    MEMBER_METADATA: specs.SHARE_GROUP_MEMBER_METADATA_KEY,
    GROUP_EPOCH: specs.SHARE_GROUP_METADATA_KEY,
    TARGET_ASSIGNMENT_METADATA: specs.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    TARGET_ASSIGNMENT_MEMBER: specs.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CURRENT_ASSIGNMENT: specs.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
    STATE_PARTITION_METADATA: specs.SHARE_GROUP_STATE_PARTITION_METADATA_KEY,
}
_VALUE_SPECS = {
    MEMBER_METADATA: specs.SHARE_GROUP_MEMBER_METADATA_VALUE,
    GROUP_EPOCH: specs.SHARE_GROUP_METADATA_VALUE,
    TARGET_ASSIGNMENT_METADATA: specs.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    TARGET_ASSIGNMENT_MEMBER: specs.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CURRENT_ASSIGNMENT: specs.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    STATE_PARTITION_METADATA: specs.SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
}
#: the on-disk key "version" is the record type; its struct is the spec's version 0
_KEYS_BY_TYPE = {kind: maps[0] for kind, maps in _KEY_SPECS.items()}
_MEMBER_KINDS = {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_ASSIGNMENT}


@dataclass(frozen=True)
class ShareMemberMetadata:
    """What record 10 holds of a member: its identity and subscription."""

    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupEpoch:
    """What record 11 holds: the group epoch and the hash of the metadata of the topics its
    members subscribe to (a change of partitions bumps the epoch)."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class ShareCurrentAssignment:
    """What record 14 holds: the member's epoch (and the one before) and its partitions. A share
    member is always reconciled at once (state 0, Stable): nothing is revoked first."""

    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    state: int = 0


#: topic id -> (topic name, partitions)
TopicPartitions = dict[uuid.UUID, tuple[str, frozenset[int]]]


@dataclass(frozen=True)
class StatePartitionMetadata:
    """What record 15 holds: the topic-partitions whose share-partition state the share
    coordinator is initializing or holds (so DeleteGroups, DeleteShareGroupOffsets and
    DescribeShareGroupOffsets know them), and the topics whose state is being deleted."""

    initializing: TopicPartitions = field(default_factory=dict)
    initialized: TopicPartitions = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)


def _infos_out(topics: TopicPartitions) -> list[dict[str, Any]]:
    return [
        {"topic_id": t, "topic_name": name, "partitions": sorted(parts)}
        for t, (name, parts) in sorted(topics.items(), key=lambda kv: kv[1][0])
    ]


def _infos_in(infos) -> TopicPartitions:
    return {i["topic_id"]: (i["topic_name"], frozenset(i["partitions"])) for i in infos}


@dataclass(frozen=True)
class ShareRecord:
    kind: int
    group_id: str
    member_id: str | None = None
    #: ShareMemberMetadata | GroupEpoch | int (assignment epoch) | Assignment | ShareCurrentAssignment |
    #: StatePartitionMetadata | None
    value: Any = None


def is_share_key(key: bytes | None) -> bool:
    return key is not None and len(key) >= 2 and VERSION_PREFIX.unpack_from(key)[0] in KINDS


def encode(record: ShareRecord) -> tuple[bytes, bytes | None]:
    key_fields: dict[str, Any] = {"group_id": record.group_id}
    if record.kind in _MEMBER_KINDS:
        key_fields["member_id"] = record.member_id
    key = build_versioned(_KEYS_BY_TYPE, record.kind, key_fields)
    if record.value is None:
        return key, None
    v = record.value
    fields: dict[str, Any]
    if record.kind == MEMBER_METADATA:
        fields = {
            "rack_id": v.rack_id,
            "client_id": v.client_id,
            "client_host": v.client_host,
            "subscribed_topic_names": list(v.subscribed_topic_names),
        }
    elif record.kind == GROUP_EPOCH:
        fields = {"epoch": v.epoch, "metadata_hash": v.metadata_hash}
    elif record.kind == TARGET_ASSIGNMENT_METADATA:
        fields = {"assignment_epoch": v}
    elif record.kind == TARGET_ASSIGNMENT_MEMBER:
        fields = {"topic_partitions": partitions_out(v)}
    elif record.kind == STATE_PARTITION_METADATA:
        fields = {
            "initializing_topics": _infos_out(v.initializing),
            "initialized_topics": _infos_out(v.initialized),
            "deleting_topics": [
                {"topic_id": t, "topic_name": n} for t, n in sorted(v.deleting.items(), key=lambda kv: kv[1])
            ],
        }
    else:
        fields = {
            "member_epoch": v.member_epoch,
            "previous_member_epoch": v.previous_member_epoch,
            "state": v.state,
            "assigned_partitions": partitions_out(v.assigned),
        }
    return key, build_versioned(_VALUE_SPECS[record.kind], 0, fields)


def decode(key: bytes, value: bytes | None) -> ShareRecord:
    """One record of types 10-15 read back. Raises CorruptCoordinatorRecord."""
    kind, k = parse_versioned(_KEYS_BY_TYPE, key, "share group key")
    member_id = k.get("member_id") if kind in _MEMBER_KINDS else None
    if value is None:
        return ShareRecord(kind, k["group_id"], member_id)
    _, v = parse_versioned(_VALUE_SPECS[kind], value, f"share group record {kind}")
    typed: Any
    if kind == MEMBER_METADATA:
        typed = ShareMemberMetadata(v["rack_id"], v["client_id"], v["client_host"], tuple(v["subscribed_topic_names"]))
    elif kind == GROUP_EPOCH:
        typed = GroupEpoch(v["epoch"], v["metadata_hash"])
    elif kind == TARGET_ASSIGNMENT_METADATA:
        typed = v["assignment_epoch"]
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        typed = partitions_in(v["topic_partitions"])
    elif kind == STATE_PARTITION_METADATA:
        typed = StatePartitionMetadata(
            _infos_in(v["initializing_topics"]),
            _infos_in(v["initialized_topics"]),
            {i["topic_id"]: i["topic_name"] for i in v["deleting_topics"]},
        )
    else:
        typed = ShareCurrentAssignment(
            v["member_epoch"], v["previous_member_epoch"], partitions_in(v["assigned_partitions"]), v["state"]
        )
    return ShareRecord(kind, k["group_id"], member_id, typed)


__all__ = ["CorruptCoordinatorRecord", "ShareRecord", "decode", "encode", "is_share_key"]
