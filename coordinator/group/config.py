"""What the group coordinator reads from the broker's configuration (Kafka's `GroupConfig` and
`OffsetConfig`); every time is in ms, sizes in bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_replication_factor: int = 3  # offsets.topic.replication.factor
    offsets_topic_segment_bytes: int = 104857600  # offsets.topic.segment.bytes
    offsets_topic_compression_codec: int = 0  # offsets.topic.compression.codec (0 none ... 4 zstd)
    offsets_load_buffer_size: int = 5242880  # offsets.load.buffer.size
    offsets_commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = (1 << 31) - 1  # group.max.size

    @classmethod
    def from_broker_config(cls, config) -> GroupCoordinatorConfig:
        """From a `BrokerConfig` (Kafka's keys)."""
        return cls(
            offsets_topic_num_partitions=config["offsets.topic.num.partitions"],
            offsets_topic_replication_factor=config["offsets.topic.replication.factor"],
            offsets_topic_segment_bytes=config["offsets.topic.segment.bytes"],
            offsets_topic_compression_codec=config["offsets.topic.compression.codec"],
            offsets_load_buffer_size=config["offsets.load.buffer.size"],
            offsets_commit_timeout_ms=config["offsets.commit.timeout.ms"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60 * 1000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            max_size=config["group.max.size"],
        )
