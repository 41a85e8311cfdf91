"""Exactly-once consume-transform-produce with confluent-kafka transactions (KIP-98, KIP-447).

The job reads `flights` (keyed by carrier) as a member of group `carrier-counts` and writes each
carrier's running flight count to `carrier-counts` (key carrier, value the count). Each batch of
records is one transaction: the counts it produces and the group's new offsets
(`send_offsets_to_transaction`) commit together or not at all. A failed transaction is aborted, the
in-memory counts go back to where it began and the consumer rewinds to the committed offsets; a
restarted job restores its counts from `carrier-counts` (read_committed); a fatal producer error
(this instance fenced) restarts the job in-process the same way. So, whatever fails, a
read_committed reader of `carrier-counts` sees for every carrier exactly 1, 2, ..., n.

Standalone (`python -m examples.exactly_once [--rows N]`): a fresh local 3-broker cluster, the
first N flights loaded, the job run while the leader of a `carrier-counts` partition and then the
transaction coordinator are killed (and started again), the result verified; exit 1 if a check
fails. The suite runs `run_job` and `verify` on a small slice (tests/cluster/test_exactly_once_example.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from minikafka_cli.flights import CLI, cli, cluster_up, flight_rows

SOURCE, SINK, GROUP, TRANSACTIONAL_ID = "flights", "carrier-counts", "carrier-counts", "carrier-counts-job"
TIMEOUT = 60
#: librdkafka debug contexts for the job's clients (e.g. "eos,cgrp,protocol,broker"), from the
#: environment: how a hang is diagnosed
DEBUG = {"debug": os.environ["EXACTLY_ONCE_DEBUG"]} if os.environ.get("EXACTLY_ONCE_DEBUG") else {}


def create_topics(bootstrap: str, brokers: int = 3) -> None:
    """Once the cluster names a controller and `brokers` brokers: the job's input and output topics
    (3 partitions, RF 3, min.insync.replicas 2), through confluent-kafka's AdminClient."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + TIMEOUT
    while not ((md := admin.list_topics(timeout=TIMEOUT)).controller_id >= 0 and len(md.brokers) == brokers):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not show {brokers} brokers and a controller")
        time.sleep(0.1)
    topics = [NewTopic(t, 3, 3, config={"min.insync.replicas": "2"}) for t in (SOURCE, SINK)]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT)


def load_flights(bootstrap: str, rows: int | None) -> dict[str, int]:
    """Produce the first `rows` flights keyed by carrier (acks=all); returns flights per carrier."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    per_carrier: dict[str, int] = {}
    for line in flight_rows(rows):
        carrier, value = line.split("\t", 1)
        per_carrier[carrier] = per_carrier.get(carrier, 0) + 1
        producer.produce(SOURCE, key=carrier.encode(), value=value.encode())
        producer.poll(0)
    if producer.flush(TIMEOUT) != 0:
        raise RuntimeError("some flights were not acknowledged")
    return per_carrier


def read_committed(bootstrap: str, topic: str, timeout_s: float = TIMEOUT) -> list[tuple[str, int]]:
    """Every (key, value as int) of `topic` a read_committed consumer sees now, in partition order:
    each partition read until librdkafka reports its end (`enable.partition.eof`: for read_committed,
    the partition's last stable offset). Raises TimeoutError when some partition has not reached its
    end within `timeout_s` (monotonic seconds): a partial read would restore wrong counts.

    It used to stop after 2 s without a message, which a loaded machine can exceed before the first
    fetch is answered: a restarted job then restored only a prefix of its counts."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    by_partition: dict[int, list[tuple[str, int]]] = {}
    try:
        partitions = consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
        unread = set(partitions)
        deadline = time.monotonic() + timeout_s
        while unread:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} partitions {sorted(unread)} not read to their end in {timeout_s} s")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    unread.discard(msg.partition())
                continue
            by_partition.setdefault(msg.partition(), []).append((msg.key().decode(), int(msg.value())))
    finally:
        consumer.close()
    return [kv for p in sorted(by_partition) for kv in by_partition[p]]


def _commit(producer) -> None:
    from confluent_kafka import KafkaException

    while True:
        try:
            producer.commit_transaction(TIMEOUT)
            return
        except KafkaException as e:
            if not e.args[0].retriable():
                raise


def _rewind(consumer) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    for tp in consumer.committed(consumer.assignment(), timeout=TIMEOUT):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def _start(bootstrap: str):
    """A (re)started job: a transactional producer (whose `init_transactions` fences any previous
    instance and aborts what it left open), the counts committed so far, and a consumer that
    resumes from the group's committed offsets."""
    from confluent_kafka import Consumer, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TRANSACTIONAL_ID,
            "linger.ms": 5,
            # librdkafka issue #5511 (open in 2.16): when the group coordinator's broker dies and
            # leaves the metadata, send_offsets_to_transaction waits, past its timeout (#5456),
            # until some connection changes state. Idle connections closed after 30 s are such
            # changes; by default (never) the job waited for the brokers' connections.max.idle.ms
            # (10 minutes) to close one.
            "connections.max.idle.ms": 30000,
        }
        | DEBUG
    )
    producer.init_transactions(TIMEOUT)
    counts: dict[str, int] = {}
    for carrier, count in read_committed(bootstrap, SINK):
        counts[carrier] = count  # the latest committed count of each carrier
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
        | DEBUG
    )
    consumer.subscribe([SOURCE])
    return producer, consumer, counts


