"""Dynamic broker configuration (Kafka's `DynamicBrokerConfig`, ZooKeeper mode): configs stored
in `/config/brokers/<id>` (this broker) and `/config/brokers/<default>` (every broker) override the
static `server.properties`, with precedence per-broker > cluster default > static > Kafka default.

Only the keys in `RECONFIGURABLE` may be set dynamically: the broker-wide defaults of topic configs
(Kafka's `DynamicLogConfig` keys, which every log picks up at once) and the two topic defaults the
replica manager and controller read on every use. Any other key is refused with a ConfigError that
says why (Kafka's "Cannot update these configs dynamically"; for keys Kafka can change at runtime
but minikafka cannot yet, the message says so). Pure: no ZooKeeper, no trio.
"""

from __future__ import annotations

import logging

from broker.config import NO_EFFECT_KEYS, SCHEMA, BrokerConfig, ConfigError, build_config

log = logging.getLogger(__name__)

#: the entity name of the cluster-wide dynamic broker config (Kafka's ConfigEntityName.Default)
DEFAULT_ENTITY = "<default>"

#: broker keys that may be set in /config/brokers/*: the log defaults (topic config synonyms)
RECONFIGURABLE = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.hours",
        "log.roll.jitter.ms",
        "log.roll.jitter.hours",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "message.max.bytes",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
    }
)

#: keys Kafka can change at runtime that minikafka cannot (yet): refused with this reason
_NOT_YET = {
    "log.cleaner.threads": "the log cleaner's thread count is fixed at startup in minikafka",
    "log.cleaner.dedupe.buffer.size": "the log cleaner's buffers are fixed at startup in minikafka",
    "log.cleaner.io.buffer.size": "the log cleaner's buffers are fixed at startup in minikafka",
    "log.cleaner.io.buffer.load.factor": "the log cleaner's buffers are fixed at startup in minikafka",
    "log.cleaner.io.max.bytes.per.second": "the log cleaner's throttle is fixed at startup in minikafka",
    "log.cleaner.backoff.ms": "the log cleaner's backoff is fixed at startup in minikafka",
    "max.connections": "connection limits are fixed at startup in minikafka",
    "max.connections.per.ip": "connection limits are fixed at startup in minikafka",
    "max.connections.per.ip.overrides": "connection limits are fixed at startup in minikafka",
    "advertised.listeners": "listeners are fixed at startup in minikafka",
    "listeners": "listeners are fixed at startup in minikafka",
} | {key: "trio needs no thread pools, so minikafka has none to resize" for key in NO_EFFECT_KEYS}


class DynamicBrokerConfig:
    """The static properties of one broker and the dynamic layers over them."""

    def __init__(self, static: dict[str, str], broker_id: int):
        """`static`: the properties the broker started with (`BrokerConfig.raw`)."""
        self.static = dict(static)
        self.broker_id = broker_id
        self.per_broker: dict[str, str] = {}  # /config/brokers/<id>
        self.cluster_default: dict[str, str] = {}  # /config/brokers/<default>

    def effective_props(self) -> dict[str, str]:
        """The properties in force: per-broker over cluster default over static."""
        return {**self.static, **self.cluster_default, **self.per_broker}

    def source_of(self, key: str) -> tuple[str, str] | None:
        """`(source, raw value)` of `key` in precedence order, or None when only Kafka's default applies;
        sources are DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG."""
        for source, layer in self.layers():
            if key in layer:
                return source, layer[key]
        return None

    def layers(self) -> list[tuple[str, dict[str, str]]]:
        return [
            ("DYNAMIC_BROKER_CONFIG", self.per_broker),
            ("DYNAMIC_DEFAULT_BROKER_CONFIG", self.cluster_default),
            ("STATIC_BROKER_CONFIG", self.static),
        ]

    def validate(self, props: dict[str, str], *, per_broker: bool) -> BrokerConfig:
        """Check a new set of dynamic props for one layer (the whole layer as it would be stored);
        returns the config that would result. Raises ConfigError with Kafka's message for a key
        that cannot change at runtime, an unknown key, or a bad value."""
        unknown = sorted(key for key in props if key not in SCHEMA and key not in NO_EFFECT_KEYS)
        if unknown:
            raise ConfigError(f"Unknown broker configs: {', '.join(unknown)}")
        fixed = sorted(key for key in props if key not in RECONFIGURABLE)
        if fixed:
            reasons = sorted({_NOT_YET[key] for key in fixed if key in _NOT_YET})
            why = f" ({'; '.join(reasons)})" if reasons else ""
            raise ConfigError(f"Cannot update these configs dynamically: {', '.join(fixed)}{why}")
        layers = {"per_broker": self.per_broker, "cluster_default": self.cluster_default}
        layers["per_broker" if per_broker else "cluster_default"] = props
        merged = {**self.static, **layers["cluster_default"], **layers["per_broker"]}
        return build_config(merged)

    def update(self, *, per_broker: dict[str, str] | None = None, cluster_default: dict[str, str] | None = None):
        """Install layers read from ZooKeeper; returns the resulting BrokerConfig. Keys this broker
        cannot change at runtime (written by another tool) are logged and left out; values that
        do not validate together raise ConfigError and install nothing."""
        new_per_broker = self.per_broker if per_broker is None else _usable(per_broker)
        new_default = self.cluster_default if cluster_default is None else _usable(cluster_default)
        config = build_config({**self.static, **new_default, **new_per_broker})
        self.per_broker, self.cluster_default = new_per_broker, new_default
        return config


def _usable(layer: dict[str, str]) -> dict[str, str]:
    bad = sorted(key for key in layer if key not in RECONFIGURABLE)
    if bad:
        log.warning("dynamic broker configs %s cannot change at runtime; they are ignored", bad)
    return {key: value for key, value in layer.items() if key in RECONFIGURABLE}
