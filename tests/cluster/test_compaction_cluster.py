"""Log compaction on a real 3-broker cluster with real clients (issue 17's evidence): records from
confluent-kafka and kafka-python to a compacted RF-3 topic are cleaned on every replica to the
latest value per key, offsets keep their gaps, tombstones outlive `delete.retention.ms` and then
go, keyless records are refused, and our consumer reads across the gaps."""

import subprocess
import sys
import time

import pytest
import trio
from replication_helpers import create_topic, partition_state, wait_for

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch

pytestmark = pytest.mark.slow

KEYS = 1000
CLEANER = {"log_cleaner_backoff_ms": 200}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "131072",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "5000",
}


def replica_records(broker, topic, partition=0):
    """(offset, key, value) of every record in a replica's segment files, read off its disk as a
    consistent snapshot: read again while a cleaning swaps files underneath (the set of files, or
    their sizes, changed during the read, or a swap is in progress)."""
    d = broker.directory / "logs" / f"{topic}-{partition}"

    def listing():
        return sorted((p.name, p.stat().st_size) for p in d.iterdir() if p.name.endswith((".log", ".swap")))

    for _ in range(200):
        try:
            before = listing()
            out = []
            for name, _size in before:
                if name.endswith(".swap"):
                    raise FileNotFoundError(name)  # mid-swap
                data = (d / name).read_bytes()
                for pos, header in rb.iter_batches(data, allow_partial_tail=True):
                    out += [(r.offset, r.key, r.value) for r in rb.decode_records(data, pos, header)]
            if listing() == before:
                return out
        except (FileNotFoundError, CorruptRecordBatch):
            pass
        time.sleep(0.05)
    raise AssertionError(f"cannot read {d}")


def latest(records):
    out = {}
    for _, key, value in records:
        out[key] = value
    return out


def produce_confluent(bootstrap, topic, n, prefix, tombstones=()):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    for i in range(n):
        key = b"k%d" % (i % KEYS)
        producer.produce(topic, key=key, value=None if key in tombstones and i >= n - KEYS else b"%s-%d" % (prefix, i))
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def produce_kafka_python(bootstrap, topic, n, prefix, tombstones=()):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i in range(n):
        key = b"k%d" % (i % KEYS)
        producer.send(topic, key=key, value=None if key in tombstones and i >= n - KEYS else b"%s-%d" % (prefix, i))
    producer.flush(60)
    producer.close()


def consume_when_led(bootstrap, topic, timeout_s=60):
    """consume_all, retried while the partition has no leader yet (a restarted broker re-registers
    once ZooKeeper expires its previous session)."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consume_all(bootstrap, topic)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def consume_all(bootstrap, topic):
    """(offset, key, value) of every record up to the HW, read by confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{time.time()}", "enable.auto.commit": False})
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, 0)])
    out, deadline = [], time.monotonic() + 60
    while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            out.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    return out, high


