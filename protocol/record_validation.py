"""What a leader checks of a client's record batch before appending it (Kafka's `LogValidator` and
`DefaultRecord.readFrom`, magic 2), so that nothing a consumer cannot read is ever acknowledged.

Batch level (`validate_client_batch`): last_offset_delta + 1 equals records_count; a client may not
write control batches; a transactional batch needs a producer id; a producer id needs a base
sequence. Record level (`validate_records`, over the records payload, decompressed first when the
batch is compressed): exactly records_count records, each with a positive length inside the batch,
varints of their sizes, offset deltas 0, 1, 2, ... in order, key and value lengths of -1 (null) or
inside the record, a header count that fits, non-null header keys, and nothing left over. Errors
are `InvalidRecord` (INVALID_RECORD, 87, with KIP-467 record errors: the batch-relative index of
the bad record and a message); the batch is not appended.

The record-level walk runs compiled (`native/`, the `minikafka_native` extension built by
`make setup`); `validate_records_reference` below is the same walk in Python, the reference the
property tests hold the compiled one to, and the fallback when the extension is missing.
"""

from __future__ import annotations

import logging

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch, ErrorCode

log = logging.getLogger(__name__)

try:
    from minikafka_native import validate_records as _native_validate_records
except ImportError:  # pragma: no cover - make setup builds it; the reference stands in
    _native_validate_records = None
    log.warning("minikafka_native is not installed: validating records in Python (slower); run `make setup`")


class InvalidRecord(CorruptRecordBatch):
    """A batch Kafka's LogValidator refuses (INVALID_RECORD). `record_errors` is KIP-467's
    [(batch_index, message)] for record-level errors (empty for batch-level ones)."""

    error_code = ErrorCode.INVALID_RECORD

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None):
        super().__init__(message)
        self.record_errors = record_errors or []


def validate_client_batch(buf, pos: int, header: rb.BatchHeader) -> None:
    """Every check of one client batch (its CRC was checked already). Raises InvalidRecord, or
    CorruptRecordBatch for a count that disagrees with the offsets (Kafka's CORRUPT_MESSAGE)."""
    if header.last_offset_delta + 1 != header.records_count:
        raise CorruptRecordBatch(
            f"last_offset_delta {header.last_offset_delta} disagrees with records_count {header.records_count}"
        )
    if header.is_control:
        raise InvalidRecord("clients are not allowed to write control records")
    if header.is_transactional and header.producer_id < 0:
        raise InvalidRecord("a transactional batch needs a producer id")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecord(
            f"invalid sequence number {header.base_sequence} in a batch of producer {header.producer_id}"
        )
    payload: memoryview | bytes = memoryview(buf)[pos + rb.HEADER_SIZE : pos + header.size]
    if header.compression != rb.NONE:
        payload = rb.decompress(header.compression, payload)
    error = validate_records(payload, header.records_count)
    if error is not None:
        index, message = error
        raise InvalidRecord(f"record {index} of the batch: {message}", [(index, message)])


def validate_records(payload, records_count: int) -> tuple[int, str] | None:
    """(index, message) of the first invalid record of a records payload, or None (compiled)."""
    if _native_validate_records is not None:
        return _native_validate_records(payload, records_count)
    return validate_records_reference(payload, records_count)


class _Invalid(Exception):
    pass


def _varint(buf, pos: int, end: int, max_bytes: int, what: str) -> tuple[int, int]:
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Invalid(f"truncated {what} varint")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise _Invalid(f"{what} varint longer than {max_bytes} bytes")


def _blob(buf, pos: int, end: int, nullable: bool, what: str) -> int:
    n, pos = _varint(buf, pos, end, 5, what)
    if n < -1 or (n == -1 and not nullable):
        raise _Invalid(f"invalid {what} length {n}")
    if n > 0:
        if n > end - pos:
            raise _Invalid(f"{what} of {n} bytes overruns its record")
        pos += n
    return pos


def _record(buf, pos: int, end: int, index: int) -> int:
    length, pos = _varint(buf, pos, end, 5, "record length")
    if length <= 0:
        raise _Invalid(f"invalid record length {length}")
    if length > end - pos:
        raise _Invalid(f"record length {length} overruns the batch")
    rec_end = pos + length
    pos += 1  # attributes
    _, pos = _varint(buf, pos, rec_end, 10, "timestamp delta")
    offset_delta, pos = _varint(buf, pos, rec_end, 5, "offset delta")
    if offset_delta != index:
        raise _Invalid(f"offset delta {offset_delta} where {index} was expected")
    pos = _blob(buf, pos, rec_end, True, "key")
    pos = _blob(buf, pos, rec_end, True, "value")
    headers, pos = _varint(buf, pos, rec_end, 5, "header count")
    if headers < 0 or headers > (rec_end - pos) // 2:
        raise _Invalid(f"invalid header count {headers}")
    for _ in range(headers):
        pos = _blob(buf, pos, rec_end, False, "header key")
        pos = _blob(buf, pos, rec_end, True, "header value")
    if pos != rec_end:
        raise _Invalid(f"record has {rec_end - pos} bytes beyond its fields")
    return rec_end


def validate_records_reference(payload, records_count: int) -> tuple[int, str] | None:
    """The pure-Python reference of the compiled walk: same checks, order and messages."""
    buf = memoryview(payload).cast("B") if not isinstance(payload, bytes) else payload
    pos, end, index = 0, len(buf), 0
    while pos < end:
        if index >= records_count:
            return index, f"more records than the header's records_count {records_count}"
        try:
            pos = _record(buf, pos, end, index)
        except _Invalid as e:
            return index, str(e)
        index += 1
    if index != records_count:
        return index, f"header says {records_count} records, payload holds {index}"
    return None
