"""Perf drivers on confluent-kafka (librdkafka): produce, consume, end-to-end.

librdkafka builds batches, compresses and sends in its own C threads, so these drivers show the
broker's limit rather than a Python client's. Python work per record is kept to one `produce()`
or one `len()` call:
- `produce` attaches a delivery callback only to sampled records (`stats.sample_every`), sends
  the others in `produce_batch()` chunks when not paced; the
  count of records written is then verified from the partitions' log end offsets before and after
  (ListOffsets through a consumer's `get_watermark_offsets`), and any shortfall is reported as
  errors. The topic must not be written by anyone else during the run.
- `consume` reads every partition from its log start with `consume(num_messages=10000)`, timed
  from the first record (the offset lookup before it is reported as `startup_s`); its
  latency is librdkafka's own broker round-trip statistics (`rtt`, which covers Fetch) over the
  run's last statistics window.
- `end_to_end` produces (librdkafka's linger.ms unless given) at a paced rate and consumes in the
  same loop, or (`producer_process`) produces from a child process of its own, so neither side's
  Python loop delays the other's; latency is consume time - the 8-byte `time.time_ns()` at the
  head of each value.

Raises `PerfClientError` (one line) when confluent-kafka is missing or the cluster fails.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time

from minikafka_cli.perf_tools.ours import age_ms, payload, stamped
from minikafka_cli.perf_tools.stats import Latency, Result, Throttler, process_cpu_s, sample_every

_TIMEOUT_S = 30
# librdkafka's own log lines (connection refused, retries...) would bury the one-line result or
# error; failures reach us as exceptions and delivery reports instead.
_QUIET = logging.getLogger("minikafka.perf.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_BASE = {"client.id": "minikafka-perf", "logger": _QUIET}


class PerfClientError(Exception):
    pass


def _kafka():
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 (AdminClient for metadata)
    except ImportError:
        raise PerfClientError("--client confluent needs confluent-kafka (make setup installs it)") from None
    return confluent_kafka


def _partitions(ck, bootstrap: str, topic: str) -> list[int]:
    admin = ck.admin.AdminClient({"bootstrap.servers": bootstrap, **_BASE})
    try:
        md = admin.list_topics(topic, timeout=10)
    except ck.KafkaException as e:
        raise PerfClientError(f"no metadata for {topic!r} from {bootstrap}: {e.args[0].str()}") from None
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise PerfClientError(f"topic {topic!r}: {t.error if t is not None else 'not found'}")
    return sorted(t.partitions)


def _end_offsets(consumer, ck, topic: str, partitions: list[int]) -> dict[int, int]:
    return {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=_TIMEOUT_S)[1] for p in partitions}


def _retry_when_full(producer, send) -> None:
    """`send()`, serving delivery reports while librdkafka's queue is full."""
    while True:
        try:
            send()
            return
        except BufferError:
            producer.poll(0.005)


def _send_paced(
    producer, topic: str, value: bytes, n: int, every: int, throttler: Throttler, sampled, start: float
) -> None:
    """One produce() per record, paced to the throttler; delivery reports are served while
    waiting, so a sampled latency is the acknowledgement's, not the next poll's."""
    for i in range(n):
        callback = None if i % every else sampled(time.monotonic())
        _retry_when_full(producer, lambda: producer.produce(topic, value, on_delivery=callback))
        delay = throttler.delay_s(i + 1, time.monotonic() - start)
        producer.poll(delay if delay > 0 else 0)


