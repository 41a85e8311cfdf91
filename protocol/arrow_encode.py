"""Rows of Arrow columns encoded as v2 record payloads, for the Spark sink: no Python object per
row on the compiled path.

A column is `(validity or None, int32 offsets, data, array offset, length)`, the buffers of a pyarrow
`binary` or `string` array (`column_buffers` takes them from an array).

- `partition_rows(keys, values, explicit, partitions, sticky, sticky_bytes, batch_size)`: each
  row's partition, as Kafka's default partitioner: the explicit partition where the row has one,
  else toPositive(murmur2(key)) % partitions, else (a null key) the sticky partition, which moves
  to the next once `batch_size` bytes of values went to it (KIP-480). Returns (int32
  little-endian partitions, sticky partition, bytes sent to it).
- `encode_runs(keys, values, rows_partitions, max_bytes)`: the rows of each partition, in row
  order, as record payloads (offset deltas from 0, timestamp deltas 0, no headers) of at most
  `max_bytes` (a payload holds one record at least): [(partition, payload, records, bytes of keys
  and values)].

Both run compiled (`minikafka_native`, built by `make setup`); the `reference_*` functions are
the same in Python, the fallback, and what a property test holds the compiled ones equal to.
"""

from __future__ import annotations

import struct

from protocol import record_batch as rb
from protocol.partitioner import partition_for_key

try:
    from minikafka_native import encode_runs as _native_encode_runs
    from minikafka_native import partition_rows as _native_partition_rows
except ImportError:  # pragma: no cover - make setup builds it; the references stand in
    _native_encode_runs = _native_partition_rows = None


def bytes_view(buffer) -> memoryview:
    """A pyarrow Buffer (or any buffer) as unsigned bytes, without a copy."""
    return memoryview(buffer).cast("B")


def column_buffers(array) -> tuple:
    """(validity or None, offsets, data, array offset, length) of a pyarrow binary or string array."""
    validity, offsets, data = array.buffers()
    valid = bytes_view(validity) if array.null_count else None
    return (valid, bytes_view(offsets), bytes_view(data) if data is not None else b"", array.offset, len(array))


def int32_buffers(array) -> tuple:
    """(validity or None, values, array offset) of a pyarrow int32 array (`partition_rows`'s
    explicit partitions)."""
    validity, values = array.buffers()
    return (bytes_view(validity) if array.null_count else None, bytes_view(values), array.offset)


def _rows(column) -> list[bytes | None]:
    validity, offsets, data, offset, n = column
    offsets, data = bytes(offsets), bytes(data)
    validity = bytes(validity) if validity is not None else None
    ends = struct.unpack(f"<{n + 1}i", offsets[4 * offset : 4 * (offset + n + 1)])
    out: list[bytes | None] = []
    for row in range(n):
        i = row + offset
        if validity is not None and not validity[i // 8] & (1 << (i % 8)):
            out.append(None)
        else:
            out.append(data[ends[row] : ends[row + 1]])
    return out


def reference_partition_rows(keys, values, explicit, partitions, sticky, sticky_bytes, batch_size) -> tuple:
    vals = _rows(values)
    ks = _rows(keys) if keys is not None else [None] * len(vals)
    chosen: list[int | None] = [None] * len(vals)
    if explicit is not None:
        validity, data, offset = explicit
        data = bytes(data)
        for row in range(len(vals)):
            i = row + offset
            if validity is None or bytes(validity)[i // 8] & (1 << (i % 8)):
                chosen[row] = struct.unpack_from("<i", data, 4 * i)[0]
    sticky %= partitions
    out = []
    for row, (key, value) in enumerate(zip(ks, vals, strict=True)):
        p = chosen[row]
        if p is None and key is not None:
            p = partition_for_key(key, partitions)
        if p is None:
            if sticky_bytes >= batch_size:
                sticky, sticky_bytes = (sticky + 1) % partitions, 0
            sticky_bytes += len(value or b"")
            p = sticky
        out.append(p)
    return struct.pack(f"<{len(out)}i", *out), sticky, sticky_bytes


def reference_encode_runs(keys, values, rows_partitions, max_bytes) -> list[tuple]:
    vals = _rows(values)
    ks = _rows(keys) if keys is not None else [None] * len(vals)
    parts = struct.unpack(f"<{len(vals)}i", bytes(rows_partitions))
    open_runs: dict[int, list] = {}
    out = []
    for key, value, partition in zip(ks, vals, parts, strict=True):
        run = open_runs.setdefault(partition, [bytearray(), 0, 0])
        record = rb.encode_record(run[1], 0, key, value)
        if run[1] and len(run[0]) + len(record) > max_bytes:
            out.append((partition, bytes(run[0]), run[1], run[2]))
            run[:] = [bytearray(), 0, 0]
            record = rb.encode_record(0, 0, key, value)
        run[0] += record
        run[1] += 1
        run[2] += len(key or b"") + len(value or b"")
    out += [(p, bytes(r[0]), r[1], r[2]) for p, r in open_runs.items()]
    return out


def partition_rows(keys, values, explicit, partitions: int, sticky: int, sticky_bytes: int, batch_size: int):
    """See the module docstring; compiled when available."""
    fn = _native_partition_rows or reference_partition_rows
    return fn(keys, values, explicit, partitions, sticky, sticky_bytes, batch_size)


def encode_runs(keys, values, rows_partitions, max_bytes: int) -> list[tuple]:
    """See the module docstring; compiled when available."""
    return (_native_encode_runs or reference_encode_runs)(keys, values, rows_partitions, max_bytes)
