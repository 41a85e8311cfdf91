"""Fetch from followers (KIP-392) judged by confluent-kafka: with `broker.rack` on every broker and
the rack-aware `replica.selector.class`, a consumer with `client.rack` reads from the replica in its
rack (the leader sends it there with `preferred_read_replica`, the follower serves it up to its
HW), a consumer without a rack reads from the leader, and the brokers' own metrics (consumer bytes
out per topic) show which replica served whom."""

import time

import pytest
import trio
from replication_helpers import create_topic, partition_state, wait_for
from test_metrics import scrape, value

from client import Cluster
from client.producer import Producer

pytestmark = pytest.mark.slow

RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def consume(bootstrap: str, topic: str, expected: int, rack: str | None) -> list[bytes]:
    from confluent_kafka import Consumer

    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": f"ffr-{rack}-{time.monotonic_ns()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if rack:
        settings["client.rack"] = rack
    consumer = Consumer(settings)
    consumer.subscribe([topic])
    out, deadline = [], time.monotonic() + 60
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def bytes_out(broker, topic: str) -> float:
    return value(scrape(broker), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)


async def test_a_consumer_reads_from_the_replica_in_its_rack(start_broker, zk):
    settings = {
        "metrics_port": 0,
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        "offsets_topic_replication_factor": 1,
        "group_initial_rebalance_delay_ms": 0,
    }
    brokers = {i: start_broker(i, broker_rack=RACKS[i], **settings) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "near", partitions=1, rf=3)
    await wait_for(lambda: len(partition_state(zk, "near", 0)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    values = [b"v%04d" % i for i in range(500)]
    async with Cluster.open(bootstrap) as cluster:
        async with Producer.open(cluster) as producer:
            for v in values:
                await producer.send("near", v, partition=0)
    leader_id = partition_state(zk, "near", 0)["leader"]
    follower_id = next(i for i in (1, 2, 3) if i != leader_id)
    leader, follower = brokers[leader_id], brokers[follower_id]

    got = await trio.to_thread.run_sync(consume, bootstrap, "near", 500, RACKS[follower_id])
    assert got == values
    # the follower served the records; the leader only pointed the consumer there
    assert await trio.to_thread.run_sync(bytes_out, follower, "near") >= sum(map(len, values))
    assert await trio.to_thread.run_sync(bytes_out, leader, "near") == 0

    # no rack, or the leader's rack: the leader serves, the follower's count does not move
    served_by_follower = await trio.to_thread.run_sync(bytes_out, follower, "near")
    for rack in (None, RACKS[leader_id]):
        assert await trio.to_thread.run_sync(consume, bootstrap, "near", 500, rack) == values
    assert await trio.to_thread.run_sync(bytes_out, leader, "near") >= 2 * sum(map(len, values))
    assert await trio.to_thread.run_sync(bytes_out, follower, "near") == served_by_follower


def test_an_unknown_replica_selector_stops_the_broker_with_the_key_named(start_broker):
    from local_cluster.brokers import BrokerStartError

    with pytest.raises(BrokerStartError, match="replica.selector.class"):
        start_broker(1, **{"replica.selector.class": "com.example.MySelector"})
