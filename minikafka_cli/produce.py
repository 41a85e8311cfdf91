"""`minikafka produce` (Kafka's kafka-console-producer.sh): records from stdin or a file, one per
line, to a topic, sent as they are read.

- Lines are read off the event loop (a worker thread reads whatever is available), so each line
  typed at a terminal goes out at once, batched only by `--linger-ms` as any producer batches.
- What cannot succeed is refused before anything is read: a topic that does not exist where the
  brokers do not create topics on first use, or a `--partition` outside the topic's range (exit 2
  with one line naming the range). A line that `--property` settings cannot parse
  (`line_reader`: "No key separator found on line number N") stops the input; what was read before
  it is still sent, and the status is 1.
- Ctrl-C stops reading, waits for what was read to be acknowledged (a second Ctrl-C stops waiting),
  prints the count and exits 130, without a traceback.
- Idempotent by default (`client/producer.py`: a producer id, sequences, acks=all);
  `--no-idempotence` or `--producer-property enable.idempotence=false` turns it off, and so does
  `--acks 0|1` unless idempotence is asked for explicitly (Kafka's producer rule).
- Prints how many records were acknowledged; the exit status is 1 if any record failed and 2 for
  bad arguments. Errors are one line, never a traceback. Kafka's spellings are accepted
  (`--request-required-acks`, `--compression-codec`, `--timeout`, `--property`,
  `--producer-property`, `--producer.config`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import trio
from tqdm import tqdm

from client.connection import unwrap_single
from client.producer import Producer
from minikafka_cli.common import add_connection_arguments, key_values, open_cluster, run_trio
from minikafka_cli.line_reader import PROPERTIES, LineError, LineReader
from protocol import record_batch as rb
from protocol.errors import ErrorCode

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
READ_CHUNK = 65536  # bytes asked of one read(2) of the input
UNKNOWN_TOPIC_ATTEMPTS = 3  # Metadata answers of UNKNOWN_TOPIC_OR_PARTITION before a topic counts as missing
#: `--producer-property` keys (Kafka's producer configs) and the option each one sets
PRODUCER_PROPERTIES = {
    "acks": "acks",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "compression.type": "compression",
    "enable.idempotence": "idempotence",
    "max.in.flight.requests.per.connection": "max_in_flight",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser, config_alias="--producer.config")
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument("--file", type=argparse.FileType("rb"), help="read records from this file (default: stdin)")
    parser.add_argument("--partition", type=int, help="send every record to this partition (default: the partitioner)")
    parser.add_argument(
        "--key-separator",
        metavar="SEP",
        help="each line is KEY SEP VALUE (the same as --property parse.key=true --property key.separator=SEP)",
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how lines are read, as Kafka's console producer: " + ", ".join(PROPERTIES) + " (repeatable)",
    )
    parser.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer config: " + ", ".join(PRODUCER_PROPERTIES) + " (repeatable)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add this header to every record (repeatable)",
    )
    parser.add_argument(
        "--acks", "--request-required-acks", choices=sorted(ACKS), default="all", help="0, 1 or all (default all)"
    )
    parser.add_argument(
        "--compression",
        "--compression-codec",
        choices=sorted(rb.CODECS),
        default="none",
        help="the batches' codec (default none)",
    )
    parser.add_argument(
        "--linger-ms", "--timeout", type=int, default=5, help="wait this long (ms) to fill a batch (default 5)"
    )
    parser.add_argument("--batch-size", type=int, default=16384, help="bytes per batch (default 16384)")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=5,
        choices=range(1, 6),
        metavar="1..5",
        help="batches in flight per partition (default 5)",
    )
    parser.add_argument(
        "--no-idempotence", action="store_true", help="do not use an idempotent producer (retries may then duplicate)"
    )


@dataclass
class Settings:
    """What the command line asks for, checked before anything is sent."""

    acks: int
    idempotent: bool
    linger_ms: int
    batch_size: int
    compression: int
    max_in_flight: int
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    reader: LineReader = field(default_factory=LineReader)
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"--producer-property {key}={value}: not a number") from None


def settings_from(args: argparse.Namespace) -> Settings:
    """The options and Kafka-style properties as one `Settings`; raises ValueError (exit 2)."""
    settings = Settings(
        acks=ACKS[args.acks],
        idempotent=not args.no_idempotence,
        linger_ms=args.linger_ms,
        batch_size=args.batch_size,
        compression=rb.CODECS[args.compression],
        max_in_flight=args.max_in_flight,
    )
    explicit_idempotence = False
    for key, value in key_values(args.producer_property, "--producer-property").items():
        if key not in PRODUCER_PROPERTIES:
            raise ValueError(f"unknown --producer-property {key} (known: {', '.join(PRODUCER_PROPERTIES)})")
        if key == "acks":
            if value not in ACKS:
                raise ValueError(f"--producer-property acks={value}: expected all, -1, 0 or 1")
            settings.acks = ACKS[value]
        elif key == "compression.type":
            if value not in rb.CODECS:
                raise ValueError(f"--producer-property compression.type={value}: expected {', '.join(rb.CODECS)}")
            settings.compression = rb.CODECS[value]
        elif key == "enable.idempotence":
            if value.lower() not in ("true", "false"):
                raise ValueError(f"--producer-property enable.idempotence={value}: expected true or false")
            settings.idempotent = value.lower() == "true"
            explicit_idempotence = settings.idempotent
        else:
            setattr(settings, PRODUCER_PROPERTIES[key], _int(key, value))
    if settings.idempotent and settings.acks != -1:
        # Kafka's producer: idempotence is on by default only with acks=all; asked for explicitly
        # with acks 0 or 1 it is a configuration error
        if explicit_idempotence:
            raise ValueError("enable.idempotence=true needs acks=all (an idempotent producer waits for all replicas)")
        settings.idempotent = False
    if not 1 <= settings.max_in_flight <= 5:
        raise ValueError("max.in.flight.requests.per.connection must be 1..5")
    props = key_values(args.property, "--property")
    if args.key_separator is not None:
        props.setdefault("parse.key", "true")
        props.setdefault("key.separator", args.key_separator)
    settings.reader = LineReader.from_properties(props)
    for item in args.header:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--header {item} is not KEY=VALUE")
        settings.headers.append((key, value.encode()))
    return settings


async def read_lines(fd: int) -> AsyncIterator[bytes]:
    """The lines of `fd` (without their end of line) as they arrive: each read(2) runs in a worker
    thread, so a terminal's line is yielded as soon as it is typed and the event loop never
    blocks. The thread is abandoned when the caller is cancelled (Ctrl-C). At a terminal, ">" is
    written to stderr before each read, as Kafka's console producer prompts."""
    pending, prompt = b"", os.isatty(fd)
    while True:
        if prompt:  # Kafka's console producer prompts for each line typed at a terminal
            sys.stderr.write(">")
            sys.stderr.flush()
        chunk = await trio.to_thread.run_sync(os.read, fd, READ_CHUNK, abandon_on_cancel=True)
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if pending:
        yield pending[:-1] if pending.endswith(b"\r") else pending


