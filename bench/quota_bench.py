"""`make bench`, quota part (issue 34), on one real broker process and one ZooKeeper.

Targets (the issue's): with a quota of 1 MB/s (producer_byte_rate and consumer_byte_rate) on a
client id, confluent-kafka's and kafka-python's producers and consumers under that id run within
20% of it, never erring; a client without a quota, running beside the capped one, is not slowed
(its rate at least 80% of what it reaches alone).

Each capped client runs for `seconds`; its rate is measured after the first quota window (11 s by
default: a first burst of up to quota x 10 s passes unthrottled, as in Kafka), from bytes
acknowledged (producers) or received (consumers). --quick: 64 KB/s for 4 s past a 3 s window (quota.window.num=3).

Results: a markdown table printed, written to `bench/results/quota.md`, and (unless --quick)
copied into docs/benchmarks.md between the `bench:quota` markers.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import targets
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess

VALUE = 1000  # bytes per record value
OUTSTANDING = 256 * 1000  # bytes a producer may have sent and not yet had acknowledged
WINDOW_S = 11  # quota.window.num x quota.window.size.seconds: Kafka's defaults, 11 x 1 s
QUICK_WINDOW_S = 3  # --quick: quota.window.num=3, the same rules over a shorter window


def _set_quota(bootstrap: str, client_id: str, rate: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", "configs", "--bootstrap-server", bootstrap, "--alter"]
        + ["--entity-type", "clients", "--entity-name", client_id]
        + ["--add-config", f"producer_byte_rate={rate},consumer_byte_rate={rate}"],
        check=True,
        capture_output=True,
        timeout=60,
    )


def _create_topic(bootstrap: str, name: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", "topics", "create", "--bootstrap-server", bootstrap]
        + ["--topic", name, "--partitions", "1", "--replication-factor", "1"],
        check=True,
        capture_output=True,
        timeout=60,
    )


def _measured(samples: list[tuple[float, int]], start: float) -> float:
    """Bytes/s between the first sample at or after `start` and the last."""
    after = [(t, b) for t, b in samples if t >= start]
    if len(after) < 2:
        return 0.0
    (t0, b0), (t1, b1) = after[0], after[-1]
    return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0


def _confluent_producer(
    bootstrap: str, client_id: str, topic: str, seconds: float, window_s: float
) -> tuple[float, int]:
    """(bytes/s acknowledged after the first window, errors)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5})
    acked, errors, samples = [0], [0], []

    def delivered(err, msg):
        if err:
            errors[0] += 1
        else:
            acked[0] += len(msg.value())

    started, sent = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        if sent - acked[0] - errors[0] * VALUE < OUTSTANDING:
            producer.produce(topic, b"v" * VALUE, on_delivery=delivered)
            sent += VALUE
            producer.poll(0)
        else:
            producer.poll(0.01)
        samples.append((time.monotonic() - started, acked[0]))
    producer.flush(60)
    return _measured(samples, window_s), errors[0]


def _kafka_python_producer(
    bootstrap: str, client_id: str, topic: str, seconds: float, window_s: float
) -> tuple[float, int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5)
    acked, errors, samples = [0], [0], []
    lock = threading.Lock()

    def ok(_metadata):
        with lock:
            acked[0] += VALUE

    def failed(_exc):
        errors[0] += 1

    started, sent = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        if sent - acked[0] - errors[0] * VALUE < OUTSTANDING:
            producer.send(topic, b"v" * VALUE).add_callback(ok).add_errback(failed)
            sent += VALUE
        else:
            time.sleep(0.01)
        samples.append((time.monotonic() - started, acked[0]))
    producer.flush(60)
    producer.close()
    return _measured(samples, window_s), errors[0]


def _confluent_consumer(
    bootstrap: str, client_id: str, topic: str, seconds: float, window_s: float
) -> tuple[float, int]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"bench-{client_id}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got, errors, samples = 0, 0, []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        msg = consumer.poll(0.1)
        if msg is not None:
            if msg.error():
                errors += 1
            else:
                got += len(msg.value())
        samples.append((time.monotonic() - started, got))
    consumer.close()
    return _measured(samples, window_s), errors


def _kafka_python_consumer(
    bootstrap: str, client_id: str, topic: str, seconds: float, window_s: float
) -> tuple[float, int]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=client_id, auto_offset_reset="earliest")
    got, samples = 0, []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        for records in consumer.poll(timeout_ms=100).values():
            got += sum(len(r.value) for r in records)
        samples.append((time.monotonic() - started, got))
    consumer.close()
    return _measured(samples, window_s), 0


def run(quick: bool) -> list[targets.Row]:
    quota = 64 * 1024 if quick else 1024 * 1024
    window_s = QUICK_WINDOW_S if quick else WINDOW_S
    seconds = window_s + (4 if quick else 20)
    rows: list[targets.Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperProcess.start(Path(tmp) / "zk")
        broker = BrokerProcess.create(
            1,
            Path(tmp) / "broker",
            zk.connect,
            offsets_topic_replication_factor=1,
            group_initial_rebalance_delay_ms=0,
            quota_window_num=window_s,
        ).start()
        try:
            bootstrap = f"{broker.host}:{broker.port}"
            _create_topic(bootstrap, "quota-bench")
            free_alone, _ = _confluent_producer(bootstrap, "free", "quota-bench", window_s + 5, window_s)
            clients = (
                ("confluent-kafka producer", _confluent_producer),
                ("kafka-python producer", _kafka_python_producer),
                ("confluent-kafka consumer", _confluent_consumer),
                ("kafka-python consumer", _kafka_python_consumer),
            )
            for name, _ in clients:
                _set_quota(bootstrap, "capped-" + name.replace(" ", "-"), quota)
            time.sleep(1)  # the changes reach the broker through /config/changes
            measured: dict[str, tuple[float, int]] = {}

            def measure(name: str, fn) -> None:
                measured[name] = fn(bootstrap, "capped-" + name.replace(" ", "-"), "quota-bench", seconds, window_s)

            # each client has a quota of its own: --quick measures them at once (its numbers mean
            # nothing), the full run one after another so they do not share the CPU
            if quick:
                threads = [threading.Thread(target=measure, args=client) for client in clients]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            else:
                for client in clients:
                    measure(*client)
            for name, _ in clients:
                rate, errors = measured[name]
                ok = abs(rate - quota) <= 0.2 * quota and errors == 0
                rows.append(
                    (
                        f"{name} under a {quota // 1024} KB/s quota (rate after the first window)",
                        f"{rate / 1024:.0f} KB/s ({rate / quota:.2f} x quota), {errors} errors",
                        "within 20%, no errors",
                        ok,
                    )
                )
            # a client without a quota beside a capped one
            capped = "capped-beside"
            _set_quota(bootstrap, capped, quota)
            time.sleep(1)
            beside = threading.Thread(
                target=_confluent_producer, args=(bootstrap, capped, "quota-bench", seconds, window_s)
            )
            beside.start()
            free_beside, _ = _confluent_producer(bootstrap, "free-2", "quota-bench", window_s + 5, window_s)
            beside.join()
            ratio = free_beside / free_alone if free_alone else 0.0
            rows.append(
                (
                    "a producer without a quota, beside a capped one, vs alone",
                    f"{free_beside / 1e6:.1f} vs {free_alone / 1e6:.1f} MB/s ({ratio:.2f})",
                    ">= 0.80",
                    ratio >= 0.8,
                )
            )
        finally:
            broker.kill()
            zk.stop()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 34, "quota")


if __name__ == "__main__":
    sys.exit(main())
