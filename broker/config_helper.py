"""The entries of a DescribeConfigs response (API 32, v0-4), built as Kafka's `ConfigHelper` does
for ZooKeeper mode. Pure: the caller passes what it read from ZooKeeper and memory.

A topic's entry: the value its logs run with; its synonyms, most specific first: the topic's own
override (DYNAMIC_TOPIC_CONFIG), then the broker keys it defaults to (Kafka's
`ServerTopicConfigSynonyms`, e.g. retention.ms <- log.retention.ms, .minutes, .hours) from the
per-broker dynamic layer (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic layer
(DYNAMIC_DEFAULT_BROKER_CONFIG), server.properties (STATIC_BROKER_CONFIG) and Kafka's defaults
(DEFAULT_CONFIG); the entry's source is its first synonym's. A broker's entry is the same without
the topic layer; read-only unless the key may change at runtime (the config table's `dynamic`).
Password-typed values are sent as null (sensitive).
"""

from __future__ import annotations

import math
from typing import Any

from broker.config_def import BROKER_CONFIG
from broker.dynamic_config import DynamicBrokerConfig
from storage.config import TOPIC_CONFIGS, LogConfig

#: DescribeConfigsResponse ConfigSource ids
SOURCES = {
    "UNKNOWN": 0,
    "DYNAMIC_TOPIC_CONFIG": 1,
    "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    "STATIC_BROKER_CONFIG": 4,
    "DEFAULT_CONFIG": 5,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
    "CLIENT_METRICS_CONFIG": 7,
    "GROUP_CONFIG": 8,
}
#: DescribeConfigsResponse ConfigType ids, by Kafka's ConfigDef type names
TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9}

#: topic key -> the broker keys it defaults to, in precedence order (ServerTopicConfigSynonyms)
TOPIC_SYNONYMS: dict[str, list[str]] = {
    "segment.bytes": ["log.segment.bytes"],
    "segment.ms": ["log.roll.ms", "log.roll.hours"],
    "segment.jitter.ms": ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    "segment.index.bytes": ["log.index.size.max.bytes"],
    "flush.messages": ["log.flush.interval.messages"],
    "flush.ms": ["log.flush.interval.ms"],
    "retention.bytes": ["log.retention.bytes"],
    "retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    "max.message.bytes": ["message.max.bytes"],
    "index.interval.bytes": ["log.index.interval.bytes"],
    "delete.retention.ms": ["log.cleaner.delete.retention.ms"],
    "min.compaction.lag.ms": ["log.cleaner.min.compaction.lag.ms"],
    "max.compaction.lag.ms": ["log.cleaner.max.compaction.lag.ms"],
    "file.delete.delay.ms": ["log.segment.delete.delay.ms"],
    "min.cleanable.dirty.ratio": ["log.cleaner.min.cleanable.ratio"],
    "cleanup.policy": ["log.cleanup.policy"],
    "unclean.leader.election.enable": ["unclean.leader.election.enable"],
    "min.insync.replicas": ["min.insync.replicas"],
    "compression.type": ["compression.type"],
    "compression.gzip.level": ["compression.gzip.level"],
    "compression.lz4.level": ["compression.lz4.level"],
    "compression.zstd.level": ["compression.zstd.level"],
    "message.timestamp.type": ["log.message.timestamp.type"],
    "message.timestamp.difference.max.ms": ["log.message.timestamp.difference.max.ms"],
    "message.timestamp.before.max.ms": ["log.message.timestamp.before.max.ms"],
    "message.timestamp.after.max.ms": ["log.message.timestamp.after.max.ms"],
}

#: broker keys that share one setting (KafkaConfig's ms > minutes > hours precedence)
_BROKER_GROUPS = [
    ["log.roll.ms", "log.roll.hours"],
    ["log.roll.jitter.ms", "log.roll.jitter.hours"],
    ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
]


def broker_synonyms(name: str) -> list[str]:
    """Kafka's `DynamicBrokerConfig.brokerConfigSynonyms`: the keys that set the same thing."""
    return next((group for group in _BROKER_GROUPS if name in group), [name])


def render(value: Any) -> str | None:
    """A typed value as Kafka's `ConfigDef.convertToString` writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "1.7976931348623157E308" if math.isinf(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def broker_default(key: str) -> str | None:
    """Kafka's default of a broker key as a string (None: the key has no default)."""
    definition = BROKER_CONFIG.get(key)
    default = None if definition is None or not definition.has_effect else definition.default
    return default if isinstance(default, str) or default is None else render(default)


