"""The `minikafka` PySpark data source with real Spark (local[2]) against a real 3-broker cluster."""

import pytest
import trio
from replication_helpers import create_topic, partition_state, wait_for
from spark_helpers import minikafka_stream, run_available_now

from client import Cluster
from client.producer import Producer

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

pyspark = pytest.importorskip("pyspark", reason="make setup installs the spark extra")


async def produce(bootstrap, topic, values, key_of=lambda v: v[:2]):
    async with Cluster.open(bootstrap) as cluster:
        async with Producer.open(cluster) as producer:
            deliveries = [await producer.send(topic, v, key=key_of(v)) for v in values]
    return [(d.metadata.partition, d.metadata.offset) for d in deliveries]


async def test_batch_reads_committed_data_exactly_once(spark, start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "s", partitions=3, rf=3)
    for p in range(3):
        await wait_for(lambda p=p: len(partition_state(zk, "s", p)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    values = [b"%02d-%05d" % (i % 7, i) for i in range(900)]
    placed = await produce(bootstrap, "s", values)

    def read(**options):
        reader = spark.read.format("minikafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "s")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    df = await trio.to_thread.run_sync(lambda: read(startingOffsets="earliest", maxOffsetsPerPartitionSplit="100"))
    rows = await trio.to_thread.run_sync(df.collect)
    assert sorted(r.value for r in rows) == sorted(values)
    assert sorted((r.partition, r.offset) for r in rows) == sorted(placed)
    assert {r.topic for r in rows} == {"s"} and all(r.timestampType == 0 for r in rows)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    with_headers = await trio.to_thread.run_sync(lambda: read(includeHeaders="true"))
    assert with_headers.columns == df.columns + ["headers"]  # only when asked, as Spark's Kafka source
    # the option names, and a topic pattern
    by_pattern = await trio.to_thread.run_sync(
        lambda: (
            spark.read.format("minikafka")
            .option("bootstrap.servers", bootstrap)
            .option("topicPattern", "s|nomatch")
            .option("startingOffsets", "earliest")
            .load()
            .count()
        )
    )
    assert by_pattern == 900
    # explicit offsets, as Spark's Kafka source takes them
    some = await trio.to_thread.run_sync(
        lambda: read(
            startingOffsets='{"s":{"0":5,"1":-2,"2":-1}}', endingOffsets='{"s":{"0":10,"1":3,"2":-1}}'
        ).collect()
    )
    assert sorted((r.partition, r.offset) for r in some) == [(0, o) for o in range(5, 10)] + [(1, 0), (1, 1), (1, 2)]


async def test_latest_is_the_high_watermark_at_planning_and_a_leader_change_is_survived(start_broker, zk):
    from spark_connector.source import MinikafkaBatchReader
    from spark_connector.source_options import SourceOptions

    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "l", partitions=1, rf=3)
    await wait_for(lambda: len(partition_state(zk, "l", 0)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    await produce(bootstrap, "l", [b"a%d" % i for i in range(100)])
    reader = MinikafkaBatchReader(
        SourceOptions({"kafka.bootstrap.servers": bootstrap, "subscribe": "l", "startingOffsets": "earliest"})
    )
    (planned,) = await trio.to_thread.run_sync(reader.partitions)
    assert (planned.start, planned.end) == (0, 100)
    await produce(bootstrap, "l", [b"b%d" % i for i in range(50)])  # the log grows after planning
    brokers[partition_state(zk, "l", 0)["leader"]].kill()  # and its leader dies
    batches = await trio.to_thread.run_sync(lambda: list(reader.read(planned)))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"a%d" % i for i in range(100)]


async def test_streaming_continues_exactly_where_it_stopped(spark, start_broker, zk, tmp_path):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "st", partitions=2, rf=3)
    for p in range(2):
        await wait_for(lambda p=p: len(partition_state(zk, "st", p)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_stream():
        stream = minikafka_stream(spark, bootstrap, "st", ["CAST(value AS STRING) AS value", "partition", "offset"])
        run_available_now(spark, stream, "parquet", checkpoint, path=out)

    await produce(bootstrap, "st", [b"%d" % i for i in range(200)], key_of=lambda v: v)
    await trio.to_thread.run_sync(run_stream)
    await produce(bootstrap, "st", [b"%d" % i for i in range(200, 350)], key_of=lambda v: v)
    await trio.to_thread.run_sync(run_stream)  # restart from the checkpoint
    rows = await trio.to_thread.run_sync(lambda: spark.read.parquet(out).collect())
    assert sorted(int(r.value) for r in rows) == list(range(350))  # each exactly once


async def test_a_compacted_topic_is_read_across_its_gaps(spark, start_broker, zk):
    from test_compaction_cluster import replica_records

    brokers = {i: start_broker(i, log_cleaner_backoff_ms=200) for i in (1, 2, 3)}
    configs = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}
    await create_topic(brokers, zk, "cpt", partitions=1, rf=3, configs=configs)
    await wait_for(lambda: len(partition_state(zk, "cpt", 0)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    values = [b"%02d-%05d" % (i % 50, i) for i in range(5000)]
    await produce(bootstrap, "cpt", values)
    leader = brokers[partition_state(zk, "cpt", 0)["leader"]]
    await wait_for(lambda: len(replica_records(leader, "cpt")) < 2500, timeout_s=60)

    def read(**options):
        reader = spark.read.format("minikafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "cpt")
        for k, v in {"startingOffsets": "earliest", **options}.items():
            reader = reader.option(k, v)
        return reader.load().collect()

    # compaction removed offsets the query asked for: Spark's Kafka source calls that data loss
    with pytest.raises(Exception, match="failOnDataLoss"):
        await trio.to_thread.run_sync(read)
    rows = await trio.to_thread.run_sync(lambda: read(failOnDataLoss="false"))
    offsets = [r.offset for r in sorted(rows, key=lambda r: r.offset)]
    assert offsets == sorted(set(offsets)) and len(offsets) < 2500 and offsets[-1] == 4999
    latest = {}
    for r in sorted(rows, key=lambda r: r.offset):
        latest[bytes(r.key)] = bytes(r.value)
    assert latest == {b"%02d" % k: b"%02d-%05d" % (k, 4950 + k) for k in range(50)}


def test_isolation_levels_with_transactions(spark, start_broker, tmp_path):
    """kafka.isolation.level: read_committed reads up to the LSO without aborted records (batch and
    streaming); read_uncommitted reads everything but the markers."""
    from confluent_kafka import Producer
    from group_helpers import create_topics
    from txn_helpers import TIMEOUT, TXN_BROKER

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"tx": 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-tx"})
    producer.init_transactions(TIMEOUT)
    for name, commit in (("c", True), ("a", False), ("open", None)):
        producer.begin_transaction()
        for i in range(5):
            producer.produce("tx", value=b"%s%d" % (name.encode(), i))
        assert producer.flush(TIMEOUT) == 0
        if commit is True:
            producer.commit_transaction(TIMEOUT)
        elif commit is False:
            producer.abort_transaction(TIMEOUT)

    def values(isolation: str | None) -> list[str]:
        reader = spark.read.format("minikafka").option("kafka.bootstrap.servers", broker.bootstrap)
        reader = reader.option("subscribe", "tx")
        if isolation:
            reader = reader.option("kafka.isolation.level", isolation)
        return sorted(r.value.decode() for r in reader.load().collect())

    committed = [f"c{i}" for i in range(5)]
    assert values("read_committed") == committed  # the open transaction holds the LSO back
    assert values(None) == sorted(committed + [f"a{i}" for i in range(5)] + [f"open{i}" for i in range(5)])
    with pytest.raises(Exception, match="kafka.isolation.level"):
        values("snapshot")

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_stream():
        columns = ["CAST(value AS STRING) AS value"]
        stream = minikafka_stream(spark, broker.bootstrap, "tx", columns, **{"kafka.isolation.level": "read_committed"})
        run_available_now(spark, stream, "parquet", checkpoint, path=out)

    run_stream()
    assert sorted(r.value for r in spark.read.parquet(out).collect()) == committed
    producer.commit_transaction(TIMEOUT)
    run_stream()
    assert sorted(r.value for r in spark.read.parquet(out).collect()) == sorted(
        committed + [f"open{i}" for i in range(5)]
    )
