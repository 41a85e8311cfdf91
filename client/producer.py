"""A producer on the trio client core: batching per partition, idempotent by default.

`async with Producer.open(cluster) as producer: delivery = await producer.send(topic, value, key=...)`
then `await delivery.wait()` -> `RecordMetadata` (or `KafkaError`); `await producer.flush()` waits
for everything sent so far.

Rules (Kafka's producer, KIP-98 idempotence):
- keyed records go to murmur2(key) % partitions (Kafka's default partitioner); unkeyed ones to
  their topic's sticky partition, which moves on after `batch_size` bytes (KIP-480);
- idempotent (the default): a producer id from InitProducerId; each partition numbers its records
  with a sequence (from 0, wrapping at 2**31-1); acks is forced to all;
- up to `max_in_flight` (<= 5) batches of a partition are in flight on one connection, written in
  sequence order; the batches of all partitions led by one broker that are ready at once share
  Produce requests (`client.produce_requests`, as Kafka's sender drains per node); a retriable
  failure makes the sender wait for the rest of the window, then resend every unacknowledged
  batch in order with the same sequences (the broker answers duplicates with their original
  offsets), so retries neither duplicate nor reorder;
- a batch that fails for good leaves a gap in its partition's sequence: the producer bumps its
  epoch for that partition and restarts at sequence 0 (KIP-360), so later batches are accepted;
- a batch not acknowledged within `delivery_timeout_ms` fails with REQUEST_TIMED_OUT;
- `send` waits while the records queued or in flight hold `buffer_memory` bytes or more (Kafka's
  `buffer.memory`, 32 MiB), and yields to the senders every 256 records, so a fast caller is paced
  by the brokers instead of queueing without bound.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from client.cluster import Cluster, KafkaError
from client.connection import ConnectionClosed, unwrap_single
from client.produce_requests import ProduceRequests
from client.transactional import FATAL, TransactionManager
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import RETRIABLE, ErrorCode
from protocol.partitioner import StickyPartitioner, partition_for_key

log = logging.getLogger(__name__)

SEQUENCE_LIMIT = 1 << 31


def _record_size(key: bytes | None, value: bytes | None) -> int:
    """Bytes a queued record is counted as (key, value and about 20 bytes of record overhead)."""
    return len(value or b"") + len(key or b"") + 20


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int


class Delivery:
    """The outcome of one `send`: `await delivery.wait()`."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self.metadata: RecordMetadata | None = None
        self.error: KafkaError | None = None
        self.completed_at: float | None = None  # time.monotonic() when acknowledged or failed

    def _complete(self, metadata: RecordMetadata | None, error: KafkaError | None, now: float) -> None:
        self.metadata, self.error, self.completed_at = metadata, error, now
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> RecordMetadata:
        await self._done.wait()
        if self.error is not None:
            raise self.error
        assert self.metadata is not None, "completed without an error: it has its metadata"
        return self.metadata


@dataclass(frozen=True)
class EncodedRecords:
    """Records already encoded as a v2 records payload (offset deltas 0..count-1, timestamp
    deltas from `timestamp_ms`), sent as one batch of their own (`Producer.send_encoded`)."""

    payload: bytes
    count: int
    size: int  # bytes of keys and values, counted against buffer_memory
    timestamp_ms: int


@dataclass
class _Batch:
    records: list  # (key, value, headers, timestamp), or one EncodedRecords
    deliveries: list
    epoch: int = -1
    base_sequence: int = -1
    data: bytes = b""
    size: int = 0  # the records' bytes, counted against buffer_memory
    created: float = field(default_factory=time.monotonic)


@dataclass
class _PartitionState:
    queue: deque = field(default_factory=deque)  # (record, delivery) not yet batched
    unacked: deque = field(default_factory=deque)  # batches sent or to send, in sequence order
    next_sequence: int = 0
    failed: int = 0  # records that failed for good
    epoch: int = 0
    wakeup: trio.Event = field(default_factory=trio.Event)
    idle: trio.Event = field(default_factory=trio.Event)


