"""One-partition reads shared by the CLI consumer and the PySpark source: ListOffsets (API key 2)
and Fetch (API key 1) sent to the partition's current leader as a consumer (replica_id -1),
retried through `Cluster.retry` across leader changes.

Isolation levels (KIP-98): READ_UNCOMMITTED reads up to the high watermark; READ_COMMITTED up to
the last stable offset, and the Fetch answer names the aborted transactions in its range, whose
batches `reader_batches` marks invisible as Kafka's consumer skips them (a producer's batches are skipped from
its aborted transaction's first offset until its ABORT marker). Control batches (transaction
markers) are never records to a reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from client.cluster import Cluster, KafkaError
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.control_records import read_marker
from protocol.errors import ErrorCode

EARLIEST = -2  # ListOffsets timestamp: the log start offset
LATEST = -1  # ListOffsets timestamp: the high watermark (the LSO for READ_COMMITTED)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


class Fetched(NamedTuple):
    """One partition's Fetch answer: raw batches, HW, LSO and [(producer id, first offset)]."""

    records: bytes
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]]


def reader_batches(data, aborted: list[tuple[int, int]] | None = None) -> Iterator[tuple[int, rb.BatchHeader, bool]]:
    """(position, header, visible) of each whole batch in `data`: control batches are never
    visible, and with `aborted` (READ_COMMITTED) no batch of an aborted transaction is. A reader
    moves past invisible batches without returning their records."""
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborting: set[int] = set()
    for pos, header in rb.iter_batches(data, allow_partial_tail=True):
        # as Kafka's consumer: every batch of a producer (its markers too) first takes in the
        # aborted transactions that began at or before it; an aborted transaction may hold no
        # data here at all, only its ABORT marker
        if header.producer_id >= 0:
            while pending and pending[0][1] <= header.last_offset:
                aborting.add(pending.pop(0)[0])
        if header.is_control:
            if header.producer_id in aborting:
                marker = read_marker(data, pos, header)
                if marker is not None and not marker.commit:
                    aborting.discard(header.producer_id)
            yield pos, header, False
            continue
        yield pos, header, not (header.is_transactional and header.producer_id in aborting)


async def list_offset(
    cluster: Cluster, topic: str, partition: int, timestamp: int, isolation_level: int = READ_UNCOMMITTED
) -> int:
    """The offset ListOffsets answers for `timestamp` (ms, or EARLIEST / LATEST).
    Raises KafkaError with the partition's error code once retries are spent."""

    async def attempt(refresh: bool) -> int:
        conn = await cluster.leader_connection(topic, partition, refresh)
        r = await conn.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}],
            },
        )
        p = r.topics[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            raise KafkaError(p.error_code, f"{topic}-{partition}")
        return p.offset

    return await cluster.retry(attempt, "ListOffsets")


async def fetch_records(
    cluster: Cluster, topic: str, partition: int, offset: int, *, max_wait_ms: int, max_bytes: int
) -> bytes:
    """The raw record-batch bytes (possibly empty, possibly ending in a partial batch) a Fetch from
    `offset` returns, waiting up to `max_wait_ms` for at least one byte and taking at most
    `max_bytes` bytes. Raises KafkaError with the partition's error code once retries are spent."""
    records, _ = await fetch_records_and_hw(
        cluster, topic, partition, offset, max_wait_ms=max_wait_ms, max_bytes=max_bytes
    )
    return records


async def fetch_records_and_hw(
    cluster: Cluster, topic: str, partition: int, offset: int, *, max_wait_ms: int, max_bytes: int
) -> tuple[bytes, int]:
    """`fetch_records` and the partition's high watermark from the same response: an empty
    answer from an offset below the HW means the offsets up to the HW hold no records (a compacted
    log's gap), not that they are still to come."""
    fetched = await fetch(cluster, topic, partition, offset, max_wait_ms=max_wait_ms, max_bytes=max_bytes)
    return fetched.records, fetched.high_watermark


async def fetch(
    cluster: Cluster,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    max_bytes: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> Fetched:
    """One Fetch of one partition at `offset` under `isolation_level`."""

    async def attempt(refresh: bool) -> Fetched:
        conn = await cluster.leader_connection(topic, partition, refresh)
        r = await conn.request(
            ApiKey.FETCH,
            {
                "replica_id": -1,
                "max_wait_ms": max_wait_ms,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "isolation_level": isolation_level,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                        ],
                    }
                ],
            },
        )
        p = r.responses[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            raise KafkaError(p.error_code, f"{topic}-{partition}")
        aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
        return Fetched(p.records or b"", p.high_watermark, p.last_stable_offset, aborted)

    return await cluster.retry(attempt, "Fetch")
