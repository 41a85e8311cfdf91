"""Looking inside a v2 batch to keep some of its records (Kafka's `MemoryRecords.filterTo`, which
the log cleaner uses), and the produce-time check that every record has a key.

`record_columns(payload)` walks a records payload (decompressed) once and returns, per record, its
offset delta, timestamp delta, key (None when null), whether its value is null (a tombstone) and
its byte span, as parallel lists (the walk runs compiled, `minikafka_native.record_spans`, built by
`make setup`; `record_columns_reference` is the same walk in Python, and the fallback). `rebuild_batch` writes a batch holding only the chosen records, as Kafka's cleaner
does for magic 2: the same base offset, last offset delta (so the batch keeps its offset range and
the producer's sequence range, and offsets are never renumbered), base timestamp, producer id,
epoch, base sequence, partition leader epoch, attributes and codec; the records' own bytes are
copied unchanged (their deltas stay relative to the same base offset and timestamp), and
records_count, max timestamp (recomputed over the kept records for CreateTime, kept for
LogAppendTime), length and CRC are rewritten. An empty batch (no records) is how Kafka keeps an
idempotent producer's last batch once the cleaner has removed all of its records.

Errors: CorruptRecordBatch for a payload that does not parse (the caller's log is damaged).
"""

from __future__ import annotations

from typing import NamedTuple

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch

try:
    from minikafka_native import record_spans as _native_record_spans
except ImportError:  # pragma: no cover - make setup builds it; the reference stands in
    _native_record_spans = None


class RecordColumns(NamedTuple):
    """The records of a payload as parallel lists: key (None when null), offset and timestamp
    deltas (from the batch's base offset / timestamp), whether the value is null (a tombstone),
    and [start, end) of each record's bytes (length prefix included) in the payload."""

    keys: list
    offset_deltas: list
    timestamp_deltas: list
    null_values: list
    starts: list
    ends: list


def record_columns_reference(payload) -> RecordColumns:
    """The Python reference of the compiled walk (`minikafka_native.record_spans`)."""
    buf = bytes(payload)
    cols = RecordColumns([], [], [], [], [], [])
    pos, end = 0, len(buf)
    try:
        while pos < end:
            start = pos
            length, pos = rb.read_varint(buf, pos, end, 5)
            rec_end = pos + length
            if length <= 0 or rec_end > end:
                raise CorruptRecordBatch(f"record length {length} overruns the batch")
            ts_delta, pos = rb.read_varint(buf, pos + 1, rec_end)
            off_delta, pos = rb.read_varint(buf, pos, rec_end, 5)
            key_len, pos = rb.read_varint(buf, pos, rec_end, 5)
            key = None
            if key_len >= 0:
                if key_len > rec_end - pos:
                    raise CorruptRecordBatch(f"key of {key_len} bytes overruns its record")
                key, pos = buf[pos : pos + key_len], pos + key_len
            value_len, _ = rb.read_varint(buf, pos, rec_end, 5)
            for column, value in zip(cols, (key, off_delta, ts_delta, value_len < 0, start, rec_end)):
                column.append(value)
            pos = rec_end
    except IndexError:
        raise CorruptRecordBatch("a record overruns its batch") from None
    return cols


def record_columns(payload) -> RecordColumns:
    """Every record of a (decompressed) v2 records payload (compiled when `make setup` built
    `minikafka_native`); raises CorruptRecordBatch."""
    if _native_record_spans is None:
        return record_columns_reference(payload)
    try:
        return RecordColumns(*_native_record_spans(payload))
    except ValueError as e:
        raise CorruptRecordBatch(str(e)) from None


def batch_payload(buf, pos: int, header: rb.BatchHeader) -> bytes:
    """The records payload of the batch at `pos`, decompressed."""
    payload = memoryview(buf)[pos + rb.HEADER_SIZE : pos + header.size]
    return rb.decompress(header.compression, payload) if header.compression != rb.NONE else bytes(payload)


def rebuild_batch(header: rb.BatchHeader, payload: bytes, columns: RecordColumns, kept: list[int]) -> bytes:
    """The batch `header` describes holding only the records `kept` (indexes into `columns`, in
    order), compressed with the batch's own codec. See the module docstring for what is kept and
    what is rewritten."""
    starts, ends = columns.starts, columns.ends
    body = b"".join(payload[starts[i] : ends[i]] for i in kept)
    if header.is_log_append_time or not kept:
        max_ts = header.max_timestamp
    else:
        max_ts = header.base_timestamp + max(columns.timestamp_deltas[i] for i in kept)
    records = rb.compress(header.compression, body) if header.compression != rb.NONE else body
    out = bytearray(rb.HEADER_SIZE) + records
    rb.HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - rb.LOG_OVERHEAD,
        header.partition_leader_epoch,
        rb.MAGIC,
        0,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    out[17:21] = rb.compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)


def keyless_records(payload) -> list[int]:
    """Batch-relative indexes of the records without a key (a compacted topic refuses them)."""
    return [i for i, key in enumerate(record_columns(payload).keys) if key is None]
