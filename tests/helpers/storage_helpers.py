"""Helpers shared by the storage tests."""

from protocol import record_batch as rb


def batch(
    n: int = 1, *, ts: int = 1_000_000, size: int = 20, tag: int = 0, base_offset: int = 0, epoch: int = -1
) -> bytes:
    """A v2 batch of `n` records whose values identify (tag, i)."""
    return rb.build_batch(
        [(None, b"%d-%d-" % (tag, i) + b"x" * size, [], ts + i) for i in range(n)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def values(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a blob of batches."""
    out = []
    for pos, header in rb.iter_batches(data):
        out += [(r.offset, r.value) for r in rb.decode_records(data, pos, header)]
    return out


def read_all(log) -> list[tuple[int, bytes]]:
    """Every record from the log start offset to LEO, across segments (and a compacted log's gaps
    and empty batches)."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 30)
        got = [(o, v) for o, v in values(info.records) if o >= offset]
        assert info.next_offset > offset, f"no progress reading at {offset}"
        out += got
        offset = info.next_offset
    return out


def keyed_batch(records, *, ts: int = 1_000_000, compression: int = rb.NONE, **kwargs) -> bytes:
    """A v2 batch of (key, value) records (value None: a tombstone), timestamps ts, ts+1, ..."""
    return rb.build_batch(
        [(k, v, [("h", b"%d" % i)], ts + i) for i, (k, v) in enumerate(records)], compression=compression, **kwargs
    )


def latest_by_key(log) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of its latest record, reading the whole log."""
    out = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 30)
        for pos, header in rb.iter_batches(info.records):
            for r in rb.decode_records(info.records, pos, header):
                if r.offset >= offset:
                    out[r.key] = (r.offset, r.value)
        offset = info.next_offset
    return out


def delete_old_segments(log, high_watermark: int, now_ms: int | None = None) -> int:
    """Retention in one call, as the log manager runs it (`Log.detach_old_segments`, then each
    detached segment's files deleted); how many segments were deleted."""
    doomed = log.detach_old_segments(high_watermark, now_ms)
    for segment in doomed:
        segment.delete()
    return len(doomed)
