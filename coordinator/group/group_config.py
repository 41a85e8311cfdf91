"""Per-group configs (Kafka's `GroupConfig`, the GROUP config resource, type 32): overrides of the
broker's `group.share.*` defaults for one share group, set with IncrementalAlterConfigs /
AlterConfigs and read with DescribeConfigs. Pure: the key table, validation against the broker's
bounds, and the effective values.

| key | broker default | bounds |
|---|---|---|
| share.auto.offset.reset | latest | latest, earliest |
| share.isolation.level | read_uncommitted | read_uncommitted, read_committed |
| share.record.lock.duration.ms | group.share.record.lock.duration.ms | group.share.min/max.record.lock.duration.ms |
| share.session.timeout.ms | group.share.session.timeout.ms | group.share.min/max.session.timeout.ms |
| share.heartbeat.interval.ms | group.share.heartbeat.interval.ms | group.share.min/max.heartbeat.interval.ms |

They are stored as Kafka's ZooKeeper-mode entity configs are, in `/config/groups/<group>` with a
change notification (`broker.config_manager` applies them on every broker).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

#: (name, type, the broker key of its default or the default itself, the (min, max) broker keys)
_KEYS: dict[str, tuple[str, str, tuple[str, str] | None, tuple[str, ...] | None, str]] = {
    "share.auto.offset.reset": (
        "string",
        "latest",
        None,
        ("latest", "earliest"),
        "Where a share group starts reading a partition it has no state for.",
    ),
    "share.isolation.level": (
        "string",
        "read_uncommitted",
        None,
        ("read_uncommitted", "read_committed"),
        "Whether a share group reads records of transactions not yet committed.",
    ),
    "share.record.lock.duration.ms": (
        "int",
        "group.share.record.lock.duration.ms",
        ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
        None,
        "How long, in ms, a member holds the records it acquired.",
    ),
    "share.session.timeout.ms": (
        "int",
        "group.share.session.timeout.ms",
        ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        None,
        "How long, in ms, a share group member lives without a heartbeat.",
    ),
    "share.heartbeat.interval.ms": (
        "int",
        "group.share.heartbeat.interval.ms",
        ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
        None,
        "The heartbeat interval, in ms, of a share group's members.",
    ),
}
GROUP_CONFIG_KEYS = tuple(_KEYS)


class BrokerValues(Protocol):
    """The broker's config values by key (BrokerConfig, or a dict)."""

    def __getitem__(self, key: str) -> Any: ...


class GroupConfigError(ValueError):
    """A group config Kafka refuses (INVALID_CONFIG)."""


@dataclass(frozen=True)
class GroupConfigEntry:
    """One key as DescribeConfigs shows it: its value, whether the group overrides it, its type
    ("string", "int") and documentation."""

    name: str
    value: str
    overridden: bool
    config_type: str
    documentation: str


def _default(key: str, broker: BrokerValues) -> str:
    kind, default, bounds, _, _ = _KEYS[key]
    return str(broker[default]) if bounds is not None else default


def validate(overrides: Mapping[str, str], broker: BrokerValues) -> dict[str, Any]:
    """The typed overrides; raises GroupConfigError naming the first bad key or value."""
    typed: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in _KEYS:
            raise GroupConfigError(f"Unknown group config name: {key}")
        kind, _, bounds, choices, _ = _KEYS[key]
        if kind == "int":
            try:
                number = int(value)
            except (TypeError, ValueError):
                raise GroupConfigError(
                    f"Invalid value {value} for configuration {key}: Not a number of type INT"
                ) from None
            assert bounds is not None
            low, high = broker[bounds[0]], broker[bounds[1]]
            if not low <= number <= high:
                raise GroupConfigError(f"{key} must be greater than or equal to {low} and less than or equal to {high}")
            typed[key] = number
        else:
            assert choices is not None
            if value not in choices:
                raise GroupConfigError(
                    f"Invalid value {value} for configuration {key}: String must be one of: {', '.join(choices)}"
                )
            typed[key] = value
    return typed


def effective(key: str, overrides: Mapping[str, Any], broker: BrokerValues) -> Any:
    """The value of `key` for a group with `overrides` (typed, from `validate`)."""
    if key in overrides:
        return overrides[key]
    value = _default(key, broker)
    return int(value) if _KEYS[key][0] == "int" else value


def describe(
    overrides: Mapping[str, Any], broker: BrokerValues, keys: list[str] | None = None
) -> list[GroupConfigEntry]:
    """Every key (or those named in `keys` that exist), in the table's order."""
    return [
        GroupConfigEntry(key, str(effective(key, overrides, broker)), key in overrides, _KEYS[key][0], _KEYS[key][4])
        for key in _KEYS
        if keys is None or key in keys
    ]


class GroupConfigs:
    """The stored overrides of every group (as `broker.config_manager` reads them), typed."""

    def __init__(self, broker: BrokerValues) -> None:
        self.broker = broker
        self._overrides: dict[str, dict[str, Any]] = {}

    def set(self, group_id: str, stored: Mapping[str, str]) -> None:
        """Raises GroupConfigError for stored values that are not valid (left as they were)."""
        typed = validate(stored, self.broker)
        if typed:
            self._overrides[group_id] = typed
        else:
            self._overrides.pop(group_id, None)

    def overrides(self, group_id: str) -> dict[str, Any]:
        return dict(self._overrides.get(group_id, {}))

    def get(self, group_id: str, key: str) -> Any:
        return effective(key, self._overrides.get(group_id, {}), self.broker)