def _synonyms(names: list[str], dynamic: DynamicBrokerConfig, *, per_broker: bool = True) -> list[dict]:
    out = []
    for source, layer in dynamic.layers():
        if source == "DYNAMIC_BROKER_CONFIG" and not per_broker:
            continue
        out += [{"name": n, "value": layer[n], "source": SOURCES[source]} for n in names if n in layer]
    if per_broker:
        defaults = [(n, broker_default(n)) for n in names]
        out += [{"name": n, "value": v, "source": SOURCES["DEFAULT_CONFIG"]} for n, v in defaults if v is not None]
    return out


def _entry(name: str, value, synonyms: list[dict], type_name: str, doc: str, read_only: bool) -> dict:
    sensitive = type_name == "password"
    if sensitive:
        value = None
        synonyms = [{**s, "value": None} for s in synonyms]
    source = synonyms[0]["source"] if synonyms else SOURCES["DEFAULT_CONFIG"]
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == SOURCES["DEFAULT_CONFIG"],
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": synonyms,
        "config_type": TYPES.get(type_name, 0),
        "documentation": doc,
    }


def _log_config_value(key: str, config: LogConfig):
    attr = key.replace(".", "_")
    return getattr(config, attr) if hasattr(config, attr) else None


def describe_topic(
    overrides: dict[str, str],
    log_config: LogConfig,
    dynamic: DynamicBrokerConfig,
    *,
    min_insync_replicas: int,
    unclean_leader_election_enable: bool,
    keys: list[str] | None = None,
) -> list[dict]:
    """Every topic config (or those in `keys`) of a topic with `overrides`, whose logs run with
    `log_config`; the two keywords are the topic's effective values of those keys."""
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = _synonyms(TOPIC_SYNONYMS.get(name, []), dynamic)
        if name in overrides:
            synonyms.insert(0, {"name": name, "value": overrides[name], "source": SOURCES["DYNAMIC_TOPIC_CONFIG"]})
        typed = {
            "min.insync.replicas": min_insync_replicas,
            "unclean.leader.election.enable": unclean_leader_election_enable,
        }.get(name, _log_config_value(name, log_config))
        if typed is not None:
            value = render(typed)
        elif synonyms:
            value = render(definition.parse(name, synonyms[0]["value"]))
        else:
            value = definition.default
        entries.append(_entry(name, value, synonyms, definition.type, definition.doc, read_only=False))
    return entries


def describe_broker(dynamic: DynamicBrokerConfig, *, per_broker: bool, keys: list[str] | None = None) -> list[dict]:
    """A broker's configs: `per_broker` describes this broker (every key it knows); otherwise the
    cluster-wide `<default>` entity (only the keys set there)."""
    entries = []
    for name, definition in BROKER_CONFIG.items():
        type_name, doc = definition.type, definition.doc
        if keys is not None and name not in keys:
            continue
        if not per_broker and name not in dynamic.cluster_default:
            continue
        synonyms = _synonyms(broker_synonyms(name), dynamic, per_broker=per_broker)
        if per_broker:
            found = dynamic.source_of(name)
            value = found[1] if found is not None else broker_default(name)
        else:
            value = dynamic.cluster_default[name]
        entries.append(_entry(name, value, synonyms, type_name, doc, read_only=not definition.dynamic))
    return entries


def describe_group(entries) -> list[dict]:
    """DescribeConfigs entries of a GROUP resource (`coordinator.group.group_config.describe`):
    an override's source is GROUP_CONFIG, anything else the broker's default (DEFAULT_CONFIG)."""
    out = []
    for e in entries:
        source = SOURCES["GROUP_CONFIG"] if e.overridden else SOURCES["DEFAULT_CONFIG"]
        synonyms = [{"name": e.name, "value": e.value, "source": source}]
        out.append(_entry(e.name, e.value, synonyms, e.config_type, e.documentation, False))
    return out


def describe_client_metrics(entries) -> list[dict]:
    """DescribeConfigs entries of a CLIENT_METRICS resource (`client_metrics.config.describe`:
    name, value, is_default, type, doc): a set key's source is CLIENT_METRICS_CONFIG."""
    out = []
    for name, value, is_default, type_name, doc in entries:
        source = SOURCES["DEFAULT_CONFIG"] if is_default else SOURCES["CLIENT_METRICS_CONFIG"]
        out.append(_entry(name, value, [{"name": name, "value": value, "source": source}], type_name, doc, False))
    return out
