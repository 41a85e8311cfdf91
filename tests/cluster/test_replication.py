"""Replication with real processes: followers, ISR, high watermark, acks=all (RF 3)."""

import trio
from replication_helpers import (
    create_topic,
    log_bytes,
    partition_state,
    produce,
    wait_for,
    wait_for_isr,
    wait_until_all_brokers_known,
)

from protocol import record_batch as rb
from protocol.errors import ErrorCode

LAG_MS = "1500"


def start_three(start_broker, **overrides):
    return {i: start_broker(i, replica_lag_time_max_ms=LAG_MS, **overrides) for i in (1, 2, 3)}


def _produce_acks_all(bootstrap, topic, n):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=False,
        linger_ms=2,
        retries=10,
        request_timeout_ms=30000,
    )
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


async def latest_offset(broker, topic):
    from client.connection import Connection

    async with Connection.open(broker.host, broker.port) as conn:
        r = await conn.request(
            2, {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
        )
    return r.topics[0].partitions[0].offset


async def test_a_paused_follower_leaves_and_rejoins_the_isr(start_broker, zk):
    import signal

    brokers = start_three(start_broker, zookeeper_session_timeout_ms="10000")
    await create_topic(brokers, zk, "s", rf=3, configs={"min.insync.replicas": "2"})
    await wait_for_isr(zk, "s", [1, 2, 3])
    leader = brokers[partition_state(zk, "s", 0)["leader"]]
    follower = next(b for b in brokers.values() if b is not leader)
    assert (await produce(leader, "s", b"before", -1)).error_code == ErrorCode.NONE
    follower.process.send_signal(signal.SIGSTOP)
    try:
        await wait_for(lambda: follower.broker_id not in partition_state(zk, "s", 0)["isr"], timeout_s=10)
        assert zk.exists(f"/brokers/ids/{follower.broker_id}")  # shrunk for lag, not for a dead session
        assert len(partition_state(zk, "s", 0)["isr"]) == 2
        assert (await produce(leader, "s", b"during", -1)).error_code == ErrorCode.NONE  # min ISR 2 holds
    finally:
        follower.process.send_signal(signal.SIGCONT)
    await wait_for(lambda: sorted(partition_state(zk, "s", 0)["isr"]) == [1, 2, 3], timeout_s=15)
    await wait_for(lambda: len({log_bytes(b, "s", 0) for b in brokers.values()}) == 1, timeout_s=10)


async def test_min_insync_replicas_with_two_followers_down(start_broker, zk):
    import signal

    brokers = start_three(start_broker, zookeeper_session_timeout_ms="10000")
    await create_topic(brokers, zk, "m", rf=3, configs={"min.insync.replicas": "2"})
    await wait_for_isr(zk, "m", [1, 2, 3])
    leader = brokers[partition_state(zk, "m", 0)["leader"]]
    followers = [b for b in brokers.values() if b is not leader]
    assert (await produce(leader, "m", b"ok", -1)).error_code == ErrorCode.NONE
    for f in followers:
        f.process.send_signal(signal.SIGSTOP)
    try:
        # the ISR still lists them: acks=all cannot be satisfied and says so (never a false success)
        r = await produce(leader, "m", b"unreplicated", -1, timeout_ms=500)
        assert r.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert len(partition_state(zk, "m", 0)["isr"]) == 3
        await wait_for(lambda: partition_state(zk, "m", 0)["isr"] == [leader.broker_id], timeout_s=10)
        before = await latest_offset(leader, "m")
        r = await produce(leader, "m", b"refused", -1)
        assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert await latest_offset(leader, "m") == before  # nothing was appended
        assert (await produce(leader, "m", b"acks1", 1)).error_code == ErrorCode.NONE
    finally:
        for f in followers:
            f.process.send_signal(signal.SIGCONT)
    await wait_for(lambda: sorted(partition_state(zk, "m", 0)["isr"]) == [1, 2, 3], timeout_s=15)
    assert (await produce(leader, "m", b"again", -1)).error_code == ErrorCode.NONE


def _producer_thread(bootstrap, topic, n, acked, stop_after_kill):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=False,
        retries=100,
        max_in_flight_requests_per_connection=1,
        linger_ms=1,
        retry_backoff_ms=200,
        request_timeout_ms=5000,
        delivery_timeout_ms=90000,
        metadata_max_age_ms=1000,
    )
    for i in range(n):
        value = b"rec-%05d" % i
        try:
            acked.append((value, producer.send(topic, value=value, partition=0).get(timeout=90).offset))
        except Exception:  # an unacknowledged record may or may not be in the log: both are fine
            acked.append((value, None))
    producer.close()


def _consumer_thread(bootstrap, topic, seen, hws, stop):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        metadata_max_age_ms=1000,
        fetch_max_wait_ms=100,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    while not stop.is_set():
        for records in consumer.poll(timeout_ms=200).values():
            seen += [(r.offset, r.value) for r in records]
        hw = consumer.highwater(tp)
        if hw is not None:
            hws.append(hw)
    consumer.close()


