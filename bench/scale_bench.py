"""`make bench`, scale curves (issue 22): throughput and p99 against record size, partitions,
producer connections and consumers per topic, on ZooKeeper and 3 real broker processes of one
cluster, every point with what limits it.

- Record size, 10 B to 64 KiB: one confluent-kafka producer (`minikafka perf produce`), RF 3
  acks=all (min ISR 2), 6 partitions, about the same bytes per point.
- Partitions, 1 to 1000: the same producer, 100 B records, RF 3 acks=all.
- Producer connections, 1 to 100: `minikafka_cli.perf_tools.connections` closed loop (each connection keeps
  `IN_FLIGHT` one-record Produce requests outstanding, as a producer's
  max.in.flight.requests.per.connection does), RF 3 acks=all, 100 B.
- Consumers per topic, 1 to 10: that many `minikafka perf consume` processes at once, each reading
  the whole of a 6-partition topic (fan-out), 1 KiB records; throughput is all consumers together.

The limit of a point is judged from what was measured during it:
- the ceiling (the same machine's trio server appending to a file, `bench/ceiling.py`) when a
  produce point's throughput is within 70% of it;
- broker CPU when the busiest broker process used >= 0.85 of a core (a broker runs one Python
  thread); client CPU when a client process did;
- the machine's CPU when clients and brokers together used >= 1.6 of its 2 cores (80%), or when
  the machine as a whole was >= 80% busy: kernel threads (kswapd reclaiming a full page cache,
  writeback) are in no process's CPU time;
- disk when the cores spent >= 20% of the time waiting for I/O;
- otherwise round trips (acks=all waits for the followers' fetches).

The producers run unthrottled, so their p99 is mostly time spent in the producer's own queue at the
throughput reached. The partitions curve runs last, since its topics stay and 1000 idle partitions
cost every broker's fetchers CPU. Results: a markdown table, `bench/results/scale.{md,json,png}` and
docs/benchmarks.md's `bench:scale` section (unless --quick: tiny sizes, numbers that mean nothing).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from bench import targets
from bench.ceiling import CeilingServer, measure
from bench.cluster_bench import LocalCluster, perf_children, perf_command
from minikafka_cli.perf_tools.stats import MB, Result

RESULTS = Path(__file__).parent / "results"
IN_FLIGHT = 5
CURVES = {
    "record size (bytes)": ((10, 100, 1024, 16384, 65536), (100, 16384)),
    "partitions": ((1, 10, 100, 1000), (1, 10)),
    "producer connections": ((1, 10, 30, 100), (1, 10)),
    "consumers per topic": ((1, 2, 5, 10), (1, 2)),
}


@dataclass
class Point:
    """One measured point of a curve; cores are CPU seconds per second of the point's run."""

    curve: str
    x: int
    records_per_s: float
    mb_per_s: float
    p99_ms: float | None
    client_cores: float  # the busiest client process
    busiest_broker_cores: float
    all_cores: float  # clients and brokers together
    iowait: float  # share of the machine's CPU time spent waiting for I/O
    limit: str


@dataclass
class _Usage:
    client_cores: float
    busiest_broker: tuple[int, float]
    all_cores: float
    iowait: float
    machine_busy: float = 0.0  # share of the machine's CPU time not idle, kernel threads included


def limit_of(mb_s: float, ceiling: float, usage: _Usage, producing: bool = True) -> str:
    """What limits a point (see the module docstring for the rule); the ceiling (appends to a
    file) bounds only produce points: consumers read from the page cache."""
    broker, broker_cores = usage.busiest_broker
    if producing and mb_s >= 0.7 * ceiling:
        return f"the ceiling ({mb_s / ceiling:.0%})"
    if broker_cores >= 0.85:
        return f"broker CPU (broker {broker}: {broker_cores:.2f} cores)"
    if usage.client_cores >= 0.85:
        return f"client CPU ({usage.client_cores:.2f} cores)"
    if usage.all_cores >= 1.6:
        return f"the machine's CPU ({usage.all_cores:.2f} of 2 cores)"
    if usage.machine_busy >= 0.8:
        return f"the machine's CPU ({usage.machine_busy:.0%} busy, the kernel's page cache work included)"
    if usage.iowait >= 0.2:
        return f"disk ({usage.iowait:.0%} I/O wait)"
    return "round trips (no resource saturated)"


