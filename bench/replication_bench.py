"""Produce latency with replication: acks=1 vs acks=all (min.insync.replicas=2) on a local cluster
of ZooKeeper + 3 broker processes, RF 3, one partition, one producer sending one 100-byte record
per request, sequentially. Prints p50/p90/p99/max in ms for each.

Run with `make bench` (or `python -m bench.replication_bench --requests 2000`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio

from client.connection import Connection
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess
from protocol import record_batch as rb


async def create_topic(brokers) -> None:
    """CreateTopics on whichever broker is the controller (the others answer NOT_CONTROLLER)."""
    body = {
        "topics": [
            {
                "name": "lat",
                "num_partitions": 1,
                "replication_factor": 3,
                "configs": [{"name": "min.insync.replicas", "value": "2"}],
            }
        ],
        "timeout_ms": 10000,
    }
    with trio.fail_after(30):
        while True:
            for b in brokers:
                async with Connection.open(b.host, b.port) as conn:
                    if (await conn.request(19, body)).topics[0].error_code in (0, 36):  # created / exists
                        return
            await trio.sleep(0.2)


async def find_leader(brokers):
    async with Connection.open(brokers[0].host, brokers[0].port) as conn:
        with trio.fail_after(30):
            while True:
                md = await conn.request(3, {"topics": [{"name": "lat"}]})
                if md.topics[0].error_code == 0 and md.topics[0].partitions[0].leader_id >= 0:
                    return next(b for b in brokers if b.broker_id == md.topics[0].partitions[0].leader_id)
                await trio.sleep(0.1)


async def measure(brokers, requests: int) -> dict[str, list[float]]:
    await create_topic(brokers)
    leader = await find_leader(brokers)
    await trio.sleep(1.0)  # let the followers join the fetch loop
    out = {}
    async with Connection.open(leader.host, leader.port) as conn:
        for acks in (1, -1, 1, -1):  # interleaved rounds, to share the machine's noise
            times = out.setdefault("acks=1" if acks == 1 else "acks=all", [])
            for _ in range(requests // 2):
                body = {
                    "acks": acks,
                    "timeout_ms": 10000,
                    "topic_data": [
                        {
                            "name": "lat",
                            "partition_data": [{"index": 0, "records": rb.build_batch([(None, b"x" * 100)])}],
                        }
                    ],
                }
                start = time.perf_counter()
                r = await conn.request(0, body)
                times.append((time.perf_counter() - start) * 1000)
                assert r.responses[0].partition_responses[0].error_code == 0
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per acks setting")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="minikafka-repl-bench-"))
    zk = ZooKeeperProcess.start(root / "zk")
    brokers = []
    try:
        for i in (1, 2, 3):
            brokers.append(BrokerProcess.create(i, root / f"b{i}", zk.connect).start())
        results = trio.run(measure, brokers, args.requests)
        print(f"{'produce latency, RF 3':24} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        print("-" * 62)
        for name, times in results.items():
            q = statistics.quantiles(times, n=100)
            print(f"{name:24} {q[49]:8.2f} {q[89]:8.2f} {q[98]:8.2f} {max(times):8.2f}")
        p50 = {n: statistics.median(t) for n, t in results.items()}
        print(f"\nacks=all / acks=1 at p50: {p50['acks=all'] / p50['acks=1']:.1f}x")
    finally:
        for b in brokers:
            b.kill()
        zk.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
