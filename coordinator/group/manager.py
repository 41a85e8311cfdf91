"""The log-backed store of the groups this broker coordinates (Kafka's `GroupMetadataManager`).

- Ownership: a group lives in `__consumer_offsets` partition `partition_for(group_id)`; this broker
  coordinates it while it leads that partition. `on_election` starts loading the partition (the
  caller runs `load`), `on_resignation` drops its groups at once. A partition being loaded answers
  COORDINATOR_LOAD_IN_PROGRESS, one not led answers NOT_COORDINATOR.
- Loading replays the partition's log from its log start offset to its log end offset: the latest
  record per key wins and a null value (tombstone) deletes. Offsets without group metadata make an
  Empty group ("simple" consumers). A load finishes only if the partition is still led in the same
  leader epoch; otherwise its result is dropped.
- Writes (`append`) are one uncompressed v2 batch per call, appended with acks=-1 (the topic's
  min.insync.replicas) through `ReplicaManager.append_records` (origin COORDINATOR); the caller changes its in-memory
  state only after a successful append. Append errors are mapped as Kafka's coordinator maps them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

from coordinator.group import consumer_records, records
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.group_metadata import GroupMetadata
from coordinator.runtime import APPEND_ERROR_MAP, CoordinatorRuntime, PartitionLog
from protocol.control_records import read_marker
from protocol.errors import CorruptRecordBatch, ErrorCode
from protocol.record_batch import build_batch, decode_records
from protocol.topic_names import GROUP_METADATA_TOPIC

log = logging.getLogger(__name__)

OFFSETS_TOPIC = GROUP_METADATA_TOPIC

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
        self.clock_ms = clock_ms
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
        load overtaken by a resignation (and maybe a new election) installs nothing."""
        found_groups: dict[str, records.StoredGroup | None] = {}
        found_consumer: dict[str, ConsumerGroup] = {}
        found_offsets: dict[str, dict[tuple[str, int], tuple[records.OffsetAndMetadata, int]]] = {}
        pending_txn: dict[int, dict[str, dict[tuple[str, int], tuple[records.OffsetAndMetadata, int]]]] = {}

        def on_batch(buf, pos: int, header) -> None:
            if header.is_control:
                self._replay_marker(buf, pos, header, pending_txn, found_offsets)
                return
            into = pending_txn.setdefault(header.producer_id, {}) if header.is_transactional else None
            for record in decode_records(buf, pos, header):
                if consumer_records.is_consumer_key(record.key):
                    self._replay_consumer(record, found_consumer)
                else:
                    self._replay(record, found_groups, found_offsets if into is None else into)

        if not await self.runtime.replay(partition, token, self.config.offsets_load_buffer_size, on_batch):
            return 0
        now = self.monotonic_ms()  # loaded members' sessions restart now, on the deadline clock
        still_pending = {g for by_group in pending_txn.values() for g, offsets in by_group.items() if offsets}
        consumer_groups = {g: c for g, c in found_consumer.items() if c.exists}
        with_offsets = {g for g, offsets in found_offsets.items() if offsets}
        for group_id in set(found_groups) | with_offsets | still_pending | set(consumer_groups):
            stored = found_groups.get(group_id)
            group = GroupMetadata.loaded(group_id, stored, now) if stored else GroupMetadata(group_id)
            group.consumer = consumer_groups.get(group_id)
            for tp, (om, log_offset) in found_offsets.get(group_id, {}).items():
                group.offsets[tp] = om
                group.offset_log_offsets[tp] = log_offset
            for pid, by_group in pending_txn.items():
                if by_group.get(group_id):
                    group.pending_txn_offsets[pid] = dict(by_group[group_id])
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
    def _replay_marker(buf, pos: int, header, pending_txn: dict, found_offsets: dict) -> None:
        """A transaction marker: its producer's pending offsets become committed (COMMIT; a
        record later in the log than the one held wins) or are dropped (ABORT)."""
        try:
            marker = read_marker(buf, pos, header)
        except CorruptRecordBatch as e:
            log.error("skipping an unreadable marker in %s at %d: %s", OFFSETS_TOPIC, header.base_offset, e)
            return
        done = pending_txn.pop(header.producer_id, {})
        if marker is None or not marker.commit:
            return
        for group_id, offsets in done.items():
            held = found_offsets.setdefault(group_id, {})
            for tp, (om, log_offset) in offsets.items():
                if tp not in held or held[tp][1] < log_offset:
                    held[tp] = (om, log_offset)

    @staticmethod
    def _replay_consumer(record, found: dict[str, ConsumerGroup]) -> None:
        """A consumer group record (keys 3-8, KIP-848) replayed onto its group."""
        try:
            decoded = consumer_records.decode(record.key, record.value)
        except records.CorruptCoordinatorRecord as e:
            log.error("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC, record.offset, e)
            return
        group = found.get(decoded.group_id)
        if group is None:
            group = found[decoded.group_id] = ConsumerGroup(decoded.group_id)
        group.replay(decoded)

    @staticmethod
    def _replay(record, found_groups: dict, found_offsets: dict) -> None:
        try:
            key = records.decode_key(record.key)
            if isinstance(key, records.GroupKey):
                found_groups[key.group] = None if record.value is None else records.decode_group_value(record.value)
                if record.value is None:
                    found_groups.pop(key.group)
            else:
                offsets = found_offsets.setdefault(key.group, {})
                tp = (key.topic, key.partition)
                if record.value is None:
                    offsets.pop(tp, None)
                else:
                    offsets[tp] = (records.decode_offset_value(record.value), record.offset)
        except records.CorruptCoordinatorRecord as e:
            log.error("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC, record.offset, e)

    # ---- writes --------------------------------------------------------------------------------
    async def append(
        self,
        group_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        producer: tuple[int, int] | None = None,
        *,
        group_metadata: bool = False,
    ) -> tuple[ErrorCode, int]:
        """Append (key, value) records for `group_id` to its partition; (error, base offset). The
        error is NONE, or what Kafka tells a group client for that append failure. `producer`
        (id, epoch) makes it a transactional batch of that producer (TxnOffsetCommit). A batch
        too large answers INVALID_COMMIT_OFFSET_SIZE for offsets, UNKNOWN_SERVER_ERROR for the
        group's own record (`group_metadata`, Kafka's storeGroup: a huge SyncGroup assignment)."""
        partition = self.partition_for(group_id)
        if self.runtime.error_for(partition) != ErrorCode.NONE:
            return ErrorCode.NOT_COORDINATOR, -1
        pid, epoch = producer if producer is not None else (-1, -1)
        batch = build_batch(
            list(entries),
            timestamp_ms=self.clock_ms(),
            compression=self.config.offsets_topic_compression_codec,
            producer_id=pid,
            producer_epoch=epoch,
            transactional=producer is not None,
        )
        outcome = await self.runtime.append(partition, batch, self.config.offsets_commit_timeout_ms)
        if outcome.error != ErrorCode.NONE:
            mapped = outcome.error
            if group_metadata and mapped == ErrorCode.INVALID_COMMIT_OFFSET_SIZE:
                mapped = ErrorCode.UNKNOWN_SERVER_ERROR
            log.warning(
                "append for group %s to %s-%d failed: %s (%s)",
                group_id,
                OFFSETS_TOPIC,
                partition,
                outcome.message,
                mapped.name,
            )
            return mapped, -1
        return ErrorCode.NONE, outcome.first_offset
