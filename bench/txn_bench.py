"""`make bench`, transactions part (issue 19's targets), on real broker processes driven by
confluent-kafka (librdkafka) transactional producers and consumers:

1. Transactions per second with 1, 10 and 100 records per transaction: `PRODUCERS` producer
   processes (each its own transactional.id, like several kafka-producer-perf-test runs with
   --transactional-id) begin, produce, commit in a loop for a fixed time against 3 brokers (topic
   RF 3, min.insync.replicas 2, acks=all; `__transaction_state` RF 3, min ISR 2). Records go where
   librdkafka's default partitioner puts keyless records (sticky: a transaction's records mostly
   share a partition), and, for 10 records, also round-robin over all 6 partitions (every
   transaction touches 6 partitions: 6 markers). Reported: the total transactions/s, the mean
   commit_transaction() latency and the CPU the 3 brokers used (cores). Target: >= 500
   transactions/s of 10 records.
2. End-to-end latency at 1,000 records/s (transactions of 10 records every 10 ms): a
   read_committed and a read_uncommitted consumer read the same topic; latency = receive time -
   send time (carried in the value). Target: read_committed p99 <= 2 x read_uncommitted p99.

3. Issue 44: transactions/s (10 records each) with `transaction.partition.verification.enable`
   off and on (KIP-890 part 1), on the 1-partition topic and spread over the 6 partitions.
   Target: verification costs at most 10%.

Results: a markdown table (measured vs target) printed, written to `bench/results/transactions.md`
and (unless --quick) copied into docs/benchmarks.md between the `bench:transactions` markers.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
import time
from pathlib import Path

from bench import targets
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess

PRODUCERS = 8
TOPIC, PARTITIONS = "bench-txn", 6
BROKER = {
    "transaction_state_log_num_partitions": 6,
    "offsets_topic_num_partitions": 3,
    "group_initial_rebalance_delay_ms": 0,
}


def _producer_process(
    bootstrap: str, index: int, records: int, seconds: float, out, spread: bool = False, topic: str = TOPIC
) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{records}-{index}", "linger.ms": 1}
    )
    producer.init_transactions(60)
    value = b"x" * 100
    done, commit_s = 0, 0.0
    stop_at = time.monotonic() + seconds
    partition = index
    while time.monotonic() < stop_at:
        producer.begin_transaction()
        for _ in range(records):
            if spread:  # every transaction touches every partition it can
                producer.produce(topic, value=value, partition=partition % PARTITIONS)
                partition += 1
            else:  # the client's default partitioner (sticky for keyless records), as kafka-producer-perf-test
                producer.produce(topic, value=value)
        started = time.monotonic()
        producer.commit_transaction(60)
        commit_s += time.monotonic() - started
        done += 1
    out.put((done, commit_s))


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes used so far (/proc/<pid>/stat)."""
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def transaction_rate(
    bootstrap: str, records: int, seconds: float, producers: int, spread: bool = False, topic: str = TOPIC
) -> tuple[float, float]:
    """(transactions/s over all producers, mean commit latency in ms) on `topic` (`spread`: over
    its first `PARTITIONS` partitions, else where the client's partitioner puts them)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_producer_process, args=(bootstrap, i, records, seconds, out, spread, topic))
        for i in range(producers)
    ]
    started = time.monotonic()
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    elapsed = time.monotonic() - started
    for p in procs:
        p.join(30)
    total = sum(done for done, _ in results)
    commit_s = sum(s for _, s in results)
    # the processes' setup (init_transactions) is inside `elapsed`: the rate is per run time
    return total / min(elapsed, seconds + 1), 1000 * commit_s / max(total, 1)


def end_to_end(bootstrap: str, seconds: float, rate: int = 1000) -> dict[str, float]:
    """p99 latency (ms) of a read_committed and a read_uncommitted consumer at `rate` records/s."""
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    latencies: dict[str, list[float]] = {"read_committed": [], "read_uncommitted": []}
    ready = threading.Barrier(3)
    stop = threading.Event()

    def consume(isolation: str) -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"e2e-{isolation}", "isolation.level": isolation}
        )
        consumer.assign([TopicPartition("e2e", 0, OFFSET_END)])
        consumer.poll(0.5)
        ready.wait()
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                latencies[isolation].append(time.time() - float(msg.value()))
        consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in latencies]
    for t in threads:
        t.start()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-e2e", "linger.ms": 0})
    producer.init_transactions(60)
    ready.wait()
    per_txn = 10
    interval = per_txn / rate
    next_at = time.monotonic()
    stop_at = next_at + seconds
    while time.monotonic() < stop_at:
        producer.begin_transaction()
        for _ in range(per_txn):
            producer.produce("e2e", value=repr(time.time()).encode(), partition=0)
        producer.commit_transaction(60)
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    time.sleep(1)
    stop.set()
    for t in threads:
        t.join()
    out = {}
    for isolation, values in latencies.items():
        values.sort()
        out[isolation] = 1000 * values[int(0.99 * (len(values) - 1))] if values else float("inf")
    return out


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    # a controller, and all 3 brokers registered (RF 3 topics follow)
    while ((md := admin.list_topics(timeout=60)).controller_id < 0 or len(md.brokers) < 3) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    config = {"min.insync.replicas": "2"}
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=config), NewTopic("e2e", 1, 3, config=config)])
    for f in futures.values():
        f.result(60)


def _set_verification(broker: BrokerProcess, enabled: bool) -> None:
    """transaction.partition.verification.enable as the cluster default (IncrementalAlterConfigs),
    then a pause for every broker's config listener to apply it."""
    import trio

    from client.connection import Connection
    from protocol.api_keys import ApiKey

    async def go():
        async with Connection.open(broker.host, broker.port) as conn:
            await conn.request(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                {
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": "",
                            "configs": [
                                {
                                    "name": "transaction.partition.verification.enable",
                                    "config_operation": 0,
                                    "value": "true" if enabled else "false",
                                }
                            ],
                        }
                    ],
                    "validate_only": False,
                },
            )

    trio.run(go)
    time.sleep(2)


