"""The `minikafka` source (Spark 4 Python Data Source API): batch and streaming reads of
committed data (up to the high watermark), with the schema and options of Spark's Kafka source.

    spark.dataSource.register(MinikafkaDataSource)  # from spark_connector
    df = (spark.read.format("minikafka").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "flights").option("startingOffsets", "earliest").load())

Options: `bootstrap.servers` (or Spark's `kafka.bootstrap.servers`), `topic` (or `subscribe`: a
topic or a comma-separated list) or `topicPattern` (or `subscribePattern`: a regex over topic names),
`startingOffsets` / `endingOffsets` (`earliest`, `latest`, or JSON `{"topic":{"0":23,"1":-2}}` with
-2 = earliest and -1 = latest), `maxOffsetsPerPartitionSplit` (split a big partition into input
partitions of at most this many offsets; default 1,000,000), `kafka.isolation.level`
(`read_uncommitted`, the default as in Spark's Kafka source, or `read_committed`: read up to the
last stable offset and skip the records of aborted transactions; transaction markers are never
rows), and Kafka's client security keys with Spark's `kafka.` prefix (`kafka.security.protocol`,
`kafka.sasl.mechanism`, `kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`, ...), as for
any consumer.

`latest` is the high watermark (or LSO) read when the query is planned: a reader never returns a record at
or beyond the end it was planned with, even if the log grew meanwhile. Streaming offsets are the
next offset per topic-partition; each micro-batch ends at the HWs of its planning.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from client.reads import ISOLATION_LEVELS
from spark_connector.kafka_io import KafkaReadError, fetch_range, list_topics, offsets_of
from spark_connector.options import bootstrap_of, security_of

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
EARLIEST, LATEST = -2, -1


@dataclass
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int  # first offset to read
    end: int  # exclusive: never read at or beyond it


def _spec(text: str | None, default: int) -> dict | int:
    if text is None or text == "":
        return default
    if text in ("earliest", "latest"):
        return EARLIEST if text == "earliest" else LATEST
    try:
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in json.loads(text).items()}
    except (ValueError, AttributeError) as e:
        raise ValueError(f'offsets must be earliest, latest or JSON like {{"t":{{"0":5}}}}: {text!r}') from e


class _Options:
    def __init__(self, options: dict):
        self.bootstrap = bootstrap_of(options)
        topics = options.get("topic") or options.get("subscribe")
        self.pattern = options.get("topicPattern") or options.get("subscribePattern")
        if not topics and not self.pattern:
            raise ValueError("option topic (or subscribe) or topicPattern (or subscribePattern) is required")
        self._topics = [t.strip() for t in topics.split(",") if t.strip()] if topics else None
        self.starting = _spec(options.get("startingOffsets"), EARLIEST)
        self.ending = _spec(options.get("endingOffsets"), LATEST)
        self.split = int(options.get("maxOffsetsPerPartitionSplit", 1_000_000))
        level = options.get("kafka.isolation.level", "read_uncommitted")
        if level not in ISOLATION_LEVELS:
            raise ValueError(f"kafka.isolation.level must be read_uncommitted or read_committed: {level!r}")
        self.isolation_level = ISOLATION_LEVELS[level]
        self.security = security_of(options)  # Spark passes `kafka.*` to its consumer

    @property
    def topics(self) -> list[str]:
        """The topics named, or those whose names match the pattern now."""
        if self._topics is not None:
            return self._topics
        return [t for t in list_topics(self.bootstrap, self.security) if re.fullmatch(self.pattern, t)]


def _resolve(spec, topic: str, partition: int, earliest: int, latest: int) -> int:
    value = spec if isinstance(spec, int) else spec.get(topic, {}).get(partition, LATEST)
    if value == EARLIEST:
        return earliest
    if value == LATEST:
        return latest
    return min(max(value, earliest), latest)


def _row(topic: str, partition: int, record) -> tuple:
    ts = datetime.datetime.fromtimestamp(record.timestamp / 1000, tz=datetime.UTC)
    return (
        record.key,
        record.value,
        topic,
        partition,
        record.offset,
        ts,
        record.timestamp_type,
        [(h.key, h.value) for h in record.headers],
    )


def _split(topic: str, partition: int, start: int, end: int, size: int) -> list[OffsetRange]:
    return [OffsetRange(topic, partition, s, min(s + size, end)) for s in range(start, end, size)]


class MinikafkaBatchReader(DataSourceReader):
    def __init__(self, options: _Options):
        self.options = options

    def partitions(self) -> list[OffsetRange]:
        ranges = []
        bounds = offsets_of(
            self.options.bootstrap, self.options.topics, self.options.isolation_level, self.options.security
        )
        for (topic, partition), (earliest, hw) in sorted(bounds.items()):
            start = _resolve(self.options.starting, topic, partition, earliest, hw)
            end = _resolve(self.options.ending, topic, partition, earliest, hw)
            ranges += _split(topic, partition, start, end, self.options.split)
        return ranges

    def read(self, partition: OffsetRange):
        for record in fetch_range(
            self.options.bootstrap,
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            isolation_level=self.options.isolation_level,
            security=self.options.security,
        ):
            yield _row(partition.topic, partition.partition, record)


class MinikafkaStreamReader(DataSourceStreamReader):
    """Offsets: {"topic-partition": next offset}, as JSON-able dicts."""

    def __init__(self, options: _Options):
        self.options = options

    def _bounds(self) -> dict:
        return offsets_of(
            self.options.bootstrap, self.options.topics, self.options.isolation_level, self.options.security
        )

    def initialOffset(self) -> dict:
        return {
            f"{t}-{p}": _resolve(self.options.starting, t, p, earliest, hw)
            for (t, p), (earliest, hw) in self._bounds().items()
        }

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        end = {f"{t}-{p}": hw for (t, p), (_, hw) in self._bounds().items()}
        for key, offset in (start or {}).items():
            end[key] = max(end.get(key, offset), offset)  # a new leader's lagging HW never moves us back
        return end

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        ranges = []
        for key, stop in end.items():
            topic, _, partition = key.rpartition("-")
            begin = start.get(key, _resolve(EARLIEST, topic, int(partition), 0, stop))
            if stop > begin:
                ranges += _split(topic, int(partition), begin, stop, self.options.split)
        return ranges

    def read(self, partition: OffsetRange):
        for record in fetch_range(
            self.options.bootstrap,
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            isolation_level=self.options.isolation_level,
            security=self.options.security,
        ):
            yield _row(partition.topic, partition.partition, record)

    def commit(self, end: dict) -> None:
        pass


__all__ = ["MinikafkaBatchReader", "MinikafkaStreamReader", "KafkaReadError", "OffsetRange"]
