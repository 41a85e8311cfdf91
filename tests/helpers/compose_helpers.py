"""What the docker-compose tests share: an acks=all producer (confluent-kafka) that writes while
faults are injected, metadata reads, and the replicas' log bytes read inside the containers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from local_cluster import compose
from local_cluster.compose import ComposeCluster
from local_cluster.ports import free_port


def skip_without_docker(what: str) -> None:
    """Skip the calling test module, saying why, where no Docker engine answers."""
    reason = compose.docker_unavailable()
    if reason:
        pytest.skip(f"{what} needs a Docker engine: {reason}", allow_module_level=True)


@contextlib.contextmanager
def running_cluster(prefix: str, overrides: tuple[Path, ...] = ()) -> Iterator[ComposeCluster]:
    """The images built (or reused), then a compose project of its own on free host ports, up and
    healthy; `down -v` after."""
    compose.build_images(log=lambda line: print(line, file=sys.stderr))
    cluster = ComposeCluster(
        f"{prefix}-{os.getpid()}",
        (free_port(), free_port(), free_port()),
        overrides=overrides,
        metrics_ports=(free_port(), free_port(), free_port()),
    )
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


@dataclass
class Produced:
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    failed: dict[bytes, str] = field(default_factory=dict)
    sent: int = 0


def produce_during(
    bootstrap: str,
    topic: str,
    seconds: float,
    steps: list[tuple[float, Callable[[], None]]] = (),
    rate: int = 400,
    client: dict | None = None,
) -> Produced:
    """Send values unique to this call (`rate` per second, idempotent, acks=all) for `seconds`, running each
    step at its time (seconds from the start) between sends; then wait for every delivery report."""
    from confluent_kafka import Producer

    out = Produced()

    def delivered(err, msg) -> None:
        if err is None:
            out.acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            out.failed[msg.value()] = str(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.timeout.ms": 90000,
            "request.timeout.ms": 10000,
            **(client or {}),
        }
    )
    prefix = b"%d-" % time.monotonic_ns()
    pending = sorted(steps, key=lambda s: s[0])
    started = time.monotonic()
    while (now := time.monotonic() - started) < seconds:
        while pending and pending[0][0] <= now:
            pending.pop(0)[1]()
        producer.produce(topic, prefix + b"%08d" % out.sent, on_delivery=delivered)
        out.sent += 1
        producer.poll(0)
        time.sleep(1 / rate)
    for _, step in pending:
        step()
    assert producer.flush(120) == 0, "delivery reports still pending after 120 s"
    return out


def consume_all(
    bootstrap: str, topic: str, timeout_s: float = 90, client: dict | None = None
) -> dict[bytes, tuple[int, int]]:
    """Every record of `topic` up to each partition's high watermark as it is when called:
    value -> (partition, offset)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compose-check", "enable.auto.commit": False, **(client or {})}
    )
    ids = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in ids}
    consumer.assign([TopicPartition(topic, p, 0) for p in ids])
    positions = dict.fromkeys(ids, 0)
    seen: dict[bytes, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout_s
    while any(positions[p] < ends[p] for p in ids):
        assert time.monotonic() < deadline, f"read up to {positions}, high watermarks {ends}"
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen[msg.value()] = (msg.partition(), msg.offset())
            positions[msg.partition()] = msg.offset() + 1
    consumer.close()
    return seen


def partitions(bootstrap: str, topic: str, client: dict | None = None) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader id, ISR), from a Metadata request (-1: no leader)."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, **(client or {})}).list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.isrs)) for p in md.topics[topic].partitions.values()}


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if predicate():
                return
        except Exception:  # a broker restarting or cut off: ask again
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.5)


def _led_with_full_isr(view: dict[int, tuple[int, list[int]]]) -> bool:
    """Every partition in `partitions`' answer has a leader and all 3 replicas in its ISR."""
    return all(len(isr) == 3 and leader >= 0 for leader, isr in view.values())


def wait_isr_full(cluster: ComposeCluster, topic: str, timeout_s: float = 90, client: dict | None = None) -> None:
    wait_until(
        lambda: _led_with_full_isr(partitions(cluster.bootstrap, topic, client)),
        timeout_s,
        f"every partition of {topic} to have a leader and 3 replicas in its ISR",
    )


def wait_brokers_agree(cluster: ComposeCluster, topic: str, timeout_s: float = 90) -> None:
    """Until every broker, asked alone, names the same leader and a full ISR for each partition of
    `topic`. After a partition heals, the cut-off old leader still answers as the leader it was
    (its metadata and high watermark are stale, as a zombie Kafka leader's are) until the
    controller's LeaderAndIsr reaches it; a read that must see everything acknowledged waits for
    this first."""

    views: list[dict] = []

    def agree() -> bool:
        views[:] = [
            {p: (leader, sorted(isr)) for p, (leader, isr) in partitions(f"{cluster.host}:{port}", topic).items()}
            for port in cluster.ports
        ]
        return all(view == views[0] for view in views) and _led_with_full_isr(views[0])

    try:
        wait_until(
            agree, timeout_s, f"every broker to name the same leader and a full ISR for each partition of {topic}"
        )
    except AssertionError as e:
        raise AssertionError(f"{e}; last views, broker by broker: {views}") from None


def replica_log_digest(cluster: ComposeCluster, service: str, topic: str, partition: int) -> str:
    """sha256 of the partition's segment files, concatenated in offset order, in the container."""
    directory = f"/var/lib/minikafka/{topic}-{partition}"
    script = f"cat $(ls {directory}/*.log | sort) | sha256sum"
    r = subprocess.run(
        ["docker", "exec", cluster.container(service), "sh", "-c", script], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[0]


def wait_identical_replicas(cluster: ComposeCluster, topic: str, partition_count: int, timeout_s: float = 60) -> None:
    """Every partition's log is byte-identical on the three brokers (followers hold the leader's batches)."""
    for p in range(partition_count):
        wait_until(
            lambda p=p: len({replica_log_digest(cluster, s, topic, p) for s in ("broker1", "broker2", "broker3")}) == 1,
            timeout_s,
            f"identical logs of {topic}-{p} on every broker",
        )
