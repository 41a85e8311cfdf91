"""Control records: the transaction markers a coordinator writes (KIP-98; Kafka's
`ControlRecordType`, `EndTransactionMarker`).

A marker is a v2 batch with the transactional and control attributes set, the producer's id and
epoch, base sequence -1, and one record whose
- key is `int16 version (0), int16 type` (0 = ABORT, 1 = COMMIT), and
- value is `int16 version (0), int32 coordinator epoch`.
Readers accept any key version (Kafka reads the type from the first two fields of every version)
and a value of a newer version as long as it starts with the same fields.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class Marker(NamedTuple):
    """A decoded end-transaction marker."""

    commit: bool
    coordinator_epoch: int


def marker_batch(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, *, timestamp_ms: int | None = None
) -> bytes:
    """One uncompressed control batch holding a COMMIT or ABORT marker (offsets unassigned)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return rb.build_batch(
        [(key, value)],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_marker(buf, pos: int, header: rb.BatchHeader) -> Marker | None:
    """The marker of the control batch at `pos`, or None for another control record type
    (Kafka skips unknown ones). Raises CorruptRecordBatch for an unreadable control record."""
    records = rb.decode_records(buf, pos, header)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        raise CorruptRecordBatch(f"control batch at offset {header.base_offset} has no readable control key")
    _, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    value = records[0].value
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordBatch(f"transaction marker at offset {header.base_offset} has no readable value")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return Marker(kind == COMMIT, coordinator_epoch)
