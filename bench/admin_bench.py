"""`make bench`, admin part (issue 18), on real broker processes (3 or 4 brokers, one ZooKeeper).

Issue 18 names no numbers, so the targets are ours, chosen as what an operator would call prompt:
1. DescribeConfigs of a topic (every key, with synonyms) from one client: p99 latency <= 50 ms.
2. A cluster-wide dynamic broker config (`<default>` log.retention.ms) set on one broker: time
   until every broker's DescribeConfigs shows it in force, <= 1 s.
3. CreatePartitions 3 -> 30 on an RF-3 topic: the answer (it waits until the broker's metadata has
   the new leaders), <= 2 s.
4. DeleteRecords of a whole RF-3 partition (10 MB, offset -1): the answer (it waits until every
   in-sync follower has the new log start offset), <= 1 s (followers learn it within
   replica.fetch.wait.max.ms, 500 ms).
5. Reassignment of one partition holding 200 MB (quick: 5 MB) from {1,2,3} to {2,3,4}: from
   AlterPartitionReassignments to the final assignment in ZooKeeper; copy rate >= 30 MB/s.

Results: a markdown table (measured vs target) printed, written to `bench/results/admin.md`, and
(unless --quick) copied into docs/benchmarks.md between the `bench:admin` markers.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import trio

from bench import targets
from client import Cluster
from client.admin import alter_reassignments, on_controller
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode


async def _create_topic(bootstrap: str, name: str, assignment: list[list[int]] | None, partitions: int = 1) -> None:
    async with Cluster.open(bootstrap) as cluster:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": 3, "configs": []}
        if assignment is not None:
            topic.update(
                num_partitions=-1,
                replication_factor=-1,
                assignments=[{"partition_index": i, "broker_ids": r} for i, r in enumerate(assignment)],
            )
        results = await on_controller(
            cluster,
            ApiKey.CREATE_TOPICS,
            lambda v: {"topics": [topic], "timeout_ms": 30000},
            lambda r: [(t.name, t.error_code, t.error_message) for t in r.topics],
        )
        assert results[0][1] == ErrorCode.NONE, results
        while True:  # until every broker's metadata has leaders
            md = await cluster.refresh_metadata([name])
            if name in md.topics and all(p.leader >= 0 for p in md.topics[name].values()):
                return
            await trio.sleep(0.05)


def _describe_body(name: str, resource_type: int = 2, keys=None) -> dict:
    return {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True,
        "include_documentation": False,
    }


async def describe_latency(bootstrap: str, count: int) -> tuple[float, float]:
    """(requests/s, p99 ms) of sequential topic DescribeConfigs."""
    async with Cluster.open(bootstrap) as cluster:
        conn = await cluster.any_connection()
        latencies = []
        start = time.perf_counter()
        for _ in range(count):
            t0 = time.perf_counter()
            r = await conn.request(ApiKey.DESCRIBE_CONFIGS, _describe_body("bench"))
            latencies.append(time.perf_counter() - t0)
            assert r.results[0].error_code == ErrorCode.NONE
        elapsed = time.perf_counter() - start
    latencies.sort()
    return count / elapsed, latencies[int(len(latencies) * 0.99) - 1] * 1000


async def propagation_time(brokers: dict[int, BrokerProcess], value: str) -> float:
    """Seconds from setting `<default>` log.retention.ms on broker 1 to every broker showing it."""
    async with Cluster.open(brokers[1].bootstrap) as cluster:
        await cluster.refresh_metadata([])
        conns = {i: await cluster.broker_connection(i) for i in brokers}
        body = {
            "resources": [
                {"resource_type": 4, "resource_name": "", "configs": [{"name": "log.retention.ms", "value": value}]}
            ],
            "validate_only": False,
        }
        start = time.perf_counter()
        r = await conns[1].request(ApiKey.ALTER_CONFIGS, body)
        assert r.responses[0].error_code == ErrorCode.NONE, r
        pending = set(brokers)
        while pending:
            for i in list(pending):
                r = await conns[i].request(ApiKey.DESCRIBE_CONFIGS, _describe_body(str(i), 4, ["log.retention.ms"]))
                if r.results[0].configs and r.results[0].configs[0].value == value:
                    pending.discard(i)
            await trio.sleep(0.005)
        return time.perf_counter() - start


async def create_partitions_time(bootstrap: str) -> float:
    async with Cluster.open(bootstrap) as cluster:
        start = time.perf_counter()
        results = await on_controller(
            cluster,
            ApiKey.CREATE_PARTITIONS,
            lambda v: {
                "topics": [{"name": "grow", "count": 30, "assignments": None}],
                "timeout_ms": 30000,
                "validate_only": False,
            },
            lambda r: [(t.name, t.error_code, t.error_message) for t in r.results],
        )
        assert results[0][1] == ErrorCode.NONE, results
        return time.perf_counter() - start


async def delete_records_time(bootstrap: str, topic: str) -> float:
    async with Cluster.open(bootstrap) as cluster:
        conn = await cluster.leader_connection(topic, 0, refresh=True)
        body = {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": -1}]}], "timeout_ms": 30000}
        start = time.perf_counter()
        p = (await conn.request(ApiKey.DELETE_RECORDS, body)).topics[0].partitions[0]
        assert p.error_code == ErrorCode.NONE, p
        return time.perf_counter() - start


def _produce(bootstrap: str, topic: str, megabytes: int) -> None:
    """`megabytes` MB of 1 KiB records into partition 0, acks=all."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20})
    value = b"x" * 1024
    for _ in range(megabytes * 1024):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def _assignment(zk_connect: str, topic: str) -> dict:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zk_connect)
    zk.start(10)
    try:
        return json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    finally:
        zk.stop()
        zk.close()


