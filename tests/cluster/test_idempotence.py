"""Idempotent producers against real broker processes."""

import collections

import trio
from replication_helpers import create_topic, log_bytes, partition_state, wait_for, wait_for_isr

from client.connection import Connection
from protocol import record_batch as rb
from protocol.errors import ErrorCode


def values_in_log(broker, topic, partition):
    data = log_bytes(broker, topic, partition)
    return [r.value for pos, h in rb.iter_batches(data) for r in rb.decode_records(data, pos, h)]


def _kafka_python_default(bootstrap, topic, n):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)  # idempotent and acks=all by default in 3.x
    futures = [producer.send(topic, value=b"kp-%d" % i, partition=0) for i in range(n)]
    offsets = [f.get(timeout=60).offset for f in futures]
    producer.close()
    return offsets


def _confluent_idempotent(bootstrap, topic, n):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i in range(n):
        producer.produce(topic, value=b"ck-%d" % i, partition=0)
    assert producer.flush(60) == 0


async def test_real_idempotent_producers_write_exactly_once_in_order(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "i", rf=3)
    await wait_for_isr(zk, "i", [1, 2, 3])
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    offsets = await trio.to_thread.run_sync(_kafka_python_default, bootstrap, "i", 300)
    assert offsets == list(range(300))
    await trio.to_thread.run_sync(_confluent_idempotent, bootstrap, "i", 300)
    leader = brokers[partition_state(zk, "i", 0)["leader"]]
    got = values_in_log(leader, "i", 0)
    assert got == [b"kp-%d" % i for i in range(300)] + [b"ck-%d" % i for i in range(300)]
    producer_ids = {h.producer_id for _, h in rb.iter_batches(log_bytes(leader, "i", 0))}
    assert len(producer_ids) == 2 and min(producer_ids) >= 0


async def test_a_broker_restarted_after_kill_9_still_deduplicates(start_broker, zk):
    broker = start_broker(1)
    await create_topic({1: broker}, zk, "d", rf=1)
    await wait_for(lambda: partition_state(zk, "d", 0)["leader"] == 1)
    async with Connection.open(broker.host, broker.port) as conn:
        init = await conn.request(22, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert init.error_code == ErrorCode.NONE
        batch = rb.build_batch(
            [(None, b"once")], producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0
        )
        body = {
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "d", "partition_data": [{"index": 0, "records": batch}]}],
        }
        first = (await conn.request(0, body)).responses[0].partition_responses[0]
    broker.kill()
    await trio.to_thread.run_sync(broker.start)
    await wait_for(lambda: "recovering" in broker.log_tail(100000))
    with trio.fail_after(20):
        while True:
            async with Connection.open(broker.host, broker.port) as conn:
                retry = (await conn.request(0, body)).responses[0].partition_responses[0]
            if retry.error_code == ErrorCode.NONE:
                break
            await trio.sleep(0.2)  # until the controller has made it leader again
    assert retry.base_offset == first.base_offset == 0
    assert values_in_log(broker, "d", 0) == [b"once"]


def _idempotent_writer(bootstrap, topic, name, n, history):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        max_in_flight_requests_per_connection=5,
        linger_ms=1,
        retries=1000,
        retry_backoff_ms=200,
        request_timeout_ms=5000,
        delivery_timeout_ms=120000,
        metadata_max_age_ms=1000,
    )
    futures = []
    for i in range(n):
        value = f"{name}-{i:05d}".encode()
        history.append(("send", name, i))
        futures.append((i, producer.send(topic, value=value, partition=i % 2)))
    for i, f in futures:
        try:
            f.get(timeout=150)
            history.append(("ack", name, i))
        except Exception as e:
            history.append(("fail", name, i, repr(e)))
    producer.close()


async def test_repeated_leader_kills_neither_lose_nor_duplicate_nor_reorder(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "h", partitions=2, rf=3, configs={"min.insync.replicas": "2"})
    await wait_for_isr(zk, "h", [1, 2, 3], partitions=2)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    history: list = []
    async with trio.open_nursery() as nursery:
        for name in ("a", "b"):
            nursery.start_soon(trio.to_thread.run_sync, _idempotent_writer, bootstrap, "h", name, 1200, history)
        for round_no in range(2):
            await wait_for(lambda: sum(1 for e in history if e[0] == "ack") >= 400 * (round_no + 1), timeout_s=120)
            victim = brokers[partition_state(zk, "h", round_no % 2)["leader"]]
            victim.kill()
            await trio.sleep(1.0)
            await trio.to_thread.run_sync(victim.start)
            await wait_for(
                lambda: all(sorted(partition_state(zk, "h", p)["isr"]) == [1, 2, 3] for p in (0, 1)), timeout_s=60
            )
    acked = {(e[1], e[2]) for e in history if e[0] == "ack"}
    assert len(acked) > 2000, collections.Counter(e[0] for e in history)
    await trio.sleep(1.0)
    for p in (0, 1):
        leader = brokers[partition_state(zk, "h", p)["leader"]]
        values = [v.decode() for v in values_in_log(leader, "h", p)]
        assert len(values) == len(set(values)), "a record was written twice"
        for name in ("a", "b"):
            sent = [int(v.split("-")[1]) for v in values if v.startswith(name + "-")]
            assert sent == sorted(sent), f"{name}: partition {p} is not in send order"
            missing = [i for i in range(p, 1200, 2) if (name, i) in acked and i not in set(sent)]
            assert not missing, f"acknowledged but lost: {name} {missing[:5]}"
        assert len({log_bytes(b, "h", p) for b in brokers.values()}) == 1


async def test_a_retry_of_an_appended_but_unacknowledged_batch_is_not_written_twice(start_broker, zk):
    """The window kills only sometimes hit, made deterministic: acks=all times out after the leader
    appended (a follower is paused); the retry, sent once the follower is back, must be answered
    with the original offset. The same retry without a producer id duplicates, as Kafka would."""
    import signal

    brokers = {i: start_broker(i, zookeeper_session_timeout_ms="10000") for i in (1, 2)}
    await create_topic(brokers, zk, "w", rf=2, configs={"min.insync.replicas": "2"})
    await wait_for_isr(zk, "w", [1, 2])
    leader = brokers[partition_state(zk, "w", 0)["leader"]]
    follower = next(b for b in brokers.values() if b is not leader)
    async with Connection.open(leader.host, leader.port) as conn:
        init = await conn.request(22, {"transactional_id": None, "transaction_timeout_ms": 60000})

        def body(batch, timeout_ms):
            return {
                "acks": -1,
                "timeout_ms": timeout_ms,
                "topic_data": [{"name": "w", "partition_data": [{"index": 0, "records": batch}]}],
            }

        idempotent = rb.build_batch([(None, b"idem")], producer_id=init.producer_id, producer_epoch=0, base_sequence=0)
        plain = rb.build_batch([(None, b"plain")])
        follower.process.send_signal(signal.SIGSTOP)
        try:
            for batch in (idempotent, plain):
                r = (await conn.request(0, body(batch, 300))).responses[0].partition_responses[0]
                assert r.error_code == ErrorCode.REQUEST_TIMED_OUT  # appended, not acknowledged
        finally:
            follower.process.send_signal(signal.SIGCONT)
        retries = [
            (await conn.request(0, body(b, 10000))).responses[0].partition_responses[0] for b in (idempotent, plain)
        ]
    assert [r.error_code for r in retries] == [0, 0]
    assert retries[0].base_offset == 0  # the original offset, nothing appended
    assert values_in_log(leader, "w", 0) == [b"idem", b"plain", b"plain"]  # only the plain one doubled
