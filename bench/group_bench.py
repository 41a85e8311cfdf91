"""`make bench`, consumer group part (issue 16's targets), on real broker processes driven by our
own trio client (`client.groups`):

1. Rebalance time: N members (1, 10, 100) join a new group at once; time from the first JoinGroup
   to every member holding its SyncGroup assignment (group.initial.rebalance.delay.ms 0, so the
   target "within 1 s beyond the delay" is 1 s).
2. OffsetCommit: commits/s and p99 latency from one client committing one partition at a time, and
   from 20 clients at once (each its own group and connection); RF 1 on one broker, and 20 clients
   on the 3-broker cluster of step 3 (RF 3, acks=all).
3. Coordinator failover: 3 brokers (zookeeper.session.timeout.ms 6000, offsets RF 3), 3 members
   heartbeating and committing every 100 ms; kill -9 of the group's coordinator; time until every
   member has committed again (at the new coordinator). Target: < 2 x zookeeper.session.timeout.ms.

Results: a markdown table (measured vs target) printed, written to `bench/results/groups.md`, and
(unless --quick) copied into docs/benchmarks.md between the `bench:groups` markers.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import trio

from bench import targets
from client import Cluster
from client import groups as g
from coordinator.group.records import partition_for
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess

ZK_SESSION_MS = 6000


async def _create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    async with Cluster.open(bootstrap) as cluster:
        with trio.fail_after(30):
            while True:
                md = await cluster.refresh_metadata([])
                if md.controller_id >= 0 and len(md.brokers) >= rf:  # RF needs them registered
                    break
                await trio.sleep(0.1)
        conn = await cluster.broker_connection(md.controller_id)
        await conn.request(
            19,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": rf,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
            },
        )
        with trio.fail_after(30):
            while len((await cluster.refresh_metadata([name])).topics.get(name, {})) < partitions:
                await trio.sleep(0.1)


async def rebalance_time(bootstrap: str, members: int, group: str) -> float:
    """Seconds from N simultaneous joins to all N assigned."""
    done = []

    async def one(i: int) -> None:
        async with Cluster.open(bootstrap) as cluster:
            member = g.GroupMember(cluster, group, ["bench"], session_timeout_ms=30000, rebalance_timeout_ms=60000)
            await member.join()
            done.append(time.monotonic())
            while len(done) < members:  # stay in the group until everyone is in
                await trio.sleep(0.05)
            await trio.sleep(0.5)

    started = time.monotonic()
    async with trio.open_nursery() as n:
        for i in range(members):
            n.start_soon(one, i)
    return max(done) - started


async def commit_rate(bootstrap: str, clients: int, seconds: float) -> tuple[float, float]:
    """(commits/s, p99 ms) of simple commits (one partition each) from `clients` at once."""
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    async def one(i: int) -> None:
        async with Cluster.open(bootstrap) as cluster:
            offset = 0
            conn = await cluster.retry(lambda refresh: g.coordinator_connection(cluster, f"commit-{i}"), "find")
            body = g._commit_body(f"commit-{i}", {("bench", i % 4): 0}, -1, "")
            while time.monotonic() < stop_at:
                offset += 1
                body["topics"][0]["partitions"][0]["committed_offset"] = offset
                t = time.monotonic()
                r = await conn.request(8, body, version=8)
                assert r.topics[0].partitions[0].error_code == 0, r
                latencies.append(time.monotonic() - t)

    started = time.monotonic()
    async with trio.open_nursery() as n:
        for i in range(clients):
            n.start_soon(one, i)
    elapsed = time.monotonic() - started
    latencies.sort()
    return len(latencies) / elapsed, 1000 * latencies[int(0.99 * (len(latencies) - 1))]


async def failover_time(brokers: dict[int, BrokerProcess], bootstrap: str) -> float:
    """Seconds from kill -9 of the coordinator to every member committing again."""
    killed_at: list[float] = []
    recovered: dict[int, float] = {}

    async def one(i: int) -> None:
        async with Cluster.open(bootstrap) as cluster:
            member = g.GroupMember(cluster, "failover", ["bench"], session_timeout_ms=30000)
            await member.join()
            offset = 0
            while i not in recovered:
                offset += 1
                try:
                    ok = await member.commit({("bench", p): offset for p in member.assignment.get("bench", [])})
                    if not ok or not await member.heartbeat():
                        await member.join()
                    elif killed_at:
                        recovered[i] = time.monotonic()
                except Exception:
                    cluster.metadata.brokers.clear()
                    await trio.sleep(0.1)
                    try:
                        await member.join()
                    except Exception:
                        pass
                await trio.sleep(0.1)

    async with trio.open_nursery() as n:
        for i in range(3):
            n.start_soon(one, i)
        await trio.sleep(3)
        async with Cluster.open(bootstrap) as cluster:
            md = await cluster.refresh_metadata(["__consumer_offsets"])
            leader = md.topics["__consumer_offsets"][partition_for("failover", 3)].leader
        brokers[leader].kill()
        killed_at.append(time.monotonic())
    return max(recovered.values()) - killed_at[0]


def run(quick: bool) -> list[tuple[str, str, str, bool]]:
    rows = []
    overrides = {"offsets_topic_num_partitions": 3, "group_initial_rebalance_delay_ms": 0}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        zk = ZooKeeperProcess.start(root / "zk")
        try:
            one = BrokerProcess.create(
                1, root / "one", zk.connect + "/one", offsets_topic_replication_factor=1, **overrides
            ).start()
            trio.run(_create_topic, one.bootstrap, "bench", 4, 1)
            for n in (1, 10) if quick else (1, 10, 100):
                seconds = trio.run(rebalance_time, one.bootstrap, n, f"rebalance-{n}")
                target = "<= 1 s" if n == 10 else "-"
                rows.append(
                    (f"rebalance, {n} members join a new group", f"{seconds:.2f} s", target, n != 10 or seconds <= 1)
                )
            for clients in (1, 20):
                rate, p99 = trio.run(commit_rate, one.bootstrap, clients, 2 if quick else 10)
                rows.append(
                    (
                        f"OffsetCommit from {clients} client(s), RF 1",
                        f"{rate:,.0f} commits/s, p99 {p99:.1f} ms",
                        ">= 5,000 commits/s",
                        rate >= 5000,
                    )
                )
            one.kill()
            if not quick:
                three = {
                    i: BrokerProcess.create(
                        i,
                        root / f"b{i}",
                        zk.connect + "/three",
                        zookeeper_session_timeout_ms=ZK_SESSION_MS,
                        **overrides,
                    ).start()
                    for i in (1, 2, 3)
                }
                bootstrap = ",".join(b.bootstrap for b in three.values())
                trio.run(_create_topic, bootstrap, "bench", 6, 3)
                rate, p99 = trio.run(commit_rate, bootstrap, 20, 10)
                rows.append(
                    (
                        "OffsetCommit from 20 clients, RF 3 (acks=all, 3 brokers)",
                        f"{rate:,.0f} commits/s, p99 {p99:.1f} ms",
                        ">= 5,000 commits/s",
                        rate >= 5000,
                    )
                )
                seconds = trio.run(failover_time, three, bootstrap)
                rows.append(
                    (
                        "coordinator failover: kill -9 -> all 3 members committing again",
                        f"{seconds:.2f} s",
                        f"< {2 * ZK_SESSION_MS / 1000:.0f} s",
                        seconds < 2 * ZK_SESSION_MS / 1000,
                    )
                )
                for b in three.values():
                    b.kill()
        finally:
            zk.stop()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 16, "groups")


if __name__ == "__main__":
    raise SystemExit(main())
