"""Blocking reads for the Spark data source (Spark's Python workers call these outside any event
loop): each call runs the trio client in its own `trio.run`. Reads stay below the end offset they
were planned with and follow leader changes (metadata refresh and retry)."""

from __future__ import annotations

from typing import NamedTuple

import trio

from client import Cluster, KafkaError
from client.reads import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED, fetch, list_offset, reader_batches
from protocol import record_batch as rb
from protocol.arrow_columns import ColumnBuilder
from protocol.errors import ErrorCode
from protocol.record_filter import batch_payload
from security.config import client_security


class KafkaReadError(RuntimeError):
    pass


class ColumnChunk(NamedTuple):
    """Up to `CHUNK_ROWS` records of one partition as Arrow column buffers
    (`protocol.arrow_columns`), with their timestamp types as runs of (rows, type: 0 CreateTime,
    1 LogAppendTime)."""

    columns: dict
    timestamp_types: list[tuple[int, int]]


CHUNK_ROWS = 32768
CHUNK_BYTES = 64 << 20


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


def offsets_for_times(
    bootstrap: str, timestamps: dict[tuple[str, int], int], security: dict | None = None
) -> dict[tuple[str, int], int]:
    """{(topic, partition): the first offset whose timestamp is at or after the given ms, or -1
    when there is none} (ListOffsets with a timestamp, as Kafka's offsetsForTimes)."""

    async def run():
        async with _open(bootstrap, security) as cluster:
            return {tp: await list_offset(cluster, *tp, ts) for tp, ts in timestamps.items()}

    try:
        return trio.run(run)
    except KafkaError as e:
        raise KafkaReadError(f"cannot look up offsets by timestamp: {e}") from None


class DataLossError(KafkaReadError):
    """Offsets a query should read are gone from Kafka (retention, DeleteRecords, compaction)."""

    def __init__(self, topic: str, partition: int, first: int, end: int):
        super().__init__(
            f"offsets [{first}, {end}) of {topic}-{partition} are no longer in Kafka: some data may have been "
            "lost because it was deleted (retention, DeleteRecords) or compacted before the query read it. "
            'If you don\'t want the query to fail on such cases, set the source option "failOnDataLoss" to "false".'
        )
        self.topic, self.partition, self.first, self.end = topic, partition, first, end


def fetch_range(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    timeout_s: float = 300.0,
    isolation_level: int = READ_UNCOMMITTED,
    security: dict | None = None,
    fail_on_data_loss: bool = False,
    headers: bool = False,
) -> list[ColumnChunk]:
    """Every record with start <= offset < end (end at or below the HW, or the LSO for
    READ_COMMITTED, when planned), decoded straight into column chunks (no Python object per
    record; `headers` adds the headers column); never transaction markers, and under
    READ_COMMITTED no record of an aborted transaction. Offsets in the range that Kafka no longer
    has (below the log start offset, or removed by compaction; not those of markers or aborted
    batches) raise DataLossError with `fail_on_data_loss` and are skipped without it. Raises
    KafkaReadError if the range cannot be read within `timeout_s` (e.g. an unclean election
    shortened the log below the planned end)."""

    def lost(first: int, stop: int) -> None:
        if fail_on_data_loss and first < min(stop, end):
            raise DataLossError(topic, partition, first, min(stop, end))

    builder = ColumnBuilder(headers)
    chunks: list[ColumnChunk] = []
    types: list[tuple[int, int]] = []

    def cut() -> None:
        chunks.append(ColumnChunk(builder.finish(), list(types)))
        types.clear()

    def add(data, pos: int, header: rb.BatchHeader, position: int) -> int:
        """Append the batch's records in [position, end); returns the next position."""
        payload = batch_payload(data, pos, header)
        added, first, last = builder.add(
            payload, header.base_offset, header.base_timestamp, header.records_count, position, end
        )
        if added:
            lost(position, first)  # records compacted out of the batch's start
            if fail_on_data_loss and last - first + 1 != added:  # ... or out of its middle
                offsets = [r.offset for r in rb.decode_payload(payload, header) if position <= r.offset < end]
                gap = next(i for i in range(1, len(offsets)) if offsets[i] != offsets[i - 1] + 1)
                lost(offsets[gap - 1] + 1, offsets[gap])
            t = 1 if header.is_log_append_time else 0
            if types and types[-1][1] == t:
                types[-1] = (types[-1][0] + added, t)
            else:
                types.append((added, t))
            position = last + 1
            if len(builder) >= CHUNK_ROWS or builder.data_bytes() >= CHUNK_BYTES:
                cut()
        return position

    async def run():
        position = start
        async with _open(bootstrap, security) as cluster:
            with trio.fail_after(timeout_s):
                while position < end:
                    try:
                        fetched = await fetch(
                            cluster,
                            topic,
                            partition,
                            position,
                            max_wait_ms=500,
                            max_bytes=4 << 20,
                            isolation_level=isolation_level,
                        )
                    except KafkaError as e:
                        if e.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                            raise
                        log_start = await list_offset(cluster, topic, partition, EARLIEST)
                        if log_start <= position:
                            raise
                        lost(position, log_start)  # deleted below the log start offset
                        position = log_start
                        continue
                    data = fetched.records
                    committed = isolation_level == READ_COMMITTED
                    bound = fetched.last_stable_offset if committed else fetched.high_watermark
                    if not data and bound >= end:
                        lost(position, end)  # [position, end) is readable and holds nothing: compacted away
                        break
                    aborted = fetched.aborted if committed else None
                    for pos, header, visible in reader_batches(data, aborted):
                        if header.next_offset <= position:
                            continue
                        lost(position, header.base_offset)  # whole batches gone before this one
                        position = max(position, header.base_offset)
                        if visible:
                            position = add(data, pos, header, position)
                            lost(position, header.next_offset)  # the batch's last records compacted away
                        position = max(position, header.next_offset)
        if len(builder):
            cut()
        return chunks

    try:
        return trio.run(run)
    except (KafkaError, trio.TooSlowError) as e:
        raise KafkaReadError(f"cannot read {topic}-{partition} [{start}, {end}): {e or 'timed out'}") from None
