"""Per-log configuration with Kafka's topic-level keys and defaults (Kafka 3.8 `LogConfig`).

`LogConfig.from_topic_config({"segment.bytes": "1048576", ...})` reads topic-level keys;
`LogConfig.from_broker_config(props)` reads the broker-level defaults (`log.segment.bytes`,
`log.roll.ms`/`log.roll.hours`, `log.retention.ms`/`.minutes`/`.hours`, ...). Sizes are bytes,
times milliseconds. Invalid values raise `ValueError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30                # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000      # segment.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096            # index.interval.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000    # retention.ms (-1: unlimited)
    retention_bytes: int = -1                   # retention.bytes (-1: unlimited)
    flush_messages: int = LONG_MAX              # flush.messages (1 = fsync every append)
    flush_ms: int = LONG_MAX                    # flush.ms
    max_message_bytes: int = 1048588            # max.message.bytes (largest batch accepted)
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    file_delete_delay_ms: int = 60000           # file.delete.delay.ms
    producer_id_expiration_ms: int = 86400000   # broker-level producer.id.expiration.ms (not a topic key)

    def __post_init__(self):
        for key, lo in (("segment_bytes", 14), ("segment_ms", 1), ("segment_index_bytes", 8),
                        ("index_interval_bytes", 0), ("flush_messages", 1), ("flush_ms", 0),
                        ("max_message_bytes", 0), ("file_delete_delay_ms", 0)):
            if getattr(self, key) < lo:
                raise ValueError(f"{key.replace('_', '.')} must be >= {lo}, got {getattr(self, key)}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention.ms and retention.bytes must be >= -1")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"got {self.message_timestamp_type!r}")

    @classmethod
    def from_topic_config(cls, config: dict[str, str], base: "LogConfig | None" = None) -> "LogConfig":
        """Overlay topic-level keys (`segment.bytes`, ...) on `base` (default: Kafka's defaults).
        Unknown keys are ignored here (topic validation reports them)."""
        known = {f.name.replace("_", "."): f.name for f in fields(cls)}
        changes = {}
        for key, value in config.items():
            if key in known:
                changes[known[key]] = value if known[key] == "message_timestamp_type" else _int(key, value)
        return replace(base or cls(), **changes)

    @classmethod
    def from_broker_config(cls, props: dict[str, str]) -> "LogConfig":
        """Broker-level defaults, with Kafka's precedence (ms over minutes over hours)."""
        out = {}
        simple = {"log.segment.bytes": "segment_bytes", "log.index.size.max.bytes": "segment_index_bytes",
                  "log.index.interval.bytes": "index_interval_bytes", "log.retention.bytes": "retention_bytes",
                  "log.flush.interval.messages": "flush_messages", "log.flush.interval.ms": "flush_ms",
                  "message.max.bytes": "max_message_bytes", "log.segment.delete.delay.ms": "file_delete_delay_ms",
                  "producer.id.expiration.ms": "producer_id_expiration_ms"}
        for key, name in simple.items():
            if key in props:
                out[name] = _int(key, props[key])
        if "log.message.timestamp.type" in props:
            out["message_timestamp_type"] = props["log.message.timestamp.type"]
        for name, keys in (("segment_ms", (("log.roll.ms", 1), ("log.roll.hours", 3600000))),
                           ("retention_ms", (("log.retention.ms", 1), ("log.retention.minutes", 60000),
                                             ("log.retention.hours", 3600000)))):
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
