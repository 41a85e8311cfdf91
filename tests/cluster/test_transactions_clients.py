"""Transactions judged by unmodified clients (KIP-98): confluent-kafka's transactional producer
commits and aborts; read_committed consumers see exactly the committed records, read_uncommitted
ones everything (no control records)."""

import time

import pytest
from group_helpers import create_topics
from txn_helpers import TIMEOUT, TXN_BROKER, consume_all

pytestmark = pytest.mark.slow


def test_confluent_commit_and_abort(start_broker):
    from confluent_kafka import Producer

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"txn": 2})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-1", "linger.ms": 5})
    producer.init_transactions(TIMEOUT)
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("txn", key=b"%d" % round_, value=b"%d-%d" % (round_, i), partition=i % 2)
        assert producer.flush(TIMEOUT) == 0  # librdkafka's abort drops what it has not sent
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
    committed = consume_all(broker.bootstrap, "txn", "read_committed", expected=20)
    everything = consume_all(broker.bootstrap, "txn", "read_uncommitted", expected=30)
    assert sorted(v for _, v in committed) == sorted(b"%d-%d" % (r, i) for r in (0, 2) for i in range(10))
    assert sorted(v for _, v in everything) == sorted(b"%d-%d" % (r, i) for r in (0, 1, 2) for i in range(10))


def test_kafka_python_commit_and_abort(start_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"kp-txn": 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-tx", linger_ms=5)
    producer.init_transactions()
    for round_, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for i in range(5):
            producer.send("kp-txn", key=b"k", value=b"%d-%d" % (round_, i))
        producer.flush(TIMEOUT)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()

    def read(isolation: str) -> list[bytes]:
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, isolation_level=isolation, consumer_timeout_ms=3000, group_id=None
        )
        consumer.assign([TopicPartition("kp-txn", 0)])
        consumer.seek(TopicPartition("kp-txn", 0), 0)
        values = [m.value for m in consumer]
        consumer.close()
        return values

    assert read("read_committed") == [b"%d-%d" % (r, i) for r in (0, 2) for i in range(5)]
    assert read("read_uncommitted") == [b"%d-%d" % (r, i) for r in (0, 1, 2) for i in range(5)]
    assert sorted(v for _, v in consume_all(broker.bootstrap, "kp-txn", "read_committed", expected=10)) == sorted(
        b"%d-%d" % (r, i) for r in (0, 2) for i in range(5)
    )


def test_aiokafka_commit_and_abort(start_broker):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"aio-txn": 1})

    async def run() -> tuple[list, list]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-tx")
        await producer.start()
        try:
            for round_, commit in enumerate([True, False, True]):
                await producer.begin_transaction()
                for i in range(5):
                    await producer.send("aio-txn", key=b"k", value=b"%d-%d" % (round_, i))
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()
        out = []
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation)
            await consumer.start()
            tp = TopicPartition("aio-txn", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            values = []
            try:
                while True:
                    batch = await consumer.getmany(tp, timeout_ms=2000)
                    if not batch:
                        break
                    values += [m.value for m in batch[tp]]
            finally:
                await consumer.stop()
            out.append(values)
        return out[0], out[1]

    committed, everything = asyncio.run(run())
    assert committed == [b"%d-%d" % (r, i) for r in (0, 2) for i in range(5)]
    assert everything == [b"%d-%d" % (r, i) for r in (0, 1, 2) for i in range(5)]


def _committed(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)[0].offset
    finally:
        consumer.close()


def _broker_with_input(start_broker, records: int):
    """A transactions broker with topics `in` and `out` (1 partition each), `in` holding the
    values b"0".. b"<records - 1>"."""
    from confluent_kafka import Producer

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"in": 1, "out": 1})
    source = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(records):
        source.produce("in", value=b"%d" % i)
    assert source.flush(TIMEOUT) == 0
    return broker


def test_send_offsets_to_transaction_moves_offsets_only_on_commit(start_broker):
    """KIP-447: offsets sent to a transaction are the group's only once it commits (also after the
    group coordinator reloads `__consumer_offsets`), and OffsetFetch with require_stable answers
    UNSTABLE_OFFSET_COMMIT while they are pending."""
    from admin_helpers import raw
    from confluent_kafka import Consumer, Producer, TopicPartition

    from protocol.api_keys import ApiKey
    from protocol.errors import ErrorCode

    broker = _broker_with_input(start_broker, 20)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "eos",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition("in", 0)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "eos-tx"})
    producer.init_transactions(TIMEOUT)

    def stable_fetch_error() -> int:
        body = {"group_id": "eos", "topics": [{"name": "in", "partition_indexes": [0]}], "require_stable": True}
        return raw(broker, ApiKey.OFFSET_FETCH, body, version=7).topics[0].partitions[0].error_code

    for commit in (True, False):
        producer.begin_transaction()
        got = []
        while len(got) < 10:
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                got.append(msg)
                producer.produce("out", value=msg.value())
        positions = [TopicPartition("in", 0, got[-1].offset() + 1)]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
        assert stable_fetch_error() == ErrorCode.UNSTABLE_OFFSET_COMMIT
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
        assert _committed(broker.bootstrap, "eos", "in") == 10, f"after {'commit' if commit else 'abort'}"
        assert stable_fetch_error() == ErrorCode.NONE
    consumer.close()
    assert sorted(int(v) for _, v in consume_all(broker.bootstrap, "out", "read_committed", expected=10)) == list(
        range(10)
    )
    broker.kill()
    broker.start()  # the group coordinator replays the transactional offset commits and their markers
    assert _committed(broker.bootstrap, "eos", "in") == 10


