"""Looking inside a v2 batch to keep some of its records (Kafka's `MemoryRecords.filterTo`, which
the log cleaner uses), and the produce-time check that every record has a key.

`record_spans(payload)` walks a records payload (decompressed) once and returns, per record, its
offset delta, timestamp delta, key (None when null), whether its value is null (a tombstone) and
its byte span. `rebuild_batch` writes a batch holding only the chosen records, as Kafka's cleaner
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


class RecordSpan(NamedTuple):
    """One record of a payload: deltas from the batch's base offset / timestamp, its key, whether
    its value is null, and [start, end) of its bytes (length prefix included) in the payload."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    null_value: bool
    start: int
    end: int


def _varint(buf, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordBatch("varint longer than allowed in a record")


def record_spans(payload) -> list[RecordSpan]:
    """Every record of a (decompressed) v2 records payload; raises CorruptRecordBatch."""
    buf = bytes(payload)
    spans, pos, end = [], 0, len(buf)
    try:
        while pos < end:
            start = pos
            length, pos = _varint(buf, pos)
            rec_end = pos + length
            if length <= 0 or rec_end > end:
                raise CorruptRecordBatch(f"record length {length} overruns the batch")
            ts_delta, pos = _varint(buf, pos + 1)
            off_delta, pos = _varint(buf, pos)
            key_len, pos = _varint(buf, pos)
            key = None
            if key_len >= 0:
                key, pos = buf[pos : pos + key_len], pos + key_len
            value_len, _ = _varint(buf, pos)
            spans.append(RecordSpan(off_delta, ts_delta, key, value_len < 0, start, rec_end))
            pos = rec_end
    except IndexError:
        raise CorruptRecordBatch("a record overruns its batch") from None
    return spans


def batch_payload(buf, pos: int, header: rb.BatchHeader) -> bytes:
    """The records payload of the batch at `pos`, decompressed."""
    payload = memoryview(buf)[pos + rb.HEADER_SIZE : pos + header.size]
    return rb.decompress(header.compression, payload) if header.compression != rb.NONE else bytes(payload)


def rebuild_batch(header: rb.BatchHeader, payload: bytes, kept: list[RecordSpan]) -> bytes:
    """The batch `header` describes holding only `kept` (spans of `payload`, in order), compressed
    with the batch's own codec. See the module docstring for what is kept and what is rewritten."""
    body = b"".join(payload[s.start : s.end] for s in kept)
    if header.is_log_append_time or not kept:
        max_ts = header.max_timestamp
    else:
        max_ts = max(header.base_timestamp + s.timestamp_delta for s in kept)
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
    return [i for i, span in enumerate(record_spans(payload)) if span.key is None]
