"""`make bench`, cluster part: ZooKeeper + 3 broker processes on this machine, driven by
`minikafka perf` children (confluent-kafka unless a row says ours), every throughput also as a ratio
to the ceiling (`bench/ceiling.py`) measured in the same run.

1. Matrix: RF 1 acks=1, RF 3 acks=1, RF 3 acks=all (min ISR 2) x 100 B and 1 KiB records x 1 and
   6 partitions; our own client on RF 1 acks=1; consume throughput from one partition; produce and
   end-to-end latency at 10k records/s (RF 3, acks=all; the client's default linger.ms, and
   end-to-end once more with linger.ms 0, about one record a request).
2. Scaling, a fresh cluster per point: 1, 10, 100 and 1000 partitions (RF 3): produce throughput
   (RF 3, acks=1, 100 B), idle broker RSS growth per hosted partition, Metadata latency, and
   controller failover (kill -9 of the controller until a survivor's Metadata names a new controller
   and a live leader for every partition).

Results: printed as markdown tables, written to `bench/results/cluster.{md,json,png}`, and (unless
--quick) copied into docs/benchmarks.md between the `bench:cluster` markers. `--quick` runs tiny sizes (the
test suite uses it to keep this script working; its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import trio

from bench import cluster_report
from bench.ceiling import CeilingServer, measure
from client import Cluster
from client.admin import on_controller
from client.cluster import KafkaError
from client.groups import coordinator_connection
from local_cluster.brokers import BrokerProcess, start_all
from local_cluster.zookeeper import ZooKeeperProcess
from minikafka_cli.perf_tools.stats import Result

RESULTS = Path(__file__).parent / "results"


@dataclass
class Row:
    """One matrix line: a perf Result with the case's name and the ceiling ratio."""

    case: str
    client: str
    records_per_s: float
    mb_per_s: float
    ratio: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    client_cores: float | None  # the perf client's CPU seconds per second of the run
    broker_cores: float  # all brokers' CPU seconds per second of the run


@dataclass
class ScalePoint:
    partitions: int
    records_per_s: float
    rss_kb_per_partition: float
    metadata_p50_ms: float
    metadata_p99_ms: float
    failover_s: float


# ---- a local cluster ---------------------------------------------------------------------------


class LocalCluster:
    """ZooKeeper + 3 brokers under `root` (broker i: root/b<i>)."""

    def __init__(self, root: Path, **overrides: str):
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.zk = ZooKeeperProcess.start(root / "zk")
        self.brokers: dict[int, BrokerProcess] = {}
        try:
            for i in (1, 2, 3):
                self.brokers[i] = BrokerProcess.create(i, root / f"b{i}", self.zk.connect, **overrides)
            start_all(list(self.brokers.values()))
        except Exception:
            self.close()
            raise

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.process and b.process.poll() is None)

    def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> None:
        """CreateTopics on the controller, then wait until every partition has a leader and a full ISR
        in a broker's Metadata (so no run starts during elections)."""
        trio.run(_create_and_wait, self.bootstrap, name, partitions, rf, configs or {})

    def create_offsets_topic(self) -> None:
        """Have the brokers create __consumer_offsets now, as the first FindCoordinator does in
        Kafka (50 partitions on every broker: a stall of tens of ms each), so that no measurement
        starts with it; returns once every one of its partitions has a leader."""
        trio.run(_create_offsets_topic, self.bootstrap)

    def cpu_s(self) -> float:
        """CPU seconds used so far by the live brokers, together."""
        total = 0.0
        for b in self.brokers.values():
            if b.process and b.process.poll() is None:
                t = psutil.Process(b.process.pid).cpu_times()
                total += t.user + t.system
        return total

    def rss_bytes(self) -> dict[int, int]:
        return {i: psutil.Process(b.process.pid).memory_info().rss for i, b in self.brokers.items()}

    def close(self) -> None:
        for b in self.brokers.values():
            if b.process and b.process.poll() is None:
                b.kill()
        self.zk.stop()


