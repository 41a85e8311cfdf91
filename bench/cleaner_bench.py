"""`make bench`, log cleaner part (issue 17's targets):

1. Cleaner throughput: MB/s of dirty log cleaned by one cleaning (`storage.cleaner.cleaner.clean`,
   the function a broker runs in its cleaner worker process, timed from the offset map to the
   fsynced `.cleaned` files), for 100 B and 1 KiB records with 10% and 90% of records superseded by
   a later record of their key. Target: >= 50 MB/s per broker.
2. Produce p99 while cleaning: one broker (ZooKeeper, real process) holds a 1 GB compacted log
   (1 KiB records, 90% superseded) and a second topic takes 1,000 records/s of 100 B (acks=1,
   linger 0, confluent-kafka); p99 measured for 20 s with `log.cleaner.enable=false`, then after a
   restart with the cleaner on over the records sent while it cleaned the 1 GB log (the cleaning's
   own duration, from its log line). Target: p99 while cleaning <= 1.5 x the p99 without. Measured
   twice: with Kafka's default (no I/O throttle) and with `log.cleaner.io.max.bytes.per.second`
   at 200 MB/s (the throttle counts the bytes of both passes: the offset map's and the rewrite's).

Results: a markdown table (measured vs target) printed, written to `bench/results/cleaner.md`, and
(unless --quick) copied into docs/benchmarks.md between the `bench:cleaner` markers.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from bench import targets
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess
from protocol import record_batch as rb
from storage.append_origin import AppendOrigin
from storage.cleaner.cleaner import CleanTask, SegmentInfo, clean
from storage.cleaner.manager import CLEANER_CHECKPOINT
from storage.cleaner.offset_map import capacity_for
from storage.config import LogConfig
from storage.log import Log

MB = 1024 * 1024


def build_log(path: Path, record_size: int, superseded: float, total_bytes: int) -> Log:
    """A compacted log of ~`total_bytes` in 16 KiB batches; record i has key i mod K where K is
    the number of records times (1 - superseded)."""
    shutil.rmtree(path, ignore_errors=True)
    log = Log.create(path, LogConfig(segment_bytes=64 * MB, cleanup_policy=("compact",)))
    n = total_bytes // (record_size + 20)
    keys = max(1, int(n * (1 - superseded)))
    per_batch = max(1, 16384 // (record_size + 20))
    value, ts = b"x" * record_size, int(time.time() * 1000)
    for first in range(0, n, per_batch):
        batch = rb.build_batch([(b"key-%09d" % ((first + j) % keys), value, [], ts) for j in range(per_batch)])
        log.append_as_leader(batch, leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    log.roll()
    return log


def cleaner_throughput(tmp: Path, record_size: int, superseded: float, total_bytes: int) -> tuple[float, float]:
    """(MB/s of dirty log cleaned, written / read) of one full cleaning."""
    log = build_log(tmp / "bench-0", record_size, superseded, total_bytes)
    segments = log.segments[:-1]
    task = CleanTask(
        str(log.dir),
        log.config,
        tuple(SegmentInfo(s.base_offset, s.size) for s in segments),
        0,
        log.active_segment.base_offset,
        capacity_for(128 * MB, 1),
    )
    dirty = sum(s.size for s in segments)
    started = time.monotonic()
    result = clean(task)
    elapsed = time.monotonic() - started
    log.close()
    shutil.rmtree(tmp / "bench-0", ignore_errors=True)
    return dirty / MB / elapsed, result.stats.bytes_written / result.stats.bytes_read


def fill_compacted(bootstrap: str, topic: str, total_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
        }  # fmt: skip
    )
    n = total_bytes // 1024
    keys = max(1, n // 10)
    value = b"v" * 1000
    for i in range(n):
        while True:
            try:
                producer.produce(topic, key=b"key-%09d" % (i % keys), value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def create_topic(bootstrap: str, name: str, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while admin.list_topics(timeout=30).controller_id < 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs or {})]).values():
        future.result(60)
    while name not in admin.list_topics(timeout=30).topics:
        time.sleep(0.1)


def wait_for_leaders(bootstrap: str, topics=("latency", "big")) -> None:
    """After a restart: until Metadata names a leader for every partition of `topics`."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics(timeout=30)
        if all(
            t in md.topics
            and md.topics[t].error is None
            and all(p.leader >= 0 for p in md.topics[t].partitions.values())
            for t in topics
        ):
            return
        assert time.monotonic() < deadline, "no leaders after the restart"
        time.sleep(0.2)


