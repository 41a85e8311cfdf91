"""Kafka's default partitioner (`BuiltInPartitioner`). A keyed record goes to
toPositive(murmur2(key)) % partitions, with `Utils.murmur2` (the Python reference of the compiled
one in `native/src/encode.rs`; our producer uses it per record). A record without a key goes to
its topic's sticky partition (KIP-480, KIP-794), which moves to the next partition once batch.size
bytes went to it: records fill one batch at a time instead of one small batch per partition."""

from __future__ import annotations

import random


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (as `Utils.murmur2`), a signed 32-bit result."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Where a producer's records without key and without partition go (`partition`): per topic,
    one partition, chosen at random at first, until `batch_size` bytes (keys' and values') went
    to it, then the next one (the rule `protocol.arrow_encode.partition_rows` applies to columns)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._sticky: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes sent to it)

    def partition(self, topic: str, partitions: int, size: int) -> int:
        """The partition (0..partitions-1) of the next `size`-byte record to `topic`."""
        partition, sent = self._sticky.get(topic) or (random.randrange(partitions), 0)
        if sent >= self.batch_size:
            partition, sent = partition + 1, 0
        partition %= partitions
        self._sticky[topic] = (partition, sent + size)
        return partition
