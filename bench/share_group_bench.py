"""`make bench`, share groups (issue 46's targets, KIP-932), on a real broker process driven by
confluent-kafka 2.16 (librdkafka): `ShareConsumer` members and, for comparison, `Consumer`
members of a consumer group, each in its own thread.

1. Records/s: a share group of 1, 3 and 10 members (implicit acknowledgement: each poll
   acknowledges the last one's records, durably at the share coordinator) and a consumer group
   of 3 members (auto commit), each on a 3-partition topic of its own, read `RECORDS` records
   of 100 bytes produced while they read (once the group reads: a warm-up record per partition
   arrived). The rate is the records over the time from the producer's start to the last record
   received; the producer alone is the ceiling. (A backlog read from its first record would
   flatter the consumer group, whose client prefetches megabytes before handing out the first
   record; one read from the subscription would count the classic protocol's rebalances.)
   Target: 3 share consumers reach at least 50% of the consumer group's records/s.
2. Broker CPU per acknowledged record: the broker process's CPU time (user + system, /proc) over
   the 3-member share group's run, divided by its records (no target: reported).
3. Join time: 10 share consumers start at once; time until every one of them holds partitions
   at the group's assignment epoch (ShareGroupDescribe), with Kafka's default heartbeat interval
   (5 s): members that joined early learn the final assignment at their next heartbeat (no
   target: reported).

Results: a markdown table (measured vs target) printed, written to `bench/results/share_groups.md`
and (unless --quick) copied into docs/benchmarks.md between the `bench:share_groups` markers.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import trio

from bench import targets
from bench.consumer_group_bench import cpu_seconds
from client import Cluster, ConnectionClosed, KafkaError
from client import share_groups as sg
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess

TOPIC, PARTITIONS = "share-bench", 3
RECORDS = 1_000_000
BROKER: dict[str, str] = {
    "offsets_topic_num_partitions": "3",
    "offsets_topic_replication_factor": "1",
    "share_coordinator_state_topic_num_partitions": "3",
    "share_coordinator_state_topic_replication_factor": "1",
    "share_coordinator_state_topic_min_isr": "1",
    "group_initial_rebalance_delay_ms": "0",
}


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, records: int, value: bytes = b"x" * 100) -> float:
    """Produce `records` round-robin over the partitions; -> seconds until all are acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000})
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.monotonic() - started


