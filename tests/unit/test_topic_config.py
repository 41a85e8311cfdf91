"""Topic configs as Kafka 3.8 defines them: every key Kafka accepts is accepted with Kafka's
types and ranges, and values we do not implement are refused with a message saying so."""

import pytest

from storage.config import LONG_MAX, TOPIC_CONFIGS, LogConfig, validate_topic_config
from storage.topic_configs import TopicConfigs

# Kafka 3.8 `LogConfig` (TopicConfig + QuotaConfig names), the full list.
KAFKA_38_TOPIC_CONFIGS = {
    "cleanup.policy",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}


def test_every_kafka_topic_config_key_is_declared_and_its_default_is_accepted():
    assert set(TOPIC_CONFIGS) == KAFKA_38_TOPIC_CONFIGS
    for key, definition in TOPIC_CONFIGS.items():
        validate_topic_config({key: definition.default})


@pytest.mark.parametrize(
    "configs",
    [
        {"compression.type": "lz4"},
        {"compression.type": "uncompressed"},
        {"compression.zstd.level": "-7"},
        {"min.cleanable.dirty.ratio": "0.1"},
        {"delete.retention.ms": "1000"},
        {"message.timestamp.difference.max.ms": "60000"},
        {"message.timestamp.before.max.ms": "0"},
        {"message.format.version": "2.8"},
        {"message.format.version": "3.0-IV1"},
        {"message.downconversion.enable": "FALSE"},
        {"retention.bytes": "-5"},
        {"segment.jitter.ms": "100"},
        {"cleanup.policy": "delete"},
        {"cleanup.policy": "compact"},
        {"cleanup.policy": "compact,delete"},
        {"segment.index.bytes": "4"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"},
    ],
)
def test_kafka_values_are_accepted(configs):
    validate_topic_config(configs)


@pytest.mark.parametrize(
    "configs,message",
    [
        ({"compression.type": "brotli"}, "compression.type must be one of"),
        ({"compression.gzip.level": "0"}, "compression.gzip.level must be in \\[1, 9\\] or one of \\[-1\\]"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio must be in \\[0, 1\\]"),
        ({"segment.bytes": "13"}, "segment.bytes must be >= 14"),
        ({"segment.bytes": "4294967296"}, "out of range for a 32-bit integer"),
        ({"retention.ms": "-2"}, "retention.ms must be >= -1"),
        ({"unclean.leader.election.enable": "yes"}, "must be true or false"),
        ({"message.format.version": "latest"}, "must be a Kafka version"),
        ({"message.format.version": "3.9"}, "Version 3.9 is not a valid version"),
        ({"message.format.version": "0.7.0"}, "must be a Kafka version"),
        ({"leader.replication.throttled.replicas": "0-1"}, "partitionId:brokerId"),
        ({"no.such.config": "1"}, "unknown topic config name: no.such.config"),
        ({"min.compaction.lag.ms": "11", "max.compaction.lag.ms": "10"}, "min.compaction.lag.ms \\(11\\) > max"),
    ],
)
def test_values_kafka_refuses_are_refused(configs, message):
    with pytest.raises(ValueError, match=message):
        validate_topic_config(configs)


@pytest.mark.parametrize(
    "configs,message",
    [
        ({"preallocate": "true"}, "preallocate=true is not implemented"),
        ({"remote.storage.enable": "true"}, "tiered storage"),
        ({"local.retention.ms": "1000"}, "tiered storage"),
        ({"follower.replication.throttled.replicas": "*"}, "replication throttling is not implemented"),
    ],
)
def test_values_we_do_not_implement_are_refused_with_a_reason(configs, message):
    with pytest.raises(ValueError, match=message):
        validate_topic_config(configs)


def test_timestamp_difference_sets_before_and_after_unless_they_are_set():
    config = LogConfig.from_topic_config({"message.timestamp.difference.max.ms": "5000"})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (5000, 5000)
    config = LogConfig.from_topic_config(
        {"message.timestamp.difference.max.ms": "5000", "message.timestamp.after.max.ms": "10"}
    )
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (5000, 10)
    assert LogConfig().message_timestamp_before_max_ms == LONG_MAX


def test_broker_defaults_use_kafkas_log_synonyms():
    config = LogConfig.from_broker_config(
        {"compression.type": "zstd", "log.roll.jitter.hours": "1", "log.message.timestamp.difference.max.ms": "7"}
    )
    assert (config.compression_type, config.segment_jitter_ms) == ("zstd", 3600000)
    assert config.message_timestamp_before_max_ms == config.message_timestamp_after_max_ms == 7


def test_compaction_configs_reach_the_log_config_with_broker_defaults():
    broker = LogConfig.from_broker_config(
        {
            "log.cleanup.policy": "compact",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.delete.retention.ms": "500",
            "log.cleaner.min.compaction.lag.ms": "7",
            "log.cleaner.max.compaction.lag.ms": "9000",
        }
    )
    assert broker.compact and broker.cleanup_policy == ("compact",)
    assert (broker.min_cleanable_dirty_ratio, broker.delete_retention_ms) == (0.25, 500)
    assert (broker.min_compaction_lag_ms, broker.max_compaction_lag_ms) == (7, 9000)
    topic = LogConfig.from_topic_config(
        {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "5"}, broker
    )
    assert topic.cleanup_policy == ("compact", "delete") and topic.compact
    assert (topic.min_cleanable_dirty_ratio, topic.delete_retention_ms, topic.min_compaction_lag_ms) == (0.1, 5, 7)
    assert not LogConfig().compact
    with pytest.raises(ValueError, match="log.cleanup.policy must be a list of compact and delete"):
        LogConfig.from_broker_config({"log.cleanup.policy": "shred"})


def test_topic_configs_overlay_broker_defaults_and_drop_what_they_cannot_use():
    configs = TopicConfigs(LogConfig(segment_bytes=1 << 20), min_insync_replicas=2, unclean_leader_election_enable=True)
    assert configs.log_config("t").segment_bytes == 1 << 20 and configs.min_insync_replicas("t") == 2
    configs.set(
        "t",
        {
            "segment.bytes": "4096",
            "min.insync.replicas": "3",
            "unclean.leader.election.enable": "false",
            "preallocate": "true",
            "bogus": "1",
        },
    )
    assert configs.overrides("t") == {
        "segment.bytes": "4096",
        "min.insync.replicas": "3",
        "unclean.leader.election.enable": "false",
    }
    assert configs.log_config("t").segment_bytes == 4096
    assert configs.min_insync_replicas("t") == 3 and configs.unclean_leader_election_enable("t") is False
    configs.remove("t")
    assert "t" not in configs and configs.log_config("t").segment_bytes == 1 << 20


@pytest.mark.parametrize("version", ["0.10.0.0", "0.10.0", "0.8.2.2", "0.10.0-IV1", "2.8.1", "3.0-IV1", "3.8", "1.0.0"])
def test_message_format_version_takes_every_string_kafka_parses(version):
    """Kafka ignores the key since 3.0 but validates it as MetadataVersion.fromVersionString: 4-part
    0.x versions (what clients of the 0.10 days were configured with) included."""
    validate_topic_config({"message.format.version": version})  # no ValueError
