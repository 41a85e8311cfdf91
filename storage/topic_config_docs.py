"""One line of documentation per topic config key (DescribeConfigs v3+ `documentation`), in our
own words; the keys are exactly `storage.config.TOPIC_CONFIGS`' (a test holds them equal)."""

TOPIC_CONFIG_DOCS: dict[str, str] = {
    "cleanup.policy": "What happens to old segments: 'delete' removes them by time and size retention, "
    "'compact' keeps the latest record of each key (the log cleaner); both may be given.",
    "compression.type": "The codec the leader stores batches in: 'producer' keeps the producer's, "
    "otherwise batches are recompressed to uncompressed, gzip, snappy, lz4 or zstd.",
    "compression.gzip.level": "gzip level used when compression.type is gzip (-1: the codec's default).",
    "compression.lz4.level": "lz4 level used when compression.type is lz4.",
    "compression.zstd.level": "zstd level used when compression.type is zstd.",
    "delete.retention.ms": "How long, in ms, a tombstone stays readable after its segment was cleaned, "
    "so that consumers catching up see the delete.",
    "file.delete.delay.ms": "How long, in ms, a segment removed from the log waits before its files are deleted.",
    "flush.messages": "fsync the log after this many records were appended (the default leaves it to the OS).",
    "flush.ms": "fsync the log when this many ms have passed since the last fsync.",
    "follower.replication.throttled.replicas": "Replicas ('partition:broker' or '*') whose follower-side "
    "replication is throttled (not implemented by minikafka: only the empty list is accepted).",
    "index.interval.bytes": "Bytes appended between two entries of the offset index.",
    "leader.replication.throttled.replicas": "Replicas ('partition:broker' or '*') whose leader-side "
    "replication is throttled (not implemented by minikafka: only the empty list is accepted).",
    "local.retention.bytes": "Tiered storage's local size bound (minikafka has no tiered storage: only -2).",
    "local.retention.ms": "Tiered storage's local time bound (minikafka has no tiered storage: only -2).",
    "max.compaction.lag.ms": "The longest time, in ms, a record may stay uncleaned in a compacted log.",
    "max.message.bytes": "The largest record batch, in bytes, the topic accepts.",
    "message.downconversion.enable": "Whether Fetch may down-convert batches for old consumers "
    "(every batch here is magic 2; Fetch below v4 is not served).",
    "message.format.version": "Deprecated: ignored since Kafka 3.0; every batch is written as magic 2.",
    "message.timestamp.after.max.ms": "How far, in ms, a CreateTime timestamp may lie in the future of the "
    "broker's clock before the batch is refused with INVALID_TIMESTAMP.",
    "message.timestamp.before.max.ms": "How far, in ms, a CreateTime timestamp may lie in the past of the "
    "broker's clock before the batch is refused with INVALID_TIMESTAMP.",
    "message.timestamp.difference.max.ms": "Deprecated: the default of both message.timestamp.before.max.ms "
    "and message.timestamp.after.max.ms.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch "
    "with the leader's clock.",
    "min.cleanable.dirty.ratio": "The share of a compacted log that must be uncleaned before it is cleaned.",
    "min.compaction.lag.ms": "The shortest time, in ms, a record stays uncleaned in a compacted log.",
    "min.insync.replicas": "With acks=all, the fewest in-sync replicas a write needs; with fewer, producers "
    "get NOT_ENOUGH_REPLICAS.",
    "preallocate": "Whether a new segment's file is preallocated (not implemented by minikafka: only false).",
    "remote.storage.enable": "Tiered storage for the topic (not supported by minikafka: only false).",
    "retention.bytes": "The size, in bytes, a partition keeps before deleting its oldest segments (-1: no size bound).",
    "retention.ms": "How long, in ms, a segment is kept after its newest record (-1: forever).",
    "segment.bytes": "The size, in bytes, at which the active segment is rolled.",
    "segment.index.bytes": "The size, in bytes, of a segment's offset and time indexes.",
    "segment.jitter.ms": "The most random time, in ms, taken off segment.ms per segment.",
    "segment.ms": "The age, in ms, at which the active segment is rolled even if not full.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become leader when no in-sync "
    "replica is alive (acknowledged data may be lost).",
}
