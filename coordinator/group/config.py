"""What the group coordinator reads from the broker's configuration (Kafka's `GroupConfig` and
`OffsetConfig`); every time is in ms, sizes in bytes. Each field names its broker key
(`metadata["key"]`); `broker.config.derive` fills it from the broker's config table, whose
defaults are the only ones."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = field(metadata={"key": "offsets.topic.num.partitions"})
    offsets_topic_replication_factor: int = field(metadata={"key": "offsets.topic.replication.factor"})
    offsets_topic_segment_bytes: int = field(metadata={"key": "offsets.topic.segment.bytes"})
    offsets_topic_compression_codec: int = field(
        metadata={"key": "offsets.topic.compression.codec"}
    )  # (0 none ... 4 zstd)
    offsets_load_buffer_size: int = field(metadata={"key": "offsets.load.buffer.size"})
    offsets_commit_timeout_ms: int = field(metadata={"key": "offsets.commit.timeout.ms"})
    offsets_retention_ms: int = field(metadata={"key": "offsets.retention.minutes", "scale": 60_000})
    offsets_retention_check_interval_ms: int = field(metadata={"key": "offsets.retention.check.interval.ms"})
    offset_metadata_max_bytes: int = field(metadata={"key": "offset.metadata.max.bytes"})
    initial_rebalance_delay_ms: int = field(metadata={"key": "group.initial.rebalance.delay.ms"})
    min_session_timeout_ms: int = field(metadata={"key": "group.min.session.timeout.ms"})
    max_session_timeout_ms: int = field(metadata={"key": "group.max.session.timeout.ms"})
    max_size: int = field(metadata={"key": "group.max.size"})
    # KIP-848's consumer group protocol
    rebalance_protocols: tuple[str, ...] = field(metadata={"key": "group.coordinator.rebalance.protocols"})
    consumer_heartbeat_interval_ms: int = field(metadata={"key": "group.consumer.heartbeat.interval.ms"})
    consumer_session_timeout_ms: int = field(metadata={"key": "group.consumer.session.timeout.ms"})
    consumer_max_size: int = field(metadata={"key": "group.consumer.max.size"})
    consumer_assignors: tuple[str, ...] = field(metadata={"key": "group.consumer.assignors"})
    consumer_migration_policy: str = field(metadata={"key": "group.consumer.migration.policy"})
    # KIP-932's share groups
    share_heartbeat_interval_ms: int = field(metadata={"key": "group.share.heartbeat.interval.ms"})
    share_session_timeout_ms: int = field(metadata={"key": "group.share.session.timeout.ms"})
    share_max_size: int = field(metadata={"key": "group.share.max.size"})

    def broker_values(self) -> dict[str, Any]:
        """These fields under their broker keys (the defaults of per-group configs)."""
        return {f.metadata["key"]: getattr(self, f.name) for f in fields(self) if "scale" not in f.metadata}
