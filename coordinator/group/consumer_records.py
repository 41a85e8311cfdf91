"""The records a consumer group (KIP-848) writes to `__consumer_offsets`, typed, and their bytes.

Format (Kafka's record specs `ConsumerGroup*Key/Value.json`, `protocol/schemas/
coordinator_records.py`): the key is an int16 key version then the key struct, the value an int16
value version (0) then the value struct; a null value is a tombstone. Key versions:

| version | key (group id, member id) | value |
|---|---|---|
| 3 | ConsumerGroupMetadata (group) | the group epoch |
| 4 | ConsumerGroupPartitionMetadata (group) | the subscribed topics: id, name, partitions |
| 5 | ConsumerGroupMemberMetadata (group, member) | instance/rack/client ids, subscription, assignor |
| 6 | ConsumerGroupTargetAssignmentMetadata (group) | the assignment epoch |
| 7 | ConsumerGroupTargetAssignmentMember (group, member) | the member's target assignment |
| 8 | ConsumerGroupCurrentMemberAssignment (group, member) | member epoch, state, assigned, pending revocation |

`ConsumerRecord` is one record in memory (`kind`, group, member, typed value or None); `encode`
gives its (key, value) bytes and `decode(key, value)` reads one back (raises
`CorruptCoordinatorRecord` for bytes it cannot read).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from coordinator.record_codec import VERSION_PREFIX, CorruptCoordinatorRecord, build_versioned, parse_versioned
from protocol.schemas import coordinator_records as specs

GROUP_EPOCH = 3
SUBSCRIPTION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_ASSIGNMENT = 8
KINDS = range(3, 9)

_KEY_SPECS = {
    GROUP_EPOCH: specs.CONSUMER_GROUP_METADATA_KEY,
    SUBSCRIPTION_METADATA: specs.CONSUMER_GROUP_PARTITION_METADATA_KEY,
    MEMBER_METADATA: specs.CONSUMER_GROUP_MEMBER_METADATA_KEY,
    TARGET_ASSIGNMENT_METADATA: specs.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    TARGET_ASSIGNMENT_MEMBER: specs.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CURRENT_ASSIGNMENT: specs.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
}
_VALUE_SPECS = {
    GROUP_EPOCH: specs.CONSUMER_GROUP_METADATA_VALUE,
    SUBSCRIPTION_METADATA: specs.CONSUMER_GROUP_PARTITION_METADATA_VALUE,
    MEMBER_METADATA: specs.CONSUMER_GROUP_MEMBER_METADATA_VALUE,
    TARGET_ASSIGNMENT_METADATA: specs.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
    TARGET_ASSIGNMENT_MEMBER: specs.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
    CURRENT_ASSIGNMENT: specs.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
}
_KEYS_BY_VERSION = {kind: maps[kind] for kind, maps in _KEY_SPECS.items()}
_MEMBER_KINDS = {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_ASSIGNMENT}

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True)
class ClassicMetadata:
    """A member that speaks the classic protocol inside a consumer group (an online migration,
    KIP-848): its session timeout (ms) and its JoinGroup protocols, (name, metadata) pairs."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class MemberMetadata:
    """What record 5 holds of a member (its subscription and identity; `classic` for a member of
    the classic protocol)."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMetadata | None = None


@dataclass(frozen=True)
class CurrentAssignment:
    """What record 8 holds: the member's epoch, reconciliation state and partitions."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned: Any = None  # Assignment
    pending_revocation: Any = None  # Assignment


@dataclass(frozen=True)
class ConsumerRecord:
    kind: int
    group_id: str
    member_id: str | None = None
    value: Any = None  # int | dict[str, TopicMetadata] | MemberMetadata | Assignment | CurrentAssignment | None


def is_consumer_key(key: bytes | None) -> bool:
    return key is not None and len(key) >= 2 and VERSION_PREFIX.unpack_from(key)[0] in KINDS


def partitions_out(assignment: Assignment | None) -> list[dict]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted((assignment or {}).items()) if ps]


def partitions_in(items) -> Assignment:
    return {t["topic_id"]: frozenset(t["partitions"]) for t in items if t["partitions"]}


