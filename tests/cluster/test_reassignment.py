"""Partition reassignment (KIP-455) on real clusters: {1,2,3} -> {2,3,4} under an acks=all
producer loses no acknowledged record, deletes the old replica's directory and leaves the final
assignment in ZooKeeper; a reassignment survives a kill -9 of the controller in the middle; one can
be cancelled; /admin/reassign_partitions works for tools that write it; bad requests get Kafka's
codes. kafka-python's admin client is the judge for the API."""

import json
import signal
import threading
import time

from admin_helpers import raw, wait
from replication_helpers import controller_of, log_bytes

from protocol.errors import ErrorCode

TIMEOUT = 90


def topic_znode(zk, topic):
    return json.loads(zk.get(f"/brokers/topics/{topic}")[0])


def create(bootstrap, topic, replicas):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + TIMEOUT
    while ((md := admin.list_topics(timeout=30)).controller_id < 0 or not set(replicas) <= set(md.brokers)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas])])[topic].result(TIMEOUT)


class AckedProducer:
    """An acks=all confluent producer writing distinct values until stopped; `acked` holds what
    the cluster acknowledged."""

    def __init__(self, bootstrap, topic, size=100):
        self.bootstrap, self.topic, self.size = bootstrap, topic, size
        self.acked: set[bytes] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self):
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 2})

        def delivered(err, msg):
            if err is None:
                self.acked.add(msg.value())

        i = 0
        while not self.stop.is_set():
            try:
                producer.produce(self.topic, value=b"%08d" % i + b"." * (self.size - 8), on_delivery=delivered)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)
        producer.flush(60)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(TIMEOUT)


def consume_all(bootstrap, topic):
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.time()}", "enable.auto.commit": False}
    )
    deadline = time.monotonic() + TIMEOUT
    while True:  # right after a reassignment a broker's metadata may still name the old leader:
        try:  # it answers NOT_LEADER_OR_FOLLOWER (retriable), as Kafka's brokers do
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
            break
        except KafkaException as e:
            moved = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
            if e.args[0].code() not in moved or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = set(), time.monotonic() + TIMEOUT
    last = -1
    while last < high - 1 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.add(msg.value())
            last = msg.offset()
    consumer.close()
    return values


def reassign(bootstrap, targets):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return kp.alter_partition_reassignments({TopicPartition(t, p): r for (t, p), r in targets.items()})
    finally:
        kp.close()


def settled(zk, topic, replicas):
    node = topic_znode(zk, topic)
    return node["partitions"]["0"] == replicas and not node["adding_replicas"] and not node["removing_replicas"]


def test_reassign_under_an_acks_all_producer(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3, 4)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create(bootstrap, "move", [1, 2, 3])
    with AckedProducer(bootstrap, "move") as producer:
        wait(lambda: len(producer.acked) > 2000, "a backlog")
        reassign(bootstrap, {("move", 0): [2, 3, 4]})
        wait(lambda: settled(zk, "move", [2, 3, 4]), "the reassignment to complete")
        wait(lambda: len(producer.acked) > 6000, "more acknowledged writes after the move")
    assert not (brokers[1].directory / "logs" / "move-0").exists(), "broker 1's replica deleted"
    state = json.loads(zk.get("/brokers/topics/move/partitions/0/state")[0])
    assert state["leader"] in (2, 3, 4) and set(state["isr"]) <= {2, 3, 4}
    missing = producer.acked - consume_all(bootstrap, "move")
    assert not missing, f"{len(missing)} acknowledged records lost"
    wait(
        lambda: (
            log_bytes(brokers[2], "move", 0) == log_bytes(brokers[3], "move", 0) == log_bytes(brokers[4], "move", 0)
        ),
        "identical replicas",
    )