def test_zombie_is_fenced(start_broker):
    from confluent_kafka import KafkaException, Producer

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"z": 1})
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": "same-id"}
    old = Producer(config)
    old.init_transactions(TIMEOUT)
    old.begin_transaction()
    old.produce("z", value=b"zombie-1")
    assert old.flush(TIMEOUT) == 0
    new = Producer(config)
    new.init_transactions(TIMEOUT)  # aborts the old instance's open transaction and fences it
    new.begin_transaction()
    new.produce("z", value=b"new")
    new.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as raised:
        old.produce("z", value=b"zombie-2")
        old.flush(10)
        old.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert [v for _, v in consume_all(broker.bootstrap, "z", "read_committed", expected=1)] == [b"new"]


def test_hung_transaction_is_aborted_after_its_timeout(start_broker):
    from confluent_kafka import Producer

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"hung": 1})
    hung = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "hung-tx", "transaction.timeout.ms": 2000}
    )
    hung.init_transactions(TIMEOUT)
    hung.begin_transaction()
    hung.produce("hung", value=b"never-committed")
    assert hung.flush(TIMEOUT) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce("hung", value=b"after")
    assert plain.flush(TIMEOUT) == 0
    # the open transaction holds the LSO back until the coordinator aborts it
    assert [v for _, v in consume_all(broker.bootstrap, "hung", "read_committed", expected=1)] == [b"after"]


def test_a_timed_out_transaction_releases_the_offsets_it_sent(start_broker):
    """KIP-447: a transaction that sent offsets for a group and was then abandoned (its producer
    stopped between send_offsets_to_transaction and the commit) is aborted at its timeout, and the
    abort clears the group's pending offsets: a read_committed consumer of the group then gets its
    committed offset (not UNSTABLE_OFFSET_COMMIT forever) and reads on from there."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = _broker_with_input(start_broker, 10)
    group = {"bootstrap.servers": broker.bootstrap, "group.id": "abandoned", "enable.auto.commit": False,
             "isolation.level": "read_committed", "auto.offset.reset": "earliest"}  # fmt: skip
    first = Consumer(group)
    first.subscribe(["in"])
    for _ in range(3):  # the first three processed and committed
        assert first.poll(TIMEOUT) is not None
    first.commit(offsets=[TopicPartition("in", 0, 3)], asynchronous=False)
    abandoned = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "abandoned-tx", "transaction.timeout.ms": 2000}
    )
    abandoned.init_transactions(TIMEOUT)
    abandoned.begin_transaction()
    abandoned.produce("out", value=b"never-committed")
    abandoned.send_offsets_to_transaction(
        [TopicPartition("in", 0, 7)], first.consumer_group_metadata(), TIMEOUT
    )  # pending until the transaction ends
    first.close()
    started = time.monotonic()
    second = Consumer(group)
    second.subscribe(["in"])
    got = []
    while len(got) < 7 and time.monotonic() - started < 30:
        msg = second.poll(0.5)
        if msg is not None and not msg.error():
            got.append(int(msg.value()))
    second.close()
    assert got == list(range(3, 10)), got  # from the committed 3: the aborted 7 never counted
    assert [v for _, v in consume_all(broker.bootstrap, "out", "read_committed", expected=0)] == []


def test_kafka_python_and_aiokafka_send_offsets_to_transaction(start_broker):
    """TxnOffsetCommit as kafka-python (with its group metadata, KIP-447) and aiokafka send it:
    the group's offset moves on commit, not on abort."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka import TopicPartition as AioTP
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"src": 1, "dst": 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-offsets")
    producer.init_transactions()
    for offset, commit in ((5, True), (9, False)):
        producer.begin_transaction()
        producer.send("dst", value=b"%d" % offset)
        producer.send_offsets_to_transaction({TopicPartition("src", 0): OffsetAndMetadata(offset, "", -1)}, "kp-group")
        producer.commit_transaction() if commit else producer.abort_transaction()
        assert _committed(broker.bootstrap, "kp-group", "src") == 5
    producer.close()

    async def aio() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-offsets")
        await producer.start()
        try:
            for offset, commit in ((7, True), (11, False)):
                await producer.begin_transaction()
                await producer.send("dst", value=b"%d" % offset)
                await producer.send_offsets_to_transaction({AioTP("src", 0): offset}, "aio-group")
                await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()

    asyncio.run(aio())
    assert _committed(broker.bootstrap, "aio-group", "src") == 7
    assert sorted(v for _, v in consume_all(broker.bootstrap, "dst", "read_committed", expected=2)) == [b"5", b"7"]
