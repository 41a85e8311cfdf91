"""Blocking reads for the Spark data source (Spark's Python workers call these outside any event
loop): each call runs the trio client in its own `trio.run`. Reads stay below the end offset they
were planned with and follow leader changes (metadata refresh and retry)."""

from __future__ import annotations

from typing import NamedTuple

import trio

from client import Cluster, KafkaError
from client.reads import EARLIEST, LATEST, fetch_records_and_hw, list_offset
from protocol import record_batch as rb


class KafkaReadError(RuntimeError):
    pass


class SparkRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    headers: tuple


def list_topics(bootstrap: str) -> list[str]:
    async def run():
        async with Cluster.open(bootstrap, retries=20) as cluster:
            return sorted((await cluster.refresh_metadata(None)).topics)

    return trio.run(run)


def offsets_of(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (log start offset, high watermark)} now."""

    async def run():
        async with Cluster.open(bootstrap, retries=20) as cluster:
            out = {}
            for topic in topics:
                await cluster.partition_info(topic, 0, refresh=True)
                for partition in sorted(cluster.metadata.topics[topic]):
                    out[(topic, partition)] = (
                        await list_offset(cluster, topic, partition, EARLIEST),
                        await list_offset(cluster, topic, partition, LATEST),
                    )
            return out

    try:
        return trio.run(run)
    except KafkaError as e:
        raise KafkaReadError(f"cannot plan the read: {e}") from None


def fetch_range(
    bootstrap: str, topic: str, partition: int, start: int, end: int, timeout_s: float = 300.0
) -> list[SparkRecord]:
    """Every record with start <= offset < end (end at or below the HW when planned). Raises
    KafkaReadError if the range cannot be read within `timeout_s` (e.g. an unclean election
    shortened the log below the planned end)."""

    async def run():
        records, position = [], start
        async with Cluster.open(bootstrap, retries=20) as cluster:
            with trio.fail_after(timeout_s):
                while position < end:
                    data, high_watermark = await fetch_records_and_hw(
                        cluster, topic, partition, position, max_wait_ms=500, max_bytes=4 << 20
                    )
                    if not data and high_watermark >= end:
                        break  # [position, end) is committed and holds nothing: compaction removed it
                    for pos, header in rb.iter_batches(data, allow_partial_tail=True):
                        for r in rb.decode_records(data, pos, header):
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