def _measure(cluster: LocalCluster, work: Callable[[], list[Result]]) -> tuple[list[Result], _Usage]:
    """Run `work()` (perf children, each reporting its own client CPU) and what it cost."""
    procs = {i: psutil.Process(b.process.pid) for i, b in cluster.brokers.items()}
    cpu = {i: sum(p.cpu_times()[:2]) for i, p in procs.items()}
    times0, start = psutil.cpu_times(), time.monotonic()
    results = work()
    wall = time.monotonic() - start
    times1 = psutil.cpu_times()
    brokers = {i: (sum(p.cpu_times()[:2]) - cpu[i]) / wall for i, p in procs.items()}
    clients = [r.extra.get("client_cpu_s", 0.0) / r.seconds for r in results]
    total = sum(times1) - sum(times0)
    iowait = (getattr(times1, "iowait", 0.0) - getattr(times0, "iowait", 0.0)) / total if total > 0 else 0.0
    idle = (times1.idle - times0.idle) / total if total > 0 else 1.0
    busiest = max(brokers, key=lambda i: brokers[i])
    usage = _Usage(
        max(clients, default=0.0),
        (busiest, brokers[busiest]),
        sum(brokers.values()) + sum(clients),
        iowait,
        1.0 - idle - iowait,
    )
    return results, usage


def _perf(cluster: LocalCluster, kind: str, topic: str, *args: str) -> list[str]:
    return perf_command(kind, cluster.bootstrap, topic, *args)


def _point(curve: str, x: int, ceiling: float, results: list[Result], usage: _Usage) -> Point:
    seconds = max(r.seconds for r in results)
    records = sum(r.records for r in results)
    mb_s = sum(r.bytes for r in results) / MB / seconds
    p99s = [r.latency.p99 for r in results if r.latency]
    point = Point(
        curve,
        x,
        records / seconds,
        mb_s,
        max(p99s) if p99s else None,
        usage.client_cores,
        usage.busiest_broker[1],
        usage.all_cores,
        usage.iowait,
        limit_of(mb_s, ceiling, usage, producing=curve != "consumers per topic"),
    )
    p99 = f"{point.p99_ms:.1f} ms" if point.p99_ms is not None else "-"
    print(f"  {curve} {x}: {point.records_per_s:,.0f} records/s, {mb_s:.1f} MB/s, p99 {p99}; {point.limit}", flush=True)
    return point