def encode(record: ConsumerRecord) -> tuple[bytes, bytes | None]:
    key_fields: dict[str, Any] = {"group_id": record.group_id}
    if record.kind in _MEMBER_KINDS:
        key_fields["member_id"] = record.member_id
    key = build_versioned(_KEY_SPECS[record.kind], record.kind, key_fields)
    if record.value is None:
        return key, None
    v = record.value
    if record.kind == GROUP_EPOCH:
        fields: dict[str, Any] = {"epoch": v}
    elif record.kind == TARGET_ASSIGNMENT_METADATA:
        fields = {"assignment_epoch": v}
    elif record.kind == SUBSCRIPTION_METADATA:
        fields = {
            "topics": [
                {
                    "topic_id": t.topic_id,
                    "topic_name": t.name,
                    "num_partitions": t.num_partitions,
                    "partition_metadata": [],
                }
                for t in sorted(v.values(), key=lambda t: t.name)
            ]
        }
    elif record.kind == MEMBER_METADATA:
        fields = {
            "instance_id": v.instance_id,
            "rack_id": v.rack_id,
            "client_id": v.client_id,
            "client_host": v.client_host,
            "subscribed_topic_names": list(v.subscribed_topic_names),
            "subscribed_topic_regex": v.subscribed_topic_regex,
            "rebalance_timeout_ms": v.rebalance_timeout_ms,
            "server_assignor": v.server_assignor,
            "classic_member_metadata": None
            if v.classic is None
            else {
                "session_timeout_ms": v.classic.session_timeout_ms,
                "supported_protocols": [{"name": n, "metadata": m} for n, m in v.classic.protocols],
            },
        }
    elif record.kind == TARGET_ASSIGNMENT_MEMBER:
        fields = {"topic_partitions": partitions_out(v)}
    else:
        fields = {
            "member_epoch": v.member_epoch,
            "previous_member_epoch": v.previous_member_epoch,
            "state": v.state,
            "assigned_partitions": partitions_out(v.assigned),
            "partitions_pending_revocation": partitions_out(v.pending_revocation),
        }
    return key, build_versioned(_VALUE_SPECS[record.kind], 0, fields)


def _classic_in(found) -> ClassicMetadata | None:
    if found is None:
        return None
    return ClassicMetadata(
        found["session_timeout_ms"], tuple((p["name"], bytes(p["metadata"])) for p in found["supported_protocols"])
    )


def decode(key: bytes, value: bytes | None) -> ConsumerRecord:
    """One record of keys 3-8 read back. Raises CorruptCoordinatorRecord."""
    kind, k = parse_versioned(_KEYS_BY_VERSION, key, "consumer group key")
    member_id = k.get("member_id") if kind in _MEMBER_KINDS else None
    if value is None:
        return ConsumerRecord(kind, k["group_id"], member_id)
    _, v = parse_versioned(_VALUE_SPECS[kind], value, f"consumer group record {kind}")
    typed: Any
    if kind == GROUP_EPOCH:
        typed = v["epoch"]
    elif kind == TARGET_ASSIGNMENT_METADATA:
        typed = v["assignment_epoch"]
    elif kind == SUBSCRIPTION_METADATA:
        typed = {
            t["topic_name"]: TopicMetadata(t["topic_id"], t["topic_name"], t["num_partitions"]) for t in v["topics"]
        }
    elif kind == MEMBER_METADATA:
        typed = MemberMetadata(
            v["instance_id"],
            v["rack_id"],
            v["client_id"],
            v["client_host"],
            tuple(v["subscribed_topic_names"]),
            v["subscribed_topic_regex"],
            v["rebalance_timeout_ms"],
            v["server_assignor"],
            _classic_in(v.get("classic_member_metadata")),
        )
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        typed = partitions_in(v["topic_partitions"])
    else:
        typed = CurrentAssignment(
            v["member_epoch"],
            v["previous_member_epoch"],
            v["state"],
            partitions_in(v["assigned_partitions"]),
            partitions_in(v["partitions_pending_revocation"]),
        )
    return ConsumerRecord(kind, k["group_id"], member_id, typed)


__all__ = ["ConsumerRecord", "CorruptCoordinatorRecord", "decode", "encode", "is_consumer_key"]
