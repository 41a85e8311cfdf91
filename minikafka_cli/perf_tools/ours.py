"""Perf drivers on our own trio client (`client/`): produce, consume, end-to-end.

- `produce`: `num_records` records of `record_size` bytes through `client.producer.Producer`,
  optionally paced to `throughput` records/s; latency is send-to-acknowledgement per record,
  sampled (`stats.sample_every`). Failed records are counted, not hidden.
- `consume`: Fetch (API key 1) from the log start of every partition of `topic`, one request per
  partition leader at a time, counting records from batch headers (`records_count`) without
  decoding them, so the broker rather than this client is measured; latency is per Fetch.
- `end_to_end`: a producer paced to `throughput` writes records whose first 8 bytes are
  `time.time_ns()`; a fetch loop on the same partition decodes them and takes now - that.

All return a `stats.Result`; errors reaching the caller are the client's (`KafkaError`,
`ConnectionClosed`, `trio.TooSlowError`).
"""

from __future__ import annotations

import struct
import time
from collections import deque

import trio

from client import Cluster
from client.producer import Producer
from client.reads import EARLIEST, LATEST, fetch_records, list_offset
from minikafka_cli.perf_tools.stats import Latency, Result, Throttler, process_cpu_s, sample_every
from protocol import record_batch as rb

_NS = struct.Struct(">q")


def stamped(pad: bytes) -> bytes:
    """An end-to-end record value: the send time (`time.time_ns()`, 8 bytes) then `pad`."""
    return _NS.pack(time.time_ns()) + pad


def age_ms(value, now_ns: int) -> float:
    """Milliseconds from a `stamped` value's send time to `now_ns`."""
    return (now_ns - _NS.unpack_from(value)[0]) / 1e6


