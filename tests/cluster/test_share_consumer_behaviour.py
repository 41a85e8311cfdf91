"""What confluent-kafka 2.16's share consumers (librdkafka 2.16) promise beyond the basics, against
a real broker (KIP-932): every compression codec, headers, timestamps, null keys and values,
`DeserializingShareConsumer`, partitions added while consuming, and a topic deleted and created
again under the same name (a new topic id: the group starts on it afresh)."""

import time

import pytest
from confluent_kafka import DeserializingShareConsumer, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from confluent_kafka.serialization import StringDeserializer
from share_helpers import BROKER, consumer, drain, set_group_configs, topic

pytestmark = pytest.mark.slow  # ZooKeeper and a broker


def messages(consumers, want: int, seconds: float = 30.0) -> list:
    """Poll round-robin until `want` messages arrived (or the time is up)."""
    got: list = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < want:
        for c in consumers:
            for m in c.poll(0.3):
                assert m.error() is None, m.error()
                got.append(m)
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_headers_timestamps_and_nulls_arrive_intact(start_broker, codec):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    set_group_configs(broker, "intact", share_auto_offset_reset="earliest")
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20})
    sent = [
        (b"k0", b"v0" * 200, [("h", b"1"), ("h", b"2")], 1_700_000_000_000),
        (None, b"no key", None, 1_700_000_000_001),
        (b"k2", None, [("empty", None)], 1_700_000_000_002),  # a tombstone with a null header value
        (None, None, None, 1_700_000_000_003),
    ]
    for key, value, headers, ts in sent:
        p.produce(name, value, key, partition=0, headers=headers, timestamp=ts)
    assert p.flush(30) == 0
    c = consumer(broker, "intact", name)
    got = messages([c], len(sent))
    c.close()
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == [
        (key, value, headers, ts) for key, value, headers, ts in sent
    ]


def test_the_deserializing_share_consumer_gives_decoded_keys_and_values(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    set_group_configs(broker, "decoded", share_auto_offset_reset="earliest")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(name, "grüße".encode(), "schlüssel".encode(), partition=0)
    assert p.flush(30) == 0
    c = DeserializingShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "decoded",
            "key.deserializer": StringDeserializer("utf_8"),
            "value.deserializer": StringDeserializer("utf_8"),
        }
    )
    c.subscribe([name])
    got = messages([c], 1)
    c.close()
    assert [(m.key(), m.value()) for m in got] == [("schlüssel", "grüße")]


def test_partitions_added_while_consuming_are_read(start_broker):
    broker = start_broker(
        1, **(BROKER | {"group.share.heartbeat.interval.ms": 1000, "group.share.min.heartbeat.interval.ms": 1000})
    )
    name = topic(broker, partitions=1)
    set_group_configs(broker, "growing", share_auto_offset_reset="earliest", share_heartbeat_interval_ms="1000")
    c = consumer(broker, "growing", name)
    assert messages([c], 1, seconds=3) == []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(name, 3)])[name].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.refresh.interval.ms": 500})
    for partition in range(3):
        p.produce(name, f"p{partition}".encode(), partition=partition)
    assert p.flush(30) == 0
    got = messages([c], 3, seconds=40)
    c.close()
    assert sorted((m.partition(), m.value()) for m in got) == [(0, b"p0"), (1, b"p1"), (2, b"p2")]


def test_a_topic_deleted_and_created_again_is_read_afresh(start_broker):
    broker = start_broker(
        1, **(BROKER | {"group.share.heartbeat.interval.ms": 1000, "group.share.min.heartbeat.interval.ms": 1000})
    )
    name = topic(broker, partitions=1)
    set_group_configs(broker, "again", share_auto_offset_reset="earliest", share_heartbeat_interval_ms="1000")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce(name, f"old{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = consumer(broker, "again", name)
    assert sorted(drain([c], 3)) == [b"old0", b"old1", b"old2"]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 30
    while True:  # the deletion completes asynchronously
        try:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    p = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.refresh.interval.ms": 500})
    p.produce(name, b"new0", partition=0)
    p.produce(name, b"new1", partition=0)
    assert p.flush(30) == 0
    got = drain([c], 2, seconds=40)
    c.close()
    # the new topic's offsets start at 0 again: none of them was taken for the old one's, done
    assert sorted(got) == [b"new0", b"new1"]
