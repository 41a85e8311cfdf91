"""The transaction coordinator's trio shell (Kafka's `TransactionCoordinator`, KIP-98): InitProducerId
with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn over the pure
`TransactionMetadata` and the log-backed `TransactionStateManager`; operators' views are in
`admin.py`.

Every state change is written to `__transaction_state` before it is acted on. EndTxn is answered
once PrepareCommit / PrepareAbort is written; the markers then go to every partition of the
transaction (`markers.write`, which retries until each partition's leader appended its marker),
and CompleteCommit / CompleteAbort is written last. A coordinator that loads an id found in
PrepareCommit / PrepareAbort sends its markers again. A transaction Ongoing for longer than its
timeout is aborted with a bumped epoch (fencing the producer), checked every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`; ids idle for
`transactional.id.expiration.ms` are removed.

Concurrency: each id changes on the trio thread between awaits; `TransactionMetadata.pending`
keeps a second change from starting while one is being written (CONCURRENT_TRANSACTIONS).
AddPartitionsToTxn / AddOffsetsToTxn arriving while the previous transaction's markers are being
written wait for its completion (at most `COMPLETION_WAIT_S`) instead of answering
CONCURRENT_TRANSACTIONS at once as Kafka does: librdkafka backs off `retry.backoff.ms` (100 ms) on
that error, which made every back-to-back transaction pay it (measured in `make bench`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio

from coordinator.runtime import PartitionLog, WriteFailed
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.manager import TransactionStateManager
from coordinator.transaction.transaction_metadata import (
    IllegalTxnTransition,
    ProducerFenced,
    TransactionMetadata,
    TxnState,
    TxnTransition,
)
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)
COMPLETION_WAIT_S = 1.0


class TransactionCoordinator:
    def __init__(
        self,
        partition_log: PartitionLog,
        config: TransactionConfig,
        markers,
        generate_producer_id: Callable[[], Awaitable[int | None]],
        *,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ):
        """`markers.write(producer_id, producer_epoch, coordinator_epoch, commit, partitions,
        still_current)` sends the markers and returns once every partition has its marker (or
        `still_current()` turned false). `generate_producer_id()` returns a new producer id, or None
        when none can be had now (answered COORDINATOR_NOT_AVAILABLE, which clients retry)."""
        self.config = config
        self.markers = markers
        self.generate_producer_id = generate_producer_id
        self.clock_ms = wall_clock_ms
        self.manager = TransactionStateManager(partition_log, config, wall_clock_ms, self._ids_loaded)
        self.runtime = self.manager.runtime
        self._nursery: trio.Nursery | None = None
        self._completions: dict[str, trio.Event] = {}  # ids whose markers are being written

    # ---- lifecycle -----------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.runtime.every(self.config.abort_timed_out_interval_ms / 1000, self._abort_timed_out)
            self.runtime.every(self.config.remove_expired_interval_ms / 1000, self._expire_ids)
            await self.runtime.run(nursery)
            task_status.started()

    def on_election(self, tp: TopicPartition, leader_epoch: int) -> None:
        """LeadershipListener: this broker leads `tp`; the runtime loads a transaction log partition."""
        self.runtime.on_election(tp, leader_epoch)

    def on_resignation(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        """LeadershipListener: a transaction log partition's ids are dropped."""
        self.runtime.on_resignation(tp, leader_epoch)

    def _ids_loaded(self, installed: list[TransactionMetadata]) -> None:
        """Ids a load left in PREPARE_COMMIT / PREPARE_ABORT get their markers sent."""
        assert self._nursery is not None, "loads run in the coordinator's nursery"
        for metadata in installed:
            if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                epoch = self.manager.coordinator_epoch(metadata.transactional_id)
                if epoch is not None:
                    log.info(
                        "transactional id %s was left in %s: sending its markers",
                        metadata.transactional_id,
                        metadata.state.name,
                    )
                    self._nursery.start_soon(self._complete, metadata, epoch)

    # ---- helpers -------------------------------------------------------------------------------
    async def _write(
        self, metadata: TransactionMetadata, transition: TxnTransition, epoch: int, *, tombstone: bool = False
    ) -> ErrorCode:
        """Write `transition` (prepared on `metadata`; with `tombstone`, the id's tombstone, and
        the id is removed once it is committed) and apply it once committed; on a failed write
        the prepared transition is dropped, so the id is as last committed. NOT_COORDINATOR when
        the id is no longer ours (or was replaced) by then."""
        applied = False

        transactions = self.manager.transactions
        new = metadata.transactional_id not in transactions  # a first InitProducerId's

        def ours() -> bool:  # still this id's metadata, or the first one, not installed yet
            current = transactions.get(metadata.transactional_id)
            return current is metadata or (new and current is None)

        def replay(_: int) -> None:
            nonlocal applied
            if ours():
                applied = True
                metadata.complete_transition(transition)
                if tombstone:
                    del transactions[metadata.transactional_id]
                else:
                    transactions[metadata.transactional_id] = metadata

        try:
            await self.manager.write(metadata.transactional_id, None if tombstone else transition, epoch, replay)
        except WriteFailed as e:
            if not ours():
                return ErrorCode.NOT_COORDINATOR
            metadata.abort_transition()
            return e.error_code
        return ErrorCode.NONE if applied else ErrorCode.NOT_COORDINATOR

    def _validate(self, transactional_id: str | None) -> tuple[ErrorCode, TransactionMetadata | None, int]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None, -1
        error = self.manager.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None, -1
        epoch = self.manager.coordinator_epoch(transactional_id)
        assert epoch is not None
        return ErrorCode.NONE, self.manager.transactions.get(transactional_id), epoch

    # ---- InitProducerId ------------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str | None, txn_timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId (key 22) with a transactional id: (error, producer id, epoch). A known
        id gets its epoch bumped (fencing older instances); an open transaction is aborted first
        (CONCURRENT_TRANSACTIONS until that is done). `expected` (v3+, KIP-360): the (id, epoch)
        the producer holds; a stale one is PRODUCER_FENCED."""
        error, metadata, epoch = self._validate(transactional_id)
        if error != ErrorCode.NONE:
            return error, -1, -1
        assert transactional_id is not None
        if not 0 < txn_timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        now = self.clock_ms()
        if metadata is None:
            producer_id = await self.generate_producer_id()
            if producer_id is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
            metadata = self.manager.transactions.get(transactional_id)
            if metadata is None:  # installed by its first write's replay, once committed
                metadata = TransactionMetadata(transactional_id, producer_id, txn_timeout_ms=txn_timeout_ms)
        if metadata.pending is not None or metadata.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
            TxnState.PREPARE_EPOCH_FENCE,
        ):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if metadata.state == TxnState.ONGOING:
            self._fence_and_abort(metadata, epoch)
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if metadata.state == TxnState.DEAD:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        try:
            if metadata.epoch_exhausted:
                new_id = await self.generate_producer_id()
                if new_id is None:
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
                if metadata.pending is not None:
                    return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
                transition = metadata.prepare_rotate_producer_id(new_id, txn_timeout_ms, now)
            else:
                transition = metadata.prepare_increment_epoch(txn_timeout_ms, now, expected)
        except ProducerFenced:
            return ErrorCode.PRODUCER_FENCED, -1, -1
        except IllegalTxnTransition as e:
            log.warning("InitProducerId for %s: %s", transactional_id, e)
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        error = await self._write(metadata, transition, epoch)
        if error != ErrorCode.NONE:
            return error, -1, -1
        log.info(
            "transactional id %s: producer id %d, epoch %d",
            transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
        )
        return ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch

    # ---- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    def _producer_error(self, metadata: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition]
    ) -> ErrorCode:
        """AddPartitionsToTxn (key 24) and AddOffsetsToTxn (key 25, the group's offsets
        partition): one error for the whole request."""
        completing = self._completions.get(transactional_id)
        if completing is not None:
            with trio.move_on_after(COMPLETION_WAIT_S):
                await completing.wait()
        error, metadata, epoch = self._validate(transactional_id)
        if error == ErrorCode.NONE:
            error = self._producer_error(metadata, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return error
        assert metadata is not None
        if metadata.pending is not None or metadata.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
            TxnState.PREPARE_EPOCH_FENCE,
        ):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state == TxnState.ONGOING and partitions <= metadata.partitions:
            return ErrorCode.NONE
        if metadata.state == TxnState.DEAD:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        try:
            transition = metadata.prepare_add_partitions(partitions, self.clock_ms())
        except IllegalTxnTransition:
            return ErrorCode.INVALID_TXN_STATE
        return await self._write(metadata, transition, epoch)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with VerifyOnly (KIP-890 part 1; Kafka's
        `TransactionCoordinator.handleVerifyPartitionsInTransaction`): whether each partition is in
        the producer's ongoing transaction at that epoch, changing nothing. Every partition gets
        the same error when the id is unknown here (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        INVALID_REQUEST for an empty id), maps to another producer (INVALID_PRODUCER_ID_MAPPING),
        has another epoch (PRODUCER_FENCED) or is mid-transition (CONCURRENT_TRANSACTIONS); else
        NONE for a partition of the Ongoing transaction and INVALID_TXN_STATE for any other."""
        error, metadata, _ = self._validate(transactional_id)
        if error == ErrorCode.NONE:
            error = self._producer_error(metadata, producer_id, producer_epoch)
        if error == ErrorCode.NONE:
            assert metadata is not None
            if metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) or (
                metadata.pending is not None and metadata.state != TxnState.ONGOING
            ):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return dict.fromkeys(partitions, error)
        assert metadata is not None
        ongoing = metadata.state == TxnState.ONGOING
        return {
            tp: ErrorCode.NONE if ongoing and tp in metadata.partitions else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    # ---- EndTxn --------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """EndTxn (key 26): answered once PrepareCommit / PrepareAbort is written; the markers
        and the completion follow in the background. A retried EndTxn of a completed transaction
        is NONE; the other outcome of a decided one is INVALID_TXN_STATE."""
        error, metadata, epoch = self._validate(transactional_id)
        if error == ErrorCode.NONE:
            error = self._producer_error(metadata, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return error
        assert metadata is not None
        if metadata.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = metadata.state
        if state == TxnState.ONGOING:
            return await self._end(metadata, commit, epoch)
        if state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return ErrorCode.NONE
        if state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state == TxnState.PREPARE_EPOCH_FENCE:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.INVALID_TXN_STATE

    async def _end(self, metadata: TransactionMetadata, commit: bool, epoch: int) -> ErrorCode:
        try:
            transition = metadata.prepare_end(commit, self.clock_ms())
        except IllegalTxnTransition:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        error = await self._write(metadata, transition, epoch)
        if error == ErrorCode.NONE:
            assert self._nursery is not None
            self._nursery.start_soon(self._complete, metadata, epoch)
        return error

    async def _complete(self, metadata: TransactionMetadata, epoch: int) -> None:
        """Send the markers of a PrepareCommit / PrepareAbort, then write CompleteCommit /
        CompleteAbort. Stops quietly when the id moves to another coordinator (which redoes it)."""
        tid = metadata.transactional_id
        commit = metadata.state == TxnState.PREPARE_COMMIT
        done = self._completions[tid] = trio.Event()

        def still_current() -> bool:
            return self.manager.transactions.get(tid) is metadata and self.manager.coordinator_epoch(tid) == epoch

        try:
            await self.markers.write(
                metadata.producer_id, metadata.producer_epoch, epoch, commit, set(metadata.partitions), still_current
            )
            while still_current() and metadata.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                if metadata.pending is None:
                    transition = metadata.prepare_complete(self.clock_ms())
                    error = await self._write(metadata, transition, epoch)
                    if error == ErrorCode.NONE:
                        break
                    log.warning("completing the transaction of %s failed: %s; retrying", tid, error.name)
                await trio.sleep(0.1)
        finally:
            done.set()
            if self._completions.get(tid) is done:
                del self._completions[tid]

    # ---- aborts on timeout and on a newer instance -----------------------------------------------
    def _fence_and_abort(self, metadata: TransactionMetadata, epoch: int) -> None:
        """Bump the epoch (fencing the running producer) and abort its open transaction."""
        if metadata.pending is not None:
            return
        if metadata.state == TxnState.ONGOING:
            try:
                metadata.complete_transition(metadata.prepare_fence_epoch())  # in memory only, as Kafka
            except IllegalTxnTransition as e:
                log.warning("cannot fence %s: %s", metadata.transactional_id, e)
                return
        if metadata.state != TxnState.PREPARE_EPOCH_FENCE:
            return
        log.info("aborting the transaction of %s with epoch %d", metadata.transactional_id, metadata.producer_epoch)
        assert self._nursery is not None
        self._nursery.start_soon(self._end, metadata, False, epoch)

    def _abort_timed_out(self) -> None:
        """Every transaction.abort.timed.out.transaction.cleanup.interval.ms (the runtime's timer)."""
        now = self.clock_ms()
        for metadata in list(self.manager.transactions.values()):
            timed_out = (
                metadata.state == TxnState.ONGOING and metadata.txn_start_timestamp_ms + metadata.txn_timeout_ms < now
            )
            if (timed_out or metadata.state == TxnState.PREPARE_EPOCH_FENCE) and metadata.pending is None:
                epoch = self.manager.coordinator_epoch(metadata.transactional_id)
                if epoch is not None:
                    self._fence_and_abort(metadata, epoch)

    async def _expire_ids(self) -> None:
        """Every transaction.remove.expired.transaction.cleanup.interval.ms (the runtime's timer): ids
        idle past transactional.id.expiration.ms are removed (a tombstone appended first)."""
        now = self.clock_ms()
        for metadata in list(self.manager.transactions.values()):
            idle = now - metadata.txn_last_update_timestamp_ms
            if (
                metadata.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                and metadata.pending is None
                and idle > self.config.id_expiration_ms
            ):
                epoch = self.manager.coordinator_epoch(metadata.transactional_id)
                if epoch is None:
                    continue
                transition = metadata.prepare_dead()
                if await self._write(metadata, transition, epoch, tombstone=True) == ErrorCode.NONE:
                    log.info("transactional id %s expired after %d ms idle", metadata.transactional_id, idle)
