"""The `minikafka` sink: `df.write.format("minikafka")` (batch) and
`df.writeStream.format("minikafka")` (streaming, with checkpoints), as Spark's Kafka sink.

Columns (Spark's Kafka sink schema): `value` (binary or string, required; null writes a
tombstone), `key` (binary or string, optional), `topic` (string; required unless the `topic`
option is set, which then overrides it), `partition` (int, optional: else Kafka's default
partitioner), `headers` (array<struct<key: string, value: binary>>, optional). Any other column is
an error, as in Spark.

Options: `topic`, `kafka.bootstrap.servers` (or `bootstrap.servers`), `kafka.acks` (all/-1, 1, 0;
default all), `kafka.compression.type` (none, gzip, snappy, lz4, zstd), `kafka.linger.ms`,
`kafka.batch.size`, `kafka.enable.idempotence` (default true; off when acks is not all, as Kafka's
producer does when acks is set explicitly), `kafka.transaction.timeout.ms`, Kafka's client
security keys with the `kafka.` prefix, and `kafka.transactional.id`: the prefix of the
transactional ids of the writing tasks (`<prefix>-<task partition>`).

Guarantees:
- without `kafka.transactional.id`: at-least-once, as Spark's Kafka sink. Each task's producer is
  idempotent, so its own retries write no duplicate, but a task Spark runs again (a failed task's
  retry, or the last micro-batch of a query restarted from its checkpoint) writes its rows again.
- with it, streaming: exactly-once per micro-batch and task. Each task writes its rows in one
  transaction that also commits the micro-batch's number as a marker (`kafka_write.py`); a
  restarted or retried task whose transaction had committed writes nothing. This needs the
  query's output partitioning to be deterministic (the same rows in the same task when a batch
  is run again), which holds for a source that replays the same offsets, as ours does. Readers
  with `isolation.level=read_committed` see each row once; use one prefix per query.
- with it, batch: each task's rows are visible all at once or not at all to read_committed readers.
Save modes: append. Spark's Kafka sink also takes errorifexists (Spark's default), but Spark
refuses that mode for every Python data source before the sink is asked: call `.mode("append")`.
Overwrite is refused, as by Spark's Kafka sink.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from protocol import arrow_encode as ae
from protocol import record_batch as rb
from spark_connector.kafka_write import ColumnRows, KafkaWriteError, OutRecord, ProducerSettings, write_records
from spark_connector.options import bootstrap_of, security_of

log = logging.getLogger(__name__)

CODECS = {name: code for code, name in rb.CODEC_NAMES.items()}
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
HEADERS = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))
BATCH_ID = "streaming.sql.batchId"  # the local property Spark's micro-batch execution sets


def _check_schema(schema: StructType, topic_option: str | None) -> None:
    """Raises ValueError naming the column, as Spark's KafkaWriter.validateQuery."""
    fields = {f.name: f.dataType for f in schema.fields}
    expected = {
        "value": (BinaryType(), StringType()),
        "key": (BinaryType(), StringType()),
        "topic": (StringType(),),
        "partition": (IntegerType(),),
        "headers": (HEADERS,),
    }
    for name, kind in fields.items():
        if name not in expected:
            raise ValueError(f"column {name!r} is not one of the Kafka sink's: {', '.join(expected)}")
        if kind not in expected[name] and not (name == "headers" and _headers_like(kind)):
            wanted = " or ".join(t.simpleString() for t in expected[name])
            raise ValueError(f"column {name!r} must be {wanted}, not {kind.simpleString()}")
    if "value" not in fields:
        raise ValueError("the Kafka sink needs a 'value' column (binary or string)")
    if "topic" not in fields and not topic_option:
        raise ValueError("topic option required when no 'topic' column is present")


def _headers_like(kind) -> bool:
    if not isinstance(kind, ArrayType) or not isinstance(kind.elementType, StructType):
        return False
    return [(f.name, f.dataType) for f in kind.elementType.fields] == [("key", StringType()), ("value", BinaryType())]


def _column_rows(topic: str, batch) -> ColumnRows:
    """A batch's value, key and partition columns as buffers (large binary and string types are
    cast to their 32-bit-offset forms, as Kafka records hold at most 2 GiB anyway)."""
    import pyarrow as pa

    def binary(name: str):
        column = batch.column(name)
        if pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.binary())
        return ae.column_buffers(column)

    names = batch.schema.names
    keys = binary("key") if "key" in names and batch.column("key").null_count < batch.num_rows else None
    partitions = ae.int32_buffers(batch.column("partition")) if "partition" in names else None
    return ColumnRows(topic, binary("value"), keys, partitions)


def _bytes(value) -> bytes | None:
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else bytes(value)


