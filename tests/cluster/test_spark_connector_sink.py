"""The `minikafka` Spark sink with real Spark (local[2]) against a real cluster, judged by
confluent-kafka's consumer: batch writes with Spark's Kafka sink schema and options, its errors,
and streaming writes restarted from a checkpoint whose last micro-batch must be run again
(at-least-once without transactions, once with `kafka.transactional.id`)."""

import os
from pathlib import Path

import pytest
import trio
from group_helpers import create_topics
from spark_helpers import minikafka_stream, run_available_now
from txn_helpers import TXN_BROKER, consume_all

pytestmark = pytest.mark.slow

pyspark = pytest.importorskip("pyspark", reason="make setup installs the spark extra")


def consume_records(bootstrap: str, topic: str, expected: int) -> list:
    """(partition, key, value, headers) of every record confluent-kafka reads (read_committed)."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}"})
    parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    out, deadline = [], time.monotonic() + 60
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            out.append((msg.partition(), msg.key(), msg.value(), msg.headers() or []))
    consumer.close()
    return out


async def test_batch_write_with_the_kafka_sink_schema(spark, start_broker):
    from pyspark.sql import Row

    broker = start_broker(1, **TXN_BROKER)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"sink": 3, "sink-b": 1})
    rows = [
        Row(key=f"k{i}", value=f"v{i}", partition=i % 3, headers=[Row(key="h", value=b"%d" % i)]) for i in range(300)
    ]

    def write():
        df = spark.createDataFrame(
            rows, "key string, value string, partition int, headers array<struct<key: string, value: binary>>"
        )
        (
            df.write.format("minikafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "sink")
            .option("kafka.compression.type", "zstd")
            .mode("append")
            .save()
        )
        # no topic option: each row's topic column; binary values; a null value is a tombstone
        spark.createDataFrame(
            [("sink-b", b"\x00\x01", b"bin"), ("sink-b", b"gone", None)], "topic string, key binary, value binary"
        ).write.format("minikafka").option("bootstrap.servers", broker.bootstrap).option("kafka.acks", "1").mode(
            "append"
        ).save()

    await trio.to_thread.run_sync(write)
    got = await trio.to_thread.run_sync(consume_records, broker.bootstrap, "sink", 300)
    assert sorted(got) == sorted((i % 3, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(300))
    other = await trio.to_thread.run_sync(consume_records, broker.bootstrap, "sink-b", 2)
    assert sorted((k, v) for _, k, v, _ in other) == [(b"\x00\x01", b"bin"), (b"gone", None)]


async def test_columns_without_headers_are_partitioned_as_kafka_does_and_written_in_order(spark, start_broker):
    """The compiled path (topic option, no headers column): an explicit partition wins, a key
    goes where Kafka's default partitioner puts it (judged by confluent-kafka's own murmur2
    partitioner), null keys are spread, values and nulls arrive intact, and each partition holds
    its rows in the DataFrame's order; also transactionally."""
    from confluent_kafka import Producer

    broker = start_broker(1, **TXN_BROKER)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"cols": 4, "cols-txn": 4})
    rows = [
        (f"k{i}" if i % 4 else None, None if i % 7 == 0 and i % 4 else f"v{i:05d}", 3 if i % 10 == 0 else None)
        for i in range(5000)
    ]

    def write(topic, **extra):
        writer = (
            spark.createDataFrame(rows, "key string, value string, partition int")
            .coalesce(1)
            .write.format("minikafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .option("kafka.batch.size", "2000")
        )
        for k, v in extra.items():
            writer = writer.option(k, v)
        writer.mode("append").save()

    def murmur2_partitions(keys):
        placed = {}
        producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
        for key in keys:
            producer.produce(
                "cols-probe", b"", key.encode(), on_delivery=lambda e, m: placed.setdefault(m.key(), m.partition())
            )
        producer.flush(30)
        return placed

    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"cols-probe": 4})
    for topic, extra in (("cols", {}), ("cols-txn", {"kafka.transactional.id": "cols"})):
        await trio.to_thread.run_sync(lambda: write(topic, **extra))
        got = await trio.to_thread.run_sync(consume_records, broker.bootstrap, topic, len(rows))
        assert len(got) == len(rows)
        keyed = {k for k, _, p in rows if k is not None and p is None}
        expected_partition = await trio.to_thread.run_sync(murmur2_partitions, sorted(keyed))
        by_partition: dict = {}
        for partition, key, value, headers in got:
            by_partition.setdefault(partition, []).append((key, value))
            assert headers == []
        order = {(k.encode() if k else None, v.encode() if v else None): i for i, (k, v, _) in enumerate(rows)}
        for records in by_partition.values():
            assert [order[r] for r in records] == sorted(order[r] for r in records)  # in order
        where = {r: p for p, rs in by_partition.items() for r in rs}
        for key, value, explicit in rows:
            partition = where[(key.encode() if key else None, value.encode() if value else None)]
            if explicit is not None:
                assert partition == explicit
            elif key is not None:
                assert partition == expected_partition[key.encode()]
        null_keys = {p for p, rs in by_partition.items() for k, _ in rs if k is None}
        assert len(null_keys) > 1  # sticky, but moving on


