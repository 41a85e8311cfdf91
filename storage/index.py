"""Kafka's sparse segment indexes: `.index` (offset -> position) and `.timeindex` (time -> offset).

File formats (Kafka `OffsetIndex`, `TimeIndex`), big-endian, no header:
- `.index`: 8-byte entries, int32 offset relative to the segment's base offset + int32 byte
  position in the `.log` of the batch whose LAST offset is that offset;
- `.timeindex`: 12-byte entries, int64 timestamp (ms) + int32 relative offset; timestamps strictly
  increase from entry to entry.

An active index is preallocated to `segment.index.bytes` (rounded down to whole entries) and
trimmed to its entries when the segment rolls or closes. Entries live in memory too (loaded lazily
on first use, as Kafka's LazyIndex); lookups are binary searches. A file that fails the sanity check
(size not a multiple of the entry size, keys not increasing) raises `CorruptIndex`, and the loader
rebuilds it from the log.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from storage.errors import CorruptIndex


class _Index:
    ENTRY: struct.Struct
    KEY_TYPE: str

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, *, new: bool = False):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self._keys: array = array(self.KEY_TYPE)  # entry keys and values, read from the file lazily
        self._values: array = array("q")
        self._loaded = new
        self._fd: int | None = None
        self._preallocated = False
        self._written = 0  # entries already in the file; the rest wait for write_pending()
        if new:
            os.ftruncate(self._open(), 0)

    # ---- file ------------------------------------------------------------------------------
    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _decode(self, key: int, value: int) -> tuple[int, int]:
        """File entry -> (key, value) in absolute terms."""
        raise NotImplementedError

    def _encode(self, key: int, value: int) -> tuple[int, int]:
        raise NotImplementedError

    def _check_values(self, log_size: int) -> None:
        raise NotImplementedError

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        keys, values = array(self.KEY_TYPE), array("q")
        self.write_pending()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) % self.ENTRY.size:
            raise CorruptIndex(
                f"{self.path}: {len(data)} bytes is not a whole number of {self.ENTRY.size}-byte entries"
            )
        for key, value in self.ENTRY.iter_unpack(data):
            key, value = self._decode(key, value)
            if keys and key <= keys[-1]:
                raise CorruptIndex(f"{self.path}: entry {len(keys)} key {key} does not increase")
            keys.append(key)
            values.append(value)
        self._keys, self._values, self._loaded = keys, values, True
        self._written = len(keys)

    def write_pending(self) -> None:
        """Write entries appended since the last call (the file is preallocated on first use).
        Like Kafka's mmap'd index pages, new entries reach the file lazily: on flush, roll and
        close; recovery rebuilds the index of any segment not flushed before a crash."""
        if not self._loaded or self._written >= len(self._keys):
            return
        fd = self._open()
        if not self._preallocated:
            os.ftruncate(fd, self.max_entries * self.ENTRY.size)
            self._preallocated = True
        start = self._written
        data = b"".join(self.ENTRY.pack(*self._encode(k, v)) for k, v in zip(self._keys[start:], self._values[start:]))
        os.pwrite(fd, data, start * self.ENTRY.size)
        self._written = len(self._keys)

    def sanity_check(self, log_size: int) -> None:
        """Load and check the file against the log's size; raises CorruptIndex."""
        self._ensure_loaded()
        self._check_values(log_size)

    # ---- entries ---------------------------------------------------------------------------
    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._keys)

    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        self._ensure_loaded()
        if len(self._keys) >= self.max_entries:
            raise CorruptIndex(f"{self.path}: index is full ({self.max_entries} entries)")
        self._keys.append(key)
        self._values.append(value)

    def _floor(self, key: int) -> int:
        """Index of the last entry with entry key <= key, or -1."""
        self._ensure_loaded()
        return bisect.bisect_right(self._keys, key) - 1

    def _truncate_entries(self, n: int) -> None:
        self._ensure_loaded()
        del self._keys[n:]
        del self._values[n:]
        self._written = min(self._written, n)
        if self._preallocated:
            return  # stale bytes beyond the entries are ignored until trim
        os.ftruncate(self._open(), n * self.ENTRY.size)

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds from the log)."""
        self._keys, self._values, self._loaded = array(self.KEY_TYPE), array("q"), True
        os.ftruncate(self._open(), 0)
        self._preallocated = False
        self._written = 0

    def trim(self) -> None:
        """Shrink the file to its entries (on roll and close)."""
        if self._loaded:
            self.write_pending()
            os.ftruncate(self._open(), len(self._keys) * self.ENTRY.size)
            self._preallocated = False

    def flush(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        self.trim()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path


class OffsetIndex(_Index):
    """`.index`: last offset of a batch -> file position of that batch."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "q"

    def _decode(self, rel_offset, position):
        return self.base_offset + rel_offset, position

    def _encode(self, offset, position):
        return offset - self.base_offset, position

    def _check_values(self, log_size: int) -> None:
        if self._keys and self._keys[0] < self.base_offset:
            raise CorruptIndex(f"{self.path}: first entry below the base offset")
        if any(p >= log_size for p in self._values) or any(b <= a for a, b in zip(self._values, self._values[1:])):
            raise CorruptIndex(f"{self.path}: positions must increase and stay below {log_size}")

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def append(self, offset: int, position: int) -> None:
        if self._loaded and self._keys and offset <= self._keys[-1]:
            raise ValueError(f"offset {offset} is not above the last indexed offset")
        self._append(offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= `offset`, or (base, 0)."""
        i = self._floor(offset)
        return (self.base_offset, 0) if i < 0 else (self._keys[i], self._values[i])

    def positions_at_or_below(self, position: int) -> tuple[int, int]:
        """The two last indexed batch positions <= `position` (-1 where there is none): batch
        starts from which a scan reaches the batch boundary below `position` in at most two
        index intervals."""
        self._ensure_loaded()
        i = bisect.bisect_right(self._values, position) - 1
        return (self._values[i - 1] if i >= 1 else -1), (self._values[i] if i >= 0 else -1)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= `offset`."""
        self._ensure_loaded()
        self._truncate_entries(bisect.bisect_left(self._keys, offset))


class TimeIndex(_Index):
    """`.timeindex`: max timestamp so far -> the offset that carried it."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"

    def _decode(self, timestamp, rel_offset):
        return timestamp, self.base_offset + rel_offset

    def _encode(self, timestamp, offset):
        return timestamp, offset - self.base_offset

    def _check_values(self, log_size: int) -> None:
        if any(b < a for a, b in zip(self._values, self._values[1:])):
            raise CorruptIndex(f"{self.path}: offsets must not decrease")

    def last_entry(self) -> tuple[int, int] | None:
        self._ensure_loaded()
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append unless the timestamp does not exceed the last entry's (Kafka's rule)."""
        last = self.last_entry()
        if last is None or timestamp > last[0]:
            if last is not None and offset < last[1]:
                return
            if not self.is_full():
                self._append(timestamp, offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= `timestamp`, or (-1, base)."""
        i = self._floor(timestamp)
        return (-1, self.base_offset) if i < 0 else (self._keys[i], self._values[i])

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= `offset`."""
        self._ensure_loaded()
        n = len(self._values)
        while n and self._values[n - 1] >= offset:
            n -= 1
        self._truncate_entries(n)
