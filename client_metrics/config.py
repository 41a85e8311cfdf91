"""CLIENT_METRICS config resources (KIP-714, ConfigResource type 16): a named subscription that
asks the clients it matches to push the metrics whose names start with one of its prefixes, every
`interval.ms`. Pure: parsing, validation and matching; stored in `/config/client-metrics/<name>`.

Keys (Kafka's `ClientMetricsConfigs`):
- `metrics`: a comma-separated list of metric name prefixes; `*` asks for every metric; empty
  (the default) asks for none;
- `interval.ms`: the push interval, 100..3600000 ms (default 300000, 5 minutes);
- `match`: a comma-separated list of `selector=regex`, every one of which must match the whole
  value; selectors `client_instance_id`, `client_id`, `client_software_name`,
  `client_software_version`, `client_source_address`, `client_source_port`. Empty (the default)
  matches every client.

A bad key or value raises `ValueError` (the config APIs answer INVALID_CONFIG).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLIENT_METRICS = 16  # the config resource type
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
#: key -> (type, default, documentation), as DescribeConfigs shows them
KEYS: dict[str, tuple[str, str, str]] = {
    "metrics": ("list", "", "The metric name prefixes the matched clients push ('*': all)."),
    "interval.ms": ("int", str(DEFAULT_INTERVAL_MS), "How often, in ms, the matched clients push."),
    "match": ("list", "", "selector=regex pairs a client must all match (empty: every client)."),
}


@dataclass(frozen=True)
class ClientInfo:
    """What a subscription can match a client instance on."""

    client_instance_id: str
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: str


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]  # prefixes; ("",) for every metric
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: ClientInfo) -> bool:
        return all(pattern.fullmatch(getattr(client, selector)) for selector, pattern in self.match)


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse(name: str, stored: dict[str, str]) -> Subscription:
    """The subscription a stored config describes. Raises ValueError."""
    unknown = sorted(set(stored) - set(KEYS))
    if unknown:
        raise ValueError(f"unknown client metrics config(s) {unknown}")
    metrics = _items(stored.get("metrics", ""))
    try:
        interval = int(stored.get("interval.ms", DEFAULT_INTERVAL_MS))
    except ValueError:
        raise ValueError(f"interval.ms must be an integer, got {stored['interval.ms']!r}") from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ValueError(f"interval.ms must be within {MIN_INTERVAL_MS}..{MAX_INTERVAL_MS}, got {interval}")
    match = []
    for item in _items(stored.get("match", "")):
        selector, sep, regex = item.partition("=")
        if not sep or selector not in SELECTORS:
            raise ValueError(f"match {item!r}: expected selector=regex with a selector of {', '.join(SELECTORS)}")
        try:
            match.append((selector, re.compile(regex)))
        except re.error as e:
            raise ValueError(f"match {item!r}: bad regular expression: {e}") from None
    return Subscription(name, ("",) if "*" in metrics else tuple(metrics), interval, tuple(match))


def describe(stored: dict[str, str], keys: list[str] | None) -> list[tuple[str, str, bool, str, str]]:
    """(name, value, is_default, type, documentation) of each key asked (None: all)."""
    out = []
    for key, (type_name, default, doc) in KEYS.items():
        if keys is None or key in keys:
            out.append((key, stored.get(key, default), key not in stored, type_name, doc))
    return out
