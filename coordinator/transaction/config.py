"""What the transaction coordinator reads from the broker's configuration (Kafka's
`TransactionStateManagerConfig` and `TransactionLogConfig`); times in ms, sizes in bytes. Each keyed field names its broker key
(`metadata["key"]`); `broker.config.derive` fills it from the broker's config table, whose
defaults are the only ones (the two unkeyed timeouts are Kafka's internal constants)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TransactionConfig:
    num_partitions: int = field(metadata={"key": "transaction.state.log.num.partitions"})
    replication_factor: int = field(metadata={"key": "transaction.state.log.replication.factor"})
    min_isr: int = field(metadata={"key": "transaction.state.log.min.isr"})
    segment_bytes: int = field(metadata={"key": "transaction.state.log.segment.bytes"})
    load_buffer_size: int = field(metadata={"key": "transaction.state.log.load.buffer.size"})
    max_timeout_ms: int = field(metadata={"key": "transaction.max.timeout.ms"})
    abort_timed_out_interval_ms: int = field(
        metadata={"key": "transaction.abort.timed.out.transaction.cleanup.interval.ms"}
    )
    id_expiration_ms: int = field(metadata={"key": "transactional.id.expiration.ms"})
    remove_expired_interval_ms: int = field(
        metadata={"key": "transaction.remove.expired.transaction.cleanup.interval.ms"}
    )
    append_timeout_ms: int = 5000  # Kafka's request timeout for its own transaction log writes
    marker_timeout_ms: int = 30000  # how long one WriteTxnMarkers waits for its acks=-1 appends
