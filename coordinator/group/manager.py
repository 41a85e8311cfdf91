"""The log-backed store of the groups this broker coordinates (Kafka's `GroupMetadataManager`).

- Ownership: a group lives in `__consumer_offsets` partition `partition_for(group_id)`; this broker
  coordinates it while it leads that partition. `on_election` starts loading the partition (the
  caller runs `load`), `on_resignation` drops its groups at once. A partition being loaded answers
  COORDINATOR_LOAD_IN_PROGRESS, one not led answers NOT_COORDINATOR.
- Loading replays the partition's log from its log start offset to its log end offset: the latest
  record per key wins and a null value (tombstone) deletes. Offsets without group metadata make an
  Empty group ("simple" consumers). A load finishes only if the partition is still led in the same
  leader epoch; otherwise its result is dropped.
- Writes go through the runtime's one write path (`write`, `CoordinatorRuntime.write`): an
  operation returns its records and response, the records are appended as one v2 batch
  (compressed with `offsets.topic.compression.codec`) with acks=-1 and origin COORDINATOR, and
  the state changes only once they are committed (`replay_offsets`, `remove_if_dead`, the
  results' own `replay`). Append errors are mapped as Kafka's coordinator maps them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

from coordinator.group import consumer_records, offset_replay, records, share_records
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.records import OffsetAndMetadata
from coordinator.group.share_group import ShareGroup
from coordinator.runtime import (
    APPEND_ERROR_MAP,
    CoordinatorResult,
    CoordinatorRuntime,
    PartitionLog,
    Record,
    WriteFailed,
)
from protocol.control_records import read_marker
from protocol.errors import CorruptRecordBatch, ErrorCode
from protocol.record_batch import decode_records
from protocol.topic_names import GROUP_METADATA_TOPIC
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = GROUP_METADATA_TOPIC
R = TypeVar("R")

#: Kafka's mapping of append errors to what a group client is told (GroupMetadataManager)
_APPEND_ERROR_MAP = {
    **APPEND_ERROR_MAP,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


class GroupMetadataManager:
    def __init__(
        self,
        partition_log: PartitionLog,
        config: GroupCoordinatorConfig,
        clock_ms: Callable[[], int],
        monotonic_ms: Callable[[], float],
        unloaded: Callable[[list[GroupMetadata]], None] = lambda groups: None,
    ):
        """`clock_ms` is the wall clock (ms since the epoch) for record timestamps; `monotonic_ms`
        the coordinator's monotonic clock, the one its session deadlines are compared with;
        `unloaded(groups)` hears of the groups a resignation removed."""
        self.config = config
        self.monotonic_ms = monotonic_ms
        self.groups: dict[str, GroupMetadata] = {}
        self._partition_of: dict[str, int] = {}  # group id -> offsets partition (a cache)
        self._unloaded_groups = unloaded
        self.runtime = CoordinatorRuntime(
            OFFSETS_TOPIC,
            partition_log,
            self.load,
            self._unload_groups,
            reload_on_new_epoch=False,
            append_error_map=_APPEND_ERROR_MAP,
            clock_ms=clock_ms,
            compression=config.offsets_topic_compression_codec,
            append_timeout_ms=config.offsets_commit_timeout_ms,
        )

    def partition_for(self, group_id: str) -> int:
        found = self._partition_of.get(group_id)
        if found is None:
            if len(self._partition_of) > 100_000:  # bounded: ids are client input
                self._partition_of.clear()
            found = self._partition_of[group_id] = records.partition_for(
                group_id, self.config.offsets_topic_num_partitions
            )
        return found

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker serves `group_id` now, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        return self.runtime.error_for(self.partition_for(group_id))

    def groups_of(self, partition: int) -> Iterator[GroupMetadata]:
        return (g for g in list(self.groups.values()) if self.partition_for(g.group_id) == partition)

    # ---- leadership (the runtime's callbacks) ------------------------------------------------
    def _unload_groups(self, partition: int) -> None:
        removed = list(self.groups_of(partition))
        for g in removed:
            del self.groups[g.group_id]
        self._unloaded_groups(removed)
        log.info("unloaded %s-%d (%d groups)", OFFSETS_TOPIC, partition, len(removed))

    async def load(self, partition: int, token: object) -> int:
        """Replay `__consumer_offsets-<partition>` and install its groups; returns how many. A
        load overtaken by a resignation (and maybe a new election) installs nothing. Offset
        records and markers replay through `offset_replay`, as the runtime's writes do, and
        consumer group records through `ConsumerGroup.replay`; a classic group's latest
        GroupMetadata record is its state (Kafka stores the whole group in each one)."""
        found_groups: dict[str, records.StoredGroup | None] = {}
        found_consumer: dict[str, ConsumerGroup] = {}
        found_share: dict[str, ShareGroup] = {}
        replayed: dict[str, GroupMetadata] = {}  # offsets and pending transactional offsets

        def on_batch(buf, pos: int, header) -> None:
            if header.is_control:
                self._replay_marker(buf, pos, header, replayed)
                return
            for record in decode_records(buf, pos, header):
                if consumer_records.is_consumer_key(record.key):
                    self._replay_modern(record, consumer_records, found_consumer, ConsumerGroup)
                elif share_records.is_share_key(record.key):
                    self._replay_modern(record, share_records, found_share, ShareGroup)
                else:
                    self._replay(record, header, found_groups, replayed)

        if not await self.runtime.replay(partition, token, self.config.offsets_load_buffer_size, on_batch):
            return 0
        now = self.monotonic_ms()  # loaded members' sessions restart now, on the deadline clock
        consumer_groups = {g: c for g, c in found_consumer.items() if c.exists}
        share_groups = {g: c for g, c in found_share.items() if c.exists}
        for group_id in set(found_groups) | set(replayed) | set(consumer_groups) | set(share_groups):
            stored = found_groups.get(group_id)
            offsets = replayed.get(group_id) or GroupMetadata(group_id)
            pending = any(offsets.pending_txn_offsets.values())
            modern = group_id in consumer_groups or group_id in share_groups
            if stored is None and not offsets.offsets and not pending and not modern:
                continue  # only tombstones, or offsets all deleted
            group = GroupMetadata.loaded(group_id, stored, now) if stored else GroupMetadata(group_id)
            group.consumer = consumer_groups.get(group_id)
            group.share = share_groups.get(group_id)
            group.offsets, group.offset_log_offsets = offsets.offsets, offsets.offset_log_offsets
            group.pending_txn_offsets = {pid: by_tp for pid, by_tp in offsets.pending_txn_offsets.items() if by_tp}
            self.groups[group_id] = group
        self.runtime.finish_loading(partition, token)
        log.info(
            "loaded %d groups from %s-%d (leader epoch %d)",
            len(found_groups),
            OFFSETS_TOPIC,
            partition,
            self.runtime.owned[partition],
        )
        return len(found_groups)

    @staticmethod
    def _replay_marker(buf, pos: int, header, replayed: dict[str, GroupMetadata]) -> None:
        """A transaction marker: its producer's pending offsets become committed or go."""
        try:
            marker = read_marker(buf, pos, header)
        except CorruptRecordBatch as e:
            log.error("skipping an unreadable marker in %s at %d: %s", OFFSETS_TOPIC, header.base_offset, e)
            return
        offset_replay.replay_marker(replayed.values(), header.producer_id, marker is not None and marker.commit)

    @staticmethod
    def _replay_modern(record, codec, found: dict, new_group) -> None:
        """A consumer group (keys 3-8, KIP-848) or share group (types 10-15, KIP-932) record,
        decoded by `codec` and replayed onto its group in `found` (made by `new_group(id)`)."""
        try:
            decoded = codec.decode(record.key, record.value)
        except records.CorruptCoordinatorRecord as e:
            log.error("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC, record.offset, e)
            return
        group = found.get(decoded.group_id)
        if group is None:
            group = found[decoded.group_id] = new_group(decoded.group_id)
        group.replay(decoded)

    @staticmethod
    def _replay(record, header, found_groups: dict, replayed: dict[str, GroupMetadata]) -> None:
        try:
            key = records.decode_key(record.key)
            if isinstance(key, records.GroupKey):
                found_groups[key.group] = None if record.value is None else records.decode_group_value(record.value)
                if record.value is None:
                    found_groups.pop(key.group)
                return
            om = None if record.value is None else records.decode_offset_value(record.value)
            offsets = [((key.topic, key.partition), om)]
            if header.is_transactional:
                offset_replay.replay_pending_offsets(replayed, key.group, header.producer_id, offsets, record.offset)
            else:
                offset_replay.replay_offsets(replayed, key.group, offsets, record.offset)
        except records.CorruptCoordinatorRecord as e:
            log.error("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC, record.offset, e)

    # ---- writes --------------------------------------------------------------------------------
    async def write(self, group_id: str, operation: Callable[[], CoordinatorResult[R]]) -> R:
        """Run `operation` on `group_id`'s partition through the runtime's write path
        (`CoordinatorRuntime.write`): its response once its records are committed; raises
        `WriteFailed` with the error Kafka tells a group client (the state untouched)."""
        return await self.runtime.write(self.partition_for(group_id), operation)

    async def write_group_records(
        self, group_id: str, entries: list[Record], replay: Callable[[int], object] | None
    ) -> ErrorCode:
        """Write records of the group itself (its GroupMetadata, ConsumerGroup* records or their
        tombstones) and `replay` them once committed: NONE, or the error Kafka tells the client
        (a batch too large is UNKNOWN_SERVER_ERROR, as Kafka's storeGroup answers)."""
        try:
            await self.write(
                group_id, lambda: CoordinatorResult(entries, None, replay, size_error=ErrorCode.UNKNOWN_SERVER_ERROR)
            )
        except WriteFailed as e:
            return e.error_code
        return ErrorCode.NONE

    def deletion(
        self, group: GroupMetadata, partitions: list[TopicPartition], *, whole_group: bool
    ) -> CoordinatorResult[None]:
        """Tombstones of the group's offsets of `partitions` and, with `whole_group`, of the group
        itself (its consumer group records too); once committed the offsets go and a deleted
        group is removed if it is still Empty, without members or offsets (`remove_if_dead`)."""
        offsets: list[tuple[TopicPartition, OffsetAndMetadata | None]] = [(tp, None) for tp in partitions]
        entries: list[Record] = records.offset_records(group.group_id, offsets)
        if whole_group:
            if group.consumer is not None:
                entries += [consumer_records.encode(r) for r in group.consumer.group_tombstones()]
            if group.share is not None:
                entries += [share_records.encode(r) for r in group.share.group_tombstones()]
            entries.append((records.group_key(group.group_id), None))

        def replay(first: int) -> None:
            self.replay_offsets(group.group_id, offsets, first)
            if whole_group:
                self.remove_if_dead(group.group_id)

        return CoordinatorResult(entries, None, replay)

    def remove_if_dead(self, group_id: str) -> None:
        """A committed tombstone of the group: it is removed (Dead) if it is still Empty,
        without members or offsets (a member that joined meanwhile keeps it)."""
        group = self.groups.get(group_id)
        if group is not None and group.is_in(GroupState.EMPTY) and not group.has_members() and not group.offsets:
            group.transition_to(GroupState.DEAD)
            del self.groups[group_id]

    def replay_offsets(
        self, group_id: str, offsets: list[tuple[TopicPartition, OffsetAndMetadata | None]], first_offset: int
    ) -> None:
        """Committed offset records of `group_id` (the i-th at log offset first_offset + i; None
        a tombstone), replayed as a load replays them (`offset_replay.replay_offsets`)."""
        offset_replay.replay_offsets(self.groups, group_id, offsets, first_offset)
