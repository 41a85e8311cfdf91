"""The share coordinator (KIP-932, Kafka's `ShareCoordinatorService`): the durable state of
share-partitions in `__share_group_state`, served to the partition leaders (and the group
coordinator) through InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState and ReadShareGroupStateSummary (keys 83-87).

- A share-partition (group, topic id, partition) lives on `__share_group_state` partition
  `records.partition_for(key)`; this broker coordinates it while it leads that partition. A key
  of a partition being loaded answers COORDINATOR_LOAD_IN_PROGRESS, one not led NOT_COORDINATOR.
- Loading replays the partition: a snapshot replaces a key's state, an update is merged into it
  (an update of an older snapshot is ignored), a tombstone removes it.
- Pruning (Kafka's `share.coordinator.state.topic.prune.interval.ms`): every interval, each
  partition led here loses the records before the earliest latest-snapshot of its keys (and
  never past the last write replayed): replaying from there gives the same states, so
  `__share_group_state` (cleanup.policy=delete, retention.ms=-1) does not grow without bound.
- Every operation is the shard's (`shard.py`), written through the runtime's write path
  (acks=-1, the topic's min ISR): an answer of NONE to a write means its records are committed.
  Writes of one key take turns. Append errors map as the runtime maps them
  (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import trio

from coordinator.record_codec import CorruptCoordinatorRecord
from coordinator.runtime import CoordinatorResult, CoordinatorRuntime, PartitionLog, WriteFailed
from coordinator.share import records
from coordinator.share.config import ShareCoordinatorConfig
from coordinator.share.records import SharePartitionKey, ShareState, ShareUpdate, StateWrite
from coordinator.share.shard import ShareCoordinatorShard, StateResult
from protocol.errors import ErrorCode
from protocol.record_batch import decode_records
from protocol.topic_names import SHARE_GROUP_STATE_TOPIC

log = logging.getLogger(__name__)


class ShareCoordinator:
    def __init__(self, partition_log: PartitionLog, config: ShareCoordinatorConfig, clock_ms: Callable[[], int]):
        self.config = config
        self.shard = ShareCoordinatorShard(config.snapshot_every, clock_ms)
        #: partition -> the offset of the last record replayed (a load's, or a write's first)
        self.replayed_up_to: dict[int, int] = {}
        self.runtime = CoordinatorRuntime(
            SHARE_GROUP_STATE_TOPIC,
            partition_log,
            self._load,
            self._unloaded,
            reload_on_new_epoch=False,
            clock_ms=clock_ms,
            append_timeout_ms=config.write_timeout_ms,
        )

    def partition_for(self, key: SharePartitionKey) -> int:
        return records.partition_for(key, self.config.num_partitions)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await self.runtime.run(nursery)
            task_status.started()
            while True:
                await trio.sleep(self.config.prune_interval_ms / 1000)
                await self.prune()

    async def prune(self) -> dict[int, int]:
        """Delete, in each partition served here, the records no state needs; -> partition ->
        the new log start offset (for those it raised)."""
        raised = {}
        for partition in sorted(self.runtime.owned):
            upto = self.replayed_up_to.get(partition)
            if upto is None or self.runtime.error_for(partition) != ErrorCode.NONE:
                continue
            below = self.shard.redundant_below(lambda key: self.partition_for(key) == partition, upto)
            tp = (SHARE_GROUP_STATE_TOPIC, partition)
            try:
                if below > self.runtime.partition_log.log(tp).log_start_offset:
                    await self.runtime.partition_log.delete_below(tp, below)
                    raised[partition] = below
            except Exception as e:  # leadership moved meanwhile: the next leader prunes
                log.info("pruning %s-%d below %d failed: %s", SHARE_GROUP_STATE_TOPIC, partition, below, e)
        return raised

    # ---- leadership ------------------------------------------------------------------------------
    def on_election(self, tp, leader_epoch: int) -> None:
        """LeadershipListener: a partition of `__share_group_state` led here is loaded."""
        self.runtime.on_election(tp, leader_epoch)

    def on_resignation(self, tp, leader_epoch: int | None) -> None:
        self.runtime.on_resignation(tp, leader_epoch)

    def _unloaded(self, partition: int) -> None:
        self.shard.forget(lambda key: self.partition_for(key) != partition)
        self.replayed_up_to.pop(partition, None)

    async def _load(self, partition: int, token: object) -> None:
        found: dict[SharePartitionKey, list[tuple[int, ShareState | ShareUpdate | None]]] = {}
        last = -1

        def on_batch(buf, pos: int, header) -> None:
            nonlocal last
            last = max(last, header.base_offset)
            if header.is_control:
                return
            for record in decode_records(buf, pos, header):
                try:
                    key, value = records.decode(record.key or b"", record.value)
                except CorruptCoordinatorRecord as e:
                    log.error("skipping an unreadable %s record at %d: %s", SHARE_GROUP_STATE_TOPIC, record.offset, e)
                    continue
                history = found.setdefault(key, [])
                if value is None or isinstance(value, ShareState):
                    history.clear()  # a snapshot or tombstone supersedes what came before
                history.append((record.offset, value))

        if not await self.runtime.replay(partition, token, self.config.load_buffer_size, on_batch):
            return
        self.shard.forget(lambda key: self.partition_for(key) != partition)
        for key, history in found.items():
            for offset, value in history:
                self.shard.replay(key, value, offset)
        if last >= 0:
            self.replayed_up_to[partition] = last
        self.runtime.finish_loading(partition, token)
        log.info("loaded %d share-partition states from %s-%d", len(found), SHARE_GROUP_STATE_TOPIC, partition)

    # ---- operations ------------------------------------------------------------------------------
    async def _run(
        self, key: SharePartitionKey, operation: Callable[[], CoordinatorResult[StateResult]]
    ) -> StateResult:
        partition = self.partition_for(key)
        error = self.runtime.error_for(partition)
        if error != ErrorCode.NONE:
            return StateResult(error)

        def tracked() -> CoordinatorResult[StateResult]:
            result = operation()
            inner = result.replay
            if inner is None:
                return result

            def replay(offset: int) -> None:
                inner(offset)
                self.replayed_up_to[partition] = max(self.replayed_up_to.get(partition, -1), offset)

            return dataclasses.replace(result, replay=replay)

        try:
            async with self.runtime.one_at_a_time(key):
                return await self.runtime.write(partition, tracked)
        except WriteFailed as e:
            return StateResult(e.error_code, str(e))

    async def write_state(self, key: SharePartitionKey, write: StateWrite) -> StateResult:
        """WriteShareGroupState for one share-partition: NONE once committed."""
        return await self._run(key, lambda: self.shard.write_state(key, write))

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> StateResult:
        """ReadShareGroupState: the stored state (start offset -1: never initialized)."""
        return await self._run(key, lambda: self.shard.read_state(key, leader_epoch))

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateResult:
        return await self._run(key, lambda: self.shard.initialize_state(key, state_epoch, start_offset))

    async def delete_state(self, key: SharePartitionKey) -> StateResult:
        return await self._run(key, lambda: self.shard.delete_state(key))

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> StateResult:
        error = self.runtime.error_for(self.partition_for(key))
        if error != ErrorCode.NONE:
            return StateResult(error)
        return self.shard.read_summary(key, leader_epoch)
