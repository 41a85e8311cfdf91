"""The offset map of one cleaning: record key -> offset of its latest record in the dirty section
(Kafka's `SkimpyOffsetMap`).

Keys are stored as their MD5 digest (16 bytes), or as themselves when no longer than that, as
Kafka's map stores an MD5 hash per key: a collision between two keys' digests could keep the wrong
record, with the same (negligible) odds as in Kafka. The map holds at most `capacity` entries,
computed from `log.cleaner.dedupe.buffer.size` as Kafka does (24 bytes per entry: a 16-byte hash
and an 8-byte offset, at `log.cleaner.io.buffer.load.factor` 0.9, shared by
`log.cleaner.threads`); the cleaner stops adding batches before it would exceed it, and cleans only
up to the last offset it added. A Python dict entry costs more memory than Kafka's 24 bytes (about
100-150 bytes with the digest object), so the worker's RSS is a few times the configured buffer.
"""

from __future__ import annotations

import hashlib

BYTES_PER_ENTRY = 24  # Kafka: MD5 (16 bytes) + offset (8 bytes)
DIGEST_SIZE = 16


def capacity_for(dedupe_buffer_size: int, threads: int, load_factor: float = 0.9) -> int:
    """Entries one cleaner's map may hold: Kafka's `(buffer / threads / 24) * load factor`."""
    return int(dedupe_buffer_size // max(1, threads) // BYTES_PER_ENTRY * load_factor)


def digest(key: bytes) -> bytes:
    return key if len(key) <= DIGEST_SIZE else hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"an offset map needs room for at least one key, got {capacity}")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the largest offset put so far

    def __len__(self) -> int:
        return len(self._offsets)

    def room(self) -> int:
        """Entries that may still be added."""
        return self.capacity - len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        """Record that `key`'s latest record is at `offset` (offsets are put in increasing order).
        Raises OverflowError when a new key would exceed the capacity."""
        d = digest(key)
        if d not in self._offsets and len(self._offsets) >= self.capacity:
            raise OverflowError(f"the offset map is full ({self.capacity} keys)")
        self._offsets[d] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, or -1 when the map does not hold it."""
        return self._offsets.get(digest(key), -1)
