"""Dynamic broker configuration (Kafka's `DynamicBrokerConfig`, ZooKeeper mode): configs stored
in `/config/brokers/<id>` (this broker) and `/config/brokers/<default>` (every broker) override the
static `server.properties`, with precedence per-broker > cluster default > static > Kafka default.

Only the keys the config table (`broker.config_def`) marks `dynamic` may be set dynamically: the broker-wide defaults of topic configs
(Kafka's `DynamicLogConfig` keys, which every log picks up at once) and the two topic defaults the
replica manager and controller read on every use. Any other key is refused with a ConfigError that
says why (Kafka's "Cannot update these configs dynamically"; for keys Kafka can change at runtime
but minikafka cannot yet, the message says so). Pure: no ZooKeeper, no trio.
"""

from __future__ import annotations

import logging

from broker.config import BrokerConfig, ConfigError, build_config
from broker.config_def import BROKER_CONFIG

log = logging.getLogger(__name__)

#: the entity name of the cluster-wide dynamic broker config (Kafka's ConfigEntityName.Default)
DEFAULT_ENTITY = "<default>"

#: broker keys that may be set in /config/brokers/* (`dynamic` in the config table): the log
#: defaults (topic config synonyms) and the two topic defaults read on every use
RECONFIGURABLE = frozenset(key.name for key in BROKER_CONFIG.values() if key.dynamic)

#: why a key cannot change in minikafka at runtime (the table's `fixed_because`, or for a Kafka key
#: minikafka has no mechanism for, what it does with it; the no-effect keys: trio has no thread
#: pools to resize)
_NOT_YET: dict[str, str] = {
    key.name: reason for key in BROKER_CONFIG.values() if (reason := key.fixed_because or key.compat)
} | {
    key.name: "trio needs no thread pools, so minikafka has none to resize"
    for key in BROKER_CONFIG.values()
    if not key.has_effect
}


class DynamicBrokerConfig:
    """The static properties of one broker and the dynamic layers over them."""

    def __init__(self, static: dict[str, str], broker_id: int):
        """`static`: the properties the broker started with (`BrokerConfig.raw`)."""
        self.static = dict(static)
        self.broker_id = broker_id
        self.per_broker: dict[str, str] = {}  # /config/brokers/<id>
        self.cluster_default: dict[str, str] = {}  # /config/brokers/<default>

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
        unknown = sorted(key for key in props if key not in BROKER_CONFIG)
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