def _send_batched(ck, producer, topic: str, value: bytes, n: int, every: int, sampled) -> None:
    """As fast as the client goes: every `every`-th record alone with a latency callback, the
    records between in produce_batch() calls of up to 1000 (about 20% less client CPU a record
    than one produce() each, which leaves more of this machine to the brokers)."""
    chunk = [{"value": value} for _ in range(min(1000, max(every - 1, 1)))]
    i = 0
    while i < n:
        if i % every == 0:
            callback = sampled(time.monotonic())
            _retry_when_full(producer, lambda: producer.produce(topic, value, on_delivery=callback))
            i += 1
            continue
        run = min(every - i % every, n - i, len(chunk))
        pending = chunk[:run]
        while pending:
            try:
                producer.produce_batch(topic, pending)
            except BufferError:
                producer.poll(0.005)
                continue
            failed = [m for m in pending if "_error" in m]
            retry = [m for m in failed if m.pop("_error").code() == ck.KafkaError._QUEUE_FULL]
            if retry:  # others (none expected) stay unsent and show up as errors from end offsets
                producer.poll(0.005)
            pending = retry
        producer.poll(0)
        i += run


def _settled_end_offsets(
    consumer, ck, topic: str, partitions: list[int], before: dict[int, int], expected: int, wait_s: float = 5.0
) -> dict[int, int]:
    """End offsets (high watermarks) once they cover `expected` new records, or as they stand
    after `wait_s` (with acks=1 the high watermark trails the acknowledgements briefly)."""
    deadline = time.monotonic() + wait_s
    while True:
        after = _end_offsets(consumer, ck, topic, partitions)
        if sum(after[p] - before[p] for p in partitions) >= expected or time.monotonic() > deadline:
            return after
        time.sleep(0.05)


def _consumer(ck, bootstrap: str, **extra):
    return ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "minikafka-perf", "enable.auto.commit": False, **_BASE, **extra}
    )


def produce(
    bootstrap: str,
    topic: str,
    *,
    num_records: int,
    record_size: int,
    throughput: float = -1,
    acks: int = -1,
    batch_size: int | None = None,
    linger_ms: int | None = None,
    compression: str = "none",
    idempotence: bool = False,
) -> Result:
    ck = _kafka()
    partitions = _partitions(ck, bootstrap, topic)
    probe = _consumer(ck, bootstrap)
    try:
        before = _end_offsets(probe, ck, topic, partitions)
        conf = {
            "bootstrap.servers": bootstrap,
            **_BASE,
            "acks": str(acks),
            "compression.type": compression,
            "enable.idempotence": idempotence,
            "queue.buffering.max.messages": 1000000,
            "queue.buffering.max.kbytes": 262144,
        }
        if batch_size is not None:
            conf["batch.size"] = batch_size
        if linger_ms is not None:
            conf["linger.ms"] = linger_ms
        producer = ck.Producer(conf)
        value = payload(record_size)
        # Unpaced runs sample fewer records (20k): the records between go out in produce_batch() chunks.
        every = sample_every(num_records, 100_000 if throughput > 0 else 20_000)
        throttler = Throttler(throughput)
        samples, failed_samples = [], [0]

        def sampled(sent_at):
            def report(err, msg):
                if err is None:
                    samples.append((time.monotonic() - sent_at) * 1000)
                else:
                    failed_samples[0] += 1

            return report

        start, cpu = time.monotonic(), process_cpu_s()
        if throughput > 0:
            _send_paced(producer, topic, value, num_records, every, throttler, sampled, start)
        else:
            _send_batched(ck, producer, topic, value, num_records, every, sampled)
        left = producer.flush(120)
        elapsed, cpu = time.monotonic() - start, process_cpu_s() - cpu
        after = _settled_end_offsets(probe, ck, topic, partitions, before, num_records)
    except ck.KafkaException as e:
        raise PerfClientError(str(e)) from None
    finally:
        probe.close()
    written = sum(after[p] - before[p] for p in partitions)
    errors = max(0, num_records - written)
    return Result(
        "produce",
        "confluent",
        written,
        written * record_size,
        elapsed,
        Latency.of(samples),
        errors,
        extra={"not_delivered": left, "failed_samples": failed_samples[0], "client_cpu_s": cpu},
    )