async def partition_count(cluster, topic: str, partition: int | None) -> int:
    """The topic's partition count, asked as a producer asks (a broker with
    auto.create.topics.enable creates it on first use). Raises ValueError within about a second
    for a topic the brokers say does not exist and will not create (asked `UNKNOWN_TOPIC_ATTEMPTS`
    times: a topic just created may not be in every broker's metadata yet) or for a partition
    outside [0, count)."""
    for attempt in range(UNKNOWN_TOPIC_ATTEMPTS):
        metadata = await cluster.refresh_metadata([topic], auto_create=True)
        if metadata.topic_errors.get(topic) != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            break
        await trio.sleep(0.25 * (attempt + 1))
    else:
        raise ValueError(
            f"topic {topic} does not exist and the brokers do not create topics on first use "
            "(auto.create.topics.enable=false): create it with 'minikafka topics create'"
        )
    count = len(await cluster.partitions(topic, auto_create=True))  # retries while it is being created
    if partition is not None and not 0 <= partition < count:
        raise ValueError(f"partition {partition} of topic {topic} does not exist: it has {count} (0..{count - 1})")
    return count


@dataclass
class Outcome:
    ok: int = 0
    failed: int = 0
    interrupted: bool = False
    stopped_by: str | None = None  # the line error that ended the input
    errors: list[str] = field(default_factory=list)