async def test_kill_the_leader_mid_stream_loses_no_acknowledged_record(start_broker, zk):
    import threading

    brokers = start_three(start_broker)
    await create_topic(brokers, zk, "k", rf=3, configs={"min.insync.replicas": "2"})
    await wait_for_isr(zk, "k", [1, 2, 3])
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    acked, seen, hws, stop = [], [], [], threading.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, _consumer_thread, bootstrap, "k", seen, hws, stop)
        producing = trio.Event()

        async def run_producer():
            await trio.to_thread.run_sync(_producer_thread, bootstrap, "k", 1500, acked, None)
            producing.set()

        nursery.start_soon(run_producer)
        await wait_for(lambda: len(acked) >= 400, timeout_s=60)
        victim = brokers[partition_state(zk, "k", 0)["leader"]]
        victim.kill()
        await producing.wait()
        new_leader = brokers[partition_state(zk, "k", 0)["leader"]]
        assert new_leader is not victim
        await trio.to_thread.run_sync(victim.start)
        await wait_for(lambda: sorted(partition_state(zk, "k", 0)["isr"]) == [1, 2, 3], timeout_s=30)
        await trio.sleep(1.5)
        stop.set()
    final = {}
    for pos, header in rb.iter_batches(log_bytes(new_leader, "k", 0)):
        for r in rb.decode_records(log_bytes(new_leader, "k", 0), pos, header):
            final[r.offset] = r.value
    acknowledged = [(v, o) for v, o in acked if o is not None]
    assert len(acknowledged) > 1000
    for value, offset in acknowledged:
        assert final.get(offset) == value, f"acknowledged {value!r} at {offset}, log has {final.get(offset)!r}"
    for offset, value in seen:  # what a consumer saw never changes
        assert final.get(offset) == value
    assert hws == sorted(hws), "a consumer saw the high watermark go backwards"
    assert len({log_bytes(b, "k", 0) for b in brokers.values()}) == 1  # the restarted replica matches


async def test_unclean_leader_election_only_where_enabled_and_logged(start_broker, zk):
    import signal

    from replication_helpers import controller_of

    from client.connection import Connection

    brokers = start_three(start_broker, zookeeper_session_timeout_ms="10000")
    await wait_for(lambda: controller_of(zk) is not None)
    await wait_until_all_brokers_known(brokers)  # else the manual assignment may name one not yet live
    controller = brokers[controller_of(zk)]
    leader_id, follower_id = [i for i in brokers if i != controller.broker_id]
    async with Connection.open(controller.host, controller.port) as conn:
        for name, unclean in (("unsafe", "true"), ("safe", "false")):
            with trio.fail_after(15):
                while True:
                    r = await conn.request(
                        19,
                        {
                            "topics": [
                                {
                                    "name": name,
                                    "num_partitions": -1,
                                    "replication_factor": -1,
                                    "assignments": [{"partition_index": 0, "broker_ids": [leader_id, follower_id]}],
                                    "configs": [{"name": "unclean.leader.election.enable", "value": unclean}],
                                }
                            ],
                            "timeout_ms": 5000,
                        },
                    )
                    if r.topics[0].error_code != ErrorCode.NOT_CONTROLLER:
                        break
                    await trio.sleep(0.1)
            assert r.topics[0].error_code == ErrorCode.NONE
    for name in ("unsafe", "safe"):
        await wait_for(lambda n=name: sorted(partition_state(zk, n, 0)["isr"]) == sorted([leader_id, follower_id]))
    brokers[follower_id].process.send_signal(signal.SIGSTOP)
    try:
        for name in ("unsafe", "safe"):
            await wait_for(lambda n=name: partition_state(zk, n, 0)["isr"] == [leader_id], timeout_s=10)
    finally:
        brokers[follower_id].process.send_signal(signal.SIGCONT)
    brokers[leader_id].kill()
    await wait_for(lambda: partition_state(zk, "unsafe", 0)["leader"] == follower_id, timeout_s=20)
    assert "UNCLEAN leader election for unsafe-0" in controller.log_tail(300000)
    assert "UNCLEAN leader election for safe-0" not in controller.log_tail(300000)
    assert partition_state(zk, "safe", 0)["leader"] == leader_id  # stays offline: no unclean leader
    # The controller writes the elections to ZooKeeper before it sends UpdateMetadata (as Kafka's
    # does), so the brokers' Metadata follows the znodes read above a moment later: asked as a
    # client asks, until it answers this or for at most 10 s.
    expected = {"safe": ErrorCode.LEADER_NOT_AVAILABLE, "unsafe": ErrorCode.NONE}
    async with Connection.open(controller.host, controller.port) as conn:
        with trio.move_on_after(10):
            while True:
                md = await conn.request(3, {"topics": [{"name": "safe"}, {"name": "unsafe"}]})
                errors = {t.name: t.partitions[0].error_code for t in md.topics}
                if errors == expected:
                    break
                await trio.sleep(0.1)
    assert errors == expected
