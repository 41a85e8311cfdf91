"""The records of `__share_group_state` (KIP-932), typed, and their bytes.

Format (Kafka 4's record specs `ShareSnapshotKey/Value.json`, `ShareUpdateKey/Value.json`,
`protocol/schemas/coordinator_records.py`): the key is an int16 record type (0 snapshot, 1
update) then the key struct (group id, topic id, partition); the value an int16 version (0) then
the value struct; a null value is a tombstone.

- A snapshot (type 0) holds a share-partition's whole state: snapshot epoch, state epoch, leader
  epoch, start offset (SPSO), delivery-complete count (KIP-1226), create and write timestamps
  (ms since the epoch) and the state batches.
- An update (type 1) holds what one write changed: the snapshot epoch it applies to, the leader
  epoch, the start offset (-1: unchanged), the delivery-complete count and the batches written.

A share-partition lives on partition `Utils.abs(hash("group:topicId:partition")) % partitions`
of the topic (Kafka's `SharePartitionKey.asCoordinatorKey`; the topic id in Kafka's base64 form).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from coordinator.record_codec import (
    VERSION_PREFIX,
    CorruptCoordinatorRecord,
    build_versioned,
    parse_versioned,
    partition_for_key,
)
from protocol.schemas import coordinator_records as specs

SNAPSHOT, UPDATE = 0, 1
_KEYS = {SNAPSHOT: specs.SHARE_SNAPSHOT_KEY[0], UPDATE: specs.SHARE_UPDATE_KEY[0]}
_VALUES = {SNAPSHOT: specs.SHARE_SNAPSHOT_VALUE, UPDATE: specs.SHARE_UPDATE_VALUE}

#: the start offset of a share-partition nobody initialized (Kafka's UNINITIALIZED_START_OFFSET)
UNINITIALIZED = -1
#: Kafka's DeliveryState values as persisted (an acquired record is persisted as Available)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
DELIVERY_STATES = (AVAILABLE, ACKNOWLEDGED, ARCHIVED)


class SharePartitionKey(NamedTuple):
    group_id: str
    topic_id: uuid.UUID
    partition: int


class StateBatch(NamedTuple):
    """Offsets `first_offset`..`last_offset` (inclusive), all in `delivery_state`, delivered
    `delivery_count` times (Kafka's `PersisterStateBatch`)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class StateWrite(NamedTuple):
    """One share-partition's WriteShareGroupState entry (key 85): the writer's state and leader
    epochs, the new start offset (-1: unchanged), the delivery-complete count (-1: unknown) and
    the state batches it changes."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]


@dataclass
class ShareState:
    """One share-partition's durable state (Kafka's `ShareGroupOffset`)."""

    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1
    batches: list[StateBatch] = field(default_factory=list)


@dataclass(frozen=True)
class ShareUpdate:
    """What one write changed (an update record): -1 start offset leaves it as it was."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString()`: url-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's `SharePartitionKey.asCoordinatorKey()`: what FindCoordinator (key type 2) asks for."""
    return f"{key.group_id}:{kafka_uuid(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey:
    """The inverse of `coordinator_key`; ValueError for a key not of that shape."""
    parts = text.rsplit(":", 2)  # a group id may hold colons itself
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"share coordinator key {text!r} is not group:topicId:partition")
    group_id, topic, partition = parts
    try:
        raw = base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4))
        return SharePartitionKey(group_id, uuid.UUID(bytes=raw), int(partition))
    except (ValueError, TypeError) as e:
        raise ValueError(f"share coordinator key {text!r} is not group:topicId:partition: {e}") from None


def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    return partition_for_key(coordinator_key(key), num_partitions)


def _batches_out(batches) -> list[dict]:
    return [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": b.delivery_state,
            "delivery_count": b.delivery_count,
        }
        for b in batches
    ]


def _batches_in(items) -> list[StateBatch]:
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in items]


def _key(kind: int, key: SharePartitionKey) -> bytes:
    return build_versioned(
        _KEYS, kind, {"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}
    )


def snapshot_record(key: SharePartitionKey, state: ShareState) -> tuple[bytes, bytes]:
    value = {
        "snapshot_epoch": state.snapshot_epoch,
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "create_timestamp": state.create_timestamp,
        "write_timestamp": state.write_timestamp,
        "state_batches": _batches_out(state.batches),
        "delivery_complete_count": state.delivery_complete_count,
    }
    return _key(SNAPSHOT, key), build_versioned(_VALUES[SNAPSHOT], 0, value)


def update_record(key: SharePartitionKey, update: ShareUpdate) -> tuple[bytes, bytes]:
    value = {
        "snapshot_epoch": update.snapshot_epoch,
        "leader_epoch": update.leader_epoch,
        "start_offset": update.start_offset,
        "state_batches": _batches_out(update.batches),
        "delivery_complete_count": update.delivery_complete_count,
    }
    return _key(UPDATE, key), build_versioned(_VALUES[UPDATE], 0, value)


def tombstones(key: SharePartitionKey) -> list[tuple[bytes, None]]:
    """A deleted share-partition: both of its keys get a tombstone."""
    return [(_key(SNAPSHOT, key), None), (_key(UPDATE, key), None)]


def is_share_key(key: bytes | None) -> bool:
    return key is not None and len(key) >= 2 and VERSION_PREFIX.unpack_from(key)[0] in _KEYS


def decode(key: bytes, value: bytes | None) -> tuple[SharePartitionKey, ShareState | ShareUpdate | None]:
    """One record back: its key and a snapshot (`ShareState`), an update or None (a tombstone).
    Raises CorruptCoordinatorRecord for bytes it cannot read."""
    kind, k = parse_versioned(_KEYS, key, "share state key")
    spk = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return spk, None
    _, v = parse_versioned(_VALUES[kind], value, "share snapshot" if kind == SNAPSHOT else "share update")
    batches = _batches_in(v.state_batches)
    if any(b.delivery_state not in DELIVERY_STATES or b.last_offset < b.first_offset for b in batches):
        raise CorruptCoordinatorRecord(f"share state of {spk}: a state batch out of range")
    if kind == SNAPSHOT:
        state = ShareState(
            v.snapshot_epoch,
            v.state_epoch,
            v.leader_epoch,
            v.start_offset,
            v.delivery_complete_count,
            v.create_timestamp,
            v.write_timestamp,
            batches,
        )
        return spk, state
    return spk, ShareUpdate(v.snapshot_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count, tuple(batches))
