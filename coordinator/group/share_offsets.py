"""A share group's offsets as an administrator changes them (KIP-932; Kafka's
`GroupCoordinatorService.alterShareGroupOffsets` / `deleteShareGroupOffsets` and the share part of
`deleteGroups`), `ShareGroupOffsets`, a part of `GroupCoordinator`.

The offsets live at the share coordinator (`__share_group_state`), reached through a
`StateStore` (the broker's `SharePersister`); the group records, in `__consumer_offsets`, which
topic-partitions hold state (record 15, `ShareGroup.state_partitions`). Each operation runs in
the group's turn on the runtime, so no member joins meanwhile.

- `alter` (AlterShareGroupOffsets, key 91): each partition's state starts over at the given start
  offset, at the next state epoch (InitializeShareGroupState), and the partition joins the
  group's state partitions. A group not known yet is created empty, as Kafka does.
- `delete_offsets` (DeleteShareGroupOffsets, key 92): the state of every partition of each topic
  is deleted (DeleteShareGroupState) and the topic leaves the group's state partitions; the group
  then reads it afresh, where `share.auto.offset.reset` says.
- `delete_state` (DeleteGroups of a share group): the state of all its state partitions.

Errors (as Kafka): a group with members NON_EMPTY_GROUP, a group of another type
GROUP_ID_NOT_FOUND (as is an unknown group, except for `alter`), the coordinator's own errors
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); per partition UNKNOWN_TOPIC_OR_PARTITION for a
topic or partition the cluster does not have, INVALID_REQUEST for a negative start offset, and
the share coordinator's errors.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.group import share_records as sr
from coordinator.group.consumer_records import TopicMetadata
from coordinator.group.group_metadata import GroupMetadata
from coordinator.group.share_group import ShareGroup
from coordinator.group.share_membership import ShareGroups
from coordinator.group.share_records import GroupEpoch, ShareRecord
from coordinator.share.records import SharePartitionKey
from coordinator.share.shard import StateResult
from protocol.errors import ErrorCode


class StateStore(Protocol):
    async def read_summary(self, key: SharePartitionKey) -> StateResult: ...

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateResult: ...

    async def delete(self, key: SharePartitionKey) -> StateResult: ...


@dataclass(frozen=True)
class PartitionOutcome:
    partition: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass
class TopicOutcome:
    """One topic's answer: its id (zero when unknown), its error (DeleteShareGroupOffsets) or its
    partitions' (AlterShareGroupOffsets)."""

    name: str
    topic_id: uuid.UUID = uuid.UUID(int=0)
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    partitions: list[PartitionOutcome] = field(default_factory=list)


@dataclass
class OffsetsOutcome:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    topics: list[TopicOutcome] = field(default_factory=list)


#: AlterShareGroupOffsets' ask: topic name -> [(partition, start offset)]
AlterAsk = Mapping[str, list[tuple[int, int]]]


