"""The records of v2 record batches (decompressed payloads) as column buffers in Arrow's layout,
for the Spark source: offsets and timestamps (µs) as little-endian int64, keys and values as
nullable binary columns (validity bitmap or None when no row is null, int32 offsets, data, null
count), headers as a list column (int32 list offsets, a key column, a value column). pyarrow
wraps them without copying (`spark_connector/arrow_records.py`); no Python object is made per
record.

`ColumnBuilder` is compiled (`minikafka_native.ColumnBuilder`, built by `make setup`);
`ReferenceColumnBuilder` is the same in Python over `record_batch.decode_records`, the fallback
and what a property test holds the compiled one equal to. Both raise CorruptRecordBatch for a
payload that does not parse (the same checks as `decode_records`) and then hold what they held
before the call.
"""

from __future__ import annotations

import struct

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch

try:
    from minikafka_native import ColumnBuilder as _Native
except ImportError:  # pragma: no cover - make setup builds it; the reference stands in
    _Native = None


class _Binary:
    def __init__(self) -> None:
        self.valid: list[bool] = []
        self.ends: list[int] = []
        self.data = bytearray()

    def push(self, value: bytes | None) -> None:
        if value is not None:
            self.data += value
        self.valid.append(value is not None)
        self.ends.append(len(self.data))

    def take(self) -> tuple:
        nulls = self.valid.count(False)
        bitmap = None
        if nulls:
            packed = bytearray((len(self.valid) + 7) // 8)
            for i, v in enumerate(self.valid):
                if v:
                    packed[i // 8] |= 1 << (i % 8)
            bitmap = bytes(packed)
        out = (bitmap, struct.pack(f"<{len(self.ends) + 1}i", 0, *self.ends), bytes(self.data), nulls)
        self.__init__()  # type: ignore[misc]
        return out


class ReferenceColumnBuilder:
    """The Python reference of `minikafka_native.ColumnBuilder` (same arguments, same output)."""

    def __init__(self, headers: bool = False) -> None:
        self.headers = headers
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys, self.values = _Binary(), _Binary()
        self.header_ends: list[int] = []
        self.header_keys, self.header_values = _Binary(), _Binary()

    def __len__(self) -> int:
        return len(self.offsets)

    def data_bytes(self) -> int:
        return sum(len(c.data) for c in (self.keys, self.values, self.header_keys, self.header_values))

    def add(self, payload, base_offset: int, base_timestamp: int, records_count: int, lo: int, hi: int) -> tuple:
        header = rb.BatchHeader(
            base_offset, 0, 0, rb.MAGIC, 0, 0, 0, base_timestamp, base_timestamp, -1, -1, -1, records_count
        )
        records = rb.decode_payload(bytes(payload), header)
        kept = [r for r in records if lo <= r.offset < hi]
        for r in kept:
            self.offsets.append(r.offset)
            self.timestamps.append(r.timestamp * 1000)
            self.keys.push(r.key)
            self.values.push(r.value)
            if self.headers:
                for h in r.headers:
                    self.header_keys.push(h.key.encode())
                    self.header_values.push(h.value)
                self.header_ends.append(len(self.header_keys.ends))
        return (len(kept), kept[0].offset, kept[-1].offset) if kept else (0, -1, -1)

    def finish(self) -> dict:
        n = len(self.offsets)
        out = {
            "rows": n,
            "offset": struct.pack(f"<{n}q", *self.offsets),
            "timestamp": struct.pack(f"<{n}q", *self.timestamps),
            "key": self.keys.take(),
            "value": self.values.take(),
        }
        if self.headers:
            ends = struct.pack(f"<{n + 1}i", 0, *self.header_ends)
            out["headers"] = (ends, self.header_keys.take(), self.header_values.take())
        self._reset()
        return out


class ColumnBuilder:
    """Records appended batch by batch, taken as Arrow column buffers (see the module
    docstring); compiled when available."""

    def __init__(self, headers: bool = False, reference: bool = False) -> None:
        self._impl = ReferenceColumnBuilder(headers) if reference or _Native is None else _Native(headers)

    def __len__(self) -> int:
        return len(self._impl)

    def data_bytes(self) -> int:
        """Bytes of keys, values and headers held."""
        return self._impl.data_bytes()

    def add(self, payload, base_offset: int, base_timestamp: int, records_count: int, lo: int, hi: int) -> tuple:
        """Append the records of a decompressed payload whose offset is in [lo, hi): returns
        (records added, first offset, last offset), -1 when none. Raises CorruptRecordBatch."""
        try:
            return self._impl.add(payload, base_offset, base_timestamp, records_count, lo, hi)
        except ValueError as e:
            raise CorruptRecordBatch(str(e)) from None

    def finish(self) -> dict:
        """The buffers (module docstring) of every record added since the last finish."""
        return self._impl.finish()
