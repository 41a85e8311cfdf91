"""One-partition reads shared by the CLI consumer and the PySpark source: ListOffsets (API key 2)
and Fetch (API key 1) sent to the partition's current leader as a consumer (replica_id -1,
READ_UNCOMMITTED), retried through `Cluster.retry` across leader changes."""

from __future__ import annotations

from client.cluster import Cluster, KafkaError
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

EARLIEST = -2  # ListOffsets timestamp: the log start offset
LATEST = -1  # ListOffsets timestamp: the high watermark (what a consumer may read up to)


async def list_offset(cluster: Cluster, topic: str, partition: int, timestamp: int) -> int:
    """The offset ListOffsets answers for `timestamp` (ms, or EARLIEST / LATEST).
    Raises KafkaError with the partition's error code once retries are spent."""

    async def attempt(refresh: bool) -> int:
        conn = await cluster.leader_connection(topic, partition, refresh)
        r = await conn.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": 0,
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

    async def attempt(refresh: bool) -> tuple[bytes, int]:
        conn = await cluster.leader_connection(topic, partition, refresh)
        r = await conn.request(
            ApiKey.FETCH,
            {
                "replica_id": -1,
                "max_wait_ms": max_wait_ms,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "isolation_level": 0,
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
        return p.records or b"", p.high_watermark

    return await cluster.retry(attempt, "Fetch")
