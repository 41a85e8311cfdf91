"""Replication with real processes: followers, ISR, high watermark, acks=all (RF 3)."""

import trio

from protocol import record_batch as rb
from protocol.errors import ErrorCode
from replication_helpers import create_topic, log_bytes, partition_state, wait_for

LAG_MS = "1500"


def start_three(start_broker, **overrides):
    return {i: start_broker(i, replica_lag_time_max_ms=LAG_MS, **overrides) for i in (1, 2, 3)}


def _produce_acks_all(bootstrap, topic, n):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=2,
                             retries=10, request_timeout_ms=30000)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=0) for i in range(n)]
    offsets = [f.get(timeout=60).offset for f in futures]
    producer.close()
    return offsets


async def test_steady_state_replicas_are_byte_identical_and_hw_reaches_leo(start_broker, zk):
    brokers = start_three(start_broker)
    await create_topic(brokers, zk, "r", partitions=1, rf=3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    offsets = await trio.to_thread.run_sync(_produce_acks_all, bootstrap, "r", 500)
    assert offsets == list(range(500))
    # every replica ends with the same bytes, and after quiescence each checkpoints HW == LEO on a clean stop
    await wait_for(lambda: len({log_bytes(b, "r", 0) for b in brokers.values()}) == 1, timeout_s=10)
    await trio.sleep(1.0)
    assert len(log_bytes(brokers[1], "r", 0)) > 500 * 20
    assert sorted(partition_state(zk, "r", 0)["isr"]) == [1, 2, 3]
    for b in brokers.values():
        assert await trio.to_thread.run_sync(b.stop) == 0
        text = (b.directory / "logs" / "replication-offset-checkpoint").read_text()
        assert "r 0 500" in text, (b.broker_id, text)
