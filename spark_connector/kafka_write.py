"""Blocking writes for the Spark sink (Spark's Python workers call this outside any event loop):
one task's rows through our trio producer, in its own `trio.run`.

Without a transactional id the producer is idempotent with acks=all (or the acks asked for):
retries inside the task write no duplicate, but a task Spark runs again writes its rows again
(at-least-once, as Spark's Kafka sink).

With a transactional id (KIP-98) a task's rows are one transaction, and the transaction also
commits a marker: for the consumer group named like the transactional id, offset `batch_id + 1`
(on partition 0 of the first topic written). A task of micro-batch `batch_id` that finds the marker
at or past `batch_id + 1` (after its InitProducerId has fenced older attempts and completed their
transactions) writes nothing: its rows are already committed. So a task run again, by Spark's retry
or by a query restarted from its checkpoint, writes each row once.
"""

from __future__ import annotations

import contextlib
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import trio

from client import Cluster, KafkaError
from client.groups import committed_offsets
from client.producer import Delivery, Producer
from protocol.arrow_encode import encode_runs, partition_rows
from protocol.errors import ErrorCode
from security.config import client_security


class KafkaWriteError(RuntimeError):
    pass


@dataclass(frozen=True)
class ProducerSettings:
    """Kafka producer settings for a task (`acks` -1/0/1, `compression` a record_batch codec)."""

    bootstrap: str
    security: dict | None
    acks: int = -1
    idempotent: bool = True
    compression: int = 0
    linger_ms: int = 5
    batch_size: int = 16384
    transaction_timeout_ms: int = 60000


OutRecord = tuple  # (topic, partition | None, key | None, value | None, headers)


@dataclass(frozen=True)
class ColumnRows:
    """Rows for one topic as Arrow column buffers (`protocol.arrow_encode`'s column tuples):
    values, keys (None: every key null) and explicit partitions (None: none). They are
    partitioned and encoded compiled, with no Python object per row."""

    topic: str
    values: tuple
    keys: tuple | None
    partitions: tuple | None


@dataclass(frozen=True)
class TaskResult:
    written: int  # records acknowledged (or committed) by this task
    skipped: bool  # the marker showed this task's batch already committed


async def _marker(cluster: Cluster, group_id: str) -> int:
    """The highest batch number + 1 that the transactions of `group_id` committed, or -1."""
    return max((await committed_offsets(cluster, group_id, require_stable=True)).values(), default=-1)


async def _write(settings: ProducerSettings, records: Iterable[OutRecord], txn_id: str | None, batch_id: int):
    security = client_security(settings.security) if settings.security else None
    async with Cluster.open(settings.bootstrap, retries=20, security=security) as cluster:
        async with Producer.open(
            cluster,
            acks=settings.acks,
            idempotent=settings.idempotent,
            compression=settings.compression,
            linger_ms=settings.linger_ms,
            batch_size=settings.batch_size,
            transactional_id=txn_id,
            transaction_timeout_ms=settings.transaction_timeout_ms,
        ) as producer:
            if txn_id is not None and batch_id >= 0 and await _marker(cluster, txn_id) >= batch_id + 1:
                return TaskResult(0, True)
            if txn_id is not None:
                producer.begin_transaction()
            sent, first_topic = 0, None
            pending: deque[tuple[int, Delivery]] = deque()  # (records, delivery) not yet known written
            sticky: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes sent to it)
            try:
                for item in records:
                    if isinstance(item, ColumnRows):
                        first_topic = first_topic or item.topic
                        for count, delivery in await _send_columns(producer, cluster, item, sticky, settings):
                            pending.append((count, delivery))
                            sent += count
                    else:
                        topic, partition, key, value, headers = item
                        first_topic = first_topic or topic
                        delivery = await producer.send(topic, value, key=key, headers=headers, partition=partition)
                        pending.append((1, delivery))
                        sent += 1
                    while pending and pending[0][1].done:  # memory stays bounded by what is in flight
                        await pending.popleft()[1].wait()  # raises a failure at once
                await producer.flush()
                for _, delivery in pending:
                    await delivery.wait()  # raises the first failure
                if txn_id is not None:
                    if batch_id >= 0 and first_topic is not None:
                        await producer.send_offsets_to_transaction({(first_topic, 0): batch_id + 1}, txn_id)
                    await producer.commit_transaction()
            except BaseException:
                if txn_id is not None:
                    with trio.CancelScope(shield=True), contextlib.suppress(KafkaError, RuntimeError, OSError):
                        await producer.abort_transaction()  # best effort: the original error matters
                raise
            return TaskResult(sent, False)


async def _send_columns(
    producer: Producer, cluster: Cluster, rows: ColumnRows, sticky: dict, settings: ProducerSettings
) -> list[tuple[int, Delivery]]:
    """Partition `rows` as Kafka's default partitioner (`partition_rows`), encode each
    partition's rows into payloads of up to `batch.size` bytes and queue them: [(records,
    delivery)]."""
    count = len(await cluster.partitions(rows.topic, auto_create=True))
    start = sticky.get(rows.topic) or (random.randrange(count), 0)
    parts, *state = partition_rows(rows.keys, rows.values, rows.partitions, count, *start, settings.batch_size)
    sticky[rows.topic] = tuple(state)
    out = []
    for partition, payload, n, size in encode_runs(rows.keys, rows.values, parts, settings.batch_size):
        if not 0 <= partition < count:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{rows.topic} has no partition {partition}")
        out.append((n, await producer.send_encoded(rows.topic, partition, payload, n, size)))
    return out


def write_records(
    settings: ProducerSettings, records: Iterable[OutRecord], txn_id: str | None = None, batch_id: int = -1
) -> TaskResult:
    """Produce `records`; returns when every one is acknowledged (or, transactional, committed).
    `txn_id`: the task's transactional id; `batch_id`: its micro-batch (-1 for a batch query: no
    marker). Raises KafkaWriteError naming the Kafka error (the task fails and Spark retries it)."""
    try:
        return trio.run(_write, settings, records, txn_id, batch_id)
    except KafkaError as e:
        raise KafkaWriteError(f"writing to Kafka failed: {e}") from None
