"""Consumer groups judged by unmodified real clients against real broker processes: kafka-python,
confluent-kafka (range, roundrobin, cooperative-sticky), aiokafka and kcat -G consume, commit,
stop, and resume from the committed offset; admin clients list, describe, delete groups and read
and alter their offsets."""

import asyncio
import subprocess

import pytest
from group_helpers import GROUP_BROKER, TIMEOUT, create_topics, produce

pytestmark = pytest.mark.slow

VALUES = [b"v%03d" % i for i in range(30)]


def _kafka_python_consume(bootstrap, topic, group, count):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=TIMEOUT * 1000,
    )
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == count:
            break
    consumer.commit()
    consumer.close()
    return got


def test_kafka_python_group_consumer_resumes_from_its_commit(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"kp": 3})
    produce(broker.bootstrap, "kp", VALUES[:20], partitions=3)
    assert sorted(_kafka_python_consume(broker.bootstrap, "kp", "kp-group", 20)) == VALUES[:20]
    produce(broker.bootstrap, "kp", VALUES[20:], partitions=3)
    # a new consumer of the group starts where the group committed: only the new records
    assert sorted(_kafka_python_consume(broker.bootstrap, "kp", "kp-group", 10)) == VALUES[20:]


def _confluent_consume(bootstrap, topic, group, count, assignor, extra=None):
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "partition.assignment.strategy": assignor,
        }
        | (extra or {})
    )
    consumer.subscribe([topic])
    got = []
    import time

    deadline = time.monotonic() + TIMEOUT
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_group_consumer_resumes_with_each_assignor(start_broker, assignor):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"ck": 3})
    produce(broker.bootstrap, "ck", VALUES[:20], partitions=3)
    assert sorted(_confluent_consume(broker.bootstrap, "ck", "ck-group", 20, assignor)) == VALUES[:20]
    produce(broker.bootstrap, "ck", VALUES[20:], partitions=3)
    assert sorted(_confluent_consume(broker.bootstrap, "ck", "ck-group", 10, assignor)) == VALUES[20:]


async def _aiokafka_consume(bootstrap, topic, group, count):
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got = []
    try:
        async with asyncio.timeout(TIMEOUT):
            async for msg in consumer:
                got.append(msg.value)
                if len(got) == count:
                    break
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def test_aiokafka_group_consumer_resumes_from_its_commit(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"ak": 2})
    produce(broker.bootstrap, "ak", VALUES[:20], partitions=2)
    assert sorted(asyncio.run(_aiokafka_consume(broker.bootstrap, "ak", "ak-group", 20))) == VALUES[:20]
    produce(broker.bootstrap, "ak", VALUES[20:], partitions=2)
    assert sorted(asyncio.run(_aiokafka_consume(broker.bootstrap, "ak", "ak-group", 10))) == VALUES[20:]


def _kcat_group(bootstrap, group, topic):
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-f", "%s\\n", topic],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return sorted(out.stdout.split())


def test_kcat_balanced_consumer_commits_and_resumes(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"kc": 2})
    produce(broker.bootstrap, "kc", VALUES[:20], partitions=2)
    assert _kcat_group(broker.bootstrap, "kc-group", "kc") == [v.decode() for v in VALUES[:20]]
    produce(broker.bootstrap, "kc", VALUES[20:], partitions=2)
    assert _kcat_group(broker.bootstrap, "kc-group", "kc") == [v.decode() for v in VALUES[20:]]


def test_admin_clients_list_describe_alter_and_delete_groups(start_broker):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"ad": 2})
    produce(broker.bootstrap, "ad", VALUES[:10], partitions=2)
    assert len(_confluent_consume(broker.bootstrap, "ad", "ad-group", 10, "range")) == 10
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups().result(TIMEOUT)
    assert [(g.group_id, g.state) for g in listed.valid] == [("ad-group", ConsumerGroupState.EMPTY)]
    (described,) = admin.describe_consumer_groups(["ad-group"]).values()
    assert described.result(TIMEOUT).state == ConsumerGroupState.EMPTY
    (offsets,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("ad-group")]).values()
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in offsets.result(TIMEOUT).topic_partitions) == [
        ("ad", 0, 5),
        ("ad", 1, 5),
    ]
    request = ConsumerGroupTopicPartitions("ad-group", [TopicPartition("ad", 0, 2)])
    (altered,) = admin.alter_consumer_group_offsets([request]).values()
    altered.result(TIMEOUT)
    # kafka-python's admin sees the same
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    listed_kp = kp.list_groups(states_filter=["Empty"])
    assert [g["group_id"] for g in listed_kp] == ["ad-group"], listed_kp
    fetched = kp.list_group_offsets("ad-group")["ad-group"]
    assert {(tp.topic, tp.partition): om.offset for tp, om in fetched.items()} == {("ad", 0): 2, ("ad", 1): 5}
    desc = kp.describe_groups(["ad-group"])["ad-group"]
    assert desc["group_state"] == "Empty" and desc["members"] == []
    deleted_offsets = kp.delete_group_offsets("ad-group", [KafkaTopicPartition("ad", 1)])
    assert [e.__name__ for e in deleted_offsets.values()] == ["NoError"]
    fetched = kp.list_group_offsets("ad-group")["ad-group"]
    assert {(tp.topic, tp.partition): om.offset for tp, om in fetched.items()} == {("ad", 0): 2}
    altered_kp = kp.alter_group_offsets("other-group", {KafkaTopicPartition("ad", 1): OffsetAndMetadata(7, "", -1)})
    assert [e.__name__ for e in altered_kp.values()] == ["NoError"]
    fetched = kp.list_group_offsets("other-group")["other-group"]
    assert {(tp.topic, tp.partition): om.offset for tp, om in fetched.items()} == {("ad", 1): 7}
    deleted_kp = kp.delete_groups(["other-group"])
    assert deleted_kp == {"other-group": "OK"}
    assert (
        "other-group" not in kp.list_group_offsets("other-group")
        or not kp.list_group_offsets("other-group")["other-group"]
    )
    kp.close()
    (deleted,) = admin.delete_consumer_groups(["ad-group"]).values()
    deleted.result(TIMEOUT)
    assert admin.list_consumer_groups().result(TIMEOUT).valid == []