def paced_latencies(bootstrap: str, stop: threading.Event, rate: int = 1000) -> list[tuple[float, float]]:
    """(monotonic send time, ms until acknowledged) of 100 B records sent at `rate` per second to
    `latency` (acks=1, linger 0) until `stop` is set."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    samples: list[tuple[float, float]] = []
    value, started, sent = b"x" * 100, time.monotonic(), 0
    while not stop.is_set():
        now = time.monotonic()
        while sent < (now - started) * rate:
            sent_at = time.monotonic()

            def report(err, msg, sent_at=sent_at):
                if err is None:
                    samples.append((sent_at, (time.monotonic() - sent_at) * 1000))

            producer.produce("latency", value=value, on_delivery=report)
            sent += 1
        producer.poll(0.001)
    producer.flush(30)
    return samples


def p99(samples: list[tuple[float, float]]) -> float:
    latencies = sorted(ms for _, ms in samples)
    return latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def measure(bootstrap: str, until) -> list[tuple[float, float]]:
    """paced_latencies in a thread until `until()` returns true."""
    stop, out = threading.Event(), []
    thread = threading.Thread(target=lambda: out.append(paced_latencies(bootstrap, stop)))
    thread.start()
    try:
        while not until():
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    return out[0]


def p99_while_cleaning(
    root: Path, total_bytes: int, seconds: float, **cleaner_settings: str
) -> list[tuple[str, str, str, bool]]:
    zk = ZooKeeperProcess.start(root / "zk")
    broker = None
    try:
        settings = {"log_cleaner_backoff_ms": 100, **cleaner_settings}
        broker = BrokerProcess.create(1, root / "b1", zk.connect, log_cleaner_enable="false", **settings).start()
        create_topic(broker.bootstrap, "latency")
        segment = str(min(128 * MB, total_bytes // 8))  # the active segment is never cleaned
        create_topic(broker.bootstrap, "big", {"cleanup.policy": "compact", "segment.bytes": segment})
        fill_compacted(broker.bootstrap, "big", total_bytes)
        broker.stop()
        broker = BrokerProcess.create(1, root / "b1", zk.connect, log_cleaner_enable="false", **settings).start()
        wait_for_leaders(broker.bootstrap)
        deadline = time.monotonic() + seconds
        quiet = p99(measure(broker.bootstrap, lambda: time.monotonic() > deadline)[100:])
        broker.stop()
        # the cleaner's first look finds no hosted log and backs off 3 s: the producer is warm when it starts
        settings["log_cleaner_backoff_ms"] = 3000
        broker = BrokerProcess.create(1, root / "b1", zk.connect, log_cleaner_enable="true", **settings).start()
        checkpoint = root / "b1" / "logs" / CLEANER_CHECKPOINT
        samples = measure(broker.bootstrap, lambda: "big 0" in (checkpoint.read_text() if checkpoint.exists() else ""))
        ended = time.monotonic()
        line = re.findall(r"cleaned big-0: .* ([\d.]+) s \(([\d.]+) MB/s\)", broker.log_tail(200_000))
        took, rate = (float(line[-1][0]), line[-1][1]) if line else (0.0, "?")
        # records sent from the worker's start (spawn ~0.5 s before its clock starts) to the swap
        during = [s for s in samples if ended - took - 1.0 <= s[0] <= ended]
        busy = p99(during) if during else float("nan")
    finally:
        if broker is not None:
            broker.kill()
        zk.stop()
    size = f"{total_bytes / MB / 1024:.1f} GB" if total_bytes >= 1 << 30 else f"{total_bytes / MB:.0f} MB"
    return [
        ("produce p99, 1,000 rec/s of 100 B (acks=1), no cleaning", f"{quiet:.1f} ms", "-", True),
        (
            f"produce p99, same load, while a {size} log is cleaned ({len(during)} records sent meanwhile)",
            f"{busy:.1f} ms ({busy / quiet:.2f} x)",
            "<= 1.5 x",
            busy <= 1.5 * quiet,
        ),
        (f"the broker's cleaning of that {size} log (worker process)", f"{took:.1f} s, {rate} MB/s", "-", True),
    ]


def run(quick: bool) -> list[tuple[str, str, str, bool]]:
    rows = []
    total = 8 * MB if quick else 200 * MB
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for size in (100, 1024):
            for superseded in (0.1, 0.9):
                rate, ratio = cleaner_throughput(root, size, superseded, total)
                rows.append(
                    (
                        f"cleaner throughput, {size} B records, {superseded:.0%} superseded, {total // MB} MB",
                        f"{rate:.0f} MB/s (written/read {ratio:.2f})",
                        ">= 50 MB/s",
                        rate >= 50,
                    )
                )
        big, seconds = (16 * MB, 2) if quick else (1 << 30, 20)
        rows += p99_while_cleaning(root / "unthrottled", big, seconds)
        # the same with log.cleaner.io.max.bytes.per.second (Kafka's throttle, unlimited by default)
        rows += [
            (f"{name} [io.max.bytes.per.second=200 MB/s]", measured, target, ok)
            for name, measured, target, ok in p99_while_cleaning(
                root / "throttled", big, seconds, log_cleaner_io_max_bytes_per_second=str(200 * 1000 * 1000)
            )
        ]
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 17, "cleaner")


if __name__ == "__main__":
    raise SystemExit(main())
