"""The log-backed store of the transactional ids this broker coordinates (Kafka's
`TransactionStateManager`).

- Ownership: an id lives in `__transaction_state` partition `partition_for(id)`; this broker is its
  coordinator while it leads that partition, and the partition's leader epoch is the coordinator
  epoch written into every marker. A partition being loaded answers COORDINATOR_LOAD_IN_PROGRESS,
  one not led NOT_COORDINATOR.
- Loading replays the partition from its log start offset to its end: the latest record per id
  wins, a tombstone removes it. A load overtaken by a resignation installs nothing.
- Writes (`append`) are one uncompressed batch per transition, appended with acks=-1 (the topic's
  min ISR) through `ReplicaManager.append_internal`; the caller applies the transition only after
  a successful append. Append errors map as Kafka's coordinator maps them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from coordinator.record_codec import CorruptCoordinatorRecord
from coordinator.transaction import records
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.transaction_metadata import TransactionMetadata, TxnTransition
from protocol.errors import ErrorCode
from protocol.record_batch import build_batch, decode_records, iter_batches
from protocol.topic_names import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)
E = ErrorCode

#: Kafka's TransactionStateManager.appendTransactionToLog error mapping
_APPEND_ERROR_MAP = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


class TransactionStateManager:
    def __init__(self, replica_manager, config: TransactionConfig, clock_ms: Callable[[], int]):
        self.replica_manager = replica_manager
        self.config = config
        self.clock_ms = clock_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch (its leader epoch)
        self.loading: set[int] = set()
        self._loads: dict[int, object] = {}

    def partition_for(self, transactional_id: str) -> int:
        return records.partition_for(transactional_id, self.config.num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker coordinates `transactional_id` now, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        p = self.partition_for(transactional_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return E.NOT_COORDINATOR
        return E.NONE

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        """The coordinator epoch of the id's partition while it is owned and loaded."""
        p = self.partition_for(transactional_id)
        return None if p in self.loading else self.owned.get(p)

    # ---- leadership ----------------------------------------------------------------------------
    def begin_loading(self, partition: int, leader_epoch: int) -> object | None:
        """Mark `partition` as loading as of `leader_epoch`; the token `load` needs, or None when
        it is owned already in that epoch. A new leader epoch reloads: markers must carry it."""
        if self.owned.get(partition) == leader_epoch:
            return None
        self.unload(partition)
        self.owned[partition] = leader_epoch
        self.loading.add(partition)
        token = self._loads[partition] = object()
        return token

    def unload(self, partition: int) -> list[TransactionMetadata]:
        """Forget `partition` and its ids; returns the metadata removed."""
        self.owned.pop(partition, None)
        self._loads.pop(partition, None)
        self.loading.discard(partition)
        removed = [m for tid, m in self.transactions.items() if self.partition_for(tid) == partition]
        for m in removed:
            del self.transactions[m.transactional_id]
        return removed

    async def load(self, partition: int, token: object) -> list[TransactionMetadata]:
        """Replay `__transaction_state-<partition>` and install its ids; returns the metadata
        installed (empty when the load was overtaken)."""
        found: dict[str, TxnTransition | None] = {}
        try:
            replica = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
            offset = replica.log.log_start_offset
            while offset < replica.log.log_end_offset and self._loads.get(partition) is token:
                read = replica.log.read(offset, self.config.load_buffer_size)
                if not read.records:
                    break
                for pos, header in iter_batches(read.records):
                    if header.is_control:
                        continue
                    for record in decode_records(read.records, pos, header):
                        try:
                            tid = records.decode_transaction_key(record.key or b"")
                            found[tid] = (
                                None if record.value is None else records.decode_transaction_value(record.value)
                            )
                        except CorruptCoordinatorRecord as e:
                            log.error(
                                "skipping an unreadable %s record at %d: %s", TRANSACTION_STATE_TOPIC, record.offset, e
                            )
                offset = read.next_offset
                await trio.sleep(0)
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            if self._loads.get(partition) is token:
                self.unload(partition)
            raise
        if self._loads.get(partition) is not token:
            return []
        installed = []
        for tid, transition in found.items():
            if transition is not None:
                metadata = self.transactions[tid] = TransactionMetadata.from_record(tid, transition)
                installed.append(metadata)
        self.loading.discard(partition)
        log.info(
            "loaded %d transactional ids from %s-%d (coordinator epoch %d)",
            len(installed),
            TRANSACTION_STATE_TOPIC,
            partition,
            self.owned[partition],
        )
        return installed

    # ---- writes --------------------------------------------------------------------------------
    async def append(
        self, transactional_id: str, transition: TxnTransition | None, coordinator_epoch: int
    ) -> ErrorCode:
        """Write `transition` (None: a tombstone) for the id; NONE, or the error Kafka tells the
        client. NOT_COORDINATOR when the partition changed hands (or epoch) meanwhile."""
        partition = self.partition_for(transactional_id)
        if self.owned.get(partition) != coordinator_epoch or partition in self.loading:
            return E.NOT_COORDINATOR
        value = None if transition is None else records.transaction_value(transition)
        batch = build_batch([(records.transaction_key(transactional_id), value)], timestamp_ms=self.clock_ms())
        try:
            await self.replica_manager.append_internal(
                (TRANSACTION_STATE_TOPIC, partition), batch, self.config.append_timeout_ms
            )
        except Exception as e:
            code = ErrorCode(getattr(e, "error_code", E.UNKNOWN_SERVER_ERROR))
            mapped = _APPEND_ERROR_MAP.get(code, code)
            log.warning("append for transactional id %s failed: %s (%s)", transactional_id, e, mapped.name)
            return mapped
        if self.owned.get(partition) != coordinator_epoch:
            return E.NOT_COORDINATOR
        return E.NONE
