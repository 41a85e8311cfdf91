"""One transactional id's state (Kafka's `TransactionMetadata` and `TransactionState`, KIP-98).
Pure: no I/O, no clock of its own (times are passed in, ms since the epoch).

Every change is two steps, as in Kafka: a `prepare_*` method checks the transition and returns a
`TxnTransition` (the state to write to `__transaction_state`), marking it pending so no other
change can start; once the record is durably written, `complete_transition` applies it (or
`abort_transition` forgets it when the write failed). States and their valid previous states:
- Empty: no transaction; from Empty, CompleteCommit, CompleteAbort (InitProducerId bumps the epoch).
- Ongoing: partitions added; from Ongoing, Empty, CompleteCommit, CompleteAbort.
- PrepareCommit / PrepareAbort: EndTxn accepted, markers to be written; from Ongoing (PrepareAbort
  also from PrepareEpochFence).
- CompleteCommit / CompleteAbort: every marker written; from PrepareCommit / PrepareAbort.
- PrepareEpochFence: a newer producer instance (or the timeout) aborts the ongoing transaction with
  a bumped epoch; from Ongoing.
- Dead: expired and removed; from Empty, CompleteCommit, CompleteAbort.
A transition outside that table raises `IllegalTxnTransition` and changes nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

NO_PRODUCER_EPOCH = -1
SHORT_MAX = (1 << 15) - 1


class TxnState(enum.IntEnum):
    """The states; the values are the status byte `TransactionLogValue` stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTxnTransition(Exception):
    """A transition the state table forbids, or one started while another is pending."""


class ProducerFenced(KafkaError):
    """InitProducerId named an epoch that is not the current one (PRODUCER_FENCED)."""

    error_code = ErrorCode.PRODUCER_FENCED


@dataclass(frozen=True)
class TxnTransition:
    """The state a change leads to: what is written to the transaction log, then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = -1
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    pending: TxnState | None = None  # a transition written but not yet applied

    @property
    def epoch_exhausted(self) -> bool:
        """The epoch cannot be bumped again (Kafka rotates to a new producer id then)."""
        return self.producer_epoch >= SHORT_MAX - 1

    # ---- preparing -----------------------------------------------------------------------------
    def _prepare(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: set[TopicPartition] | frozenset[TopicPartition] | None = None,
        txn_start_timestamp_ms: int | None = None,
        txn_last_update_timestamp_ms: int | None = None,
    ) -> TxnTransition:
        if self.pending is not None:
            raise IllegalTxnTransition(
                f"{self.transactional_id}: {self.state.name} -> {state.name} while {self.pending.name} is pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTxnTransition(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        self.pending = state
        return TxnTransition(
            self.producer_id if producer_id is None else producer_id,
            self.last_producer_id,
            self.producer_epoch if producer_epoch is None else producer_epoch,
            self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state,
            frozenset(self.partitions if partitions is None else partitions),
            self.txn_start_timestamp_ms if txn_start_timestamp_ms is None else txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms if txn_last_update_timestamp_ms is None else txn_last_update_timestamp_ms,
        )

    def prepare_increment_epoch(
        self, txn_timeout_ms: int, now_ms: int, expected: tuple[int, int] | None = None
    ) -> TxnTransition:
        """InitProducerId for an existing id: Empty with the epoch bumped. `expected` is the
        (producer id, epoch) the client says it has (KIP-360); a mismatch raises ProducerFenced
        unless it is a retry of the previous bump. The caller rotates the producer id instead
        when `epoch_exhausted`."""
        if self.epoch_exhausted:
            raise IllegalTxnTransition(f"{self.transactional_id}: producer epoch exhausted")
        epoch, last = self.producer_epoch + 1, self.producer_epoch
        if expected is not None and expected[1] != NO_PRODUCER_EPOCH:
            if expected == (self.producer_id, self.producer_epoch):
                pass
            elif expected == (self.producer_id, self.last_producer_epoch):
                epoch, last = self.producer_epoch, self.last_producer_epoch  # a retried bump: same answer
            else:
                raise ProducerFenced(f"{self.transactional_id}: expected {expected}, have {self.producer_epoch}")
        return self._prepare(
            TxnState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=txn_timeout_ms,
            partitions=set(),
            txn_start_timestamp_ms=-1,
            txn_last_update_timestamp_ms=now_ms,
        )

    def prepare_rotate_producer_id(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int) -> TxnTransition:
        """InitProducerId once the epoch is exhausted: a new producer id at epoch 0."""
        transition = self._prepare(
            TxnState.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=txn_timeout_ms,
            partitions=set(),
            txn_start_timestamp_ms=-1,
            txn_last_update_timestamp_ms=now_ms,
        )
        return TxnTransition(**{**transition.__dict__, "last_producer_id": self.producer_id})

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransition:
        """AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with more partitions; a new transaction
        starts its clock here."""
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self._prepare(
            TxnState.ONGOING,
            partitions=(set() if starting else set(self.partitions)) | set(added),
            txn_start_timestamp_ms=now_ms if starting else self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms=now_ms,
        )

    def prepare_end(self, commit: bool, now_ms: int) -> TxnTransition:
        """EndTxn: PrepareCommit or PrepareAbort."""
        return self._prepare(
            TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, txn_last_update_timestamp_ms=now_ms
        )

    def prepare_fence_epoch(self) -> TxnTransition:
        """A newer instance or the transaction timeout: bump the epoch to fence the producer,
        then abort (PrepareEpochFence, then PrepareAbort with that epoch)."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTxnTransition(f"{self.transactional_id}: cannot fence at the largest epoch")
        return self._prepare(
            TxnState.PREPARE_EPOCH_FENCE,
            producer_epoch=self.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransition:
        """Every marker is written: CompleteCommit or CompleteAbort, no partitions."""
        target = {TxnState.PREPARE_COMMIT: TxnState.COMPLETE_COMMIT, TxnState.PREPARE_ABORT: TxnState.COMPLETE_ABORT}
        if self.state not in target:
            raise IllegalTxnTransition(f"{self.transactional_id}: nothing to complete in {self.state.name}")
        return self._prepare(target[self.state], partitions=set(), txn_last_update_timestamp_ms=now_ms)

    def prepare_dead(self) -> TxnTransition:
        """transactional.id.expiration.ms passed: remove it (a tombstone follows)."""
        return self._prepare(TxnState.DEAD, partitions=set())

    # ---- applying ------------------------------------------------------------------------------
    def complete_transition(self, t: TxnTransition) -> None:
        """Apply a written transition (the one pending)."""
        if self.pending != t.state:
            raise IllegalTxnTransition(
                f"{self.transactional_id}: completing {t.state.name} but {self.pending!r} is pending"
            )
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.txn_start_timestamp_ms = t.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = t.txn_last_update_timestamp_ms
        self.pending = None

    def abort_transition(self) -> None:
        """The write of the pending transition failed: nothing changed."""
        self.pending = None

    @classmethod
    def from_record(cls, transactional_id: str, t: TxnTransition) -> TransactionMetadata:
        """The state a loaded `__transaction_state` record describes."""
        metadata = cls(transactional_id, t.producer_id)
        metadata.pending = t.state
        metadata.complete_transition(t)
        return metadata
