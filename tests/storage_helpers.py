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
    """Every record from the log start offset to LEO, across segments."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records
        got = [(o, v) for o, v in values(data) if o >= offset]
        assert got, f"no progress reading at {offset}"
        out += got
        offset = got[-1][0] + 1
    return out
