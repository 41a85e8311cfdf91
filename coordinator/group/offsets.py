"""Committed offsets: OffsetCommit (key 8), OffsetFetch (key 9), OffsetDelete (key 47) and offset
expiry, as Kafka's GroupCoordinator and GroupMetadataManager handle them (`OffsetManager`, a part
of `GroupCoordinator`).

- A commit is accepted from a member of the current generation (Stable or PreparingRebalance),
  or with generation -1 from anyone while the group is Empty ("simple" consumers that assign()
  partitions themselves; their group is created Empty). The records are appended with acks=-1
  and the offsets change in memory only after that; a commit older in the log than the one held
  (two in flight) never replaces it.
- Per partition: OFFSET_METADATA_TOO_LARGE beyond `offset.metadata.max.bytes`,
  UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have.
- Expiry (every `offsets.retention.check.interval.ms`): offsets of an Empty group expire
  `offsets.retention.minutes` after the group became Empty (or after their commit when that is
  later); offsets of a consumer group's topics nobody subscribes to any more expire that long
  after their commit; an explicit expire timestamp (OffsetCommit v1-v4) wins. An Empty group left
  without offsets is removed (tombstoned).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from coordinator.group import records
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.records import OffsetAndMetadata
from coordinator.runtime import CoordinatorResult, WriteFailed
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)


def consumer_commit_error(
    consumer: ConsumerGroup, member_id: str, member_epoch: int, topics: Iterable[TopicPartition] = ()
) -> ErrorCode:
    """Kafka's `ConsumerGroup.validateOffsetCommit` (KIP-848, with KIP-1251's assignment epochs):
    epoch -1 commits (admins, assign() consumers) only while the group has no members; otherwise
    the member must exist (UNKNOWN_MEMBER_ID) and send its current epoch (a greater one
    FENCED_MEMBER_EPOCH). A smaller one is STALE_MEMBER_EPOCH unless the member speaks the
    consumer protocol and every partition of `topics` ((name, partition) pairs) has been its own
    since that epoch or earlier: a commit sent while a heartbeat was bumping the epoch."""
    if member_epoch < 0 and not consumer.members:
        return ErrorCode.NONE
    member = consumer.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch > member.member_epoch:
        return ErrorCode.FENCED_MEMBER_EPOCH
    if member_epoch < member.member_epoch:
        if member.metadata.classic is None and member_epoch >= 0:
            known = consumer.subscription_metadata
            ids = [(known[t].topic_id, p) if t in known else None for t, p in topics]
            if ids and member.may_commit_at(member_epoch, ids):
                return ErrorCode.NONE
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


class OffsetManager:
    """Committed offsets of the groups this broker coordinates (a part of `GroupCoordinator`)."""

    def __init__(
        self,
        manager: GroupMetadataManager,
        config: GroupCoordinatorConfig,
        metadata_cache: Any,
        wall_clock_ms: Callable[[], int],
        group_error: Callable[..., ErrorCode],
        touch: Callable[[MemberMetadata], None],
    ) -> None:
        """`group_error(group_id, allow_empty=...)`: the coordinator's check of a group id
        (Kafka's validateGroupStatus); `touch(member)`: restart a classic member's session (a
        commit from a member counts as its heartbeat)."""
        self.manager = manager
        self.config = config
        self.metadata_cache = metadata_cache
        self.wall_clock_ms = wall_clock_ms
        self.group_error = group_error
        self._touch = touch

    # ---- OffsetCommit --------------------------------------------------------------------------
    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit `offsets`; returns an error per partition (NONE when committed)."""
        error = self.group_error(group_id, allow_empty=True)
        if error == ErrorCode.NONE:
            error = self._commit_error(group_id, generation_id, member_id, group_instance_id, offsets)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        results, valid = self.check_offsets(offsets)

        def commit() -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
            return CoordinatorResult(
                records.offset_records(group_id, valid.items()),
                results | dict.fromkeys(valid, ErrorCode.NONE),
                lambda first: self.manager.replay_offsets(group_id, list(valid.items()), first),
            )

        try:
            return await self.manager.write(group_id, commit)
        except WriteFailed as e:
            return results | dict.fromkeys(valid, e.error_code)

    def check_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]]:
        """(errors of the partitions refused, the offsets to store): OFFSET_METADATA_TOO_LARGE
        beyond `offset.metadata.max.bytes`, UNKNOWN_TOPIC_OR_PARTITION for one the cluster lacks."""
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif self.metadata_cache.get_partition(*tp) is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid[tp] = om
        return results, valid

    def _commit_error(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Iterable[TopicPartition],
    ) -> ErrorCode:
        """Kafka's validateOffsetCommit: whether this member may commit now. A group that does
        not exist takes commits of generation -1 only (it is created Empty when they commit)."""
        group = self.manager.groups.get(group_id)
        if group is None:
            return ErrorCode.ILLEGAL_GENERATION if generation_id >= 0 else ErrorCode.NONE
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            return consumer_commit_error(group.consumer, member_id, generation_id, offsets)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id and group.converted_epochs.get(member_id) != generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(member)
        return ErrorCode.NONE

    # ---- OffsetFetch ---------------------------------------------------------------------------
    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member: tuple[str | None, int] = (None, -1),
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(group error, {partition: committed offset or None}); `partitions` None asks for all
        the group's offsets. `member` (OffsetFetch v9: member id, member epoch) is checked
        against a consumer group (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) unless it is (null or
        empty, -1): an admin's fetch."""
        error = self.group_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.manager.groups.get(group_id)
        member_id, member_epoch = member
        if group is not None and group.consumer is not None and (member_id or member_epoch >= 0):
            found = group.consumer.members.get(member_id or "")
            if found is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, {}
            if found.member_epoch != member_epoch:
                return ErrorCode.STALE_MEMBER_EPOCH, {}
        held = {} if group is None or group.is_in(GroupState.DEAD) else group.offsets
        if partitions is None:
            return ErrorCode.NONE, dict(held)
        return ErrorCode.NONE, {tp: held.get(tp) for tp in partitions}

    # ---- OffsetDelete --------------------------------------------------------------------------
    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """(group error, per-partition error): GROUP_SUBSCRIBED_TO_TOPIC for a topic an active
        consumer group subscribes to; GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP
        for an active group whose subscriptions cannot be read (not the consumer protocol)."""
        error = self.group_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.manager.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_in(GroupState.EMPTY) or group.has_members():
            found = group.subscribed_topics()
            if found is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = found
        results = {
            tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE for tp in partitions
        }
        doomed = [tp for tp, e in results.items() if e == ErrorCode.NONE and tp in group.offsets]

        try:
            await self.manager.write(group_id, lambda: self.manager.deletion(group, doomed, whole_group=False))
        except WriteFailed as e:
            return e.error_code, {}
        return ErrorCode.NONE, results

    # ---- expiry --------------------------------------------------------------------------------
    async def expire_now(self) -> None:
        """Every offsets.retention.check.interval.ms (on the runtime's timer)."""
        await self.expire_offsets(self.wall_clock_ms())

    def expired_offsets(self, group: GroupMetadata, now_ms: int) -> list[TopicPartition]:
        retention = self.config.offsets_retention_ms
        if group.is_in(GroupState.EMPTY) and not group.has_members():
            since_empty = group.current_state_timestamp_ms
            candidates = list(group.offsets)
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return []
            since_empty = None
            candidates = [tp for tp in group.offsets if tp[0] not in subscribed]
        out = []
        for tp in candidates:
            om = group.offsets[tp]
            if om.expire_timestamp_ms is not None:
                expired = om.expire_timestamp_ms <= now_ms
            else:
                base = max(om.commit_timestamp_ms, since_empty or 0)
                expired = base + retention <= now_ms
            if expired:
                out.append(tp)
        return out

    async def expire_offsets(self, now_ms: int) -> int:
        """One expiry pass over the groups this broker coordinates; returns offsets removed."""
        removed = 0
        for group in list(self.manager.groups.values()):
            if self.manager.coordinator_error(group.group_id) != ErrorCode.NONE:
                continue
            doomed = self.expired_offsets(group, now_ms)
            drop_group = group.is_in(GroupState.EMPTY) and not group.has_members() and len(doomed) == len(group.offsets)
            if not doomed and not (drop_group and (group.generation_id > 0 or group.consumer is not None)):
                continue
            try:
                await self.manager.write(
                    group.group_id, functools.partial(self.manager.deletion, group, doomed, whole_group=drop_group)
                )
            except WriteFailed:
                continue
            removed += len(doomed)
            log.info("expired %d offsets of group %s", len(doomed), group.group_id)
        return removed
