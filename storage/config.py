"""Topic-level configuration with Kafka 3.8's keys, types, validators and defaults (`LogConfig`,
`TopicConfig`, `ServerTopicConfigSynonyms`).

`TOPIC_CONFIGS` declares every topic config key Kafka 3.8 accepts. `validate_topic_config(configs)`
checks a `{key: value}` map as Kafka's `LogConfig.validate` does (unknown names, types, ranges, and
min.compaction.lag.ms <= max.compaction.lag.ms) and also refuses, with a message saying so, the few
values that Kafka accepts and this broker does not implement (a value that would otherwise be
silently ignored): `preallocate=true`, tiered storage (`remote.storage.enable=true`,
`local.retention.*` other than -2) and replication throttling. Every other key is accepted and means
what it means in Kafka; the compaction keys (`min.cleanable.dirty.ratio`, `delete.retention.ms`,
`min.compaction.lag.ms`, `max.compaction.lag.ms`) are the log cleaner's (`storage/cleaner/`) and have
no effect without `cleanup.policy=compact`, in Kafka as here. `message.format.version` and
`message.downconversion.enable` are accepted and, as in Kafka 3.x with IBP >= 3.0, change nothing
(every batch is magic v2, and Fetch below v4, which would need down-conversion, is not served).

`LogConfig.from_topic_config(configs, base)` overlays topic keys on the broker's defaults
(`LogConfig.from_broker_config(props)`, Kafka's `log.*` synonyms). Sizes are bytes, times
milliseconds. Invalid values raise `ValueError` naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from storage import metadata_version

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

#: compression.type values (Kafka `BrokerCompressionType`); "producer" keeps the producer's codec.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def parse_bool(key: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v not in ("true", "false"):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return v == "true"


def parse_list(value: str) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _number(
    kind: type, lo: float | None = None, hi: float | None = None, *, bits: int = 64, also: tuple = ()
) -> Callable[[str, str], Any]:
    def parse(key: str, value: str):
        try:
            n = kind(str(value).strip())
        except ValueError:
            raise ValueError(f"{key} must be {'a number' if kind is float else 'an integer'}, got {value!r}") from None
        if kind is int and not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
            raise ValueError(f"{key} is out of range for a {bits}-bit integer: {value!r}")
        if n in also:
            return n
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            bound = (
                f"in [{lo}, {hi}]"
                if lo is not None and hi is not None
                else (f">= {lo}" if lo is not None else f"<= {hi}")
            )
            extra = f" or one of {list(also)}" if also else ""
            raise ValueError(f"{key} must be {bound}{extra}, got {value!r}")
        return n

    return parse


def _one_of(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        if value not in choices:
            raise ValueError(f"{key} must be one of {list(choices)}, got {value!r}")
        return value

    return parse


def _bool(key: str, value: str) -> bool:
    return parse_bool(key, value)


def _cleanup_policy(key: str, value: str) -> list[str]:
    policies = parse_list(value)
    bad = [p for p in policies if p not in ("compact", "delete")]
    if bad:
        raise ValueError(f"{key} must be a list of compact and delete, got {value!r}")
    return policies


_THROTTLED = re.compile(r"^\s*\d+\s*:\s*\d+\s*$")


def _throttled_replicas(key: str, value: str) -> list[str]:
    """Kafka's ThrottledReplicaListValidator: `*` or `partition:broker,...`."""
    items = parse_list(value)
    if items != ["*"] and not all(_THROTTLED.match(i) for i in items):
        raise ValueError(f"{key} must be * or a list of partitionId:brokerId, got {value!r}")
    return items


