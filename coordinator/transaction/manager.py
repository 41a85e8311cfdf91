"""The log-backed store of the transactional ids this broker coordinates (Kafka's
`TransactionStateManager`).

- Ownership: an id lives in `__transaction_state` partition `partition_for(id)`; this broker is its
  coordinator while it leads that partition, and the partition's leader epoch is the coordinator
  epoch written into every marker. A partition being loaded answers COORDINATOR_LOAD_IN_PROGRESS,
  one not led NOT_COORDINATOR.
- Loading replays the partition from its log start offset to its end: the latest record per id
  wins, a tombstone removes it. A load overtaken by a resignation installs nothing.
- Writes (`write`) go through the runtime's write path: one uncompressed batch per transition,
  appended with acks=-1 (the topic's min ISR) and origin COORDINATOR; the transition is applied
  (`replay`) only once committed. Append errors map as Kafka's coordinator maps them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.record_codec import CorruptCoordinatorRecord
from coordinator.runtime import CoordinatorResult, CoordinatorRuntime, PartitionLog
from coordinator.transaction import records
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.transaction_metadata import TransactionMetadata, TxnTransition
from protocol.errors import ErrorCode
from protocol.record_batch import decode_records
from protocol.topic_names import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)


class TransactionStateManager:
    def __init__(
        self,
        partition_log: PartitionLog,
        config: TransactionConfig,
        clock_ms: Callable[[], int],
        loaded: Callable[[list[TransactionMetadata]], None] = lambda installed: None,
    ):
        """`clock_ms`: the wall clock (ms since the epoch) for record timestamps; `loaded(installed)`
        hears of the ids a load installed."""
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}
        self._loaded = loaded
        self.runtime = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC,
            partition_log,
            self.load,
            self._unload_ids,
            reload_on_new_epoch=True,
            clock_ms=clock_ms,
            append_timeout_ms=config.append_timeout_ms,
        )

    def partition_for(self, transactional_id: str) -> int:
        return records.partition_for(transactional_id, self.config.num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker coordinates `transactional_id` now, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        return self.runtime.error_for(self.partition_for(transactional_id))

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        """The coordinator epoch of the id's partition while it is owned and loaded."""
        return self.runtime.epoch_of(self.partition_for(transactional_id))

    # ---- leadership (the runtime's callbacks) ------------------------------------------------
    def _unload_ids(self, partition: int) -> None:
        removed = [m for tid, m in self.transactions.items() if self.partition_for(tid) == partition]
        for m in removed:
            del self.transactions[m.transactional_id]
        if removed:
            log.info("unloaded %s-%d (%d transactional ids)", TRANSACTION_STATE_TOPIC, partition, len(removed))

    async def load(self, partition: int, token: object) -> list[TransactionMetadata]:
        """Replay `__transaction_state-<partition>` and install its ids; returns the metadata
        installed (empty when the load was overtaken)."""
        found: dict[str, TxnTransition | None] = {}

        def on_batch(buf, pos: int, header) -> None:
            if header.is_control:
                return
            for record in decode_records(buf, pos, header):
                try:
                    tid = records.decode_transaction_key(record.key or b"")
                    found[tid] = None if record.value is None else records.decode_transaction_value(record.value)
                except CorruptCoordinatorRecord as e:
                    log.error("skipping an unreadable %s record at %d: %s", TRANSACTION_STATE_TOPIC, record.offset, e)

        if not await self.runtime.replay(partition, token, self.config.load_buffer_size, on_batch):
            return []
        installed = []
        for tid, transition in found.items():
            if transition is not None:
                metadata = self.transactions[tid] = TransactionMetadata.from_record(tid, transition)
                installed.append(metadata)
        self.runtime.finish_loading(partition, token)
        log.info(
            "loaded %d transactional ids from %s-%d (coordinator epoch %d)",
            len(installed),
            TRANSACTION_STATE_TOPIC,
            partition,
            self.runtime.owned[partition],
        )
        self._loaded(installed)
        return installed

    # ---- writes --------------------------------------------------------------------------------
    async def write(
        self,
        transactional_id: str,
        transition: TxnTransition | None,
        coordinator_epoch: int,
        replay: Callable[[int], object],
    ) -> None:
        """Write `transition` (None: a tombstone) for the id through the runtime's write path,
        in `coordinator_epoch`; `replay` applies it once committed. Raises `WriteFailed` with
        the error Kafka tells the client: NOT_COORDINATOR when the partition is not served in
        that epoch (or changed hands meanwhile), else the append's error mapped."""
        value = None if transition is None else records.transaction_value(transition)
        entry = (records.transaction_key(transactional_id), value)
        await self.runtime.write(
            self.partition_for(transactional_id),
            lambda: CoordinatorResult([entry], None, replay),
            epoch=coordinator_epoch,
        )
