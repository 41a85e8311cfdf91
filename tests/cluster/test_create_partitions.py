"""CreatePartitions (API 37) on a real cluster: a topic grown from 3 to 6 partitions under a
running confluent producer and group consumer gets records in the new partitions and they are
consumed; kafka-python's create_partitions with an explicit assignment; bad requests answered with
Kafka's codes and nothing changed."""

import json
import threading
import time

from admin_helpers import raw
from group_helpers import GROUP_BROKER, create_topics

from protocol.errors import ErrorCode

TIMEOUT = 60


def create_partitions(broker, topics, validate_only=False):
    """Raw CreatePartitions to the controller `broker`: [(name, error name, message)]."""
    r = raw(broker, 37, {"topics": topics, "timeout_ms": 10000, "validate_only": validate_only}, version=3)
    return [(x.name, ErrorCode(x.error_code).name, x.error_message) for x in r.results]


def assignment(zk, topic):
    return json.loads(zk.get(f"/brokers/topics/{topic}")[0])


def test_grow_a_topic_under_a_producer_and_a_group_consumer(start_broker, zk):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewPartitions

    brokers = [start_broker(i, **GROUP_BROKER) for i in (1, 2)]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    create_topics(bootstrap, {"grow": 3}, rf=2)
    topic_id = assignment(zk, "grow")["topic_id"]
    acked: dict[int, set[bytes]] = {}
    consumed: dict[int, set[bytes]] = {}
    stop, produced = threading.Event(), threading.Event()
    assigned_counts = []

    def produce():
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "topic.metadata.refresh.interval.ms": 500})

        def on_delivery(err, msg):
            if err is None:
                acked.setdefault(msg.partition(), set()).add(msg.value())

        i = 0
        while not stop.is_set():
            producer.produce("grow", value=b"%d" % i, on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            time.sleep(0.002)
        assert producer.flush(TIMEOUT) == 0
        produced.set()

    def consume():
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "growers",
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        consumer.subscribe(["grow"], on_assign=lambda c, ps: assigned_counts.append(len(ps)))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                consumed.setdefault(msg.partition(), set()).add(msg.value())
            if produced.is_set() and all(consumed.get(p, set()) >= v for p, v in acked.items()) and len(acked) == 6:
                break
        consumer.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while not consumed and time.monotonic() < deadline:
            time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_partitions([NewPartitions("grow", 6)], operation_timeout=30)
        futures["grow"].result(TIMEOUT)
        while not all(acked.get(p) for p in range(6)) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    stored = assignment(zk, "grow")
    assert sorted(stored["partitions"]) == ["0", "1", "2", "3", "4", "5"]
    assert stored["topic_id"] == topic_id and all(len(r) == 2 for r in stored["partitions"].values())
    assert sorted(acked) == list(range(6)), "every partition, new ones included, got acknowledged records"
    for p, values in acked.items():
        assert values <= consumed.get(p, set()), f"partition {p}: acknowledged records not consumed"
    assert assigned_counts[-1] == 6


def test_kafka_python_and_bad_requests(start_broker, zk):
    from kafka.admin import KafkaAdminClient, NewPartitions

    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    create_topics(brokers[1].bootstrap, {"parts": 2}, rf=2)
    controller = brokers[json.loads(zk.get("/controller")[0])["brokerid"]]
    kp = KafkaAdminClient(bootstrap_servers=brokers[2].bootstrap)
    try:
        kp.create_partitions({"parts": NewPartitions(3, [[3, 1]])})
    finally:
        kp.close()
    assert assignment(zk, "parts")["partitions"]["2"] == [3, 1]
    before = assignment(zk, "parts")
    cases = [
        ({"name": "parts", "count": 3, "assignments": None}, "INVALID_PARTITIONS", "already has 3"),
        ({"name": "parts", "count": 2, "assignments": None}, "INVALID_PARTITIONS", "higher than the requested 2"),
        ({"name": "nope", "count": 5, "assignments": None}, "UNKNOWN_TOPIC_OR_PARTITION", "does not exist"),
        (
            {"name": "parts", "count": 4, "assignments": [{"broker_ids": [1, 9]}]},
            "INVALID_REPLICA_ASSIGNMENT",
            "Unknown broker(s) in replica assignment: 9",
        ),
        (
            {"name": "parts", "count": 5, "assignments": [{"broker_ids": [1, 2]}]},
            "INVALID_REPLICA_ASSIGNMENT",
            "by 2 but 1 assignments",
        ),
        (
            {"name": "parts", "count": 4, "assignments": [{"broker_ids": [1]}]},
            "INVALID_REPLICA_ASSIGNMENT",
            "Inconsistent replication factor",
        ),
        (
            {"name": "parts", "count": 4, "assignments": [{"broker_ids": [2, 2]}]},
            "INVALID_REPLICA_ASSIGNMENT",
            "Duplicate brokers",
        ),
        ({"name": "parts", "count": 4, "assignments": None}, "NONE", None),  # validate_only
    ]
    for topic, code, words in cases:
        [(_, got, message)] = create_partitions(controller, [topic], validate_only=code == "NONE")
        assert got == code and (words is None or words in message), (topic, got, message)
    assert assignment(zk, "parts") == before
    other = next(b for b in brokers.values() if b is not controller)
    assert create_partitions(other, [{"name": "parts", "count": 4, "assignments": None}])[0][1] == "NOT_CONTROLLER"