def test_a_reassignment_survives_a_controller_failover(start_broker, zk):
    controller = start_broker(5)
    wait(lambda: controller_of(zk) == 5, "broker 5 to be the controller")
    slow = {"replica_fetch_max_bytes": 2048, "replica_fetch_response_max_bytes": 2048}
    brokers = {i: start_broker(i, **(slow if i == 4 else {})) for i in (1, 2, 3, 4)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create(bootstrap, "fo", [1, 2, 3])
    with AckedProducer(bootstrap, "fo", size=1000) as producer:
        wait(lambda: len(producer.acked) > 8000, "a backlog broker 4 needs a while to copy")
        reassign(bootstrap, {("fo", 0): [2, 3, 4]})
        wait(lambda: topic_znode(zk, "fo")["adding_replicas"] == {"0": [4]}, "the reassignment recorded")
        # broker 4 paused (SIGSTOP) until the failover is over, so it cannot finish copying first
        brokers[4].process.send_signal(signal.SIGSTOP)
        try:
            assert not settled(zk, "fo", [2, 3, 4]), "the reassignment finished before the failover"
            controller.kill()
            # one read of /controller: the killed broker's node may vanish between an exists and a get
            wait(lambda: controller_of(zk) not in (None, 5), "a new controller")
        finally:
            brokers[4].process.send_signal(signal.SIGCONT)
    # (a follower fetching 2 KiB at a time cannot catch up while the producer writes: stop it)
    wait(lambda: settled(zk, "fo", [2, 3, 4]), "the new controller to complete it")
    missing = producer.acked - consume_all(bootstrap, "fo")
    assert not missing, f"{len(missing)} acknowledged records lost"
    if controller_of(zk) != 1:
        wait(lambda: not (brokers[1].directory / "logs" / "fo-0").exists(), "broker 1's replica deleted")


def test_cancel_legacy_znode_and_bad_requests(start_broker, zk):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    brokers = {i: start_broker(i, **({"replica_fetch_max_bytes": 1024} if i == 4 else {})) for i in (1, 2, 3, 4)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create(bootstrap, "c", [1, 2])
    create(bootstrap, "legacy", [1, 2])
    with AckedProducer(bootstrap, "c", size=1000) as producer:
        wait(lambda: len(producer.acked) > 8000, "a backlog")
    controller = brokers[controller_of(zk)]

    def alter(partitions):
        body = {
            "timeout_ms": 10000,
            "topics": [
                {"name": t, "partitions": [{"partition_index": p, "replicas": r} for p, r in ps]}
                for t, ps in partitions.items()
            ],
        }
        r = raw(controller, 45, body)
        return [(ErrorCode(p.error_code).name, p.error_message) for t in r.responses for p in t.partitions]

    assert alter({"c": [(0, [3, 4])]}) == [("NONE", None)]
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        ongoing = kp.list_partition_reassignments()
        assert TopicPartition("c", 0) in ongoing, ongoing
        assert alter({"c": [(0, None)]}) == [("NONE", None)]  # cancel: back to the origin
    finally:
        kp.close()
    wait(lambda: settled(zk, "c", [1, 2]), "the cancellation to restore the origin")
    wait(lambda: not (brokers[4].directory / "logs" / "c-0").exists(), "the cancelled replica deleted")

    # tools that write /admin/reassign_partitions directly
    zk.create(
        "/admin/reassign_partitions",
        json.dumps({"version": 1, "partitions": [{"topic": "legacy", "partition": 0, "replicas": [2, 3]}]}).encode(),
    )
    wait(lambda: settled(zk, "legacy", [2, 3]), "the znode-triggered reassignment")
    wait(lambda: not zk.exists("/admin/reassign_partitions"), "the znode removed when done")

    before = topic_znode(zk, "c")
    cases = [
        ({"c": [(0, [1, 9])]}, "INVALID_REPLICA_ASSIGNMENT", "non-existent brokerIDs: 9"),
        ({"c": [(0, [])]}, "INVALID_REPLICA_ASSIGNMENT", "empty"),
        ({"c": [(0, [2, 2])]}, "INVALID_REPLICA_ASSIGNMENT", "Duplicate"),
        ({"c": [(0, None)]}, "NO_REASSIGNMENT_IN_PROGRESS", "No reassignment"),
        ({"c": [(5, [1, 2])]}, "UNKNOWN_TOPIC_OR_PARTITION", "Unknown partition"),
        ({"nope": [(0, [1, 2])]}, "UNKNOWN_TOPIC_OR_PARTITION", "Unknown partition"),
    ]
    for request, code, words in cases:
        [(got, message)] = alter(request)
        assert got == code and words in message, (request, got, message)
    assert topic_znode(zk, "c") == before
    other = next(b for b in brokers.values() if b is not controller)
    assert raw(other, 45, {"timeout_ms": 1000, "topics": []}).error_code == ErrorCode.NOT_CONTROLLER
