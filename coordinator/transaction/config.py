"""What the transaction coordinator reads from the broker's configuration (Kafka's
`TransactionStateManagerConfig` and `TransactionLogConfig`); times in ms, sizes in bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransactionConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    min_isr: int = 2  # transaction.state.log.min.isr
    segment_bytes: int = 104857600  # transaction.state.log.segment.bytes
    load_buffer_size: int = 5242880  # transaction.state.log.load.buffer.size
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    abort_timed_out_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3600000  # transaction.remove.expired.transaction.cleanup.interval.ms
    append_timeout_ms: int = 5000  # Kafka's request timeout for its own transaction log writes
    marker_timeout_ms: int = 30000  # how long one WriteTxnMarkers waits for its acks=-1 appends

    @classmethod
    def from_broker_config(cls, config) -> TransactionConfig:
        """From a `BrokerConfig` (Kafka's keys)."""
        return cls(
            num_partitions=config["transaction.state.log.num.partitions"],
            replication_factor=config["transaction.state.log.replication.factor"],
            min_isr=config["transaction.state.log.min.isr"],
            segment_bytes=config["transaction.state.log.segment.bytes"],
            load_buffer_size=config["transaction.state.log.load.buffer.size"],
            max_timeout_ms=config["transaction.max.timeout.ms"],
            abort_timed_out_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )
