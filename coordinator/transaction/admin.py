"""Operators' views of the transaction coordinator (Kafka's `TransactionCoordinator`
handleDescribeTransactions / handleListTransactions): DescribeTransactions (key 65) and
ListTransactions (key 66, v1 adds the duration filter, KIP-994). State names are Kafka's
(`TransactionState.name`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.transaction.manager import TransactionStateManager
from coordinator.transaction.transaction_metadata import TransactionMetadata, TxnState
from protocol.errors import ErrorCode

STATE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
BY_NAME = {name: state for state, name in STATE_NAMES.items()}


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """One entry of a DescribeTransactions (key 65) answer: the id's state name, timeout (ms),
    start time (wall-clock ms, -1 when none), producer id and epoch, and its partitions by
    topic; only the error and the id when `error_code` is not NONE."""

    error_code: int
    transactional_id: str
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topics: list[tuple[str, list[int]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    transaction_state: str


@dataclass(frozen=True, slots=True)
class ListedTransactions:
    """A ListTransactions (key 66) answer of one coordinator; `unknown_state_filters` the
    filter names that are no state."""

    error_code: int
    unknown_state_filters: list[str]
    transaction_states: list[ListedTransaction]


def describe(manager: TransactionStateManager, transactional_id: str) -> DescribedTransaction:
    """One id of a DescribeTransactions answer: TRANSACTIONAL_ID_NOT_FOUND for an id this
    coordinator does not hold, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when it does not
    own it now."""
    error = manager.coordinator_error(transactional_id) if transactional_id else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    metadata = manager.transactions.get(transactional_id)
    if error == ErrorCode.NONE and (metadata is None or metadata.state == TxnState.DEAD):
        error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    if error != ErrorCode.NONE or metadata is None:
        return DescribedTransaction(error, transactional_id)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return DescribedTransaction(
        ErrorCode.NONE,
        transactional_id,
        STATE_NAMES[metadata.state],
        metadata.txn_timeout_ms,
        metadata.txn_start_timestamp_ms,
        metadata.producer_id,
        metadata.producer_epoch,
        list(by_topic.items()),
    )


def list_transactions(
    manager: TransactionStateManager,
    state_filters: list[str],
    producer_id_filters: list[int],
    duration_filter_ms: int,
    now_ms: int,
) -> ListedTransactions:
    """ListTransactions: the ids this broker coordinates, filtered by state names, producer ids
    and (v1) minimum running time in ms (-1: none)."""
    unknown = [name for name in state_filters if name not in BY_NAME]
    states = {BY_NAME[name] for name in state_filters if name in BY_NAME}
    if state_filters and not states:
        return ListedTransactions(ErrorCode.NONE, unknown, [])
    pids = set(producer_id_filters)

    def wanted(m: TransactionMetadata) -> bool:
        if states and m.state not in states:
            return False
        if pids and m.producer_id not in pids:
            return False
        if duration_filter_ms >= 0 and (
            m.txn_start_timestamp_ms < 0 or now_ms - m.txn_start_timestamp_ms < duration_filter_ms
        ):
            return False
        return m.state != TxnState.DEAD

    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if manager.runtime.loading else ErrorCode.NONE
    found = [
        ListedTransaction(m.transactional_id, m.producer_id, STATE_NAMES[m.state])
        for m in manager.transactions.values()
        if wanted(m)
    ]
    return ListedTransactions(error, unknown, found)