def plan_alter(
    asked: AlterAsk, topics: Mapping[str, TopicMetadata]
) -> tuple[list[TopicOutcome], list[tuple[TopicMetadata, int, int]]]:
    """The answers of the partitions refused outright (unknown topic or partition, a negative
    offset) and the (topic, partition, start offset) to initialize. Pure."""
    outcomes: list[TopicOutcome] = []
    valid: list[tuple[TopicMetadata, int, int]] = []
    for name, parts in asked.items():
        meta = topics.get(name)
        outcome = TopicOutcome(name, meta.topic_id if meta is not None else uuid.UUID(int=0))
        outcomes.append(outcome)
        for partition, offset in parts:
            if meta is None or not 0 <= partition < meta.num_partitions:
                outcome.partitions.append(
                    PartitionOutcome(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {partition}")
                )
            elif offset < 0:
                outcome.partitions.append(
                    PartitionOutcome(partition, ErrorCode.INVALID_REQUEST, f"Start offset {offset} is negative.")
                )
            else:
                valid.append((meta, partition, offset))
    return outcomes, valid


class ShareGroupOffsets:
    def __init__(self, groups: ShareGroups) -> None:
        self.groups = groups
        self.manager = groups.manager

    def _refusal(self, group_id: str, *, create: bool) -> OffsetsOutcome | None:
        error = self.manager.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return OffsetsOutcome(error)
        holder = self.manager.groups.get(group_id)
        if holder is None:
            return None if create else OffsetsOutcome(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if holder.share is None:
            return OffsetsOutcome(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if holder.share.members:
            return OffsetsOutcome(ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not empty.")
        return None

    def _group(self, group_id: str) -> tuple[GroupMetadata | None, ShareGroup]:
        holder = self.manager.groups.get(group_id)
        share = holder.share if holder is not None else None
        return holder, share if share is not None else ShareGroup(group_id)

    async def alter(self, group_id: str, asked: AlterAsk, store: StateStore) -> OffsetsOutcome:
        """AlterShareGroupOffsets (key 91) for `asked` (the partitions the caller may read)."""
        async with self.manager.runtime.one_at_a_time(group_id):
            refusal = self._refusal(group_id, create=True)
            if refusal is not None:
                return refusal
            holder, group = self._group(group_id)
            outcomes, valid = plan_alter(asked, self.groups.topics())
            by_name = {o.name: o for o in outcomes}
            added: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
            for meta, partition, offset in valid:
                answer = await _initialize(store, SharePartitionKey(group_id, meta.topic_id, partition), offset)
                by_name[meta.name].partitions.append(
                    PartitionOutcome(partition, answer.error_code, answer.error_message)
                )
                if answer.error_code == ErrorCode.NONE:
                    old = added.get(meta.topic_id, (meta.name, frozenset()))[1]
                    added[meta.topic_id] = (meta.name, old | {partition})
            records: list[ShareRecord] = []
            if not group.exists:
                records.append(ShareRecord(sr.GROUP_EPOCH, group_id, None, GroupEpoch(group.group_epoch)))
            initialized = group.with_initialized(added)
            if initialized is not None:
                records.append(group.state_partitions_record(initialized))
            error = await self.groups.write(group_id, holder, group, records)
            if error != ErrorCode.NONE:
                return OffsetsOutcome(error)
            for outcome in outcomes:
                outcome.partitions.sort(key=lambda p: p.partition)
            return OffsetsOutcome(topics=outcomes)

    async def delete_offsets(self, group_id: str, names: list[str], store: StateStore) -> OffsetsOutcome:
        """DeleteShareGroupOffsets (key 92) for the topics `names` (those the caller may read)."""
        async with self.manager.runtime.one_at_a_time(group_id):
            refusal = self._refusal(group_id, create=False)
            if refusal is not None:
                return refusal
            holder, group = self._group(group_id)
            topics = self.groups.topics()
            initialized = dict(group.state_partitions.initialized)
            outcomes = []
            for name in names:
                meta = topics.get(name)
                if meta is None:
                    outcomes.append(
                        TopicOutcome(
                            name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="Unknown topic"
                        )
                    )
                    continue
                parts = set(range(meta.num_partitions)) | set(initialized.get(meta.topic_id, ("", ()))[1])
                error, message = await _delete_all(store, group_id, meta.topic_id, parts)
                outcomes.append(TopicOutcome(name, meta.topic_id, error, message))
                if error == ErrorCode.NONE:
                    initialized.pop(meta.topic_id, None)
            if initialized != group.state_partitions.initialized:
                error = await self.groups.write(group_id, holder, group, [group.state_partitions_record(initialized)])
                if error != ErrorCode.NONE:
                    return OffsetsOutcome(error)
            return OffsetsOutcome(topics=outcomes)

    async def delete_state(self, group_id: str, store: StateStore) -> ErrorCode:
        """Delete the share state of every state partition of `group_id` (before DeleteGroups
        deletes its records); NONE for a group that is not a share group, NON_EMPTY_GROUP for one
        with members, else the first error of the share coordinator."""
        async with self.manager.runtime.one_at_a_time(group_id):
            holder = self.manager.groups.get(group_id)
            group = holder.share if holder is not None else None
            if group is None:
                return ErrorCode.NONE
            if group.members:
                return ErrorCode.NON_EMPTY_GROUP
            for topic_id, (_, parts) in sorted(group.state_partitions.initialized.items(), key=lambda kv: str(kv[0])):
                error, _ = await _delete_all(store, group_id, topic_id, set(parts))
                if error != ErrorCode.NONE:
                    return ErrorCode(error)
            return ErrorCode.NONE


async def _initialize(store: StateStore, key: SharePartitionKey, start_offset: int) -> StateResult:
    """Start the share-partition over at `start_offset`, one state epoch past the stored one."""
    summary = await store.read_summary(key)
    if summary.error_code != ErrorCode.NONE:
        return summary
    return await store.initialize(key, summary.state_epoch + 1, start_offset)


async def _delete_all(store: StateStore, group_id: str, topic_id: uuid.UUID, parts: set[int]) -> tuple[int, str | None]:
    for partition in sorted(parts):
        answer = await store.delete(SharePartitionKey(group_id, topic_id, partition))
        if answer.error_code != ErrorCode.NONE:
            return answer.error_code, answer.error_message
    return ErrorCode.NONE, None
