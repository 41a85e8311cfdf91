"""Operators' views of the transaction coordinator (Kafka's `TransactionCoordinator`
handleDescribeTransactions / handleListTransactions): DescribeTransactions (key 65) and
ListTransactions (key 66, v1 adds the duration filter, KIP-994). State names are Kafka's
(`TransactionState.name`)."""

from __future__ import annotations

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


def describe_unavailable(transactional_id: str) -> dict:
    """The entry of a broker without a transaction coordinator."""
    return {
        "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout_ms": 0,
        "transaction_start_time_ms": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }


def describe(manager: TransactionStateManager, transactional_id: str) -> dict:
    """One `transaction_states` entry: TRANSACTIONAL_ID_NOT_FOUND for an id this coordinator
    does not hold, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when it does not own it now."""
    entry = {
        "error_code": ErrorCode.NONE,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout_ms": 0,
        "transaction_start_time_ms": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }
    error = manager.coordinator_error(transactional_id) if transactional_id else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    metadata = manager.transactions.get(transactional_id)
    if error == ErrorCode.NONE and (metadata is None or metadata.state == TxnState.DEAD):
        error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    if error != ErrorCode.NONE or metadata is None:
        return entry | {"error_code": error}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return entry | {
        "transaction_state": STATE_NAMES[metadata.state],
        "transaction_timeout_ms": metadata.txn_timeout_ms,
        "transaction_start_time_ms": metadata.txn_start_timestamp_ms,
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def list_transactions(
    manager: TransactionStateManager,
    state_filters: list[str],
    producer_id_filters: list[int],
    duration_filter_ms: int,
    now_ms: int,
) -> dict:
    """A ListTransactions response body (without throttle time): the ids this broker
    coordinates, filtered by state names, producer ids and (v1) minimum running time in ms."""
    unknown = [name for name in state_filters if name not in BY_NAME]
    states = {BY_NAME[name] for name in state_filters if name in BY_NAME}
    if state_filters and not states:
        return {"error_code": ErrorCode.NONE, "unknown_state_filters": unknown, "transaction_states": []}
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
        {
            "transactional_id": m.transactional_id,
            "producer_id": m.producer_id,
            "transaction_state": STATE_NAMES[m.state],
        }
        for m in manager.transactions.values()
        if wanted(m)
    ]
    return {"error_code": error, "unknown_state_filters": unknown, "transaction_states": found}