def consume(
    bootstrap: str, topic: str, *, num_records: int, fetch_max_bytes: int = 52428800, timeout_s: float = 60
) -> Result:
    ck = _kafka()
    partitions = _partitions(ck, bootstrap, topic)
    rtt: list[dict] = []
    # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s) whenever queued.min.messages are
    # waiting for the application; both are raised so the broker, not that pause, sets the pace.
    consumer = _consumer(
        ck,
        bootstrap,
        **{
            "fetch.max.bytes": fetch_max_bytes,
            "statistics.interval.ms": 500,
            "stats_cb": lambda s: rtt.append(_fetch_rtt(s)),
            "fetch.queue.backoff.ms": 1,
            "queued.min.messages": 1000000,
        },
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        counted = nbytes = 0
        assigned = time.monotonic()
        start = None  # as kafka-consumer-perf-test, the clock starts at the first record
        while counted < num_records:
            if time.monotonic() > assigned + timeout_s:
                raise PerfClientError(f"only {counted} of {num_records} records within {timeout_s:.0f} s")
            for message in consumer.consume(num_messages=10000, timeout=0.5):
                if message.error() is None:
                    counted += 1
                    nbytes += len(message)
            if start is None and counted:
                start, cpu = time.monotonic(), process_cpu_s()
        elapsed, cpu = time.monotonic() - start, process_cpu_s() - cpu
        consumer.poll(0.6)  # one more statistics window
    except ck.KafkaException as e:
        raise PerfClientError(str(e)) from None
    finally:
        consumer.close()
    window = next((w for w in reversed(rtt) if w), None)
    latency = (
        Latency(
            window["cnt"],
            window["avg"] / 1000,
            window["p50"] / 1000,
            window["p95"] / 1000,
            window["p99"] / 1000,
            window["max"] / 1000,
        )
        if window
        else None
    )
    return Result(
        "consume",
        "confluent",
        counted,
        nbytes,
        elapsed,
        latency,
        extra={
            "partitions": len(partitions),
            "latency_source": "librdkafka rtt (us -> ms)",
            "startup_s": start - assigned,
            "client_cpu_s": cpu,
        },
    )


def _fetch_rtt(stats_json: str) -> dict:
    """The busiest broker's `rtt` window from a librdkafka statistics JSON ({} when idle)."""
    stats = json.loads(stats_json)
    windows = [b["rtt"] for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0 and b["rtt"]["cnt"]]
    return max(windows, key=lambda w: w["cnt"]) if windows else {}


def end_to_end(
    bootstrap: str,
    topic: str,
    *,
    num_records: int,
    throughput: float,
    record_size: int = 100,
    acks: int = -1,
    partition: int | None = None,
    linger_ms: int | None = None,
    timeout_s: float = 60,
    producer_process: bool = False,
) -> Result:
    """Produce at `throughput` records/s while a consumer reads them back; latency = receive
    time - send time. `partition` None: every partition of the topic, records placed by
    librdkafka's default partitioner; else that partition only. `producer_process`: the paced
    producer runs in a child process (multiprocessing, spawned), the consumer here."""
    if record_size < 8:
        raise ValueError("end-to-end records carry an 8-byte timestamp: --record-size must be >= 8")
    ck = _kafka()
    pad = payload(record_size - 8)
    consumer = _consumer(ck, bootstrap, **{"fetch.wait.max.ms": 100})
    try:
        if partition is None:
            partitions = sorted(consumer.list_topics(topic, timeout=_TIMEOUT_S).topics[topic].partitions)
        else:
            partitions = [partition]
        assigned = []
        for p in partitions:
            end = consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=_TIMEOUT_S)[1]
            assigned.append(ck.TopicPartition(topic, p, end))
        consumer.assign(assigned)
        producer = ck.Producer(_e2e_producer_conf(bootstrap, acks, linger_ms))
        # Warm up: one record produced and consumed per partition first, so the consumer's offset
        # lookups and first fetches are not counted as latency of the measured records.
        for p in partitions:
            producer.produce(topic, stamped(pad), partition=p)
        producer.flush(_TIMEOUT_S)
        warm_deadline, warmed = time.monotonic() + _TIMEOUT_S, 0
        while warmed < len(partitions):
            warmed += len([m for m in consumer.consume(num_messages=10, timeout=0.1) if m.error() is None])
            if time.monotonic() > warm_deadline:
                raise PerfClientError("the warm-up records did not come back")
        where = {} if partition is None else {"partition": partition}
        throttler, latencies, sent = Throttler(throughput), [], 0
        child = None
        if producer_process:
            producer, sent = None, num_records  # the child sends them all
            spawn = multiprocessing.get_context("spawn")
            ready = spawn.Event()
            args = (bootstrap, topic, num_records, throughput, pad, acks, partition, linger_ms, ready)
            child = spawn.Process(target=_paced_producer, args=args, daemon=True)
            child.start()
            if not ready.wait(_TIMEOUT_S):  # the run's clock starts when the child's does
                child.kill()
                raise PerfClientError(f"the producer process did not start within {_TIMEOUT_S} s")
        start = time.monotonic()
        deadline = start + timeout_s
        try:
            while len(latencies) < num_records:
                failed = child is not None and child.exitcode not in (None, 0)
                if failed or time.monotonic() > deadline:
                    raise PerfClientError(
                        f"only {len(latencies)} of {num_records} records came back within {timeout_s:.0f} s"
                        + (f" (producer exit {child.exitcode})" if failed else "")
                    )
                while sent < num_records and throttler.delay_s(sent + 1, time.monotonic() - start) == 0:
                    producer.produce(topic, stamped(pad), **where)
                    sent += 1
                if producer is not None:
                    producer.poll(0)
                # a short timeout: consume() waits it out unless num_messages arrive first
                for message in consumer.consume(num_messages=1000, timeout=0.001):
                    if message.error() is None:
                        latencies.append(age_ms(message.value(), time.time_ns()))
            elapsed = time.monotonic() - start
        finally:
            if child is not None:
                child.join(_TIMEOUT_S)
                child.kill()
        if producer is not None:
            producer.flush(_TIMEOUT_S)
    except ck.KafkaException as e:
        raise PerfClientError(str(e)) from None
    finally:
        consumer.close()
    return Result(
        "end-to-end",
        "confluent",
        len(latencies),
        len(latencies) * record_size,
        elapsed,
        Latency.of(latencies),
        extra={
            "target_records_per_s": throughput,
            "partitions": len(partitions),
            "producer_process": producer_process,
        },
    )


def _e2e_producer_conf(bootstrap: str, acks: int, linger_ms: int | None) -> dict:
    conf = {"bootstrap.servers": bootstrap, **_BASE, "acks": str(acks), "enable.idempotence": False}
    if linger_ms is not None:
        conf["linger.ms"] = linger_ms
    return conf


def _paced_producer(bootstrap, topic, num_records, throughput, pad, acks, partition, linger_ms, ready) -> None:
    """The child process of `end_to_end(producer_process=True)`: once its producer exists, set
    `ready` and produce `num_records` stamped records at `throughput` records/s, then flush;
    exit 1 when some were not delivered."""
    ck = _kafka()
    producer = ck.Producer(_e2e_producer_conf(bootstrap, acks, linger_ms))
    where = {} if partition is None else {"partition": partition}
    ready.set()
    throttler, start = Throttler(throughput), time.monotonic()
    for sent in range(num_records):
        while (delay := throttler.delay_s(sent + 1, time.monotonic() - start)) > 0:
            producer.poll(delay)  # serves delivery reports while it waits: 2 ms or more, no spin
        producer.produce(topic, stamped(pad), **where)
    if producer.flush(_TIMEOUT_S) != 0:
        raise SystemExit(1)
