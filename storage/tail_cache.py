"""The bytes of a segment's last small appends, kept in memory so that reads at the log's tail
(a follower fetching what the leader just appended, a consumer at the high watermark) are
served without a `pread`, a header scan or a CRC check (issue 48: these were a quarter of the
leader's work per one-record acks=all Produce).

What is kept is exactly what the segment wrote (offsets assigned, CRCs checked on append), so a
read from here needs no verification: the CRC check on a file read guards against the disk, and
these bytes never came from it. The appends kept are contiguous and end at the segment's end:
an append too large to keep empties the cache, and the owner empties it whenever the file
changes otherwise (truncation, recovery, the end of the segment's active life).

Bounds: at most `max_bytes` in all (the oldest appends go first) and only appends of at most
`max_append_bytes` each, so a partition's cost is bounded whatever its traffic.

Not thread-safe: one owner (a `LogSegment`).
"""

from __future__ import annotations

import bisect
import struct

_BASE_AND_LENGTH = struct.Struct(">qi")  # RecordBatch v2: baseOffset, batchLength
_LOG_OVERHEAD = 12  # baseOffset and batchLength precede the batch_length bytes

#: bytes kept per segment, and the largest append kept (larger ones go unkept)
DEFAULT_MAX_BYTES = 64 * 1024
DEFAULT_MAX_APPEND_BYTES = 16 * 1024


class TailCache:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_append_bytes: int = DEFAULT_MAX_APPEND_BYTES):
        self.max_bytes = max_bytes
        self.max_append_bytes = min(max_append_bytes, max_bytes)
        self.clear()

    def clear(self) -> None:
        self._first: list[int] = []  # each kept append's first offset (its first batch's base offset)
        self._last: list[int] = []  # its last offset, ascending
        self._single: list[bool] = []  # whether it is one batch
        self._data: list[bytes] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def size(self) -> int:
        """Bytes kept."""
        return self._bytes

    def add(self, buffers: list, size: int, last_offset: int) -> None:
        """An append of whole batches (`buffers` totalling `size` bytes, offsets assigned, the last
        `last_offset`) just written at the segment's end. One too large to keep empties the cache
        (what is kept must stay contiguous)."""
        if size > self.max_append_bytes or size < _LOG_OVERHEAD:
            self.clear()
            return
        data = buffers[0] if len(buffers) == 1 and isinstance(buffers[0], bytes) else b"".join(buffers)
        first, batch_length = _BASE_AND_LENGTH.unpack_from(data, 0)
        self._first.append(first)
        self._last.append(last_offset)
        self._single.append(batch_length + _LOG_OVERHEAD == size)
        self._data.append(data)
        self._bytes += size
        while self._bytes > self.max_bytes:
            self._bytes -= len(self._data[0])
            del self._first[0], self._last[0], self._single[0], self._data[0]

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> tuple[bytes, int] | None:
        """(bytes, offset after them) for a read from `offset`: the kept appends from the one that
        starts at `offset` (or, being one batch, holds it), whole, while they fit in `max_bytes`
        and end below `max_offset` (exclusive; None: no bound). None when no kept append holds
        `offset`, or an append of several batches breaks a bound: the file read answers then,
        with its finer rules (min one batch, an append's batches one by one), so that every
        answer from here is the one the file read gives."""
        i = bisect.bisect_left(self._last, offset)
        if i == len(self._last):
            return None
        first = self._first[i]
        if first != offset and not (self._single[i] and first <= offset):
            return None
        end, total = i, 0
        while end < len(self._data):
            size = len(self._data[end])
            if total + size > max_bytes or (max_offset is not None and self._last[end] >= max_offset):
                if end == i or not self._single[end]:
                    return None  # the file read would return some of its batches: it answers
                break
            total += size
            end += 1
        data = self._data[i] if end == i + 1 else b"".join(self._data[i:end])
        return data, self._last[end - 1] + 1