def _message_format_version(key: str, value: str) -> str:
    """Kafka's MetadataVersionValidator: any version string Kafka 3.8 parses (0.10.0.0, 2.8.1,
    3.0-IV1, ...), kept as given; ignored since Kafka 3.0."""
    try:
        metadata_version.parse(value.strip())
    except ValueError as e:
        raise ValueError(f"{key} must be a Kafka version such as 2.8, 0.10.0.0 or 3.0-IV1: {e}") from None
    return value.strip()


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic config key: its Kafka type name, parser (raises ValueError), Kafka's default (as
    the string DescribeConfigs would show), one line of documentation (DescribeConfigs v3+
    `documentation`, in our own words), and, for values this broker does not implement, a
    function returning why (None when the value is served)."""

    type: str
    parse: Callable[[str, str], Any]
    default: str
    doc: str
    unsupported: Callable[[Any], str | None] = lambda value: None


def _refuse_unless(ok: Callable[[Any], bool], why: str) -> Callable[[Any], str | None]:
    return lambda value: None if ok(value) else why


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef(
        "list",
        _cleanup_policy,
        "delete",
        "What happens to old segments: 'delete' removes them by time and size retention, 'compact' keeps the latest record of each key (the log cleaner); both may be given.",
    ),
    "compression.type": TopicConfigDef(
        "string",
        _one_of(*COMPRESSION_TYPES),
        "producer",
        "The codec the leader stores batches in: 'producer' keeps the producer's, otherwise batches are recompressed to uncompressed, gzip, snappy, lz4 or zstd.",
    ),
    "compression.gzip.level": TopicConfigDef(
        "int",
        _number(int, 1, 9, bits=32, also=(-1,)),
        "-1",
        "gzip level used when compression.type is gzip (-1: the codec's default).",
    ),
    "compression.lz4.level": TopicConfigDef(
        "int", _number(int, 1, 17, bits=32), "9", "lz4 level used when compression.type is lz4."
    ),
    "compression.zstd.level": TopicConfigDef(
        "int", _number(int, -131072, 22, bits=32), "3", "zstd level used when compression.type is zstd."
    ),
    "delete.retention.ms": TopicConfigDef(
        "long",
        _number(int, 0),
        "86400000",
        "How long, in ms, a tombstone stays readable after its segment was cleaned, so that consumers catching up see the delete.",
    ),
    "file.delete.delay.ms": TopicConfigDef(
        "long",
        _number(int, 0),
        "60000",
        "How long, in ms, a segment removed from the log waits before its files are deleted.",
    ),
    "flush.messages": TopicConfigDef(
        "long",
        _number(int, 1),
        str(LONG_MAX),
        "fsync the log after this many records were appended (the default leaves it to the OS).",
    ),
    "flush.ms": TopicConfigDef(
        "long", _number(int, 0), str(LONG_MAX), "fsync the log when this many ms have passed since the last fsync."
    ),
    "follower.replication.throttled.replicas": TopicConfigDef(
        "list",
        _throttled_replicas,
        "",
        "Replicas ('partition:broker' or '*') whose follower-side replication is throttled (not implemented by minikafka: only the empty list is accepted).",
        _refuse_unless(lambda v: not v, "replication throttling is not implemented in minikafka"),
    ),
    "index.interval.bytes": TopicConfigDef(
        "int", _number(int, 0, bits=32), "4096", "Bytes appended between two entries of the offset index."
    ),
    "leader.replication.throttled.replicas": TopicConfigDef(
        "list",
        _throttled_replicas,
        "",
        "Replicas ('partition:broker' or '*') whose leader-side replication is throttled (not implemented by minikafka: only the empty list is accepted).",
        _refuse_unless(lambda v: not v, "replication throttling is not implemented in minikafka"),
    ),
    "local.retention.bytes": TopicConfigDef(
        "long",
        _number(int, -2),
        "-2",
        "Tiered storage's local size bound (minikafka has no tiered storage: only -2).",
        _refuse_unless(lambda v: v == -2, "tiered storage (local.retention.bytes) is not supported by minikafka"),
    ),
    "local.retention.ms": TopicConfigDef(
        "long",
        _number(int, -2),
        "-2",
        "Tiered storage's local time bound (minikafka has no tiered storage: only -2).",
        _refuse_unless(lambda v: v == -2, "tiered storage (local.retention.ms) is not supported by minikafka"),
    ),
    "max.compaction.lag.ms": TopicConfigDef(
        "long",
        _number(int, 1),
        str(LONG_MAX),
        "The longest time, in ms, a record may stay uncleaned in a compacted log.",
    ),
    "max.message.bytes": TopicConfigDef(
        "int", _number(int, 0, bits=32), "1048588", "The largest record batch, in bytes, the topic accepts."
    ),
    "message.downconversion.enable": TopicConfigDef(
        "boolean",
        _bool,
        "true",
        "Whether Fetch may down-convert batches for old consumers (every batch here is magic 2; Fetch below v4 is not served).",
    ),
    "message.format.version": TopicConfigDef(
        "string",
        _message_format_version,
        "3.0-IV1",
        "Deprecated: ignored since Kafka 3.0; every batch is written as magic 2.",
    ),
    "message.timestamp.after.max.ms": TopicConfigDef(
        "long",
        _number(int, 0),
        str(LONG_MAX),
        "How far, in ms, a CreateTime timestamp may lie in the future of the broker's clock before the batch is refused with INVALID_TIMESTAMP.",
    ),
    "message.timestamp.before.max.ms": TopicConfigDef(
        "long",
        _number(int, 0),
        str(LONG_MAX),
        "How far, in ms, a CreateTime timestamp may lie in the past of the broker's clock before the batch is refused with INVALID_TIMESTAMP.",
    ),
    "message.timestamp.difference.max.ms": TopicConfigDef(
        "long",
        _number(int, 0),
        str(LONG_MAX),
        "Deprecated: the default of both message.timestamp.before.max.ms and message.timestamp.after.max.ms.",
    ),
    "message.timestamp.type": TopicConfigDef(
        "string",
        _one_of("CreateTime", "LogAppendTime"),
        "CreateTime",
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the leader's clock.",
    ),
    "min.cleanable.dirty.ratio": TopicConfigDef(
        "double",
        _number(float, 0, 1),
        "0.5",
        "The share of a compacted log that must be uncleaned before it is cleaned.",
    ),
    "min.compaction.lag.ms": TopicConfigDef(
        "long", _number(int, 0), "0", "The shortest time, in ms, a record stays uncleaned in a compacted log."
    ),
    "min.insync.replicas": TopicConfigDef(
        "int",
        _number(int, 1, bits=32),
        "1",
        "With acks=all, the fewest in-sync replicas a write needs; with fewer, producers get NOT_ENOUGH_REPLICAS.",
    ),
    "preallocate": TopicConfigDef(
        "boolean",
        _bool,
        "false",
        "Whether a new segment's file is preallocated (not implemented by minikafka: only false).",
        _refuse_unless(lambda v: not v, "preallocate=true is not implemented in minikafka"),
    ),
    "remote.storage.enable": TopicConfigDef(
        "boolean",
        _bool,
        "false",
        "Tiered storage for the topic (not supported by minikafka: only false).",
        _refuse_unless(lambda v: not v, "tiered storage (remote.storage.enable) is not supported by minikafka"),
    ),
    "retention.bytes": TopicConfigDef(
        "long",
        _number(int),
        "-1",
        "The size, in bytes, a partition keeps before deleting its oldest segments (-1: no size bound).",
    ),
    "retention.ms": TopicConfigDef(
        "long",
        _number(int, -1),
        "604800000",
        "How long, in ms, a segment is kept after its newest record (-1: forever).",
    ),
    "segment.bytes": TopicConfigDef(
        "int", _number(int, 14, bits=32), "1073741824", "The size, in bytes, at which the active segment is rolled."
    ),
    "segment.index.bytes": TopicConfigDef(
        "int", _number(int, 4, bits=32), "10485760", "The size, in bytes, of a segment's offset and time indexes."
    ),
    "segment.jitter.ms": TopicConfigDef(
        "long", _number(int, 0), "0", "The most random time, in ms, taken off segment.ms per segment."
    ),
    "segment.ms": TopicConfigDef(
        "long", _number(int, 1), "604800000", "The age, in ms, at which the active segment is rolled even if not full."
    ),
    "unclean.leader.election.enable": TopicConfigDef(
        "boolean",
        _bool,
        "false",
        "Whether a replica outside the ISR may become leader when no in-sync replica is alive (acknowledged data may be lost).",
    ),
}


def parse_topic_config(configs: dict[str, str], *, internal: bool = False) -> dict[str, Any]:
    """Parse a topic's `{key: value}` overrides to typed values; raises ValueError naming the key
    for an unknown key, a bad value, or a value this broker does not implement. `internal`: the
    topic is one of Kafka's internal topics, which may be `cleanup.policy=compact` already (their
    records are keyed and retention must not delete them; the cleaner itself comes later)."""
    parsed = {}
    for key, value in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise ValueError(f"unknown topic config name: {key}")
        if value is None:
            raise ValueError(f"{key} needs a value")
        parsed[key] = definition.parse(key, value)
        why = definition.unsupported(parsed[key])
        if why is not None and not (internal and key == "cleanup.policy"):
            raise ValueError(why)
    lag = (parsed.get("min.compaction.lag.ms", 0), parsed.get("max.compaction.lag.ms", LONG_MAX))
    if lag[0] > lag[1]:
        raise ValueError(
            f"conflicting topic configs: min.compaction.lag.ms ({lag[0]}) > max.compaction.lag.ms ({lag[1]})"
        )
    return parsed


def validate_topic_config(configs: dict[str, str]) -> None:
    """Kafka's `LogConfig.validate` for a topic's overrides; raises ValueError (INVALID_CONFIG)."""
    LogConfig.from_topic_config(configs)


@dataclass(frozen=True)
class LogConfig:
    """The configuration one partition log runs with (topic overrides over broker defaults)."""

    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms (random roll jitter per segment)
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: unlimited)
    retention_bytes: int = -1  # retention.bytes (negative: unlimited)
    flush_messages: int = LONG_MAX  # flush.messages (1 = fsync every append)
    flush_ms: int = LONG_MAX  # flush.ms
    max_message_bytes: int = 1048588  # max.message.bytes (largest batch accepted)
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    message_timestamp_before_max_ms: int = LONG_MAX  # how far a CreateTime may lie in the past
    message_timestamp_after_max_ms: int = LONG_MAX  # ... and in the future
    compression_type: str = "producer"  # compression.type
    compression_gzip_level: int = -1  # compression.gzip.level (-1: the codec's default, 6)
    compression_lz4_level: int = 9  # compression.lz4.level
    compression_zstd_level: int = 3  # compression.zstd.level
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    producer_id_expiration_ms: int = 86400000  # broker-level producer.id.expiration.ms (not a topic key)
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy: time and size retention only with delete
    # the log cleaner's (cleanup.policy=compact)
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    delete_retention_ms: int = 86400000  # delete.retention.ms: how long tombstones outlive cleaning
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: records younger are never cleaned
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms: dirty records older force a cleaning

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the log cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy

    def __post_init__(self):
        for key, lo in (
            ("segment_bytes", 14),
            ("segment_ms", 1),
            ("segment_index_bytes", 4),
            ("index_interval_bytes", 0),
            ("flush_messages", 1),
            ("flush_ms", 0),
            ("max_message_bytes", 0),
            ("file_delete_delay_ms", 0),
            ("segment_jitter_ms", 0),
            ("message_timestamp_before_max_ms", 0),
            ("message_timestamp_after_max_ms", 0),
        ):
            if getattr(self, key) < lo:
                raise ValueError(f"{key.replace('_', '.')} must be >= {lo}, got {getattr(self, key)}")
        if self.retention_ms < -1:
            raise ValueError("retention.ms must be >= -1")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(
                f"message.timestamp.type must be CreateTime or LogAppendTime, got {self.message_timestamp_type!r}"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression.type must be one of {list(COMPRESSION_TYPES)}, got {self.compression_type!r}"
            )

    @classmethod
    def from_topic_config(
        cls, config: dict[str, str], base: LogConfig | None = None, *, internal: bool = False
    ) -> LogConfig:
        """Overlay a topic's overrides on `base` (default: Kafka's defaults). Validates every key
        (`parse_topic_config`); keys that are not log settings (min.insync.replicas,
        unclean.leader.election.enable, the compaction keys) are checked and left to their users."""
        parsed = parse_topic_config(config, internal=internal)
        names = {f.name for f in fields(cls)}
        changes = {key.replace(".", "_"): value for key, value in parsed.items() if key.replace(".", "_") in names}
        if "cleanup_policy" in changes:
            changes["cleanup_policy"] = tuple(changes["cleanup_policy"])
        # Kafka 3.6+: before/after default to message.timestamp.difference.max.ms when not set
        difference = parsed.get("message.timestamp.difference.max.ms")
        if difference is not None:
            changes.setdefault("message_timestamp_before_max_ms", difference)
            changes.setdefault("message_timestamp_after_max_ms", difference)
        return replace(base or cls(), **changes)

    @classmethod
    def from_broker_config(cls, props: dict[str, str]) -> LogConfig:
        """Broker-level defaults, with Kafka's precedence (ms over minutes over hours)."""
        out: dict[str, Any] = {}
        simple = {
            "log.segment.bytes": "segment_bytes",
            "log.index.size.max.bytes": "segment_index_bytes",
            "log.index.interval.bytes": "index_interval_bytes",
            "log.retention.bytes": "retention_bytes",
            "log.flush.interval.messages": "flush_messages",
            "log.flush.interval.ms": "flush_ms",
            "message.max.bytes": "max_message_bytes",
            "log.segment.delete.delay.ms": "file_delete_delay_ms",
            "producer.id.expiration.ms": "producer_id_expiration_ms",
            "log.roll.jitter.ms": "segment_jitter_ms",
            "log.message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
            "log.message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
            "compression.gzip.level": "compression_gzip_level",
            "compression.lz4.level": "compression_lz4_level",
            "compression.zstd.level": "compression_zstd_level",
            "log.cleaner.delete.retention.ms": "delete_retention_ms",
            "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
            "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
        }
        for key, name in simple.items():
            if key in props:
                out[name] = _int(key, props[key])
        if "log.message.timestamp.difference.max.ms" in props:
            difference = _int(
                "log.message.timestamp.difference.max.ms", props["log.message.timestamp.difference.max.ms"]
            )
            out.setdefault("message_timestamp_before_max_ms", difference)
            out.setdefault("message_timestamp_after_max_ms", difference)
        if "log.message.timestamp.type" in props:
            out["message_timestamp_type"] = props["log.message.timestamp.type"]
        if "compression.type" in props:
            out["compression_type"] = props["compression.type"]
        if "log.cleanup.policy" in props:
            out["cleanup_policy"] = tuple(_cleanup_policy("log.cleanup.policy", props["log.cleanup.policy"]))
        if "log.cleaner.min.cleanable.ratio" in props:
            out["min_cleanable_dirty_ratio"] = _number(float, 0, 1)(
                "log.cleaner.min.cleanable.ratio", props["log.cleaner.min.cleanable.ratio"]
            )
        for name, keys in (
            ("segment_ms", (("log.roll.ms", 1), ("log.roll.hours", 3600000))),
            ("segment_jitter_ms", (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3600000))),
            (
                "retention_ms",
                (("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", 3600000)),
            ),
        ):
            for key, scale in keys:
                if key in props:
                    value = _int(key, props[key])
                    out[name] = value * scale if value >= 0 else -1
                    break
        return cls(**out)


def _int(key: str, value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be an integer, got {value!r}") from None