def run_job(
    bootstrap: str,
    expected_rows: int,
    *,
    batch: int = 100,
    on_progress: Callable[[int], None] | None = None,
    restarts: list[str] | None = None,
    timeout_s: float = 600.0,
) -> dict[str, int]:
    """Count flights per carrier into `carrier-counts`, one transaction per batch, until
    `expected_rows` flights are counted or `timeout_s` (monotonic seconds) passed; returns the
    counts. A fatal producer error (e.g. the producer was fenced) restarts the job as its
    supervisor would: a new producer and consumer, counts restored from what was committed; each
    restart's reason is appended to `restarts`."""
    from confluent_kafka import KafkaException

    producer, consumer, counts = _start(bootstrap)
    processed = sum(counts.values())
    deadline = time.monotonic() + timeout_s
    try:
        while processed < expected_rows and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(batch, timeout=1.0) if not m.error()]
            if not msgs:
                continue
            before = dict(counts)
            try:
                producer.begin_transaction()
                for m in msgs:
                    carrier = m.key().decode()
                    counts[carrier] = counts.get(carrier, 0) + 1
                    producer.produce(SINK, key=m.key(), value=str(counts[carrier]).encode())
                positions = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
                _commit(producer)
            except KafkaException as e:
                error = e.args[0]
                if not error.fatal() and error.txn_requires_abort():
                    try:
                        producer.abort_transaction(TIMEOUT)
                    except KafkaException as abort_failed:  # e.g. fenced while aborting
                        error = abort_failed.args[0]
                    else:
                        counts = before
                        _rewind(consumer)
                        continue
                if not error.fatal():
                    raise
                if restarts is not None:
                    restarts.append(error.str())
                consumer.close()
                producer, consumer, counts = _start(bootstrap)
                processed = sum(counts.values())
                continue
            processed += len(msgs)
            if on_progress is not None:
                on_progress(processed)
    finally:
        consumer.close()
    return counts


def verify(bootstrap: str, per_carrier: dict[str, int]) -> list[str]:
    """What a read_committed reader of `carrier-counts` shows that exactly-once forbids."""
    seen: dict[str, list[int]] = {}
    for carrier, count in read_committed(bootstrap, SINK):
        seen.setdefault(carrier, []).append(count)
    problems = []
    for carrier, n in sorted(per_carrier.items()):
        if seen.get(carrier) != list(range(1, n + 1)):
            got = seen.get(carrier, [])
            problems.append(f"{carrier}: {len(got)} counts, last {got[-1:]} (expected 1..{n})")
    problems += [f"{c}: counted but not in the input" for c in set(seen) - set(per_carrier)]
    return problems


def coordinator_of(bootstrap: str, transactional_id: str) -> int:
    """The broker coordinating `transactional_id` (`minikafka transactions describe`)."""
    out = subprocess.run(
        CLI + ["transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id", transactional_id],
        capture_output=True,
        text=True,
        check=True,
        timeout=TIMEOUT,
    ).stdout.splitlines()
    return int(dict(zip(out[0].split("\t"), out[1].split("\t")))["CoordinatorId"])


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=TIMEOUT)
    return md.topics[topic].partitions[partition].leader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="exactly-once carrier counts on a local 3-broker cluster")
    parser.add_argument("--rows", type=int, default=20000, help="flights to count (default 20,000)")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--base-port", type=int, default=19192)
    parser.add_argument("--zookeeper-port", type=int, default=12281)
    args = parser.parse_args(argv)
    directory = str(args.dir or Path(".minikafka") / f"eos-{time.strftime('%Y%m%d-%H%M%S')}")
    bootstrap = ",".join(f"127.0.0.1:{args.base_port + i}" for i in range(3))
    ok = False
    try:
        cluster_up(directory, args.base_port, args.zookeeper_port)
        for topic in (SOURCE, SINK):
            cli(
                "topics",
                "create",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--partitions",
                "3",
                "--replication-factor",
                "3",
                "--config",
                "min.insync.replicas=2",
            )
        per_carrier = load_flights(bootstrap, args.rows)
        print(f"loaded {sum(per_carrier.values()):,} flights of {len(per_carrier)} carriers")
        done: list[str] = []

        def chaos(processed: int) -> None:
            def kill_and_restart(what: str, broker: int) -> None:
                cli("cluster", "kill", str(broker), "--dir", directory)
                time.sleep(3)
                cli("cluster", "start", str(broker), "--dir", directory)
                print(f"   killed and restarted broker {broker} ({what})")

            if processed > args.rows * 0.3 and "leader" not in done:
                done.append("leader")
                victim = leader_of(bootstrap, SINK, 0)
                threading.Thread(target=kill_and_restart, args=(f"leader of {SINK}-0", victim)).start()
            elif processed > args.rows * 0.6 and "coordinator" not in done:
                done.append("coordinator")
                victim = coordinator_of(bootstrap, TRANSACTIONAL_ID)
                threading.Thread(target=kill_and_restart, args=("the transaction coordinator", victim)).start()

        started = time.monotonic()
        restarts: list[str] = []
        counts = run_job(bootstrap, sum(per_carrier.values()), on_progress=chaos, restarts=restarts)
        print(f"counted {sum(counts.values()):,} flights in {time.monotonic() - started:.1f} s")
        for reason in restarts:
            print(f"   the job restarted after a fatal producer error: {reason}")
        problems = verify(bootstrap, per_carrier)
        for p in problems:
            print(f"   {p}")
        ok = not problems
    finally:
        cli("cluster", "down", "--dir", directory, check=False)
    print("RESULT:", "exactly once" if ok else "A CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
