"""`make bench`, the consumer group protocol (issue 36's targets, KIP-848), on a real broker
process driven by our own trio clients (`client.consumer_group_member` for the consumer protocol,
`client.groups.GroupMember` for the classic one):

1. Stable assignment: N members (10, 100) of a new group over a 200-partition topic start at
   once; time until every partition is owned by exactly one member, every member at the same
   member epoch (consumer protocol) or generation (classic), and each knows where to fetch its
   partitions (topic metadata: the consumer protocol's members need it for the topic ids of
   their assignment, classic members after their SyncGroup). Every member has its own client.
   The consumer protocol's heartbeat interval is 500 ms here (`group.consumer.heartbeat.
   interval.ms`; Kafka's default 5 s only stretches each step), the classic group's initial
   rebalance delay 0 and its members heartbeat every 500 ms. Target: the consumer protocol is
   not slower than the classic one at 100 members. The median of 3 runs (a new group each).
2. Broker CPU per heartbeat: the broker process's CPU time (user + system, /proc) over 10 s of a
   stable 100-member group heartbeating, divided by the heartbeats answered, for both protocols.

Results: a markdown table (measured vs target) printed, written to `bench/results/consumer_groups.md`
and (unless --quick) copied into docs/benchmarks.md between the `bench:consumer_groups` markers.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import trio

from bench import targets
from bench.group_bench import _create_topic
from client import Cluster
from client import groups as g
from client.consumer_group_member import ConsumerGroupMember
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess

PARTITIONS = 200
TOPIC = "cgb"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Run:
    def __init__(self, members: int):
        self.members = members
        self.assignments: dict[int, set] = {}
        self.generations: dict[int, int] = {}
        self.heartbeats = 0
        self.stable = trio.Event()
        self.stop = trio.Event()

    def check(self) -> None:
        owned = [tp for a in self.assignments.values() for tp in a]
        complete = len(self.assignments) == self.members and len(owned) == len(set(owned)) == PARTITIONS
        if complete and len(set(self.generations.values())) == 1:
            self.stable.set()


async def _consumer_member(bootstrap: str, run: _Run, i: int, group: str) -> None:
    async with Cluster.open(bootstrap) as cluster:  # its own connections, as separate consumers have
        await _consume(ConsumerGroupMember(cluster, group, [TOPIC]), run, i)


async def _classic_member(bootstrap: str, run: _Run, i: int, group: str) -> None:
    async with Cluster.open(bootstrap) as cluster:
        member = g.GroupMember(cluster, group, [TOPIC], session_timeout_ms=30000, rebalance_timeout_ms=60000)
        await _consume(member, run, i)


async def _consume(member: ConsumerGroupMember | g.GroupMember, run: _Run, i: int) -> None:
    """Join, then report the assignment and heartbeat (at the broker's interval, or every 0.5 s
    for a classic member), rejoining when told, until the run stops."""
    await member.join()
    if isinstance(member, g.GroupMember):
        await member.cluster.refresh_metadata([TOPIC])  # where to fetch its partitions, as a consumer must
    while not run.stop.is_set():
        run.assignments[i] = {(t, p) for t, ps in member.assignment.items() for p in ps}
        run.generations[i] = member.member_epoch if isinstance(member, ConsumerGroupMember) else member.generation
        run.check()
        with trio.move_on_after(getattr(member, "heartbeat_interval_s", 0.5)):
            await run.stop.wait()
        if run.stop.is_set():
            break
        run.heartbeats += 1
        if not await member.heartbeat():
            await member.join()
    await member.leave()


async def measure(bootstrap: str, pid: int, protocol: str, members: int, cpu_window_s: float) -> tuple[float, float]:
    """(seconds to a stable assignment, broker CPU µs per heartbeat once stable), for a new group."""
    run = _Run(members)
    one = _consumer_member if protocol == "consumer" else _classic_member
    group = f"{protocol}-{members}-{time.monotonic_ns()}"
    started = time.monotonic()
    async with trio.open_nursery() as n:
        for i in range(members):
            n.start_soon(one, bootstrap, run, i, group)
        with trio.fail_after(300):
            await run.stable.wait()
        stable_s = time.monotonic() - started
        cpu_before, beats_before = cpu_seconds(pid), run.heartbeats
        await trio.sleep(cpu_window_s)
        cpu = cpu_seconds(pid) - cpu_before
        beats = max(run.heartbeats - beats_before, 1)
        run.stop.set()
    return stable_s, cpu / beats * 1e6


def run(quick: bool) -> list[tuple[str, str, str, bool]]:
    rows = []
    sizes = (10,) if quick else (10, 100)
    overrides = {
        "offsets_topic_num_partitions": 3,
        "offsets_topic_replication_factor": 1,
        "group_initial_rebalance_delay_ms": 0,
        "group_consumer_heartbeat_interval_ms": 500,
        "group_consumer_min_heartbeat_interval_ms": 500,
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        zk = ZooKeeperProcess.start(root / "zk")
        try:
            broker = BrokerProcess.create(1, root / "b", zk.connect + "/cgb", **overrides).start()
            trio.run(_create_topic, broker.bootstrap, TOPIC, PARTITIONS, 1)
            results = {}
            for n in sizes:
                for protocol in ("classic", "consumer"):
                    runs = [
                        trio.run(measure, broker.bootstrap, broker.process.pid, protocol, n, window)
                        for window in ([2] if quick else [10, 0.1, 0.1])
                    ]
                    # the median time of the runs (new groups each), the CPU of the long window
                    results[(protocol, n)] = (statistics.median(r[0] for r in runs), runs[0][1])
            for n in sizes:
                classic, consumer = results[("classic", n)], results[("consumer", n)]
                met = n != 100 or consumer[0] <= classic[0]
                rows.append(
                    (
                        f"{n} members to a stable assignment, {PARTITIONS} partitions: consumer vs classic",
                        f"{consumer[0]:.2f} s vs {classic[0]:.2f} s ({consumer[0] / classic[0]:.2f}x)",
                        "consumer <= classic at 100 members" if n == 100 else "-",
                        met,
                    )
                )
            for n in sizes:
                classic, consumer = results[("classic", n)], results[("consumer", n)]
                rows.append(
                    (
                        f"broker CPU per heartbeat, {n} stable members: consumer vs classic",
                        f"{consumer[1]:.0f} µs vs {classic[1]:.0f} µs ({consumer[1] / classic[1]:.2f}x)",
                        "-",
                        True,
                    )
                )
            broker.kill()
        finally:
            zk.stop()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 36, "consumer_groups")


if __name__ == "__main__":
    raise SystemExit(main())
