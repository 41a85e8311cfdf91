"""Helpers for the consumer group tests with real clients: broker settings that make a one-broker
cluster serve groups quickly, topic creation through confluent's AdminClient, and producing."""

import time

GROUP_BROKER = {
    "offsets_topic_replication_factor": 1,
    "offsets_topic_num_partitions": 4,
    "group_initial_rebalance_delay_ms": 0,
}
TIMEOUT = 60


def create_topics(bootstrap: str, topics: dict[str, int], rf: int = 1, configs: dict | None = None) -> None:
    """confluent-kafka's CreateTopics of `topics` ({name: partitions}), each with `configs`
    ({name: {key: value}}) if given, once its AdminClient knows the controller."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + TIMEOUT
    # librdkafka waits long for a controller it was told is unknown (-1): ask once one is known,
    # and once it knows `rf` brokers (else INVALID_REPLICATION_FACTOR while one still registers)
    while ((md := admin.list_topics(timeout=TIMEOUT)).controller_id < 0 or len(md.brokers) < rf) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    new = [NewTopic(t, n, rf, config=(configs or {}).get(t, {})) for t, n in topics.items()]
    futures = admin.create_topics(new, operation_timeout=30)
    for f in futures.values():
        f.result(TIMEOUT)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % partitions)
    assert producer.flush(TIMEOUT) == 0
