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
        assert e.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
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
                    assert e.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
                    await trio.sleep(0.2)
        assert conn.port == broker.port
        r = await conn.request(ApiKey.METADATA, {"topics": None}, version=12)
    (topic,) = [t for t in r.topics if t.name == "__consumer_offsets"]
    assert topic.is_internal and len(topic.partitions) == 50
    config = json.loads(zk.get("/config/topics/__consumer_offsets")[0])["config"]
    assert config["cleanup.policy"] == "compact" and config["segment.bytes"] == "1048576"
