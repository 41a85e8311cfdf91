"""`make bench`, per-request cost part (issue 22's goals), on ZooKeeper and 3 real broker
processes driven by `minikafka perf` children (confluent-kafka) and `minikafka_cli.perf_tools.connections`:

1. End-to-end, RF 3 acks=all, `linger.ms=0`, 10k records/s offered (about one record a request).
2. Produce p99 at 10k records/s, RF 3 acks=all, the client's default linger, 5 runs.
3. Throughput with 1 KiB records from `PRODUCERS` producer processes at once (so one client
   process's core is not the limit): RF 3 acks=all, and RF 1 acks=1 as a share of the ceiling
   (`bench/ceiling.py`, measured in the same run).
4. 100 connections each sending 100 Produce requests/s (10k requests/s in all), RF 3 acks=all.
5. A consumer reading a 1 GiB backlog: the brokers' peak RSS growth against 2 x librdkafka's
   `fetch.max.bytes` (52,428,800 bytes by default).

Every row prints the measured value beside the value before issue 22 (`BEFORE`, from
bench/results/cluster.md of 2026-11-23 and the issue's text) and the target. The CPU of the
clients and of the brokers is given where it explains the number: both share this machine's 2
cores. Results: a markdown table, `bench/results/requests.md`, docs/benchmarks.md's `bench:requests` section
(unless --quick; `--quick` runs tiny sizes to keep the script working, its numbers mean nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench import targets
from bench.ceiling import CeilingServer, disk_write_mb_s, measure
from bench.cluster_bench import LocalCluster, perf, perf_children, perf_command
from minikafka_cli.perf_tools.stats import MB, Result

PRODUCERS = 3  # producer processes, each on its own topic of 6 / PRODUCERS partitions
#: before issue 22: this bench on the code before its changes (2026-11-25), bench/results/cluster.md of
#: 2026-11-23, and the issue's own figures
BEFORE = {
    "e2e0": "5,618 records/s, p99 4251.4 ms in this bench before its changes; 9,961/s on the cluster bench's shorter 3 s run",
    "p99": "9.7 / 9.5 / 9.4 / 9.2 / 8.8 ms in this bench before its changes; the issue saw 9-23 ms",
    "rf3_1k": "93-104 MB/s (one producer)",
    "rf1_1k": "51-69% (one producer)",
    "connections": "3,157 requests/s, p99 21.5 s",
    "backlog": "not measured",
}


def _row(name: str, measured: str, before: str, target: str, ok: bool) -> targets.Row:
    print(f"  {name}: {measured} (target {target})", flush=True)
    return (name, f"{measured} (before: {before})", target, ok)


def _quiesce() -> None:
    """Write back the dirty pages of the rows before (gigabytes after a throughput row), so the
    next row does not share the disk with their writeback."""
    os.sync()


def _parallel_perf(cluster: LocalCluster, topics: list[str], *args: str) -> tuple[float, float, float]:
    """One perf produce child per topic, all at once (each verifies its count from its own
    topic's end offsets, so no two share a topic) -> (MB/s, client cores, broker cores) over the
    longest child's run."""
    cpu0, start = cluster.cpu_s(), time.monotonic()
    results = perf_children([perf_command("produce", cluster.bootstrap, topic, *args) for topic in topics], 600)
    wall = time.monotonic() - start
    seconds = max(r.seconds for r in results)
    mb_s = sum(r.bytes for r in results) / MB / seconds
    client = sum(r.extra.get("client_cpu_s", 0.0) for r in results) / seconds
    return mb_s, client, (cluster.cpu_s() - cpu0) / wall


def _connections(
    cluster: LocalCluster, topic: str, connections: int, rate: float, seconds: float
) -> tuple[Result, float]:
    command = [
        sys.executable,
        "-m",
        "minikafka_cli.perf_tools.connections",
        "--bootstrap-server",
        cluster.bootstrap,
        "--topic",
        topic,
    ]
    command += ["--connections", str(connections), "--rate", str(rate), "--seconds", str(seconds)]
    cpu0, start = cluster.cpu_s(), time.monotonic()
    r = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"minikafka_cli.perf_tools.connections: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    return Result.from_json(r.stdout.strip().splitlines()[-1]), (cluster.cpu_s() - cpu0) / (time.monotonic() - start)


def _peak_rss_growth(cluster: LocalCluster, work) -> tuple[float, object]:
    """Run `work()` while sampling every broker's RSS every 20 ms -> (largest growth of one
    broker in bytes, work's result)."""
    procs = {i: psutil.Process(b.process.pid) for i, b in cluster.brokers.items()}
    base = {i: p.memory_info().rss for i, p in procs.items()}
    peak = dict(base)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for i, p in procs.items():
                peak[i] = max(peak[i], p.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = work()
    finally:
        stop.set()
        sampler.join()
    return max(peak[i] - base[i] for i in procs), result


def run(quick: bool) -> list[targets.Row]:
    root = Path(tempfile.mkdtemp(prefix="minikafka-bench-requests-"))
    rows: list[targets.Row] = []
    disk = disk_write_mb_s(str(root), 64 if quick else 2048)
    with CeilingServer(str(root)) as server:
        ceiling = measure(server.port, seconds=1.0 if quick else 3.0)
    cluster = LocalCluster(root / "cluster")
    try:
        cluster.create_topic("lat", 1, 3, {"min.insync.replicas": "2"})
        cluster.create_offsets_topic()  # the perf consumers' group would create it mid-measurement
        n = 2_000 if quick else 50_000
        cpu0, t0 = cluster.cpu_s(), time.monotonic()
        e2e = perf("end-to-end", cluster.bootstrap, "lat", "--num-records", str(n), "--throughput", "10000",
                   "--acks", "all", "--linger-ms", "0")  # fmt: skip
        brokers = (cluster.cpu_s() - cpu0) / (time.monotonic() - t0)
        p99 = e2e.latency.p99 if e2e.latency else float("inf")
        rows.append(
            _row(
                "end-to-end, RF 3 acks=all, linger.ms=0, 10k records/s offered",
                f"{e2e.records_per_s:,.0f} records/s, p99 {p99:.1f} ms, brokers {brokers:.2f} cores",
                BEFORE["e2e0"],
                "10,000/s sustained, p99 <= 20 ms",
                e2e.records_per_s >= 9_900 and p99 <= 20,
            )
        )
        runs = [
            perf(
                "produce",
                cluster.bootstrap,
                "lat",
                "--num-records",
                str(n // 2),
                "--throughput",
                "10000",
                "--acks",
                "all",
            )  # fmt: skip
            for _ in range(5)
        ]
        p99s = [r.latency.p99 if r.latency else float("inf") for r in runs]
        rows.append(
            _row(
                "produce p99 at 10k records/s, RF 3 acks=all, default linger, 5 runs",
                " / ".join(f"{p:.1f}" for p in p99s) + " ms",
                BEFORE["p99"],
                "<= 10 ms in every run",
                max(p99s) <= 10,
            )
        )
        n1k = 20_000 if quick else 900_000  # 300 MB per producer: runs of several seconds
        for name, rf, acks, key in (("rf3-1k", 3, "all", "rf3_1k"), ("rf1-1k", 1, "1", "rf1_1k")):
            topics = [f"{name}-{i}" for i in range(PRODUCERS)]
            for topic in topics:  # 6 partitions in all
                cluster.create_topic(topic, 6 // PRODUCERS, rf, {"min.insync.replicas": "2"} if rf == 3 else {})
            time.sleep(1.0)  # every broker's metadata knows the new topics
            _quiesce()
            mb_s, client, brokers = _parallel_perf(
                cluster, topics, "--num-records", str(n1k // PRODUCERS), "--record-size", "1024", "--acks", acks
            )
            cpu = f"clients {client:.2f} cores, brokers {brokers:.2f} cores"
            if rf == 3:
                rows.append(
                    _row(
                        f"RF 3 acks=all, 1 KiB records, 6 partitions, {PRODUCERS} producers (the 3 replicas "
                        f"share one disk: its sustained write {disk:.0f} MB/s / 3 = {disk / 3:.0f} MB/s)",
                        f"{mb_s:.0f} MB/s, {cpu}",
                        BEFORE[key],
                        ">= 200 MB/s",
                        mb_s >= 200,
                    )
                )
            else:
                rows.append(
                    _row(
                        f"RF 1 acks=1, 1 KiB records, 6 partitions, {PRODUCERS} producers (ceiling {ceiling:.0f} MB/s)",
                        f"{mb_s:.0f} MB/s = {mb_s / ceiling:.0%} of the ceiling, {cpu}",
                        BEFORE[key],
                        ">= 60% of the ceiling",
                        mb_s >= 0.6 * ceiling,
                    )
                )
        conns, rate = (20, 50) if quick else (100, 100)
        _quiesce()
        result, brokers = _connections(cluster, "lat", conns, rate, 3 if quick else 15)
        offered = conns * rate
        cp99 = result.latency.p99 if result.latency else float("inf")
        rows.append(
            _row(
                f"{conns} connections x {rate:.0f} Produce requests/s (RF 3 acks=all, 1 record each)",
                f"{result.records_per_s:,.0f} requests/s answered, p99 {cp99:.1f} ms, {result.errors} errors, "
                f"client {result.extra.get('client_cpu_s', 0) / result.seconds:.2f} cores, brokers {brokers:.2f} cores",
                BEFORE["connections"],
                f"{offered:,}/s sustained, p99 <= 50 ms",
                result.records_per_s >= 0.99 * offered and cp99 <= 50 and result.errors == 0,
            )
        )
        backlog_mib = 32 if quick else 1024
        _quiesce()
        cluster.create_topic("backlog", 1, 1)
        time.sleep(1.0)  # every broker's metadata knows the new topic
        perf("produce", cluster.bootstrap, "backlog", "--num-records", str(backlog_mib * 1024), "--record-size",
             "1024", "--acks", "1")  # fmt: skip
        time.sleep(1.0)
        growth, consumed = _peak_rss_growth(
            cluster,
            lambda: perf("consume", cluster.bootstrap, "backlog", "--num-records", str(backlog_mib * 1024)),
        )
        limit = 2 * 52_428_800
        rows.append(
            _row(
                f"a consumer reading a {backlog_mib} MiB backlog: largest broker RSS growth",
                f"{growth / MB:.1f} MiB ({consumed.mb_per_s:.0f} MB/s read)",
                BEFORE["backlog"],
                f"< 2 x fetch.max.bytes = {limit / MB:.0f} MiB",
                growth < limit,
            )
        )
    finally:
        cluster.close()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 22, "requests")


if __name__ == "__main__":
    raise SystemExit(main())
