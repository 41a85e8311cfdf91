"""The `minikafka` source (Spark 4 Python Data Source API): batch and streaming reads of
committed data (up to the high watermark), with the schema and options of Spark's Kafka source
(`source_options.py` lists them).

    spark.dataSource.register(MinikafkaDataSource)  # from spark_connector
    df = (spark.read.format("minikafka").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "flights").option("startingOffsets", "earliest").load())

`latest` is the high watermark (or LSO under read_committed) read when the query is planned: a
reader never returns a record at or beyond the end it was planned with, even if the log grew
meanwhile. Streaming offsets are the next offset per topic-partition ({"topic-partition": offset});
each micro-batch ends at the HWs of its planning, or earlier under `maxOffsetsPerTrigger`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from spark_connector.kafka_io import (
    ColumnChunk,
    DataLossError,
    KafkaReadError,
    fetch_range,
    offsets_for_times,
    offsets_of,
)
from spark_connector.source_options import EARLIEST, LATEST, Bound, SourceOptions

COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS = "headers array<struct<key: string, value: binary>>"
SCHEMA = f"{COLUMNS}, {HEADERS}"  # with includeHeaders=true; Spark's columns without it


def schema_for(options: dict) -> str:
    """The source's schema: Spark's Kafka source columns, `headers` only with includeHeaders."""
    return SCHEMA if str(options.get("includeHeaders", "false")).lower() == "true" else COLUMNS


@dataclass
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int  # first offset to read
    end: int  # exclusive: never read at or beyond it


def _schema(headers: bool):
    import pyarrow as pa

    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
    if headers:
        fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.schema(fields)


def _binary(kind, column: tuple, length: int):
    import pyarrow as pa

    bitmap, offsets, data, nulls = column
    buffers = [pa.py_buffer(bitmap) if bitmap else None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, length, buffers, null_count=nulls)


def _arrow_batches(topic: str, partition: int, chunks: list[ColumnChunk], headers: bool):
    """The chunks as pyarrow RecordBatches of the source's schema: the decoded buffers are
    wrapped, not copied, and nothing is made per record (Spark takes the batches as they are)."""
    import pyarrow as pa

    schema = _schema(headers)
    for chunk in chunks:
        cols, n = chunk.columns, chunk.columns["rows"]
        types = [pa.repeat(pa.scalar(t, pa.int32()), rows) for rows, t in chunk.timestamp_types]
        columns = [
            _binary(pa.binary(), cols["key"], n),
            _binary(pa.binary(), cols["value"], n),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols["offset"])]),
            pa.Array.from_buffers(schema.field("timestamp").type, n, [None, pa.py_buffer(cols["timestamp"])]),
            pa.concat_arrays(types) if len(types) != 1 else types[0],
        ]
        if headers:
            ends, keys, values = cols["headers"]
            total = len(keys[1]) // 4 - 1
            entries = pa.StructArray.from_arrays(
                [_binary(pa.string(), keys, total), _binary(pa.binary(), values, total)], names=["key", "value"]
            )
            lists = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(ends)])
            columns.append(pa.ListArray.from_arrays(lists, entries))
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _split(topic: str, partition: int, start: int, end: int, size: int) -> list[OffsetRange]:
    return [OffsetRange(topic, partition, s, min(s + size, end)) for s in range(start, end, size)]


class _Reader:
    options: SourceOptions

    def _bounds(self) -> dict[tuple[str, int], tuple[int, int]]:
        """{(topic, partition): (log start offset, HW or LSO)} of the wanted partitions now."""
        o = self.options
        bounds = offsets_of(o.bootstrap, o.topics, o.isolation_level, o.security)
        return {tp: b for tp, b in bounds.items() if o.wanted(*tp)}

    def _resolve(self, bound: Bound, bounds: dict, ending: bool = False) -> dict[tuple[str, int], int]:
        """The offset `bound` names for each partition, clamped to [log start, HW]. A starting
        offset below the log start is kept when failOnDataLoss is on, so that reading it fails."""
        if bound.kind == "timestamp":
            found = offsets_for_times(
                self.options.bootstrap, {tp: bound.for_partition(*tp) for tp in bounds}, self.options.security
            )
            named = {}
            for tp, offset in found.items():
                if offset < 0 and not ending and not self.options.timestamp_fallback_latest:
                    raise KafkaReadError(
                        f"no offset of {tp[0]}-{tp[1]} has a timestamp at or after {bound.for_partition(*tp)} "
                        "(set startingOffsetsByTimestampStrategy to latest to start at the latest offset instead)"
                    )
                named[tp] = LATEST if offset < 0 else offset
        else:
            named = {tp: bound.for_partition(*tp) for tp in bounds}
        out = {}
        for tp, value in named.items():
            earliest, latest = bounds[tp]
            if value == EARLIEST:
                out[tp] = earliest
            elif value == LATEST:
                out[tp] = latest
            elif value < earliest and self.options.fail_on_data_loss and not ending:
                out[tp] = value
            else:
                out[tp] = min(max(value, earliest), latest)
        return out

    def read(self, partition: OffsetRange):
        if not isinstance(partition, OffsetRange):
            return  # Spark's one empty InputPartition when the plan holds no range
        o = self.options
        records = fetch_range(
            o.bootstrap,
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            isolation_level=o.isolation_level,
            security=o.security,
            fail_on_data_loss=o.fail_on_data_loss,
            headers=o.include_headers,
        )
        yield from _arrow_batches(partition.topic, partition.partition, records, o.include_headers)


class MinikafkaBatchReader(_Reader, DataSourceReader):
    def __init__(self, options: SourceOptions):
        self.options = options

    def partitions(self) -> list[OffsetRange]:
        bounds = self._bounds()
        starts = self._resolve(self.options.starting, bounds)
        ends = self._resolve(self.options.ending, bounds, ending=True)
        ranges = []
        for (topic, partition), start in sorted(starts.items()):
            ranges += _split(topic, partition, start, ends[(topic, partition)], self.options.split)
        return ranges


def _key(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tp(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("-")
    return topic, int(partition)


def rate_limited(start: dict[str, int], latest: dict[str, int], limit: int) -> dict[str, int]:
    """At most about `limit` more records in all, shared by partitions in proportion to their lag
    (Spark's KafkaMicroBatchStream.rateLimit: a share below 1 rounds up, others down)."""
    lags = {k: max(0, v - start.get(k, v)) for k, v in latest.items()}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for k, end in latest.items():
        begin = start.get(k, end)
        share = limit * lags[k] / total
        step = int(share) if share >= 1 else (1 if lags[k] else 0)
        out[k] = min(end, begin + step)
    return out


class MinikafkaStreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: {"topic-partition": next offset}, as JSON-able dicts."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow: the end when it began
        self._last_trigger = time.monotonic()

    def initialOffset(self) -> dict:
        bounds = self._bounds()
        return {_key(tp): offset for tp, offset in self._resolve(self.options.starting, bounds).items()}

    def _latest(self, start: dict) -> dict:
        end = {_key(tp): hw for tp, (_, hw) in self._bounds().items()}
        for key, offset in start.items():
            end[key] = max(end.get(key, offset), offset)  # a new leader's lagging HW never moves us back
        if self._target is not None:
            end = {k: max(min(v, self._target.get(k, v)), start.get(k, 0)) for k, v in end.items()}
        return end

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        """The end of the next micro-batch. The limits come from this source's options (Spark
        hands Python sources ReadAllAvailable under Trigger.AvailableNow, where Spark's Kafka
        source still applies maxOffsetsPerTrigger); minOffsetsPerTrigger is ignored under
        AvailableNow, as Spark's."""
        start = start or {}
        latest = self._latest(start)
        o = self.options
        new = sum(v - start.get(k, v) for k, v in latest.items() if k in start)
        waited_ms = (time.monotonic() - self._last_trigger) * 1000
        if (
            o.min_per_trigger
            and self._target is None
            and new < o.min_per_trigger
            and waited_ms < o.max_trigger_delay_ms
        ):
            return start  # not enough new records yet, and the delay has not passed
        self._last_trigger = time.monotonic()
        return rate_limited(start, latest, o.max_per_trigger) if o.max_per_trigger else latest

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

        if self.options.max_per_trigger:
            return ReadMaxRows(self.options.max_per_trigger)
        if self.options.min_per_trigger:
            return ReadMinRows(self.options.min_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {_key(tp): hw for tp, (_, hw) in self._bounds().items()}

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        ranges, bounds = [], None
        for key, stop in end.items():
            topic, partition = _tp(key)
            begin = start.get(key, EARLIEST)
            if begin == EARLIEST:  # a partition new since the last batch: from its start, as Spark
                bounds = self._bounds() if bounds is None else bounds  # asked once for all new ones
                begin = bounds.get((topic, partition), (0, 0))[0]
            if stop > begin:
                ranges += _split(topic, partition, begin, stop, self.options.split)
        return ranges

    def commit(self, end: dict) -> None:
        pass


__all__ = ["MinikafkaBatchReader", "MinikafkaStreamReader", "KafkaReadError", "DataLossError", "OffsetRange"]