async def _interrupts(sigint, reading: trio.CancelScope, everything: trio.CancelScope, outcome: Outcome) -> None:
    """The first Ctrl-C stops reading (what was read is still flushed); the second stops waiting."""
    async for _ in sigint:
        if outcome.interrupted:
            everything.cancel()
            return
        outcome.interrupted = True
        reading.cancel()


async def _send_lines(
    producer, fd: int, args, settings: Settings, outcome: Outcome, deliveries: list, progress
) -> None:
    """Send each line of `fd` as it is read, its Delivery appended to `deliveries`, until the end
    of the input or a line the reader refuses (`outcome.stopped_by`)."""
    number = 0
    async for line in read_lines(fd):
        number += 1
        try:
            key, value, headers = settings.reader.parse(number, line)
        except LineError as e:
            outcome.stopped_by = str(e)
            return
        delivery = await producer.send(
            args.topic, value, key=key, headers=headers + settings.headers, partition=args.partition
        )
        deliveries.append(delivery)
        progress.update(1)


async def produce(args: argparse.Namespace, settings: Settings, sigint=None) -> Outcome:
    """Read, send and count (see the module docstring). `sigint`: a signal receiver for SIGINT."""
    outcome = Outcome()
    stream = args.file or sys.stdin.buffer
    progress = tqdm(unit=" records", disable=args.file is None or not sys.stderr.isatty(), file=sys.stderr)
    deliveries = []
    reading, everything = trio.CancelScope(), trio.CancelScope()
    with unwrap_single():  # an error of the block below is raised as itself, not in a group
        async with trio.open_nursery() as watchers:
            if sigint is not None:
                watchers.start_soon(_interrupts, sigint, reading, everything, outcome)
            with everything:
                async with open_cluster(args) as cluster:
                    await partition_count(cluster, args.topic, args.partition)
                    async with Producer.open(
                        cluster,
                        acks=settings.acks,
                        idempotent=settings.idempotent,
                        max_in_flight=settings.max_in_flight,
                        linger_ms=settings.linger_ms,
                        batch_size=settings.batch_size,
                        compression=settings.compression,
                        request_timeout_ms=settings.request_timeout_ms,
                        delivery_timeout_ms=settings.delivery_timeout_ms,
                    ) as producer:
                        with reading:
                            await _send_lines(producer, stream.fileno(), args, settings, outcome, deliveries, progress)
                        await producer.flush()
            watchers.cancel_scope.cancel()
    progress.close()
    for delivery in deliveries:
        if delivery.error is None and delivery.done:
            outcome.ok += 1
        else:
            outcome.failed += 1
            if delivery.error is not None and len(outcome.errors) < 3:
                outcome.errors.append(str(delivery.error))
    return outcome


async def _produce_with_interrupts(args: argparse.Namespace, settings: Settings) -> Outcome:
    with trio.open_signal_receiver(signal.SIGINT) as sigint:
        return await produce(args, settings, sigint)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except ValueError as e:
        print(f"minikafka produce: {e}", file=sys.stderr)
        return 2
    status, outcome = run_trio("produce", _produce_with_interrupts, args, settings)
    if status:
        return status
    for error in outcome.errors:
        print(f"minikafka produce: a record failed: {error}", file=sys.stderr)
    if outcome.stopped_by:
        print(f"minikafka produce: {outcome.stopped_by}", file=sys.stderr)
    print(f"{outcome.ok} records acknowledged" + (f", {outcome.failed} failed" if outcome.failed else ""))
    if outcome.interrupted:
        return 130
    return 1 if outcome.failed or outcome.stopped_by else 0
