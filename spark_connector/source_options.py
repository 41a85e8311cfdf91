"""The `minikafka` source's options, parsed and checked as Spark's Kafka source does
(KafkaSourceProvider): each bad value is a ValueError naming the option.

Which partitions: exactly one of `assign` (JSON `{"t":[0,1]}`), `subscribe` (or `topic`: a topic or
a comma-separated list) and `subscribePattern` (or `topicPattern`: a regex over topic names).

Where to start and end (the first given wins, as in Spark):
- start: `startingTimestamp` (ms, every partition), `startingOffsetsByTimestamp` (JSON
  `{"t":{"0":ms}}`), `startingOffsets` (`earliest`, `latest`, or JSON `{"t":{"0":23}}` with -2
  earliest and -1 latest); default earliest for batch reads and latest for streams, as Spark.
  A timestamp with no offset at or after it fails the query (`startingOffsetsByTimestampStrategy`
  `error`, the default) or starts at the latest offset (`latest`).
- end (batch reads): `endingTimestamp`, `endingOffsetsByTimestamp`, `endingOffsets` (default
  latest); a timestamp with no offset at or after it ends at the latest offset.

Streams: `maxOffsetsPerTrigger` (records per micro-batch, split over partitions in proportion to
their lag), `minOffsetsPerTrigger` with `maxTriggerDelay` (wait for that many new records, but no
longer than the delay: `15m` by default; units ms, s, m, h, d).

`failOnDataLoss` (default true): offsets the query should read but Kafka no longer has (retention,
DeleteRecords, compaction) fail the query with a message that names them; false skips them.
`includeHeaders` (default false): the `headers` column, as Spark's. `kafka.isolation.level`,
`maxOffsetsPerPartitionSplit`, and the shared connection options (`options.py`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from client.reads import ISOLATION_LEVELS
from spark_connector.kafka_io import list_topics
from spark_connector.options import bootstrap_of, security_of

EARLIEST, LATEST = -2, -1
_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class Bound:
    """Where a read starts or ends: `kind` is "offset" (value: EARLIEST, LATEST or a dict
    {topic: {partition: offset}}) or "timestamp" (value: ms, or {topic: {partition: ms}})."""

    kind: str
    value: object

    def for_partition(self, topic: str, partition: int) -> int:
        """The offset (or EARLIEST / LATEST), or the timestamp, this bound names for one
        partition; partitions a JSON bound leaves out take LATEST, as in Spark."""
        if isinstance(self.value, dict):
            return self.value.get(topic, {}).get(partition, LATEST)
        return self.value


def _json_per_partition(name: str, text: str) -> dict:
    try:
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f'{name} must be JSON like {{"topic":{{"0":23}}}}: {text!r}') from e


def _int(options: dict, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer: {text!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}: {value}")
    return value


def duration_ms(text: str) -> int:
    """'15m', '30s', '500ms', '1h', '2d' or plain milliseconds -> ms; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in ("", *_UNITS_MS):
        raise ValueError(f"maxTriggerDelay must be a duration like 15m, 30s or 500ms: {text!r}")
    return int(match.group(1)) * _UNITS_MS.get(match.group(2) or "ms", 1)


def _bound(options: dict, which: str, default: int) -> Bound:
    """`which` is "starting" or "ending"."""
    if options.get(f"{which}Timestamp") is not None:
        return Bound("timestamp", _int(options, f"{which}Timestamp"))
    if options.get(f"{which}OffsetsByTimestamp") is not None:
        name = f"{which}OffsetsByTimestamp"
        return Bound("timestamp", _json_per_partition(name, options[name]))
    text = options.get(f"{which}Offsets")
    if text is None or text == "":
        return Bound("offset", default)
    if text in ("earliest", "latest"):
        return Bound("offset", EARLIEST if text == "earliest" else LATEST)
    return Bound("offset", _json_per_partition(f"{which}Offsets", text))


class SourceOptions:
    def __init__(self, options: dict, streaming: bool = False):
        self.bootstrap = bootstrap_of(options)
        self.security = security_of(options)
        topics = options.get("subscribe") or options.get("topic")
        self.pattern = options.get("subscribePattern") or options.get("topicPattern")
        assign = options.get("assign")
        given = [
            name for name, v in (("assign", assign), ("subscribe", topics), ("subscribePattern", self.pattern)) if v
        ]
        if len(given) != 1:
            raise ValueError(
                "exactly one of the options assign, subscribe (or topic) and subscribePattern (or topicPattern) "
                f"is required{f', not {given}' if given else ''}"
            )
        self.assigned: dict[str, set[int]] | None = None
        if assign:
            try:
                self.assigned = {t: {int(p) for p in ps} for t, ps in json.loads(assign).items()}
            except (ValueError, AttributeError, TypeError) as e:
                raise ValueError(f'assign must be JSON like {{"topicA":[0,1],"topicB":[2]}}: {assign!r}') from e
        self._topics = [t.strip() for t in topics.split(",") if t.strip()] if topics else None
        self.starting = _bound(options, "starting", LATEST if streaming else EARLIEST)
        if not streaming and options.get("endingOffsets") in ("earliest",):
            raise ValueError("endingOffsets earliest is not allowed for a batch query, as in Spark")
        self.ending = _bound(options, "ending", LATEST)
        strategy = options.get("startingOffsetsByTimestampStrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise ValueError(f"startingOffsetsByTimestampStrategy must be error or latest: {strategy!r}")
        self.timestamp_fallback_latest = strategy == "latest"
        self.split = _int(options, "maxOffsetsPerPartitionSplit", 1_000_000, minimum=1)
        self.max_per_trigger = _int(options, "maxOffsetsPerTrigger", None, minimum=1)
        self.min_per_trigger = _int(options, "minOffsetsPerTrigger", None, minimum=1)
        self.max_trigger_delay_ms = duration_ms(options.get("maxTriggerDelay", "15m"))
        self.fail_on_data_loss = _bool(options, "failOnDataLoss", True)
        self.include_headers = _bool(options, "includeHeaders", False)
        level = options.get("kafka.isolation.level", "read_uncommitted")
        if level not in ISOLATION_LEVELS:
            raise ValueError(f"kafka.isolation.level must be read_uncommitted or read_committed: {level!r}")
        self.isolation_level = ISOLATION_LEVELS[level]

    @property
    def topics(self) -> list[str]:
        """The topics named, or those whose names match the pattern now."""
        if self.assigned is not None:
            return sorted(self.assigned)
        if self._topics is not None:
            return self._topics
        return [t for t in list_topics(self.bootstrap, self.security) if re.fullmatch(self.pattern, t)]

    def wanted(self, topic: str, partition: int) -> bool:
        return self.assigned is None or partition in self.assigned.get(topic, ())


def _bool(options: dict, name: str, default: bool) -> bool:
    text = options.get(name)
    if text is None:
        return default
    if text.lower() not in ("true", "false"):
        raise ValueError(f"{name} must be true or false: {text!r}")
    return text.lower() == "true"
