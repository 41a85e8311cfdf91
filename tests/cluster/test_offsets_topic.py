"""`__consumer_offsets` on real brokers: created on the first FindCoordinator with Kafka's settings
(offsets.topic.num.partitions, cleanup.policy=compact, offsets.topic.segment.bytes), marked internal
in Metadata; refused (COORDINATOR_NOT_AVAILABLE, nothing created) while fewer brokers are alive than
offsets.topic.replication.factor."""

import json

import pytest
import trio

from client import Cluster, KafkaError
from client.groups import coordinator_connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow


async def find(bootstrap):
    async with Cluster.open(bootstrap, retries=0) as cluster:
        return await coordinator_connection(cluster, "g")


async def test_too_few_brokers_for_the_replication_factor(start_broker, zk):
    broker = start_broker(1)  # offsets.topic.replication.factor defaults to 3
    for _ in range(3):
        with pytest.raises(KafkaError) as e:
            await find(broker.bootstrap)
        assert e.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        await trio.sleep(0.3)
    assert zk.exists("/brokers/topics/__consumer_offsets") is None


async def test_created_on_first_need_internal_and_compacted(start_broker, zk):
    broker = start_broker(1, offsets_topic_replication_factor=1, offsets_topic_segment_bytes=1048576)
    async with Cluster.open(broker.bootstrap, retries=0) as cluster:
        with trio.fail_after(30):
            while True:
                try:
                    conn = await coordinator_connection(cluster, "g")
                    break
                except KafkaError as e:
                    assert e.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
                    await trio.sleep(0.2)
        assert conn.port == broker.port
        r = await conn.request(ApiKey.METADATA, {"topics": None}, version=12)
    (topic,) = [t for t in r.topics if t.name == "__consumer_offsets"]
    assert topic.is_internal and len(topic.partitions) == 50
    config = json.loads(zk.get("/config/topics/__consumer_offsets")[0])["config"]
    assert config["cleanup.policy"] == "compact" and config["segment.bytes"] == "1048576"


async def test_consumer_offsets_is_compacted_and_reloads_the_latest_commits(start_broker, zk):
    from group_helpers import create_topics

    from client.groups import commit_offsets, committed_offsets
    from storage.cleaner.manager import CLEANER_CHECKPOINT

    settings = dict(
        offsets_topic_replication_factor=1,
        offsets_topic_num_partitions=1,
        offsets_topic_segment_bytes=65536,
        group_initial_rebalance_delay_ms=0,
        log_cleaner_backoff_ms=200,
    )
    broker = start_broker(1, **settings)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"t": 100})
    offsets_dir = broker.directory / "logs" / "__consumer_offsets-0"
    async with Cluster.open(broker.bootstrap) as cluster:
        for i in range(1_000):  # 100,000 offset commits, 100 per request (100 distinct keys)
            await commit_offsets(cluster, "g", {("t", p): i * 100 + p for p in range(100)})
    written = 100_000 * 60  # bytes: an offset record is about 60 bytes (key + value) at least

    def on_disk() -> int:
        total = 0
        for segment in offsets_dir.glob("*.log"):
            try:
                total += segment.stat().st_size
            except FileNotFoundError:  # the cleaner replaced or deleted it since the listing
                pass
        return total

    with trio.fail_after(60):
        while on_disk() > written / 10:
            await trio.sleep(0.2)
    assert (
        (broker.directory / "logs" / CLEANER_CHECKPOINT).read_text().splitlines()[2].startswith("__consumer_offsets 0 ")
    )
    # a coordinator that loads the compacted partition returns the latest commits
    broker.kill()
    broker.start()
    async with Cluster.open(broker.bootstrap) as cluster:
        with trio.fail_after(30):
            while True:
                try:
                    got = await committed_offsets(cluster, "g")
                    break
                except KafkaError as e:
                    assert e.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    await trio.sleep(0.2)
    assert got == {("t", p): 99_900 + p for p in range(100)}