def payload(record_size: int) -> bytes:
    """The value every perf record carries: `record_size` bytes of printable letters (Kafka's
    perf test uses random uppercase letters; a fixed pattern keeps runs comparable)."""
    return (b"ABCDEFGHIJKLMNOPQRSTUVWXYZ" * (record_size // 26 + 1))[:record_size]


async def produce(
    bootstrap: str,
    topic: str,
    *,
    num_records: int,
    record_size: int,
    throughput: float = -1,
    acks: int = 1,
    batch_size: int = 16384,
    linger_ms: int = 5,
    compression: int = rb.NONE,
    idempotence: bool = False,
) -> Result:
    value = payload(record_size)
    every = sample_every(num_records)
    throttler = Throttler(throughput)
    samples, outstanding = [], deque()
    async with Cluster.open(bootstrap, client_id="minikafka-perf") as cluster:
        async with Producer.open(
            cluster,
            acks=acks,
            idempotent=idempotence,
            linger_ms=linger_ms,
            batch_size=batch_size,
            compression=compression,
        ) as producer:
            start, cpu = time.monotonic(), process_cpu_s()
            for i in range(num_records):
                sent_at = time.monotonic()
                delivery = await producer.send(topic, value)
                if i % every == 0:
                    outstanding.append((sent_at, delivery))
                if len(outstanding) > 4096:  # settle what is done, keep memory flat
                    _settle(outstanding, samples, wait_all=False)
                delay = throttler.delay_s(i + 1, time.monotonic() - start)
                if delay > 0:
                    await trio.sleep(delay)
            await producer.flush()
            elapsed, cpu = time.monotonic() - start, process_cpu_s() - cpu
            _settle(outstanding, samples, wait_all=True)
            failed = sum(state.failed for state in producer.partitions.values())
    return Result(
        "produce",
        "ours",
        num_records - failed,
        (num_records - failed) * record_size,
        elapsed,
        Latency.of(samples),
        failed,
        extra={"client_cpu_s": cpu},
    )


def _settle(outstanding: deque, samples: list, wait_all: bool) -> None:
    """Move finished sampled deliveries into `samples` (ms); failed ones carry no latency."""
    while outstanding and (wait_all or outstanding[0][1].done):
        sent_at, delivery = outstanding.popleft()
        if delivery.error is None and delivery.completed_at is not None:
            samples.append((delivery.completed_at - sent_at) * 1000)


async def consume(
    bootstrap: str, topic: str, *, num_records: int, fetch_max_bytes: int = 1048576, timeout_s: float = 60
) -> Result:
    """Read `num_records` from the start of `topic` (all partitions). Raises trio.TooSlowError if
    they are not there within `timeout_s`."""
    counted, nbytes, latencies = 0, 0, []
    async with Cluster.open(bootstrap, client_id="minikafka-perf") as cluster:
        partitions = sorted(await cluster.partitions(topic))
        offsets = {p: await list_offset(cluster, topic, p, EARLIEST) for p in partitions}
        done = trio.Event()
        start, cpu = time.monotonic(), process_cpu_s()

        async def reader(partition: int) -> None:
            nonlocal counted, nbytes
            offset = offsets[partition]
            while not done.is_set():
                t0 = time.monotonic()
                data = await fetch_records(
                    cluster, topic, partition, offset, max_wait_ms=500, max_bytes=fetch_max_bytes
                )
                latencies.append((time.monotonic() - t0) * 1000)
                for _pos, header in rb.iter_batches(data, allow_partial_tail=True):
                    if header.next_offset <= offset:
                        continue
                    counted += header.records_count
                    nbytes += header.size
                    offset = header.next_offset
                if counted >= num_records:
                    done.set()

        with trio.fail_after(timeout_s):
            async with trio.open_nursery() as nursery:
                for p in partitions:
                    nursery.start_soon(reader, p)
        elapsed, cpu = time.monotonic() - start, process_cpu_s() - cpu
    return Result(
        "consume",
        "ours",
        counted,
        nbytes,
        elapsed,
        Latency.of(latencies),
        extra={"partitions": len(partitions), "fetches": len(latencies), "client_cpu_s": cpu},
    )


async def end_to_end(
    bootstrap: str,
    topic: str,
    *,
    num_records: int,
    throughput: float,
    record_size: int = 100,
    acks: int = -1,
    partition: int | None = None,
    linger_ms: int = 5,
    timeout_s: float = 60,
) -> Result:
    """Produce at `throughput` records/s while fetch loops read them back (one per partition);
    latency = consume time - produce time per record (wall clock, one process). `partition`
    None: every partition of the topic, records placed by our producer's partitioner; else that
    partition only."""
    if record_size < 8:
        raise ValueError("end-to-end records carry an 8-byte timestamp: --record-size must be >= 8")
    pad = payload(record_size - 8)
    throttler = Throttler(throughput)
    latencies: list[float] = []
    async with Cluster.open(bootstrap, client_id="minikafka-perf") as cluster:
        partitions = sorted(await cluster.partitions(topic)) if partition is None else [partition]
        starts = {p: await list_offset(cluster, topic, p, LATEST) for p in partitions}  # before any send

        async def read(p: int) -> None:
            offset = starts[p]
            while len(latencies) < num_records:
                data = await fetch_records(cluster, topic, p, offset, max_wait_ms=100, max_bytes=1048576)
                now = time.time_ns()
                for pos, header in rb.iter_batches(data, allow_partial_tail=True):
                    for record in rb.decode_records(data, pos, header):
                        if record.offset >= offset and record.value and len(record.value) >= 8:
                            latencies.append(age_ms(record.value, now))
                    offset = max(offset, header.next_offset)

        start = time.monotonic()
        with trio.fail_after(timeout_s):
            async with trio.open_nursery() as nursery:
                for p in partitions:
                    nursery.start_soon(read, p)
                async with Producer.open(cluster, acks=acks, idempotent=acks == -1, linger_ms=linger_ms) as producer:
                    for i in range(num_records):
                        await producer.send(topic, stamped(pad), partition=partition)
                        delay = throttler.delay_s(i + 1, time.monotonic() - start)
                        if delay > 0:
                            await trio.sleep(delay)
        elapsed = time.monotonic() - start
    return Result(
        "end-to-end",
        "ours",
        len(latencies),
        len(latencies) * record_size,
        elapsed,
        Latency.of(latencies),
        extra={"target_records_per_s": throughput, "partitions": len(partitions)},
    )
