"""The source options Spark users expect of Spark's Kafka source, with real Spark (local[2])
against a real broker: timestamps, assign, maxOffsetsPerTrigger, minOffsetsPerTrigger with
maxTriggerDelay, failOnDataLoss after DeleteRecords, includeHeaders, and the errors of bad values."""

import json

import pytest
import trio
from group_helpers import create_topics
from spark_helpers import minikafka_stream, run_available_now

from client import Cluster
from client.admin import delete_records
from client.producer import Producer

pytestmark = pytest.mark.slow

pyspark = pytest.importorskip("pyspark", reason="make setup installs the spark extra")

T0 = 1_700_000_000_000  # record i of a partition has timestamp T0 + 1000 * i


async def fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async with Cluster.open(bootstrap) as cluster:
        async with Producer.open(cluster) as producer:
            for p in range(partitions):
                for i in range(per_partition):
                    await producer.send(
                        topic,
                        b"%d-%d" % (p, i),
                        partition=p,
                        timestamp_ms=T0 + 1000 * i,
                        headers=[("n", b"%d" % i)],
                    )


def reader(spark, bootstrap: str, **options):
    r = spark.read.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


async def test_timestamps_assign_headers_and_data_loss(spark, start_broker):
    broker = start_broker(1)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"ts": 2, "other": 1})
    await fill(broker.bootstrap, "ts", 2, 20)
    await fill(broker.bootstrap, "other", 1, 5)

    def offsets(**options) -> list[tuple[int, int]]:
        rows = reader(spark, broker.bootstrap, **options).load().collect()
        return sorted((r.partition, r.offset) for r in rows)

    def run():
        both = [(p, o) for p in (0, 1) for o in range(5, 10)]
        assert offsets(subscribe="ts", startingTimestamp=str(T0 + 5000), endingTimestamp=str(T0 + 10_000)) == both
        by_ts = json.dumps({"ts": {"0": T0 + 15_000, "1": T0 + 18_500}})
        assert offsets(subscribe="ts", startingOffsetsByTimestamp=by_ts) == [(0, o) for o in range(15, 20)] + [(1, 19)]
        ending = json.dumps({"ts": {"0": T0 + 2000, "1": T0 + 99_000}})  # no match: the latest offset
        assert offsets(subscribe="ts", endingOffsetsByTimestamp=ending) == [(0, 0), (0, 1)] + [
            (1, o) for o in range(20)
        ]
        with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
            offsets(subscribe="ts", startingTimestamp=str(T0 + 99_000))
        assert (
            offsets(subscribe="ts", startingTimestamp=str(T0 + 99_000), startingOffsetsByTimestampStrategy="latest")
            == []
        )
        # assign: only the partitions named, across topics
        rows = reader(spark, broker.bootstrap, assign=json.dumps({"ts": [1], "other": [0]})).load().collect()
        assert sorted({(r.topic, r.partition) for r in rows}) == [("other", 0), ("ts", 1)] and len(rows) == 25
        # includeHeaders: the headers column as Spark's
        (row,) = (
            reader(spark, broker.bootstrap, subscribe="other", includeHeaders="true", endingOffsets='{"other":{"0":1}}')
            .load()
            .collect()
        )
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("n", b"0")]
        assert row.timestamp.timestamp() * 1000 == T0

    await trio.to_thread.run_sync(run)

    # DeleteRecords below a requested offset: failOnDataLoss fails the query, false skips the gap
    async with Cluster.open(broker.bootstrap) as cluster:
        await delete_records(cluster, {("ts", 0): 12})

    def after_delete():
        explicit = '{"ts":{"0":3,"1":-2}}'
        with pytest.raises(Exception, match=r"offsets \[3, 12\) of ts-0 are no longer in Kafka"):
            offsets(subscribe="ts", startingOffsets=explicit)
        kept = offsets(subscribe="ts", startingOffsets=explicit, failOnDataLoss="false")
        assert kept == [(0, o) for o in range(12, 20)] + [(1, o) for o in range(20)]

    await trio.to_thread.run_sync(after_delete)


def test_bad_option_values_are_named(spark):
    cases = [
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of the options assign"),
        ({}, "exactly one of the options assign"),
        ({"assign": "[0,1]"}, "assign must be JSON"),
        ({"subscribe": "a", "startingOffsets": "soon"}, "startingOffsets must be JSON"),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp must be an integer"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
        ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "oldest"}, "startingOffsetsByTimestampStrategy"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be at least 1"),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
    ]
    for options, message in cases:
        with pytest.raises(Exception, match=message):
            reader(spark, "127.0.0.1:1", **options).load().collect()


async def test_trigger_limits(spark, start_broker, tmp_path):
    from spark_connector.source import MinikafkaStreamReader, rate_limited
    from spark_connector.source_options import SourceOptions

    broker = start_broker(1)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"rate": 2})
    await fill(broker.bootstrap, "rate", 2, 50)
    assert rate_limited({"a-0": 0, "b-0": 0}, {"a-0": 90, "b-0": 10}, 20) == {"a-0": 18, "b-0": 2}
    assert rate_limited({"a-0": 0, "b-0": 0}, {"a-0": 1000, "b-0": 1}, 10) == {
        "a-0": 9,
        "b-0": 1,
    }  # a share < 1 rounds up

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def stream():
        df = minikafka_stream(spark, broker.bootstrap, "rate", ["partition", "offset"], maxOffsetsPerTrigger="30")
        query = run_available_now(spark, df, "parquet", checkpoint, path=out)
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    batches = await trio.to_thread.run_sync(stream)
    assert batches == [30, 30, 30, 10]  # 100 records, at most 30 per micro-batch
    rows = await trio.to_thread.run_sync(lambda: spark.read.parquet(out).collect())
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in (0, 1) for o in range(50)]

    # minOffsetsPerTrigger: no batch until that many records are new, unless maxTriggerDelay passed
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": "rate",
        "minOffsetsPerTrigger": "10",
        "maxTriggerDelay": "2s",
    }
    src = MinikafkaStreamReader(SourceOptions(options, streaming=True))
    start = await trio.to_thread.run_sync(src.initialOffset)
    assert start == {"rate-0": 50, "rate-1": 50}  # a stream starts at latest, as Spark's
    limit = src.getDefaultReadLimit()
    await fill(broker.bootstrap, "rate", 1, 5)
    assert await trio.to_thread.run_sync(src.latestOffset, start, limit) == start  # 5 < 10: wait
    await trio.sleep(2.1)
    assert await trio.to_thread.run_sync(src.latestOffset, start, limit) == {"rate-0": 55, "rate-1": 50}
