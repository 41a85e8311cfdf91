"""The records the group coordinator writes to `__consumer_offsets`, and reading them back.

Format (Kafka's record specs, `protocol/schemas/coordinator_records.py`): a record key is an int16
key version followed by the key struct, a record value an int16 value version followed by the
value struct; a null value is a tombstone (the offset or group was deleted).
- key versions 0 and 1: an offset commit (group, topic, partition); value versions 0-4
  (`OffsetCommitValue`); we write key version 1 and value version 3, or 1 when the commit carries
  an expire timestamp (OffsetCommit v2-v4 with a retention time), as Kafka 3.x does;
- key version 2: a group's metadata (group); value versions 0-4 (`GroupMetadataValue`); we write 3.

`decode_key` / `decode_offset_value` / `decode_group_value` accept every version Kafka ever
wrote and raise `CorruptCoordinatorRecord` (a ValueError) for anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.record_codec import (
    VERSION_PREFIX,
    build_versioned,
    parse_versioned,
    partition_for_key,
)
from coordinator.record_codec import CorruptCoordinatorRecord as CorruptCoordinatorRecord  # re-exported
from protocol.schemas import coordinator_records as specs

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: `offset` (the next offset to consume), `leader_epoch` (-1 unknown),
    `metadata` (client text), `commit_timestamp_ms`, `expire_timestamp_ms` (None unless the
    client asked for a retention time, OffsetCommit v2-v4)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None


# ---- keys --------------------------------------------------------------------------------------
def offset_key(group: str, topic: str, partition: int) -> bytes:
    return build_versioned(
        specs.OFFSET_COMMIT_KEY, OFFSET_KEY_VERSION, {"group": group, "topic": topic, "partition": partition}
    )


def group_key(group: str) -> bytes:
    return build_versioned(specs.GROUP_METADATA_KEY, GROUP_KEY_VERSION, {"group": group})


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """A record key of `__consumer_offsets`. Raises CorruptCoordinatorRecord."""
    if data is not None and len(data) >= 2 and VERSION_PREFIX.unpack_from(data)[0] == GROUP_KEY_VERSION:
        _, k = parse_versioned(specs.GROUP_METADATA_KEY, data, "group metadata key")
        return GroupKey(k["group"])
    _, k = parse_versioned(specs.OFFSET_COMMIT_KEY, data, "offset commit key")
    return OffsetKey(k["group"], k["topic"], k["partition"])


# ---- offset values -----------------------------------------------------------------------------
def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp_ms is not None:
        return build_versioned(
            specs.OFFSET_COMMIT_VALUE,
            OFFSET_VALUE_VERSION_WITH_EXPIRY,
            {
                "offset": om.offset,
                "metadata": om.metadata,
                "commit_timestamp": om.commit_timestamp_ms,
                "expire_timestamp": om.expire_timestamp_ms,
            },
        )
    return build_versioned(
        specs.OFFSET_COMMIT_VALUE,
        OFFSET_VALUE_VERSION,
        {
            "offset": om.offset,
            "leader_epoch": om.leader_epoch,
            "metadata": om.metadata,
            "commit_timestamp": om.commit_timestamp_ms,
        },
    )


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    version, v = parse_versioned(specs.OFFSET_COMMIT_VALUE, data, "offset commit value")
    expire = v["expire_timestamp"] if version == 1 and v["expire_timestamp"] != -1 else None
    return OffsetAndMetadata(v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"], expire)


# ---- group metadata values ---------------------------------------------------------------------
@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    """A group as `GroupMetadataValue` holds it: the generation's protocol and members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


def group_value(g: StoredGroup) -> bytes:
    return build_versioned(
        specs.GROUP_METADATA_VALUE,
        GROUP_VALUE_VERSION,
        {
            "protocol_type": g.protocol_type,
            "generation": g.generation,
            "protocol": g.protocol,
            "leader": g.leader,
            "current_state_timestamp": g.current_state_timestamp_ms,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout_ms,
                    "session_timeout": m.session_timeout_ms,
                    "subscription": m.subscription,
                    "assignment": m.assignment,
                }
                for m in g.members
            ],
        },
    )


def offset_records(group_id: str, offsets) -> list[tuple[bytes, bytes | None]]:
    """`OffsetCommit` records of the group for (topic partition, offset) pairs; an offset of
    None makes its tombstone."""
    return [(offset_key(group_id, t, p), None if om is None else offset_value(om)) for (t, p), om in offsets]


def group_record(group_id: str, stored: StoredGroup) -> tuple[bytes, bytes]:
    """The group's `GroupMetadata` record: (key, value)."""
    return group_key(group_id), group_value(stored)


def decode_group_value(data: bytes) -> StoredGroup:
    version, v = parse_versioned(specs.GROUP_METADATA_VALUE, data, "group metadata value")
    members = tuple(
        StoredMember(
            m["member_id"],
            m["group_instance_id"],
            m["client_id"],
            m["client_host"],
            # v0 had no rebalance timeout: it was the session timeout
            m["rebalance_timeout"] if version >= 1 else m["session_timeout"],
            m["session_timeout"],
            bytes(m["subscription"]),
            bytes(m["assignment"]),
        )
        for m in v["members"]
    )
    return StoredGroup(
        v["protocol_type"], v["generation"], v["protocol"], v["leader"], v["current_state_timestamp"], members
    )


# ---- where a group lives -----------------------------------------------------------------------
def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group (`offsets.topic.num.partitions`)."""
    return partition_for_key(group_id, num_partitions)