@dataclass
class SinkCommit(WriterCommitMessage):
    task: int
    written: int
    skipped: bool


class _Sink:
    def __init__(self, options: dict, schema: StructType, overwrite: bool):
        if overwrite:
            raise ValueError("save mode overwrite is not allowed for Kafka: use append or errorifexists")
        self.topic = options.get("topic")
        _check_schema(schema, self.topic)
        acks = options.get("kafka.acks", "all").lower()
        if acks not in ACKS:
            raise ValueError(f"kafka.acks must be all, -1, 1 or 0: {acks!r}")
        codec = options.get("kafka.compression.type", "none").lower()
        if codec not in CODECS:
            raise ValueError(f"kafka.compression.type must be one of {', '.join(CODECS)}: {codec!r}")
        idempotent = options.get("kafka.enable.idempotence", "true").lower() == "true" and ACKS[acks] == -1
        self.txn_prefix = options.get("kafka.transactional.id")
        if self.txn_prefix and not idempotent:
            raise ValueError("kafka.transactional.id needs acks=all and idempotence")
        self.settings = ProducerSettings(
            bootstrap=bootstrap_of(options),
            security=security_of(options),
            acks=ACKS[acks],
            idempotent=idempotent,
            compression=CODECS[codec],
            linger_ms=int(options.get("kafka.linger.ms", 5)),
            batch_size=int(options.get("kafka.batch.size", 16384)),
            transaction_timeout_ms=int(options.get("kafka.transaction.timeout.ms", 60000)),
        )

    def _records(self, batches: Iterator) -> Iterator[OutRecord | ColumnRows]:
        """The records of Spark's Arrow batches: with the `topic` option and no headers column,
        each batch's columns as they are (encoded compiled, nothing made per row); otherwise one
        tuple per row (columns converted once per batch)."""
        for batch in batches:
            if self.topic and "headers" not in batch.schema.names and batch.num_rows:
                yield _column_rows(self.topic, batch)
                continue
            columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            n = batch.num_rows
            topics = [self.topic] * n if self.topic else columns["topic"]
            keys = columns.get("key") or [None] * n
            partitions = columns.get("partition") or [None] * n
            headers = columns.get("headers") or [None] * n
            for topic, partition, key, value, hs in zip(
                topics, partitions, keys, columns["value"], headers, strict=True
            ):
                if not topic:
                    raise ValueError("a row has a null topic and no topic option is set")
                yield topic, partition, _bytes(key), _bytes(value), [(h["key"], _bytes(h["value"])) for h in hs or ()]

    def _write(self, rows: Iterator, streaming: bool) -> SinkCommit:
        """One task's write; a streaming task's micro-batch number comes from Spark's local
        property (-1 for a batch query: no marker)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        batch = context.getLocalProperty(BATCH_ID) if streaming and context is not None else None
        batch_id = int(batch) if batch is not None else -1
        txn_id = f"{self.txn_prefix}-{task}" if self.txn_prefix else None
        result = write_records(self.settings, self._records(rows), txn_id, batch_id)
        return SinkCommit(task, result.written, result.skipped)


class MinikafkaWriter(_Sink, DataSourceArrowWriter):
    """Batch writes (`df.write.format("minikafka")`)."""

    def write(self, iterator: Iterator) -> SinkCommit:
        return self._write(iterator, streaming=False)

    def commit(self, messages: list) -> None:
        log.info("minikafka sink: %d records written", sum(m.written for m in messages if m))

    def abort(self, messages: list) -> None:
        done = [m for m in messages if m]
        if done and not self.txn_prefix:  # without transactions, finished tasks' rows stay written
            log.warning("minikafka sink: the job failed after %d tasks wrote their rows", len(done))


class MinikafkaStreamWriter(_Sink, DataSourceStreamArrowWriter):
    """Micro-batch writes (`df.writeStream.format("minikafka")`)."""

    def __init__(self, options: dict, schema: StructType, overwrite: bool):
        super().__init__(options, schema, overwrite)
        if not self.txn_prefix:
            log.warning(
                "minikafka sink: at-least-once (a restarted query may write its last micro-batch again); "
                "set kafka.transactional.id for exactly-once"
            )

    def write(self, iterator: Iterator) -> SinkCommit:
        return self._write(iterator, streaming=True)

    def commit(self, messages: list, batchId: int) -> None:
        written = sum(m.written for m in messages if m)
        skipped = sum(1 for m in messages if m and m.skipped)
        log.info("minikafka sink: batch %d: %d records written, %d tasks already committed", batchId, written, skipped)

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("minikafka sink: batch %d aborted after %d tasks finished", batchId, sum(1 for m in messages if m))


__all__ = ["MinikafkaWriter", "MinikafkaStreamWriter", "KafkaWriteError", "SinkCommit"]
