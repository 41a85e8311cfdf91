"""Storage benchmarks: Log append/read throughput against raw file I/O of the same bytes, and
append cost as the number of segments grows.

Run with `make bench`. Every ratio compares numbers measured in this same run (page cache, no
fsync, like Kafka's default flush policy). The per-call times are the event-loop budget that
`storage/log.py` documents.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from protocol import record_batch as rb
from storage.append_origin import AppendOrigin
from storage.config import LogConfig
from storage.log import Log


def timed(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


def bench_size(root: Path, size: int, total: int, validate: bool) -> list[tuple]:
    data = rb.build_batch([(None, os.urandom(size - 80))])
    n = max(8, total // len(data))
    rows = []
    raw_path = root / f"raw-{size}-{validate}"
    fd = os.open(raw_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    raw_w = timed(lambda: os.write(fd, data), n)
    log = Log.create(root / f"t{size}{int(validate)}-0", LogConfig())
    log_w = timed(lambda: log.append_as_leader(data, leader_epoch=0, validate_records=validate), n)
    mb = n * len(data) / 1e6
    label = f"append {len(data) // 1024 or len(data)} {'KiB' if len(data) >= 1024 else 'B'} batches"
    rows.append(
        (
            label + (" (records validated)" if validate else ""),
            n / log_w,
            mb / log_w,
            mb / raw_w,
            raw_w / log_w,
            log_w / n * 1e6,
        )
    )
    if not validate:
        chunk = max(1 << 20, len(data))
        pos = [0]

        def raw_read():
            got = os.pread(fd, chunk, pos[0])
            pos[0] = pos[0] + len(got) if got else 0

        reads = max(1, n * len(data) // chunk)
        raw_r = timed(raw_read, reads)
        offset = [0]

        def log_read(verify):
            info = log.read(offset[0], chunk, verify_crc=verify)
            offset[0] = info.next_offset if info.next_offset < info.log_end_offset else 0

        for verify in (True, False):
            offset[0] = 0
            log_r = timed(lambda: log_read(verify), reads)
            rows.append(
                (
                    f"read 1 MiB chunks of {label[7:]}" + (" + CRC check" if verify else ""),
                    reads / log_r,
                    reads * chunk / 1e6 / log_r,
                    reads * chunk / 1e6 / raw_r,
                    raw_r / log_r,
                    log_r / reads * 1e6,
                )
            )
    os.close(fd)
    log.close()
    return rows


def bench_segments(root: Path) -> list[tuple]:
    data = rb.build_batch([(None, os.urandom(1000))])
    rows = []
    for segments in (1, 100, 1000):
        log = Log.create(root / f"s{segments}-0", LogConfig())
        for _ in range(segments - 1):
            log.append_as_leader(data, leader_epoch=0, origin=AppendOrigin.COORDINATOR)
            log.roll()
        n = 3000
        elapsed = timed(lambda: log.append_as_leader(data, leader_epoch=0, origin=AppendOrigin.COORDINATOR), n)
        rows.append((segments, len(log.segments), n / elapsed, elapsed / n * 1e6))
        log.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=128, help="bytes appended per case, in MB (default 128)")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="minikafka-bench-", dir=args.dir))
    try:
        rows = []
        for size in (1024, 16 * 1024, 1024 * 1024):
            rows += bench_size(root, size, args.mb * 10**6, validate=False)
        rows += bench_size(root, 16 * 1024, args.mb * 10**6 // 4, validate=True)
        print(f"{'storage case':52} {'ops/s':>10} {'MB/s':>9} {'raw MB/s':>9} {'ratio':>7} {'us/op':>8}")
        print("-" * 100)
        for case, ops, mbs, raw, ratio, us in rows:
            print(f"{case:52} {ops:10,.0f} {mbs:9,.0f} {raw:9,.0f} {ratio:7.1%} {us:8,.1f}")
        print()
        print(f"{'segments in the log':>20} {'(actual)':>9} {'1 KiB appends/s':>16} {'us/append':>10}")
        print("-" * 60)
        seg_rows = bench_segments(root)
        for want, got, ops, us in seg_rows:
            print(f"{want:>20} {got:>9} {ops:16,.0f} {us:10.1f}")
        print(f"\nappend cost at 1000 segments vs 1: {seg_rows[-1][3] / seg_rows[0][3]:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