async def _create_offsets_topic(bootstrap: str) -> None:
    async with Cluster.open(bootstrap) as cluster:
        with trio.fail_after(60):
            while True:
                try:
                    await coordinator_connection(cluster, "minikafka-perf")
                    break
                except KafkaError:  # COORDINATOR_NOT_AVAILABLE while the topic is being created
                    await trio.sleep(0.2)
            while True:
                parts = (await cluster.refresh_metadata(["__consumer_offsets"])).topics.get("__consumer_offsets", {})
                if parts and all(p.leader >= 0 for p in parts.values()):
                    return
                await trio.sleep(0.2)


async def _create_and_wait(bootstrap: str, name: str, partitions: int, rf: int, configs: dict) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": 60000,
    }
    async with Cluster.open(bootstrap) as cluster:
        with trio.fail_after(60):
            while True:  # until the controller knows all 3 brokers
                md = await cluster.refresh_metadata([])
                if len(md.brokers) == 3 and md.controller_id >= 0:
                    break
                await trio.sleep(0.1)
            results = await on_controller(
                cluster, 19, lambda v: body, lambda r: [(t.name, t.error_code, t.error_message) for t in r.topics]
            )
            if results[0][1] not in (0, 36):
                raise RuntimeError(f"CreateTopics {name}: {results}")
            while True:
                md = await cluster.refresh_metadata([name])
                parts = md.topics.get(name, {})
                if len(parts) == partitions and all(p.leader >= 0 and len(p.isr) == rf for p in parts.values()):
                    return
                await trio.sleep(0.2)


# ---- perf children -------------------------------------------------------------------------------


def perf_command(kind: str, bootstrap: str, topic: str, *args: str, client: str = "confluent") -> list[str]:
    """The `minikafka perf <kind> ... --json` command line of one perf child."""
    command = [sys.executable, "-m", "minikafka_cli.main", "perf", kind, "--bootstrap-server", bootstrap]
    return command + ["--topic", topic, "--client", client, "--json", *args]


def perf_children(commands: list[list[str]], timeout_s: float = 900) -> list[Result]:
    """Run perf children at once and wait for all; each prints one JSON Result as its last line
    (exit 1, records that failed, still reports). Raises RuntimeError for a child that did not."""
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    results = []
    for child, command in zip(running, commands):
        out, err = child.communicate(timeout=timeout_s)
        if child.returncode not in (0, 1) or not out.strip():
            raise RuntimeError(f"{' '.join(command[3:])}: exit {child.returncode}: {err.strip()[-500:]}")
        results.append(Result.from_json(out.strip().splitlines()[-1]))
    return results


def perf(kind: str, bootstrap: str, topic: str, *args: str, client: str = "confluent") -> Result:
    return perf_children([perf_command(kind, bootstrap, topic, *args, client=client)], timeout_s=600)[0]


def measured(
    cluster: LocalCluster, case: str, ceiling_mb_s: float, kind: str, topic: str, *args: str, client: str = "confluent"
) -> Row:
    """Run one perf child against `cluster` and make its table row (with CPU use per side)."""
    before = cluster.cpu_s()
    result = perf(kind, cluster.bootstrap, topic, *args, client=client)
    return _row_of(case, result, ceiling_mb_s, (cluster.cpu_s() - before) / result.seconds)


def measured_at_once(cluster: LocalCluster, cases: list[tuple[str, str, list[str]]], ceiling_mb_s: float) -> list[Row]:
    """Run one confluent perf child per (case, kind, [topic, args...]) all at once (`--quick`
    only: the runs share the cluster, so their rates and CPU mean nothing but that each works)."""
    before, start = cluster.cpu_s(), time.monotonic()
    commands = [perf_command(kind, cluster.bootstrap, args[0], *args[1:]) for _, kind, args in cases]
    results = perf_children(commands)
    brokers = (cluster.cpu_s() - before) / (time.monotonic() - start)
    return [_row_of(case, result, ceiling_mb_s, brokers) for (case, _, _), result in zip(cases, results)]