async def test_a_compacted_topic_keeps_the_latest_value_per_key_on_every_replica(start_broker, zk):
    brokers = {i: start_broker(i, **CLEANER) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "changelog", rf=3, configs=COMPACTED)
    await wait_for(lambda: len(partition_state(zk, "changelog", 0)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    dead = {b"k%d" % k for k in range(0, KEYS, 10)}
    await trio.to_thread.run_sync(produce_confluent, bootstrap, "changelog", 50_000, b"c")
    await trio.to_thread.run_sync(produce_kafka_python, bootstrap, "changelog", 50_000, b"p", dead)
    expected = {b"k%d" % k: (None if b"k%d" % k in dead else b"p-%d" % (49_000 + k)) for k in range(KEYS)}

    # every replica cleans its own log: far fewer records on disk, the same latest value per key
    for broker in brokers.values():
        await wait_for(lambda b=broker: len(replica_records(b, "changelog")) < 20_000, timeout_s=60)
        on_disk = replica_records(broker, "changelog")
        assert latest(on_disk) == expected
        offsets = [o for o, _, _ in on_disk]
        assert offsets == sorted(set(offsets)) and offsets[-1] == 99_999
    # a consumer reads every live key's latest value and the tombstones, offsets increasing with gaps
    read, high = await trio.to_thread.run_sync(consume_all, bootstrap, "changelog")
    offsets = [o for o, _, _ in read]
    assert high == 100_000 and offsets == sorted(set(offsets)) and len(offsets) < offsets[-1] + 1
    assert latest(read) == expected
    # our own consumer (the CLI) reads across the gaps to the end without waiting on missing offsets
    cli = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [
                sys.executable,
                "-m",
                "minikafka_cli.main",
                "consume",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                "changelog",
                "--from-beginning",
                "--print-key",
                "--print-offset",
                "--timeout-ms",
                "3000",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    )
    assert cli.returncode == 0, cli.stderr
    # (the cleaner may go on between the two reads, so the CLI may see fewer records: it must read
    # an increasing run of offsets to the end with every key's latest value)
    printed = [line.split("\t") for line in cli.stdout.splitlines()]
    cli_offsets = [int(o.split(":")[1]) for o, _, _ in printed]
    assert cli_offsets == sorted(set(cli_offsets)) and cli_offsets[-1] == 99_999
    last = {k: v for _, k, v in printed}
    live_latest = {k.decode(): v.decode() for k, v in expected.items() if v is not None}
    assert {k: v for k, v in last.items() if v != "null"} == live_latest  # tombstones may be gone by now

    # after delete.retention.ms, later cleanings drop the tombstones with their keys
    await trio.sleep(5.5)
    live = [k for k in range(KEYS) if b"k%d" % k not in dead]
    deadline = time.monotonic() + 90
    while True:
        await trio.to_thread.run_sync(
            lambda: produce_confluent_keys(bootstrap, "changelog", [b"k%d" % k for k in live[:50]])
        )
        if all(not (set(latest(replica_records(b, "changelog"))) & dead) for b in brokers.values()):
            break
        assert time.monotonic() < deadline, "tombstones were never removed"
        await trio.sleep(1)
    for broker in brokers.values():
        remaining = latest(replica_records(broker, "changelog"))
        assert set(remaining) == {b"k%d" % k for k in live}
        assert None not in remaining.values()


def produce_confluent_keys(bootstrap, topic, keys):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for key in keys * 20:
        producer.produce(topic, key=key, value=b"later-" + key + b"x" * 200)
    assert producer.flush(60) == 0


async def test_keyless_records_are_refused_by_a_compacted_topic_and_keyed_ones_land(start_broker, zk):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    brokers = {i: start_broker(i, **CLEANER) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "keyed", rf=3, configs=COMPACTED)
    await wait_for(lambda: len(partition_state(zk, "keyed", 0)["isr"]) == 3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())

    def confluent():
        errors = []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
        producer.produce("keyed", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(30)
        producer.produce("keyed", key=b"a", value=b"1", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(30)
        return errors

    errors = await trio.to_thread.run_sync(confluent)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD and errors[1] is None

    def kafka_python():
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0)
        try:
            with pytest.raises(InvalidRecordError):
                producer.send("keyed", value=b"no key either").get(30)
            return producer.send("keyed", key=b"b", value=b"2").get(30).offset
        finally:
            producer.close()

    assert await trio.to_thread.run_sync(kafka_python) == 1
    read, _ = await trio.to_thread.run_sync(consume_all, bootstrap, "keyed")
    assert [(k, v) for _, k, v in read] == [(b"a", b"1"), (b"b", b"2")]


async def test_kill_9_of_a_broker_in_the_middle_of_a_cleaning(start_broker, zk):
    """A real broker killed while its (throttled) cleaner writes a `.cleaned` segment restarts with
    a consistent log: every key's latest value, then a completed cleaning."""
    slow = {**CLEANER, "log_cleaner_io_max_bytes_per_second": 300_000}
    broker = start_broker(1, **slow)
    await create_topic({1: broker}, zk, "crashy", rf=1, configs={**COMPACTED, "segment.bytes": "262144"})
    await trio.to_thread.run_sync(produce_confluent, broker.bootstrap, "crashy", 20_000, b"c")
    expected = {b"k%d" % k: b"c-%d" % (19_000 + k) for k in range(KEYS)}
    d = broker.directory / "logs" / "crashy-0"
    await wait_for(lambda: any(p.stat().st_size > 0 for p in d.glob("*.log.cleaned")), timeout_s=60)
    broker.kill()
    assert list(d.glob("*.cleaned"))  # the crash interrupted a cleaning
    broker.start()  # the same log dir, recovered as after any crash
    read, high = await trio.to_thread.run_sync(consume_when_led, broker.bootstrap, "crashy")
    assert high == 20_000 and latest(read) == expected
    checkpoint = broker.directory / "logs" / "cleaner-offset-checkpoint"
    await wait_for(lambda: checkpoint.exists() and "crashy 0 " in checkpoint.read_text(), timeout_s=90)
    read, _ = await trio.to_thread.run_sync(consume_all, broker.bootstrap, "crashy")
    assert latest(read) == expected and len(read) < 20_000
    assert "removing" in broker.log_tail(300_000) and "left by an interrupted cleaning" in broker.log_tail(300_000)