def run(quick: bool, root: Path) -> tuple[float, list[Point]]:
    os.sync()  # an earlier bench's dirty pages would slow the ceiling's appends
    with CeilingServer(str(root)) as server:
        ceiling = measure(server.port, seconds=1.0 if quick else 3.0)
    print(f"ceiling: {ceiling:.1f} MB/s", flush=True)
    points: list[Point] = []
    budget = 4 * MB if quick else 300 * MB  # bytes produced per record-size point
    cluster = LocalCluster(root / "cluster")
    try:
        pick = 1 if quick else 0

        def xs(curve: str) -> tuple[int, ...]:
            return CURVES[curve][pick]

        acks_all = {"min.insync.replicas": "2"}
        for size in xs("record size (bytes)"):
            topic = f"size-{size}"
            cluster.create_topic(topic, 6, 3, acks_all)
            n = max(100, min(budget // size, 2_000 if quick else 3_000_000))
            args = ("--num-records", str(n), "--record-size", str(size), "--acks", "all")
            results, usage = _measure(
                cluster, functools.partial(perf_children, [_perf(cluster, "produce", topic, *args)])
            )
            points.append(_point("record size (bytes)", size, ceiling, results, usage))
        cluster.create_topic("connections", 1, 3, acks_all)
        for connections in xs("producer connections"):
            command = [
                sys.executable,
                "-m",
                "minikafka_cli.perf_tools.connections",
                "--bootstrap-server",
                cluster.bootstrap,
            ]
            command += ["--topic", "connections", "--connections", str(connections), "--rate", "0"]
            command += ["--in-flight", str(IN_FLIGHT), "--seconds", "2" if quick else "10"]
            results, usage = _measure(cluster, functools.partial(perf_children, [command]))
            points.append(_point("producer connections", connections, ceiling, results, usage))
        n = 4_000 if quick else 300_000  # 1 KiB records: 300 MB
        cluster.create_topic("fanout", 6, 3, acks_all)
        perf_children([_perf(cluster, "produce", "fanout", "--num-records", str(n), "--record-size", "1024")])
        for consumers in xs("consumers per topic"):
            commands = [_perf(cluster, "consume", "fanout", "--num-records", str(n)) for _ in range(consumers)]
            results, usage = _measure(cluster, functools.partial(perf_children, commands))
            points.append(_point("consumers per topic", consumers, ceiling, results, usage))
        # last: the partitions stay, and 1000 idle ones cost every broker's fetchers CPU
        for partitions in xs("partitions"):
            topic = f"partitions-{partitions}"
            cluster.create_topic(topic, partitions, 3, acks_all)
            n = 20_000 if quick else 2_000_000
            args = ("--num-records", str(n), "--record-size", "100", "--acks", "all")
            results, usage = _measure(
                cluster, functools.partial(perf_children, [_perf(cluster, "produce", topic, *args)])
            )
            points.append(_point("partitions", partitions, ceiling, results, usage))
    finally:
        cluster.close()
    return ceiling, points


def markdown(ceiling: float, points: list[Point], when: str) -> str:
    lines = [
        f"Scale curves of {when} (ceiling {ceiling:.0f} MB/s; RF 3, acks=all unless consuming; "
        "cores: CPU seconds per second, this machine has 2)",
        "",
        "| curve | x | records/s | MB/s | p99 ms | client cores | busiest broker cores | all cores | limited by |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        p99 = f"{p.p99_ms:.1f}" if p.p99_ms is not None else "-"
        lines.append(
            f"| {p.curve} | {p.x:,} | {p.records_per_s:,.0f} | {p.mb_per_s:.1f} | {p99} | {p.client_cores:.2f} "
            f"| {p.busiest_broker_cores:.2f} | {p.all_cores:.2f} | {p.limit} |"
        )
    return "\n".join(lines) + "\n"


def chart(points: list[Point], path: Path) -> None:
    """One panel per curve: MB/s (solid, left axis) and p99 ms (dashed, right axis), log x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, curve in zip(axes.flat, CURVES):
        mine = [p for p in points if p.curve == curve]
        if not mine:
            continue
        ax.plot([p.x for p in mine], [p.mb_per_s for p in mine], "o-", color="tab:blue")
        ax.set_xscale("log")
        ax.set_xlabel(curve)
        ax.set_ylabel("MB/s", color="tab:blue")
        latencies = [p for p in mine if p.p99_ms is not None]
        if latencies:
            right = ax.twinx()
            right.plot([p.x for p in latencies], [p.p99_ms for p in latencies], "s--", color="tab:red")
            right.set_ylabel("p99 ms", color="tab:red")
    fig.suptitle("minikafka scale curves (3 brokers, RF 3)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, two points a curve (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="minikafka-bench-scale-"))
    try:
        ceiling, points = run(args.quick, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    table = markdown(ceiling, points, when)
    print("\n" + table)
    args.out.mkdir(parents=True, exist_ok=True)
    data = {"ceiling_mb_s": ceiling, "points": [asdict(p) for p in points], "quick": args.quick, "when": when}
    (args.out / "scale.json").write_text(json.dumps(data, indent=1))
    chart(points, args.out / "scale.png")
    if not args.quick:
        targets.publish(table, "scale")
    else:
        (args.out / "scale.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
