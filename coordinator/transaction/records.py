"""The records the transaction coordinator writes to `__transaction_state` (Kafka's `TransactionLog`),
and reading them back.

Format (`../shared/kafka-record-specs/TransactionLogKey.json` / `TransactionLogValue.json`, generated
into `protocol/schemas/coordinator_records.py`): the key is an int16 version (0) and the
transactional id; the value an int16 version and the producer id, epoch, timeout (ms), status byte
(`TxnState`), the partitions grouped by topic (null for Empty) and the start and last-update
timestamps (ms). A null value is a tombstone (the id expired). Kafka 3.8 writes value version 0;
version 1 (flexible) is read too. Unreadable records raise `CorruptCoordinatorRecord`.
"""

from __future__ import annotations

from coordinator.record_codec import CorruptCoordinatorRecord, build_versioned, parse_versioned, partition_for_key
from coordinator.transaction.transaction_metadata import NO_PRODUCER_EPOCH, TxnState, TxnTransition
from protocol.schemas import coordinator_records as specs

KEY_VERSION = 0
VALUE_VERSION = 0


def transaction_key(transactional_id: str) -> bytes:
    return build_versioned(specs.TRANSACTION_LOG_KEY, KEY_VERSION, {"transactional_id": transactional_id})


def decode_transaction_key(data: bytes) -> str:
    """The transactional id of a record key. Raises CorruptCoordinatorRecord."""
    _, key = parse_versioned(specs.TRANSACTION_LOG_KEY, data, "transaction log key")
    return key["transactional_id"]


def transaction_value(t: TxnTransition) -> bytes:
    """The record of a transition. Empty carries no partitions (Kafka refuses to write one that does)."""
    if t.state == TxnState.EMPTY and t.partitions:
        raise ValueError("an Empty transaction cannot hold partitions")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return build_versioned(
        specs.TRANSACTION_LOG_VALUE,
        VALUE_VERSION,
        {
            "producer_id": t.producer_id,
            "producer_epoch": t.producer_epoch,
            "transaction_timeout_ms": t.txn_timeout_ms,
            "transaction_status": int(t.state),
            "transaction_partitions": None
            if t.state == TxnState.EMPTY
            else [{"topic": topic, "partition_ids": ids} for topic, ids in by_topic.items()],
            "transaction_last_update_timestamp_ms": t.txn_last_update_timestamp_ms,
            "transaction_start_timestamp_ms": t.txn_start_timestamp_ms,
        },
    )


def decode_transaction_value(data: bytes) -> TxnTransition:
    """The state a record holds (as a transition to apply). Raises CorruptCoordinatorRecord."""
    _, v = parse_versioned(specs.TRANSACTION_LOG_VALUE, data, "transaction log value")
    try:
        state = TxnState(v["transaction_status"])
    except ValueError:
        raise CorruptCoordinatorRecord(f"unknown transaction status {v['transaction_status']}") from None
    partitions = frozenset(
        (p["topic"], partition) for p in v["transaction_partitions"] or () for partition in p["partition_ids"]
    )
    return TxnTransition(
        v["producer_id"],
        -1,
        v["producer_epoch"],
        NO_PRODUCER_EPOCH,
        v["transaction_timeout_ms"],
        state,
        partitions,
        v["transaction_start_timestamp_ms"],
        v["transaction_last_update_timestamp_ms"],
    )


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state` partition of an id: Kafka's `Utils.abs(transactionalId.hashCode) %
    transaction.state.log.num.partitions` (`Utils.abs(Integer.MIN_VALUE)` is 0)."""
    return partition_for_key(transactional_id, num_partitions)