def test_the_sink_refuses_what_spark_kafka_refuses(spark):
    def save(df, mode="append", **options):
        writer = df.write.format("minikafka").option("kafka.bootstrap.servers", "127.0.0.1:1").mode(mode)
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    good = spark.createDataFrame([("a",)], "value string")
    cases = [
        (good, {"mode": "overwrite", "topic": "t"}, "overwrite is not allowed"),
        (good, {}, "topic option required"),
        (good, {"mode": "errorifexists", "topic": "t"}, "ErrorIfExists"),  # Spark refuses it for Python sources
        (spark.createDataFrame([(1,)], "value int"), {"topic": "t"}, "'value' must be binary or string"),
        (spark.createDataFrame([("a", 1)], "value string, extra int"), {"topic": "t"}, "'extra' is not one of"),
        (spark.createDataFrame([("k",)], "key string"), {"topic": "t"}, "needs a 'value' column"),
        (good, {"topic": "t", "kafka.acks": "2"}, "kafka.acks must be"),
        (good, {"topic": "t", "kafka.compression.type": "brotli"}, "kafka.compression.type must be"),
    ]
    for df, options, message in cases:
        mode = options.pop("mode", "append")
        with pytest.raises(Exception, match=message):
            save(df, mode, **options)


def _stream_copy(spark, bootstrap: str, checkpoint: Path, **options) -> None:
    stream = minikafka_stream(spark, bootstrap, "src", ["key", "value"])
    run_available_now(spark, stream, "minikafka", str(checkpoint), **{"kafka.bootstrap.servers": bootstrap, **options})


def _forget_last_commit(checkpoint: Path) -> None:
    """Make the restart run the last micro-batch again: as a driver that died after the sink wrote
    the batch and before Spark's commit log recorded it."""
    commits = sorted((p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    os.remove(commits[-1])
    os.remove(commits[-1].with_name(f".{commits[-1].name}.crc"))  # Hadoop's checksum beside it


async def _produce(bootstrap: str, first: int, count: int) -> None:
    from client import Cluster
    from client.producer import Producer

    async with Cluster.open(bootstrap) as cluster:
        async with Producer.open(cluster) as producer:
            for i in range(first, first + count):
                await producer.send("src", b"%d" % i, key=b"%d" % i)


async def _rerun_last_batch(spark, bootstrap: str, checkpoint: Path, topic: str, **options) -> None:
    """A streaming copy of `src` into `topic`, its last micro-batch forgotten and run again."""
    await trio.to_thread.run_sync(lambda: _stream_copy(spark, bootstrap, checkpoint, topic=topic, **options))
    _forget_last_commit(checkpoint)
    await trio.to_thread.run_sync(lambda: _stream_copy(spark, bootstrap, checkpoint, topic=topic, **options))


async def test_streaming_writes_each_record_once_with_transactions(spark, start_broker, tmp_path):
    broker = start_broker(1, **TXN_BROKER)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"src": 2, "eos": 2})
    await _produce(broker.bootstrap, 0, 200)
    options = {"kafka.transactional.id": "copy-eos"}
    await _rerun_last_batch(spark, broker.bootstrap, tmp_path / "eos", "eos", **options)
    await _produce(broker.bootstrap, 200, 100)
    await trio.to_thread.run_sync(
        lambda: _stream_copy(spark, broker.bootstrap, tmp_path / "eos", topic="eos", **options)
    )
    eos = await trio.to_thread.run_sync(lambda: consume_all(broker.bootstrap, "eos", "read_committed", 300))
    assert sorted(int(v) for _, v in eos) == list(range(300))  # each once, across the re-run batch


async def test_streaming_writes_at_least_once_without_transactions(spark, start_broker, tmp_path):
    broker = start_broker(1, **TXN_BROKER)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"src": 2, "alo": 2})
    await _produce(broker.bootstrap, 0, 200)
    await _rerun_last_batch(spark, broker.bootstrap, tmp_path / "alo", "alo")
    alo = await trio.to_thread.run_sync(lambda: consume_all(broker.bootstrap, "alo", "read_committed", 400))
    assert sorted(int(v) for _, v in alo) == sorted(list(range(200)) * 2)  # the re-run batch again