def _earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest on the share group."""

    async def alter() -> None:
        async with Cluster.open(bootstrap) as cluster:
            await sg.alter_group_configs(cluster, group, {"share.auto.offset.reset": "earliest"})

    trio.run(alter)


class _Counter:
    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.count += n
            self.last = time.monotonic()


def _read(make, share: bool, counter: _Counter, stop: threading.Event) -> None:
    consumer = make()
    try:
        while not stop.is_set():
            batch = consumer.poll(0.2) if share else consumer.consume(500, 0.2)
            got = sum(1 for m in batch if m.error() is None)
            if got:
                counter.add(got)
    finally:
        consumer.close()  # a share consumer's close acknowledges its last records


def read_rate(bootstrap: str, members: int, records: int, share: bool) -> float:
    """Records/s `members` consumers (of a share group, or a consumer group) take from a topic
    while `records` are produced to it: once the group reads (a warm-up record per partition
    arrived), the producer starts; the rate is `records` over the time from its start to the
    last record received."""
    from confluent_kafka import Consumer, ShareConsumer

    kind = "share" if share else "group"
    topic = group = f"{TOPIC}-{kind}-{members}"
    _create(bootstrap, topic)
    if share:
        _earliest(bootstrap, group)

    def make():
        c: Consumer | ShareConsumer
        if share:
            c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        else:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        return c

    counter, stop = _Counter(), threading.Event()
    threads = [threading.Thread(target=_read, args=(make, share, counter, stop)) for _ in range(members)]
    for t in threads:
        t.start()
    try:
        _produce(bootstrap, topic, PARTITIONS, b"warm-up")
        _wait(lambda: counter.count >= PARTITIONS, 60, f"{members} {kind} consumers never read")
        started = time.monotonic()
        _produce(bootstrap, topic, records)
        _wait(lambda: counter.count >= PARTITIONS + records, 300, f"{members} {kind} consumers fell short")
        return records / (counter.last - started)
    finally:
        stop.set()
        for t in threads:
            t.join()


def _wait(done, seconds: float, failure: str) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.01)


JOIN_TIMEOUT_S = 120


async def _stable(bootstrap: str, group: str, members: int) -> None:
    """Until the group has `members` members, each holding partitions at the assignment epoch
    (raises trio.TooSlowError after JOIN_TIMEOUT_S)."""
    async with Cluster.open(bootstrap) as cluster:
        with trio.fail_after(JOIN_TIMEOUT_S):
            await _until_stable(cluster, group, members)


async def _until_stable(cluster: Cluster, group: str, members: int) -> None:
    while True:
        try:
            d = await sg.describe_share_group(cluster, group)
        except (KafkaError, ConnectionClosed):  # not formed yet (GROUP_ID_NOT_FOUND), or moving
            d = {"members": []}
        ms = d["members"]
        if len(ms) == members and all(m["assignment"] and m["member_epoch"] == d["assignment_epoch"] for m in ms):
            return
        await trio.sleep(0.05)


def join_time(bootstrap: str, members: int) -> float:
    """Seconds from `members` share consumers starting until each holds partitions at the
    group's assignment epoch."""
    from confluent_kafka import ShareConsumer

    group = f"join-{members}-{time.monotonic_ns()}"
    stop = threading.Event()

    def member() -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([TOPIC])
        try:
            while not stop.is_set():
                c.poll(0.2)
        finally:
            c.close()

    threads = [threading.Thread(target=member) for _ in range(members)]
    started = time.monotonic()
    for t in threads:
        t.start()
    try:
        trio.run(_stable, bootstrap, group, members)
        return time.monotonic() - started
    finally:
        stop.set()
        for t in threads:
            t.join()


def run(quick: bool) -> list[targets.Row]:
    records = 3_000 if quick else RECORDS
    rows: list[targets.Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        zk = ZooKeeperProcess.start(root / "zk")
        try:
            broker = BrokerProcess.create(1, root / "b", zk.connect + "/sgb", 0, **BROKER).start()
            assert broker.process is not None
            _create(broker.bootstrap, TOPIC)
            produce_rate = records / _produce(broker.bootstrap, TOPIC, records)
            group_rate = read_rate(broker.bootstrap, 3, records, share=False)
            share_rates = {}
            cpu_per_record = 0.0
            for members in (1, 3, 10):
                before = cpu_seconds(broker.process.pid)
                share_rates[members] = read_rate(broker.bootstrap, members, records, share=True)
                if members == 3:
                    cpu_per_record = (cpu_seconds(broker.process.pid) - before) / records * 1e6
            joined = join_time(broker.bootstrap, 10)
            broker.kill()
        finally:
            zk.stop()
    rows.append((f"producer alone, {records:,} records (the ceiling)", f"{produce_rate:,.0f} rec/s", "-", None))
    rows.append((f"consumer group, 3 members, {records:,} records", f"{group_rate:,.0f} rec/s", "-", None))
    for members, rate in share_rates.items():
        ratio = rate / group_rate
        target = ">= 50% of the consumer group's" if members == 3 else "-"
        rows.append(
            (
                f"share group, {members} member{'s' if members > 1 else ''}",
                f"{rate:,.0f} rec/s ({ratio:.0%})",
                target,
                ratio >= 0.5 if members == 3 else None,
            )
        )
    rows.append(
        ("broker CPU per record, 3 share members (produce, fetch, acknowledge)", f"{cpu_per_record:.1f} µs", "-", None)
    )
    rows.append(("10 share consumers join (Kafka's 5 s heartbeat interval)", f"{joined:.2f} s", "-", None))
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 46, "share_groups")


if __name__ == "__main__":
    raise SystemExit(main())
