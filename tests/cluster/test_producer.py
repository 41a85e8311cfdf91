"""Our producer (client/producer.py): partitioning, idempotence, ordering with 5 in flight."""

import random

import pytest
import trio
from replication_helpers import create_topic, log_bytes, partition_state, wait_for, wait_for_isr

from client import Cluster
from client.producer import Producer
from protocol import record_batch as rb
from protocol.errors import ErrorCode
from protocol.partitioner import murmur2, partition_for_key


def test_murmur2_matches_kafka_python():
    from kafka.partitioner.default import murmur2 as theirs

    rnd = random.Random(1)
    for n in list(range(12)) + [100, 1000]:
        data = rnd.randbytes(n)
        # the same 32 bits: Java's (and ours) signed, kafka-python's unsigned
        assert murmur2(data) & 0xFFFFFFFF == theirs(data) & 0xFFFFFFFF, n
    assert partition_for_key(b"key", 6) == (theirs(b"key") & 0x7FFFFFFF) % 6


def records_in(broker, topic, partition):
    data = log_bytes(broker, topic, partition)
    return [(r.key, r.value) for pos, h in rb.iter_batches(data) for r in rb.decode_records(data, pos, h)]


async def test_producer_survives_a_leader_kill_without_loss_duplicates_or_reordering(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "p", partitions=2, rf=3, configs={"min.insync.replicas": "2"})
    await wait_for_isr(zk, "p", [1, 2, 3], partitions=2)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    async with Cluster.open(bootstrap, retries=30) as cluster:
        async with Producer.open(cluster, max_in_flight=5, linger_ms=1, batch_size=512) as producer:
            deliveries = []
            for i in range(3000):
                key = b"key-%d" % (i % 10)
                deliveries.append(((key, b"%06d" % i), await producer.send("p", b"%06d" % i, key=key)))
                if i == 1200:
                    victim = brokers[partition_state(zk, "p", 0)["leader"]]
                    victim.kill()
                if i % 100 == 0:
                    await trio.sleep(0.01)
            await producer.flush()
    failed = [d.error for _, d in deliveries if d.error is not None]
    assert not failed, failed[:3]
    await wait_for(lambda: all(partition_state(zk, "p", p)["leader"] != victim.broker_id for p in (0, 1)))
    for p in (0, 1):
        leader = brokers[partition_state(zk, "p", p)["leader"]]
        got = records_in(leader, "p", p)
        expected = [(k, v) for (k, v), d in deliveries if d.metadata.partition == p]
        assert got == expected  # each once, in send order
        assert [d.metadata.offset for (_, _), d in deliveries if d.metadata.partition == p] == list(range(len(got)))
        for key in {k for k, _ in got}:
            assert partition_for_key(key, 2) == p


async def test_a_batch_failing_for_good_does_not_block_the_ones_after_it(start_broker, zk):
    broker = start_broker(1, message_max_bytes="3000")
    await create_topic({1: broker}, zk, "f", rf=1)
    await wait_for(lambda: partition_state(zk, "f", 0)["leader"] == 1)
    async with Cluster.open(broker.bootstrap) as cluster:
        async with Producer.open(cluster, linger_ms=0, batch_size=1) as producer:
            small1 = await producer.send("f", b"a", partition=0)
            await small1.wait()
            big = await producer.send("f", b"x" * 5000, partition=0)
            small2 = await producer.send("f", b"b", partition=0)
            await producer.flush()
    assert big.error is not None and big.error.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert (small1.metadata.offset, small2.metadata.offset) == (0, 1)  # accepted after the epoch bump
    assert [v for _, v in records_in(broker, "f", 0)] == [b"a", b"b"]


async def test_non_idempotent_mode(start_broker, zk):
    broker = start_broker(1)
    await create_topic({1: broker}, zk, "n", rf=1)
    await wait_for(lambda: partition_state(zk, "n", 0)["leader"] == 1)
    async with Cluster.open(broker.bootstrap) as cluster:
        async with Producer.open(cluster, idempotent=False, acks=1) as producer:
            d = [await producer.send("n", b"%d" % i, partition=0) for i in range(10)]
    assert [x.metadata.offset for x in d] == list(range(10))
    headers = [h for _, h in rb.iter_batches(log_bytes(broker, "n", 0))]
    assert all(h.producer_id == -1 for h in headers)
    with pytest.raises(ValueError):
        async with Producer.open(cluster, idempotent=True, acks=1):
            pass


async def test_batches_ready_at_once_share_one_produce_request_per_broker(start_broker, zk):
    """Kafka's sender drains every ready batch of a broker into one Produce request: 6 partitions
    x 40 batches go in far fewer requests than batches, and each partition's records still land
    once, in order."""
    broker = start_broker(1)
    await create_topic({1: broker}, zk, "many", partitions=6, rf=1)
    await wait_for(lambda: all(partition_state(zk, "many", p)["leader"] == 1 for p in range(6)))
    async with Cluster.open(broker.bootstrap) as cluster:
        async with Producer.open(cluster, max_in_flight=1, linger_ms=0, batch_size=200) as producer:
            sent = {p: [] for p in range(6)}
            for i in range(40 * 4):  # 4 records of ~50 bytes fill a 200-byte batch
                for p in range(6):
                    value = b"%d-%05d" % (p, i) + b"." * 40
                    sent[p].append((value, await producer.send("many", value, partition=p)))
            await producer.flush()
            requests = producer.requests.requests_sent
    batches = sum(len(list(rb.iter_batches(log_bytes(broker, "many", p)))) for p in range(6))
    assert batches >= 6 * 40
    assert requests <= batches / 3, (requests, batches)
    for p in range(6):
        assert [v for _, v in records_in(broker, "many", p)] == [v for v, _ in sent[p]]
        assert [d.metadata.offset for _, d in sent[p]] == list(range(len(sent[p])))