def _row_of(case: str, result: Result, ceiling_mb_s: float, brokers: float) -> Row:
    lat = result.latency
    client_cpu = result.extra.get("client_cpu_s")
    print(f"  {case} ({result.client}): {result.line()}", flush=True)
    return Row(
        case,
        result.client,
        result.records_per_s,
        result.mb_per_s,
        result.mb_per_s / ceiling_mb_s,
        lat.p50 if lat else None,
        lat.p99 if lat else None,
        result.errors,
        client_cpu / result.seconds if client_cpu is not None else None,
        brokers,
    )


def run_matrix(root: Path, ceiling: float, quick: bool) -> list[Row]:
    n100, n1k = (30_000, 5_000) if quick else (1_000_000, 200_000)
    rows: list[Row] = []
    cluster = LocalCluster(root / "matrix")
    try:
        cases = []
        for rf, acks, label in ((1, "1", "RF 1 acks=1"), (3, "1", "RF 3 acks=1"), (3, "all", "RF 3 acks=all")):
            for size, n in ((100, n100), (1024, n1k)):
                for parts in (1, 6):
                    topic = f"m-{rf}-{acks}-{size}-{parts}"
                    cluster.create_topic(topic, parts, rf, {"min.insync.replicas": "2"} if rf == 3 else {})
                    args = [topic, "--num-records", str(n), "--record-size", str(size), "--acks", acks]
                    cases.append((f"{label}, {size} B, {parts} partition{'s' if parts > 1 else ''}", "produce", args))
        if quick:
            rows += measured_at_once(cluster, cases, ceiling)
        else:
            rows += [measured(cluster, case, ceiling, kind, *args) for case, kind, args in cases]
        ours_n = 3_000 if quick else 200_000
        rows.append(
            measured(
                cluster,
                "RF 1 acks=1, 100 B, 1 partition",
                ceiling,
                "produce",
                "m-1-1-100-1",
                "--num-records",
                str(ours_n),
                "--acks",
                "1",
                client="ours",
            )
        )
        for client in ("confluent", "ours"):
            rows.append(
                measured(
                    cluster,
                    "consume, 100 B, 1 partition (RF 1)",
                    ceiling,
                    "consume",
                    "m-1-1-100-1",
                    "--num-records",
                    str(n100),
                    client=client,
                )
            )
        cluster.create_topic("lat", 1, 3, {"min.insync.replicas": "2"})
        n_lat = 3_000 if quick else 30_000
        rows.append(
            measured(
                cluster,
                "produce latency at 10k records/s, RF 3 acks=all",
                ceiling,
                "produce",
                "lat",
                "--num-records",
                str(n_lat),
                "--throughput",
                "10000",
                "--acks",
                "all",
            )
        )
        rows.append(
            measured(
                cluster,
                "end-to-end latency at 10k records/s, RF 3 acks=all",
                ceiling,
                "end-to-end",
                "lat",
                "--num-records",
                str(n_lat),
                "--throughput",
                "10000",
                "--acks",
                "all",
            )
        )
        # linger.ms 0: about one record a request, so this row shows the request rate the cluster sustains
        rows.append(
            measured(
                cluster,
                "end-to-end at 10k records/s, RF 3 acks=all, linger.ms 0",
                ceiling,
                "end-to-end",
                "lat",
                "--num-records",
                str(n_lat),
                "--throughput",
                "10000",
                "--acks",
                "all",
                "--linger-ms",
                "0",
            )
        )
    finally:
        cluster.close()
    return rows


# ---- scaling -------------------------------------------------------------------------------------