def reassignment_time(bootstrap: str, zk_connect: str) -> float:
    async def start() -> None:
        async with Cluster.open(bootstrap) as cluster:
            [(_, code, message)] = await alter_reassignments(cluster, {("move", 0): [2, 3, 4]})
            assert code == ErrorCode.NONE, message

    began = time.perf_counter()
    trio.run(start)
    while True:
        node = _assignment(zk_connect, "move")
        if node["partitions"]["0"] == [2, 3, 4] and not node["removing_replicas"]:
            return time.perf_counter() - began
        time.sleep(0.02)


def run(quick: bool) -> list[tuple[str, str, str, bool]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        zk = ZooKeeperProcess.start(root / "zk")
        connect = zk.connect + "/admin"
        brokers: dict[int, BrokerProcess] = {}
        try:
            brokers = {i: BrokerProcess.create(i, root / f"b{i}", connect).start() for i in (1, 2, 3, 4)}
            bootstrap = ",".join(b.bootstrap for b in brokers.values())
            trio.run(_create_topic, bootstrap, "bench", None)
            rate, p99 = trio.run(describe_latency, brokers[1].bootstrap, 50 if quick else 1000)
            rows.append(
                (
                    "DescribeConfigs of a topic (every key, synonyms), one client",
                    f"p99 {p99:.1f} ms ({rate:,.0f} requests/s)",
                    "p99 <= 50 ms",
                    p99 <= 50,
                )
            )
            worst = max(trio.run(propagation_time, brokers, str(86400000 + i)) for i in range(3 if quick else 10))
            rows.append(
                (
                    "dynamic `<default>` config in force on all 4 brokers (worst of runs)",
                    f"{worst * 1000:.0f} ms",
                    "<= 1 s",
                    worst <= 1,
                )
            )
            trio.run(_create_topic, bootstrap, "grow", None, 3)
            seconds = trio.run(create_partitions_time, bootstrap)
            rows.append(("CreatePartitions 3 -> 30, RF 3", f"{seconds * 1000:.0f} ms", "<= 2 s", seconds <= 2))
            megabytes = 5 if quick else 200
            trio.run(_create_topic, bootstrap, "move", [[1, 2, 3]])
            _produce(bootstrap, "move", megabytes)
            trio.run(_create_topic, bootstrap, "trim", [[1, 2, 3]])
            _produce(bootstrap, "trim", 1 if quick else 10)
            seconds = trio.run(delete_records_time, bootstrap, "trim")
            rows.append(
                (
                    "DeleteRecords, RF 3, answer after all in-sync replicas",
                    f"{seconds * 1000:.0f} ms",
                    "<= 1 s",
                    seconds <= 1,
                )
            )
            seconds = reassignment_time(bootstrap, connect)
            rate = megabytes / seconds
            rows.append(
                (
                    f"reassign a {megabytes} MB partition {{1,2,3}} -> {{2,3,4}}",
                    f"{seconds:.1f} s ({rate:.0f} MB/s)",
                    ">= 30 MB/s",
                    rate >= 30,
                )
            )
        finally:
            for b in brokers.values():
                b.kill()
            zk.stop()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 18, "admin")


if __name__ == "__main__":
    raise SystemExit(main())
