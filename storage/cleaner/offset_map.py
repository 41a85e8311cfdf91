"""The offset map of one cleaning: record key -> offset of its latest record in the dirty section
(Kafka's `SkimpyOffsetMap`).

It holds at most `capacity` entries, computed from `log.cleaner.dedupe.buffer.size` as Kafka does
(24 bytes per entry: a 16-byte hash and an 8-byte offset, at `log.cleaner.io.buffer.load.factor`
0.9, shared by `log.cleaner.threads`); the cleaner stops adding batches before one would exceed it,
and cleans only up to the last offset it added.

`OffsetMap` is the compiled map (`minikafka_native.OffsetMap`, built by `make setup`): a 128-bit
hash per key (two SipHash digests with per-process random keys; a map lives for one cleaning in
one process) and its offset, about 24 bytes per entry plus the hash table's slack, so the worker's
memory stays near the configured buffer. `ReferenceOffsetMap` is the same map in Python (keys as
their MD5 digest, or themselves when no longer than that, as Kafka hashes keys with MD5): the
reference the property tests hold the compiled one to, and the fallback. Two keys whose hashes
collide could keep the wrong record, with the same negligible odds as in Kafka.

API of both: `put(key, offset)`, `get(key) -> offset | -1`, `put_batch(payload, base_offset)` (every
keyed record of a decompressed records payload), `kept(payload, base_offset, retain_deletes) ->
indexes | None` (the records a cleaning keeps; None for all), `room()`, `len()`, `capacity`,
`latest_offset`. Errors: OverflowError when a new key does not fit; ValueError (compiled) or
CorruptRecordBatch (reference) for a payload that does not parse.
"""

from __future__ import annotations

import hashlib
import logging

from protocol.record_filter import record_columns

log = logging.getLogger(__name__)

BYTES_PER_ENTRY = 24  # Kafka: MD5 (16 bytes) + offset (8 bytes)
DIGEST_SIZE = 16


def capacity_for(dedupe_buffer_size: int, threads: int, load_factor: float = 0.9) -> int:
    """Entries one cleaner's map may hold: Kafka's `(buffer / threads / 24) * load factor`."""
    return int(dedupe_buffer_size // max(1, threads) // BYTES_PER_ENTRY * load_factor)


def digest(key: bytes) -> bytes:
    return key if len(key) <= DIGEST_SIZE else hashlib.md5(key, usedforsecurity=False).digest()


class ReferenceOffsetMap:
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"an offset map needs room for at least one key, got {capacity}")
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the largest offset put so far

    def __len__(self) -> int:
        return len(self._offsets)

    def room(self) -> int:
        return self.capacity - len(self._offsets)

    def put(self, key: bytes, offset: int) -> None:
        d = digest(key)
        if d not in self._offsets and len(self._offsets) >= self.capacity:
            raise OverflowError(f"the offset map is full ({self.capacity} keys)")
        self._offsets[d] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        return self._offsets.get(digest(key), -1)

    def put_batch(self, payload, base_offset: int) -> None:
        columns = record_columns(payload)
        for key, delta in zip(columns.keys, columns.offset_deltas):
            if key is not None:
                self.put(key, base_offset + delta)

    def kept(self, payload, base_offset: int, retain_deletes: bool) -> list[int] | None:
        columns = record_columns(payload)
        kept = [
            i
            for i, (k, delta, null) in enumerate(zip(columns.keys, columns.offset_deltas, columns.null_values))
            if k is not None and self.get(k) <= base_offset + delta and (retain_deletes or not null)
        ]
        return None if len(kept) == len(columns.keys) else kept


try:
    from minikafka_native import OffsetMap
except ImportError:  # pragma: no cover - make setup builds it; the reference stands in
    log.warning("minikafka_native is not installed: the log cleaner's offset map runs in Python; run `make setup`")
    OffsetMap = ReferenceOffsetMap