def run_scale_point(root: Path, partitions: int, quick: bool) -> ScalePoint:
    cluster = LocalCluster(root / f"scale-{partitions}")
    settle_s = 0.5 if quick else 1.0  # --quick's numbers mean nothing: it only keeps the script working
    try:
        time.sleep(2 * settle_s)
        before = cluster.rss_bytes()
        cluster.create_topic("s", partitions, 3)
        time.sleep(3 * settle_s)  # idle: fetchers settled, nothing produced yet
        after = cluster.rss_bytes()
        rss_kb = statistics.mean((after[i] - before[i]) / 1024 / partitions for i in before)
        md_p50, md_p99 = trio.run(_metadata_latency, cluster.bootstrap, 30)
        n = 20_000 if quick else 1_000_000
        result = perf("produce", cluster.bootstrap, "s", "--num-records", str(n), "--acks", "1")
        failover = trio.run(_failover, cluster, partitions)
        print(
            f"  {partitions} partitions: {result.records_per_s:,.0f} records/s, {rss_kb:.0f} KB RSS per partition, "
            f"Metadata p50 {md_p50:.2f} ms, failover {failover:.2f} s",
            flush=True,
        )
        return ScalePoint(partitions, result.records_per_s, rss_kb, md_p50, md_p99, failover)
    finally:
        cluster.close()


async def _metadata_latency(bootstrap: str, requests: int) -> tuple[float, float]:
    times = []
    async with Cluster.open(bootstrap) as cluster:
        conn = await cluster.any_connection()
        for _ in range(requests):
            start = time.perf_counter()
            await conn.request(3, {"topics": [{"name": "s"}]})
            times.append((time.perf_counter() - start) * 1000)
    q = sorted(times)
    return statistics.median(q), q[max(0, int(len(q) * 0.99) - 1)]


async def _failover(cluster: LocalCluster, partitions: int) -> float:
    """Seconds from kill -9 of the controller until a surviving broker's Metadata names another
    live controller and a live leader for every partition of `s`."""
    async with Cluster.open(cluster.bootstrap) as client:
        dead = (await client.refresh_metadata([])).controller_id
    victim = cluster.brokers[dead]
    survivor = next(b for i, b in cluster.brokers.items() if i != dead)
    victim.process.send_signal(signal.SIGKILL)
    start = time.monotonic()
    victim.process.wait()
    from client.connection import Connection

    with trio.fail_after(120):
        async with Connection.open(survivor.host, survivor.port) as conn:
            while True:
                md = await conn.request(3, {"topics": [{"name": "s"}]})
                leaders = [p.leader_id for t in md.topics for p in t.partitions]
                if (
                    md.controller_id not in (-1, dead)
                    and len(leaders) == partitions
                    and all(leader not in (-1, dead) for leader in leaders)
                ):
                    return time.monotonic() - start
                await trio.sleep(0.02)


# ---- main ----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 and 10 partitions (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    parser.add_argument("--no-readme", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="minikafka-bench-"))
    try:
        with CeilingServer(str(root)) as server:
            ceiling = measure(server.port, seconds=1.0 if args.quick else 3.0)
        print(f"ceiling (trio server appending 16 KiB frames, 8 in flight): {ceiling:.1f} MB/s", flush=True)
        rows = run_matrix(root, ceiling, args.quick)
        points = [run_scale_point(root, n, args.quick) for n in ((1, 10) if args.quick else (1, 10, 100, 1000))]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    data = {
        "ceiling_mb_s": ceiling,
        "rows": [asdict(r) for r in rows],
        "scaling": [asdict(p) for p in points],
        "quick": args.quick,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = cluster_report.markdown(data)
    print("\n" + markdown)
    (args.out / "cluster.json").write_text(json.dumps(data, indent=1))
    (args.out / "cluster.md").write_text(markdown)
    cluster_report.chart(data, args.out / "cluster.png")
    if not args.quick and not args.no_readme:
        cluster_report.update_readme(Path(__file__).parent.parent / "docs" / "benchmarks.md", markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
