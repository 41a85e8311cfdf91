"""DeleteRecords (API 21) on a real RF-3 cluster: every replica's log start offset moves (a new
leader after kill -9 serves the same earliest offset), old segments vanish on every replica, a
consumer positioned below gets OFFSET_OUT_OF_RANGE and its reset policy applies; confluent-kafka and
kafka-python as judges; bad requests get Kafka's codes."""

import json
import time

from admin_helpers import raw, wait
from group_helpers import create_topics, produce

from protocol.errors import ErrorCode

TIMEOUT = 60
SETTINGS = {"log_retention_check_interval_ms": 300, "log_segment_delete_delay_ms": 0, "replica_fetch_wait_max_ms": 100}


def leader_of(zk, topic, partition=0):
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])["leader"]


def earliest(broker, topic):
    r = raw(
        broker,
        2,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}],
        },
    )
    p = r.topics[0].partitions[0]
    return p.offset if p.error_code == ErrorCode.NONE else None


def segment_bases(broker, topic):
    return sorted(int(p.stem) for p in (broker.directory / "logs" / f"{topic}-0").glob("*.log"))


def produce_one_by_one(bootstrap, topic, values):
    """One batch per record, so a small segment.bytes rolls many segments."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
        assert producer.flush(TIMEOUT) == 0


def test_delete_records_moves_every_replica_and_consumers_reset(start_broker, zk):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    brokers = {i: start_broker(i, **SETTINGS) for i in (1, 2, 3)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topics(bootstrap, {"dr": 1}, rf=3)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(
        "topic",
        "dr",
        incremental_configs=[ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    time.sleep(0.5)
    produce_one_by_one(bootstrap, "dr", [b"v%03d" % i + b"." * 100 for i in range(100)])
    wait(lambda: all(len(segment_bases(b, "dr")) > 5 for b in brokers.values()), "several segments per replica")

    deleted = admin.delete_records([TopicPartition("dr", 0, 50)], operation_timeout=30)
    [(tp, future)] = deleted.items()
    assert future.result(TIMEOUT).low_watermark == 50
    leader = brokers[leader_of(zk, "dr")]
    checkpoint = (leader.directory / "logs" / "log-start-offset-checkpoint").read_text().splitlines()
    assert "dr 0 50" in checkpoint, "the leader checkpoints the new log start offset at once"

    # every replica drops the segments wholly below 50 at its next retention check
    def trimmed(b):
        bases = segment_bases(b, "dr")
        return bases[0] > 0 and bases[0] <= 50

    wait(lambda: all(trimmed(b) for b in brokers.values()), "old segments gone on every replica")

    # a consumer positioned below the low watermark is reset by its policy
    for policy, first in (("earliest", 50), ("latest", 100)):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{policy}", "auto.offset.reset": policy})
        consumer.assign([TopicPartition("dr", 0, 10)])
        msg = None
        if policy == "latest":  # reset to the end first, then a new record arrives
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                assert msg is None or msg.error() is not None
            produce(bootstrap, "dr", [b"late"])
        deadline = time.monotonic() + TIMEOUT
        while (msg is None or msg.error() is not None) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        consumer.close()
        assert msg is not None and msg.offset() == first, policy

    # fetching below the log start offset directly is OFFSET_OUT_OF_RANGE
    r = raw(
        leader,
        1,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {"topic": "dr", "partitions": [{"partition": 0, "fetch_offset": 10, "partition_max_bytes": 1 << 20}]}
            ],
        },
        version=11,
    )
    assert r.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert r.responses[0].partitions[0].log_start_offset == 50

    # kafka-python moves it further; then a follower that becomes leader serves the same start
    from kafka import TopicPartition as KafkaPythonTopicPartition
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        kp.delete_records({KafkaPythonTopicPartition("dr", 0): 60})
    finally:
        kp.close()
    assert earliest(leader, "dr") == 60
    old = leader.broker_id
    leader.kill()
    wait(lambda: leader_of(zk, "dr") != old, "a new leader")
    new_leader = brokers[leader_of(zk, "dr")]
    wait(lambda: earliest(new_leader, "dr") == 60, "the new leader's log start offset")


def test_bad_delete_records(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    # one AdminClient that has seen the controller (a fresh one may take a Metadata answer from
    # before the controller was known and wait out librdkafka's refresh interval)
    create_topics(bootstrap, {"few": 1, "compacted": 1}, rf=2, configs={"compacted": {"cleanup.policy": "compact"}})
    produce(bootstrap, "few", [b"a", b"b", b"c"])

    def delete(broker, topic, offset):
        body = {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
            "timeout_ms": 5000,
        }
        p = raw(broker, 21, body).topics[0].partitions[0]
        return ErrorCode(p.error_code).name, p.low_watermark

    wait(lambda: leader_of(zk, "compacted") >= 0, "compacted's leader")
    leader = brokers[leader_of(zk, "few")]
    follower = next(b for b in brokers.values() if b is not leader)
    assert delete(leader, "few", 4) == ("OFFSET_OUT_OF_RANGE", -1)
    assert delete(leader, "few", -7) == ("OFFSET_OUT_OF_RANGE", -1)
    assert delete(follower, "few", 1) == ("NOT_LEADER_OR_FOLLOWER", -1)
    assert delete(leader, "nope", 1) == ("UNKNOWN_TOPIC_OR_PARTITION", -1)
    assert delete(brokers[leader_of(zk, "compacted")], "compacted", 0)[0] == "POLICY_VIOLATION"
    assert earliest(leader, "few") == 0, "nothing changed"
    assert delete(leader, "few", -1) == ("NONE", 3)  # -1: up to the high watermark