def verification_rows(
    broker: BrokerProcess, bootstrap: str, seconds: float, producers: int
) -> list[tuple[str, str, str, bool]]:
    """Issue 44's target: KIP-890 verification costs at most 10% of transactions/s (10 records
    each) on 1 partition and on 6, measured off then on in the same run."""
    rows = []
    for partitions, topic, spread in ((1, "e2e", False), (PARTITIONS, TOPIC, True)):
        rates = {}
        for enabled in (False, True):
            _set_verification(broker, enabled)
            rates[enabled], _ = transaction_rate(bootstrap, 10, seconds, producers, spread, topic)
        ratio = rates[True] / rates[False]
        rows.append(
            (
                f"transactions/s with KIP-890 verification on vs off, 10 records, {partitions} partition(s), "
                f"{producers} producers",
                f"on {rates[True]:,.0f} / off {rates[False]:,.0f} txn/s ({ratio:.0%})",
                ">= 90%",
                ratio >= 0.9,
            )
        )
    return rows


def run(quick: bool) -> list[tuple[str, str, str, bool]]:
    rows = []
    seconds = 3 if quick else 15
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        zk = ZooKeeperProcess.start(root / "zk")
        brokers = {}
        try:
            for i in (1, 2, 3):
                brokers[i] = BrokerProcess.create(i, root / f"b{i}", zk.connect, **BROKER).start()
            bootstrap = ",".join(b.bootstrap for b in brokers.values())
            _create_topics(bootstrap)
            pids = [b.process.pid for b in brokers.values()]
            producers = 2 if quick else PRODUCERS
            for records, spread in ((1, False), (10, False), (10, True), (100, False)):
                before, started = _cpu_s(pids), time.monotonic()
                rate, commit_ms = transaction_rate(bootstrap, records, seconds, producers, spread)
                cores = (_cpu_s(pids) - before) / (time.monotonic() - started)
                how = f"over all {PARTITIONS} partitions" if spread else "default partitioner"
                rows.append(
                    (
                        f"transactions/s, {records} record(s) each ({how}), {producers} producers, RF 3",
                        f"{rate:,.0f} txn/s ({rate * records:,.0f} records/s), commit {commit_ms:.1f} ms, "
                        f"brokers {cores:.2f} cores",
                        ">= 500 txn/s" if records == 10 else "-",
                        rate >= 500 or records != 10,
                    )
                )
            rows += verification_rows(brokers[1], bootstrap, seconds, producers)
            p99 = end_to_end(bootstrap, seconds)
            committed, uncommitted = p99["read_committed"], p99["read_uncommitted"]
            rows.append(
                (
                    "end-to-end p99 at 1,000 records/s (10 per transaction)",
                    f"read_committed {committed:.1f} ms, read_uncommitted {uncommitted:.1f} ms "
                    f"({committed / uncommitted:.2f} x)",
                    "read_committed <= 2 x read_uncommitted",
                    committed <= 2 * uncommitted,
                )
            )
        finally:
            for b in brokers.values():
                b.kill()
            zk.stop()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 19, "transactions")


if __name__ == "__main__":
    raise SystemExit(main())
