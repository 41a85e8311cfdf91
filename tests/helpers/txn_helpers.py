"""Helpers for the transaction tests with real clients: broker settings that make small clusters
serve transactions quickly, and reading a topic back under either isolation level."""

import time

from group_helpers import GROUP_BROKER

TXN_BROKER = GROUP_BROKER | {
    "transaction_state_log_replication_factor": 1,
    "transaction_state_log_min_isr": 1,
    "transaction_state_log_num_partitions": 4,
    "transaction_abort_timed_out_transaction_cleanup_interval_ms": 500,
}
TIMEOUT = 60


def consume_all(bootstrap: str, topic: str, isolation: str, expected: int | None = None, idle_s: float = 3.0) -> list:
    """Every (key, value) confluent-kafka reads from `topic` under `isolation`, from the start of
    every partition (assigned: no group coordinator needed): until `expected` records arrived
    (then a short idle wait for extras) or `idle_s` of silence."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    partitions = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    out: list = []
    deadline = time.monotonic() + TIMEOUT
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                done = expected is not None and len(out) >= expected
                if time.monotonic() - last > (0.5 if done else idle_s) and (done or expected is None or out):
                    break
                continue
            out.append((msg.key(), msg.value()))
            last = time.monotonic()
    finally:
        consumer.close()
    return out
