"""`make bench`, minikafka.testing part (issue 38; the issue names no numbers, the targets are ours):

1. time to a usable cluster, 1 and 3 brokers: `KafkaCluster.start()` (ZooKeeper, the brokers, all
   registered with a controller) plus the first topic created and one record written with
   confluent-kafka and read back - what a test's first line waits for; median of 3 starts;
2. testcontainers' Kafka beside it: not measurable on this machine (no container registry, so its
   image cannot be pulled); said so in the table rather than quoted from elsewhere;
3. the `kafka_topic` factory's cost per test: create (every broker knows the leaders) + delete
   (every broker forgot it), median of 20 on a running 1-broker and 3-broker cluster;
4. `close()`: every process gone and the directory removed.

Results: a markdown table (measured vs target) printed, written to `bench/results/testing.md`
and (unless --quick) copied into docs/benchmarks.md between the `bench:testing` markers.
"""

from __future__ import annotations

import statistics
import time

from bench import targets
from minikafka.testing import KafkaCluster


def _usable(brokers: int) -> tuple[float, float, float]:
    """Seconds to start, to the first record read back, and to close."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    started = time.monotonic()
    cluster = KafkaCluster(brokers).start()
    try:
        up = time.monotonic() - started
        topic = cluster.admin().create_topic("first", 1, min(3, brokers))
        config = cluster.client_config("confluent-kafka")
        producer = Producer(config)
        producer.produce(topic, b"hello")
        assert producer.flush(30) == 0
        consumer = Consumer({**config, "group.id": "bench", "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(30)
        usable = time.monotonic() - started
        consumer.close()
        assert message is not None and message.value() == b"hello"
    finally:
        closing = time.monotonic()
        cluster.close()
        closed = time.monotonic() - closing
    return up, usable, closed


def _topic_overhead(brokers: int, runs: int) -> float:
    """Median seconds of one create_topic + delete_topic."""
    with KafkaCluster(brokers) as cluster:
        admin = cluster.admin()
        times = []
        for i in range(runs):
            started = time.monotonic()
            admin.create_topic(f"t{i}", 1, min(3, brokers))
            admin.delete_topic(f"t{i}")
            times.append(time.monotonic() - started)
    return statistics.median(times)


def run(quick: bool) -> list[targets.Row]:
    rows: list[targets.Row] = []
    starts, topic_runs = (1, 3) if quick else (3, 20)
    for brokers, goal in ((1, 5.0), (3, 10.0)):
        measured = [_usable(brokers) for _ in range(starts)]
        up = statistics.median(m[0] for m in measured)
        usable = statistics.median(m[1] for m in measured)
        closed = statistics.median(m[2] for m in measured)
        rows.append(
            (
                f"{brokers}-broker cluster usable: started {up:.1f} s, then a topic and one record round-trip "
                f"(confluent-kafka); close {closed:.1f} s; median of {starts}",
                f"{usable:.1f} s",
                f"< {goal:.0f} s",
                usable < goal,
            )
        )
    rows.append(
        (
            "testcontainers' Kafka (an image pull, then a JVM broker in a container)",
            "not measurable here: this machine has no container registry, so the image cannot be pulled",
            "-",
            None,
        )
    )
    for brokers in (1, 3):
        overhead = _topic_overhead(brokers, topic_runs)
        rows.append(
            (
                f"kafka_topic factory per test, {brokers}-broker cluster: create (leaders known on every broker) "
                f"+ delete (gone everywhere), median of {topic_runs}",
                f"{overhead * 1000:.0f} ms",
                "< 200 ms",
                overhead < 0.2,
            )
        )
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 38, "testing")


if __name__ == "__main__":
    raise SystemExit(main())
