"""Blocking reads for the Spark data source (Spark's Python workers call these outside any event
loop): each call runs the trio client in its own `trio.run`. Reads stay below the end offset they
were planned with and follow leader changes (metadata refresh and retry)."""

from __future__ import annotations

from typing import NamedTuple

import trio

from client import Cluster, KafkaError
from client.reads import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED, fetch, list_offset, reader_batches
from protocol import record_batch as rb
from security.config import client_security


class KafkaReadError(RuntimeError):
    pass


class SparkRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    headers: tuple


def _open(bootstrap: str, security: dict | None):
    """A client for `bootstrap` with the source's Kafka client security keys (Spark's `kafka.*`
    options without the prefix: security.protocol, sasl.*, ssl.*)."""
    return Cluster.open(bootstrap, retries=20, security=client_security(security) if security else None)


def list_topics(bootstrap: str, security: dict | None = None) -> list[str]:
    async def run():
        async with _open(bootstrap, security) as cluster:
            return sorted((await cluster.refresh_metadata(None)).topics)

    return trio.run(run)


def offsets_of(
    bootstrap: str, topics: list[str], isolation_level: int = READ_UNCOMMITTED, security: dict | None = None
) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (log start offset, high watermark)} now; the last stable offset instead
    of the high watermark for READ_COMMITTED."""

    async def run():
        async with _open(bootstrap, security) as cluster:
            out = {}
            for topic in topics:
                await cluster.partition_info(topic, 0, refresh=True)
                for partition in sorted(cluster.metadata.topics[topic]):
                    out[(topic, partition)] = (
                        await list_offset(cluster, topic, partition, EARLIEST),
                        await list_offset(cluster, topic, partition, LATEST, isolation_level),
                    )
            return out

    try:
        return trio.run(run)
    except KafkaError as e:
        raise KafkaReadError(f"cannot plan the read: {e}") from None


def fetch_range(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    timeout_s: float = 300.0,
    isolation_level: int = READ_UNCOMMITTED,
    security: dict | None = None,
) -> list[SparkRecord]:
    """Every record with start <= offset < end (end at or below the HW, or the LSO for
    READ_COMMITTED, when planned); never transaction markers, and under READ_COMMITTED no record
    of an aborted transaction. Raises KafkaReadError if the range cannot be read within
    `timeout_s` (e.g. an unclean election shortened the log below the planned end)."""

    async def run():
        records, position = [], start
        async with _open(bootstrap, security) as cluster:
            with trio.fail_after(timeout_s):
                while position < end:
                    fetched = await fetch(
                        cluster,
                        topic,
                        partition,
                        position,
                        max_wait_ms=500,
                        max_bytes=4 << 20,
                        isolation_level=isolation_level,
                    )
                    data = fetched.records
                    committed = isolation_level == READ_COMMITTED
                    bound = fetched.last_stable_offset if committed else fetched.high_watermark
                    if not data and bound >= end:
                        break  # [position, end) is readable and holds nothing: compaction removed it
                    aborted = fetched.aborted if committed else None
                    for pos, header, visible in reader_batches(data, aborted):
                        for r in rb.decode_records(data, pos, header) if visible else ():
                            if position <= r.offset < end:
                                records.append(
                                    SparkRecord(
                                        r.key,
                                        r.value,
                                        r.offset,
                                        r.timestamp,
                                        1 if header.is_log_append_time else 0,
                                        r.headers,
                                    )
                                )
                        position = max(position, header.next_offset)
        return records

    try:
        return trio.run(run)
    except (KafkaError, trio.TooSlowError) as e:
        raise KafkaReadError(f"cannot read {topic}-{partition} [{start}, {end}): {e or 'timed out'}") from None