class Producer:
    def __init__(
        self,
        cluster: Cluster,
        nursery: trio.Nursery,
        *,
        acks: int,
        idempotent: bool,
        max_in_flight: int,
        linger_ms: int,
        batch_size: int,
        compression: int,
        request_timeout_ms: int,
        delivery_timeout_ms: int,
        buffer_memory: int = 33554432,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
    ):
        self._validate(acks, idempotent, max_in_flight, transactional_id)
        self.cluster = cluster
        self._nursery = nursery
        self.acks, self.idempotent, self.max_in_flight = acks, idempotent, max_in_flight
        self.linger_s, self.batch_size, self.compression = linger_ms / 1000, batch_size, compression
        self.request_timeout_ms, self.delivery_timeout_s = request_timeout_ms, delivery_timeout_ms / 1000
        self.producer_id = -1
        self.partitions: dict[tuple[str, int], _PartitionState] = {}
        self._sticky = StickyPartitioner(batch_size)
        self.buffer_memory, self._buffered, self._sends = buffer_memory, 0, 0
        self._buffer_freed = trio.Event()
        self.txn = TransactionManager(cluster, transactional_id, transaction_timeout_ms) if transactional_id else None
        self.requests = ProduceRequests(
            nursery,
            acks=acks,
            timeout_ms=request_timeout_ms,
            transactional_id=transactional_id,
            max_in_flight=max_in_flight,
        )

    @staticmethod
    def _validate(acks: int, idempotent: bool, max_in_flight: int, transactional_id: str | None = None) -> None:
        if transactional_id is not None and not idempotent:
            raise ValueError("a transactional producer is idempotent")
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        if idempotent and acks != -1:
            raise ValueError("an idempotent producer needs acks=all (-1)")
        if not 1 <= max_in_flight <= 5:
            raise ValueError("max_in_flight must be 1..5")

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        cluster: Cluster,
        *,
        acks: int = -1,
        idempotent: bool = True,
        max_in_flight: int = 5,
        linger_ms: int = 5,
        batch_size: int = 16384,
        compression: int = rb.NONE,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        buffer_memory: int = 33554432,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
    ) -> AsyncIterator[Producer]:
        """Raises ValueError for inconsistent settings (idempotence needs acks=-1; max_in_flight
        1..5; transactions need idempotence) before anything is sent. With `transactional_id`
        (Kafka's `transactional.id`) the producer's id comes from that id's coordinator, which
        fences older producers with it, and every send must be inside a transaction."""
        cls._validate(acks, idempotent, max_in_flight, transactional_id)
        with unwrap_single():
            async with trio.open_nursery() as nursery:
                producer = cls(
                    cluster,
                    nursery,
                    acks=acks,
                    idempotent=idempotent,
                    max_in_flight=max_in_flight,
                    linger_ms=linger_ms,
                    batch_size=batch_size,
                    compression=compression,
                    request_timeout_ms=request_timeout_ms,
                    delivery_timeout_ms=delivery_timeout_ms,
                    buffer_memory=buffer_memory,
                    transactional_id=transactional_id,
                    transaction_timeout_ms=transaction_timeout_ms,
                )
                if idempotent:
                    await producer._init_producer_id()
                try:
                    yield producer
                    await producer.flush()
                finally:
                    nursery.cancel_scope.cancel()

    async def _init_producer_id(self) -> None:
        if self.txn is not None:
            self.producer_id, self._base_epoch = await self.txn.init()
            return

        async def attempt(refresh):
            conn = await self.cluster.any_connection()
            r = await conn.request(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000})
            if r.error_code != ErrorCode.NONE:
                raise KafkaError(r.error_code, "InitProducerId")
            return r.producer_id, r.producer_epoch

        self.producer_id, epoch = await self.cluster.retry(attempt, "InitProducerId")
        self._base_epoch = epoch

    # ---- sending -------------------------------------------------------------------------------
    async def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Queue one record; returns its `Delivery`. Raises KafkaError for an unknown topic, and
        UNKNOWN_TOPIC_OR_PARTITION at once for a `partition` the topic does not have (after one
        metadata refresh: it may have been added since), as Kafka's producer refuses it."""
        if partition is not None:
            parts = await self.cluster.partitions(topic, auto_create=True)
            if partition not in parts:
                parts = (await self.cluster.refresh_metadata([topic], auto_create=True)).topics.get(topic, {})
                if partition not in parts:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"partition {partition} is not in the range [0...{len(parts)}) of topic {topic}",
                    )
        size = _record_size(key, value)
        if partition is None:
            count = len(await self.cluster.partitions(topic, auto_create=True))  # as Kafka's producer asks
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                partition = self._sticky.partition(topic, count, size)
        return await self._enqueue((topic, partition), (key, value, list(headers), timestamp_ms), size)

    async def send_encoded(
        self, topic: str, partition: int, payload: bytes, count: int, size: int, timestamp_ms: int | None = None
    ) -> Delivery:
        """Queue `count` records already encoded as a v2 records payload (offset deltas
        0..count-1; `protocol.arrow_encode.encode_runs` makes them) for one partition; they go
        as one batch of their own, with this producer's sequence numbers, transaction and
        retries. `size`: their keys' and values' bytes. One Delivery for all of them (its offset
        is the first record's)."""
        now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        return await self._enqueue((topic, partition), EncodedRecords(payload, count, size, now), size)

    async def _enqueue(self, tp: tuple[str, int], record, size: int) -> Delivery:
        if self.txn is not None:
            await self.txn.add_partition(tp)  # raises outside a transaction or after a failed batch
        state = self.partitions.get(tp)
        if state is None:
            state = self.partitions[tp] = _PartitionState(epoch=getattr(self, "_base_epoch", -1))
            state.idle.set()
            self._nursery.start_soon(self._sender, tp, state)
        delivery = Delivery()
        state.queue.append((record, delivery))
        state.idle = trio.Event() if state.idle.is_set() else state.idle
        state.wakeup.set()
        self._buffered += size
        self._sends += 1
        if self._buffered >= self.buffer_memory:
            while self._buffered >= self.buffer_memory:
                await self._buffer_freed.wait()
        elif self._sends & 255 == 0:
            await trio.lowlevel.checkpoint()
        return delivery

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged or failed."""
        for state in list(self.partitions.values()):
            await state.idle.wait()

    # ---- transactions (KIP-98) ------------------------------------------------------------------
    def _txn(self) -> TransactionManager:
        if self.txn is None:
            raise RuntimeError("not a transactional producer: open it with transactional_id")
        return self.txn

    def begin_transaction(self) -> None:
        """Start a transaction; sends until its commit or abort belong to it."""
        self._txn().begin()

    async def send_offsets_to_transaction(self, offsets: dict[tuple[str, int], int], group_id: str) -> None:
        """Commit `offsets` ({(topic, partition): next offset}) for `group_id` with the transaction."""
        await self._txn().send_offsets(offsets, group_id)

    async def commit_transaction(self) -> None:
        """Flush, then commit. Raises the KafkaError of a batch that failed (then only
        `abort_transaction` is possible) or of the commit itself."""
        await self.flush()
        await self._txn().end(commit=True)

    async def abort_transaction(self) -> None:
        """Flush, then abort. If a batch had failed, a new epoch is taken (KIP-360) and the
        sequences restart from 0, so the next transaction is accepted."""
        txn = self._txn()
        await self.flush()
        failed = txn.abortable is not None
        await txn.end(commit=False)
        if failed:
            await self._init_producer_id()
            for state in self.partitions.values():
                state.epoch, state.next_sequence = self._base_epoch, 0

    def _make_batch(self, state: _PartitionState) -> _Batch:
        records: list = []
        deliveries: list = []
        size = 0
        while state.queue and (not records or size < self.batch_size):
            if isinstance(state.queue[0][0], EncodedRecords) and records:
                break  # encoded records go in a batch of their own
            record, delivery = state.queue.popleft()
            records.append(record)
            deliveries.append(delivery)
            if isinstance(record, EncodedRecords):
                size = record.size
                break
            size += _record_size(record[0], record[1])
        batch = _Batch(records, deliveries, size=size)
        self._number(state, batch)
        return batch

    def _number(self, state: _PartitionState, batch: _Batch) -> None:
        """Give `batch` the partition's next sequence numbers (idempotent) and encode it."""
        records = batch.records
        encoded = records[0] if isinstance(records[0], EncodedRecords) else None
        count = encoded.count if encoded is not None else len(records)
        if self.idempotent:
            batch.epoch, batch.base_sequence = state.epoch, state.next_sequence
            state.next_sequence = (state.next_sequence + count) % SEQUENCE_LIMIT
        fields: dict[str, Any] = {
            "compression": self.compression,
            "producer_id": self.producer_id,
            "producer_epoch": batch.epoch,
            "base_sequence": batch.base_sequence,
            "transactional": self.txn is not None,
        }
        if encoded is None:
            batch.data = rb.build_batch(records, **fields)
        else:
            stamp = encoded.timestamp_ms
            batch.data = rb.batch_from_payload(
                encoded.payload, count, base_timestamp=stamp, max_timestamp=stamp, **fields
            )

    async def _sender(self, tp: tuple[str, int], state: _PartitionState) -> None:
        while True:
            if not state.queue and not state.unacked:
                state.idle.set()
                state.wakeup = trio.Event()
                await state.wakeup.wait()
                await trio.sleep(self.linger_s)
            while state.queue:
                state.unacked.append(self._make_batch(state))
            await self._send_window(tp, state)

    async def _send_window(self, tp: tuple[str, int], state: _PartitionState) -> None:
        """Send the unacknowledged batches in order, `max_in_flight` at a time; on a retriable
        failure back off, then start again from the oldest unacknowledged batch."""
        backoff = 0.1
        while state.unacked:
            self._expire(tp, state)
            if not state.unacked:
                return
            try:
                conn = await self.cluster.leader_connection(*tp, refresh=backoff > 0.1)
                window = list(itertools.islice(state.unacked, self.max_in_flight))
                in_flight = [(batch, self.requests.add(conn, tp, batch.data)) for batch in window]
                retry = False
                for batch, slot in in_flight:
                    part = await slot.outcome()
                    if part is None:  # acks=0: nothing comes back
                        self._complete(tp, state, batch, -1, None)
                        continue
                    code = ErrorCode(part.error_code)
                    if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER) and not retry:
                        self._complete(tp, state, batch, part.base_offset, None)
                    elif (
                        retry
                        or code in RETRIABLE
                        or code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                        and batch is not window[0]
                    ):
                        retry = True  # this and every later batch go again, in order
                    else:
                        self._fail_for_good(tp, state, batch, KafkaError(code, f"{tp[0]}-{tp[1]}"))
                if retry:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "retrying the window")
                backoff = 0.1
            except (KafkaError, ConnectionClosed, trio.TooSlowError) as e:
                if isinstance(e, KafkaError) and not e.retriable:
                    for batch in list(state.unacked)[:1]:
                        self._fail_for_good(tp, state, batch, e)
                    continue
                log.info("produce to %s-%d: %s; resending %d batches in %.1f s", *tp, e, len(state.unacked), backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _complete(self, tp, state: _PartitionState, batch: _Batch, base_offset: int, error) -> None:
        if state.unacked and state.unacked[0] is batch:
            state.unacked.popleft()
        now = time.monotonic()
        for i, delivery in enumerate(batch.deliveries):
            delivery._complete(RecordMetadata(tp[0], tp[1], base_offset + i if base_offset >= 0 else -1), error, now)
        self._release(batch)

    def _release(self, batch: _Batch) -> None:
        self._buffered -= batch.size
        self._buffer_freed.set()
        self._buffer_freed = trio.Event()

    def _fail_for_good(self, tp, state: _PartitionState, batch: _Batch, error: KafkaError) -> None:
        """A batch that will never be written: fail it and (idempotent) bump this partition's
        epoch and renumber the batches after it from sequence 0 (KIP-360)."""
        if batch in state.unacked:
            state.unacked.remove(batch)
        now = time.monotonic()
        state.failed += len(batch.deliveries)
        for delivery in batch.deliveries:
            delivery._complete(None, error, now)
        self._release(batch)
        if self.txn is not None:  # the transaction can only be aborted now (Kafka: abortable error)
            if error.error_code in FATAL:
                self.txn.fatal = self.txn.fatal or error
            self.txn.abortable = self.txn.abortable or error
        elif self.idempotent:
            state.epoch += 1
            state.next_sequence = 0
            for later in state.unacked:
                self._number(state, later)

    def _expire(self, tp, state: _PartitionState) -> None:
        now = time.monotonic()
        while state.unacked and now - state.unacked[0].created > self.delivery_timeout_s:
            self._fail_for_good(
                tp,
                state,
                state.unacked[0],
                KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"delivery timeout for {tp[0]}-{tp[1]}"),
            )
