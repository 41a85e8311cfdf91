"""What AlterConfigs (API 33) and IncrementalAlterConfigs (API 44) do to one resource's stored
config, before anything is written (Kafka's `ConfigAdminManager` and `ZkAdminManager`). Pure.

Each function returns the new whole config of the entity or raises `ConfigOpError` carrying the
error code and message Kafka answers with: INVALID_REQUEST for a malformed request (duplicate keys,
a null value, an unknown operation), INVALID_CONFIG for an operation a key does not allow
(APPEND/SUBTRACT on a non-list key). Values are validated afterwards by the caller, against the
topic or broker rules.
"""

from __future__ import annotations

from collections import Counter

from broker.config_def import BROKER_CONFIG
from broker.config_helper import broker_default
from client_metrics import config as client_metrics_config
from coordinator.group.group_config import GROUP_CONFIG_KEYS
from protocol.errors import ErrorCode, KafkaError
from storage.config import TOPIC_CONFIGS, parse_list

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


class ConfigOpError(KafkaError):
    """A config change Kafka refuses (INVALID_CONFIG, INVALID_REQUEST, ...), with its code."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message, code)


def _type_and_default(resource_type: int, key: str) -> tuple[str | None, str | None]:
    if resource_type == GROUP:  # no list keys: APPEND / SUBTRACT are INVALID_CONFIG
        return ("string" if key in GROUP_CONFIG_KEYS else None), None
    if resource_type == CLIENT_METRICS:  # KIP-714: `metrics` and `match` are lists
        found = client_metrics_config.KEYS.get(key)
        return (found[0], found[1]) if found else (None, None)
    if resource_type == TOPIC:
        topic_key = TOPIC_CONFIGS.get(key)
        return (topic_key.type, topic_key.default) if topic_key else (None, None)
    broker_key = BROKER_CONFIG.get(key)
    return (None if broker_key is None else broker_key.type), broker_default(key)


def check_duplicates(keys: list[str]) -> None:
    dup = sorted(key for key, n in Counter(keys).items() if n > 1)
    if dup:
        raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {dup}")


def replace_all(entries: list[tuple[str, str | None]]) -> dict[str, str]:
    """AlterConfigs: the given entries become the entity's whole config."""
    check_duplicates([k for k, _ in entries])
    for key, value in entries:
        if value is None:
            raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
    return {k: v for k, v in entries if v is not None}


def apply_incremental(
    resource_type: int, current: dict[str, str], ops: list[tuple[str, int, str | None]]
) -> dict[str, str]:
    """IncrementalAlterConfigs: apply `(key, op, value)` to `current` (the stored config).
    APPEND adds list items not already there (to the key's default when unset); SUBTRACT removes
    them; DELETE returns a key to its default."""
    check_duplicates([k for k, _, _ in ops])
    config = dict(current)
    for key, op, value in ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op} for {key}")
        if op != DELETE and value is None:
            raise ConfigOpError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
        if op == SET:
            config[key] = value  # type: ignore[assignment]
        elif op == DELETE:
            config.pop(key, None)
        else:
            type_name, default = _type_and_default(resource_type, key)
            if type_name != "list":
                verb = "append" if op == APPEND else "subtract"
                raise ConfigOpError(
                    ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {key}"
                )
            old = parse_list(config[key] if key in config else (default or ""))
            given = parse_list(value or "")
            items = old + [v for v in given if v not in old] if op == APPEND else [v for v in old if v not in given]
            config[key] = ",".join(dict.fromkeys(items))
    return config
