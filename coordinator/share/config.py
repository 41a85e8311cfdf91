"""What the share coordinator reads from the broker's configuration (Kafka's
`ShareCoordinatorConfig`); times in ms, sizes in bytes. Each field names its broker key
(`metadata["key"]`); `broker.config.derive` fills it from the broker's config table."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    num_partitions: int = field(metadata={"key": "share.coordinator.state.topic.num.partitions"})
    replication_factor: int = field(metadata={"key": "share.coordinator.state.topic.replication.factor"})
    min_isr: int = field(metadata={"key": "share.coordinator.state.topic.min.isr"})
    segment_bytes: int = field(metadata={"key": "share.coordinator.state.topic.segment.bytes"})
    load_buffer_size: int = field(metadata={"key": "share.coordinator.load.buffer.size"})
    snapshot_every: int = field(metadata={"key": "share.coordinator.snapshot.update.records.per.snapshot"})
    write_timeout_ms: int = field(metadata={"key": "share.coordinator.write.timeout.ms"})
    prune_interval_ms: int = field(metadata={"key": "share.coordinator.state.topic.prune.interval.ms"})
